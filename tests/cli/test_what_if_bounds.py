"""`what-if` bounds its counts (issue 22, item 13): one line and exit 2 beyond them.

A scenario builds each endpoint of `--scale` and judges each count of a rollout, so
`--scale shop/cart=100000000` ran past a minute and 4 GB, and `--max-surge 100000000`
ended in a MemoryError traceback.
"""

from __future__ import annotations

import subprocess

import pytest

from exporter.engine.whatif.scenario import MAX_SCENARIO_COUNT
from tests.conftest import EXAMPLES_DIR, PROJECT_ROOT, exporter_command

# payments/ledger: 8 ready endpoints of an `auto` Service in 3 equal zones.
SNAPSHOT = EXAMPLES_DIR / "eight-replicas-refused.json"
CLI_DOC = PROJECT_ROOT / "docs" / "cli.md"


def what_if(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*exporter_command(), "what-if", "--snapshot", str(SNAPSHOT), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--scale", f"payments/ledger={MAX_SCENARIO_COUNT + 1}"], "N is at most 100,000"),
        (["--scale", "payments/ledger=999999999"], "N is at most 100,000"),
        (
            ["--rollout", "payments/ledger", "--max-surge", str(MAX_SCENARIO_COUNT + 1)],
            "100,001 endpoints; a rollout's is at most 100,000",
        ),
        (
            ["--rollout", "payments/ledger", "--max-surge", "100000000"],
            "a rollout's is at most 100,000",
        ),
        # 8 endpoints x 1,250,013% = 100,001.04: the resolved count is bounded.
        (
            ["--rollout", "payments/ledger", "--max-unavailable", "1250013%"],
            "--max-unavailable '1250013%': 100,001 endpoints",
        ),
    ],
)
def test_counts_beyond_the_bound_are_one_line_and_exit_2(args: list[str], says: str) -> None:
    completed = what_if(*args)
    assert completed.returncode == 2, completed.stdout[-500:]
    assert completed.stdout == ""
    assert completed.stderr.count("\n") == 1
    assert says in completed.stderr


def test_the_bound_itself_is_answered() -> None:
    completed = what_if("--scale", f"payments/ledger={MAX_SCENARIO_COUNT}")
    assert completed.returncode in {0, 1}, completed.stderr
    assert "1 gain hints" in completed.stdout


def test_help_and_docs_state_the_bound() -> None:
    completed = subprocess.run(
        [*exporter_command(), "what-if", "--help"], capture_output=True, text=True, check=True
    )
    assert " ".join(completed.stdout.split()).count(f"at most {MAX_SCENARIO_COUNT:,}") == 3
    assert CLI_DOC.read_text().count(f"{MAX_SCENARIO_COUNT:,}") >= 3
