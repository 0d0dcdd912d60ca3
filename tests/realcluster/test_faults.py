"""Faults only a real server makes: the exporter keeps a whole, current state through each.

After each fault the cluster is changed, settled, and the exporter's evaluation must equal
`evaluate` of a dump taken then (tests/realcluster/live_agreement.py). Each test waits on
conditions: the exporter's own metrics, its readiness, the API server's audit log.

- a kube-apiserver restart (its own control plane: the restart drops every client's
  connections, other modules' included);
- an etcd compaction under a watch: a plane without the watch cache (--watch-cache=false,
  and without WatchList: LIST then WATCH) sends a resume to etcd, which has compacted the
  revision away: 410, and a new list;
- the ClusterRoleBinding removed (403, watch_up 0: TopologyHintsExporterWatchDown's
  series) and applied again;
- the ServiceAccount's token file rewritten with a new token after the old one was
  revoked, as a kubelet rotates a projected token: read without a restart;
- API Priority and Fairness rejecting the exporter's requests (429 with Retry-After):
  waited as told, then recovered when a seat is given.

An established watch is not authorised again, so the 403 and token tests run the exporter
in-process with watches of a few seconds (InformerSettings), as a long-running one meets
them at its next watch; the others run the real `serve` with its defaults.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from kubernetes.config import incluster_config

from exporter.run.serve import Exporter, ServeOptions
from exporter.sources.informer import InformerSettings
from exporter.sources.kubeapi import Timeouts
from tests.processes import ServedExporter, serving, wait_ready
from tests.realcluster import audit
from tests.realcluster.binaries import KubeBinaries
from tests.realcluster.cluster import RealCluster
from tests.realcluster.controlplane import ControlPlane, ControlPlaneSettings, started
from tests.realcluster.faults import (
    HARNESS_USER_AGENT,
    WITHOUT_CACHE_OR_WATCH_LIST,
    binding_removed,
    compact,
    recreate_service_account,
    seat_held,
    throttled,
)
from tests.realcluster.installed import KUSTOMIZE, Credentials, credentials, mint_token
from tests.realcluster.live_agreement import NODES, SHAPES, build, evaluate_dump, wait_agreeing
from tests.realcluster.requests import RESOURCES as RESOURCE_TARGETS
from tests.realcluster.requests import asked_properly, is_initial
from tests.scrape import Scrape, base_url, http_get, running_exporter, scrape, wait_until

pytestmark = pytest.mark.real

NAMESPACE = "faults"
START_TIMEOUT = 90.0
RECOVERY_TIMEOUT = 90.0
REQUIRED = ("nodes", "services", "endpointslices")
# Watches of 2-4 s: a fault that only a new request meets (RBAC, a revoked token) is met
# within seconds; retries as quick.
QUICK = InformerSettings(
    watch_timeout_seconds=2,
    timeouts=Timeouts(connect=2.0, read=10.0),
    backoff_initial=0.2,
    backoff_max=1.0,
    forbidden_retry=0.5,
    relist_backoff_initial=0.2,
)
# client-go reads a token file again every minute; the exporter at its next request.
TOKEN_TIMEOUT = 30.0


def metric(text: Scrape, name: str, **labels: str) -> float:
    return sum(
        value for found, value in text.series(name).items() if set(labels.items()) <= set(found)
    )


def eventually(check: Callable[[], bool], timeout: float = RECOVERY_TIMEOUT) -> None:
    wait_until(check, timeout=timeout, interval=0.2)


def add_replica(cluster: RealCluster, generation: int) -> str:
    """One more ready replica of web-7: 8 endpoints in 3 zones, hints refused; its IP."""
    ip = f"10.98.0.{generation + 1}"
    cluster.run_pod(
        NAMESPACE,
        f"web-7-extra-{generation}",
        node=NODES[generation % len(NODES)],
        ip=ip,
        labels={"app": "web-7"},
    )
    return ip


def agrees_after_a_change(cluster: RealCluster, url: str, folder: Path, generation: int) -> None:
    ip = add_replica(cluster, generation)
    # After a restart the controller may not have heard of the Pod yet while its queue is
    # idle: the dump must be taken after it has (else the exporter moves past the dump).
    cluster.wait_published(NAMESPACE, ip)
    cluster.settle()
    wait_agreeing(url, evaluate_dump(cluster, folder), timeout=RECOVERY_TIMEOUT)


def watches_up(text: Scrape) -> bool:
    return all(
        metric(text, "topology_hints_watch_up", resource=resource) == 1
        for resource in (*REQUIRED, "events")
    )


@pytest.fixture(scope="module")
def own_plane(
    binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A control plane of this module's own, for the fault that drops every connection."""
    with started(binaries, ControlPlaneSettings(), tmp_path_factory.mktemp("restart")) as plane:
        yield plane


# Enough for a verdict that a fault could leave stale: a Service whose hints a change of
# one replica turns off, beside a trafficDistribution one.
FAULT_SHAPES = tuple(shape for shape in SHAPES if shape.name in {"web-7", "close"})


def built(plane: ControlPlane) -> Iterator[RealCluster]:
    cluster = RealCluster(plane)
    try:
        build(cluster, NAMESPACE, FAULT_SHAPES)
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def restart_cluster(own_plane: ControlPlane) -> Iterator[RealCluster]:
    yield from built(own_plane)


@pytest.fixture
def cacheless_cluster(
    control_plane_factory: Callable[[ControlPlaneSettings], ControlPlane],
) -> Iterator[RealCluster]:
    yield from built(control_plane_factory(WITHOUT_CACHE_OR_WATCH_LIST))


@pytest.fixture(scope="module")
def session_cluster(control_plane: ControlPlane) -> Iterator[RealCluster]:
    yield from built(control_plane)


def serve(
    creds: Credentials, folder: Path, *, ready: str | None = "/readyz"
) -> AbstractContextManager[ServedExporter]:
    """The real `serve`, with its defaults, as the installed ServiceAccount."""
    return serving(
        "--kubeconfig",
        str(creds.kubeconfig),
        log=folder / "exporter.log",
        timeout=START_TIMEOUT,
        ready=ready,
    )


def test_an_apiserver_restart_keeps_a_whole_current_state(
    restart_cluster: RealCluster, tmp_path: Path
) -> None:
    """kube-apiserver stopped and started again on its port under a running `serve`: its
    watches come back (resumed, or listed again when the new watch cache cannot serve
    their resourceVersion), and it follows changes made after."""
    cluster = restart_cluster
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    with serve(creds, tmp_path) as exporter:
        wait_agreeing(exporter.url, evaluate_dump(cluster, tmp_path))
        before = scrape(exporter.url)
        cluster.plane.restart_apiserver()
        eventually(
            lambda: (
                metric(scrape(exporter.url), "topology_hints_watch_restarts_total")
                > metric(before, "topology_hints_watch_restarts_total")
            )
        )
        agrees_after_a_change(cluster, exporter.url, tmp_path, 1)
        # The optional Events watch may still be retrying the new server's 403s (its RBAC
        # caches sync after it serves): up within seconds, waited for.
        eventually(lambda: watches_up(scrape(exporter.url)))
        after = scrape(exporter.url)
    causes = {
        dict(labels)["cause"]
        for labels, value in after.series("topology_hints_watch_restarts_total").items()
        if value > metric(before, "topology_hints_watch_restarts_total", **dict(labels))
    }
    # Seen here: "error" (the connections drop), "forbidden" (the new API server answers
    # 403 until its RBAC caches sync: retried within seconds, not after 5 minutes) and
    # "expired" (its new watch cache starts after the resourceVersions: 410, listed again).
    print(f"restart: watch restarts by cause {sorted(causes)}")  # noqa: T201
    made = audit.requests(cluster.plane.audit_log, creds.install.username, creds.token.read())
    print(audit.report("restart", made))  # noqa: T201
    # A restarted API server answers 429 until its watch cache is ready: not counted here.
    assert [p for p in asked_properly(made) if not p.startswith("refused")] == []


def test_without_the_watch_cache_resumed_watches_are_up_in_a_quiet_cluster(
    cacheless_cluster: RealCluster, tmp_path: Path
) -> None:
    """kube-apiserver --watch-cache=false sends no bookmark: after its restart the resumed
    watches are up without any change to the cluster (issue 30, b: watch_up stayed 0 until
    each resource's next event, and TopologyHintsExporterWatchDown fired after 5 minutes)."""
    cluster = cacheless_cluster
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    with serve(creds, tmp_path) as exporter:
        wait_agreeing(exporter.url, evaluate_dump(cluster, tmp_path))
        before = scrape(exporter.url)
        cluster.plane.restart_apiserver()
        eventually(
            lambda: (
                metric(scrape(exporter.url), "topology_hints_watch_restarts_total")
                > metric(before, "topology_hints_watch_restarts_total")
            )
        )
        eventually(lambda: watches_up(scrape(exporter.url)))
        after = scrape(exporter.url)
    print(  # noqa: T201
        "no bookmarks: events since the restart by resource",
        {
            resource: metric(after, "topology_hints_watch_events_total", resource=resource)
            - metric(before, "topology_hints_watch_events_total", resource=resource)
            for resource in (*REQUIRED, "events")
        },
    )
    assert metric(after, "topology_hints_watch_events_total", type="BOOKMARK") == 0


def test_a_resume_from_a_compacted_revision_is_410_and_lists_again(
    cacheless_cluster: RealCluster, tmp_path: Path
) -> None:
    """Without the watch cache a resume goes to etcd: compacted past the Nodes watch's
    resourceVersion, it answers 410; the exporter lists Nodes again (its log and
    watch_restarts_total{cause="expired"} say so) while the Services watch, whose
    resourceVersion etcd still holds, resumes; the state stays whole."""
    cluster = cacheless_cluster
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    with serve(creds, tmp_path) as exporter:
        wait_agreeing(exporter.url, evaluate_dump(cluster, tmp_path))
        # The Services watch sees this last change; the Nodes watch saw nothing since its
        # list (no bookmarks without the watch cache): its resourceVersion is older.
        seen = metric(
            scrape(exporter.url), "topology_hints_watch_events_total", resource="services"
        )
        cluster.touch_service(NAMESPACE, "close", 2)
        touched = int(
            cluster.core.read_namespaced_service("close", NAMESPACE).metadata.resource_version
        )
        cluster.settle()
        eventually(
            lambda: (
                metric(
                    scrape(exporter.url), "topology_hints_watch_events_total", resource="services"
                )
                > seen
            )
        )
        # A resume from resourceVersion R watches from R+1, and a compaction at C keeps C:
        # compacted at the touch's revision + 1 (written by an object the exporter does not
        # watch), the Services watch resumes at C, every other one before it. The API server
        # writes its own Leases meanwhile: the current revision would pass the Services
        # watch too.
        cluster.core.create_namespaced_config_map(
            NAMESPACE, {"metadata": {"generateName": "compaction-"}}
        )
        before = scrape(exporter.url)
        revision = compact(cluster.plane, touched + 1)
        username = creds.install.username
        asked_before = len(audit.requests(cluster.plane.audit_log, username, creds.token.read()))
        # Only a new watch request meets the compaction: drop them all (the API server's
        # restart keeps etcd's history, so the 410 is the compaction's alone).
        cluster.plane.restart_apiserver()
        eventually(
            lambda: (
                metric(
                    scrape(exporter.url),
                    "topology_hints_watch_restarts_total",
                    resource="nodes",
                    cause="expired",
                )
                > metric(
                    before, "topology_hints_watch_restarts_total", resource="nodes", cause="expired"
                )
            )
        )
        # A change after the relist: the state must follow it.
        cluster.touch_service(NAMESPACE, "close", 3)
        agrees_after_a_change(cluster, exporter.url, tmp_path, 2)
        eventually(lambda: watches_up(scrape(exporter.url)))
        after = scrape(exporter.url)
    assert "resource version expired, listing again" in exporter.output()
    expired = {
        resource: metric(
            after, "topology_hints_watch_restarts_total", resource=resource, cause="expired"
        )
        - metric(before, "topology_hints_watch_restarts_total", resource=resource, cause="expired")
        for resource in (*REQUIRED, "events")
    }
    print(f"compacted at {revision}: 410s by resource {expired}")  # noqa: T201
    assert expired["nodes"] >= 1
    assert expired["services"] == 0
    made = audit.requests(cluster.plane.audit_log, username, creds.token.read())[asked_before:]
    relisted = {r.target for r in made if is_initial(r)}
    assert "nodes" in relisted
    assert "services" not in relisted


def quick_exporter(kubeconfig: Path | None) -> AbstractContextManager[Exporter]:
    """An in-process exporter with watches of a few seconds (QUICK)."""
    return running_exporter(
        ServeOptions(
            listen_address="127.0.0.1:0",
            kubeconfig=None if kubeconfig is None else str(kubeconfig),
            informer=QUICK,
        )
    )


def ready(exporter: Exporter) -> None:
    eventually(lambda: exporter.readiness()[0], timeout=START_TIMEOUT)


def test_a_removed_cluster_role_binding_is_403_then_recovered(
    session_cluster: RealCluster, tmp_path: Path
) -> None:
    """The binding deleted: the next watches are refused (403), watch_up falls to 0 for
    the required resources (TopologyHintsExporterWatchDown's series) and /readyz names the
    ClusterRole; applied again, the watches come back with the changes made meanwhile."""
    cluster = session_cluster
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    with quick_exporter(creds.kubeconfig) as exporter:
        ready(exporter)
        url = base_url(exporter)
        wait_agreeing(url, evaluate_dump(cluster, tmp_path))
        with binding_removed(cluster, creds.install):
            eventually(
                lambda: all(
                    metric(scrape(url), "topology_hints_watch_up", resource=resource) == 0
                    for resource in REQUIRED
                )
            )
            text = scrape(url)
            assert metric(text, "topology_hints_watch_restarts_total", cause="forbidden") > 0
            readiness = exporter.readiness()[1]
            assert "403 Forbidden" in readiness
            assert "ClusterRole" in readiness
            add_replica(cluster, 3)
        cluster.settle()
        wait_agreeing(url, evaluate_dump(cluster, tmp_path), timeout=RECOVERY_TIMEOUT)
        eventually(lambda: watches_up(scrape(url)))
    made = audit.requests(cluster.plane.audit_log, creds.install.username, creds.token.read())
    assert any(403 in r.codes for r in made)
    assert [p for p in asked_properly(made) if not p.startswith("refused")] == []


@pytest.mark.parametrize("configuration", ["kubeconfig", "in-cluster"])
def test_a_rotated_token_file_is_read_without_a_restart(
    configuration: str,
    session_cluster: RealCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ServiceAccount deleted and created again (its old token is refused from then
    on) and a new token written into the projected file, as a kubelet swaps it: the same
    exporter process sends the new token from its next requests on and follows the
    cluster. Through a kubeconfig's tokenFile, and through the in-cluster configuration
    (its token and CA files, and KUBERNETES_SERVICE_HOST/PORT, pointed at this plane)."""
    cluster = session_cluster
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    kubeconfig: Path | None = creds.kubeconfig
    if configuration == "in-cluster":
        kubeconfig = None
        monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(creds.token.path))
        monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(cluster.plane.ca_file))
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(cluster.plane.apiserver_port))
        monkeypatch.delenv("KUBECONFIG", raising=False)
    username = creds.install.username
    with quick_exporter(kubeconfig) as exporter:
        ready(exporter)
        url = base_url(exporter)
        wait_agreeing(url, evaluate_dump(cluster, tmp_path))
        recreate_service_account(cluster, creds.install)
        new_token = mint_token(cluster, creds.install)
        creds.token.write(new_token)
        new = audit.credential_id(new_token)
        # Its watches end every few seconds: the next ones must carry the new token.
        eventually(
            lambda: any(
                r.credential == new and r.codes == {200}
                for r in audit.requests(cluster.plane.audit_log, username)
            ),
            timeout=TOKEN_TIMEOUT,
        )
        add_replica(cluster, 4 if configuration == "kubeconfig" else 5)
        cluster.settle()
        wait_agreeing(url, evaluate_dump(cluster, tmp_path), timeout=RECOVERY_TIMEOUT)
        eventually(lambda: watches_up(scrape(url)))


def waits_after_429(made: list[audit.Request], at_least: float) -> list[str]:
    """Requests that followed a 429 of the same resource sooner than `at_least` seconds."""
    problems = []
    for resource in (*RESOURCE_TARGETS, "/version"):
        mine = [r for r in made if r.target == resource]
        for refused, following in itertools.pairwise(mine):
            if 429 not in refused.codes:
                continue
            gap = (following.received_at - refused.received_at).total_seconds()
            if gap < at_least:
                problems.append(f"{resource}: asked again {gap:.3f} s after a 429")
    return problems


def test_priority_and_fairness_429s_are_waited_as_told_then_recovered(
    session_cluster: RealCluster, tmp_path: Path
) -> None:
    """The exporter's ServiceAccount classified into a priority level of no seat, which
    another replica with the same ServiceAccount keeps busy: every request of the real
    `serve` is rejected (429, Retry-After at least 1 s). It asks again no sooner than told
    and /readyz says it is throttled; once the other replica is gone its burst of four
    streaming lists, admitted one at a time, gets through and its state is the dump's."""
    cluster = session_cluster
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    token = creds.token.path.read_text()
    username = creds.install.username
    with (
        throttled(cluster, creds.install, shares=0),
        seat_held(cluster.plane, token) as release,
    ):
        # The API server's flow control follows its objects within moments.
        eventually(lambda: cluster.plane.get("/version", token=token)[0] == 429)
        with serve(creds, tmp_path, ready=None) as exporter:
            eventually(
                lambda: all(
                    metric(
                        scrape(exporter.url),
                        "topology_hints_watch_restarts_total",
                        resource=resource,
                        cause="throttled",
                    )
                    >= 2
                    for resource in (*REQUIRED, "events")
                )
            )
            status, text = http_get(exporter.url + "/readyz")
            assert status == 503
            assert "429 Too Many Requests" in text
            release()
            wait_ready(exporter, timeout=RECOVERY_TIMEOUT)
            wait_agreeing(exporter.url, evaluate_dump(cluster, tmp_path))
    made = [
        r
        for r in audit.requests(cluster.plane.audit_log, username, token)
        if not r.user_agent.startswith(HARNESS_USER_AGENT)
    ]
    print(audit.report("APF", made))  # noqa: T201
    refused = {r.target for r in made if 429 in r.codes}
    assert refused >= {*RESOURCE_TARGETS, "/version"}
    assert waits_after_429(made, at_least=1.0) == []
    assert [p for p in asked_properly(made) if not p.startswith("refused")] == []
