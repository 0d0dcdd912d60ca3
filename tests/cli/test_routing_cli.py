"""`--dataplane` through the real CLI: evaluate, explain and serve (behaviour §10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.cli import build_parser
from exporter.cli.arguments import parse_dataplanes
from exporter.engine import DataPlane
from exporter.run.serve import ServeOptions
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR
from tests.conftest import run_cli as run
from tests.k8s_objects import (
    Obj,
    as_list,
    endpoint,
    endpoint_slice,
    service,
    three_zone_nodes,
    zone_endpoints,
)

ALL_IDS = ",".join(DataPlane)
READY_ABSENT = CONFORMANCE_DIR / "upstream-addhints-2-ready-1-unready-1-unknown-after.snapshot.json"


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("command", ["evaluate", "explain", "serve"])
def test_unknown_data_plane_exits_2_listing_the_valid_ids(command: str) -> None:
    """One line on stderr naming the bad id and every valid one; nothing on stdout."""
    completed = run(command, "--snapshot", str(READY_ABSENT), "--dataplane", "kube-proxy,cilum")
    assert completed.returncode == 2
    assert completed.stdout == ""
    (line,) = completed.stderr.splitlines()
    assert "'cilum'" in line
    for dataplane in DataPlane:
        assert dataplane in line


def test_ready_condition_absent_routes_cluster_and_explain_names_why() -> None:
    """The vector's endpoint with `conditions: {}`: enabled, 100% complete, and yet cluster."""
    completed = run("evaluate", "--snapshot", str(READY_ABSENT))
    assert completed.returncode == 0, completed.stderr
    (entry,) = json.loads(completed.stdout)["services"]
    assert entry["expected_state"] == "enabled"
    assert entry["hint_completeness"] == 1.0
    routing = entry["routing"]["kube-proxy"]
    assert routing
    assert all(set(counts) == {"cluster"} for counts in routing.values())
    assert entry["local_routing_ratio"] == {"kube-proxy": 0.0}

    completed = run("explain", "--snapshot", str(READY_ABSENT))
    # kube-proxy follows no hint: the Service asks for hints and does not get them.
    assert completed.returncode == 1, completed.stderr
    text = flat(completed.stdout)
    assert (
        "Effective routing: kube-proxy: cluster-wide on every node: endpoint 10.1.2.6 has no "
        "`ready` condition, so kube-proxy counts it and the controller never hints it" in text
    )
    # The answer leads: before the controller's verdict.
    assert text.index("Effective routing:") < text.index("Verdict:")


def test_explain_gives_one_routing_paragraph_per_data_plane() -> None:
    """Each configured data plane, in the order given; local routings say on how many nodes."""
    completed = run(
        "explain",
        "--snapshot",
        str(EXAMPLES_DIR / "partial-hints-ignored.json"),
        "--dataplane",
        "calico-ebpf,cilium-no-topology",
    )
    assert completed.returncode in {0, 1}, completed.stderr  # 1: some Service lacks hints
    text = flat(completed.stdout)
    assert "Effective routing: calico-ebpf: same-zone on 6 of 6 nodes cilium-no-topology:" in text
    assert "cilium-no-topology ignores every hint" in text
    assert "kube-proxy: cluster-wide" not in text


def test_fail_closed_is_named() -> None:
    """Zones refused by cilium-1.18.0 and ingress-nginx: no endpoints, and why, with the issue."""
    name = "upstream-utils-giving-receiving-preference-for-same-zone-before"
    snapshot = CONFORMANCE_DIR / f"{name}.snapshot.json"
    completed = run(
        "explain", "--snapshot", str(snapshot), "--dataplane", "cilium-1.18.0,ingress-nginx"
    )
    assert completed.returncode in {0, 1}, completed.stderr  # 1: some Service lacks hints
    text = flat(completed.stdout)
    assert (
        "cilium-1.18.0: same-zone on 1 of 3 nodes; no endpoints (fails closed) on 2 of 3 nodes "
        "(zone-b, zone-c): no ready endpoint is hinted for zone-b, zone-c, so cilium-1.18.0 "
        "gives these clients no endpoint at all (connections refused, cilium issue 41022"
    ) in text
    assert "(HTTP 503, ingress-nginx issue 11342)" in text


@pytest.mark.parametrize("example", sorted(EXAMPLES_DIR.glob("*.json")), ids=lambda path: path.stem)
def test_every_data_plane_runs_on_the_examples(example: object) -> None:
    """evaluate and explain with all eleven ids succeed; routing keys are the Ready zones."""
    completed = run("evaluate", "--snapshot", str(example), "--dataplane", ALL_IDS)
    assert completed.returncode == 0, completed.stderr
    for entry in json.loads(completed.stdout)["services"]:
        assert entry["routing"] is None or list(entry["routing"]) == list(DataPlane)
    completed = run("explain", "--snapshot", str(example), "--dataplane", ALL_IDS)
    assert completed.returncode in {0, 1}, completed.stderr  # 1: some Service lacks hints
    assert completed.stdout.count("Effective routing:") == completed.stdout.count("\nService ")


def test_serve_options_carry_the_data_planes() -> None:
    """serve parses --dataplane (repeatable, comma-separated, each once) into its options."""
    from exporter.cli.serve import serve_options  # noqa: PLC0415

    args = build_parser().parse_args(
        ["serve", "--dataplane", "cilium,kube-proxy", "--dataplane", "cilium"]
    )
    options = serve_options(args)
    assert options.dataplanes == (DataPlane.CILIUM, DataPlane.KUBE_PROXY)
    assert ServeOptions().dataplanes == (DataPlane.KUBE_PROXY,)
    assert parse_dataplanes(None) == (DataPlane.KUBE_PROXY,)


def write_list(path: Path, *groups: list[Obj] | Obj) -> str:
    path.write_text(json.dumps(as_list(*groups)), encoding="utf-8")
    return str(path)


def test_local_traffic_policy_is_local_only_where_an_endpoint_runs(tmp_path: Path) -> None:
    """internalTrafficPolicy Local with endpoints on 3 of 30 nodes: local there, dropped on
    the other 27 (not "local on 30 of 30 nodes"); the ratio is 10%, not 100%."""
    nodes = three_zone_nodes(per_zone=10)
    endpoints = [
        endpoint(f"10.0.0.{index}", f"zone-{zone}", f"node-{zone}-0")
        for index, zone in enumerate("abc", start=1)
    ]
    snapshot = write_list(
        tmp_path / "local.json",
        nodes,
        service("infra", "node-cache", internal_traffic_policy="Local"),
        endpoint_slice("infra", "node-cache-1", "node-cache", endpoints),
    )
    completed = run("evaluate", "--snapshot", snapshot, "--dataplane", "kube-proxy,istio")
    assert completed.returncode == 0, completed.stderr
    (entry,) = json.loads(completed.stdout)["services"]
    assert entry["proxy_mode_by_zone"] == dict.fromkeys(("zone-a", "zone-b", "zone-c"), "Local")
    for dataplane in ("kube-proxy", "istio"):
        assert entry["routing"][dataplane] == {
            zone: {"local": 1, "no-endpoints": 9} for zone in ("zone-a", "zone-b", "zone-c")
        }
        assert entry["local_routing_ratio"][dataplane] == pytest.approx(0.1)

    completed = run("explain", "--snapshot", snapshot, "infra/node-cache")
    text = flat(completed.stdout)
    assert (
        "kube-proxy: local on 3 of 30 nodes (internalTrafficPolicy: Local); dropped on the "
        "other 27: internalTrafficPolicy: Local sends in-cluster traffic only to an endpoint "
        "on the client's own node, and these nodes run none"
    ) in text
    assert "30 of 30" not in text


def test_explain_exit_status_follows_the_configured_data_planes() -> None:
    """Hints right and followed by kube-proxy, ignored by Cilium's default: the gate fails for
    the data plane the cluster runs, as the status page flags it."""
    snapshot = str(EXAMPLES_DIR / "healthy-three-zones.json")
    assert run("explain", "--summary", "--snapshot", snapshot).returncode == 0
    completed = run(
        "explain", "--summary", "--dataplane", "cilium-no-topology", "--snapshot", snapshot
    )
    assert completed.returncode == 1, completed.stdout
    assert completed.stdout.count("hints-ignored") >= 2
    completed = run("explain", "--dataplane", "cilium-no-topology", "--snapshot", snapshot)
    assert completed.returncode == 1
    assert "cilium-no-topology: cluster-wide on every node" in flat(completed.stdout)


def test_a_data_plane_that_fails_closed_fails_the_gate(tmp_path: Path) -> None:
    """cilium-1.18.0 refuses zone-c's clients (no endpoint hinted for it): an outage the gate
    reports as `fails-closed`, while kube-proxy alone falls back: `zone-fallback` (a warning
    its own alert covers)."""
    endpoints = [
        endpoint(f"10.0.0.{index}", zone, f"node-{zone[-1]}-0", hint_zones=(zone,))
        for index, zone in enumerate(["zone-a", "zone-a", "zone-b", "zone-b"], start=1)
    ]
    snapshot = write_list(
        tmp_path / "refused.json",
        three_zone_nodes(),
        service("shop", "web", traffic_distribution="PreferClose"),
        endpoint_slice("shop", "web-1", "web", endpoints),
    )
    kube_proxy = run("explain", "--summary", "--snapshot", snapshot)
    assert kube_proxy.returncode == 1
    assert "zone-fallback" in kube_proxy.stdout
    assert "fails-closed" not in kube_proxy.stdout
    completed = run("explain", "--summary", "--dataplane", "cilium-1.18.0", "--snapshot", snapshot)
    assert completed.returncode == 1
    assert "fails-closed" in completed.stdout


def test_a_headless_service_is_not_judged_on_hints_nobody_reads(tmp_path: Path) -> None:
    """Headless with topology-mode Auto and no hints yet: not `ineffective`, not `drifting`,
    and the gate passes; explain says why."""
    snapshot = write_list(
        tmp_path / "headless.json",
        three_zone_nodes(),
        service("shop", "db", topology_mode="Auto", cluster_ip="None"),
        endpoint_slice("shop", "db-1", "db", zone_endpoints(6, hinted=False)),
    )
    completed = run("explain", "--summary", "--snapshot", snapshot)
    assert completed.returncode == 0, completed.stdout
    assert "ineffective" not in completed.stdout
    assert "drifting" not in completed.stdout
    completed = run("explain", "--snapshot", snapshot, "shop/db")
    assert completed.returncode == 0
    assert "no data plane reads its hints" in flat(completed.stdout)
