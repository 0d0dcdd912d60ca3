"""The gzip stream the /metrics body is written as: one member from per-chunk segments."""

from __future__ import annotations

import gzip
import zlib

from exporter.metrics.gzipstream import SegmentCache, checksum, deflate, gzip_stream

CHUNKS = [b"# HELP a A.\n# TYPE a gauge\n", b'a{zone="z1"} 1\n' * 500, b"", b"a 2\n"]


def _one_member(stream: bytes) -> bytes:
    """The bytes of the stream's first gzip member, asserting nothing follows it (curl and
    browsers decode only the first member)."""
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
    data = decoder.decompress(stream)
    assert decoder.eof
    assert decoder.unused_data == b""
    return data


def test_segments_of_chunks_make_one_gzip_member_of_their_bytes() -> None:
    segments, compressed = SegmentCache().segments([CHUNKS[:2], CHUNKS[2:]])
    crc, size = checksum(CHUNKS)
    stream = b"".join(gzip_stream([s for group in segments for s in group], crc, size))

    assert compressed == len(CHUNKS)
    assert _one_member(stream) == b"".join(CHUNKS)
    assert gzip.decompress(stream) == b"".join(CHUNKS)  # the trailer's CRC and size check


def test_checksum_continues_from_a_crc_and_size() -> None:
    crc, size = checksum(CHUNKS[:2])
    assert checksum(CHUNKS[2:], crc, size) == (zlib.crc32(b"".join(CHUNKS)), len(b"".join(CHUNKS)))


def test_a_segment_is_reused_while_its_chunk_is_the_same_object() -> None:
    cache = SegmentCache()
    first, _ = cache.segments([CHUNKS])
    changed = b"a 3\n"
    again, compressed = cache.segments([[*CHUNKS[:3], changed]])

    assert compressed == 1
    assert again[0][:3] == first[0][:3]
    assert again[0][3] == deflate(changed)
    # A chunk dropped from the body is forgotten: bringing it back compresses it again.
    _, compressed = cache.segments([CHUNKS])
    assert compressed == 1


def test_an_empty_body_is_a_valid_member() -> None:
    stream = b"".join(gzip_stream([deflate(b"")], zlib.crc32(b""), 0))
    assert _one_member(stream) == b""
