"""Problems are judged once, where the result is built (issue 28, item 2).

The evaluator step calls `problems_of` and stores each entry's problems on the result
(ServiceResult.problems, ClusterResult.nodes_known); `explain`, `evaluate`, the status page,
`/api/v1` and the alert generator read them or the problem table. These tests read the
source: a surface that judges again, takes a `nodes_known` flag of its own, or writes a
problem's condition on the hint completeness again fails here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from exporter.engine.problems import PREDICATES, PROBLEM_ORDER, ProblemId
from tests.conftest import PROJECT_ROOT

# Every package a surface lives in: the exporter, and the generators of alerts and dashboards.
SOURCES = ("exporter", "alerts", "dashboards", "mixin")
PROBLEM_TABLE = "exporter/engine/problems.py"
EVALUATOR = "exporter/pipeline/evaluator.py"
# Where problems may be judged: the engine (the table itself) and the pipeline's steps that
# build every result.
JUDGES = ("exporter/engine/", "exporter/pipeline/")


def _judging(modules: set[str]) -> set[str]:
    return {module for module in modules if not module.startswith(JUDGES)}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for package in SOURCES:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            relative = path.relative_to(PROJECT_ROOT).as_posix()
            yield relative, ast.parse(path.read_text(encoding="utf-8"), relative)


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def problems_of_callers() -> set[str]:
    """Modules that call (or import) `problems_of`."""
    found = set()
    for relative, module in _modules():
        for node in ast.walk(module):
            called = isinstance(node, ast.Call) and _name(node.func) == "problems_of"
            imported = isinstance(node, ast.ImportFrom) and any(
                alias.name == "problems_of" for alias in node.names
            )
            if called or imported:
                found.add(relative)
    return found


def nodes_known_parameters() -> set[str]:
    """Modules with a function that takes a `nodes_known` parameter."""
    found = set()
    for relative, module in _modules():
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = node.args
                every = (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)
                if any(argument.arg == "nodes_known" for argument in every):
                    found.add(relative)
    return found


def _is_number(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    )


def completeness_comparisons() -> set[str]:
    """Modules that compare a hint completeness with a number (`0 < completeness < 1`,
    `hint_completeness == 1`): a problem's condition, which only the table may state."""
    found = set()
    for relative, module in _modules():
        for node in ast.walk(module):
            if not isinstance(node, ast.Compare):
                continue
            operands = (node.left, *node.comparators)
            names = [_name(operand) or "" for operand in operands]
            if any("completeness" in name for name in names) and any(map(_is_number, operands)):
                found.add(relative)
    return found


def test_only_the_evaluator_step_judges_problems() -> None:
    assert _judging(problems_of_callers()) == set()


def test_no_surface_takes_a_nodes_known_flag() -> None:
    """Input completeness is a field of the result, not a flag passed from call to call."""
    assert _judging(nodes_known_parameters()) == set()


def test_only_the_problem_table_compares_the_completeness() -> None:
    assert completeness_comparisons() <= {PROBLEM_TABLE}


def test_the_checks_see_what_they_look_for() -> None:
    """Not vacuous: the table and the evaluator are found by the same walk."""
    assert EVALUATOR in problems_of_callers()
    assert completeness_comparisons() == {PROBLEM_TABLE}
    assert {PROBLEM_TABLE, EVALUATOR} <= nodes_known_parameters()


def test_the_sources_are_where_the_walk_looks() -> None:
    for package in SOURCES:
        assert Path(PROJECT_ROOT / package / "__init__.py").is_file(), package


def test_one_predicate_per_problem_in_the_table_order() -> None:
    """Each problem of the verdict has its own predicate; nodes-unknown is the input's."""
    assert tuple(PREDICATES) == tuple(
        problem for problem in PROBLEM_ORDER if problem is not ProblemId.NODES_UNKNOWN
    )
    assert len(set(PREDICATES.values())) == len(PREDICATES)
