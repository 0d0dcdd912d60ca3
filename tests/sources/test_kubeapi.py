"""The fake Kubernetes API server, driven through the real `kubernetes` client over HTTP."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import kubernetes
import pytest
import urllib3
from kubernetes.client import ApiClient, CoreV1Api, DiscoveryV1Api
from kubernetes.client.exceptions import ApiException
from kubernetes.client.models import V1ListMeta, V1ObjectMeta
from kubernetes.watch import Watch

from tests.conftest import EXAMPLES_DIR
from tests.kubeapi import FakeKubeAPI

pytest_plugins = ["tests.kubeapi.fixtures"]


# --- helpers ---------------------------------------------------------------------------------


def node(name: str, zone: str = "zone-a") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
        "status": {"allocatable": {"cpu": "4"}},
    }


def service(namespace: str, name: str, mode: str | None = None) -> dict[str, Any]:
    annotations = {"service.kubernetes.io/topology-mode": mode} if mode else {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}]},
    }


def endpoint_slice(namespace: str, name: str, service_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}, "zone": "a"}],
    }


def event(namespace: str, name: str, kind: str, reason: str, type_: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": kind, "name": "cart", "namespace": namespace},
        "reason": reason,
        "type": type_,
        "message": f"{reason} happened",
    }


class EventWatch(Protocol):
    """What the tests use of kubernetes.watch.Watch, which the client leaves unannotated."""

    resource_version: str | None

    def stream(
        self, func: Callable[..., object], *args: object, **kwargs: object
    ) -> Iterator[dict[str, Any]]: ...

    def stop(self) -> None: ...


def new_watch() -> EventWatch:
    return cast("Callable[[], EventWatch]", Watch)()


def client_from_kubeconfig(kubeconfig: Path, context: str) -> ApiClient:
    # The kubernetes client's config loaders are unannotated.
    load = cast("Callable[..., ApiClient]", kubernetes.config.new_client_from_config)
    return load(config_file=str(kubeconfig), context=context)


class KubeObject(Protocol):
    @property
    def metadata(self) -> V1ObjectMeta | None: ...


class KubeList(Protocol):
    @property
    def metadata(self) -> V1ListMeta | None: ...


def name_of(obj: KubeObject) -> str:
    assert obj.metadata is not None
    assert obj.metadata.name is not None
    return obj.metadata.name


def list_version(page: KubeList) -> str:
    assert page.metadata is not None
    assert page.metadata.resource_version is not None
    return page.metadata.resource_version


def continue_token(page: KubeList) -> str | None:
    assert page.metadata is not None
    return page.metadata._continue


def body_of(error: ApiException) -> dict[str, Any]:
    assert error.body is not None
    body: dict[str, Any] = json.loads(error.body)
    return body


def preloaded_items(response: object) -> list[dict[str, Any]]:
    """A list's items read with _preload_content=False.

    The client annotates such calls as returning the model; they return urllib3's response.
    """
    items: list[dict[str, Any]] = json.loads(cast("urllib3.BaseHTTPResponse", response).data)[
        "items"
    ]
    return items


def close_client(client: ApiClient) -> None:
    # ApiClient.close is unannotated.
    cast("Callable[[], None]", client.close)()


def bookmark_once_watched(api: FakeKubeAPI, resource: str) -> Callable[[], None]:
    def action() -> None:
        api.wait_for_watches(resource, 1)
        api.bookmark(resource)

    return action


@pytest.fixture
def api_client(kubeconfig: Path) -> Iterator[ApiClient]:
    """A real kubernetes ApiClient loaded from the generated kubeconfig."""
    client = client_from_kubeconfig(kubeconfig, context="fake")
    yield client
    close_client(client)


@pytest.fixture
def core(api_client: ApiClient) -> CoreV1Api:
    return CoreV1Api(api_client)


def raw_get(api: FakeKubeAPI, path: str) -> tuple[int, dict[str, Any]]:
    """GET a path with urllib; (status, decoded JSON body), also for error statuses."""
    try:
        with urllib.request.urlopen(api.url + path, timeout=5) as resp:  # noqa: S310 - 127.0.0.1
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read())


def raw_watch(api: FakeKubeAPI, path: str) -> tuple[list[dict[str, Any]], float]:
    """Read a whole watch stream with http.client: (events, seconds until it ended normally)."""
    conn = http.client.HTTPConnection(api.host, api.port, timeout=10)
    started = time.monotonic()
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Transfer-Encoding") == "chunked"
        body = resp.read()  # raises IncompleteRead unless the stream ends with the last chunk
    finally:
        conn.close()
    return [json.loads(line) for line in body.splitlines()], time.monotonic() - started


def take(stream: Iterator[dict[str, Any]], watch: EventWatch, n: int) -> list[dict[str, Any]]:
    """The first n events of a kubernetes Watch stream, then stop the watch."""
    events: list[dict[str, Any]] = []
    for ev in stream:
        events.append(ev)
        if len(events) == n:
            watch.stop()
    return events


def in_background(action: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["raw_object"]["metadata"].get("name", "")) for e in events]


# --- LIST ------------------------------------------------------------------------------------


def test_pagination_returns_every_object_once(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """limit+continue pages cover every object exactly once, all at the first page's version."""
    kube_api.load(node(f"node-{i:02d}") for i in range(23))
    names: list[str] = []
    versions: set[str] = set()
    token = None
    pages = 0
    while True:
        page = core.list_node(limit=5, _continue=token)
        pages += 1
        names += [name_of(n) for n in page.items]
        versions.add(list_version(page))
        token = continue_token(page)
        if not token:
            break
    assert pages == 5
    assert names == [f"node-{i:02d}" for i in range(23)]
    assert versions == {str(kube_api.resource_version)}


def test_pages_come_from_the_first_pages_snapshot(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """Changes made between pages do not show up in later pages of the same list."""
    kube_api.load(node(f"node-{i}") for i in range(6))
    first = core.list_node(limit=3)
    kube_api.apply(node("node-9"))
    kube_api.delete("Node", None, "node-5")
    rest = core.list_node(limit=10, _continue=continue_token(first))
    assert [name_of(n) for n in first.items + rest.items] == [f"node-{i}" for i in range(6)]
    assert list_version(rest) == list_version(first)
    fresh = core.list_node()
    assert [name_of(n) for n in fresh.items][-2:] == ["node-4", "node-9"]
    assert int(list_version(fresh)) > int(list_version(first))


def test_list_items_lack_kind_and_objects_carry_resource_versions(
    kube_api: FakeKubeAPI,
) -> None:
    """List items omit kind/apiVersion as the real server's do; each write bumps one global rv."""
    kube_api.apply(service("shop", "cart"))
    kube_api.apply(node("node-a"))
    stored = kube_api.apply(service("shop", "cart", mode="Auto"))
    status, body = raw_get(kube_api, "/api/v1/namespaces/shop/services")
    assert status == 200
    assert (body["kind"], body["apiVersion"]) == ("ServiceList", "v1")
    assert body["metadata"] == {"resourceVersion": "3"}
    [item] = body["items"]
    assert "kind" not in item
    assert "apiVersion" not in item
    assert item["metadata"]["resourceVersion"] == "3"
    assert item["metadata"]["uid"] == stored["metadata"]["uid"]
    assert stored["kind"] == "Service"
    status, single = raw_get(kube_api, "/api/v1/namespaces/shop/services/cart")
    assert (status, single["kind"], single["apiVersion"]) == (200, "Service", "v1")


def test_field_and_label_selectors_filter_lists(
    kube_api: FakeKubeAPI, core: CoreV1Api, api_client: ApiClient
) -> None:
    """fieldSelector (=, ==, != on dotted paths) and labelSelector filter list results."""
    kube_api.load(
        [
            service("shop", "cart"),
            service("shop", "checkout"),
            service("auth", "login"),
            event("shop", "e1", "Service", "TopologyAwareHintsDisabled", "Warning"),
            event("shop", "e2", "Service", "TopologyAwareHintsEnabled", "Normal"),
            event("auth", "e3", "Pod", "TopologyAwareHintsDisabled", "Warning"),
            endpoint_slice("shop", "cart-abc", "cart"),
            endpoint_slice("shop", "checkout-abc", "checkout"),
        ]
    )

    def names(result: Any) -> list[str]:
        return [i.metadata.name for i in result.items]

    selected = core.list_service_for_all_namespaces(field_selector="metadata.namespace=shop")
    assert names(selected) == ["cart", "checkout"]
    assert names(core.list_namespaced_service("shop", field_selector="metadata.name!=cart")) == [
        "checkout"
    ]
    warnings = core.list_event_for_all_namespaces(
        field_selector="involvedObject.kind=Service,reason==TopologyAwareHintsDisabled"
    )
    assert names(warnings) == ["e1"]
    assert names(core.list_namespaced_event("shop", field_selector="type=Normal")) == ["e2"]
    slices = DiscoveryV1Api(api_client).list_endpoint_slice_for_all_namespaces(
        label_selector="kubernetes.io/service-name=checkout"
    )
    assert names(slices) == ["checkout-abc"]
    status, body = raw_get(kube_api, "/api/v1/services?fieldSelector=nonsense")
    assert (status, body["reason"]) == (400, "BadRequest")


def test_load_serves_an_example_snapshot_unchanged(
    kube_api: FakeKubeAPI, core: CoreV1Api, api_client: ApiClient
) -> None:
    """Objects loaded from a real `kubectl get -o json` List come back unchanged but for the rv."""
    items = json.loads((EXAMPLES_DIR / "healthy-three-zones.json").read_text())["items"]
    kube_api.load(items)
    # Raw JSON: kubernetes 37's pydantic models reject these Nodes (nodeInfo lacks bootID).
    served = {
        "Node": preloaded_items(core.list_node(_preload_content=False)),
        "Service": preloaded_items(core.list_service_for_all_namespaces(_preload_content=False)),
        "EndpointSlice": preloaded_items(
            DiscoveryV1Api(api_client).list_endpoint_slice_for_all_namespaces(
                _preload_content=False
            )
        ),
    }
    for kind, objs in served.items():
        expected = [i for i in items if i["kind"] == kind]
        assert len(objs) == len(expected) > 0
        by_name = {o["metadata"]["name"]: o for o in objs}
        for want in expected:
            got = by_name[want["metadata"]["name"]]
            assert got["metadata"]["uid"] == want["metadata"]["uid"]
            assert "kind" not in got
            assert int(got["metadata"]["resourceVersion"]) <= kube_api.resource_version
            want_rest = {k: v for k, v in want.items() if k not in {"kind", "apiVersion"}}
            got["metadata"].pop("resourceVersion")
            want_rest["metadata"] = dict(want["metadata"])
            want_rest["metadata"].pop("resourceVersion")
            assert got == want_rest


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


# --- plumbing --------------------------------------------------------------------------------


def test_discovery_unknown_paths_and_request_log(kube_api: FakeKubeAPI, core: CoreV1Api) -> None:
    """/version and discovery answer, unknown paths get a 404 Status; requests are logged."""
    assert raw_get(kube_api, "/version")[1]["major"] == "1"
    assert raw_get(kube_api, "/apis")[1]["groups"][0]["name"] in {"apps", "discovery.k8s.io"}
    status, body = raw_get(kube_api, "/apis/apps/v1/deployments")
    assert (status, body["kind"], body["reason"], body["code"]) == (404, "Status", "NotFound", 404)
    status, body = raw_get(kube_api, "/api/v1/nodes/missing")
    assert (status, body["reason"]) == (404, "NotFound")
    core.list_namespaced_service("shop", limit=7, field_selector="metadata.name=cart")
    last = kube_api.requests[-1]
    assert (last.method, last.path, last.resource) == (
        "GET",
        "/api/v1/namespaces/shop/services",
        "services",
    )
    assert last.query == {"limit": "7", "fieldSelector": "metadata.name=cart"}
    assert last.headers["authorization"] == f"Bearer {kube_api.token}"
    assert not last.watch


@pytest.mark.server
def test_require_token_rejects_requests_without_it(tmp_path: Path) -> None:
    """With require_token, a request without the kubeconfig's bearer token gets 401."""
    with FakeKubeAPI(require_token=True) as api:
        status, body = raw_get(api, "/api/v1/nodes")
        assert (status, body["reason"]) == (401, "Unauthorized")
        config = api.write_kubeconfig(tmp_path / "kubeconfig", context="other")
        client = client_from_kubeconfig(config, context="other")
        try:
            assert CoreV1Api(client).list_node().items == []
        finally:
            close_client(client)


# --- other resources, throttling, malformed versions -----------------------------------------


def daemon_set(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": name}},
            "template": {
                "metadata": {"labels": {"k8s-app": name}},
                "spec": {"containers": [{"name": name, "image": f"{name}:1"}]},
            },
        },
    }


def config_map(namespace: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def test_daemon_sets_and_config_maps_are_served(
    kube_api: FakeKubeAPI, api_client: ApiClient, core: CoreV1Api
) -> None:
    """GET of named objects and LIST of apps/v1 DaemonSets and v1 ConfigMaps, 403 per resource."""
    kube_api.apply(daemon_set("kube-system", "kube-proxy"))
    kube_api.apply(config_map("kube-system", "kube-proxy", {"config.conf": "mode: ipvs"}))
    apps = kubernetes.client.AppsV1Api(api_client)
    got = apps.read_namespaced_daemon_set("kube-proxy", "kube-system")
    pod_spec = got.spec.template.spec
    assert pod_spec is not None
    assert pod_spec.containers[0].image == "kube-proxy:1"
    listed = apps.list_namespaced_daemon_set("kube-system")
    assert [name_of(item) for item in listed.items] == ["kube-proxy"]
    assert apps.list_daemon_set_for_all_namespaces().items[0].kind is None  # items lack kind
    config = core.read_namespaced_config_map("kube-proxy", "kube-system")
    assert config.data == {"config.conf": "mode: ipvs"}
    assert core.list_namespaced_config_map("default").items == []
    with pytest.raises(ApiException) as raised:
        core.read_namespaced_config_map("missing", "kube-system")
    assert raised.value.status == 404
    kube_api.forbid("configmaps")
    with pytest.raises(ApiException) as raised:
        core.read_namespaced_config_map("kube-proxy", "kube-system")
    assert raised.value.status == 403
    assert 'cannot get resource "configmaps"' in body_of(raised.value)["message"]
    assert apps.list_namespaced_daemon_set("kube-system").items  # other resources unaffected
    groups = {group["name"] for group in raw_get(kube_api, "/apis")[1]["groups"]}
    assert groups == {"apps", "discovery.k8s.io"}


@pytest.mark.parametrize("status", [429, 503])
def test_throttle_answers_with_retry_after(
    kube_api: FakeKubeAPI, core: CoreV1Api, status: int
) -> None:
    """throttle() answers the next requests with 429/503, a Retry-After header and details.

    Read with urllib: the kubernetes client's urllib3 pool would honour Retry-After itself.
    """
    kube_api.throttle("services", retry_after=7, status=status, times=2)
    for _ in range(2):
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(kube_api.url + "/api/v1/services", timeout=5)  # noqa: S310
        with raised.value as response:
            assert response.code == status
            assert response.headers["Retry-After"] == "7"
            assert json.loads(response.read())["details"]["retryAfterSeconds"] == 7
    core.list_service_for_all_namespaces()
    assert kube_api.throttled == 2


def test_watch_from_a_malformed_resource_version_is_a_bad_request(
    kube_api: FakeKubeAPI, core: CoreV1Api
) -> None:
    """Like the API server: 400 BadRequest, not a stream, for a resourceVersion like "abc"."""
    with pytest.raises(ApiException) as raised:
        list(new_watch().stream(core.list_service_for_all_namespaces, resource_version="abc"))
    assert raised.value.status == 400
    body = body_of(raised.value)
    assert body["reason"] == "BadRequest"
    assert 'Invalid value: "abc"' in body["message"]


def test_injected_events_are_replayed_on_every_resume(kube_api: FakeKubeAPI) -> None:
    """inject_event() puts any event, even undecodable bytes, in the history of a resource."""
    kube_api.apply(node("node-a"))  # resourceVersion 0 would mean "any": start from 1
    before = kube_api.resource_version
    kube_api.inject_event("services", "DELETED", b'{"metadata": 17}')
    kube_api.inject_event("services", "BOOKMARK", {"metadata": {"resourceVersion": "abc"}})
    for _ in range(2):
        events, _ = raw_watch(
            kube_api, f"/api/v1/services?watch=true&resourceVersion={before}&timeoutSeconds=1"
        )
        assert events == [
            {"type": "DELETED", "object": {"metadata": 17}},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "abc"}}},
        ]
