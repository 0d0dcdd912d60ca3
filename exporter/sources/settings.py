"""How an informer asks and waits: page size, watch timeouts, backoffs, stall bounds.

`exporter.sources.informer` reads these; the live exporter's are the defaults, tests shorten
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter.sources.kubeapi import Timeouts
from exporter.sources.watchlines import MAX_WATCH_LINE_BYTES

# kube-apiserver sends a BOOKMARK on a watch with allowWatchBookmarks=true about once a minute
# (its cacher's bookmarkFrequency), so two and a half minutes without one is a stall.
WATCH_SILENCE_SECONDS = 150.0


@dataclass(frozen=True, slots=True)
class InformerSettings:
    """How an informer lists and watches: page size, watch timeouts, cache and streaming-list
    use, backoffs, stall bounds (the defaults are the live exporter's)."""

    page_size: int = 500  # consistent LISTs only: the watch cache ignores limit
    # The shortest timeoutSeconds asked of a watch; each draws one in [this, twice this),
    # as client-go's minWatchTimeout * (1 + rand).
    watch_timeout_seconds: int = 300
    # LIST from the API server's watch cache (resourceVersion=0), not a quorum read of etcd.
    use_apiserver_cache: bool = True
    # Try a streaming list first (WatchList); the first refusal switches to LIST for good.
    streaming_list: bool = True
    # A relist after 410 Gone waits a jittered delay from this (growing while 410s repeat
    # without progress), as client-go's reflector backs off between ListAndWatch calls:
    # a fleet whose watches expire together must not relist together.
    relist_backoff_initial: float = 1.6
    timeouts: Timeouts = field(default_factory=Timeouts)
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    # 403s are retried on a backoff of their own that grows from backoff_initial to this:
    # a restarted API server refuses everyone for the seconds its RBAC caches take to
    # sync (a fixed 5-minute wait kept the state stale that long), while a permission that
    # is really missing is asked for rarely (RBAC changes are slow).
    forbidden_retry: float = 300.0
    # A Retry-After longer than this is cut to it: a misbehaving proxy cannot park a watch.
    retry_after_max: float = 300.0
    # Watches from the same resourceVersion that fail before any event (an error status or
    # ERROR event of any code, an event that cannot be decoded, a stall) before listing
    # again: whatever the server keeps answering for that resourceVersion, a LIST moves on.
    resume_attempts: int = 3
    # No event and no bookmark for this long: the watch is stalled; it is restarted, and
    # reported (watch_up 0, /readyz) once the server is known to send bookmarks. A
    # streaming list without its end bookmark after this long is reported too (read on).
    watch_silence_seconds: float = WATCH_SILENCE_SECONDS
    max_line_bytes: int = MAX_WATCH_LINE_BYTES
