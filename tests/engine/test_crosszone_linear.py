"""behaviour §13 at scale: one Service's cross-zone shares cost zones plus endpoints (issue 30, 8).

Each zone's clients used to count the endpoints outside their zone one by one, so a `cluster`
routing (every zone given all of R) cost zones x endpoints: 3,000 zones and 30,000 endpoints
took 7 s. The endpoints of a set are now counted per zone once; the shares are the same,
bit for bit (the conformance vectors and tests/engine/test_crosszone.py hold them too).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.engine import DataPlane, Endpoint
from exporter.engine.clientsets import Given
from exporter.engine.crosszone import Clients, _Crossings, cross_zones
from exporter.engine.routing import Routing, service_endpoints
from tests.engine.builders import endpoint, endpoint_slice, equal_zones, service
from tests.results import result_of


def _before(endpoints: Sequence[Endpoint], zone: str) -> float | None:
    """`_crossing` as it was: the reference the new counting must equal."""
    if not endpoints:
        return None
    return sum(1 for e in endpoints if e.zone != zone) / len(endpoints)


_ZONES = st.sampled_from([None, "", "a", "b", "c", "zone-1", "zone-2"])


@settings(max_examples=300, deadline=None)
@given(
    sets=st.lists(st.lists(_ZONES, max_size=30), min_size=1, max_size=4),
    asked=st.lists(
        st.tuples(st.integers(min_value=0, max_value=3), st.sampled_from(["a", "b", "c", "d"])),
        max_size=40,
    ),
)
def test_counting_once_gives_what_counting_each_time_gave(
    sets: list[list[str | None]], asked: list[tuple[int, str]]
) -> None:
    """Any sets, asked about any zones in any order, the same set many times: equal."""
    endpoint_sets = [tuple(endpoint(zone) for zone in zones) for zones in sets]
    crossing = _Crossings()
    for index, zone in asked:
        endpoints = endpoint_sets[index % len(endpoint_sets)]
        assert crossing(endpoints, zone) == _before(endpoints, zone)


class _Counted(Sequence[Endpoint]):
    """An endpoint set that counts how often it is walked."""

    def __init__(self, inner: Sequence[Endpoint]) -> None:
        self._inner = inner
        self.walks = 0

    def __iter__(self) -> Iterator[Endpoint]:
        self.walks += 1
        return iter(self._inner)

    def __len__(self) -> int:
        return len(self._inner)

    @overload
    def __getitem__(self, index: int) -> Endpoint: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Endpoint]: ...
    def __getitem__(self, index: int | slice) -> Endpoint | Sequence[Endpoint]:
        return self._inner[index]


def test_a_cluster_routing_walks_its_endpoints_once_not_once_per_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cilium without topology routes every zone `cluster`: 300 zones, one walk of R."""
    zones = 300
    nodes = equal_zones(zones)
    svc = service(mode="Auto")
    slices = [endpoint_slice(*(endpoint(f"zone-{i % zones}") for i in range(3 * zones)))]
    plane = DataPlane.CILIUM_NO_TOPOLOGY
    routing = result_of(nodes, [svc], slices, [plane]).verdicts()[0].routing[plane]
    assert {view.routing for view in routing.by_zone.values()} == {Routing.CLUSTER}
    counted: dict[int, _Counted] = {}
    original = Given.endpoints

    def endpoints(self: Given, *args: Any) -> Sequence[Endpoint]:
        found = original(self, *args)
        return counted.setdefault(id(found), _Counted(found))

    monkeypatch.setattr(Given, "endpoints", endpoints)
    entry = service_endpoints(svc, "IPv4", slices)
    figures = cross_zones({plane: routing}, entry, Clients.of(nodes))[plane]
    assert figures is not None
    assert figures.effective == pytest.approx((zones - 1) / zones)
    assert [c.walks for c in counted.values()] == [1]
