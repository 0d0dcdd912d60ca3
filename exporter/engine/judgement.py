"""The part of an entry's verdict that depends on cluster capacity, memoised per capacity.

A judgement (the controller's decision, its zone figures, the nearest feasible count and
capacity-dependent drift) reads the capacity and a handful of an entry's counts only: the
entries of one node view share them through one `Judgements` (exporter.engine.context).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.allocation import Allocation, NearestFeasible, allocate, nearest_feasible
from exporter.engine.capacity import ClusterCapacity
from exporter.engine.health import DriftKind, counted_drift_kinds, load_factor
from exporter.engine.mechanism import Mechanism
from exporter.engine.reasons import DisableReason
from exporter.engine.redistribution import settled_hints


class ExpectedState(StrEnum):
    """Whether the EndpointSlice controller should be writing hints for an entry; not-applicable
    when the Service asks for none."""

    ENABLED = "enabled"
    DISABLED = "disabled"
    NOT_APPLICABLE = "not-applicable"


@dataclass(frozen=True, slots=True)
class ZoneVerdict:
    """One zone of an entry: its CPU ratio, the endpoints `auto` should allot it, the endpoints
    hinted for it, and the load that puts on it."""

    ratio: float | None
    # Set only for `auto` when enabled.
    minimum: int | None
    desired: float | None
    maximum: int | None
    # Counted endpoints hinted for this zone.
    hinted: int
    load_factor: float | None


def expected_state(mechanism: Mechanism, reason: DisableReason | None) -> ExpectedState:
    if mechanism is Mechanism.NONE:
        return ExpectedState.NOT_APPLICABLE
    if reason is not None:
        return ExpectedState.DISABLED
    return ExpectedState.ENABLED


@dataclass(frozen=True, slots=True)
class Judgement:
    """The part of an entry's verdict that depends on cluster capacity."""

    reason: DisableReason | None
    expected_state: ExpectedState
    zones: Mapping[str, ZoneVerdict]
    nearest_feasible: NearestFeasible | None
    # None where drift does not depend on capacity (traffic-distribution).
    drift: frozenset[DriftKind] | None


# (mechanism, ready, hinted, every ready endpoint has a zone, hinted endpoints per zone)
_JudgementKey = tuple[Mechanism, int, int, bool, tuple[tuple[str, int], ...]]


class Judgements:
    """The judgements of one cluster capacity, memoised per entry's counts.

    A judgement depends only on the capacity and (mechanism, ready count, hinted count,
    whether every ready endpoint has a zone, hinted endpoints per zone): Services of one
    shape share one allocation, one nearest-feasible search and one set of zone figures.
    Like whatif.Feasibility, the memo is a value that lives as long as its capacity.
    """

    __slots__ = ("_capacity", "_memo", "_settled")

    def __init__(self, capacity: ClusterCapacity) -> None:
        self._capacity = capacity
        self._memo: dict[_JudgementKey, Judgement] = {}
        # Judgements re-read where the controller settles (rare: see _where_hints_settle).
        self._settled: dict[tuple[_JudgementKey, tuple[tuple[str, int], ...]], Judgement] = {}

    def __len__(self) -> int:
        """How many judgements were made (each is kept): one per shape judged."""
        return len(self._memo)

    @property
    def capacity(self) -> ClusterCapacity:
        return self._capacity

    def judge(
        self,
        mechanism: Mechanism,
        *,
        ready: int,
        hinted: int,
        every_endpoint_has_zone: bool,
        hinted_by_zone: Mapping[str, int],
        zone_endpoints: Mapping[str, int] | None = None,
    ) -> Judgement:
        """`zone_endpoints`: the counted endpoints per zone they run in, which say where the
        controller's own redistribution leaves the hints (behaviour §3)."""
        # Hints for the empty zone name never count: no zone of the capacity is named "".
        hinted_zones = tuple(sorted((zone, n) for zone, n in hinted_by_zone.items() if zone and n))
        key = (mechanism, ready, hinted, every_endpoint_has_zone, hinted_zones)
        judgement = self._memo.get(key)
        if judgement is None:
            judgement = self._memo[key] = self._judge(
                mechanism, ready, hinted, every_endpoint_has_zone, dict(hinted_zones)
            )
        if zone_endpoints and judgement.drift and DriftKind.ZONE_OUT_OF_RANGE in judgement.drift:
            return self._where_hints_settle(judgement, key, zone_endpoints)
        return judgement

    def _where_hints_settle(
        self, judgement: Judgement, key: _JudgementKey, zone_endpoints: Mapping[str, int]
    ) -> Judgement:
        """No zone-out-of-range where the counts are those the controller settles on.

        Its redistribution can leave a zone below its minimum for good (a zone's figure
        under 0.5 gives nothing; endpoints of a zone without allocation never move): that
        is the controller's result, not a lag (exporter.engine.redistribution).
        """
        located = tuple(sorted((zone, n) for zone, n in zone_endpoints.items() if n))
        memo_key = (key, located)
        found = self._settled.get(memo_key)
        if found is not None:
            return found
        allocations = {
            zone: Allocation(verdict.minimum, verdict.desired, verdict.maximum)
            for zone, verdict in judgement.zones.items()
            if verdict.minimum is not None
            and verdict.desired is not None
            and verdict.maximum is not None
        }
        ranges = settled_hints(allocations, dict(located))
        hinted = dict(key[4])
        settled = set(hinted) <= set(ranges) and all(
            fewest <= hinted.get(zone, 0) <= most for zone, (fewest, most) in ranges.items()
        )
        drift = judgement.drift or frozenset()
        found = self._settled[memo_key] = (
            dataclasses.replace(judgement, drift=drift - {DriftKind.ZONE_OUT_OF_RANGE})
            if settled
            else judgement
        )
        return found

    def _judge(
        self,
        mechanism: Mechanism,
        ready: int,
        hinted: int,
        every_endpoint_has_zone: bool,  # noqa: FBT001 - a private helper of judge()
        hinted_by_zone: Mapping[str, int],
    ) -> Judgement:
        capacity = self._capacity
        reason: DisableReason | None = None
        allocations: Mapping[str, Allocation] = {}
        nearest: NearestFeasible | None = None
        if mechanism is Mechanism.AUTO:
            result = allocate(capacity, ready, every_endpoint_has_zone=every_endpoint_has_zone)
            reason, allocations = result.reason, result.allocations
            nearest = nearest_feasible(capacity, ready)
        state = expected_state(mechanism, reason)
        zones = {}
        for zone in sorted(set(capacity.zone_ratios) | set(hinted_by_zone)):
            ratio = capacity.zone_ratios.get(zone)
            allocation = allocations.get(zone)
            hinted_for_zone = hinted_by_zone.get(zone, 0)
            zones[zone] = ZoneVerdict(
                ratio=ratio,
                minimum=allocation.minimum if allocation else None,
                desired=allocation.desired if allocation else None,
                maximum=allocation.maximum if allocation else None,
                hinted=hinted_for_zone,
                load_factor=load_factor(ratio, ready, hinted_for_zone),
            )
        drift = (
            None
            if mechanism is Mechanism.TRAFFIC_DISTRIBUTION
            else counted_drift_kinds(
                mechanism,
                hints_expected=state is ExpectedState.ENABLED,
                ready=ready,
                hinted=hinted,
                allocations=allocations,
                hinted_by_zone=hinted_by_zone,
            )
        )
        return Judgement(reason, state, MappingProxyType(zones), nearest, drift)
