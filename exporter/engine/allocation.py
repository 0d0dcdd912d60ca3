"""behaviour §3: the controller's hint allocation for `auto` Services.

The arithmetic is float64 in the controller's order on purpose: exact arithmetic
gives different ceilings at boundaries (ratios 0.4/0.6 with N = 3).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from exporter.engine.capacity import ClusterCapacity
from exporter.engine.reasons import DisableReason

# The controller keeps every zone within 20% above its fair share of endpoints...
OVERLOAD_THRESHOLD = 0.2
# ...so one hinted endpoint receives at most 1.2 times its fair share of traffic. Help texts,
# alerts, dashboards and explanations derive the figure they show from these two.
OVERLOAD_LIMIT = 1 + OVERLOAD_THRESHOLD


@dataclass(frozen=True, slots=True)
class Allocation:
    """One zone's share of an entry's endpoints under `auto`: the fewest and most it may be
    hinted, and its CPU-proportional share (never below the minimum)."""

    minimum: int
    desired: float
    maximum: int


@dataclass(frozen=True, slots=True)
class AllocationResult:
    """The controller's allocation for one entry: each zone's, or the reason it refuses to hint
    (then no zone has one)."""

    reason: DisableReason | None
    # Per zone; empty when refused.
    allocations: Mapping[str, Allocation]

    @property
    def enabled(self) -> bool:
        return self.reason is None


@dataclass(frozen=True, slots=True)
class NearestFeasible:
    """The closest endpoint counts below and above today's at which `auto` would hint (None:
    there is none, or node info is insufficient)."""

    below: int | None
    above: int | None


def zone_minimum(ratio: float, endpoints: int) -> int:
    desired = ratio * float(endpoints)
    return math.ceil(desired * (1 / (1 + OVERLOAD_THRESHOLD)))


RatioGroups = tuple[tuple[float, int], ...]


def ratio_groups(capacity: ClusterCapacity) -> RatioGroups:
    """Each distinct zone ratio and how many zones have it.

    Equal ratios give equal minimums, so checks 1-4 cost one step per distinct ratio, not
    per zone: with a zone label per Node of one size, 10,000 zones are one group.
    """
    return tuple(Counter(capacity.zone_ratios.values()).items())


def refusal_reason(
    capacity: ClusterCapacity, endpoints: int, groups: RatioGroups | None = None
) -> DisableReason | None:
    """Checks 1 to 4: those that depend only on the zone ratios and the endpoint count.

    `groups`: `ratio_groups(capacity)`, when the caller keeps them for many counts.
    """
    if not capacity.sufficient:
        return DisableReason.INSUFFICIENT_NODE_INFO
    ratios = capacity.zone_ratios
    if len(ratios) < 2:
        return DisableReason.NODES_READY_IN_ONE_ZONE_ONLY
    if len(ratios) > endpoints:
        return DisableReason.INSUFFICIENT_NUMBER_OF_ENDPOINTS
    if groups is None:
        groups = ratio_groups(capacity)
    # Integers: summed per group, the total is the controller's zone-by-zone sum exactly.
    minimums = sum(zone_minimum(ratio, endpoints) * zones for ratio, zones in groups)
    if minimums > endpoints:
        return DisableReason.MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD
    return None


def allocate(
    capacity: ClusterCapacity, endpoints: int, *, every_endpoint_has_zone: bool
) -> AllocationResult:
    """The full verdict, with check 5 (a ready endpoint without a zone) last."""
    reason = refusal_reason(capacity, endpoints)
    if reason is None and not every_endpoint_has_zone:
        reason = DisableReason.NO_ZONE_SPECIFIED
    if reason is not None:
        return AllocationResult(reason, MappingProxyType({}))
    minimums = {
        zone: zone_minimum(ratio, endpoints) for zone, ratio in capacity.zone_ratios.items()
    }
    spare = endpoints - sum(minimums.values())
    allocations = {
        zone: Allocation(
            minimum=minimum,
            desired=max(ratio * float(endpoints), float(minimum)),
            maximum=minimum + spare,
        )
        for (zone, ratio), minimum in zip(
            capacity.zone_ratios.items(), minimums.values(), strict=True
        )
    }
    return AllocationResult(None, MappingProxyType(allocations))


def nearest_feasible(capacity: ClusterCapacity, endpoints: int) -> NearestFeasible:
    """The closest endpoint counts, below and above today's, that would enable hints.

    Feasibility is not monotonic (3 equal zones: 7 works, 8 does not, 9 does), so this
    searches rather than solves; above is bounded at 10N + 10.
    """
    if not capacity.sufficient:
        return NearestFeasible(None, None)
    below = next(
        (n for n in range(endpoints - 1, 0, -1) if refusal_reason(capacity, n) is None), None
    )
    above = next(
        (
            n
            for n in range(endpoints + 1, 10 * endpoints + 11)
            if refusal_reason(capacity, n) is None
        ),
        None,
    )
    return NearestFeasible(below, above)
