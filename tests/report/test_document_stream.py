"""`evaluate` writes its document piece by piece, byte for byte what formatting the whole
document at once writes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import immutables
import msgspec
import pytest

from exporter.report.document import evaluation_document, formatted_evaluation_document
from exporter.run.oneshot import evaluate_snapshot
from exporter.sources.snapshot import load_snapshot
from exporter.state.result import ClusterResult
from tests.conftest import EXAMPLES_DIR

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.json"))


def _whole(evaluation: ClusterResult) -> bytes:
    return msgspec.json.format(msgspec.json.encode(evaluation_document(evaluation)), indent=2)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_pieces_equal_the_whole_document(path: Path) -> None:
    evaluation = evaluate_snapshot(load_snapshot(str(path)))
    assert b"".join(formatted_evaluation_document(evaluation)) == _whole(evaluation)


def test_a_cluster_without_services() -> None:
    snapshot = load_snapshot(str(EXAMPLES_DIR / "demo-cluster.json"))
    evaluation = evaluate_snapshot(snapshot)
    empty = dataclasses.replace(evaluation, services=immutables.Map())
    assert b"".join(formatted_evaluation_document(empty)) == _whole(empty)


def test_pieces_are_one_service_each() -> None:
    evaluation = evaluate_snapshot(load_snapshot(str(EXAMPLES_DIR / "demo-cluster.json")))
    pieces = list(formatted_evaluation_document(evaluation))
    # The cluster, the profile, the opening of the list, one piece per verdict, the closing.
    assert len(pieces) == len(evaluation.services) + 4
