"""Every value is bounded before it is parsed, and every failure is the project's own error."""

from __future__ import annotations

import json
import time
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity as client_parse

from exporter.sources.decode import (
    MAX_NAME,
    InvalidObjectError,
    JsonDecoder,
    ListPage,
    ObjectDecoder,
    RawEndpointSlice,
    RawEvent,
    RawNode,
    RawService,
    cpu_cores,
    decode_node,
    node_from_raw,
)
from exporter.sources.quantity import QuantityError, parse_quantity
from exporter.sources.snapshot import parse_snapshot
from exporter.sources.snapshot_input import SnapshotError
from exporter.sources.snapshot_yaml import MAX_ALIAS_NODES

# -- quantities -----------------------------------------------------------------------------

VALID_QUANTITIES = [
    ("3920m", Fraction(392, 100)),
    ("4", Fraction(4)),
    ("+4", Fraction(4)),
    ("-4", Fraction(-4)),
    ("1.5", Fraction(3, 2)),
    (".5", Fraction(1, 2)),
    ("5.", Fraction(5)),
    ("0", Fraction(0)),
    ("1n", Fraction(1, 10**9)),
    ("1u", Fraction(1, 10**6)),
    ("2k", Fraction(2000)),
    ("1E", Fraction(10**18)),
    ("2Ki", Fraction(2048)),
    ("1Mi", Fraction(2**20)),
    ("1e3", Fraction(1000)),
    ("1E3", Fraction(1000)),
    ("1e+20", Fraction(10**20)),
    ("1e-05", Fraction(1, 10**5)),
    # Finer than nano rounds away from zero to 1n, as the API server stores it.
    ("1e-10", Fraction(1, 10**9)),
    ("0.0000000001", Fraction(1, 10**9)),
]


@pytest.mark.parametrize(
    ("text", "value"), VALID_QUANTITIES, ids=[row[0] for row in VALID_QUANTITIES]
)
def test_quantity_grammar(text: str, value: Fraction) -> None:
    """Quantities of the API server's grammar parse to their exact values."""
    assert parse_quantity(text) == value


INVALID_QUANTITIES = [
    "", "-", ".", "+.", "1.2.3", "0x10", "NaN", "inf", "4 cores", " 4", "1Ki5", "1e", "1ee3",
    "1e3.5", "1K", "1mi", "1i", "١٢", "\uff14",  # Arabic-Indic and fullwidth digits
    "1e-999999999", "1e999999999", "1e31", "1" * 65,
]  # fmt: skip


@pytest.mark.parametrize("text", INVALID_QUANTITIES)
def test_invalid_quantity(text: str) -> None:
    """Anything else, non-ASCII digits and out-of-bound exponents included, is refused."""
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("text", ["1e-999999999", "1e999999999", "9" * 10_000, "1e" + "9" * 10_000])
def test_hostile_quantity_is_refused_at_once(text: str) -> None:
    """Bounds are checked before any arithmetic: a hostile quantity costs microseconds."""
    started = time.perf_counter()
    with pytest.raises(ValueError, match=r"\S"):
        cpu_cores(text)
    assert time.perf_counter() - started < 0.1


@pytest.mark.parametrize(
    "cpu",
    ["-4", "-0.001", "١٢", 10**5000, -1.0, float("inf"), True, "2E"],
    ids=[
        "negative",
        "negative-milli",
        "arabic-digits",
        "huge-int",
        "negative-float",
        "inf",
        "bool",
        "exa",
    ],
)
def test_bad_cpu(cpu: Any) -> None:
    """Negative, non-ASCII, boolean, infinite and absurdly large CPU values are refused."""
    with pytest.raises(ValueError, match=r"\S"):
        cpu_cores(cpu)


def test_node_with_negative_cpu_is_invalid() -> None:
    """A Node with negative allocatable CPU is an invalid object, named."""
    with pytest.raises(InvalidObjectError, match=r"node-a.*negative"):
        decode_node({"metadata": {"name": "node-a"}, "status": {"allocatable": {"cpu": "-4"}}})


# -- one object's JSON, as the informers decode it -------------------------------------------

NODE = {
    "kind": "Node",
    "metadata": {"name": "node-a", "labels": {"topology.kubernetes.io/zone": "zone-a"}},
    "status": {"allocatable": {"cpu": "4"}, "conditions": [{"type": "Ready", "status": "True"}]},
}


def _json(document: object) -> bytes:
    return json.dumps(document).encode()


BROKEN_NODES = [
    ("wrong-type", _json({**NODE, "status": {"allocatable": {"cpu": ["4"]}}})),
    ("name-too-long", _json({**NODE, "metadata": {"name": "n" * (MAX_NAME + 1)}})),
    ("label-too-long", _json({**NODE, "metadata": {"name": "a", "labels": {"a": "v" * 300}}})),
    ("not-utf8", _json(NODE).replace(b"zone-a", b"zone-\xff")),
    ("huge-integer", _json(NODE).replace(b'"4"', b"1" + b"0" * 5000)),
    ("huge-float", _json(NODE).replace(b'"4"', b"1e999")),
    ("deep-nesting", _json(NODE).replace(b'"4"', b"[" * 5000 + b"]" * 5000)),
    ("not-an-object", b"[1, 2]"),
    ("malformed", b'{"metadata": '),
    ("cpu-exponent", _json({**NODE, "status": {"allocatable": {"cpu": "1e-999999999"}}})),
]  # fmt: skip


@pytest.mark.parametrize(
    "data", [row[1] for row in BROKEN_NODES], ids=[row[0] for row in BROKEN_NODES]
)
def test_object_decoder_raises_invalid_object_only(data: bytes) -> None:
    """Whatever is wrong with an object's JSON, decoding it raises InvalidObjectError only."""
    with pytest.raises(InvalidObjectError) as caught:
        node_from_raw(ObjectDecoder(RawNode).decode(data))
    assert caught.value.kind == "Node"
    assert "\n" not in str(caught.value)


def test_invalid_object_is_named_when_its_name_is_readable() -> None:
    """The error names the object even when another field broke the decoding."""
    data = _json({**NODE, "status": {"allocatable": {"cpu": ["4"]}}})
    with pytest.raises(InvalidObjectError) as caught:
        ObjectDecoder(RawNode).decode(data)
    assert caught.value.name == "node-a"


@pytest.mark.parametrize("raw_type", [RawNode, RawService, RawEndpointSlice, RawEvent])
def test_every_raw_kind_has_a_kind_name(raw_type: type[Any]) -> None:
    """Each raw shape names its kind, which the informers' errors and metrics use."""
    assert ObjectDecoder(raw_type).kind == raw_type.__name__.removeprefix("Raw")


def test_page_decoder_turns_bad_text_into_a_validation_error() -> None:
    """A LIST page holding invalid UTF-8 or deep nesting fails as a ValidationError.

    The informer answers a ValidationError by decoding the page item by item, so one bad
    object is counted and skipped; UnicodeDecodeError or RecursionError would end the
    informer's thread.
    """
    decoder: JsonDecoder[ListPage[RawNode]] = JsonDecoder(ListPage[RawNode])
    for item in (_json(NODE).replace(b"zone-a", b"zone-\xff"), b"[" * 5000 + b"]" * 5000):
        page = b'{"metadata": {"resourceVersion": "1"}, "items": [' + item + b"]}"
        with pytest.raises(msgspec.ValidationError):
            decoder.decode(page)


# -- snapshots ------------------------------------------------------------------------------


def _snapshot_error(data: bytes) -> str:
    with pytest.raises(SnapshotError) as caught:
        parse_snapshot("in.json", data)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("in.json: ")
    return message


def _list(*items: object) -> dict[str, Any]:
    return {"kind": "List", "items": list(items)}


SLICE = {
    "kind": "EndpointSlice",
    "metadata": {"name": "web-1", "namespace": "default"},
    "addressType": "IPv4",
    "endpoints": [{"addresses": ["10.0.0.1"], "zone": "zone-a"}],
}
SERVICE = {"kind": "Service", "metadata": {"name": "web", "namespace": "default"}, "spec": {}}


@pytest.mark.parametrize(
    ("item", "name"),
    [
        (NODE, "Node node-a"),
        (SLICE, "EndpointSlice default/web-1"),
        (SERVICE, "Service default/web"),
    ],
)
def test_objects_given_twice_are_refused(item: dict[str, Any], name: str) -> None:
    """An object of one kind, namespace and name given twice is an error naming it."""
    message = _snapshot_error(_json(_list(item, item)))
    assert f"{name} is given twice" in message


def test_same_name_in_other_namespace_or_kind_is_not_a_duplicate() -> None:
    """Only kind, namespace and name together identify an object."""
    other_namespace = {**SLICE, "metadata": {"name": "web-1", "namespace": "other"}}
    service_named_like_the_slice = {
        **SERVICE,
        "metadata": {"name": "web-1", "namespace": "default"},
    }
    snapshot = parse_snapshot(
        "in.json", _json(_list(SLICE, other_namespace, service_named_like_the_slice))
    )
    assert len(snapshot.endpoint_slices) == 2
    assert len(snapshot.services) == 1


def test_duplicates_across_yaml_documents_are_refused() -> None:
    """The same Node in two YAML documents is given twice too."""
    data = b"\n---\n".join(_json(NODE) for _ in range(2))
    assert "Node node-a is given twice" in _snapshot_error(data)


BILLION_LAUGHS = b"\n".join(
    [b"a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    + [b"a%d: &a%d [" % (i, i) + b", ".join([b"*a%d" % (i - 1)] * 10) + b"]" for i in range(1, 9)]
    + [b"kind: List", b"items: *a8"]
)


def test_billion_laughs_is_refused_quickly() -> None:
    """YAML aliases expanding to 10^9 nodes are refused before anything is expanded."""
    started = time.perf_counter()
    message = _snapshot_error(BILLION_LAUGHS)
    assert f"more than {MAX_ALIAS_NODES}" in message
    assert time.perf_counter() - started < 2


def test_merge_key_amplification_is_refused() -> None:
    """Merge keys, which copy an anchor's pairs, count as expansion too."""
    lines = [b"m0: &m0 {a: 1, b: 2}"]
    lines += [b"m%d: &m%d {<<: [*m%d, *m%d]}" % (i, i, i - 1, i - 1) for i in range(1, 40)]
    started = time.perf_counter()
    _snapshot_error(b"\n".join([*lines, b"kind: List", b"items: []"]))
    assert time.perf_counter() - started < 2


def test_alias_to_itself_is_refused() -> None:
    """A recursive alias is refused rather than walked for ever."""
    assert "ancestors" in _snapshot_error(b"kind: List\nitems: &a [*a]\n")


def test_small_aliases_are_accepted() -> None:
    """Hand-written anchors (shared labels) stay usable."""
    data = b"""
kind: List
items:
- kind: Node
  metadata: {name: node-a, labels: &labels {topology.kubernetes.io/zone: zone-a}}
  status: {allocatable: {cpu: "4"}}
- kind: Node
  metadata: {name: node-b, labels: *labels}
  status: {allocatable: {cpu: "4"}}
"""
    snapshot = parse_snapshot("in.yaml", data)
    assert [node.zone for node in snapshot.nodes] == ["zone-a", "zone-a"]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"kind": "List", "items": [' + b"1" * 5001 + b"]}", id="json-integer"),
        pytest.param(b"kind: List\nitems:\n- " + b"1" * 5001 + b"\n", id="yaml-integer"),
        pytest.param(b"kind: List\n? " + b"1" * 5001 + b"\n: x\n", id="yaml-integer-key"),
        pytest.param(b"kind: List\nitems: [2020-13-45]\n", id="yaml-invalid-date"),
        pytest.param(b"kind: List\nitems: []\nx: \xff\n", id="not-utf8"),
        pytest.param(b"\xff\xfe\x00\xd8", id="broken-utf16"),
        pytest.param(b"a: " + b"[" * 2000 + b"]" * 2000, id="yaml-deep"),
        pytest.param(b"[" * 2000 + b"]" * 2000, id="json-deep"),
    ],
)
def test_unreadable_input_is_one_line(data: bytes) -> None:
    """Huge integers, invalid dates, bad text and deep nesting end in one line."""
    _snapshot_error(data)


def test_utf16_and_bom_are_read() -> None:
    """UTF-16 with a byte-order mark (Windows PowerShell's `>`) and a UTF-8 BOM are text."""
    text = json.dumps(_list(NODE))
    for data in (text.encode("utf-16"), b"\xef\xbb\xbf" + text.encode()):
        assert [node.name for node in parse_snapshot("in.json", data).nodes] == ["node-a"]


_DIGITS = st.text("0123456789", min_size=1, max_size=8)
# Significant digits of Python's default decimal context, which the kubernetes client uses.
DECIMAL_DIGITS = 28
_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
QUANTITY_TEXTS = st.builds(
    lambda sign, whole, fraction, suffix: f"{sign}{whole}{fraction}{suffix}",
    st.sampled_from(["", "+", "-"]),
    _DIGITS,
    st.one_of(st.just(""), _DIGITS.map(lambda digits: "." + digits)),
    st.one_of(
        st.sampled_from(_SUFFIXES),
        st.integers(-9, 9).map(lambda exponent: f"e{exponent}"),
    ),
)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(text=QUANTITY_TEXTS)
def test_quantity_agrees_with_the_kubernetes_client(text: str) -> None:
    """On the grammar, values match the kubernetes client's parser (finer than nano aside)."""
    expected = Fraction(client_parse(text))  # type: ignore[no-untyped-call]
    value = parse_quantity(text)
    # The client computes with Python's default decimal context (28 significant digits), so
    # it rounds values that need more ("10000.000001Ei"); ours, like the API server, does not.
    with localcontext() as context:
        context.prec = 200
        exact = Decimal(value.numerator) / Decimal(value.denominator)
    assume(len(exact.normalize().as_tuple().digits) <= DECIMAL_DIGITS)
    if (expected * 10**9).denominator == 1:
        assert value == expected
    else:
        # The API server keeps nano precision, rounding away from zero; the client does not.
        assert abs(value - expected) < Fraction(1, 10**9)
