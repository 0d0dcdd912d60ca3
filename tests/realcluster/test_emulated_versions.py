"""SPEC section 12 against the real binaries: kube-apiserver and kube-controller-manager
v1.37.2 emulating 1.34, 1.35 and 1.36, at 1.34 with PreferSameTrafficDistribution off (the
1.33 behaviour), and at 1.34 with only the controller manager's gate off (an upgrade's skew).

Each plane is started once, for the tests that use it, and stopped before the next starts.
Where SPEC section 12 and the binaries disagreed, the binaries won (docs/behaviour.md
section 12): an emulating binary knows only its own gates, and a GA gate's stage label
is "" in kubernetes_feature_enabled.
"""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark import ParameterSet

from tests.conftest import run_cli
from tests.processes import serving
from tests.realcluster import reference
from tests.realcluster.binaries import KubeBinaries
from tests.realcluster.cluster import RealCluster, node_body
from tests.realcluster.controlplane import ControlPlane, started
from tests.realcluster.emulation import (
    ALL_VALUES,
    BINARY_MINOR,
    EMULATED,
    PREFER_SAME,
    REMOVED_GATES,
    Emulated,
    for_plane,
    refused,
    version_sensitive_vectors,
)
from tests.realcluster.plans import ClusterPlan
from tests.realcluster.random_clusters import configured_plans
from tests.realcluster.tally import Tally
from tests.realcluster.vectors import reads_capacity

pytestmark = pytest.mark.real

# Where switching a Service to PreferSameZone shows the controller's gate: kept, removed.
SWITCHED = ("1.34", "1.34-controller-gate-off")
# The random clusters run again on every emulated plane (their index in the 1.37 run).
AGAIN = (2,)
GATE_SETTINGS = (
    ("ServiceTrafficDistribution", True),
    ("TopologyAwareHints", True),
    (PREFER_SAME, True),
    (PREFER_SAME, False),
    ("NoSuchGate", True),
)


class Started:
    """An emulated plane, its client, and the counts of what met its controller."""

    def __init__(self, plane: Emulated, control_plane: ControlPlane, folder: Path) -> None:
        self.plane = plane
        self.control_plane = control_plane
        self.folder = folder
        self.cluster = RealCluster(control_plane)
        self.tally = Tally(plane.name, "emulated")
        self._evaluated: dict[str, Any] | None = None
        self._metrics: str | None = None

    def evaluated(self) -> dict[str, Any]:
        """`evaluate --kubeconfig` against the plane (once)."""
        if self._evaluated is None:
            kubeconfig = str(self.control_plane.admin_kubeconfig)
            answer = run_cli("evaluate", "--kubeconfig", kubeconfig, *self.plane.gate_flags)
            assert answer.returncode in {0, 1}, answer.stderr
            self._evaluated = json.loads(answer.stdout)
        return self._evaluated

    def served_metrics(self) -> str:
        """/metrics of `serve --kubeconfig` against the plane, once ready (once)."""
        if self._metrics is None:
            # A Node to list: a streaming list that ends before any object is taken as empty
            # only at the next bookmark, a minute on (exporter/sources/initial.py), and these
            # tests ask about versions, not about an empty cluster.
            if not self.cluster.core.list_node().items:
                self.cluster.replace_nodes([node_body("served-n0", zone="z0")])
            kubeconfig = str(self.control_plane.admin_kubeconfig)
            with (
                serving(
                    "--kubeconfig",
                    kubeconfig,
                    *self.plane.gate_flags,
                    log=self.folder / "serve.log",
                ) as exporter,
                urllib.request.urlopen(exporter.url + "/metrics", timeout=10) as answer,  # noqa: S310
            ):
                self._metrics = answer.read().decode()
        return self._metrics


@pytest.fixture(scope="module", params=EMULATED, ids=lambda plane: plane.name)
def emulated(
    request: pytest.FixtureRequest,
    binaries: KubeBinaries,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Started]:
    plane: Emulated = request.param
    folder = tmp_path_factory.mktemp(f"emulated-{plane.name}")
    with started(binaries, plane.settings, folder / "plane") as control_plane:
        running = Started(plane, control_plane, folder)
        yield running
        running.cluster.close()
        running.tally.write()


_SAMPLE = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _samples(metrics: str, family: str) -> list[tuple[dict[str, str], float]]:
    """The samples of one family: (labels, value), whatever the order of the labels."""
    return [
        (dict(_LABEL.findall(labels)), float(value))
        for name, labels, value in _SAMPLE.findall(metrics)
        if name == family
    ]


def _features(metrics: str) -> dict[str, tuple[str, bool]]:
    return {
        labels["name"]: (labels.get("stage", ""), value == 1)
        for labels, value in _samples(metrics, "kubernetes_feature_enabled")
    }


# --- /version and the gates the components run with ------------------------------------


def test_version_says_the_emulated_minor_beside_the_binarys(emulated: Started) -> None:
    version = emulated.control_plane.version()
    assert (version["major"], version["minor"]) == ("1", str(BINARY_MINOR))
    assert (version["emulationMajor"], version["emulationMinor"]) == (
        "1",
        str(emulated.plane.minor),
    )


def test_the_components_run_the_gates_of_the_emulated_minor(emulated: Started) -> None:
    """kubernetes_feature_enabled of both components: PreferSameTrafficDistribution's stage
    and value as section 12's table gives them; the removed gates absent at any minor."""
    plane = emulated.control_plane
    status, body = plane.get("/metrics")
    assert status == 200
    apiserver = _features(body.decode())
    controller = _features(plane.controller_manager_metrics())
    assert apiserver[PREFER_SAME] == emulated.plane.apiserver_gate
    assert controller[PREFER_SAME] == emulated.plane.controller_gate
    for gate in REMOVED_GATES:
        assert gate not in apiserver
        assert gate not in controller


@dataclass(frozen=True)
class Admission:
    """A dry-run create's answer: status, Warning headers, and the object or the message."""

    status: int
    warnings: list[str]
    answer: dict[str, Any]


def _create(
    plane: ControlPlane, value: str | None, annotations: dict[str, str] | None = None
) -> Admission:
    """A dry-run Service create (`trafficDistribution: value`, `annotations`)."""
    spec: dict[str, object] = {"ports": [{"port": 80}], "selector": {"app": "x"}}
    if value is not None:
        spec["trafficDistribution"] = value
    body = {"metadata": {"name": "admission", "annotations": annotations or {}}, "spec": spec}
    request = urllib.request.Request(  # noqa: S310 - our own API server
        plane.url + "/api/v1/namespaces/default/services?dryRun=All",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {plane.admin_token}",
            "Content-Type": "application/json",
        },
    )
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:  # noqa: S310
            return Admission(
                answer.status, answer.headers.get_all("Warning") or [], json.load(answer)
            )
    except urllib.error.HTTPError as error:
        return Admission(error.code, error.headers.get_all("Warning") or [], json.load(error))


def test_the_api_server_admits_the_values_its_gate_allows(emulated: Started) -> None:
    """PreferSameZone and PreferSameNode need the API server's gate (refused, not dropped,
    without it); a value no version knows is refused everywhere; PreferClose is admitted
    everywhere with the deprecation warning (the 1.37 code warns whatever the emulated minor
    or gate, even where it refuses the PreferSameZone it advises)."""
    plane = emulated.control_plane
    for value in (*ALL_VALUES, "PreferRegion"):
        admission = _create(plane, value)
        if value in emulated.plane.admitted:
            assert admission.status == 201, admission.answer
            assert admission.answer["spec"]["trafficDistribution"] == value
        else:
            assert admission.status == 422
            assert f'Unsupported value: "{value}"' in admission.answer["message"]
        deprecated = any('"PreferClose\\" is deprecated' in w for w in admission.warnings)
        assert deprecated is (value == "PreferClose"), admission.warnings


def test_the_api_server_checks_the_topology_annotations(emulated: Started) -> None:
    """Section 1 and the topology-mode-deprecated notice: the two keys must agree, and no
    API server warns about the annotation itself."""
    plane = emulated.control_plane
    mode = "service.kubernetes.io/topology-mode"
    hints = "service.kubernetes.io/topology-aware-hints"
    alone = _create(plane, None, {mode: "Auto"})
    assert alone.status == 201
    assert alone.warnings == []
    agreeing = _create(plane, None, {mode: "Auto", hints: "Auto"})
    assert agreeing.status == 201
    differing = _create(plane, None, {mode: "Auto", hints: "Disabled"})
    assert differing.status == 422
    assert f"must match annotations[{hints}] when both are specified" in differing.answer["message"]


# --- the controller, compared with the exporter under the plane's profile ----------------


def _plans() -> list[ClusterPlan]:
    again = configured_plans()
    return [version_sensitive_vectors(), *(again[index] for index in AGAIN)]


@pytest.mark.parametrize("plan", _plans(), ids=lambda plan: plan.name)
def test_the_emulated_controller_agrees_with_the_exporter(
    emulated: Started, plan: ClusterPlan
) -> None:
    """`evaluate --snapshot --kubernetes-version 1.M [--feature-gates ...]` on a dump says
    what the emulated controller wrote: zone hints, node hints (PreferSameNode), and none
    where its gate refuses the value."""
    narrowed = for_plane(plan, emulated.plane)
    outcome = reference.run(emulated.cluster, narrowed, emulated.folder, emulated.plane.profile)
    emulated.tally.add(narrowed, outcome.agreement)
    assert not outcome.agreement.disagreements, outcome.failure(
        narrowed.write(emulated.folder / f"{narrowed.name}.plan.json")
    )
    entries = {(e["namespace"], e["name"]): e for e in outcome.result["services"]}
    ignored = [
        service
        for service in narrowed.services
        if service.traffic_distribution not in (None, *emulated.plane.honoured)
    ]
    for service in ignored:
        entry = entries[(outcome.namespaces[service.namespace], service.name)]
        assert "traffic-distribution-unsupported" in entry["config_issues"], entry
        if not reads_capacity(service):
            assert entry["mechanism"] == "none", entry


def test_the_controller_removes_hints_for_a_value_its_gate_refuses(emulated: Started) -> None:
    """PreferClose gets zone hints; the same Service switched to PreferSameZone or
    PreferSameNode keeps them where the controller's gate is on and loses them where it is
    off (reconciler.go: not a valid value, so hints are removed)."""
    plane = emulated.plane
    if plane.name not in SWITCHED:
        pytest.skip(f"the same as on {SWITCHED[0]}: the controller honours what is admitted")
    cluster = emulated.cluster
    reference.replace_nodes(cluster, [node_body(f"n{i}", zone=f"z{i}") for i in range(2)])
    namespace = "gate-" + plane.name.replace(".", "-")
    cluster.create_namespace(namespace)
    cluster.run_pod(namespace, "p0", node="n0", ip="10.9.0.1", labels={"app": "x"})
    cluster.run_pod(namespace, "p1", node="n1", ip="10.9.0.2", labels={"app": "x"})
    service = {"ports": [{"port": 80, "targetPort": 8080}], "selector": {"app": "x"}}
    cluster.create_service(
        namespace,
        {"metadata": {"name": "web"}, "spec": {**service, "trafficDistribution": "PreferClose"}},
    )
    cluster.settle(namespaces=[namespace])

    def hints() -> list[str]:
        return sorted(
            str(endpoint.hints)
            for item in cluster.endpoint_slices(namespace)
            for endpoint in item.endpoints or []
        )

    assert all("zone" in text for text in hints()), hints()
    try:
        for value in ("PreferSameZone", "PreferSameNode"):
            if value not in plane.admitted:
                continue
            cluster.core.patch_namespaced_service(
                "web", namespace, {"spec": {"trafficDistribution": value}},
                _content_type=reference.MERGE_PATCH,
            )  # fmt: skip
            cluster.settle(namespaces=[namespace])
            if value in plane.honoured:
                assert all("zone" in text for text in hints()), (value, hints())
            else:
                assert hints() == ["None", "None"], (value, hints())
            dump = emulated.folder / f"gate-{value}.json"
            dump.write_bytes(cluster.dump())
            result = reference.evaluate(dump, plane.profile)
            (entry,) = [e for e in result["services"] if e["namespace"] == namespace]
            expected = "traffic-distribution" if value in plane.honoured else "none"
            assert entry["mechanism"] == expected
            assert entry["drift"] == []
            assert ("traffic-distribution-unsupported" in entry["config_issues"]) is (
                value not in plane.honoured
            )
    finally:
        reference.clear(cluster, [namespace])


# --- the exporter reads the emulated version from /version --------------------------------
#


def test_evaluate_reads_the_emulated_version_from_the_api_server(
    emulated: Started,
) -> None:
    kubernetes = emulated.evaluated()["kubernetes"]
    assert kubernetes["version"] == f"1.{emulated.plane.minor}"
    assert kubernetes["binary_version"] == f"1.{BINARY_MINOR}"
    assert kubernetes["source"] == "api"


def test_evaluate_names_exactly_the_gates_the_controller_manager_has(
    emulated: Started,
) -> None:
    controller = _features(emulated.control_plane.controller_manager_metrics())
    kubernetes = emulated.evaluated()["kubernetes"]
    assert kubernetes["feature_gates"] == {PREFER_SAME: controller[PREFER_SAME][1]}


def test_serve_exports_the_emulated_version(
    emulated: Started,
) -> None:
    info = _samples(emulated.served_metrics(), "topology_hints_cluster_info")
    assert [labels for labels, _ in info] == [
        {
            "kubernetes_version": f"1.{emulated.plane.minor}",
            "binary_version": f"1.{BINARY_MINOR}",
            "source": "api",
        }
    ]


def test_serve_exports_the_gates_as_the_controller_manager_does(
    emulated: Started,
) -> None:
    """topology_hints_feature_gate_enabled{component="controller"} holds the series the
    controller manager's own kubernetes_feature_enabled holds for section 12's gates."""
    ours = {
        (labels["name"], labels.get("stage", "?"), value == 1)
        for labels, value in _samples(
            emulated.served_metrics(), "topology_hints_feature_gate_enabled"
        )
        if labels.get("component") == "controller"
    }
    theirs = _features(emulated.control_plane.controller_manager_metrics())
    wanted = {(PREFER_SAME, *theirs[PREFER_SAME])}
    assert ours == wanted


def test_a_gate_the_emulating_binaries_do_not_know_is_refused(
    emulated: Started,
) -> None:
    """The real components refuse ServiceTrafficDistribution at every emulated minor (their
    binary has no such gate). The exporter reading such a server refuses it too when
    kube-proxy is as new as the binaries; with kube-proxy taken at the emulated version
    (the default), the setting reaches kube-proxy alone, as a gate given once applies to
    each component whose version has it (behaviour section 12)."""
    kubeconfig = str(emulated.control_plane.admin_kubeconfig)
    gate = ["--feature-gates", "ServiceTrafficDistribution=true"]
    refused = run_cli(
        "evaluate", "--kubeconfig", kubeconfig, "--kube-proxy-version", f"1.{BINARY_MINOR}", *gate
    )
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith(
        "topology-hints-exporter: error: --feature-gates: unrecognized feature gate: "
        "ServiceTrafficDistribution (added in Kubernetes 1.30, removed in 1.36"
    ), line
    taken = run_cli("evaluate", "--kubeconfig", kubeconfig, *gate)
    if emulated.plane.minor >= 36:
        # kube-proxy 1.36 has no such gate either: nobody takes it.
        assert taken.returncode == 2, taken.stderr
        return
    assert taken.returncode == 0, taken.stderr
    kubernetes = json.loads(taken.stdout)["kubernetes"]
    assert "ServiceTrafficDistribution" not in kubernetes["feature_gates"]
    assert kubernetes["kube_proxy"]["feature_gates"]["ServiceTrafficDistribution"] is True


# --- --feature-gates, as the real components check it --------------------------------------


def _component_refuses(
    binary: Path,
    minor: int,
    gate: str,
    value: bool,  # noqa: FBT001
    stop_early: str,
) -> str | None:
    """What the component says of the gate flag; `stop_early` makes it fail fast when it
    takes the flag (kcm: a missing kubeconfig; kube-apiserver: an impossible port)."""
    import subprocess  # noqa: PLC0415 - only this check runs the binaries directly

    answer = subprocess.run(
        [
            str(binary),
            f"--emulated-version=1.{minor}",
            f"--feature-gates={gate}={str(value).lower()}",
            stop_early,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert answer.returncode != 0, answer.stderr[-2000:]
    found = re.search(
        r"(unrecognized feature gate: \w+|cannot set feature gate [^\"\]]+)", answer.stderr
    )
    assert found or "failed" in answer.stderr, answer.stderr[-2000:]
    return found.group(1) if found else None


def _exporter_refuses(minor: int, gate: str, value: bool, snapshot: Path) -> tuple[int, str]:  # noqa: FBT001
    answer = run_cli(
        "evaluate",
        "--snapshot",
        str(snapshot),
        "--kubernetes-version",
        f"1.{minor}",
        "--feature-gates",
        f"{gate}={str(value).lower()}",
    )
    return answer.returncode, answer.stderr


def _gate_cases() -> list[ParameterSet]:
    cases: list[ParameterSet] = []
    for minor in (34, 35, 36, 37):
        for gate, value in GATE_SETTINGS:
            cases.append(pytest.param(minor, gate, value, id=f"1.{minor}-{gate}={value}"))
    return cases


@pytest.mark.parametrize(("minor", "gate", "value"), _gate_cases())
def test_feature_gates_are_refused_as_the_components_refuse_them(
    binaries: KubeBinaries,
    tmp_path: Path,
    minor: int,
    gate: str,
    value: bool,  # noqa: FBT001
) -> None:
    """Both components at `--emulated-version 1.M` refuse exactly section 12's refusals
    (gates they do not know, values against a lock), and so does the exporter at
    `--kubernetes-version 1.M`, where the version alone says what the components know:
    the 1.37 binaries know no gate removed in 1.36 even when they emulate 1.34 or 1.35, a
    real 1.34 or 1.35 does, so for those the emulated server is the test above."""
    components = (
        (binaries.kube_controller_manager, "--kubeconfig=/nonexistent/kubeconfig"),
        (binaries.kube_apiserver, "--secure-port=0"),
    )
    with ThreadPoolExecutor(2) as pool:
        answers = list(
            pool.map(
                lambda component: _component_refuses(
                    component[0], minor, gate, value, component[1]
                ),
                components,
            )
        )
    expected = refused(minor, gate, value)
    assert answers == [expected, expected]
    if minor < 36 and gate in REMOVED_GATES:
        return
    snapshot = tmp_path / "empty.json"
    snapshot.write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    status, stderr = _exporter_refuses(minor, gate, value, snapshot)
    if expected is None:
        assert status in {0, 1}, stderr
    else:
        assert status == 2, stderr
        assert len(stderr.strip().splitlines()) == 1, stderr
