"""How the informers ask: jittered watch timeouts, relists, one-shot reads.

Streaming lists, the fallback to LIST when WatchList is off and consistent reads are the
real API server's to answer: tests/realcluster/test_list_modes.py.
"""

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
