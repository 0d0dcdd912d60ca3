"""One cause, one alert: the rules run by promtool over the exporter's own exposition.

Each example (and each conformance vector) is served from a snapshot, its scrape becomes
promtool input series held for an hour, and promtool checks which alerts fire per
(Service, address type) after every `for:` has elapsed. The examples' expected alerts are
written out below; for the vectors, promtool checks that no entry fires two Service alerts and
that every entry whose traffic leaves its zone although it asks for hints fires one.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.engine import DataPlane
from exporter.metrics import families as f
from exporter.metrics.family import PREFIX
from exporter.metrics.monitoring import JOB
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR, PROJECT_ROOT, require_binary
from tests.metrics.conftest import ServeSnapshot
from tests.scrape import base_url, parse, scrape

RULE_FILE = PROJECT_ROOT / "alerts" / "topology-hints.rules.yaml"
# Longer than every `for:` of the rules.
EVAL_TIME = "30m"
HELD = "x60"
INSTANCE = "10.0.0.7:9808"
# (alert, namespace, service, address_type); "" for the labels a cluster alert lacks.
Firing = tuple[str, str, str, str]
FIRING_BY_ENTRY = (
    'group by (alertname, namespace, service, address_type) (ALERTS{alertstate="firing"})'
)

SERVICE_ALERTS_PER_ENTRY = (
    "count by (namespace, service, address_type) ("
    " count by (alertname, namespace, service, address_type)"
    ' (ALERTS{alertstate="firing", address_type!=""})'
    ") > 1"
)
# Entries that ask for hints (a mechanism), have ready endpoints, and yet send some client's
# traffic out of its zone under some data plane: each must fire a Service alert.
UNCAUGHT_FAILURES = (
    f"({f.SERVICE_LOCAL_ROUTING_RATIO.name} < 1"
    f' and on (namespace, service) {f.SERVICE_INFO.name}{{mechanism!="none"}}'
    f" and on (namespace, service, address_type) {f.SERVICE_READY_ENDPOINTS.name} > 0)"
    ' unless on (namespace, service, address_type) ALERTS{alertstate="firing"}'
)
KP, CILIUM_1_18_0, NO_TOPOLOGY = (
    (DataPlane.KUBE_PROXY,),
    (DataPlane.CILIUM_1_18_0,),
    (DataPlane.CILIUM_NO_TOPOLOGY,),
)
# What fires for each example (and the two silent failures of SPEC section 10) per data plane
# configuration. TopologyHintsConfigIssue (info, per Service: a setting, reported beside the
# failure it explains) and TopologyHintsInsufficientNodeInfo (cluster-wide; see the runbooks'
# inhibition rule) are the only alerts beside an entry's one.
EXAMPLE_ALERTS: dict[tuple[str, tuple[DataPlane, ...]], set[Firing]] = {
    ("annotation-overrides-field", KP): {
        ("TopologyHintsDisabled", "payments", "checkout", "IPv4"),
        ("TopologyHintsConfigIssue", "payments", "checkout", ""),
    },
    ("demo-cluster", KP): {
        ("TopologyHintsDisabled", "payments", "checkout", "IPv4"),
        ("TopologyHintsDisabled", "payments", "ledger", "IPv4"),
        ("TopologyHintsIncomplete", "shop", "inventory", "IPv4"),
        ("TopologyHintsZoneOverloaded", "shop", "search", "IPv4"),
        ("TopologyHintsConfigIssue", "payments", "checkout", ""),
    },
    ("eight-replicas-refused", KP): {("TopologyHintsDisabled", "payments", "ledger", "IPv4")},
    ("healthy-three-zones", KP): set(),
    ("node-without-zone", KP): {
        ("TopologyHintsDisabled", "payments", "gateway", "IPv4"),
        ("TopologyHintsDisabled", "shop", "cart", "IPv4"),
        ("TopologyHintsInsufficientNodeInfo", "", "", ""),
    },
    # Partial hints: Incomplete alone, not Drift (hints-missing) nor Ignored beside it.
    ("partial-hints-ignored", KP): {("TopologyHintsIncomplete", "shop", "inventory", "IPv4")},
    ("prefer-same-zone-thin-zone", KP): {("TopologyHintsZoneOverloaded", "shop", "search", "IPv4")},
    # Cilium 1.18.0 does not read PreferSameZone: no overload, the hints are ignored.
    ("prefer-same-zone-thin-zone", CILIUM_1_18_0): {
        ("TopologyHintsIgnored", "shop", "search", "IPv4")
    },
    # Cilium's default ignores every hint of healthy Services.
    ("healthy-three-zones", NO_TOPOLOGY): {
        ("TopologyHintsIgnored", "shop", "cart", "IPv4"),
        ("TopologyHintsIgnored", "shop", "catalog", "IPv4"),
    },
}
# The two silent failures on the conformance vectors that show them.
VECTOR_ALERTS: dict[tuple[str, tuple[DataPlane, ...]], set[Firing]] = {
    # An endpoint whose conditions are {}: kube-proxy ignores every hint.
    ("upstream-addhints-2-ready-1-unready-1-unknown-after", KP): {
        ("TopologyHintsIgnored", "ns", "svc", "IPv4")
    },
    # A zone without a hinted endpoint: Cilium 1.18.0 refuses its clients; kube-proxy's
    # ZoneFallback defers to it.
    ("upstream-kubeproxy-empty-node-labels", CILIUM_1_18_0): {
        ("TopologyHintsFailClosed", "ns", "svc", "IPv4")
    },
}
# A deterministic sample of the vectors, run with every data plane at once.
SAMPLED_VECTORS = sorted(path.name.removesuffix(".snapshot.json")
                         for path in CONFORMANCE_DIR.glob("*.snapshot.json"))[::5]  # fmt: skip


def _quoted(value: str) -> str:
    return json.dumps(value)


def input_series(exposition: str) -> list[dict[str, str]]:
    """The topology_hints_* samples of a scrape as promtool series, as Prometheus stores them."""
    metrics = parse(exposition)
    series = [
        {"series": f'up{{job="{JOB}", instance="{INSTANCE}"}}', "values": f"1{HELD}"},
    ]
    for (name, labels), value in sorted(metrics.samples.items(), key=str):
        if not name.startswith(PREFIX) or name.endswith("_created") or not math.isfinite(value):
            continue
        # Prometheus drops empty labels at ingestion.
        pairs = [f"{key}={_quoted(label)}" for key, label in sorted(labels) if label]
        selector = ", ".join([f'job="{JOB}"', f'instance="{INSTANCE}"', *pairs])
        series.append({"series": f"{name}{{{selector}}}", "values": f"{value!r}{HELD}"})
    return series


def firing_samples(firing: Iterable[Firing]) -> list[dict[str, Any]]:
    samples = []
    for alert, namespace, service, address_type in sorted(firing):
        labels = {"alertname": alert, "namespace": namespace, "service": service}
        labels["address_type"] = address_type
        selector = ", ".join(f"{key}={_quoted(value)}" for key, value in labels.items() if value)
        samples.append({"labels": f"{{{selector}}}", "value": 1})
    return samples


def run_promtool(tmp_path: Path, tests: Sequence[dict[str, Any]]) -> str:
    promtool = require_binary("promtool")
    document = {"rule_files": [str(RULE_FILE)], "evaluation_interval": "1m", "tests": list(tests)}
    path = tmp_path / "causes.test.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=1_000_000))
    result = subprocess.run(
        [promtool, "test", "rules", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    return result.stdout


def served_series(
    serve_snapshot: ServeSnapshot, snapshot: Path, dataplanes: tuple[DataPlane, ...]
) -> list[dict[str, str]]:
    with serve_snapshot(json.loads(snapshot.read_text()), dataplanes=dataplanes) as exporter:
        return input_series(scrape(base_url(exporter)).text)


def expect_firing(series: list[dict[str, str]], firing: set[Firing]) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {"expr": FIRING_BY_ENTRY, "eval_time": EVAL_TIME, "exp_samples": firing_samples(firing)}
        ],
    }


@pytest.mark.parametrize(
    ("snapshot", "dataplanes", "expected"),
    [
        *(
            (EXAMPLES_DIR / f"{name}.json", dataplanes, firing)
            for (name, dataplanes), firing in EXAMPLE_ALERTS.items()
        ),
        *(
            (CONFORMANCE_DIR / f"{name}.snapshot.json", dataplanes, firing)
            for (name, dataplanes), firing in VECTOR_ALERTS.items()
        ),
    ],
    ids=lambda value: value.name.split(".")[0] if isinstance(value, Path) else None,
)
def test_each_failure_fires_exactly_its_alert(
    snapshot: Path,
    dataplanes: tuple[DataPlane, ...],
    expected: set[Firing],
    serve_snapshot: ServeSnapshot,
    tmp_path: Path,
) -> None:
    """promtool: exactly the listed alerts fire, one per failing Service entry."""
    series = served_series(serve_snapshot, snapshot, dataplanes)
    run_promtool(tmp_path, [expect_firing(series, expected)])


def test_sampled_vectors_fire_one_alert_per_failing_entry(
    serve_snapshot: ServeSnapshot, tmp_path: Path
) -> None:
    """promtool, with all eleven data planes: no entry fires two Service alerts, and every entry
    that asks for hints yet sends traffic out of its zone under some data plane fires one."""
    tests = []
    for name in SAMPLED_VECTORS:
        series = served_series(
            serve_snapshot, CONFORMANCE_DIR / f"{name}.snapshot.json", tuple(DataPlane)
        )
        tests.append(
            {
                "name": name,
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": SERVICE_ALERTS_PER_ENTRY, "eval_time": EVAL_TIME, "exp_samples": []},
                    {"expr": UNCAUGHT_FAILURES, "eval_time": EVAL_TIME, "exp_samples": []},
                ],
            }
        )
    assert len(tests) >= 10
    run_promtool(tmp_path, tests)
