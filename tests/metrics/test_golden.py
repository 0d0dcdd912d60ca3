"""Golden expositions: each example snapshot's scrape, compared line by line in any order.

Regenerate after an intended change with `UPDATE_GOLDEN=1 pytest tests/metrics/test_golden.py`
and review the diff: every changed line is a change users see.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES_DIR, PROJECT_ROOT
from tests.metrics.conftest import ServeSnapshot
from tests.scrape import base_url, http_get

GOLDEN_DIR = PROJECT_ROOT / "tests" / "golden"
# Lines that describe the exporter process or the moment, not the cluster.
VOLATILE = ("process_", "python_", "topology_hints_last_evaluation_timestamp_seconds",
            "topology_hints_evaluation_duration_seconds")  # fmt: skip


def _stable_lines(exposition: str) -> list[str]:
    return sorted(
        line
        for line in exposition.splitlines()
        if line and not line.removeprefix("# HELP ").removeprefix("# TYPE ").startswith(VOLATILE)
    )


@pytest.mark.parametrize("example", sorted(EXAMPLES_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_scrape_matches_golden(example: Path, serve_snapshot: ServeSnapshot) -> None:
    """The exposition of the example is the reviewed golden one (line order aside)."""
    with serve_snapshot(json.loads(example.read_text())) as exporter:
        status, body = http_get(base_url(exporter) + "/metrics")
    assert status == 200
    actual = _stable_lines(body)
    golden = GOLDEN_DIR / f"{example.stem}.prom"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text("\n".join(actual) + "\n")
    expected = golden.read_text().splitlines()
    missing = sorted(set(expected) - set(actual))
    unexpected = sorted(set(actual) - set(expected))
    assert not missing, f"missing from the scrape: {missing[:20]}"
    assert not unexpected, f"not in the golden file: {unexpected[:20]}"
    assert len(actual) == len(expected)
