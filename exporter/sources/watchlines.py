"""A watch stream's bytes into its lines (one JSON event each), bounded in time and memory."""

from __future__ import annotations

from dataclasses import dataclass

# The largest watch event read. etcd refuses requests over 1.5 MiB by default, so no stored
# object's JSON comes near this; a longer line is skipped (see `LineSplitter`).
MAX_WATCH_LINE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class OversizedLine:
    """A watch event longer than the line limit, skipped; its size in bytes."""

    size: int


class LineSplitter:
    """Newline-delimited JSON from a watch's chunks, in time and memory linear in its length.

    Each chunk is scanned once for newlines, and a line split over chunks is kept as its
    pieces, joined once when its newline arrives: growing one buffer (`pending += chunk`)
    and splitting all of it at every chunk copied and rescanned a long line once per chunk,
    which took 25 s for a 64 MB line. A line longer than `limit` is not kept: its bytes are
    dropped as they arrive until its newline, and it comes out as an OversizedLine.
    Blank lines are skipped.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0  # bytes of the unfinished line so far, kept or not

    @property
    def pending(self) -> bool:
        """Whether an unfinished line has begun."""
        return self._size > 0

    def feed(self, chunk: bytes) -> list[bytes | OversizedLine]:
        """The lines this chunk completes."""
        lines: list[bytes | OversizedLine] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._size += end - start
            if self._parts and self._size <= self._limit:
                self._parts.append(chunk[start:end])
                self._emit(lines, b"".join(self._parts))
            else:
                self._emit(lines, chunk[start:end])
            self._parts, self._size = [], 0
            start = end + 1
        if start < len(chunk):
            self._size += len(chunk) - start
            if self._size > self._limit:
                self._parts = []
            else:
                self._parts.append(chunk[start:] if start else chunk)
        return lines

    def finish(self) -> list[bytes | OversizedLine]:
        """The last line, when the stream ends without a newline."""
        lines: list[bytes | OversizedLine] = []
        if self._size:
            self._emit(lines, b"".join(self._parts))
        self._parts, self._size = [], 0
        return lines

    def _emit(self, lines: list[bytes | OversizedLine], line: bytes) -> None:
        # self._size is the whole line's length, even when its bytes were dropped.
        if self._size > self._limit:
            lines.append(OversizedLine(self._size))
        elif line.strip():
            lines.append(line)
