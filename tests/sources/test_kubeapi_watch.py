"""The fake API server's watches and injected faults, driven through the real `kubernetes`
client over HTTP."""

from __future__ import annotations

import socket
import time

import pytest
import urllib3
from kubernetes.client import ApiClient, CoreV1Api, DiscoveryV1Api
from kubernetes.client.exceptions import ApiException

from tests.kubeapi import FakeKubeAPI
from tests.sources.kubeapi_client import (
    body_of,
    bookmark_once_watched,
    continue_token,
    endpoint_slice,
    event,
    in_background,
    list_version,
    name_of,
    new_watch,
    node,
    raw_watch,
    service,
    summary,
    take,
)

# --- WATCH -----------------------------------------------------------------------------------


def test_watch_replays_changes_after_the_lists_version_in_order(
    kube_api: FakeKubeAPI, core: CoreV1Api
) -> None:
    """A watch from a list's resourceVersion gets every later change, in order, once."""
    kube_api.load([node("node-a"), node("node-b")])
    listed = core.list_node()
    kube_api.apply(node("node-c"))
    kube_api.apply(node("node-a", zone="zone-b"))
    kube_api.delete("nodes", None, "node-b")
    watch = new_watch()
    stream = watch.stream(core.list_node, resource_version=list_version(listed))
    events = take(stream, watch, 3)
    assert summary(events) == [("ADDED", "node-c"), ("MODIFIED", "node-a"), ("DELETED", "node-b")]
    versions = [int(e["object"].metadata.resource_version) for e in events]
    assert versions == sorted(versions)
    assert versions[-1] == kube_api.resource_version
    assert events[1]["object"].metadata.labels["topology.kubernetes.io/zone"] == "zone-b"
    assert events[0]["raw_object"]["kind"] == "Node"


def test_watch_streams_live_changes(kube_api: FakeKubeAPI, api_client: ApiClient) -> None:
    """Changes made while a watch is open reach it as they happen (namespaced EndpointSlices)."""
    discovery = DiscoveryV1Api(api_client)
    rv = list_version(discovery.list_namespaced_endpoint_slice("shop"))

    def mutate() -> None:
        kube_api.wait_for_watches("endpointslices", 1)
        kube_api.apply(endpoint_slice("other", "elsewhere", "x"))
        kube_api.apply(endpoint_slice("shop", "cart-1", "cart"))
        kube_api.delete("EndpointSlice", "shop", "cart-1")

    worker = in_background(mutate)
    watch = new_watch()
    stream = watch.stream(
        discovery.list_namespaced_endpoint_slice, "shop", resource_version=rv, timeout_seconds=5
    )
    events = take(stream, watch, 2)
    worker.join()
    assert summary(events) == [("ADDED", "cart-1"), ("DELETED", "cart-1")]
    assert events[0]["raw_object"]["apiVersion"] == "discovery.k8s.io/v1"


def test_watch_without_version_starts_with_current_objects(
    kube_api: FakeKubeAPI, core: CoreV1Api
) -> None:
    """A watch from resourceVersion "" first sends an ADDED event for every current object."""
    kube_api.load([service("shop", "cart"), service("auth", "login")])

    def mutate() -> None:
        kube_api.wait_for_watches("services", 1)
        kube_api.apply(service("shop", "cart", mode="Auto"))

    worker = in_background(mutate)
    watch = new_watch()
    stream = watch.stream(core.list_service_for_all_namespaces, timeout_seconds=5)
    events = take(stream, watch, 3)
    worker.join()
    assert summary(events) == [("ADDED", "login"), ("ADDED", "cart"), ("MODIFIED", "cart")]


def test_watch_field_selector_turns_moves_into_added_and_deleted(kube_api: FakeKubeAPI) -> None:
    """With a fieldSelector, objects leaving it arrive as DELETED and entering as ADDED."""
    kube_api.apply(node("node-a"))
    rv = kube_api.resource_version
    kube_api.apply(event("shop", "e1", "Service", "Scheduled", "Normal"))
    kube_api.apply(event("shop", "e1", "Service", "Failed", "Warning"))
    kube_api.apply(event("shop", "e2", "Service", "Failed", "Normal"))
    kube_api.apply(event("shop", "e1", "Service", "Failed", "Normal"))
    events, _ = raw_watch(
        kube_api,
        f"/api/v1/namespaces/shop/events?watch=1&resourceVersion={rv}"
        "&fieldSelector=type%3DWarning&timeoutSeconds=1",
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "e1"),
        ("DELETED", "e1"),
    ]


def test_bookmarks_carry_the_current_version(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """allowWatchBookmarks gets periodic and on-demand BOOKMARKs the client records the rv of."""
    kube_api.apply(node("node-a"))
    listed = list_version(core.list_node())
    kube_api.apply(service("shop", "cart"))  # moves the global version past the nodes' one

    watch = new_watch()
    stream = watch.stream(
        core.list_node, resource_version=listed, allow_watch_bookmarks=True, timeout_seconds=5
    )
    [periodic] = take(stream, watch, 1)
    assert periodic["type"] == "BOOKMARK"
    assert periodic["raw_object"]["metadata"]["resourceVersion"] == str(kube_api.resource_version)
    assert watch.resource_version == str(kube_api.resource_version)

    kube_api.bookmark_interval = 60.0
    kube_api.wait_for_watches("nodes", 0, exact=True)  # the stopped watch has gone
    in_background(bookmark_once_watched(kube_api, "nodes"))
    started = time.monotonic()
    watch = new_watch()
    stream = watch.stream(
        core.list_node, resource_version=listed, allow_watch_bookmarks=True, timeout_seconds=5
    )
    [on_demand] = take(stream, watch, 1)
    assert on_demand["type"] == "BOOKMARK"
    assert time.monotonic() - started < 2


def test_watch_without_bookmarks_gets_none(kube_api: FakeKubeAPI) -> None:
    """Without allowWatchBookmarks no BOOKMARK is sent, even on demand."""
    in_background(bookmark_once_watched(kube_api, "nodes"))
    events, _ = raw_watch(kube_api, "/api/v1/nodes?watch=true&resourceVersion=0&timeoutSeconds=1")
    assert events == []


def test_timeout_seconds_ends_the_watch_normally(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """timeoutSeconds closes the stream with a proper last chunk once it elapses."""
    _, elapsed = raw_watch(kube_api, "/api/v1/nodes?watch=1&timeoutSeconds=1")
    assert 1 <= elapsed < 3
    started = time.monotonic()
    assert list(new_watch().stream(core.list_node, timeout_seconds=1)) == []
    assert 1 <= time.monotonic() - started < 3


def test_compacted_history_gives_a_410_error_event(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """A watch from a compacted resourceVersion gets one ERROR event (Status 410 Expired)."""
    kube_api.apply(node("node-a"))
    old = list_version(core.list_node())
    kube_api.apply(node("node-b"))
    kube_api.compact()
    events, _ = raw_watch(kube_api, f"/api/v1/nodes?watch=1&resourceVersion={old}")
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")

    with pytest.raises(ApiException) as raised:
        list(new_watch().stream(core.list_node, resource_version=old, timeout_seconds=5))
    assert raised.value.status == 410

    # Without timeout_seconds the client retries once from the same version, then raises.
    kube_api.clear_requests()
    with pytest.raises(ApiException) as raised:
        list(new_watch().stream(core.list_node, resource_version=old))
    assert raised.value.status == 410
    assert [r.query.get("resourceVersion") for r in kube_api.requests] == [old, old]

    current = str(kube_api.resource_version)
    events, _ = raw_watch(
        kube_api, f"/api/v1/nodes?watch=1&resourceVersion={current}&timeoutSeconds=1"
    )
    assert events == []


def test_compaction_spares_watches_that_are_up_to_date(
    kube_api: FakeKubeAPI, core: CoreV1Api
) -> None:
    """compact() expires old versions but an open, caught-up watch keeps receiving events."""
    kube_api.apply(node("node-a"))
    rv = list_version(core.list_node())

    def mutate() -> None:
        kube_api.wait_for_watches("nodes", 1)
        kube_api.compact()
        kube_api.apply(node("node-b"))

    worker = in_background(mutate)
    watch = new_watch()
    events = take(watch.stream(core.list_node, resource_version=rv, timeout_seconds=5), watch, 1)
    worker.join()
    assert summary(events) == [("ADDED", "node-b")]


def test_deserialize_false_breaks_on_error_events(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """kubernetes 37.0.2's Watch.stream(deserialize=False) raises KeyError on an ERROR event."""
    kube_api.apply(node("node-a"))
    kube_api.apply(node("node-b"))
    kube_api.compact()
    with pytest.raises(KeyError, match="raw_object"):
        list(
            new_watch().stream(
                core.list_node, resource_version="1", timeout_seconds=5, deserialize=False
            )
        )


def test_history_overflow_and_load_expire_older_versions(kube_api: FakeKubeAPI) -> None:
    """Versions older than the bounded history, or than a load(), get the 410 ERROR event."""
    small = FakeKubeAPI(history=3).start()
    try:
        for i in range(5):
            small.apply(node(f"node-{i}"))
        events, _ = raw_watch(small, "/api/v1/nodes?watch=1&resourceVersion=1")
        assert [e["type"] for e in events] == ["ERROR"]
        events, _ = raw_watch(small, "/api/v1/nodes?watch=1&resourceVersion=2&timeoutSeconds=1")
        assert [e["object"]["metadata"]["name"] for e in events] == ["node-2", "node-3", "node-4"]
    finally:
        small.stop()

    kube_api.apply(node("node-a"))
    before = kube_api.resource_version
    kube_api.load([node("node-b")])
    events, _ = raw_watch(kube_api, f"/api/v1/nodes?watch=1&resourceVersion={before}")
    assert [e["type"] for e in events] == ["ERROR"]


def test_expired_continue_token_gets_410(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """A continue token whose snapshot was compacted away gets 410 Gone, reason Expired."""
    kube_api.load(node(f"node-{i}") for i in range(4))
    first = core.list_node(limit=2)
    kube_api.compact()
    with pytest.raises(ApiException) as raised:
        core.list_node(limit=2, _continue=continue_token(first))
    assert raised.value.status == 410
    assert body_of(raised.value)["reason"] == "Expired"


# --- faults ----------------------------------------------------------------------------------


def test_injected_failures_hit_the_next_requests_only(
    kube_api: FakeKubeAPI, core: CoreV1Api
) -> None:
    """fail(resource, 500, times=2) fails exactly the next two requests for that resource."""
    kube_api.apply(node("node-a"))
    kube_api.fail("nodes", status=500, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as raised:
            core.list_node()
        assert raised.value.status == 500
        assert body_of(raised.value)["reason"] == "InternalError"
    core.list_service_for_all_namespaces()
    assert [name_of(n) for n in core.list_node().items] == ["node-a"]

    kube_api.fail("services", status=503, times=None)
    for _ in range(3):
        with pytest.raises(ApiException, match="503"):
            core.list_service_for_all_namespaces()
    kube_api.clear_faults()
    core.list_service_for_all_namespaces()


def test_forbid_gives_403_until_cleared(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """forbid() answers lists and watches with 403 Forbidden until clear_faults()."""
    kube_api.forbid("events")
    with pytest.raises(ApiException) as raised:
        core.list_event_for_all_namespaces()
    assert raised.value.status == 403
    body = body_of(raised.value)
    assert body["reason"] == "Forbidden"
    assert 'cannot list resource "events"' in body["message"]
    with pytest.raises(ApiException) as raised:
        list(new_watch().stream(core.list_event_for_all_namespaces, timeout_seconds=1))
    assert raised.value.status == 403
    kube_api.clear_faults()
    assert core.list_event_for_all_namespaces().items == []


def test_stall_delays_responses(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """stall(resource, seconds) delays that resource's responses and no other's."""
    kube_api.stall("nodes", 0.3)
    started = time.monotonic()
    core.list_service_for_all_namespaces()
    assert time.monotonic() - started < 0.25
    core.list_node()
    assert time.monotonic() - started >= 0.3


def test_drop_watches_ends_streams_midway(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """drop_watches() aborts open streams, which the client sees as a broken response."""
    received: list[str] = []

    def mutate() -> None:
        kube_api.wait_for_watches("nodes", 1)
        kube_api.apply(node("node-a"))
        deadline = time.monotonic() + 5
        while not received and time.monotonic() < deadline:
            time.sleep(0.01)
        assert kube_api.drop_watches("nodes") == 1

    worker = in_background(mutate)
    started = time.monotonic()
    stream = new_watch().stream(core.list_node, resource_version="0", timeout_seconds=10)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        received.extend(ev["object"].metadata.name for ev in stream)
    worker.join()
    assert received == ["node-a"]
    assert time.monotonic() - started < 5
    assert kube_api.open_watches("nodes") == 0


def test_down_refuses_connections_and_up_serves_the_same_port(
    kube_api: FakeKubeAPI, core: CoreV1Api
) -> None:
    """down() refuses connections (and ends open watches); up() serves again on the same port."""
    kube_api.apply(node("node-a"))
    url = kube_api.url
    core.list_node()
    kube_api.down()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((kube_api.host, kube_api.port), timeout=2).close()
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_node()
    kube_api.up()
    assert kube_api.url == url
    assert [name_of(n) for n in core.list_node().items] == ["node-a"]


def test_wait_for_watches_times_out(kube_api: FakeKubeAPI) -> None:
    """wait_for_watches raises TimeoutError when the watches do not open in time."""
    with pytest.raises(TimeoutError):
        kube_api.wait_for_watches("services", 1, timeout=0.1)
