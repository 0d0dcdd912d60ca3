"""The cyclic collector is paused while `serve` starts, and always resumed.

A start's objects are the cluster it keeps or acyclic temporaries: at 5,000 nodes the
collector found nothing in them and cost 0.3 s of a 2.8 s start (docs/performance.md). The
pause must end when the first evaluation is published, or after COLLECTOR_PAUSE_LIMIT when
it never is (an API server that refuses a list), so no exporter runs on without it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from exporter.run import serve
from exporter.run.serve import Exporter, ServeOptions
from exporter.vocabulary import Resource
from tests.k8s_objects import endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI
from tests.live.conftest import FAST
from tests.scrape import wait_until

pytestmark = pytest.mark.server


@contextmanager
def paused_exporter(options: ServeOptions) -> Iterator[Exporter]:
    """As `run` starts one: the collector paused, then the exporter told so."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        exporter = Exporter(options, collector_paused=True)
        exporter.start()
        try:
            yield exporter
        finally:
            exporter.stop()
    finally:
        # Whatever the outcome, this worker's collector is as it was.
        if was_enabled:
            gc.enable()


def _cluster(kube_api: FakeKubeAPI) -> None:
    kube_api.load(
        [
            *three_zone_nodes(),
            service("shop", "web", topology_mode="Auto"),
            endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
        ]
    )


def _options(kubeconfig: Path) -> ServeOptions:
    return ServeOptions(
        listen_address="127.0.0.1:0", kubeconfig=str(kubeconfig), context="fake", informer=FAST
    )


def _listed_all_but_endpoint_slices(exporter: Exporter) -> bool:
    synced = {informer.spec.resource for informer in exporter.informers if informer.synced.is_set()}
    return {Resource.NODES, Resource.SERVICES} <= synced


def test_the_collector_is_paused_until_the_first_evaluation_is_published(
    kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    """Held back from readiness by a forbidden list, then let through."""
    _cluster(kube_api)
    kube_api.forbid("endpointslices")
    with paused_exporter(_options(kubeconfig)) as exporter:
        wait_until(lambda: _listed_all_but_endpoint_slices(exporter))
        assert not gc.isenabled()
        kube_api.clear_faults()
        wait_until(lambda: exporter.readiness()[0])
        assert gc.isenabled()


def test_an_exporter_that_never_syncs_resumes_the_collector(
    kube_api: FakeKubeAPI, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EndpointSlices forbidden: never ready, and the collector back after the limit."""
    _cluster(kube_api)
    kube_api.forbid("endpointslices")
    monkeypatch.setattr(serve, "COLLECTOR_PAUSE_LIMIT", 0.3)
    with paused_exporter(_options(kubeconfig)) as exporter:
        wait_until(gc.isenabled, timeout=5)
        assert not exporter.readiness()[0]


def test_an_exporter_told_nothing_leaves_the_collector_alone(
    kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    """In-process users (the tests) that did not pause it: no enable behind their back."""
    _cluster(kube_api)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        exporter = Exporter(_options(kubeconfig))
        exporter.start()
        try:
            wait_until(lambda: exporter.readiness()[0])
            assert not gc.isenabled()
        finally:
            exporter.stop()
    finally:
        if was_enabled:
            gc.enable()


def test_serve_pauses_the_collector_before_it_builds_the_exporter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[bool, bool]] = []

    class BuiltError(Exception):
        pass

    def exporter(_options: ServeOptions, *, collector_paused: bool = False) -> Exporter:
        seen.append((gc.isenabled(), collector_paused))
        raise BuiltError

    was_enabled = gc.isenabled()
    monkeypatch.setattr(serve, "Exporter", exporter)
    monkeypatch.setattr(serve, "configure_logging", lambda *_args: None)
    try:
        with pytest.raises(BuiltError):
            serve.run(ServeOptions(listen_address="127.0.0.1:0", snapshot="unused.json"))
    finally:
        if was_enabled:
            gc.enable()
    assert seen == [(False, True)]
