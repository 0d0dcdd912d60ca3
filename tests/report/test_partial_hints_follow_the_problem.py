"""The partial-hints warning is the entry's problem, read from the result (issue 28, item 2).

`explain` and the status page used to test `0 < completeness < 1` themselves, and so warned
that "kube-proxy ignores every hint" on a headless Service, which no kube-proxy routes and
whose partial hints are no problem (docs/problems.md). Now both say it exactly where the
entry has the partial-hints problem.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.engine.problems import ProblemId
from exporter.report.phrases import PARTIAL_HINTS
from exporter.run.oneshot import evaluate_snapshot
from exporter.sources.snapshot import load_snapshot
from exporter.web.facts import service_facts
from exporter.web.table import COLUMNS, status_view
from tests.conftest import run_cli
from tests.k8s_objects import Obj, as_list, endpoint, endpoint_slice, node, service


def _cluster(cluster_ip: str) -> Obj:
    zones = ("zone-a", "zone-b", "zone-c")
    return as_list(
        [
            *(node(f"node-{zone}", zone) for zone in zones),
            service("shop", "cart", topology_mode="Auto", cluster_ip=cluster_ip),
            endpoint_slice(
                "shop",
                "cart-1",
                "cart",
                [
                    endpoint(
                        f"10.1.0.{index + 1}",
                        zones[index % 3],
                        f"node-{zones[index % 3]}",
                        # Half of the endpoints hinted: completeness 0.5.
                        hint_zones=(zones[index % 3],) if index % 2 == 0 else None,
                    )
                    for index in range(6)
                ],
            ),
        ]
    )


@pytest.mark.parametrize(("cluster_ip", "warned"), [("10.96.0.10", True), ("None", False)])
def test_the_partial_hints_warning_is_where_the_problem_is(
    tmp_path: Path,
    cluster_ip: str,
    warned: bool,  # noqa: FBT001 - a pytest parameter
) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(_cluster(cluster_ip)))
    result = evaluate_snapshot(load_snapshot(str(path)))
    (verdict,) = result.verdicts()
    assert verdict.hint_completeness == 0.5
    assert (ProblemId.PARTIAL_HINTS in result.problems(verdict)) is warned

    explained = run_cli("explain", "-n", "shop", "cart", "--snapshot", str(path))
    assert (PARTIAL_HINTS in explained.stdout) is warned, explained.stdout

    facts = service_facts(result, verdict)
    assert (facts.completeness_warning == PARTIAL_HINTS) is warned
    (row,) = status_view(result).rows
    (completeness,) = (
        column.cell(row) for column in COLUMNS if column.title == "Hint completeness"
    )
    assert (completeness.tone == "warn") is warned
