"""The benchmark runs end to end at a tiny size and prints its tables (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.ksm import built_binary
from tests.conftest import PROJECT_ROOT
from tests.realcluster.binaries import kube_binaries

# The benchmark's children serve (the test API server, the exporter, kube-state-metrics and
# kube-apiserver), out of sight of tests/quick.py's guard, which sees only this process's.
pytestmark = pytest.mark.server

ROWS = (
    "change -> /metrics, p50",
    "change -> /metrics, p99",
    "static fetch of the same bytes",
    "node resize -> every affected series",
    "evaluator alone",
    "first scrape after start",
    "generate_latest",
    "steady scrape",
    "steady gzip scrape",
    "first scrape after start, CPU",
    "generate_latest CPU",
    "node resize, exporter CPU per resize",
    "evaluator alone, CPU",
    "static fetch of the same gzip bytes",
    "swap-at-once static server, p50",
    "swap-at-once static server, p99",
    "initial sync CPU",
    "fetch + orjson.loads",
    "RSS at /readyz",
    "RSS after scrapes and changes",
    "evaluate --snapshot peak RSS",
    "serve --snapshot peak RSS",
    "serve --snapshot, start -> /readyz CPU",
    "orjson.loads of the file, CPU",
)
# The side-by-side table with kube-state-metrics, when its pinned binary is built (`make
# ksm-binary`; `make bench` builds it): building it here would take minutes.
KSM_ROWS = (
    "RSS when ready",
    "RSS after the first, 9 steady and 10 gzip scrapes",
    "CPU, start -> first complete scrape",
    "steady scrape",
    "steady gzip scrape",
    "scrape bytes",
)


def test_benchmark_prints_every_row(tmp_path: Path) -> None:
    """`bench/bench.py` still works at two tiny scales: every row, the growth table, the JSON,
    and kube-state-metrics beside the exporter when its binary is built."""
    output = tmp_path / "bench.json"
    binary = built_binary()
    # The real kube-apiserver's cost, where the upstream binaries are built (make test
    # builds them; a machine without them skips the table, said in one line).
    real = not kube_binaries().missing()
    completed = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "bench" / "bench.py"), "--scales", "0.004,0.008",
         "--runs", "1", "--changes", "4", "--resizes", "2", "--json", str(output),
         "--ksm", str(binary) if binary else "skip", "--api-cost", "0.004" if real else "skip"],
        capture_output=True, text=True, timeout=240, check=False, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
    tables = completed.stdout.split("## scale ")[1:]
    assert len(tables) == 2, completed.stdout
    for table in tables:
        for row in ROWS:
            assert row in table, (row, completed.stdout)
        assert "CPU s exporter / API server" in table
        assert ("beside kube-state-metrics" in table) == (binary is not None)
        if binary is not None:
            for row in KSM_ROWS:
                assert row in table, (row, completed.stdout)
    assert "## growth from scale 0.004" in completed.stdout
    assert ("what the real kube-apiserver pays" in completed.stdout) == real
    document = json.loads(output.read_text())
    if real:
        assert {start["client"] for start in document["api_cost"]["starts"]} >= {"exporter"}
        assert "| requests the client made (audit log) |" in document["api_cost"]["table"]
        assert document["api_cost"]["table"] in completed.stdout
    assert [report["scale"] for report in document["scales"]] == [0.004, 0.008]
    figures = document["scales"][0]["figures"]
    assert figures["change_p50"]["ratio"] is not None
    assert len(figures["node_change"]["runs"]) == 1

    # The page's Results section is generated from that JSON.
    report = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "bench" / "report.py"), str(output)],
        capture_output=True, text=True, timeout=60, check=False, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert report.stdout.count("| measure | median [min-max] |") == 2
    assert report.stdout.count("Beside kube-state-metrics") == (2 if binary else 0)
    for row in ROWS:
        assert row in report.stdout, (row, report.stdout)
    assert ("### What the real kube-apiserver pays" in report.stdout) == real
    if real:
        assert document["api_cost"]["table"] in report.stdout

    # A figure of 0 at the smallest scale (CPU time below the clock's tick at a tiny scale)
    # has no growth factor: the page says "-" rather than failing to format it.
    key = next(iter(document["growth"]))
    for entry in document["growth"][key]:
        entry.update(growth=None, worse_than_linear=False)
    output.write_text(json.dumps(document))
    report = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "bench" / "report.py"), str(output)],
        capture_output=True, text=True, timeout=60, check=False, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert " - |" in report.stdout
    assert "### Growth from the smallest scale" in report.stdout


def test_report_of_a_missing_file_is_one_line(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "bench" / "report.py"), str(tmp_path / "none.json")],
        capture_output=True, text=True, timeout=60, check=False, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1, completed.stderr
    assert "none.json" in completed.stderr


def test_render_split_prints_each_part_of_both_renders() -> None:
    completed = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "bench" / "render_split.py"), "--scale", "0.01",
         "--runs", "1"],
        capture_output=True, text=True, timeout=300, check=False, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    for row in (
        "first render",
        "the samples alone",
        "generate_latest (reference)",
        "evaluator step",
        "render of the new state",
        "comparing replaced results (_kept)",
    ):
        assert row in completed.stdout, (row, completed.stdout)


@pytest.mark.server
def test_escaping_benchmark_prints_every_kind() -> None:
    """`bench/escaping.py` serves a tiny generated cluster and measures each kind of scrape."""
    completed = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "bench" / "escaping.py"), "--nodes", "3",
         "--services", "5", "--endpoints", "15", "--requests", "1"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    for kind in ("default (cached)", "text escaping=dots", "openmetrics escaping=dots"):
        assert kind in completed.stdout
    assert "hwm" in completed.stdout
