"""A snapshot's bytes, bounded: read whole, or a window at a time for the streamed JSON.

The size is bounded (`max_bytes`), special files are refused (a FIFO without a writer
would wait for ever), and text must be UTF-8 (or UTF-16 with a byte-order mark, as Windows
PowerShell writes it). `ChunkReader` is the window the streamed JSON reading
(`exporter.sources.snapshot`) scans: it finds where each JSON value ends without parsing
it, and declines (`StreamDeclinedError`) whatever it cannot decide.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import sys
from typing import IO

import msgspec

STDIN = "-"
# Far above any real cluster (kubectl's JSON for 5,000 nodes and 150,000 endpoints is a
# few hundred MB), and still a bound: /dev/zero on stdin stops here.
DEFAULT_MAX_INPUT_BYTES = 1 << 30
_READ_CHUNK = 1 << 20


class SnapshotError(Exception):
    """The snapshot cannot be used; the message is one line naming the file and the object."""


def _too_large(source: str, max_bytes: int) -> SnapshotError:
    return SnapshotError(f"{source}: larger than {max_bytes} bytes (see --max-input-bytes)")


def _read_stream(source: str, stream: IO[bytes], max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(min(_READ_CHUNK, max_bytes + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(source, max_bytes)
    return b"".join(chunks)


def open_regular(source: str, max_bytes: int) -> int:
    """A descriptor of the regular file `source`, at most max_bytes long."""
    try:
        # O_NONBLOCK: opening a FIFO without a writer would otherwise wait for ever.
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            status = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
    except OSError as error:
        raise SnapshotError(f"{source}: cannot read: {error.strerror or error}") from None
    problem = None
    if stat.S_ISDIR(status.st_mode):
        problem = SnapshotError(f"{source}: is a directory")
    elif not stat.S_ISREG(status.st_mode):
        problem = SnapshotError(
            f"{source}: not a regular file (a FIFO, device or socket); "
            "pipe it to --snapshot - instead"
        )
    elif status.st_size > max_bytes:
        problem = _too_large(source, max_bytes)
    if problem is not None:
        os.close(fd)
        raise problem
    return fd


def read_input(source: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file, or of stdin for "-", at most max_bytes of them."""
    if source == STDIN:
        return _read_stream(source, sys.stdin.buffer, max_bytes)
    fd = open_regular(source, max_bytes)
    try:
        with os.fdopen(fd, "rb", closefd=False) as stream:
            return _read_stream(source, stream, max_bytes)
    except OSError as error:
        raise SnapshotError(f"{source}: cannot read: {error.strerror or error}") from None
    finally:
        os.close(fd)


def utf8(source: str, data: bytes) -> bytes:
    """The input as UTF-8 without a byte-order mark; SnapshotError if it is not text."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16").encode()
        except UnicodeDecodeError:
            raise SnapshotError(f"{source}: not text (starts as UTF-16 but is not)") from None
    # Checked in chunks: decoding the whole file at once would hold a copy of it.
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    for start in range(0, len(data), _READ_CHUNK):
        try:
            decoder.decode(
                view[start : start + _READ_CHUNK], final=start + _READ_CHUNK >= len(data)
            )
        except UnicodeDecodeError as error:
            offset = start + error.start
            raise SnapshotError(f"{source}: not UTF-8 text (byte {offset})") from None
    return data


class StreamDeclinedError(Exception):
    """The streamed reading cannot decide; decode the whole file instead."""


_WHITESPACE = re.compile(rb"[ \t\r\n]*")
# After the opening quote: the rest of a string, its closing quote included.
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR = re.compile(rb"[^ \t\r\n,:\[\]{}\"]+")
_STRUCTURE = re.compile(rb'["\[\]{}]')
_SKIP_VALUE = msgspec.json.Decoder(msgspec.Raw)
_TRUNCATED = "Input data was truncated"
_TRAILING = re.compile(r"trailing characters \(byte ([0-9]+)\)")
# Bytes kept before the read position when the buffer is refilled: enough to see the
# indentation of an item's opening brace.
_HISTORY = 256


class ChunkReader:
    """A window over a byte stream, refilled in chunks, checked to be UTF-8 as it comes."""

    def __init__(self, source: str, stream: IO[bytes], max_bytes: int) -> None:
        self._source = source
        self._stream = stream
        self._max_bytes = max_bytes
        self._size = 0
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self.buffer = b""
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        """Append a chunk to the window (dropping what lies well behind pos); False at EOF."""
        if self.eof:
            return False
        chunk = self._stream.read(min(_READ_CHUNK, self._max_bytes + 1 - self._size))
        try:
            self._utf8.decode(chunk, final=not chunk)
        except UnicodeDecodeError:
            raise StreamDeclinedError from None
        if not chunk:
            self.eof = True
            return False
        self._size += len(chunk)
        if self._size > self._max_bytes:
            raise _too_large(self._source, self._max_bytes)
        start = max(0, self.pos - _HISTORY)
        self.buffer = self.buffer[start:] + chunk
        self.pos -= start
        return True

    def skip_whitespace(self) -> int | None:
        """The next byte that is not whitespace (pos is on it); None at the end."""
        while True:
            match = _WHITESPACE.match(self.buffer, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self.more():
                return None

    def expect(self, byte: bytes) -> None:
        if self.skip_whitespace() != byte[0]:
            raise StreamDeclinedError
        self.pos += 1

    def value_end(self) -> int:
        """Where the JSON value at pos ends (a scan of strings and brackets, not a parse)."""
        if self.buffer[self.pos] not in b'"[{':
            return self._scalar_end()
        depth = 0
        # Relative to pos: refilling the buffer moves pos, never what lies after it.
        scanned = 0
        while True:
            match = _STRUCTURE.search(self.buffer, self.pos + scanned)
            if match is None:
                scanned = len(self.buffer) - self.pos
                if not self.more():
                    raise StreamDeclinedError
                continue
            token = match.group()
            if token == b'"':
                scanned = self._string_end(match.end() - self.pos)
            else:
                scanned = match.end() - self.pos
                depth += 1 if token in b"[{" else -1
            if depth == 0:
                return self.pos + scanned

    def _scalar_end(self) -> int:
        while True:
            match = _SCALAR.match(self.buffer, self.pos)
            if match is None:
                raise StreamDeclinedError
            if match.end() < len(self.buffer) or not self.more():
                return match.end()

    def _string_end(self, after_quote: int) -> int:
        """Past the closing quote of the string whose opening quote ends before after_quote."""
        while (string := _STRING_REST.match(self.buffer, self.pos + after_quote)) is None:
            if not self.more():
                raise StreamDeclinedError
        return string.end() - self.pos

    def take_value(self) -> bytes:
        """The JSON value at pos, which pos then passes."""
        end = self.value_end()
        # value_end may refill the buffer, which moves pos (and end with it).
        value = self.buffer[self.pos : end]
        self.pos = end
        return value

    def take_item(self) -> bytes:
        """The array element at pos, found fast where it is laid out as kubectl prints it.

        kubectl indents: an item's closing brace is the first line holding only a brace at
        the indentation of its opening one. The guess is confirmed by the caller's decode,
        which fails unless the bytes are exactly one JSON value.
        """
        # Only the history kept before pos is searched: in compact JSON there is no newline,
        # and a search back to the window's start would read a mebibyte per item.
        line_start = self.buffer.rfind(b"\n", max(0, self.pos - _HISTORY), self.pos) + 1
        indent = self.buffer[line_start : self.pos] if line_start else b"?"
        if self.buffer[self.pos] != ord("{") or indent.strip(b" \t"):
            return self._take_decoded()
        closing = b"\n" + indent + b"}"
        searched = 0  # relative to pos, as in value_end
        while (found := self.buffer.find(closing, self.pos + searched)) < 0:
            searched = max(0, len(self.buffer) - len(closing) - self.pos)
            if not self.more():
                return self._take_decoded()
        end = found + len(closing)
        value = self.buffer[self.pos : end]
        self.pos = end
        return value

    def _take_decoded(self) -> bytes:
        """The value at pos, its end found by msgspec: decoding the window, it names the
        first byte past the value. What it cannot tell is left to value_end's scan."""
        while True:
            try:
                _SKIP_VALUE.decode(memoryview(self.buffer)[self.pos :])
            except msgspec.DecodeError as error:
                if str(error) == _TRUNCATED and self.more():
                    continue
                past = _TRAILING.search(str(error))
                if past is None:
                    return self.take_value()
                # msgspec counts the byte it stopped at, the first one past the value
                # and its whitespace; a miscount fails the caller's exact decode.
                end = self.pos + int(past.group(1)) - 1
            except RecursionError:
                # Nested deeper than msgspec goes: the scan decides, the decode refuses.
                return self.take_value()
            else:
                end = len(self.buffer)
            value = self.buffer[self.pos : end]
            self.pos = end
            return value
