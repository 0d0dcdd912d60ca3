"""`--dataplane` through the real CLI: evaluate, explain and serve (behaviour §10)."""

from __future__ import annotations

import json
import subprocess

import pytest

from exporter.cli import build_parser, parse_dataplanes
from exporter.engine import DataPlane
from exporter.serve import ServeOptions
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR, PROJECT_ROOT, exporter_command

ALL_IDS = ",".join(DataPlane)
READY_ABSENT = CONFORMANCE_DIR / "upstream-addhints-2-ready-1-unready-1-unknown-after.snapshot.json"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*exporter_command(), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=PROJECT_ROOT,
    )


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
    """evaluate and explain with all ten ids succeed; routing keys are the Ready zones."""
    completed = run("evaluate", "--snapshot", str(example), "--dataplane", ALL_IDS)
    assert completed.returncode == 0, completed.stderr
    for entry in json.loads(completed.stdout)["services"]:
        assert entry["routing"] is None or list(entry["routing"]) == list(DataPlane)
    completed = run("explain", "--snapshot", str(example), "--dataplane", ALL_IDS)
    assert completed.returncode in {0, 1}, completed.stderr  # 1: some Service lacks hints
    assert completed.stdout.count("Effective routing:") == completed.stdout.count("\nService ")


def test_serve_options_carry_the_data_planes() -> None:
    """serve parses --dataplane (repeatable, comma-separated, each once) into its options."""
    from exporter.cli import _serve_options  # noqa: PLC0415

    args = build_parser().parse_args(
        ["serve", "--dataplane", "cilium,kube-proxy", "--dataplane", "cilium"]
    )
    options = _serve_options(args)
    assert options.dataplanes == (DataPlane.CILIUM, DataPlane.KUBE_PROXY)
    assert ServeOptions().dataplanes == (DataPlane.KUBE_PROXY,)
    assert parse_dataplanes(None) == (DataPlane.KUBE_PROXY,)
