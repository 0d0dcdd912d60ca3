"""The monitoring mixin: generated, and rendering with the `jsonnet` package exactly what the
Python generators write, for the default `_config` and for overrides."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import _jsonnet
import pytest
import yaml

from alerts.generate import CONFIG, RECORDING_GROUPS, Config, groups
from alerts.traffic import ISTIO_GROUP, LINKERD_GROUP
from dashboards.generate import DASHBOARDS, panel_queries, render
from exporter.metrics.monitoring import (
    JOB_SELECTOR,
    MIXIN_CONFIG_NAMES,
    OVERLOAD_LIMIT,
    MonitoringConfig,
)
from mixin import generate
from tests.conftest import PROJECT_ROOT, require_binary
from tests.test_alerts import cluster_droppers

MIXIN_DIR = PROJECT_ROOT / "mixin"
RULE_FILE = PROJECT_ROOT / "alerts" / "topology-hints.rules.yaml"
DASHBOARDS_DIR = PROJECT_ROOT / "dashboards"

# A Prometheus that tells clusters apart by another label, scrapes the exporter under another
# job, and keeps its runbooks elsewhere.
SELECTOR = 'job="topology-hints", namespace="monitoring"'
OVERRIDES: dict[str, Any] = {
    "clusterLabel": "k8s_cluster",
    "topologyHintsExporterSelector": SELECTOR,
    "runbookURLPattern": "https://runbooks.example.org/topology-hints/%s.md",
    "showMultiCluster": False,
    "overloadLimit": 1.5,
    "flapWindow": "2h",
    "flapThreshold": 5,
    "istioZtunnelTraffic": False,
    "linkerdTraffic": True,
    "measuredCrossZoneMargin": 0.5,
    "measuredMinBytesPerSecond": 4096,
}
OVERRIDDEN = MonitoringConfig(
    cluster_label="k8s_cluster",
    selector=SELECTOR,
    runbook_url_pattern="https://runbooks.example.org/topology-hints/%s.md",
    show_multi_cluster=False,
    overload_limit=1.5,
    flap_window="2h",
    flap_threshold=5,
    istio_ztunnel_traffic=False,
    linkerd_traffic=True,
    measured_cross_zone_margin=0.5,
    measured_min_bytes_per_second=4096,
)


def render_mixin(config: dict[str, Any] | None = None) -> dict[str, Any]:
    """prometheusAlerts, prometheusRules and grafanaDashboards of the mixin, as kube-prometheus
    would evaluate them, with `config` merged into `_config`."""
    snippet = (
        "local mixin = (import 'mixin.libsonnet') + { _config+:: "
        + json.dumps(config or {})
        + " };\n{ alerts: mixin.prometheusAlerts, rules: mixin.prometheusRules,"
        " dashboards: mixin.grafanaDashboards }"
    )
    rendered: dict[str, Any] = json.loads(
        _jsonnet.evaluate_snippet("render.jsonnet", snippet, jpathdir=[str(MIXIN_DIR)])
    )
    return rendered


def python_groups(config: Config) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    every = groups(config)
    return (
        [group for group in every if group["name"] not in RECORDING_GROUPS],
        [group for group in every if group["name"] in RECORDING_GROUPS],
    )


def test_generator_reproduces_the_committed_mixin(tmp_path: Path) -> None:
    """`python -m mixin.generate` writes exactly the committed mixin/*.libsonnet."""
    subprocess.run(
        [sys.executable, "-m", "mixin.generate", "--root", str(tmp_path)],
        check=True,
        capture_output=True,
        cwd=PROJECT_ROOT,
    )
    generated = sorted(path.name for path in (tmp_path / "mixin").iterdir())
    committed = sorted(
        path.name
        for path in MIXIN_DIR.glob("*.libsonnet")
        if path.name not in generate.HAND_WRITTEN
    )
    assert generated == committed
    for name in generated:
        assert (tmp_path / "mixin" / name).read_bytes() == (MIXIN_DIR / name).read_bytes(), (
            f"mixin/{name} is stale: run `make generate`"
        )


def test_default_config_renders_the_generated_files() -> None:
    """With its default `_config` the mixin renders the committed rule file's alerting and
    recording groups and every committed dashboard."""
    rendered = render_mixin()
    committed_groups = yaml.safe_load(RULE_FILE.read_text(encoding="utf-8"))["groups"]
    alerting = [group for group in committed_groups if group["name"] not in RECORDING_GROUPS]
    recording = [group for group in committed_groups if group["name"] in RECORDING_GROUPS]
    assert rendered["alerts"] == {"groups": alerting}
    assert rendered["rules"] == {"groups": recording}
    assert recording[0]["rules"], "no recording rules"
    committed = {
        path.name: json.loads(path.read_text(encoding="utf-8"))
        for path in DASHBOARDS_DIR.glob("*.json")
    }
    assert len(committed) >= 3
    assert rendered["dashboards"] == committed


def test_default_config_is_the_shared_configuration() -> None:
    """`_config`'s defaults are MonitoringConfig's, under the monitoring-mixins names."""
    rendered = json.loads(
        _jsonnet.evaluate_snippet(
            "config.jsonnet", "(import 'mixin.libsonnet')._config", jpathdir=[str(MIXIN_DIR)]
        )
    )
    defaults = MonitoringConfig()
    assert rendered == {
        name: getattr(defaults, field) for field, name in MIXIN_CONFIG_NAMES.items()
    }
    assert set(OVERRIDES) == set(MIXIN_CONFIG_NAMES.values())
    # The engine's one overload limit, not a copy of its value.
    assert rendered["overloadLimit"] == OVERLOAD_LIMIT
    assert rendered["topologyHintsExporterSelector"] == JOB_SELECTOR


def test_overrides_render_what_the_generators_write_for_the_same_settings() -> None:
    """Overriding every `_config` key renders what the Python generators write for the same
    MonitoringConfig: the mixin has no setting of its own and misses no place."""
    rendered = render_mixin(OVERRIDES)
    alerting, recording = python_groups(Config(monitoring=OVERRIDDEN))
    assert rendered["alerts"] == {"groups": alerting}
    assert rendered["rules"] == {"groups": recording}
    assert rendered["dashboards"] == {
        name: json.loads(render(build(OVERRIDDEN))) for name, build in DASHBOARDS.items()
    }


def _rules(rendered: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        rule
        for part in ("alerts", "rules")
        for group in rendered[part]["groups"]
        for rule in group["rules"]
    ]


def test_overrides_reach_every_alert_rule_and_panel() -> None:
    """With the overrides, no rule or panel keeps the default job or `cluster` label: every
    expression selects the new job, every aggregation keeps the new cluster label, every
    runbook link uses the new pattern, and every panel selects the new cluster label."""
    rendered = render_mixin(OVERRIDES)
    default = MonitoringConfig()
    rules = _rules(rendered)
    assert len(rules) > 15
    for rule in rules:
        name = rule.get("alert") or rule["record"]
        text = json.dumps(rule)
        # The exporter's series carry the selector; mesh series and recorded ones do not.
        reads_exporter = re.search(r"\b(topology_hints_|up\{)", rule["expr"]) is not None
        assert (SELECTOR in rule["expr"]) == reads_exporter, name
        assert default.selector not in text, name
        # Prose such as "in-cluster traffic" is not the label.
        assert not re.search(r"(?<![\w-])cluster(?![\w-])", text), name
        assert cluster_droppers(rule["expr"], "k8s_cluster") == [], name
        if "alert" in rule:
            assert rule["annotations"]["runbook_url"] == (
                f"https://runbooks.example.org/topology-hints/{name.lower()}.md"
            )
    (overloaded,) = [r for r in rules if r.get("alert") == "TopologyHintsZoneOverloaded"]
    assert "> 1.5\n" in overloaded["expr"]
    (measured,) = [r for r in rules if r.get("alert") == "TopologyHintsMeasuredCrossZone"]
    assert "+ 0.5)" in measured["expr"]
    assert ">= 4096\n" in measured["expr"]

    for filename, dashboard in rendered["dashboards"].items():
        variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
        assert variables["cluster"]["hide"] == 2, filename  # showMultiCluster: false
        assert variables["cluster"]["query"].endswith(", k8s_cluster)"), filename
        queries = panel_queries(dashboard)
        assert queries, filename
        for title, expr in queries:
            assert 'k8s_cluster="$cluster"' in expr, (filename, title)
            # Metric names aside (topology_hints_cluster_info names the cluster, not a label).
            others = re.sub(r"\$cluster\b|\btopology_hints_\w+", "", expr).count("cluster")
            assert others == expr.count("k8s_cluster"), (filename, title)
            reads_raw = "topology_hints_" in expr
            assert (SELECTOR in expr) == reads_raw, title
            assert default.selector not in expr, (filename, title)


@pytest.mark.parametrize(
    ("switches", "expected"),
    [
        ({}, {ISTIO_GROUP, LINKERD_GROUP}),
        ({"istioZtunnelTraffic": False}, {LINKERD_GROUP}),
        ({"linkerdTraffic": False}, {ISTIO_GROUP}),
        ({"istioZtunnelTraffic": False, "linkerdTraffic": False}, set()),
    ],
)
def test_traffic_sources_are_switched_by_config(
    switches: dict[str, bool], expected: set[str]
) -> None:
    """Each traffic source's recording group is in prometheusRules exactly when its `_config`
    switch is on; the answers' group stays either way."""
    names = {group["name"] for group in render_mixin(switches)["rules"]["groups"]}
    assert names & {ISTIO_GROUP, LINKERD_GROUP} == expected
    assert set(RECORDING_GROUPS) - {ISTIO_GROUP, LINKERD_GROUP} <= names


def test_threshold_reaches_the_panels() -> None:
    """overloadLimit moves the load-factor panel's threshold and the overview's filter."""
    dashboards = render_mixin({"overloadLimit": 1.5})["dashboards"]
    service = json.dumps(dashboards["topology-hints-service.json"])
    overview = json.dumps(dashboards["topology-hints-overview.json"])
    assert '"value": 1.5' in service
    assert "> 1.5" in overview
    assert "1.2" not in overview


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", '"plain"'),
        ("{@@selector@@}", '"{" + $._config.topologyHintsExporterSelector + "}"'),
        ("@@runbook_url_pattern:x@@", '($._config.runbookURLPattern % "x")'),
        ("> 9753.1357\n", '"> " + std.toString($._config.overloadLimit) + "\\n"'),
        (">= 97531", '">= " + std.toString($._config.flapThreshold)'),
        ("1975310", '"1975310"'),
    ],
)
def test_markers_become_config_references(value: str, expected: str) -> None:
    """The generator's markers turn into `$._config` references and nothing else does."""
    assert generate.jsonnet(value) == expected


def test_marker_numbers_appear_nowhere_else() -> None:
    """The marker numbers are not values some rule or panel uses by itself."""
    text = RULE_FILE.read_text(encoding="utf-8") + "".join(
        path.read_text(encoding="utf-8") for path in DASHBOARDS_DIR.glob("*.json")
    )
    assert "9753" not in text
    assert "97531" not in text
    assert CONFIG.monitoring == MonitoringConfig()


# kube-prometheus is not vendored here: its entry point stands in with the fields the
# documented snippet reads and merges into.
KUBE_PROMETHEUS_STUB = "{ values:: { common: {}, grafana: {} } }"
DOCUMENTED = [PROJECT_ROOT / "docs" / "deploy.md", MIXIN_DIR / "README.md"]


def _import(base: str, rel: str) -> tuple[str, bytes]:
    """Resolve the documented snippets' imports: the vendored mixin and a kube-prometheus stub."""
    if rel == "kube-prometheus/main.libsonnet":
        return rel, KUBE_PROMETHEUS_STUB.encode()
    if rel.startswith("topology-hints-exporter-mixin/"):
        path = MIXIN_DIR / rel.removeprefix("topology-hints-exporter-mixin/")
    else:
        path = Path(base) / rel
    return str(path), path.read_bytes()


@pytest.mark.parametrize("document", DOCUMENTED, ids=lambda path: path.name)
def test_documented_jsonnet_evaluates(document: Path) -> None:
    """Each jsonnet snippet of the docs evaluates against the mixin and renders its rules and
    dashboards."""
    snippets = re.findall(r"```jsonnet\n(.*?)```", document.read_text(encoding="utf-8"), re.DOTALL)
    assert snippets
    for snippet in snippets:
        # A snippet that is a mixin (its fields hidden) is rendered as `jsonnet -e` would.
        wrapped = (
            f"local documented = (\n{snippet});\n"
            "if std.objectHasAll(documented, 'prometheusAlerts') then "
            "{ alerts: documented.prometheusAlerts, rules: documented.prometheusRules, "
            "dashboards: std.objectFieldsAll(documented.grafanaDashboards) } else documented"
        )
        rendered = json.loads(
            _jsonnet.evaluate_snippet(
                document.name, wrapped, import_callback=_import, jpathdir=[str(MIXIN_DIR)]
            )
        )
        text = json.dumps(rendered)
        assert "TopologyHintsExporterDown" in text
        assert "topology_hints:services_by_mechanism:count" in text


def test_overridden_rules_pass_promtool(tmp_path: Path) -> None:
    """The rules the mixin renders with every `_config` overridden are valid for Prometheus."""
    promtool = require_binary("promtool")
    rendered = render_mixin(OVERRIDES)
    rules = tmp_path / "rules.yaml"
    groups_ = rendered["alerts"]["groups"] + rendered["rules"]["groups"]
    rules.write_text(yaml.safe_dump({"groups": groups_}), encoding="utf-8")
    result = subprocess.run(
        [promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    count = sum(len(group["rules"]) for group in groups_)
    assert f"SUCCESS: {count} rules found" in result.stdout
