"""Each example snapshot in examples/ tells its story through the real `evaluate` command."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES_DIR, exporter_command

MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SERVICE_NAME = "kubernetes.io/service-name"
TOPOLOGY_MODE = "service.kubernetes.io/topology-mode"


def evaluate(snapshot: Path) -> dict[str, Any]:
    completed = subprocess.run(
        [*exporter_command(), "evaluate", "--snapshot", str(snapshot)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    document: dict[str, Any] = json.loads(completed.stdout)
    return document


def entry(document: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any]
    (found,) = [
        service
        for service in document["services"]
        if (service["namespace"], service["name"]) == (namespace, name)
    ]
    return found


def load(name: str) -> dict[str, Any]:
    snapshot: dict[str, Any] = json.loads((EXAMPLES_DIR / f"{name}.json").read_text())
    return snapshot


def items_of(snapshot: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [item for item in snapshot["items"] if item["kind"] == kind]


def rewritten(tmp_path: Path, snapshot: dict[str, Any]) -> dict[str, Any]:
    """Evaluate a changed copy of an example: the counterfactual that proves its point."""
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(snapshot))
    return evaluate(path)


def story_healthy_three_zones(document: dict[str, Any], _tmp_path: Path) -> None:
    cart = entry(document, "shop", "cart")
    assert (cart["mechanism"], cart["expected_state"], cart["reason"]) == ("auto", "enabled", None)
    assert cart["ready_endpoints"] == 9
    assert cart["hint_completeness"] == 1
    assert cart["drift"] == []
    for zone in cart["zones"].values():
        assert zone["minimum"] <= zone["hinted"] <= zone["maximum"]
        assert zone["load_factor"] == pytest.approx(1.0)
    catalog = entry(document, "shop", "catalog")
    assert (catalog["mechanism"], catalog["expected_state"]) == ("traffic-distribution", "enabled")
    for service in (cart, catalog):
        assert set(service["proxy_mode_by_zone"].values()) == {"PreferSameZone"}
        assert service["config_issues"] == []


def story_eight_replicas_refused(document: dict[str, Any], _tmp_path: Path) -> None:
    ledger = entry(document, "payments", "ledger")
    assert ledger["mechanism"] == "auto"
    assert ledger["ready_endpoints"] == 8
    ratios = document["cluster"]["zone_cpu_ratio"].values()
    assert list(ratios) == pytest.approx([1 / 3] * 3)
    assert ledger["expected_state"] == "disabled"
    assert ledger["reason"] == "MinAllocationExceedsOverloadThreshold"
    assert ledger["nearest_feasible_endpoints"] == {"below": 7, "above": 9}
    assert ledger["hint_completeness"] == 0
    assert set(ledger["proxy_mode_by_zone"].values()) == {"Cluster"}


def story_node_without_zone(document: dict[str, Any], tmp_path: Path) -> None:
    assert document["cluster"]["sufficient_node_info"] is False
    assert document["cluster"]["insufficient_nodes"] == ["worker-manual-01"]
    assert document["services"]
    for service in document["services"]:
        assert service["mechanism"] == "auto"
        assert (service["expected_state"], service["reason"]) == (
            "disabled",
            "InsufficientNodeInfo",
        )
        assert service["proxy_mode_by_zone"][""] == "Cluster"
    # Without that one node, the same Services get their hints.
    snapshot = load("node-without-zone")
    snapshot["items"] = [
        item for item in snapshot["items"] if item["metadata"]["name"] != "worker-manual-01"
    ]
    states = {service["expected_state"] for service in rewritten(tmp_path, snapshot)["services"]}
    assert states == {"enabled"}


def story_prefer_same_zone_thin_zone(document: dict[str, Any], _tmp_path: Path) -> None:
    search = entry(document, "shop", "search")
    assert (search["mechanism"], search["expected_state"]) == ("traffic-distribution", "enabled")
    (service,) = items_of(load("prefer-same-zone-thin-zone"), "Service")
    assert service["spec"]["trafficDistribution"] == "PreferSameZone"
    thin = min(search["zones"], key=lambda zone: search["zones"][zone]["endpoints"])
    assert search["zones"][thin]["endpoints"] == 1
    # Well above the 1.2 that auto's overload guard would allow.
    assert search["zones"][thin]["load_factor"] > 1.5
    assert search["proxy_mode_by_zone"][thin] == "PreferSameZone"
    assert search["hint_completeness"] == 1


def story_annotation_overrides_field(document: dict[str, Any], tmp_path: Path) -> None:
    checkout = entry(document, "payments", "checkout")
    (service,) = items_of(load("annotation-overrides-field"), "Service")
    assert service["spec"]["trafficDistribution"] == "PreferClose"
    assert checkout["mechanism"] == "auto"
    assert checkout["config_issues"] == ["annotation-shadows-traffic-distribution"]
    assert checkout["expected_state"] == "disabled"
    assert set(checkout["proxy_mode_by_zone"].values()) == {"Cluster"}
    # Remove the leftover annotation and PreferClose takes effect.
    snapshot = load("annotation-overrides-field")
    (service,) = items_of(snapshot, "Service")
    del service["metadata"]["annotations"][TOPOLOGY_MODE]
    fixed = entry(rewritten(tmp_path, snapshot), "payments", "checkout")
    assert (fixed["mechanism"], fixed["expected_state"]) == ("traffic-distribution", "enabled")
    assert fixed["config_issues"] == []


def story_partial_hints_ignored(document: dict[str, Any], _tmp_path: Path) -> None:
    inventory = entry(document, "shop", "inventory")
    assert inventory["mechanism"] == "traffic-distribution"
    assert 0 < inventory["hint_completeness"] < 1
    assert any(zone["hinted"] > 0 for zone in inventory["zones"].values())
    assert set(inventory["proxy_mode_by_zone"].values()) == {"Cluster"}
    assert inventory["drift"] == ["hints-missing"]


def story_demo_cluster(document: dict[str, Any], _tmp_path: Path) -> None:
    """The served demo holds every story that fits one cluster of healthy nodes."""
    verdicts = {
        (service["namespace"], service["name"]): (service["mechanism"], service["expected_state"])
        for service in document["services"]
    }
    assert verdicts == {
        ("payments", "checkout"): ("auto", "disabled"),
        ("payments", "ledger"): ("auto", "disabled"),
        ("shop", "cart"): ("auto", "enabled"),
        ("shop", "catalog"): ("traffic-distribution", "enabled"),
        ("shop", "frontend"): ("none", "not-applicable"),
        ("shop", "inventory"): ("traffic-distribution", "enabled"),
        ("shop", "search"): ("traffic-distribution", "enabled"),
    }
    search = entry(document, "shop", "search")
    assert max(zone["load_factor"] or 0 for zone in search["zones"].values()) > 1.2
    assert 0 < entry(document, "shop", "inventory")["hint_completeness"] < 1
    assert entry(document, "payments", "checkout")["config_issues"] == [
        "annotation-shadows-traffic-distribution"
    ]


STORIES: dict[str, Callable[[dict[str, Any], Path], None]] = {
    "healthy-three-zones": story_healthy_three_zones,
    "eight-replicas-refused": story_eight_replicas_refused,
    "node-without-zone": story_node_without_zone,
    "prefer-same-zone-thin-zone": story_prefer_same_zone_thin_zone,
    "annotation-overrides-field": story_annotation_overrides_field,
    "partial-hints-ignored": story_partial_hints_ignored,
    "demo-cluster": story_demo_cluster,
}


def test_every_example_has_a_story() -> None:
    """Each JSON file in examples/ is covered by a story test below, and each story has a file."""
    assert {path.stem for path in EXAMPLES_DIR.glob("*.json")} == set(STORIES)


@pytest.mark.parametrize("name", sorted(STORIES))
def test_example_tells_its_story(name: str, tmp_path: Path) -> None:
    """`evaluate` on the example shows the mechanism, verdict and figures the story is about."""
    STORIES[name](evaluate(EXAMPLES_DIR / f"{name}.json"), tmp_path)


@pytest.mark.parametrize("name", sorted(STORIES))
def test_example_is_shaped_like_kubectl_output(name: str) -> None:
    """The example is a List of 3-6 Ready Nodes, Services and controller-managed EndpointSlices."""
    snapshot = load(name)
    assert (snapshot["apiVersion"], snapshot["kind"]) == ("v1", "List")
    nodes = items_of(snapshot, "Node")
    assert 3 <= len(nodes) <= 6
    for node in nodes:
        assert node["status"]["allocatable"]["cpu"]
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert [condition["status"] for condition in ready] == ["True"]
    services = {item["metadata"]["name"] for item in items_of(snapshot, "Service")}
    slices = items_of(snapshot, "EndpointSlice")
    assert {item["metadata"]["labels"][SERVICE_NAME] for item in slices} == services
    for endpoint_slice in slices:
        labels = endpoint_slice["metadata"]["labels"]
        assert labels[MANAGED_BY] == "endpointslice-controller.k8s.io"
        for endpoint in endpoint_slice["endpoints"]:
            assert endpoint["targetRef"]["kind"] == "Pod"
            assert {"addresses", "conditions", "nodeName"} <= endpoint.keys()
    addresses = [endpoint["addresses"][0] for item in slices for endpoint in item["endpoints"]]
    assert len(addresses) == len(set(addresses))


def test_generator_writes_the_committed_examples(tmp_path: Path) -> None:
    """examples/generate.py regenerates every committed example byte for byte."""
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES_DIR / "generate.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    generated = sorted(path.name for path in tmp_path.glob("*.json"))
    assert generated == sorted(path.name for path in EXAMPLES_DIR.glob("*.json"))
    for name in generated:
        assert (tmp_path / name).read_bytes() == (EXAMPLES_DIR / name).read_bytes(), name
