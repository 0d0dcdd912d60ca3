"""The benchmark runs end to end at a tiny size and prints its table (no timing asserted)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import PROJECT_ROOT


def test_benchmark_prints_every_row() -> None:
    """`bench/bench.py` still works: every measured row appears, with its reference."""
    completed = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "bench" / "bench.py"), "--nodes", "30",
         "--services", "60", "--endpoints", "400", "--small-services", "20",
         "--samples", "5", "--scrapes", "1"],
        capture_output=True, text=True, timeout=240, check=False, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
    for row in ("initial sync", "orjson.loads", "incremental, median", "incremental, p99",
                "scrape /metrics", "generate_latest", "gzip", "resident memory"):  # fmt: skip
        assert row in completed.stdout, completed.stdout
