"""behaviour §12 through the real CLI against the test API server: emulated control planes,
TopologyAwareHints off, and /version answers that must not crash a one-shot command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_routing_cli import flat
from tests.conftest import CONFORMANCE_DIR
from tests.conftest import run_cli as run
from tests.k8s_objects import Obj, endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI

AUTO = str(CONFORMANCE_DIR / "upstream-reconciler-topology-auto-zone-c.snapshot.json")


def _cluster() -> list[Obj]:
    return [
        *three_zone_nodes(),
        service("shop", "zonal", traffic_distribution="PreferSameZone"),
        endpoint_slice("shop", "zonal-1", "zonal", zone_endpoints(6)),
    ]


def _entry(document: dict[str, Any], name: str) -> dict[str, Any]:
    (entry,) = (entry for entry in document["services"] if entry["name"] == name)
    found: dict[str, Any] = entry
    return found


def test_an_emulating_api_server_is_evaluated_at_the_emulated_version(
    kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    """/version says minor 36, emulationMinor 33: 1.33's gates, the binary's version beside,
    and explain's cluster section says both."""
    kube_api.kubernetes_version = "1.36"
    kube_api.emulated_version = "1.33"
    kube_api.load(_cluster())
    completed = run("evaluate", "--kubeconfig", str(kubeconfig))
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["kubernetes"] == {
        "version": "1.33",
        "binary_version": "1.36",
        "source": "api",
        "feature_gates": {"PreferSameTrafficDistribution": False},
        "kube_proxy": {
            "version": "1.33",
            "source": "control-plane",
            "feature_gates": {
                "TopologyAwareHints": True,
                "ServiceTrafficDistribution": True,
                "PreferSameTrafficDistribution": False,
            },
        },
    }
    zonal = _entry(document, "zonal")
    assert zonal["mechanism"] == "none"
    assert "traffic-distribution-unsupported" in zonal["config_issues"]
    explained = run("explain", "--kubeconfig", str(kubeconfig))
    assert explained.returncode == 1, explained.stderr
    cluster = explained.stdout.split("\n\n", 1)[0]
    assert cluster.splitlines()[:3] == [
        "Cluster",
        "  Kubernetes:        1.33, emulated by a 1.36 API server (the API server's /version):",
        "                       PreferSameTrafficDistribution off",
    ]
    # The 1.36 binary does not know the gate 1.36 removed, emulation or not.
    refused = run(
        "evaluate",
        "--kubeconfig",
        str(kubeconfig),
        "--kube-proxy-version",
        "1.36",
        "--feature-gates",
        "ServiceTrafficDistribution=true",
    )
    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()
    assert "unrecognized feature gate: ServiceTrafficDistribution" in line
    assert "Kubernetes 1.33, emulated by a 1.36 API server" in line


def test_a_version_minor_of_5000_digits_is_a_warning(
    kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    """Issue 30 finding 3, one-shot: a traceback before; now one warning, newest semantics."""
    kube_api.kubernetes_version = "1." + "3" * 5000
    kube_api.load(_cluster())
    completed = run("evaluate", "--kubeconfig", str(kubeconfig))
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    (warning,) = completed.stderr.splitlines()
    assert "does not read as 1.MINOR" in warning
    assert len(warning) < 300
    assert json.loads(completed.stdout)["kubernetes"]["source"] == "assumed"


def test_topology_aware_hints_off_on_1_32() -> None:
    """The controller writes no auto hints (mechanism none, a config issue, exit 1) and
    kube-proxy uses none: every zone routes cluster."""
    args = ("--snapshot", AUTO, "--kubernetes-version", "1.32")
    off = (*args, "--feature-gates", "TopologyAwareHints=false")
    completed = run("evaluate", *off)
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["kubernetes"]["feature_gates"] == {
        "TopologyAwareHints": False,
        "ServiceTrafficDistribution": True,
    }
    for entry in document["services"]:
        assert entry["mechanism"] == "none"
        assert entry["config_issues"] == ["topology-aware-hints-gate-off"]
        assert set(entry["proxy_mode_by_zone"].values()) == {"Cluster"}
    on = json.loads(run("evaluate", *args).stdout)
    assert {entry["mechanism"] for entry in on["services"]} == {"auto"}
    explained = run("explain", *off)
    assert explained.returncode == 1
    assert "topology-aware-hints-gate-off" in explained.stdout
    assert "runs with the TopologyAwareHints gate off" in flat(explained.stdout)


def test_the_refusal_of_a_removed_gate_is_the_components_line() -> None:
    completed = run(
        "evaluate",
        "--snapshot",
        AUTO,
        "--kubernetes-version",
        "1.36",
        "--feature-gates",
        "ServiceTrafficDistribution=true",
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr == (
        "topology-hints-exporter: error: --feature-gates: unrecognized feature gate: "
        "ServiceTrafficDistribution (removed in Kubernetes 1.36)\n"
    )


def test_1_37_and_newer() -> None:
    """1.37 is supported; 1.38 is evaluated as 1.37, with a warning."""
    supported = run("evaluate", "--snapshot", AUTO, "--kubernetes-version", "1.37")
    assert supported.returncode == 0
    assert supported.stderr == ""
    newer = run("evaluate", "--snapshot", AUTO, "--kubernetes-version", "1.38")
    assert newer.returncode == 0
    assert "Kubernetes 1.38 is newer than 1.37: evaluated as 1.37" in newer.stderr
    assert json.loads(newer.stdout)["kubernetes"]["version"] == "1.38"


PREFER_CLOSE = str(CONFORMANCE_DIR / "upstream-trafficdist-prefer-close-zone-hints.snapshot.json")


def test_evaluate_reports_each_supported_versions_gates() -> None:
    """Every minor of 1.29-1.37 through the real CLI: exactly its gates (section 12's table,
    tests/engine/test_profile.py), and PreferClose accepted from 1.31."""
    from tests.engine.test_profile import TABLE  # noqa: PLC0415 - the one hand-written table

    for minor, gates in TABLE.items():
        completed = run(
            "evaluate", "--snapshot", PREFER_CLOSE, "--kubernetes-version", f"1.{minor}"
        )
        assert completed.returncode == 0, completed.stderr
        document = json.loads(completed.stdout)
        expected = {str(gate): default for gate, (default, _) in gates.items()}
        assert document["kubernetes"]["feature_gates"] == expected, minor
        assert document["kubernetes"]["kube_proxy"]["feature_gates"] == expected, minor
        mechanisms = {entry["mechanism"] for entry in document["services"]}
        assert mechanisms == {"traffic-distribution" if minor >= 31 else "none"}, minor
