"""How the informers ask: streaming lists, cache LISTs, jittered watch timeouts and relists."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from exporter.sources.cluster import NODES
from exporter.sources.informer import Informer
from exporter.sources.listing import read_cluster
from tests.k8s_objects import endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI, Request
from tests.live.conftest import FAST, StartExporter, eventually
from tests.scrape import Scrape, wait_until


def _cluster() -> list[dict[str, Any]]:
    return [
        *three_zone_nodes(),
        service("shop", "web", topology_mode="Auto"),
        endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
    ]


def _of(api: FakeKubeAPI, resource: str, since: int = 0) -> list[Request]:
    return [r for r in api.requests[since:] if r.resource == resource]


class _Quiet:
    def watch_up(self, *_args: object, **_kwargs: object) -> None: ...
    def watch_restart(self, *_args: object) -> None: ...
    def watch_event(self, *_args: object) -> None: ...
    def invalid_object(self, *_args: object) -> None: ...


def test_watch_timeouts_are_drawn_between_the_minimum_and_twice_it() -> None:
    """client-go's minWatchTimeout * (1 + rand): a fleet does not re-watch in lockstep."""
    informer: Informer[Any, Any] = Informer(NODES, None, None, _Quiet())  # type: ignore[arg-type]
    drawn = [informer.watch_timeout() for _ in range(500)]
    assert min(drawn) >= 300
    assert max(drawn) < 600
    assert len(set(drawn)) > 100  # spread over the range, not a handful of values


def test_a_streaming_list_is_one_request_that_goes_on_as_the_watch(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    kube_api.load(_cluster())
    settings = dataclasses.replace(FAST, streaming_list=True)
    with start_exporter(informer=settings) as exporter:
        kube_api.apply(service("shop", "late", topology_mode="Auto"))
        kube_api.apply(endpoint_slice("shop", "late-1", "late", zone_endpoints(3, prefix="10.0.9")))
        eventually(exporter, lambda r: _exported(r, "late"))
    requests = _of(kube_api, "services")
    assert len(requests) == 1, requests
    (only,) = requests
    assert only.streaming_list
    assert only.query["resourceVersion"] == "0"
    assert only.query["resourceVersionMatch"] == "NotOlderThan"
    assert 30 <= int(only.query["timeoutSeconds"]) < 60  # FAST's minimum is 30 s


def _exported(result: Scrape, name: str) -> bool:
    return bool(result.labelled("topology_hints_service_info", namespace="shop", service=name))


def test_without_watch_list_the_refusal_is_taken_once_then_lists_from_the_cache(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    kube_api.load(_cluster())
    kube_api.watch_list = False
    settings = dataclasses.replace(FAST, streaming_list=True)
    with start_exporter(informer=settings) as exporter:
        assert exporter.readiness()[0]
        eventually(exporter, lambda r: r.value("topology_hints_watch_up", resource="services") == 1)
    first, listed, watched = _of(kube_api, "services")[:3]
    assert (first.streaming_list, first.served.status) == (True, 422)
    assert not listed.watch
    assert listed.query == {"resourceVersion": "0", "resourceVersionMatch": "NotOlderThan"}
    assert listed.served.source == "cache"
    assert watched.watch
    assert not watched.streaming_list


def test_consistent_reads_when_asked(kube_api: FakeKubeAPI, start_exporter: StartExporter) -> None:
    kube_api.load(_cluster())
    settings = dataclasses.replace(FAST, use_apiserver_cache=False, streaming_list=False)
    with start_exporter(informer=settings):
        pass
    listed = _of(kube_api, "services")[0]
    assert listed.query == {"limit": str(FAST.page_size)}
    assert listed.consistent_list


def test_a_relist_after_410_waits_a_jittered_delay(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """At least half the initial relist backoff (it is drawn in [initial / 2, initial])."""
    kube_api.load(_cluster())
    settings = dataclasses.replace(FAST, relist_backoff_initial=1.0, backoff_max=2.0)
    with start_exporter(informer=settings) as exporter:
        kube_api.wait_for_watches("services", 1)
        mark = len(kube_api.requests)
        lost = time.monotonic()
        kube_api.load([service("shop", "web", topology_mode="Auto")])  # history lost: 410
        eventually(exporter, lambda r: _restarts(r) >= 1)
        wait_until(lambda: any(not r.watch for r in _of(kube_api, "services", mark)), timeout=10)
    relist = next(r for r in _of(kube_api, "services", mark) if not r.watch)
    assert relist.received - lost >= 0.5


def _restarts(result: Scrape) -> float:
    return (
        result.value("topology_hints_watch_restarts_total", resource="services", cause="expired")
        or 0
    )


def test_one_shot_commands_read_consistently_with_the_bounded_decoders(
    kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    """explain/evaluate: consistent pages; a malformed object is skipped and named."""
    bad = service("shop", "bad")
    bad["spec"]["type"] = ["not", "a", "string"]
    kube_api.load([*_cluster(), bad])
    listed = read_cluster(str(kubeconfig), "fake", page_size=2)
    assert [s.name for s in listed.snapshot.services] == ["web"]
    assert len(listed.skipped) == 1
    assert "Service shop/bad" in listed.skipped[0]
    lists = [r for r in kube_api.requests if r.resource]
    assert all(r.consistent_list for r in lists)
    assert all("resourceVersion" not in r.query for r in lists)
