"""behaviour §3: where the controller's `auto` hints settle when a ready endpoint runs in a
zone that has no allocation.

The allocation names the zones of Ready worker nodes with CPU (section 2). An endpoint can
run elsewhere: on a control-plane node, or on a node that is not Ready, whose zone no Ready
worker shares. The controller does not refuse then. It hints every ready endpoint for its
own zone and moves hints only between zones that have an allocation
(k8s.io/endpointslice topologycache: `AddHints`, `getGivingAndReceivingZones`,
`redistributeHints`), so the endpoints of the other zone keep a hint for it, and the zones
with an allocation share what is left: some end below their minimum, and stay there. These
are the counts the controller settles on, not a lag.

The controller's arithmetic, in its order: each zone's gap is `hinted - desired` (float64),
and a hint moves, one at a time, from the zone with the largest surplus to the zone with the
largest deficit, the moved zone's figure decreasing by 1 each time, for as long as both
figures are at least 0.5 and not both below 1. Equal figures are taken in Go's map order,
which is random: a zone tied at the last move may or may not make it, hence a range.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType

from exporter.engine.allocation import Allocation

# The controller stops moving hints below these (getGivingAndReceivingZones).
_HALF = 0.5
_ONE = 1.0


def _figures(start: float) -> Iterator[float]:
    """A zone's figure each time it is the one picked (Go's `x--` on a float64)."""
    figure = start
    while figure >= _HALF:
        yield figure
        figure -= _ONE


def _moves(giving: list[float], receiving: list[float]) -> int:
    """How many hints move: both lists hold every figure in pick order (largest first)."""
    moves = 0
    while True:
        give = giving[moves] if moves < len(giving) else 0.0
        receive = receiving[moves] if moves < len(receiving) else 0.0
        if give < _HALF or receive < _HALF or (give < _ONE and receive < _ONE):
            return moves
        moves += 1


def _picks(gaps: Mapping[str, float], moves: int) -> dict[str, tuple[int, int]]:
    """How often each zone is picked in `moves` greedy picks, as (fewest, most)."""
    if moves == 0:
        return dict.fromkeys(gaps, (0, 0))
    figures = sorted((figure for gap in gaps.values() for figure in _figures(gap)), reverse=True)
    cut = figures[moves - 1]
    sure = {zone: sum(1 for figure in _figures(gap) if figure > cut) for zone, gap in gaps.items()}
    tied = {zone for zone, gap in gaps.items() if cut in _figures(gap)}
    extra = moves - sum(sure.values())
    return {
        zone: (
            sure[zone] + (1 if zone in tied and extra == len(tied) else 0),
            sure[zone] + (1 if zone in tied and extra > 0 else 0),
        )
        for zone in gaps
    }


def settled_hints(
    allocations: Mapping[str, Allocation], located: Mapping[str, int]
) -> Mapping[str, tuple[int, int]]:
    """Per zone, the fewest and most endpoints the controller leaves hinted for it.

    `allocations`: the enabled allocation; `located`: ready endpoints per zone they run in,
    every one with a zone (else the controller refuses: NoZoneSpecified). A zone without
    allocation keeps exactly its own endpoints.
    """
    gaps = {zone: float(located.get(zone, 0)) - a.desired for zone, a in allocations.items()}
    giving = {zone: gap for zone, gap in gaps.items() if gap > 0}
    receiving = {zone: -gap for zone, gap in gaps.items() if gap < 0}
    moves = _moves(
        sorted((f for gap in giving.values() for f in _figures(gap)), reverse=True),
        sorted((f for gap in receiving.values() for f in _figures(gap)), reverse=True),
    )
    given, received = _picks(giving, moves), _picks(receiving, moves)
    settled: dict[str, tuple[int, int]] = {}
    for zone in allocations:
        count = located.get(zone, 0)
        fewest_given, most_given = given.get(zone, (0, 0))
        fewest_received, most_received = received.get(zone, (0, 0))
        settled[zone] = (count - most_given + fewest_received, count - fewest_given + most_received)
    for zone, count in located.items():
        if zone not in allocations:
            settled[zone] = (count, count)
    return MappingProxyType(settled)


def strands_endpoints(allocations: Mapping[str, Allocation], located: Mapping[str, int]) -> bool:
    """A ready endpoint runs in a zone without allocation (its hint can never move)."""
    return any(count and zone not in allocations for zone, count in located.items())
