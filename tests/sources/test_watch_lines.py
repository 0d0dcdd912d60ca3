"""Watch lines are assembled once, whatever the chunking, and bounded (issue 22, item 12)."""

from __future__ import annotations

import tracemalloc

from exporter.sources.watchlines import LineSplitter, OversizedLine

MiB = 1024 * 1024


def _split(chunks: list[bytes], limit: int = 1 << 20) -> list[bytes | OversizedLine]:
    splitter = LineSplitter(limit)
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    return lines + splitter.finish()


def test_every_chunking_gives_the_same_lines() -> None:
    stream = b'{"type":"ADDED"}\n\n  \n{"type":"MODIFIED","object":{}}\n{"type":"DELETED"}'
    expected = [b'{"type":"ADDED"}', b'{"type":"MODIFIED","object":{}}', b'{"type":"DELETED"}']
    for size in range(1, len(stream) + 1):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert _split(chunks) == expected, size


def test_a_line_over_the_limit_is_reported_with_its_size_and_its_neighbours_kept() -> None:
    chunks = [b"first\n" + b"x" * 10, b"x" * 25, b"x" * 5 + b"\nlast\n"]
    assert _split(chunks, limit=32) == [b"first", OversizedLine(40), b"last"]
    assert _split([b"a\n", b"y" * 40], limit=32) == [b"a", OversizedLine(40)]
    assert _split([b"z" * 32 + b"\n"], limit=32) == [b"z" * 32]


def test_pending_tells_an_unfinished_line() -> None:
    splitter = LineSplitter(100)
    started = splitter.pending
    assert splitter.feed(b'{"type":"ADD') == []
    unfinished = splitter.pending
    assert splitter.feed(b'ED"}\n') == [b'{"type":"ADDED"}']
    assert (started, unfinished, splitter.pending) == (False, True, False)


def _peak(feed: int, line_bytes: int, limit: int) -> tuple[int, list[bytes | OversizedLine]]:
    chunk = b"x" * feed
    tracemalloc.start()
    try:
        splitter = LineSplitter(limit)
        lines: list[bytes | OversizedLine] = []
        for _ in range(line_bytes // feed):
            lines += splitter.feed(chunk)
        lines += splitter.feed(b"\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, lines


def test_an_oversized_line_costs_at_most_the_limit() -> None:
    """64 MiB in one line with a 1 MiB limit: dropped as it comes, never held."""
    peak, lines = _peak(64 * 1024, 64 * MiB, limit=1 * MiB)
    assert lines == [OversizedLine(64 * MiB)]
    assert peak < 2 * MiB, peak


def test_a_long_line_is_joined_once() -> None:
    """A 16 MiB line from 64 KiB chunks: the line itself, not copies of a growing buffer.

    (`pending += chunk` then a split of the whole buffer at every chunk held two or three
    copies and rescanned them all each time: 25 s for a 64 MB line.)
    """
    peak, lines = _peak(64 * 1024, 16 * MiB, limit=32 * MiB)
    assert lines == [b"x" * 16 * MiB]
    assert peak < 17 * MiB, peak
