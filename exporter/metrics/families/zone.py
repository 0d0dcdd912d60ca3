"""Per (Service, address type) and zone: the controller's allocation of hinted endpoints
and the load each zone's endpoints get.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from exporter.engine import OVERLOAD_LIMIT, OVERLOAD_THRESHOLD
from exporter.metrics.family import GAUGE, Declarations, Sample, Scope, ServiceEntry, each_entry

_declare = Declarations()

# How the overload guard reads in help texts: "20%" and "1.2".
_OVERLOAD_SHARE = f"{OVERLOAD_THRESHOLD:.0%}"
_OVERLOAD_LIMIT = f"{OVERLOAD_LIMIT:g}"


def _zone_allocation(field: str) -> Callable[[ServiceEntry], Iterator[Sample]]:
    def samples(entry: ServiceEntry) -> Iterator[Sample]:
        for zone, verdict in entry.verdict.zones.items():
            value = getattr(verdict, field)
            if value is not None:
                yield (zone,), float(value)

    return samples


def _zone_endpoints(entry: ServiceEntry) -> Iterator[Sample]:
    zone_endpoints = entry.verdict.zone_endpoints
    for zone in sorted(entry.verdict.zones.keys() | zone_endpoints.keys()):
        yield (zone,), float(zone_endpoints.get(zone, 0))


def _zone_load_factor(entry: ServiceEntry) -> Iterator[Sample]:
    for zone, verdict in entry.verdict.zones.items():
        if verdict.load_factor is not None:
            yield (zone,), verdict.load_factor


ZONE_ALLOCATION_MINIMUM = _declare(
    "zone_allocation_minimum",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Fewest endpoints the controller must hint for the zone to keep it within "
    f"{_OVERLOAD_SHARE} of its share (auto, enabled).",
    each_entry(_zone_allocation("minimum"), parts=("zones",)),
    labels=("zone",),
)
ZONE_ALLOCATION_DESIRED = _declare(
    "zone_allocation_desired",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Endpoints the zone deserves by its CPU share (auto, enabled).",
    each_entry(_zone_allocation("desired"), parts=("zones",)),
    labels=("zone",),
)
ZONE_ALLOCATION_MAXIMUM = _declare(
    "zone_allocation_maximum",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Most endpoints the controller may hint for the zone (auto, enabled).",
    each_entry(_zone_allocation("maximum"), parts=("zones",)),
    labels=("zone",),
)
ZONE_HINTED_ENDPOINTS = _declare(
    "zone_hinted_endpoints",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready endpoints hinted for the zone.",
    each_entry(
        lambda entry: (
            ((zone,), float(verdict.hinted)) for zone, verdict in entry.verdict.zones.items()
        ),
        # Zones in their order with their hinted count; not the ratios a CPU change moves.
        inputs=lambda entry: [
            (zone, verdict.hinted) for zone, verdict in entry.verdict.zones.items()
        ],
        parts=("zones",),
    ),
    labels=("zone",),
)
ZONE_ENDPOINTS = _declare(
    "zone_endpoints",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready endpoints running in the zone (counted like N).",
    each_entry(
        _zone_endpoints,
        inputs=lambda entry: (tuple(entry.verdict.zones), entry.verdict.zone_endpoints),
        parts=("zones", "zone_endpoints"),
    ),
    labels=("zone",),
)
ZONE_LOAD_FACTOR = _declare(
    "zone_load_factor",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Traffic one endpoint hinted for the zone receives relative to its fair share, "
    f"when traffic follows CPU (1 is fair; auto keeps it at or under {_OVERLOAD_LIMIT}).",
    each_entry(_zone_load_factor, parts=("zones",)),
    labels=("zone",),
)


FAMILIES = _declare.families
