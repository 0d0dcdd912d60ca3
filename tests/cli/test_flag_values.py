"""Issue 30 finding 10 (its flag parts): every number flag reads one way, and a flag that
means nothing for its input is refused, each with one line and exit 2, never a traceback.

Run in process through `main`. Each case is a bad flag, refused before anything starts; the
snapshot named does not exist, so that a flag accepted by mistake fails on it (exit 2, the
wrong line) instead of serving.
"""

from __future__ import annotations

import pytest

from exporter.cli import arguments, main
from exporter.cli.arguments import CommandError, parse_fail_on
from exporter.engine.problems import ProblemId
from exporter.report.overview import ALL_PROBLEMS
from exporter.run.serve import shard_from_pod_name
from tests.conftest import EXAMPLES_DIR

DEMO = str(EXAMPLES_DIR / "demo-cluster.json")
MISSING = "/nonexistent/snapshot.json"
ARABIC_INDIC_ONE = "\u0661"


def _one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the command; assert exit 2 and exactly one stderr line; return that line."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("topology-hints-exporter: error: ")
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


@pytest.mark.parametrize(
    "price",
    ["-0", "-0.0", "-1", "+1", "1_000", ARABIC_INDIC_ONE, "1e308", "1e-3", "inf", "nan",
     "Infinity", "", " 1", "1 ", "0x10", "1.2.3", ".", "9" * 40],
)  # fmt: skip
def test_a_price_that_is_not_a_plain_decimal_is_refused(
    capsys: pytest.CaptureFixture[str], price: str
) -> None:
    """`-0` was exported as -0.0, `1_000` as 1000, `1e308` and other scripts' digits taken."""
    line = _one_line_exit_2(
        capsys, ["serve", "--snapshot", MISSING, "--cross-zone-price-per-gib", price]
    )
    assert "--cross-zone-price-per-gib must be a decimal number, 0 or more" in line
    assert repr(price) in line


@pytest.mark.parametrize(
    ("text", "value"), [("0", 0.0), ("0.01", 0.01), (".5", 0.5), ("5.", 5.0), ("12", 12.0)]
)
def test_plain_decimals_are_read(text: str, value: float) -> None:
    assert arguments.parse_number(text, "--x", "1") == value


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--total-shards", "0"], "--total-shards must be a whole number, 1 or more, got '0'"),
        (["--total-shards", ARABIC_INDIC_ONE], "--total-shards must be a whole number"),
        (["--total-shards", "1_0"], "--total-shards must be a whole number"),
        (["--total-shards", "+2"], "--total-shards must be a whole number"),
        (["--total-shards", "x"], "--total-shards must be a whole number"),
        (["--shard", ARABIC_INDIC_ONE, "--total-shards", "3"], "--shard must be a whole number"),
        (["--shard", "-0", "--total-shards", "3"], "--shard must be a whole number"),
        (["--shard", "1_0", "--total-shards", "20"], "--shard must be a whole number"),
    ],
)
def test_count_flags_take_ascii_digits_only(
    capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    """`--total-shards` was argparse's int() (`\u0661`, `1_0`, `+2`), with usage lines."""
    assert words in _one_line_exit_2(capsys, ["serve", "--snapshot", MISSING, *argv])


def test_parse_count_bounds() -> None:
    assert arguments.parse_count("3", "--n", minimum=1) == 3
    with pytest.raises(CommandError):
        arguments.parse_count("1" * 10, "--n")


def test_a_pod_name_ordinal_is_ascii_digits() -> None:
    """`--shard auto` reads the ordinal as the StatefulSet writes it, in ASCII digits."""
    assert shard_from_pod_name("exporter-2") == 2
    with pytest.raises(ValueError, match="cannot derive a shard ordinal"):
        shard_from_pod_name("exporter-" + ARABIC_INDIC_ONE)


@pytest.mark.parametrize("dataplane", ["auto", "auto,kube-proxy", "kube-proxy,auto"])
def test_dataplane_auto_with_a_snapshot_is_refused(
    capsys: pytest.CaptureFixture[str], dataplane: str
) -> None:
    """`serve --snapshot ... --dataplane auto` ignored `auto` silently."""
    line = _one_line_exit_2(capsys, ["serve", "--snapshot", MISSING, "--dataplane", dataplane])
    assert "--dataplane auto detects the data planes of a cluster, not of a --snapshot" in line


@pytest.mark.parametrize("value", ["any,none", "none,any", "none,hints-off", "hints-off,any"])
def test_fail_on_words_are_not_listed_with_others(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """`--fail-on any,none` called both unknown while naming them valid."""
    line = _one_line_exit_2(capsys, ["explain", "--snapshot", DEMO, "--fail-on", value])
    assert "cannot be listed with other ids" in line
    assert "unknown" not in line


def test_fail_on_reads_words_alone_and_repeated_ids_once() -> None:
    assert parse_fail_on("any") == ALL_PROBLEMS
    assert parse_fail_on("any,any") == ALL_PROBLEMS
    assert parse_fail_on(" none ") == frozenset()
    assert parse_fail_on("hints-off,hints-off") == {ProblemId("hints-off")}
    with pytest.raises(CommandError, match=r"unknown problem 'nope' \(choose from any, none"):
        parse_fail_on("nope")
