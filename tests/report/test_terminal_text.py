"""Cluster strings reach a terminal as text, never as control sequences (issue 22, item 6).

Anyone who may edit a Service or label a Node can put an escape sequence in an annotation
or a zone label; `explain`, `what-if`, error lines and console logs show it escaped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import structlog

from exporter.logs import configure_logging
from exporter.terminal import json_printable, printable
from tests.conftest import run_cli as run
from tests.k8s_objects import as_list, endpoint, endpoint_slice, node, service

# Retitles the terminal (OSC 0 ... BEL), clears it (CSI 2J), returns the carriage, and an
# 8-bit CSI (C1) and DEL; then printable non-ASCII text that must stay as it is.
EVIL = "\x1b]0;pwned\x07\x1b[2J\r\x9b6n\x7fé中"
EVIL_ZONE = f"zone-{EVIL}"
# Every control character but the renderers' own line breaks.
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
PAINT = re.compile(r"\x1b\[(?:0|1|3[1-3])m")


def strings(document: object) -> set[str]:
    """Every key and string value of a parsed JSON document."""
    if isinstance(document, dict):
        return set(document).union(*(strings(value) for value in document.values()))
    if isinstance(document, list):
        return set().union(*(strings(value) for value in document))
    return {document} if isinstance(document, str) else set()


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An `auto` Service with an escape sequence in its topology-mode annotation, and a
    `PreferClose` one in a cluster whose third zone's label holds one."""
    zones = ("zone-a", "zone-b", EVIL_ZONE)
    nodes = [node(f"node-{index}", zone) for index, zone in enumerate(zones)]
    endpoints = [
        endpoint(f"10.0.0.{index + 1}", zone, f"node-{index % 3}", hint_zones=(zone,))
        for index, zone in enumerate(zones * 2)
    ]
    path = tmp_path_factory.mktemp("evil") / "cluster.json"
    objects = as_list(
        nodes,
        service("shop", "cart", topology_mode=f"Auto{EVIL}"),
        endpoint_slice("shop", "cart-1", "cart", endpoints),
        service("shop", "web", traffic_distribution="PreferClose"),
        endpoint_slice("shop", "web-1", "web", endpoints),
    )
    path.write_text(json.dumps(objects))
    return path


def test_printable_escapes_controls_and_keeps_printable_unicode() -> None:
    assert printable(EVIL) == "\\x1b]0;pwned\\x07\\x1b[2J\\r\\x9b6n\\x7fé中"
    assert printable("a\tb\nc\x00") == "a\\tb\nc\\x00"
    assert printable("a\nb", newlines=False) == "a\\nb"
    # With colour on, only the renderers' own colour codes are kept.
    painted = "\x1b[31mred\x1b[0m \x1b[2J\x1b]0;t\x07"
    assert printable(painted, colour=True) == "\x1b[31mred\x1b[0m \\x1b[2J\\x1b]0;t\\x07"


def test_json_printable_is_the_same_json_without_raw_controls() -> None:
    encoded = json.dumps({"a": EVIL}, ensure_ascii=False).encode()
    escaped = json_printable(encoded)
    assert json.loads(escaped) == {"a": EVIL}
    assert not CONTROL.search(escaped.decode())


@pytest.mark.parametrize(
    "args",
    [
        ["explain", "--color", "never"],
        ["explain"],
        ["explain", "-o", "wide"],
        ["what-if", "--lose-zone", EVIL_ZONE, "--all"],
    ],
)
def test_text_outputs_show_control_characters_escaped(snapshot: Path, args: list[str]) -> None:
    completed = run(*args, "--snapshot", str(snapshot))
    assert completed.returncode in {0, 1}, completed.stderr
    assert not CONTROL.search(completed.stdout), completed.stdout
    assert not CONTROL.search(completed.stderr), completed.stderr
    # The strings are shown, escaped, with their printable characters as they are.
    assert "\\x1b]0;pwned\\x07" in completed.stdout
    assert "é中" in completed.stdout


def test_explain_names_the_annotation_escaped(snapshot: Path) -> None:
    completed = run("explain", "--color", "never", "--snapshot", str(snapshot))
    assert "\\x1b]0;pwned\\x07" in " ".join(completed.stdout.split())


def test_colour_keeps_only_its_own_codes(snapshot: Path) -> None:
    completed = run("explain", "--color", "always", "--snapshot", str(snapshot))
    assert completed.returncode in {0, 1}, completed.stderr
    assert PAINT.search(completed.stdout)
    assert not CONTROL.search(PAINT.sub("", completed.stdout))


@pytest.mark.parametrize("command", ["evaluate", "explain"])
def test_json_outputs_carry_the_strings_escaped(snapshot: Path, command: str) -> None:
    args = ["-o", "json"] if command == "explain" else []
    completed = run(command, *args, "--snapshot", str(snapshot))
    assert completed.returncode in {0, 1}, completed.stderr
    assert not CONTROL.search(completed.stdout.replace("\n", ""))
    # Escaped as JSON escapes it: parsed, the zone label is the cluster's, byte for byte.
    assert EVIL_ZONE in strings(json.loads(completed.stdout))


def test_error_lines_show_the_name_escaped(snapshot: Path) -> None:
    completed = run("what-if", "--snapshot", str(snapshot), "--lose-node", f"x{EVIL}")
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1
    assert "no such node: x\\x1b]0;pwned\\x07" in completed.stderr
    assert not CONTROL.search(completed.stderr.rstrip("\n"))


def test_console_log_lines_show_the_value_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "console")
    try:
        structlog.get_logger().warning(f"changed {EVIL}", service=f"shop/{EVIL}")
    finally:
        structlog.reset_defaults()
    line = capsys.readouterr().out
    assert line.count("\n") == 1
    assert "changed \\x1b]0;pwned\\x07" in line
    assert "shop/\\x1b]0;pwned" in line
    assert not CONTROL.search(line.rstrip("\n"))


# Issue 30 finding 12: an override that reverses what follows, isolates, and the invisible
# direction marks, in an annotation value; then right-to-left letters, printable text.
BIDI = "\u202eevil\u202c\u2066x\u2069\u202a\u202b\u202d\u2067\u2068\u200e\u200f\u061c"
BIDI_ESCAPED = (
    "\\u202eevil\\u202c\\u2066x\\u2069\\u202a\\u202b\\u202d\\u2067\\u2068\\u200e\\u200f\\u061c"
)
BIDI_CONTROL = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
HEBREW = "\u05e9\u05dc\u05d5\u05dd"


@pytest.fixture(scope="module")
def bidi_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An `auto` Service whose topology-mode annotation holds every bidirectional control,
    in a cluster whose second zone's label holds them too."""
    zones = ("zone-a", f"zone-{BIDI}")
    nodes = [node(f"node-{index}", zone) for index, zone in enumerate(zones)]
    endpoints = [
        endpoint(f"10.0.0.{index + 1}", zone, f"node-{index}", hint_zones=(zone,))
        for index, zone in enumerate(zones)
    ]
    path = tmp_path_factory.mktemp("bidi") / "cluster.json"
    objects = as_list(
        nodes,
        service("shop", "cart", topology_mode=f"Auto{BIDI}{HEBREW}"),
        endpoint_slice("shop", "cart-1", "cart", endpoints),
    )
    path.write_text(json.dumps(objects))
    return path


def test_printable_escapes_bidirectional_controls() -> None:
    assert printable(f"a{BIDI}{HEBREW}") == f"a{BIDI_ESCAPED}{HEBREW}"


@pytest.mark.parametrize("args", [["--color", "never"], ["--color", "always"]])
def test_explain_shows_bidirectional_controls_escaped(bidi_snapshot: Path, args: list[str]) -> None:
    """The annotation's bidi controls reach the terminal as `\\u202e`, its letters as they are."""
    completed = run("explain", *args, "--snapshot", str(bidi_snapshot))
    assert completed.returncode in {0, 1}, completed.stderr
    assert not BIDI_CONTROL.search(completed.stdout + completed.stderr), completed.stdout
    assert BIDI_ESCAPED in "".join(completed.stdout.split())
    assert HEBREW in completed.stdout


@pytest.mark.parametrize("args", [["explain", "-o", "json"], ["evaluate"]])
def test_json_outputs_carry_bidirectional_controls_escaped(
    bidi_snapshot: Path, args: list[str]
) -> None:
    """JSON escapes them as `\\u202e`: parsed, the zone label is the cluster's."""
    completed = run(*args, "--snapshot", str(bidi_snapshot))
    assert completed.returncode in {0, 1}, completed.stderr
    assert not BIDI_CONTROL.search(completed.stdout)
    assert f"zone-{BIDI}" in strings(json.loads(completed.stdout))


def test_what_if_shows_a_bidirectional_zone_escaped(bidi_snapshot: Path) -> None:
    completed = run(
        "what-if", "--lose-zone", f"zone-{BIDI}", "--all", "--snapshot", str(bidi_snapshot)
    )
    assert completed.returncode in {0, 1}, completed.stderr
    assert not BIDI_CONTROL.search(completed.stdout + completed.stderr), completed.stdout
    assert BIDI_ESCAPED in completed.stdout
