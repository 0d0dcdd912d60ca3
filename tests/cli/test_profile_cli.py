"""behaviour §12 through the real CLI: evaluate, explain and what-if under several profiles."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.test_routing_cli import flat
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR
from tests.conftest import run_cli as run

SAME_NODE = str(CONFORMANCE_DIR / "proxy-samenode-all-node-hints.snapshot.json")
PREFER_CLOSE = str(CONFORMANCE_DIR / "upstream-trafficdist-prefer-close-zone-hints.snapshot.json")
KUBE_PROXIES = "kube-proxy,kube-proxy-1.29,kube-proxy-1.33"


def evaluate(snapshot: str, *args: str) -> dict[str, Any]:
    completed = run("evaluate", "--snapshot", snapshot, *args)
    assert completed.returncode == 0, completed.stderr
    document: dict[str, Any] = json.loads(completed.stdout)
    return document


def only_entry(document: dict[str, Any]) -> dict[str, Any]:
    (entry,) = document["services"]
    found: dict[str, Any] = entry
    return found


NEWEST = {"PreferSameTrafficDistribution": True}
GATES_1_34 = {
    "TopologyAwareHints": True,
    "ServiceTrafficDistribution": True,
    "PreferSameTrafficDistribution": True,
}
GATES_1_32 = {"TopologyAwareHints": True, "ServiceTrafficDistribution": True}


def test_a_snapshot_without_flags_is_evaluated_with_the_newest_semantics_assumed() -> None:
    document = evaluate(SAME_NODE, "--dataplane", KUBE_PROXIES)
    assert document["kubernetes"] == {
        "version": None,
        "binary_version": None,
        "source": "assumed",
        "feature_gates": NEWEST,
        "kube_proxy": {"version": None, "source": "assumed", "feature_gates": NEWEST},
    }
    entry = only_entry(document)
    routing = entry["routing"]
    # The three fixed kube-proxy ids, whatever the profile.
    assert routing["kube-proxy"]["zone-b"] == {"same-node": 2}
    assert routing["kube-proxy-1.33"] == {
        "zone-a": {"same-zone": 2},
        "zone-b": {"same-zone": 2},
        "zone-c": {"cluster": 1},
    }
    assert set(routing["kube-proxy-1.29"]["zone-a"]) == {"cluster"}
    assert entry["notices"] == []


def test_kube_proxy_1_32_routes_prefer_same_node_same_zone() -> None:
    """Version skew: a 1.34 control plane writes node hints that kube-proxy 1.32 ignores."""
    document = evaluate(
        SAME_NODE,
        "--kubernetes-version",
        "1.34",
        "--kube-proxy-version",
        "1.32",
        "--dataplane",
        KUBE_PROXIES,
    )
    assert document["kubernetes"] == {
        "version": "1.34",
        "binary_version": None,
        "source": "flag",
        "feature_gates": GATES_1_34,
        "kube_proxy": {"version": "1.32", "source": "flag", "feature_gates": GATES_1_32},
    }
    entry = only_entry(document)
    assert entry["mechanism"] == "traffic-distribution"
    assert entry["routing"]["kube-proxy"] == entry["routing"]["kube-proxy-1.33"]
    assert entry["proxy_same_node"] == []
    assert set(entry["proxy_mode_by_zone"].values()) == {"PreferSameZone", "Cluster"}


def test_a_1_33_control_plane_refuses_prefer_same_node() -> None:
    entry = only_entry(evaluate(SAME_NODE, "--kubernetes-version", "1.33"))
    assert entry["mechanism"] == "none"
    assert entry["expected_state"] == "not-applicable"
    assert "traffic-distribution-unsupported" in entry["config_issues"]
    # The node hints in place would be removed by the controller.
    assert entry["drift"] == ["unexpected-hints"]
    enabled = only_entry(
        evaluate(
            SAME_NODE,
            "--kubernetes-version",
            "1.33",
            "--feature-gates",
            "PreferSameTrafficDistribution=true",
        )
    )
    assert enabled["mechanism"] == "traffic-distribution"
    assert enabled["config_issues"] == []


def test_kube_proxy_1_29_needs_the_annotation() -> None:
    document = evaluate(PREFER_CLOSE, "--kubernetes-version", "1.29", "--dataplane", KUBE_PROXIES)
    assert document["kubernetes"]["kube_proxy"]["source"] == "control-plane"
    entry = only_entry(document)
    assert entry["mechanism"] == "none"
    assert "traffic-distribution-unsupported" in entry["config_issues"]
    assert entry["routing"]["kube-proxy"] == entry["routing"]["kube-proxy-1.29"]
    assert set(entry["proxy_mode_by_zone"].values()) == {"Cluster"}
    text = flat(run("explain", "--snapshot", PREFER_CLOSE, "--kubernetes-version", "1.29").stdout)
    assert "kube-proxy looks at topology only with a topology-mode" in text
    assert "trafficDistribution needs kube-proxy 1.31 or the ServiceTrafficDistribution" in text


@pytest.mark.parametrize(("version", "notices"), [("1.34", ["prefer-close-deprecated"]),
                                                  ("1.33", []), ("1.31", [])])  # fmt: skip
def test_prefer_close_notice_follows_the_control_plane(version: str, notices: list[str]) -> None:
    entry = only_entry(evaluate(PREFER_CLOSE, "--kubernetes-version", version))
    assert entry["notices"] == notices
    assert entry["mechanism"] == "traffic-distribution"


def test_a_notice_never_changes_the_exit_status() -> None:
    """PreferClose on 1.34: the notice is shown, the Service still gets its hints: exit 0."""
    completed = run("explain", "--snapshot", PREFER_CLOSE, "--kubernetes-version", "1.34")
    assert completed.returncode == 0, completed.stdout
    assert "Notices:" in completed.stdout
    assert "PreferSameZone means the same" in flat(completed.stdout)
    summary = run(
        "explain", "--snapshot", PREFER_CLOSE, "--kubernetes-version", "1.34", "--summary"
    )
    assert summary.returncode == 0


def test_explain_names_the_profile_and_the_skew() -> None:
    assumed = run("explain", "--snapshot", SAME_NODE)
    assert "assuming Kubernetes 1.34 or newer; pass --kubernetes-version" in assumed.stdout
    skewed = run("explain", "--snapshot", SAME_NODE, "--kube-proxy-version", "1.32")
    # zone-c has no hinted endpoint: kube-proxy sends its traffic cluster-wide (zone-fallback).
    assert skewed.returncode == 1, skewed.stdout
    assert (
        "zone-fallback"
        in run(
            "explain", "--snapshot", SAME_NODE, "--kube-proxy-version", "1.32", "--summary"
        ).stdout
    )
    assert (
        "PreferSameNode needs kube-proxy 1.34 or the PreferSameTrafficDistribution gate: "
        "kube-proxy 1.32 routes this Service same-zone"
    ) in flat(skewed.stdout)
    refused = run("explain", "--snapshot", SAME_NODE, "--kubernetes-version", "1.33")
    # A Service asking for hints that this control plane refuses is a problem: exit 1.
    assert refused.returncode == 1
    assert "traffic-distribution-unsupported" in refused.stdout
    assert "PreferClose works from 1.31" in flat(refused.stdout)


@pytest.mark.parametrize("command", ["evaluate", "explain", "what-if"])
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--kubernetes-version", "1.35", "--feature-gates", "PreferSameTrafficDistribution=false"],
         ("cannot set feature gate PreferSameTrafficDistribution to false, feature is locked to "
         "true in Kubernetes 1.35")),
        (["--kubernetes-version", "1.36", "--kube-proxy-version", "1.33", "--feature-gates",
          "ServiceTrafficDistribution=false"],
         ("cannot set feature gate ServiceTrafficDistribution to false, feature is locked to true "
         "in kube-proxy 1.33")),
        (["--kubernetes-version", "1.36", "--feature-gates", "ServiceTrafficDistribution=true"],
         "unrecognized feature gate: ServiceTrafficDistribution (removed in Kubernetes 1.36)"),
        (["--kubernetes-version", "1.32", "--feature-gates", "PreferSameTrafficDistribution=true"],
         "unrecognized feature gate: PreferSameTrafficDistribution (added in Kubernetes 1.33)"),
        (["--kubernetes-version", "1.33", "--feature-gates", "TopologyAwareHints=false"],
         "cannot set feature gate TopologyAwareHints to false, feature is locked to true"),
        (["--kubernetes-version", "one.thirty"], "expected 1.MINOR"),
        (["--kubernetes-version", ""], "expected 1.MINOR"),
        (["--kube-proxy-version", "1.\u0663\u0663"], "expected 1.MINOR"),
        (["--kubernetes-version", "1.33" * 1000], "expected 1.MINOR"),
        (["--kubernetes-version", "1." + "3" * 4301], "expected 1.MINOR"),
        (["--feature-gates", "SidecarContainers=true"], "is not a gate the rules read"),
        (["--feature-gates", "ServiceTrafficDistribution=yes"], "invalid value of"),
    ],
)  # fmt: skip
def test_bad_profile_flags_exit_2_with_one_line(
    command: str, flags: list[str], message: str
) -> None:
    completed = run(command, "--snapshot", SAME_NODE, *flags)
    assert completed.returncode == 2
    assert completed.stdout == ""
    (line,) = completed.stderr.splitlines()
    assert message in line


def test_older_than_1_29_says_so() -> None:
    completed = run("evaluate", "--snapshot", PREFER_CLOSE, "--kubernetes-version", "1.27")
    assert completed.returncode == 0
    assert "Kubernetes 1.27 is older than 1.29: evaluated as 1.29" in completed.stderr
    assert json.loads(completed.stdout)["kubernetes"]["version"] == "1.27"


def test_what_if_follows_the_profile() -> None:
    """The converged routing under kube-proxy 1.33 never keeps traffic on its node."""
    demo = str(EXAMPLES_DIR / "demo-cluster.json")
    newest = run("what-if", "--snapshot", demo, "--lose-zone", "eu-west-1a", "-o", "json", "--all")
    old = run(
        "what-if",
        "--snapshot",
        demo,
        "--lose-zone",
        "eu-west-1a",
        "-o",
        "json",
        "--all",
        "--kubernetes-version",
        "1.33",
    )
    assert newest.returncode in {0, 1}
    assert old.returncode in {0, 1}
    search = [
        entry
        for entry in json.loads(old.stdout)["services"]
        if (entry["namespace"], entry["name"]) == ("shop", "search")
    ]
    assert search
    assert search[0]["before"]["expected_state"] == "not-applicable"
