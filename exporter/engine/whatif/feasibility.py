"""Feasibility, endpoint margins and rollout ranges of `auto` Services (behaviour section 11).

Feasibility of an `auto` Service depends only on (zone ratios, N), so `Feasibility`
memoises it per set of ratios: margins and zone loss for thousands of Services share
the few counts they ask about.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from exporter.engine.allocation import NearestFeasible, ratio_groups, refusal_reason
from exporter.engine.capacity import ClusterCapacity
from exporter.engine.evaluate import EntryVerdict, ExpectedState
from exporter.engine.mechanism import Mechanism
from exporter.engine.reasons import DisableReason

# Above this many endpoints per zone every count is feasible: the minimums sum to at most
# N/1.2 + zones, which is N or less once N >= 6 x zones.
ALWAYS_FEASIBLE_PER_ZONE = 6


class Feasibility:
    """Checks 1-4 of the allocation for one set of zone ratios, memoised per count.

    The memo is a value, not a global: it lives as long as the capacity it was made for.
    """

    __slots__ = ("_capacity", "_groups", "_margins", "_memo")

    def __init__(self, capacity: ClusterCapacity) -> None:
        self._capacity = capacity
        self._groups = ratio_groups(capacity)
        self._memo: dict[int, DisableReason | None] = {}
        # Margins depend on the count alone too: Services of one size share one.
        self._margins: dict[int, Margin] = {}

    @property
    def capacity(self) -> ClusterCapacity:
        return self._capacity

    def reason(self, endpoints: int) -> DisableReason | None:
        try:
            return self._memo[endpoints]
        except KeyError:
            reason = refusal_reason(self._capacity, endpoints, self._groups)
            self._memo[endpoints] = reason
            return reason

    def feasible(self, endpoints: int) -> bool:
        return self.reason(endpoints) is None

    def margin(self, count: int) -> Margin:
        """The endpoint margin of an enabled `auto` entry with `count` ready endpoints."""
        try:
            return self._margins[count]
        except KeyError:
            pass
        down = 0
        while count - down - 1 >= 0 and self.feasible(count - down - 1):
            down += 1
        up: float = math.inf
        for candidate in range(count + 1, self.always_feasible_from() + 1):
            if not self.feasible(candidate):
                up = candidate - 1 - count
                break
        margin = self._margins[count] = Margin(down=down, up=up)
        return margin

    def always_feasible_from(self) -> int:
        return ALWAYS_FEASIBLE_PER_ZONE * len(self._capacity.zone_ratios)

    def nearest(self, endpoints: int) -> NearestFeasible:
        """The same answer as allocation.nearest_feasible, through the memo."""
        if not self._capacity.sufficient:
            return NearestFeasible(None, None)
        below = next((n for n in range(endpoints - 1, 0, -1) if self.feasible(n)), None)
        above = next(
            (n for n in range(endpoints + 1, 10 * endpoints + 11) if self.feasible(n)), None
        )
        return NearestFeasible(below, above)


@dataclass(frozen=True, slots=True)
class Margin:
    """How many endpoints may go (down) or come (up), one at a time, before hints drop."""

    down: int
    # math.inf when no refused count lies above today's.
    up: float


def endpoint_margin(verdict: EntryVerdict, feasibility: Feasibility) -> Margin | None:
    """Only an `auto` Service whose hints are enabled has a margin."""
    if verdict.mechanism is not Mechanism.AUTO or verdict.expected_state is not (
        ExpectedState.ENABLED
    ):
        return None
    return feasibility.margin(verdict.ready_endpoints)


def every_counted_endpoint_has_zone(verdict: EntryVerdict) -> bool:
    return sum(verdict.zone_endpoints.values()) == verdict.ready_endpoints


def rollout_refused_counts(
    verdict: EntryVerdict, feasibility: Feasibility, max_surge: int, max_unavailable: int
) -> tuple[int, ...]:
    """The ready counts from N-U to N+S whose expected state is disabled."""
    if verdict.mechanism is not Mechanism.AUTO:
        # traffic-distribution never refuses by count; `none` has nothing to refuse.
        return ()
    count = verdict.ready_endpoints
    zoned = every_counted_endpoint_has_zone(verdict)
    return tuple(
        n
        for n in range(max(count - max_unavailable, 0), count + max_surge + 1)
        if not feasibility.feasible(n) or not zoned
    )
