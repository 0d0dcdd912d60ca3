"""The test API server answers as kube-apiserver does, checked with real kubectl and client.

Its watch cache and WatchList switches (LIST at resourceVersion 0 from memory, streaming
lists and the 422 without the feature), ListOptions validation, the 400s for unknown field
selectors and malformed label selectors with the apiserver's messages, `spec.unschedulable`
for Nodes, and /healthz, /livez, /readyz.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration, CoreV1Api
from kubernetes.client.exceptions import ApiException

from tests.kubeapi import FakeKubeAPI

pytest_plugins = ["tests.kubeapi.fixtures"]

WATCH_LIST_OFF = (
    'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents '
    "is forbidden for watch unless the WatchList feature gate is enabled"
)
STREAMING = (
    "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    "&allowWatchBookmarks=true&resourceVersion=0&timeoutSeconds=5"
)


def _node(name: str, *, unschedulable: bool | None = None) -> dict[str, Any]:
    spec = {} if unschedulable is None else {"unschedulable": unschedulable}
    return {"kind": "Node", "metadata": {"name": name, "labels": {"pool": "a"}}, "spec": spec}


@pytest.fixture
def core(kube_api: FakeKubeAPI) -> Iterator[CoreV1Api]:
    configuration = Configuration()
    configuration.host = kube_api.url
    with ApiClient(configuration) as client:
        yield CoreV1Api(client)


def _get(api: FakeKubeAPI, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(api.url + path, timeout=5) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _stream(api: FakeKubeAPI, path: str) -> list[dict[str, Any]]:
    """The events of a watch until the bookmark that ends its initial events."""
    events = []
    with urllib.request.urlopen(api.url + path, timeout=5) as response:  # noqa: S310
        for line in response:
            events.append(json.loads(line))
            annotations = events[-1]["object"]["metadata"].get("annotations") or {}
            if annotations.get("k8s.io/initial-events-end") == "true":
                return events
    raise AssertionError(f"no initial-events-end bookmark in {events}")


def test_list_at_version_zero_comes_from_the_cache_whole(kube_api: FakeKubeAPI) -> None:
    """The cache ignores limit; with it off the same LIST pages from etcd."""
    kube_api.load([_node(f"n{i}") for i in range(5)])
    status, body = _get(kube_api, "/api/v1/nodes?resourceVersion=0&limit=2")
    assert status == 200
    page = json.loads(body)
    assert (len(page["items"]), page["metadata"].get("continue")) == (5, None)
    assert kube_api.requests[-1].served.source == "cache"
    kube_api.watch_cache = False
    page = json.loads(_get(kube_api, "/api/v1/nodes?resourceVersion=0&limit=2")[1])
    assert len(page["items"]) == 2
    assert page["metadata"]["continue"]
    assert kube_api.requests[-1].served.source == "etcd"
    assert kube_api.requests[-1].consistent_list


def test_consistent_lists_and_continue_pages_read_etcd(kube_api: FakeKubeAPI) -> None:
    kube_api.load([_node(f"n{i}") for i in range(3)])
    page = json.loads(_get(kube_api, "/api/v1/nodes?limit=2")[1])
    assert kube_api.requests[-1].served.source == "etcd"
    _get(kube_api, f"/api/v1/nodes?limit=2&continue={page['metadata']['continue']}")
    assert kube_api.requests[-1].served.source == "etcd"
    served = kube_api.requests[-1].served
    assert served.status == 200
    assert served.bytes > 0


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "resourceVersionMatch=NotOlderThan",
            (
                'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                "resourceVersionMatch is forbidden unless resourceVersion is provided"
            ),
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            (
                'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
            ),
        ),
        (
            "sendInitialEvents=true",
            (
                'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: '
                "sendInitialEvents is forbidden for list"
            ),
        ),
        (
            "watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
            (
                'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            ),
        ),
    ],
)
def test_invalid_list_options_are_422(kube_api: FakeKubeAPI, query: str, message: str) -> None:
    status, body = _get(kube_api, f"/api/v1/nodes?{query}")
    status_body = json.loads(body)
    assert (status, status_body["reason"], status_body["message"]) == (422, "Invalid", message)
    assert status_body["details"]["kind"] == "ListOptions"


def test_streaming_list_ends_with_the_initial_events_bookmark(kube_api: FakeKubeAPI) -> None:
    kube_api.load([_node("a"), _node("b")])
    events = _stream(kube_api, "/api/v1/nodes?" + STREAMING)
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
    assert events[-1]["object"]["metadata"]["resourceVersion"] == str(kube_api.resource_version)
    request = kube_api.requests[-1]
    assert request.streaming_list
    assert request.served.source == "cache"


def test_streaming_list_is_refused_without_the_watch_list_feature(
    kube_api: FakeKubeAPI, core: CoreV1Api
) -> None:
    """The 422 a real API server answers while the WatchList feature gate is off."""
    kube_api.watch_list = False
    status, body = _get(kube_api, "/api/v1/nodes?" + STREAMING)
    status_body = json.loads(body)
    assert (status, status_body["reason"], status_body["code"]) == (422, "Invalid", 422)
    assert status_body["message"] == WATCH_LIST_OFF
    assert status_body["details"] == {
        "group": "meta.k8s.io",
        "kind": "ListOptions",
        "causes": [
            {
                "reason": "FieldValueForbidden",
                "message": "Forbidden: sendInitialEvents is forbidden for watch unless the "
                "WatchList feature gate is enabled",
                "field": "sendInitialEvents",
            }
        ],
    }
    # The real client sees the same.
    with pytest.raises(ApiException) as raised:
        core.list_node(
            watch=True,
            send_initial_events=True,
            resource_version_match="NotOlderThan",
            allow_watch_bookmarks=True,
            _preload_content=False,
        )
    assert raised.value.status == 422


def test_selectors_are_refused_as_the_api_server_refuses_them(
    kube_api: FakeKubeAPI, core: CoreV1Api
) -> None:
    kube_api.load([_node("a", unschedulable=True), _node("b"), _node("c", unschedulable=False)])

    def names(field_selector: str = "", label_selector: str = "") -> list[str]:
        nodes = core.list_node(field_selector=field_selector, label_selector=label_selector)
        return [str(n.metadata.name) for n in nodes.items if n.metadata]

    def message(error: ApiException) -> str:
        return str(json.loads(error.body or "{}")["message"])

    assert names(field_selector="spec.unschedulable=true") == ["a"]
    assert names(field_selector="spec.unschedulable=false") == ["b", "c"]  # unset is false
    with pytest.raises(ApiException) as raised:
        core.list_node(field_selector="spec.providerID=x")
    assert raised.value.status == 400
    assert message(raised.value) == "field label not supported: spec.providerID"
    with pytest.raises(ApiException) as raised:
        core.list_node(label_selector="pool a")
    assert message(raised.value) == (
        "unable to parse requirement: found 'a', expected: in, notin, =, ==, !=, gt, lt"
    )
    assert names(label_selector="pool in (a,b)") == ["a", "b", "c"]
    assert core.list_node(label_selector="!pool").items == []
    status, body = _get(kube_api, "/api/v1/nodes?fieldSelector=nonsense")
    assert (status, json.loads(body)["message"]) == (
        400,
        "invalid selector: 'nonsense'; can't understand 'nonsense'",
    )


def test_health_endpoints(kube_api: FakeKubeAPI) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        assert _get(kube_api, path) == (200, b"ok")
    status, body = _get(kube_api, "/readyz?verbose")
    assert status == 200
    assert body.decode().endswith("readyz check passed\n")


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_sees_what_it_sees_on_a_real_api_server(
    kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    kube_api.load([_node("a", unschedulable=True), _node("b")])
    assert KUBECTL is not None

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    cordoned = kubectl("get", "nodes", "--field-selector", "spec.unschedulable=true", "-o", "name")
    assert (cordoned.returncode, cordoned.stdout) == (0, "node/a\n")
    unknown = kubectl("get", "nodes", "--field-selector", "foo=bar")
    assert unknown.returncode == 1
    assert unknown.stderr == (
        'Error from server (BadRequest): Unable to find "/v1, Resource=nodes" that match label '
        'selector "", field selector "foo=bar": field label not supported: foo\n'
    )
    malformed = kubectl("get", "nodes", "-l", "a b")
    assert malformed.returncode == 1
    assert "unable to parse requirement: found 'b', expected: in, notin" in malformed.stderr
    for endpoint in ("/healthz", "/livez", "/readyz"):
        assert kubectl("get", "--raw", endpoint).stdout == "ok"
