"""The problems' alerts are the problem table's (issue 28, item 2).

Each problem with an alert gets exactly one rule, whose name, severity and summary are the
table's entry (exporter/engine/problems.py), and no module of the generator types a
problem alert's name again: renaming an alert or changing its severity or summary is one
edit of the table.
"""

from __future__ import annotations

import ast
from typing import Any

from alerts import generate
from exporter.engine.problems import PROBLEMS
from tests.conftest import PROJECT_ROOT

PROBLEM_ALERTS = {problem.alert: problem for problem in PROBLEMS.values() if problem.alert}


def _rules() -> list[dict[str, Any]]:
    return [
        rule
        for group in generate.groups(generate.CONFIG)
        for rule in group["rules"]
        if "alert" in rule
    ]


def test_each_problem_alert_takes_name_severity_and_summary_from_the_table() -> None:
    rules = [rule for rule in _rules() if rule["alert"] in PROBLEM_ALERTS]
    assert sorted(rule["alert"] for rule in rules) == sorted(PROBLEM_ALERTS)
    for rule in rules:
        problem = PROBLEM_ALERTS[rule["alert"]]
        assert rule["labels"]["severity"] == problem.severity, problem.id
        assert rule["annotations"]["summary"] == problem.summary, problem.id
        assert problem.summary.endswith("."), problem.id


def test_every_problem_alert_has_a_for_duration() -> None:
    for name in PROBLEM_ALERTS:
        assert generate.CONFIG.for_duration(name)


def test_no_generator_module_types_a_problem_alert_name() -> None:
    typed = [
        f"{path.name}: {node.value}"
        for path in sorted((PROJECT_ROOT / "alerts").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in PROBLEM_ALERTS
    ]
    assert typed == []


def test_the_generator_stays_under_the_module_limit() -> None:
    for path in sorted((PROJECT_ROOT / "alerts").glob("*.py")):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 600, path.name
