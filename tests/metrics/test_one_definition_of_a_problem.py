"""One definition of a problem (issue 18): every surface reads exporter.engine.problems.

On every example, several conformance vectors and a seeded random cluster, with
`--dataplane kube-proxy` and with `--dataplane cilium-no-topology`:
- the `"problems"` of `explain -o json` (the real CLI) and of `/api/v1/evaluation` (a live
  exporter serving the same snapshot) are equal for every entry;
- `explain --problems` lists exactly the entries with a problem;
- `explain --summary` exits 1 exactly when one exists (0 otherwise), and `--fail-on none`
  never fails;
- the alert rules, run by promtool over the live exporter's scrape, fire exactly the alerts
  the table says for those problems (one per entry, plus a config issue beside it).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.engine import DataPlane
from exporter.engine.problems import (
    ENTRY_ALERT_PRECEDENCE,
    PROBLEM_ORDER,
    PROBLEMS,
    ProblemId,
)
from exporter.web.table import status_view
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR, PROJECT_ROOT, run_cli
from tests.k8s_objects import Obj, as_list, endpoint, endpoint_slice, node, service
from tests.metrics.conftest import ServeSnapshot
from tests.metrics.test_alert_causes import (
    EVAL_TIME,
    Firing,
    firing_samples,
    input_series,
    run_promtool,
)
from tests.scrape import base_url, http_get, scrape

Entry = tuple[str, str, str]
Problems = dict[Entry, tuple[str, ...]]
DATAPLANES = (DataPlane.KUBE_PROXY, DataPlane.CILIUM_NO_TOPOLOGY)
VECTORS = (
    "upstream-addhints-2-ready-1-unready-1-unknown-after",
    "upstream-kubeproxy-empty-node-labels",
    *sorted(
        path.name.removesuffix(".snapshot.json") for path in CONFORMANCE_DIR.glob("*.snapshot.json")
    )[::25],
)
RULES = PROJECT_ROOT / "alerts" / "topology-hints.rules.yaml"
TABLE_ALERT_NAMES = "|".join(sorted({p.alert for p in PROBLEMS.values() if p.alert}))


def random_cluster(seed: int) -> Obj:
    """A cluster with every kind of Service the rules judge, drawn from a seeded generator."""
    chance = random.Random(seed)  # noqa: S311 - test data, not security
    zones = ["zone-a", "zone-b", "zone-c"][: chance.randint(2, 3)]
    nodes = [
        node(f"node-{index}", zones[index % len(zones)], chance.choice(["2", "4", "8"]))
        for index in range(chance.randint(3, 9))
    ]
    if chance.random() < 0.2:
        nodes.append(node("node-bare", None, "4"))
    items: list[Obj] = list(nodes)
    for index in range(40):
        name = f"svc-{index}"
        asks = chance.choice(["auto", "PreferClose", "PreferSameZone", None, "bogus"])
        items.append(
            service(
                "shop",
                name,
                topology_mode=asks if asks in ("auto", "bogus") else None,
                traffic_distribution=asks if asks in ("PreferClose", "PreferSameZone") else None,
                internal_traffic_policy=chance.choice(["Cluster", "Cluster", "Local"]),
                cluster_ip=chance.choice(["10.96.0.10"] * 9 + ["None"]),
            )
        )
        endpoints = []
        for number in range(chance.randint(0, 10)):
            where = chance.choice(nodes)
            zone = where["metadata"]["labels"].get("topology.kubernetes.io/zone")
            hinted = chance.random() < 0.6
            endpoints.append(
                endpoint(
                    f"10.{index}.0.{number + 1}",
                    zone,
                    where["metadata"]["name"],
                    ready=chance.choice([True, True, True, False, None]),
                    hint_zones=(chance.choice([zone, *zones]),) if hinted and zone else None,
                )
            )
        items.append(endpoint_slice("shop", f"{name}-1", name, endpoints))
    return as_list(items)


def inputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from sorted(EXAMPLES_DIR.glob("*.json"))
    for name in VECTORS:
        yield CONFORMANCE_DIR / f"{name}.snapshot.json"
    for seed in (1, 2, 3):
        path = tmp_path_factory.mktemp("random") / f"random-{seed}.json"
        path.write_text(json.dumps(random_cluster(seed)))
        yield path


def _entries(services: list[dict[str, Any]]) -> Problems:
    return {
        (entry["namespace"], entry["name"], entry["address_type"]): tuple(entry["problems"])
        for entry in services
    }


def _explain_json(snapshot: Path, dataplane: DataPlane, *flags: str) -> Problems:
    completed = run_cli(
        "explain", "-A", "-o", "json", "--snapshot", str(snapshot), "--dataplane", dataplane, *flags
    )
    assert completed.returncode in (0, 1), completed.stderr
    return _entries(json.loads(completed.stdout))


def _served(
    serve_snapshot: ServeSnapshot, snapshot: Path, dataplane: DataPlane
) -> tuple[Problems, Mapping[str, int], str]:
    """The live exporter's /api/v1/evaluation problems, its status page's problem counts
    and its scrape."""
    with serve_snapshot(json.loads(snapshot.read_text()), dataplanes=(dataplane,)) as exporter:
        url = base_url(exporter)
        status, body = http_get(url + "/api/v1/evaluation")
        assert status == 200, body
        counts = status_view(exporter.evaluator.state).counts["problem"]
        return _entries(json.loads(body)["services"]), counts, scrape(url).text


def paging_alerts(problems: Iterable[ProblemId]) -> tuple[str, ...]:
    """The alerts an entry with these problems fires, as the rules' precedence says: its
    first deferring problem's alert, and the alerts of problems reported beside it."""
    alerts: list[str] = []
    deferred = False
    for problem_id in problems:
        problem = PROBLEMS[problem_id]
        if problem.alert is None or (problem.deferring and deferred):
            continue
        alerts.append(problem.alert)
        deferred = deferred or problem.deferring
    return tuple(alerts)


def expected_firing(problems: dict[Entry, tuple[str, ...]]) -> set[Firing]:
    """What the table says fires: per entry its first deferring problem's alert, and the
    Service's config issue beside it (a per-Service alert: no address type)."""
    firing: set[Firing] = set()
    for (namespace, name, address_type), ids in problems.items():
        for alert in paging_alerts(ProblemId(problem) for problem in ids):
            per_service = alert == PROBLEMS[ProblemId.CONFIG_ISSUE].alert
            firing.add((alert, namespace, name, "" if per_service else address_type))
    return firing


def test_the_table_names_each_problem_once_with_an_alert_the_rules_define() -> None:
    rules = yaml.safe_load(RULES.read_text())
    severities = {
        rule["alert"]: rule["labels"]["severity"]
        for group in rules["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    assert tuple(ProblemId) == PROBLEM_ORDER
    for problem in PROBLEMS.values():
        if problem.alert is not None:
            assert severities[problem.alert] == problem.severity, problem.id
    from alerts.generate import ENTRY_PRECEDENCE  # noqa: PLC0415

    assert ENTRY_PRECEDENCE == ENTRY_ALERT_PRECEDENCE


@pytest.mark.parametrize("dataplane", DATAPLANES)
def test_every_surface_reads_the_same_problems(
    dataplane: DataPlane,
    serve_snapshot: ServeSnapshot,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tests = []
    seen: set[str] = set()
    for snapshot in inputs(tmp_path_factory):
        explained = _explain_json(snapshot, dataplane)
        live, page_counts, exposition = _served(serve_snapshot, snapshot, dataplane)
        assert explained == live, snapshot.name
        troubled = {entry for entry, problems in explained.items() if problems}
        # The status page counts what explain lists: any problem, and each one.
        listed_counts = Counter(problem for problems in explained.values() for problem in problems)
        assert dict(page_counts) == {
            **({"any": len(troubled)} if troubled else {"any": 0}),
            **listed_counts,
        }, snapshot.name
        seen.update(problem for problems in explained.values() for problem in problems)

        listed = _explain_json(snapshot, dataplane, "--problems")
        assert set(listed) == troubled, snapshot.name

        args = ("explain", "-A", "--summary", "--snapshot", str(snapshot), "--dataplane", dataplane)
        assert run_cli(*args).returncode == (1 if troubled else 0), snapshot.name
        assert run_cli(*args, "--fail-on", "none").returncode == 0, snapshot.name

        tests.append(
            {
                "name": f"{snapshot.name} {dataplane}",
                "interval": "1m",
                "input_series": input_series(exposition),
                "promql_expr_test": [
                    {
                        "expr": (
                            "group by (alertname, namespace, service, address_type) "
                            f'(ALERTS{{alertstate="firing", alertname=~"{TABLE_ALERT_NAMES}"}})'
                        ),
                        "eval_time": EVAL_TIME,
                        "exp_samples": firing_samples(expected_firing(explained)),
                    }
                ],
            }
        )
    # The inputs show most problems, so the comparison is not vacuous.
    assert len(seen) >= 5, seen
    run_promtool(tmp_path, tests)


def test_fail_on_narrows_the_gate() -> None:
    """partial-hints-ignored has partial hints and drift: failing on others passes."""
    snapshot = str(EXAMPLES_DIR / "partial-hints-ignored.json")
    base = ("explain", "-A", "--summary", "--snapshot", snapshot)
    assert run_cli(*base).returncode == 1
    assert run_cli(*base, "--fail-on", "partial-hints").returncode == 1
    assert run_cli(*base, "--fail-on", "drift").returncode == 1
    assert run_cli(*base, "--fail-on", "fails-closed,hints-off").returncode == 0
    wrong = run_cli(*base, "--fail-on", "partial")
    assert wrong.returncode == 2
    assert wrong.stderr.count("\n") == 1
    assert "unknown problem 'partial'" in wrong.stderr


def test_the_problem_page_is_generated_from_the_table() -> None:
    """docs/problems.md, the one page that says what a problem is, is the table's."""
    from exporter.report.problems import markdown  # noqa: PLC0415

    assert (PROJECT_ROOT / "docs" / "problems.md").read_text() == markdown()
