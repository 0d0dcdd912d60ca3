"""How the informers ask, answered by the real API server and read from its audit log
(moved from tests/live/test_list_modes.py, their assertions kept on what the audit log
records: verb, query and status; where the request was served from it does not record).

The exporter runs in-process with tests/live's FAST settings as a ServiceAccount of its
own; its requests are told apart from every other by the token's credential id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.live.conftest import FAST, eventually
from tests.realcluster import audit
from tests.realcluster.cluster import RealCluster
from tests.realcluster.controlplane import ControlPlane, ControlPlaneSettings
from tests.realcluster.faults import WITHOUT_CACHE_OR_WATCH_LIST
from tests.realcluster.installed import KUSTOMIZE, Credentials, credentials
from tests.realcluster.live import exporter_as
from tests.realcluster.live_agreement import AUTO, NODES, Shape, build
from tests.scrape import Scrape

pytestmark = pytest.mark.real

NAMESPACE = "listmodes"
SHAPES = (Shape("web", 9, annotations=AUTO),)


def _cluster(plane: ControlPlane) -> Iterator[RealCluster]:
    cluster = RealCluster(plane)
    try:
        build(cluster, NAMESPACE, SHAPES)
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[RealCluster]:
    yield from _cluster(control_plane)


@pytest.fixture(scope="module")
def without_watch_list(
    control_plane_factory: Callable[[ControlPlaneSettings], ControlPlane],
) -> Iterator[RealCluster]:
    yield from _cluster(control_plane_factory(WITHOUT_CACHE_OR_WATCH_LIST))


def _of(cluster: RealCluster, creds: Credentials, resource: str) -> list[audit.Request]:
    """This exporter's requests for `resource`, in the order the API server received them."""
    made = audit.requests(cluster.plane.audit_log, creds.install.username, creds.token.read())
    return [r for r in made if r.target == resource]


def _exported(result: Scrape, name: str) -> bool:
    return bool(result.labelled("topology_hints_service_info", namespace=NAMESPACE, service=name))


def test_a_streaming_list_is_one_request_that_goes_on_as_the_watch(
    cluster: RealCluster, tmp_path: Path
) -> None:
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    settings = dataclasses.replace(FAST, streaming_list=True)
    with exporter_as(creds, informer=settings) as exporter:
        cluster.create_service(NAMESPACE, Shape("late", 3, annotations=AUTO).body())
        for index in range(3):
            cluster.run_pod(
                NAMESPACE,
                f"late-{index}",
                node=NODES[index],
                ip=f"10.97.0.{index + 1}",
                labels={"app": "late"},
            )
        eventually(exporter, lambda r: _exported(r, "late"))
    requests = _of(cluster, creds, "services")
    assert len(requests) == 1, [r.describe() for r in requests]
    (only,) = requests
    assert only.verb == "watch"
    assert only.query["sendInitialEvents"] == "true"
    assert only.query["resourceVersion"] == "0"
    assert only.query["resourceVersionMatch"] == "NotOlderThan"
    assert 30 <= int(only.query["timeoutSeconds"]) < 60  # FAST's minimum is 30 s


def test_without_watch_list_the_refusal_is_taken_once_then_lists_from_the_cache(
    without_watch_list: RealCluster, tmp_path: Path
) -> None:
    """kube-apiserver --feature-gates=WatchList=false answers the streaming list with 422;
    the exporter LISTs at resourceVersion 0 (the watch cache's, where there is one) then
    watches, never streaming again."""
    cluster = without_watch_list
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    settings = dataclasses.replace(FAST, streaming_list=True)
    with exporter_as(creds, informer=settings) as exporter:
        assert exporter.readiness()[0]
        eventually(exporter, lambda r: r.value("topology_hints_watch_up", resource="services") == 1)
    first, listed, watched = _of(cluster, creds, "services")[:3]
    assert (first.query.get("sendInitialEvents"), first.codes) == ("true", {422})
    assert listed.verb == "list"
    assert listed.query == {"resourceVersion": "0", "resourceVersionMatch": "NotOlderThan"}
    assert watched.verb == "watch"
    assert "sendInitialEvents" not in watched.query


def test_consistent_reads_when_asked(cluster: RealCluster, tmp_path: Path) -> None:
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    settings = dataclasses.replace(FAST, use_apiserver_cache=False, streaming_list=False)
    with exporter_as(creds, informer=settings):
        pass
    listed = _of(cluster, creds, "services")[0]
    assert listed.verb == "list"
    assert listed.query == {"limit": str(FAST.page_size)}
