"""A JSON List snapshot file is decoded item by item, never held whole, with the same results.

Every outcome of load_snapshot (streamed) is compared with parse_snapshot over the whole
bytes (the path that decides every error message), in small chunks so that item, string
and escape boundaries fall between reads.
"""

from __future__ import annotations

import codecs
import copy
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from exporter.sources import snapshot as snapshot_module
from exporter.sources import snapshot_input
from exporter.sources.snapshot import Snapshot, load_snapshot, parse_snapshot
from exporter.sources.snapshot_input import SnapshotError
from tests.conftest import EXAMPLES_DIR

EXAMPLE = json.loads((EXAMPLES_DIR / "healthy-three-zones.json").read_text())
# Characters that a naive splitter would take for structure.
TRICKY = '}] {[ \\" \\\\ ",\n        }'


def _outcome(decode: Callable[[], Snapshot]) -> Snapshot | str:
    try:
        return decode()
    except SnapshotError as error:
        return str(error)


def _both(tmp_path: Path, data: bytes) -> tuple[Snapshot | str, Snapshot | str]:
    path = tmp_path / "snapshot.json"
    path.write_bytes(data)
    source = str(path)
    return _outcome(lambda: load_snapshot(source)), _outcome(lambda: parse_snapshot(source, data))


def _refuse_whole_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def whole(source: str, max_bytes: int = 0) -> bytes:
        raise AssertionError(f"{source} read whole ({max_bytes})")

    monkeypatch.setattr(snapshot_module, "read_input", whole)


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_input, "_READ_CHUNK", 7)


def _tricky_document() -> dict[str, Any]:
    document: dict[str, Any] = copy.deepcopy(EXAMPLE)
    for item in document["items"]:
        item["metadata"].setdefault("annotations", {})["example.com/tricky"] = TRICKY
        item["metadata"]["managedFields"] = [{"fieldsV1": {"f:a": [[], [{}], [[TRICKY]]]}}]
    document["items"].insert(1, {"kind": "ConfigMap", "data": [[1, [2.5e3, None]], {"a": []}]})
    return document


LAYOUTS: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "kubectl": lambda document: json.dumps(document, indent=4).encode(),
    "compact": lambda document: json.dumps(document, separators=(",", ":")).encode(),
    "tabs and CRLF": lambda document: (
        json.dumps(document, indent="\t").replace("\n", "\r\n").encode()
    ),
    "BOM": lambda document: codecs.BOM_UTF8 + json.dumps(document, indent=2).encode(),
    "kind last": lambda document: json.dumps(
        {"items": document["items"], "apiVersion": "v1", "kind": "List"}, indent=1
    ).encode(),
    "no items": lambda document: json.dumps({**document, "items": []}).encode(),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_list_is_streamed_with_the_same_result(
    layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = LAYOUTS[layout](_tricky_document())
    _refuse_whole_reads(monkeypatch)
    path = tmp_path / "snapshot.json"
    path.write_bytes(data)
    streamed = load_snapshot(str(path))
    assert streamed == parse_snapshot(str(path), data)
    if layout != "no items":
        assert len(streamed.nodes) == len([i for i in EXAMPLE["items"] if i["kind"] == "Node"])


@pytest.mark.parametrize(
    "text",
    [
        '{"kind": "List", "items": null}',
        '{"kind": "List", "items": {}}',
        '{"kind": "List", "items": [], "items": []}',
        '{"items": []}',
        '{"kind": 3, "items": []}',
        '{"kind": "List", "items": [3]}',
        '{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": 7}}]}',
        '{"kind": "List", "items": []} {"kind": "List"}',
        '{"kind": "List", "items": []}\n---\n{"kind": "List"}',
        "{}",
        '{"kind": "Node", "metadata": {"name": "a"}}',
        (
            '{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "a"}},'
            ' {"kind": "Node", "metadata": {"name": "a"}}]}'
        ),
        '{"kind": "List", "items": ["\\u00e9", "\\ud800"]}',
        '{"kind": "List", "items": [' + "[" * 5000 + "]" * 5000 + "]}",
        '{"kind": "List", "items": [tru]}',
        "kind: List\nitems: []\n",
    ],
)
def test_what_the_stream_declines_ends_as_before(text: str, tmp_path: Path) -> None:
    streamed, whole = _both(tmp_path, text.encode())
    assert streamed == whole


def test_truncated_input_fails_with_the_same_line(tmp_path: Path) -> None:
    data = json.dumps(_tricky_document(), indent=4).encode()
    for cut in range(1, len(data), max(1, len(data) // 97)):
        streamed, whole = _both(tmp_path, data[:cut])
        assert isinstance(whole, str), cut
        assert streamed == whole, cut


def test_invalid_utf8_fails_with_the_same_line(tmp_path: Path) -> None:
    data = json.dumps(EXAMPLE, indent=4).encode()
    middle = len(data) // 2
    streamed, whole = _both(tmp_path, data[:middle] + b"\xff" + data[middle:])
    assert streamed == whole
    assert "not UTF-8" in str(whole)


def test_the_size_bound_holds_while_streaming(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.json"
    path.write_bytes(json.dumps(EXAMPLE).encode())
    with pytest.raises(SnapshotError, match="larger than 100 bytes"):
        load_snapshot(str(path), max_bytes=100)


def _large_document(copies: int) -> dict[str, Any]:
    """The example's objects many times over, each with a kilobyte the decoder ignores."""
    items: list[dict[str, Any]] = []
    for number in range(copies):
        for original in EXAMPLE["items"]:
            item = copy.deepcopy(original)
            item["metadata"]["name"] = f"{item['metadata']['name']}-{number}"
            item["metadata"]["managedFields"] = [{"manager": "kubelet", "f:x": "y" * 1000}]
            items.append(item)
    return {"apiVersion": "v1", "kind": "List", "items": items}


@pytest.mark.parametrize("indent", [4, None], ids=["kubectl", "compact"])
def test_a_large_snapshot_is_never_resident_whole(
    indent: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_input, "_READ_CHUNK", 1 << 16)
    _refuse_whole_reads(monkeypatch)
    path = tmp_path / "large.json"
    path.write_bytes(json.dumps(_large_document(1000), indent=indent).encode())
    size = path.stat().st_size
    assert size > 5_000_000
    tracemalloc.start()
    try:
        loaded = load_snapshot(str(path))
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(loaded.services) > 0
    # The decoded objects are what remains; the file itself would be all of `size`.
    assert peak < size / 4, (peak, size)
