"""The expensive /metrics path: the hint families in a name escaping that rewrites names.

Under `escaping=dots` or `escaping=values` prometheus_client rewrites every metric and label
name, even legacy ones, so the cached fragments (`exposition.py`) cannot serve the request.
prometheus_client's `generate_latest` over the whole registry built the whole body as
Python strings before encoding it: on a 3,000-Service cluster 1.1 s of CPU a request, and
35 MiB more peak resident memory (bench/escaping.py).

So the hint families are rendered by prometheus_client one family at a time (the peak is
one family's strings, not the body's), and the rendering is kept, as bytes chunks, for the
state it shows and the content type asked for: scrapes of one state in one format cost one
render. Only the last rendering is kept (a second escaping asked for replaces it), so the
memory it holds is one body. Renders are serialised; the server also lets only
`max_expensive_scrapes` such requests run at once (`exporter.http.slots`).
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from exporter.metrics.gzipstream import DEFLATE_END, GZIP_HEADER, checksum, deflate, trailer

# What prometheus_client's OpenMetrics encoder ends each rendering with; the body has one.
_EOF = b"# EOF\n"


class _One(Collector):
    """A collector of one family: what `generate_latest` renders on its own."""

    def __init__(self, metric: Metric) -> None:
        self._metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self._metric


@dataclass
class _Rendering:
    """The hint families of one state in one content type; gzip parts made when first asked."""

    state: object
    ready: bool
    content_type: str
    chunks: list[bytes]
    segments: list[bytes] | None = None
    crc: int = 0
    size: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def gzip_parts(self) -> tuple[list[bytes], int, int]:
        with self.lock:
            if self.segments is None:
                self.segments = [deflate(chunk) for chunk in self.chunks]
                self.crc, self.size = checksum(self.chunks)
            return self.segments, self.crc, self.size


class EscapedRenderer:
    """The hint families as prometheus_client writes them with a given encoder, kept per state.

    `hints` is the hint collector (filtered as the registry is); `state` returns the
    published state (compared by identity) and `ready` whether the collector exports it:
    what its output depends on. Both are read before and after a render, so a rendering
    is kept only for the state it shows.
    """

    def __init__(
        self, hints: Collector, state: Callable[[], object], ready: Callable[[], bool]
    ) -> None:
        self._hints = hints
        self._state = state
        self._ready = ready
        self._lock = threading.Lock()
        self._kept: _Rendering | None = None
        # Renders done since it was made: tests bound them.
        self.renders = 0

    def _rendering(self, encoder: Callable[[Collector], bytes], content_type: str) -> _Rendering:
        with self._lock:
            state, ready = self._state(), self._ready()
            kept = self._kept
            if (
                kept is not None
                and kept.state is state
                and kept.ready == ready
                and kept.content_type == content_type
            ):
                return kept
            # Dropped before the new one is built: never two bodies held at once.
            self._kept = None
            chunks = [encoder(_One(metric)).removesuffix(_EOF) for metric in self._hints.collect()]
            self.renders += 1
            rendering = _Rendering(state, ready, content_type, [chunk for chunk in chunks if chunk])
            if self._state() is state and self._ready() == ready:
                self._kept = rendering
            return rendering

    def render(self, encoder: Callable[[Collector], bytes], content_type: str) -> list[bytes]:
        """The hint families' chunks (without OpenMetrics' `# EOF`, which the tail ends with)."""
        return self._rendering(encoder, content_type).chunks

    def render_gzip(
        self, encoder: Callable[[Collector], bytes], content_type: str, tail: Callable[[], bytes]
    ) -> list[bytes]:
        """The hint families then `tail()`, as one gzip member; `tail` is called after the
        families are rendered (see MetricsEndpoint.chunks)."""
        segments, crc, size = self._rendering(encoder, content_type).gzip_parts()
        end = tail()
        return [
            GZIP_HEADER,
            *segments,
            deflate(end),
            DEFLATE_END,
            trailer(zlib.crc32(end, crc), size + len(end)),
        ]
