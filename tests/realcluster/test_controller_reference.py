"""The real EndpointSlice controller is the reference: every buildable conformance vector
and a seeded set of random clusters are created through the API, and once the controller has
settled the exporter's result on the real `kubectl` dump must say what the controller wrote,
Service by Service and endpoint by endpoint (tests/realcluster/agreement.py says how).

The random clusters: REAL_CLUSTER_SEED (default 2026), REAL_CLUSTER_NODE_SETS (default 30)
and REAL_CLUSTER_SERVICES (default 300, spread over the node sets); a failure names the
plan (its seed and index) and leaves the plan and the dump in files to look at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.realcluster import reference
from tests.realcluster.agreement import Comparison
from tests.realcluster.cluster import RealCluster
from tests.realcluster.plans import ClusterPlan
from tests.realcluster.random_clusters import (
    NODE_SETS,
    SEED,
    SERVICES,
    SHAPES,
    configured_plans,
    random_plan,
    random_plans,
)
from tests.realcluster.tally import Tally
from tests.realcluster.vectors import VECTORS, readings, vector_plans

pytestmark = pytest.mark.real

VECTOR_PLANS = vector_plans()
RANDOM_PLANS = configured_plans()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reference")


@pytest.fixture(scope="module")
def vector_tally() -> Iterator[Tally]:
    counts = Tally("1.37", "vectors")
    yield counts
    counts.write()


@pytest.fixture(scope="module")
def random_tally() -> Iterator[Tally]:
    counts = Tally("1.37", f"random seed {SEED}")
    yield counts
    counts.write()


def _check(cluster: RealCluster, plan: ClusterPlan, folder: Path, tally: Tally) -> None:
    outcome = reference.run(cluster, plan, folder)
    tally.add(plan, outcome.agreement)
    assert not outcome.agreement.disagreements, outcome.failure(
        plan.write(folder / f"{plan.name}.plan.json")
    )


@pytest.mark.parametrize("plan", VECTOR_PLANS, ids=lambda plan: plan.name)
def test_a_conformance_vector_agrees_with_the_real_controller(
    plan: ClusterPlan, real_cluster: RealCluster, folder: Path, vector_tally: Tally
) -> None:
    """The vector's Services, built from Pods on its Nodes: the exporter says what the
    controller wrote, and the vector's expected verdict is the real cluster's."""
    _check(real_cluster, plan, folder, vector_tally)


@pytest.mark.parametrize("plan", RANDOM_PLANS, ids=lambda plan: plan.name)
def test_a_random_cluster_agrees_with_the_real_controller(
    plan: ClusterPlan, real_cluster: RealCluster, folder: Path, random_tally: Tally
) -> None:
    """Seeded random node sets and Services: the exporter says what the controller wrote."""
    _check(real_cluster, plan, folder, random_tally)


def test_the_live_api_server_gives_the_same_result_as_the_dump(
    real_cluster: RealCluster, folder: Path
) -> None:
    """`evaluate` and `explain` without --snapshot, reading the API server through a
    kubeconfig, say what `evaluate` says of a dump, and agree with the controller."""
    plan = random_plan(SEED, 0, 12)
    with reference.built(real_cluster, plan) as namespaces:
        dump_path = folder / "live.dump.json"
        dump_path.write_bytes(real_cluster.dump())
        kubeconfig = str(real_cluster.plane.admin_kubeconfig)
        live = run_cli("evaluate", "--kubeconfig", kubeconfig)
        refused = next(s for s in plan.services if s.name == "s00")
        explained = run_cli(
            "explain", "--kubeconfig", kubeconfig, f"{namespaces[refused.namespace]}/s00"
        )
    assert live.returncode in {0, 1}, live.stderr
    from_api = json.loads(live.stdout)
    from_dump = reference.evaluate(dump_path)
    ours = set(namespaces.values())

    def entries(result: dict[str, object]) -> list[object]:
        services = result["services"]
        assert isinstance(services, list)
        return [entry for entry in services if entry["namespace"] in ours]

    assert entries(from_api) == entries(from_dump)
    assert from_api["cluster"] == from_dump["cluster"]
    assert from_api["kubernetes"]["source"] == "api"
    agreement = Comparison(plan, namespaces, json.loads(dump_path.read_text())).compare(from_api)
    assert not agreement.disagreements, agreement.disagreements
    # s00 of a three-equal node set: 8 ready endpoints, refused (section 3's table), and the
    # event explain expects is the one the controller recorded.
    assert explained.returncode == 1, explained.stderr
    assert "MinAllocationExceedsOverloadThreshold" in explained.stdout
    said = re.search(
        r'Expected event: +Warning TopologyAwareHintsDisabled "([^"]+)"', explained.stdout
    )
    assert said is not None, explained.stdout
    expected_message = " ".join(said.group(1).split())
    recorded = Comparison(plan, namespaces, json.loads(dump_path.read_text())).observed(
        namespaces[refused.namespace], "s00", "IPv4"
    )
    latest = recorded.latest()
    assert latest is not None
    assert latest["message"].startswith(expected_message), (latest["message"], expected_message)


def test_the_random_clusters_hold_the_boundary_shapes() -> None:
    """What section 3's boundaries need is in every run of the default size, so a run
    that passes has met each of them."""
    plans = random_plans(SEED, NODE_SETS, SERVICES)
    assert len(plans) >= 30
    assert sum(len(plan.services) for plan in plans) >= 300
    names = " ".join(plan.name for plan in plans)
    assert all(shape in names for shape in SHAPES)
    services = [service for plan in plans for service in plan.services]
    distributions = {service.traffic_distribution for service in services}
    assert {"PreferClose", "PreferSameZone", "PreferSameNode"} <= distributions
    assert any(s.spec.get("internalTrafficPolicy") == "Local" for s in services)
    old = "service.kubernetes.io/topology-aware-hints"
    assert any(old in s.annotations and s.traffic_distribution for s in services)
    assert any(
        old in s.annotations and "service.kubernetes.io/topology-mode" in s.annotations
        for s in services
    )
    pods = [pod for service in services for pod in service.pods]
    assert any(pod.terminating for pod in pods)
    assert any(not pod.ready and not pod.terminating for pod in pods)
    nodes = [node for plan in plans for node in plan.nodes]
    assert any(not node["status"]["allocatable"].get("cpu") for node in nodes)
    assert any(node["status"]["conditions"][0]["status"] == "False" for node in nodes)
    assert random_plans(SEED, 3, 20) == random_plans(SEED, 3, 20)


def test_every_vector_entry_is_built_or_said_why_not() -> None:
    """Each entry of each vector's expected file is built (a Service with that expected
    verdict) or left out with its reason; none is dropped silently."""
    for reading in readings():
        expected = json.loads((VECTORS / f"{reading.name}.expected.json").read_text())
        built = {
            (service.namespace.split("-", 1)[1], service.name)
            for service in reading.services
            if service.expected is not None
        }
        for entry in expected["services"]:
            key = (entry["namespace"], entry["name"])
            where = f"{key[0]}/{key[1]} {entry['address_type']}"
            reasons = [line for line in reading.left_out if line.startswith(where + ": ")]
            if entry["address_type"] == "IPv4" and key in built:
                assert not reasons, (reading.name, where)
            else:
                assert len(reasons) == 1, (reading.name, where, reading.left_out)
        assert reading.built_entries + len(reading.left_out) == reading.entries
