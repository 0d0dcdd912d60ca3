"""Mutated snapshots never cost a traceback, a hang or unbounded memory.

Hypothesis mutates the valid snapshots of examples/ and tests/conformance/ (wrong types,
nulls, missing keys, huge and tiny numbers, unicode, invalid UTF-8, deep nesting,
duplicates, truncation, YAML aliases) and gives each result to the CLI's `evaluate` and
`explain` (in process, as `main()` runs them) and, object by object and as a LIST page,
to the decoders the informers use. The CLI must succeed or exit 2 with exactly one line
on stderr; the object decoders may only raise `InvalidObjectError`, the page decoder
only `msgspec.DecodeError`. Each case has a time and a memory bound. Derandomized, with
a fixed number of cases, so CI runs the same cases every time.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.cli import main
from exporter.sources.controller_events import controller_event_from_raw
from exporter.sources.decode import (
    InvalidObjectError,
    JsonDecoder,
    ListPage,
    ObjectDecoder,
    RawEndpointSlice,
    RawEvent,
    RawNode,
    RawService,
    endpoint_slice_from_raw,
    node_from_raw,
    service_from_raw,
)
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR

CASES = 300
SECONDS_PER_CASE = 5.0
BYTES_PER_CASE = 200 * 1024 * 1024

SEEDS = [
    json.loads(path.read_text(encoding="utf-8"))
    for path in sorted(EXAMPLES_DIR.glob("*.json"))
    + sorted(CONFORMANCE_DIR.glob("*.snapshot.json"))
]

# Values JSON cannot spell through json.dumps, spliced into the text where a marker is.
RAW_VALUES = [
    b"1" * 5001,
    b"-" + b"9" * 400,
    b"1e999999",
    b"-1e-999999",
    b"[" * 3000 + b"]" * 3000,
    b'"\xff\xfe"',
    b'"\xed\xa0\x80"',  # a UTF-16 surrogate encoded as UTF-8: not UTF-8
]

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e-300, 1e308, -0.0, 5e-324]),
    st.text(max_size=20),
    st.sampled_from(["", "-4", "1e-999999999", "1e999999999", "\u0661\u0662", "4", "Ready"]),
    st.text(min_size=300, max_size=300),
    st.just("x" * 300_000),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.sampled_from(RAW_VALUES).map(lambda raw: ("raw", raw)),
)


@dataclass
class Case:
    document: Any
    raws: list[bytes] = field(default_factory=list)
    yaml_aliases: int = 0
    truncate: float | None = None
    invalid_byte_at: float | None = None
    as_yaml: bool = False


def _containers(value: Any) -> list[tuple[Any, Any]]:
    if isinstance(value, dict):
        return [(value, key) for key in value]
    if isinstance(value, list):
        return [(value, index) for index in range(len(value))]
    return []


def _mutate(data: st.DataObject, case: Case) -> None:
    """Walk down to a random place of the document and change it."""
    parent: Any = None
    key: Any = None
    current = case.document
    while (children := _containers(current)) and data.draw(st.integers(0, 4)) > 0:
        parent, key = data.draw(st.sampled_from(children))
        current = parent[key]
    action = data.draw(st.sampled_from(["replace", "delete", "duplicate", "nest"]))
    if parent is None:
        if action == "replace":
            case.document = _value(data, case)
        return
    if action == "delete" and isinstance(parent, dict):
        del parent[key]
    elif action == "duplicate" and isinstance(parent, list):
        parent.append(json.loads(json.dumps(parent[key])))
    elif action == "nest":
        parent[key] = [parent[key]] if data.draw(st.booleans()) else {"x": parent[key]}
    else:
        parent[key] = _value(data, case)


def _value(data: st.DataObject, case: Case) -> Any:
    value = data.draw(VALUES)
    if isinstance(value, tuple):
        case.raws.append(value[1])
        return f"@@RAW{len(case.raws) - 1}@@"
    return value


@st.composite
def cases(draw: st.DrawFn) -> Case:
    data = draw(st.data())
    case = Case(document=json.loads(json.dumps(draw(st.sampled_from(SEEDS)))))
    for _ in range(draw(st.integers(1, 3))):
        _mutate(data, case)
    case.as_yaml = draw(st.integers(0, 3)) == 0
    if case.as_yaml and isinstance(case.document, dict) and draw(st.booleans()):
        case.yaml_aliases = draw(st.integers(1, 9))
    if draw(st.integers(0, 9)) == 0:
        case.truncate = draw(st.floats(0, 1))
    if draw(st.integers(0, 9)) == 0:
        case.invalid_byte_at = draw(st.floats(0, 1))
    return case


def _splice(text: bytes, raws: list[bytes]) -> bytes:
    for index, raw in enumerate(raws):
        for quote in (b'"', b"'"):
            text = text.replace(quote + b"@@RAW%d@@" % index + quote, raw)
    return text


def _encode(case: Case, document: Any) -> bytes:
    if case.as_yaml:
        text = yaml.safe_dump(document, allow_unicode=True).encode()
        if case.yaml_aliases:
            # A "billion laughs" prefix whose deepest alias replaces the document's items.
            lines = [b"l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
            lines += [
                b"l%d: &l%d [" % (i, i) + b", ".join([b"*l%d" % (i - 1)] * 10) + b"]"
                for i in range(1, case.yaml_aliases + 1)
            ]
            text = (
                b"\n".join(lines)
                + b"\n"
                + text.replace(b"items:", b"items: *l%d\nold:" % case.yaml_aliases, 1)
            )
    else:
        text = json.dumps(document, ensure_ascii=False).encode()
    text = _splice(text, case.raws)
    if case.truncate is not None:
        text = text[: int(len(text) * case.truncate)]
    if case.invalid_byte_at is not None:
        at = int(len(text) * case.invalid_byte_at)
        text = text[:at] + b"\xff" + text[at:]
    return text


class HangError(Exception):
    pass


@contextlib.contextmanager
def bounded(outcomes: Counter[str]) -> Iterator[None]:
    """Fail a case that takes longer than SECONDS_PER_CASE or allocates more than BYTES_PER_CASE."""

    def on_alarm(_signum: int, _frame: FrameType | None) -> None:
        raise HangError

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, SECONDS_PER_CASE)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        yield
    except HangError:
        outcomes["hangs"] += 1
        pytest.fail(f"a case took more than {SECONDS_PER_CASE} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < BYTES_PER_CASE, f"a case allocated {peak} bytes"
    assert time.perf_counter() - started < SECONDS_PER_CASE


def _run_cli(argv: list[str], outcomes: Counter[str]) -> None:
    stdout = io.TextIOWrapper(io.BytesIO())
    stderr = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except BaseException:
            outcomes["tracebacks"] += 1
            raise
    lines = stderr.getvalue().splitlines()
    warnings = [line for line in lines if line.startswith("topology-hints-exporter: warning: ")]
    errors = [line for line in lines if line not in warnings]
    if code in {0, 1}:
        # 1 is explain's verdict (some Service does not get the hints it asks for), not an
        # error; a snapshot lacking a kind of object is warned about, in words.
        assert errors == [], lines
        outcomes["successes"] += 1
    elif not errors:
        # explain on input that lacks Nodes, Services or EndpointSlices: explained, with the
        # warning in its text, and exit 2 so that a gate does not pass on it.
        assert code == 2
        outcomes["incomplete inputs"] += 1
    else:
        assert code == 2
        assert len(errors) == 1, lines
        assert errors[0].startswith("topology-hints-exporter: error: ")
        outcomes["clean errors"] += 1


_KINDS: dict[str, tuple[ObjectDecoder[Any], Any]] = {
    "Node": (ObjectDecoder(RawNode), node_from_raw),
    "Service": (ObjectDecoder(RawService), service_from_raw),
    "EndpointSlice": (ObjectDecoder(RawEndpointSlice), endpoint_slice_from_raw),
    "Event": (ObjectDecoder(RawEvent), controller_event_from_raw),
}


def _informer_decoders(case: Case, outcomes: Counter[str]) -> None:
    """Each object as a watch event carries it, and all of them as one LIST page."""
    document = case.document
    items = document.get("items") if isinstance(document, dict) else None
    if not isinstance(items, list):
        return
    json_case = Case(document=None, raws=case.raws, invalid_byte_at=case.invalid_byte_at)
    for item in items:
        data = _encode(json_case, item)
        for decoder, convert in _KINDS.values():
            try:
                convert(decoder.decode(data))
                outcomes["objects decoded"] += 1
            except InvalidObjectError:
                outcomes["objects invalid"] += 1
    page = _encode(json_case, {"metadata": {"resourceVersion": "1"}, "items": items})
    for raw_type in (RawNode, RawService, RawEndpointSlice, RawEvent):
        with contextlib.suppress(msgspec.DecodeError):
            JsonDecoder(ListPage[raw_type]).decode(page)  # type: ignore[valid-type]


def fuzz(directory: Path) -> Counter[str]:
    """Run the CASES mutated snapshots (files under `directory`); what they came to."""
    outcomes: Counter[str] = Counter()

    @settings(
        max_examples=CASES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=cases())
    def one(case: Case) -> None:
        path = directory / f"snapshot-{outcomes['cases']}"
        path.write_bytes(_encode(case, case.document))
        outcomes["cases"] += 1
        with bounded(outcomes):
            _run_cli(["evaluate", "--snapshot", str(path)], outcomes)
        with bounded(outcomes):
            _run_cli(["explain", "--snapshot", str(path), "--color", "never"], outcomes)
        with bounded(outcomes):
            _informer_decoders(case, outcomes)

    one()
    return outcomes


def test_mutated_snapshots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """evaluate/explain succeed or exit 2 with one line; decoders raise only their own errors.

    Prints what the run covered (run with -s to see it). The counts are this test's own: a
    report kept apart from the run read a module-level counter, and passed on an empty one
    when run alone or first.
    """
    outcomes = fuzz(tmp_path)
    with capsys.disabled():
        print("\nfuzz:", dict(sorted(outcomes.items())))  # noqa: T201
    assert outcomes["tracebacks"] == 0
    assert outcomes["hangs"] == 0
    # The mutations reach both ends: snapshots still read, and snapshots refused in one line.
    assert outcomes["successes"] > 0
    assert outcomes["clean errors"] > 0


def test_seeds_exist() -> None:
    """The fuzzer has valid snapshots to start from."""
    assert len(SEEDS) > 10
    assert all(isinstance(seed, dict) for seed in SEEDS)
