"""Endpoints are decoded straight into the engine's Endpoint, which behaves as if built by hand.

The decoder fills each Endpoint's slots without running the dataclass's __init__ (see
`exporter.sources.decode._endpoints`); these tests hold that nothing observable differs: the type,
every field, equality, hashing, immutability, `dataclasses.replace`, and the bounds with
their one-line errors, on every path (LIST pages, watch events, snapshot JSON and YAML).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.engine import Endpoint, EndpointSlice
from exporter.sources import decode
from exporter.sources.decode import (
    MAX_NAME,
    InvalidObjectError,
    JsonDecoder,
    ListPage,
    ObjectDecoder,
    RawEndpointSlice,
    decode_endpoint_slice,
    endpoint_slice_from_raw,
)
from exporter.sources.snapshot import parse_snapshot
from exporter.sources.snapshot_input import SnapshotError

# (endpoint JSON, the Endpoint a hand would build from it)
CASES: list[tuple[dict[str, Any], Endpoint]] = [
    (
        {
            "addresses": ["10.0.0.1"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "zone": "zone-a",
            "nodeName": "node-1",
            "hints": {"forZones": [{"name": "zone-a"}]},
            "targetRef": {"kind": "Pod", "name": "pod-1"},
        },
        Endpoint(
            address="10.0.0.1",
            ready=True,
            zone="zone-a",
            node_name="node-1",
            zone_hints=("zone-a",),
            terminating=False,
            serving=True,
        ),
    ),
    ({"addresses": []}, Endpoint(address=None, ready=None, zone=None, node_name=None)),
    (
        {"addresses": ["10.0.0.2", "10.0.0.3"], "conditions": {}},
        Endpoint(address="10.0.0.2", ready=None, zone=None, node_name=None),
    ),
    (
        {
            "addresses": ["fd00::1"],
            "conditions": {"ready": False, "terminating": True},
            "zone": "",
            "hints": {
                "forZones": [{"name": "zone-a"}, {"name": "zone-b"}],
                "forNodes": [{"name": "node-2"}],
            },
        },
        Endpoint(
            address="fd00::1",
            ready=False,
            zone="",
            node_name=None,
            zone_hints=("zone-a", "zone-b"),
            node_hints=("node-2",),
            terminating=True,
        ),
    ),
    (
        {"addresses": ["10.0.0.4"], "hints": {}, "nodeName": "node-3"},
        Endpoint(address="10.0.0.4", ready=None, zone=None, node_name="node-3"),
    ),
    (
        {"addresses": ["10.0.0.5"], "hints": {"forZones": [], "forNodes": None}},
        Endpoint(address="10.0.0.5", ready=None, zone=None, node_name=None),
    ),
]


def _slice(*endpoints: dict[str, Any], name: str = "web-abc") -> dict[str, Any]:
    return {
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "endpoints": list(endpoints),
    }


def _page_slices(*items: dict[str, Any]) -> list[EndpointSlice]:
    body = json.dumps({"metadata": {"resourceVersion": "1"}, "items": list(items)}).encode()
    page = JsonDecoder(ListPage[RawEndpointSlice]).decode(body)
    return [endpoint_slice_from_raw(raw) for raw in page.items or []]


def _decoded_every_way(item: dict[str, Any]) -> list[EndpointSlice]:
    """The same slice through a LIST page, a watch object, snapshot JSON and YAML."""
    data = json.dumps(item).encode()
    snapshot = json.dumps({"kind": "List", "items": [item]}).encode()
    return [
        *_page_slices(item),
        endpoint_slice_from_raw(ObjectDecoder(RawEndpointSlice).decode(data)),
        decode_endpoint_slice(item),
        *parse_snapshot("s.json", snapshot).endpoint_slices,
        # JSON is YAML; a leading comment makes the parser take the YAML path.
        *parse_snapshot("s.yaml", b"# yaml\n" + snapshot).endpoint_slices,
    ]


@pytest.mark.parametrize(("item", "expected"), CASES)
def test_decoded_endpoint_is_the_engines_type_and_equals_a_hand_built_one(
    item: dict[str, Any], expected: Endpoint
) -> None:
    """Every path yields engine Endpoints, equal (and equal in hash) to Endpoint(...)."""
    for endpoint_slice in _decoded_every_way(_slice(item)):
        (endpoint,) = endpoint_slice.endpoints
        assert type(endpoint) is Endpoint
        assert endpoint == expected
        assert hash(endpoint) == hash(expected)
        assert repr(endpoint) == repr(expected)
        for field in dataclasses.fields(Endpoint):
            assert getattr(endpoint, field.name) == getattr(expected, field.name), field.name


def test_decoded_endpoints_are_frozen_and_replaceable() -> None:
    """The dataclass behaviour the engine and its tests rely on is intact."""
    (endpoint_slice,) = _page_slices(_slice(CASES[0][0]))
    endpoint = endpoint_slice.endpoints[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        endpoint.ready = False  # type: ignore[misc]
    moved = dataclasses.replace(endpoint, zone_hints=("zone-b",))
    assert moved.zone_hints == ("zone-b",)
    assert moved != endpoint
    assert dataclasses.replace(moved, zone_hints=("zone-a",)) == endpoint
    assert not hasattr(endpoint, "__dict__")
    assert {endpoint, CASES[0][1]} == {endpoint}


def test_endpoints_hinted_to_one_zone_share_their_names() -> None:
    """One tuple and one string per zone or node name, not one per endpoint."""
    endpoints = [
        {
            "addresses": [f"10.0.1.{number}"],
            "zone": "zone-" + "a",  # a fresh string each time in the JSON
            "nodeName": "node-" + "1",
            "hints": {"forZones": [{"name": "zone-a"}], "forNodes": [{"name": "node-1"}]},
        }
        for number in range(3)
    ]
    (endpoint_slice,) = _page_slices(_slice(*endpoints))
    first, *others = endpoint_slice.endpoints
    for other in others:
        assert other.zone_hints is first.zone_hints
        assert other.node_hints is first.node_hints
        assert other.zone is first.zone
        assert other.node_name is first.node_name


def test_shared_hint_tuples_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names come from the API: the table of shared tuples cannot grow without bound."""
    monkeypatch.setattr(decode, "_ONE_NAME", {})
    monkeypatch.setattr(decode, "_ONE_NAME_LIMIT", 4)
    endpoints = [
        {"addresses": [f"10.0.2.{number}"], "hints": {"forZones": [{"name": f"zone-{number}"}]}}
        for number in range(10)
    ]
    (endpoint_slice,) = _page_slices(_slice(*endpoints))
    assert [endpoint.zone_hints for endpoint in endpoint_slice.endpoints] == [
        (f"zone-{number}",) for number in range(10)
    ]
    assert len(decode._ONE_NAME) <= 4


@pytest.mark.parametrize(
    ("endpoint", "path"),
    [
        ({"addresses": ["x" * (MAX_NAME + 1)]}, "$.endpoints[0].addresses[0]"),
        ({"addresses": ["10.0.0.1"], "zone": "z" * (MAX_NAME + 1)}, "$.endpoints[0].zone"),
        ({"addresses": ["10.0.0.1"], "nodeName": 7}, "$.endpoints[0].nodeName"),
        (
            {"addresses": ["10.0.0.1"], "hints": {"forZones": [{"name": "z" * (MAX_NAME + 1)}]}},
            "$.endpoints[0].hints.forZones[0].name",
        ),
        (
            {"addresses": ["10.0.0.1"], "conditions": {"ready": "yes"}},
            "$.endpoints[0].conditions.ready",
        ),
        ({"zone": "zone-a"}, "addresses"),
    ],
)
def test_a_bad_endpoint_is_one_line_naming_the_slice_and_the_field(
    endpoint: dict[str, Any], path: str
) -> None:
    """Bounds and types still hold, and still fail as one InvalidObjectError line."""
    data = json.dumps(_slice(endpoint)).encode()
    with pytest.raises(InvalidObjectError) as caught:
        ObjectDecoder(RawEndpointSlice).decode(data)
    message = str(caught.value)
    assert message.startswith("EndpointSlice shop/web-abc: ")
    assert path in message
    assert "\n" not in message
    with pytest.raises(SnapshotError) as refused:
        parse_snapshot("s.json", json.dumps({"kind": "List", "items": [_slice(endpoint)]}).encode())
    assert "\n" not in str(refused.value)
    assert path in str(refused.value)


def test_a_bad_endpoint_costs_only_its_slice_in_a_list_page() -> None:
    """The informer's fallback decodes a page item by item: good slices still arrive."""
    good = _slice(CASES[0][0], name="web-good")
    bad = _slice({"addresses": ["x" * (MAX_NAME + 1)]}, name="web-bad")
    body = json.dumps({"metadata": {}, "items": [good, bad]}).encode()
    with pytest.raises(msgspec.ValidationError):
        JsonDecoder(ListPage[RawEndpointSlice]).decode(body)
    loose = JsonDecoder(ListPage[msgspec.Raw]).decode(body)
    decoded, skipped = [], []
    for item in loose.items or []:
        try:
            decoded.append(endpoint_slice_from_raw(ObjectDecoder(RawEndpointSlice).decode(item)))
        except InvalidObjectError as error:
            skipped.append(error.name)
    assert skipped == ["shop/web-bad"]
    assert [endpoint_slice.name for endpoint_slice in decoded] == ["web-good"]
    assert decoded[0].endpoints == (CASES[0][1],)


_names = st.text(alphabet="abc-1", min_size=1, max_size=8)


@given(
    address=st.none() | _names,
    ready=st.none() | st.booleans(),
    terminating=st.none() | st.booleans(),
    zone=st.none() | _names,
    node_name=st.none() | _names,
    zone_hints=st.none() | st.lists(_names, max_size=3),
    node_hints=st.none() | st.lists(_names, max_size=3),
)
def test_any_endpoint_decodes_to_what_its_constructor_builds(
    *,
    address: str | None,
    ready: bool | None,
    terminating: bool | None,
    zone: str | None,
    node_name: str | None,
    zone_hints: list[str] | None,
    node_hints: list[str] | None,
) -> None:
    """Whatever fields are present, the decoded Endpoint equals the hand-built one."""
    item: dict[str, Any] = {"addresses": [address] if address is not None else []}
    conditions = {
        key: value
        for key, value in (("ready", ready), ("terminating", terminating))
        if value is not None
    }
    if conditions:
        item["conditions"] = conditions
    if zone is not None:
        item["zone"] = zone
    if node_name is not None:
        item["nodeName"] = node_name
    if zone_hints is not None or node_hints is not None:
        item["hints"] = {
            "forZones": [{"name": name} for name in zone_hints or []],
            "forNodes": [{"name": name} for name in node_hints or []],
        }
    expected = Endpoint(
        address=address,
        ready=ready,
        zone=zone,
        node_name=node_name,
        zone_hints=tuple(zone_hints or ()),
        node_hints=tuple(node_hints or ()),
        terminating=terminating,
    )
    (endpoint_slice,) = _page_slices(_slice(item))
    assert endpoint_slice.endpoints == (expected,)
    assert hash(endpoint_slice.endpoints[0]) == hash(expected)
