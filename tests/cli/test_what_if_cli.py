"""`what-if` through the real CLI: answers checked against snapshots changed by hand."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR
from tests.conftest import run_cli as run

ZONE_LABEL = "topology.kubernetes.io/zone"
SERVICE_NAME = "kubernetes.io/service-name"
# Clusters of every shape the scenarios must handle: equal and uneven CPU, a node without a
# zone label, dual-stack Services, trafficDistribution, stale hints.
CLUSTERS = [
    EXAMPLES_DIR / "demo-cluster.json",
    EXAMPLES_DIR / "node-without-zone.json",
    EXAMPLES_DIR / "prefer-same-zone-thin-zone.json",
    CONFORMANCE_DIR / "random-000.snapshot.json",
    CONFORMANCE_DIR / "random-005.snapshot.json",
    CONFORMANCE_DIR / "upstream-setnodes-3-zones-4-2-1-nodes.snapshot.json",
    CONFORMANCE_DIR / "upstream-trafficdist-prefer-close-zone-hints.snapshot.json",
]
COMPARED = ("expected_state", "reason", "ready_endpoints", "nearest_feasible_endpoints")


def evaluate_document(items: list[dict[str, Any]], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "changed.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    completed = run("evaluate", "--snapshot", str(path))
    assert completed.returncode == 0, completed.stderr
    document: dict[str, Any] = json.loads(completed.stdout)
    return document


def items_of(path: Path) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(path.read_text())["items"]
    return items


def drop_endpoints(items: list[dict[str, Any]], gone: Any) -> list[dict[str, Any]]:
    changed = copy.deepcopy(items)
    for item in changed:
        if item.get("kind") == "EndpointSlice":
            item["endpoints"] = [e for e in item.get("endpoints") or [] if not gone(e)]
    return changed


def lose_zone_by_hand(items: list[dict[str, Any]], zone: str) -> list[dict[str, Any]]:
    removed = {
        item["metadata"]["name"]
        for item in items
        if item.get("kind") == "Node"
        and (item["metadata"].get("labels") or {}).get(ZONE_LABEL) == zone
    }
    kept = [i for i in items if not (i.get("kind") == "Node" and i["metadata"]["name"] in removed)]
    return drop_endpoints(kept, lambda e: e.get("zone") == zone or e.get("nodeName") in removed)


def lose_node_by_hand(items: list[dict[str, Any]], node: str) -> list[dict[str, Any]]:
    kept = [i for i in items if not (i.get("kind") == "Node" and i["metadata"]["name"] == node)]
    return drop_endpoints(kept, lambda e: e.get("nodeName") == node)


def zones_of(items: list[dict[str, Any]]) -> list[str]:
    return sorted(
        {
            zone
            for item in items
            if item.get("kind") == "Node"
            and (zone := (item["metadata"].get("labels") or {}).get(ZONE_LABEL))
        }
    )


def assert_after_matches(what_if: dict[str, Any], by_hand: dict[str, Any]) -> None:
    expected = {(s["namespace"], s["name"], s["address_type"]): s for s in by_hand["services"]}
    assert len(what_if["services"]) == len(expected)
    for entry in what_if["services"]:
        want = expected[entry["namespace"], entry["name"], entry["address_type"]]
        after = entry["after"]
        for key in COMPARED:
            assert after[key] == want[key], (entry["name"], key)
        for zone, allocation in after["zones"].items():
            for key in ("minimum", "desired", "maximum"):
                got, wanted = allocation[key], want["zones"][zone][key]
                assert got == pytest.approx(wanted), (entry["name"], zone, key)


@pytest.mark.parametrize("cluster", CLUSTERS, ids=lambda path: path.name.split(".")[0])
def test_lose_each_zone_matches_a_snapshot_changed_by_hand(cluster: Path, tmp_path: Path) -> None:
    """The after side of lose-zone equals `evaluate` on the snapshot edited the same way."""
    items = items_of(cluster)
    zones = zones_of(items)
    assert zones
    for zone in zones:
        completed = run(
            "what-if", "--snapshot", str(cluster), "--lose-zone", zone, "--all", "-o", "json"
        )
        assert completed.returncode in {0, 1}, completed.stderr
        by_hand = evaluate_document(lose_zone_by_hand(items, zone), tmp_path)
        assert_after_matches(json.loads(completed.stdout), by_hand)


@pytest.mark.parametrize("cluster", CLUSTERS[:3], ids=lambda path: path.name.split(".")[0])
def test_lose_a_node_matches_a_snapshot_changed_by_hand(cluster: Path, tmp_path: Path) -> None:
    items = items_of(cluster)
    node = next(i["metadata"]["name"] for i in items if i.get("kind") == "Node")
    completed = run(
        "what-if", "--snapshot", str(cluster), "--lose-node", node, "--all", "-o", "json"
    )
    assert completed.returncode in {0, 1}, completed.stderr
    assert_after_matches(
        json.loads(completed.stdout), evaluate_document(lose_node_by_hand(items, node), tmp_path)
    )


@pytest.mark.parametrize(("count", "change", "status"), [(8, "loses-hints", 1), (12, None, 0)])
def test_scale_of_the_demo_cart(count: int, change: str | None, status: int) -> None:
    """shop/cart runs 9 in 3 equal zones: 8 is refused (exit 1), 12 keeps hints (exit 0)."""
    completed = run(
        "what-if",
        "--snapshot",
        str(EXAMPLES_DIR / "demo-cluster.json"),
        "--scale",
        f"shop/cart={count}",
        "-o",
        "json",
    )
    assert completed.returncode == status, completed.stderr
    document = json.loads(completed.stdout)
    assert document["scenario"] == [{"scale": f"shop/cart={count}"}]
    changes = {(s["namespace"], s["name"]): s["change"] for s in document["services"]}
    assert changes.get(("shop", "cart")) == change
    if change is not None:
        cart = document["services"][0]
        assert cart["before"]["ready_endpoints"] == 9
        assert cart["after"]["ready_endpoints"] == count
        assert cart["after"]["nearest_feasible_endpoints"] == {"below": 7, "above": 9}


def scale_by_hand(
    items: list[dict[str, Any]], service: str, remove: dict[str, int], add: list[str]
) -> list[dict[str, Any]]:
    """The Service's slice with `remove[zone]` of its last endpoints in each zone deleted and
    one ready endpoint added per zone in `add`, edited in the raw JSON."""
    changed = copy.deepcopy(items)
    for item in changed:
        labels = item.get("metadata", {}).get("labels") or {}
        if item.get("kind") != "EndpointSlice" or labels.get(SERVICE_NAME) != service:
            continue
        endpoints = item["endpoints"]
        for zone, count in remove.items():
            for _ in range(count):
                last = max(i for i, e in enumerate(endpoints) if e.get("zone") == zone)
                del endpoints[last]
        for index, zone in enumerate(add):
            endpoints.append(
                {"addresses": [f"10.250.0.{index}"], "conditions": {"ready": True}, "zone": zone}
            )
    return changed


@pytest.mark.parametrize(
    ("target", "remove", "add"),
    [
        # 3/3/3: the fullest zone loses first, ties to the name that sorts first.
        ("shop/cart=7", {"eu-west-1a": 1, "eu-west-1b": 1}, []),
        # 3/3/2: eu-west-1a then eu-west-1b.
        ("payments/ledger=6", {"eu-west-1a": 1, "eu-west-1b": 1}, []),
        # 3/3/2: one more goes to the emptiest zone.
        ("payments/ledger=9", {}, ["eu-west-1c"]),
    ],
)
def test_scale_matches_a_snapshot_changed_by_hand(
    target: str, remove: dict[str, int], add: list[str], tmp_path: Path
) -> None:
    """Scaling the demo's auto Services equals evaluating the same edit made by hand."""
    cluster = EXAMPLES_DIR / "demo-cluster.json"
    completed = run("what-if", "--snapshot", str(cluster), "--scale", target, "--all", "-o", "json")
    assert completed.returncode in {0, 1}, completed.stderr
    name = target.split("/")[1].split("=", maxsplit=1)[0]
    by_hand = evaluate_document(scale_by_hand(items_of(cluster), name, remove, add), tmp_path)
    assert_after_matches(json.loads(completed.stdout), by_hand)


def test_text_names_the_change_the_reason_and_what_to_do() -> None:
    completed = run(
        "what-if", "--snapshot", str(EXAMPLES_DIR / "demo-cluster.json"), "--scale", "shop/cart=8"
    )
    assert completed.returncode == 1
    text = completed.stdout
    assert "Service shop/cart (IPv4): loses-hints" in text
    assert "disabled (MinAllocationExceedsOverloadThreshold), 8 ready endpoints" in text
    assert "run 7 or 9 ready endpoints after the change to keep hints on" in text
    assert max(len(line) for line in text.splitlines()) <= 100


@pytest.mark.parametrize(
    ("surge", "unavailable", "refused", "status"),
    [("1", "0", [], 0), ("2", "0", [11], 1), ("25%", "25%", [8, 11], 1)],
)
def test_rollout_gate(surge: str, unavailable: str, refused: list[int], status: int) -> None:
    """9 in 3 equal zones: 10 is fine, 11 and 8 are refused; 25% of 9 is 3 up and 2 down."""
    completed = run(
        "what-if",
        "--snapshot",
        str(EXAMPLES_DIR / "demo-cluster.json"),
        "--rollout",
        "shop/cart",
        "--max-surge",
        surge,
        "--max-unavailable",
        unavailable,
        "-o",
        "json",
    )
    assert completed.returncode == status, completed.stderr
    [rollout] = json.loads(completed.stdout)["rollout"]
    assert rollout["refused_counts"] == refused


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lose-zone", "mars-1a"], "no node has zone 'mars-1a'"),
        (["--lose-node", "ghost"], "no such node: ghost"),
        (["--scale", "shop/nothing=3"], "no such Service: shop/nothing"),
        (["--scale", "shop/cart=many"], "expected NAMESPACE/NAME=N"),
        (["--rollout", "shop/cart", "--max-surge", "0", "--max-unavailable", "0"], "both be 0"),
        (["--max-surge", "1"], "describe a --rollout"),
    ],
)
def test_bad_scenarios_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    completed = run("what-if", "--snapshot", str(EXAMPLES_DIR / "demo-cluster.json"), *args)
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.count("\n") == 1
    assert message in completed.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--scale", "shop/cart=8"],
        ["--rollout", "shop/cart", "--max-surge", "1"],
        ["--lose-zone", "eu-west-1a"],
        [],
    ],
)
def test_a_snapshot_without_nodes_exits_2_with_explain_s_line(
    args: list[str], tmp_path: Path
) -> None:
    """No Nodes: no zone shares, so no answer at all (not "0 lose hints", not an invented
    refused count); the one line is the sentence `explain` prints on the same file."""
    items = items_of(EXAMPLES_DIR / "healthy-three-zones.json")
    snapshot = tmp_path / "no-nodes.json"
    snapshot.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [item for item in items if item["kind"] != "Node"],
            }
        ),
        encoding="utf-8",
    )
    completed = run("what-if", "--snapshot", str(snapshot), *args)
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.count("\n") == 1
    explained = run("explain", "--snapshot", str(snapshot), "--summary")
    assert explained.returncode == 2
    warning = explained.stdout.splitlines()[0].removeprefix("Warning: ")
    assert completed.stderr == f"topology-hints-exporter: error: {warning}\n"
