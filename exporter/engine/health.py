"""behaviour §6: figures that tell whether the hints in place are healthy."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum

from exporter.engine.allocation import Allocation
from exporter.engine.mechanism import Mechanism
from exporter.engine.model import Endpoint


class DriftKind(StrEnum):
    """A way the hints in place disagree with what the controller should have written."""

    HINTS_MISSING = "hints-missing"
    UNEXPECTED_HINTS = "unexpected-hints"
    ZONE_OUT_OF_RANGE = "zone-out-of-range"


def hint_completeness(ready: int, hinted: int) -> float | None:
    """Strictly between 0 and 1 means kube-proxy ignores every hint of the Service."""
    if ready == 0:
        return None
    return hinted / ready


def load_factor(ratio: float | None, ready: int, hinted_for_zone: int) -> float | None:
    """Traffic one endpoint hinted for the zone gets, relative to its fair share."""
    if ratio is None or hinted_for_zone == 0:
        return None
    return ratio * ready / hinted_for_zone


def drift_kinds(
    mechanism: Mechanism,
    *,
    hints_expected: bool,
    counted: Collection[Endpoint],
    allocations: Mapping[str, Allocation],
    hinted_by_zone: Mapping[str, int],
    empty_zone_hints: bool = False,
) -> frozenset[DriftKind]:
    """How observed hints disagree with the expected result (the controller may just lag).

    `empty_zone_hints`: the controller (1.30-1.32, PreferClose) also hints a ready endpoint
    without a zone, for zone "" (behaviour §12).
    """
    if mechanism is Mechanism.TRAFFIC_DISTRIBUTION:
        missing = any(
            _expected_zone(endpoint, empty_zone_hints=empty_zone_hints)
            not in (None, *endpoint.zone_hints)
            for endpoint in counted
        )
        return frozenset({DriftKind.HINTS_MISSING}) if missing else frozenset()
    return counted_drift_kinds(
        mechanism,
        hints_expected=hints_expected,
        ready=len(counted),
        hinted=sum(1 for endpoint in counted if endpoint.zone_hints),
        allocations=allocations,
        hinted_by_zone=hinted_by_zone,
    )


def _expected_zone(endpoint: Endpoint, *, empty_zone_hints: bool) -> str | None:
    """The zone the controller hints a ready endpoint for under trafficDistribution."""
    if endpoint.zone is not None:
        return endpoint.zone
    return "" if empty_zone_hints else None


def counted_drift_kinds(
    mechanism: Mechanism,
    *,
    hints_expected: bool,
    ready: int,
    hinted: int,
    allocations: Mapping[str, Allocation],
    hinted_by_zone: Mapping[str, int],
) -> frozenset[DriftKind]:
    """drift_kinds of any mechanism but traffic-distribution, from counts alone: `hinted` of
    the `ready` counted endpoints carry a zone hint. A capacity change re-judges from these."""
    kinds: set[DriftKind] = set()
    if mechanism is Mechanism.AUTO and hints_expected:
        if hinted < ready:
            kinds.add(DriftKind.HINTS_MISSING)
        if any(
            not allocation.minimum <= hinted_by_zone.get(zone, 0) <= allocation.maximum
            for zone, allocation in allocations.items()
        ):
            kinds.add(DriftKind.ZONE_OUT_OF_RANGE)
    elif hinted:
        # auto refused, or no mechanism at all: the controller removes every hint.
        kinds.add(DriftKind.UNEXPECTED_HINTS)
    return frozenset(kinds)
