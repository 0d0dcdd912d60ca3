"""The fake Kubernetes API server, driven through the real `kubernetes` client over HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiClient, CoreV1Api, DiscoveryV1Api
from kubernetes.client.exceptions import ApiException

from tests.conftest import EXAMPLES_DIR
from tests.kubeapi import FakeKubeAPI
from tests.sources.kubeapi_client import (
    body_of,
    client_from_kubeconfig,
    close_client,
    config_map,
    continue_token,
    daemon_set,
    endpoint_slice,
    event,
    list_version,
    name_of,
    new_watch,
    node,
    preloaded_items,
    raw_get,
    raw_watch,
    service,
)

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
