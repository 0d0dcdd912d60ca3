"""The Grafana dashboards: generated, committed, well-formed, and querying declared families."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from alerts import controller, recording, traffic
from alerts.generate import CONFIG, RECORDING_GROUPS
from alerts.generate import groups as rule_groups
from dashboards import generate
from dashboards.overview import overview
from exporter.metrics import families as f
from exporter.metrics.families import FAMILIES
from exporter.metrics.family import MetricType
from exporter.metrics.monitoring import JOB_SELECTOR, OVERLOAD_LIMIT, PROXY_MODES, MonitoringConfig
from tests.conftest import PROJECT_ROOT, require_binary
from tests.e2e.dashboard_queries import DASHBOARDS_DIR, dashboard_queries, variable_selectors

EXPECTED_FILES = {
    "topology-hints-overview.json": "topology-hints-overview",
    "topology-hints-service.json": "topology-hints-service",
    "topology-hints-nodes.json": "topology-hints-nodes",
}
SERVICE_UID = "topology-hints-service"
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Families no panel shows, each with the reason.
NOT_ON_DASHBOARDS = {
    f.READY.name: "the readiness probe (/readyz) and the scrape's `up` already show it",
    f.SHARD_ORDINAL.name: "a deployment setting, not a state to watch",
    f.TOTAL_SHARDS.name: "a deployment setting, not a state to watch",
    f.DATAPLANE_INFO.name: "a deployment setting; the routing panels name each data plane",
    f.STATUS_PAGE_INFO.name: "where the status page is: the alerts' explain_url reads it",
}
# Labels Prometheus adds or that PromQL itself uses, on top of the exporter's and the recording
# rules' own.
EXTRA_LABELS = {"cluster", "job", "le", *recording.RULE_LABELS, *traffic.RULE_LABELS}
# The recording rules (alerts/recording.py, alerts/traffic.py) the dashboards read:
# name -> expressions.
RECORDED: dict[str, list[str]] = {}
for _rule in recording.recording_rules(CONFIG.monitoring) + [
    rule for group in traffic.traffic_groups(CONFIG.monitoring) for rule in group["rules"]
]:
    RECORDED.setdefault(_rule["record"], []).append(_rule["expr"])
RECORDED_NAME = re.compile(r"\btopology_hints:[a-z0-9_]+:[a-z0-9_]+")

METRIC = re.compile(r"\btopology_hints_[a-z0-9_]+")
SELECTOR = re.compile(r"\b(topology_hints_[a-z0-9_]+)(\{[^}]*\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"[^"]*"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _dashboards() -> dict[str, dict[str, Any]]:
    return {
        name: json.loads((DASHBOARDS_DIR / name).read_text(encoding="utf-8"))
        for name in EXPECTED_FILES
    }


DASHBOARDS = _dashboards()


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' nested panels included, rows themselves excluded."""
    found = []
    pending = list(dashboard["panels"])
    while pending:
        panel = pending.pop(0)
        pending[0:0] = panel.get("panels", [])
        if panel["type"] != "row":
            found.append(panel)
    return found


def _queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return generate.panel_queries(dashboard)


# --- The exporter's family table --------------------------------------------------------------
def declared_families() -> tuple[dict[str, set[str]], set[str]]:
    """Every declared family with its labels, and the names of histogram families."""
    families = {family.name: set(family.labels) for family in FAMILIES}
    histograms = {family.name for family in FAMILIES if family.type is MetricType.HISTOGRAM}
    return families, histograms


def family_of(name: str, families: dict[str, set[str]], histograms: set[str]) -> str | None:
    """The family a series name belongs to (histogram series carry a suffix)."""
    if name in families:
        return name
    for suffix in HISTOGRAM_SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and base in histograms:
            return base
    return None


# --- Generation --------------------------------------------------------------------------------
def test_regenerating_reproduces_the_committed_json(tmp_path: Path) -> None:
    """`python -m dashboards.generate OUTDIR` writes exactly the committed files, byte for byte."""
    result = subprocess.run(
        [sys.executable, "-m", "dashboards.generate", str(tmp_path)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    generated = sorted(path.name for path in tmp_path.iterdir())
    committed = sorted(path.name for path in DASHBOARDS_DIR.glob("*.json"))
    assert generated == committed == sorted(EXPECTED_FILES)
    for name in generated:
        assert (tmp_path / name).read_bytes() == (DASHBOARDS_DIR / name).read_bytes(), (
            f"{name} is stale: run `python -m dashboards.generate`"
        )


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_json_has_sorted_keys_and_a_trailing_newline(name: str) -> None:
    """The committed JSON is in canonical form, so that diffs stay readable."""
    text = (DASHBOARDS_DIR / name).read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"


# --- Dashboard conventions ---------------------------------------------------------------------
@pytest.mark.parametrize(("name", "uid"), sorted(EXPECTED_FILES.items()))
def test_dashboard_identity(name: str, uid: str) -> None:
    """Each dashboard has its stable uid, the project tags and a link to its siblings."""
    dashboard = DASHBOARDS[name]
    assert dashboard["uid"] == uid
    assert dashboard["tags"] == ["topology-hints", "kubernetes"]
    assert dashboard["description"]
    assert any(
        link["type"] == "dashboards" and "topology-hints" in link["tags"] and link["includeVars"]
        for link in dashboard["links"]
    )


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_variables(name: str) -> None:
    """Variables are datasource, cluster (shown), namespace, and service on the drill-down."""
    dashboard = DASHBOARDS[name]
    variables = dashboard["templating"]["list"]
    expected = ["datasource", "cluster", "namespace"]
    if dashboard["uid"] == SERVICE_UID:
        expected.append("service")
    assert [variable["name"] for variable in variables] == expected
    datasource, cluster = variables[0], variables[1]
    assert datasource["type"] == "datasource"
    assert datasource["query"] == "prometheus"
    assert cluster["query"] == f"label_values(topology_hints_build_info{{{JOB_SELECTOR}}}, cluster)"
    assert cluster["hide"] == 0  # VariableHide.DONT_HIDE: harmless on a single cluster
    for variable in variables[1:]:
        assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_multi_cluster_flag_hides_or_shows_the_cluster_variable() -> None:
    """MonitoringConfig.show_multi_cluster (the mixin's showMultiCluster) shows the variable by
    default and hides it when false."""
    shown = json.loads(generate.render(overview(MonitoringConfig())))
    assert shown["templating"]["list"][1]["name"] == "cluster"
    assert shown["templating"]["list"][1]["hide"] == 0
    hidden = json.loads(generate.render(overview(MonitoringConfig(show_multi_cluster=False))))
    assert hidden["templating"]["list"][1]["hide"] == 2


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_panels_have_unit_description_datasource_and_queries(name: str) -> None:
    """Every panel has a unit, a description, ${datasource} and at least one query."""
    panels = _panels(DASHBOARDS[name])
    assert panels
    for panel in panels:
        title = panel["title"]
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{title}: no unit"
        assert panel.get("description"), f"{title}: no description"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, title
        assert panel["targets"], f"{title}: no query"
        for target in panel["targets"]:
            assert target["expr"], title
            assert target.get("datasource", panel["datasource"]) == panel["datasource"], title
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(set(ref_ids)) == len(ref_ids), f"{title}: duplicate refIds"
    ids = [panel["id"] for panel in DASHBOARDS[name]["panels"]]
    assert len(set(ids)) == len(ids)


def test_ratio_panels_use_percentunit_and_load_factor_has_its_threshold() -> None:
    """Shares are shown as percentages, and the load factor marks the engine's overload limit."""
    ratio_metrics = ("topology_hints_zone_cpu_ratio", "topology_hints_service_hint_completeness")
    checked = 0
    for dashboard in DASHBOARDS.values():
        for panel in _panels(dashboard):
            # Counting the series of a ratio family (e.g. zones) is not a ratio.
            exprs = [t["expr"] for t in panel["targets"] if not t["expr"].startswith("count")]
            unit = panel["fieldConfig"]["defaults"]["unit"]
            if any(metric in expr for metric in ratio_metrics for expr in exprs):
                assert unit == "percentunit", panel["title"]
                checked += 1
    assert checked >= 3
    service = DASHBOARDS["topology-hints-service.json"]
    (load_factor,) = [p for p in _panels(service) if p["title"] == "Zone load factor"]
    steps = load_factor["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert OVERLOAD_LIMIT in [step["value"] for step in steps]


def test_data_links_point_at_generated_dashboards() -> None:
    """Every `/d/<uid>` link in any dashboard names one of the generated dashboards."""
    uids = set(EXPECTED_FILES.values())
    linked = set()
    for name in EXPECTED_FILES:
        text = (DASHBOARDS_DIR / name).read_text(encoding="utf-8")
        linked |= set(re.findall(r"/d/([a-z0-9-]+)/", text))
    assert linked
    assert linked <= uids


# --- Queries against the declared families -----------------------------------------------------
def test_every_metric_is_a_declared_family() -> None:
    """Every metric name in a panel or variable query is a family of the exporter's table."""
    families, histograms = declared_families()
    used = set()
    for dashboard in DASHBOARDS.values():
        texts = [expr for _, expr in _queries(dashboard)]
        texts += [variable["query"] for variable in dashboard["templating"]["list"][1:]]
        for text in texts:
            used |= set(METRIC.findall(text))
    unknown = sorted(name for name in used if family_of(name, families, histograms) is None)
    assert not unknown, f"not declared in exporter/metrics/families/: {unknown}"


def test_every_declared_family_is_on_some_dashboard() -> None:
    """No family of the exporter's table is left out of the dashboards."""
    families, histograms = declared_families()
    used = set()
    for dashboard in DASHBOARDS.values():
        texts = [expr for _, expr in _queries(dashboard)]
        texts += [variable["query"] for variable in dashboard["templating"]["list"][1:]]
        # A recorded series shows the families its rule reads.
        texts += [
            expr
            for text in texts
            for name in RECORDED_NAME.findall(text)
            for expr in RECORDED[name]
        ]
        for text in texts:
            used |= {family_of(name, families, histograms) for name in METRIC.findall(text)}
    assert sorted(set(families) - used) == sorted(NOT_ON_DASHBOARDS)


def test_recorded_series_are_shipped_recording_rules() -> None:
    """Each `topology_hints:` series a panel reads is recorded by the rule file's recording
    group, and each panel selects it by cluster (its rule already applied the job selector)."""
    shipped = {
        rule["record"]
        for group in rule_groups(CONFIG)
        if group["name"] in RECORDING_GROUPS
        for rule in group["rules"]
    }
    read = set()
    for dashboard in DASHBOARDS.values():
        for title, expr in _queries(dashboard):
            for name in RECORDED_NAME.findall(expr):
                read.add(name)
                assert re.search(rf'{re.escape(name)}\{{cluster="\$cluster"', expr), title
    # Istio's zone pairs are an intermediate the traffic rules read, not a panel; the
    # controller cross-check's count is its alert's (alerts/controller.py).
    not_panels = {traffic.ZONE_PAIR_BYTES, controller.SERVICES_BY_TRAFFIC_DISTRIBUTION}
    assert read == shipped - not_panels == set(RECORDED) - not_panels


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_selectors_use_cluster_namespace_and_service(name: str) -> None:
    """Each selector matches cluster, namespace where the family has it, service on drill-down."""
    families, histograms = declared_families()
    dashboard = DASHBOARDS[name]
    for title, expr in _queries(dashboard):
        for metric, braces in SELECTOR.findall(expr):
            labels = families[family_of(metric, families, histograms) or metric]
            matched = {label for label, _ in MATCHER.findall(braces)}
            where = f"{title}: {metric}{braces}"
            assert "cluster" in matched, where
            assert "job" in matched, where
            assert ("namespace" in matched) == ("namespace" in labels), where
            if dashboard["uid"] == SERVICE_UID:
                assert ("service" in matched) == ("service" in labels), where


def test_label_names_are_declared_labels() -> None:
    """Labels in matchers, groupings, legends and label_values are exported (or cluster, le)."""
    families, _ = declared_families()
    known = set().union(*families.values()) | EXTRA_LABELS
    for dashboard in DASHBOARDS.values():
        texts = []
        for panel in _panels(dashboard):
            for target in panel["targets"]:
                texts.append(target["expr"])
                texts.append(target.get("legendFormat", ""))
        texts += [variable["query"] for variable in dashboard["templating"]["list"][1:]]
        for text in texts:
            used = {label for label, _ in MATCHER.findall(text)}
            used |= set(LEGEND_LABEL.findall(text))
            for group in GROUPING.findall(text):
                used |= {label.strip() for label in group.split(",") if label.strip()}
            used |= set(re.findall(r"^label_values\(.*,\s*(\w+)\)$", text))
            assert used <= known, f"unknown labels {sorted(used - known)} in {text!r}"


# --- PromQL validity with promtool -------------------------------------------------------------
def promtool_check(exprs: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run `promtool check rules` on one recording rule per expression."""
    promtool = require_binary("promtool")
    lines = ["groups:", "  - name: dashboards", "    rules:"]
    for index, expr in enumerate(exprs):
        lines.append(f"      - record: dashboard:query_{index}")
        lines.append(f"        expr: {json.dumps(expr)}")
    rules = tmp_path / "dashboard-queries.rules.yaml"
    rules.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return subprocess.run(
        [promtool, "check", "rules", str(rules)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    """promtool accepts every panel query and variable selector once variables are substituted."""
    queries = dashboard_queries("default", "web", cluster="prod", rate_interval="2m")
    selectors = variable_selectors("default", "web", cluster="prod")
    exprs = [expr for _, _, expr in queries] + [selector for _, _, selector, _ in selectors]
    assert len(queries) >= 40
    assert not any("$" in expr for expr in exprs)
    result = promtool_check(exprs, tmp_path)
    named = "\n".join(f"query_{index}: {expr}" for index, expr in enumerate(exprs))
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{named}"
    assert f"{len(exprs)} rules found" in result.stdout


def test_promtool_check_rejects_invalid_promql(tmp_path: Path) -> None:
    """The promtool check is not vacuous: a comparison mistaken for a join is refused."""
    result = promtool_check(
        [
            (
                "topology_hints_service_expected_enabled == 1 * on (namespace, service) "
                "group_left (mechanism) topology_hints_service_info"
            )
        ],
        tmp_path,
    )
    assert result.returncode != 0


def test_substitution_matches_grafana_variables() -> None:
    """The e2e helper substitutes namespace, service, cluster and the interval variables."""
    queries = dashboard_queries("shop", "cart", cluster="eu-1", rate_interval="3m")
    by_title = {(uid, title): expr for uid, title, expr in queries}
    changes = by_title[(SERVICE_UID, "Expected state changes")]
    assert 'namespace="shop"' in changes
    assert 'service="cart"' in changes
    assert 'cluster="eu-1"' in changes
    assert "[3m]" in changes
    uids = {uid for uid, _, _ in queries}
    assert uids == set(EXPECTED_FILES.values())


def test_proxy_mode_codes_map_back_to_their_mode() -> None:
    """The mode-by-zone timeline shows, for each numeric code, the mode the query encoded."""
    service = DASHBOARDS["topology-hints-service.json"]
    (panel,) = [p for p in _panels(service) if p["title"] == "kube-proxy mode by zone"]
    (target,) = panel["targets"]
    codes = re.findall(r'mode="(\w+)"\}\) \* (\d+)', target["expr"])
    assert sorted(mode for mode, _ in codes) == sorted(PROXY_MODES)
    (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
    assert {code: mapping["options"][code]["text"] for _, code in codes} == {
        code: mode for mode, code in codes
    }
