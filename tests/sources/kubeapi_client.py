"""Driving the fake API server from tests: Kubernetes objects to load, the real `kubernetes`
client's calls and their unannotated corners, and raw HTTP reads of a LIST or a watch (the
`api_client` and `core` fixtures are in tests/sources/conftest.py)."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import kubernetes
import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.client.models import V1ListMeta, V1ObjectMeta
from kubernetes.watch import Watch

from tests.kubeapi import FakeKubeAPI


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
