"""The exporter's own families: `instruments.py` updates prometheus_client instruments as
things happen (no sampler here).
"""

from __future__ import annotations

from exporter.metrics.family import COUNTER, GAUGE, HISTOGRAM, Declarations, Scope

_declare = Declarations()

BUILD_INFO = _declare(
    "build_info",
    GAUGE,
    Scope.EXPORTER,
    "1, labelled with the exporter's version.",
    labels=("version",),
)
# Set by instruments.py at start from --cross-zone-price-per-gib; every shard exports it.
CROSS_ZONE_PRICE_PER_GIB = _declare(
    "cross_zone_price_per_gib",
    GAUGE,
    Scope.EXPORTER,
    "Price of one GiB of cross-zone traffic (serve --cross-zone-price-per-gib), in the "
    "operator's currency; absent when not given. Every shard exports it: aggregate with max.",
)
STATUS_PAGE_INFO = _declare(
    "status_page_info",
    GAUGE,
    Scope.EXPORTER,
    "1, labelled with the URL users reach the status page at (serve --external-url); alerts "
    "link each Service's page from it. Absent without --external-url.",
    labels=("url",),
)
WATCH_UP = _declare(
    "watch_up",
    GAUGE,
    Scope.EXPORTER,
    "1 while the list/watch of the resource is healthy, 0 while it is failing.",
    labels=("resource",),
)
WATCH_RESTARTS_TOTAL = _declare(
    "watch_restarts_total",
    COUNTER,
    Scope.EXPORTER,
    "Watch restarts by cause: closed (normal end), expired (410 Gone, full relist), "
    "error, forbidden, throttled (429 or 503 with Retry-After), stalled (no event and no "
    "bookmark for 150 s).",
    labels=("resource", "cause"),
)
WATCH_EVENTS_TOTAL = _declare(
    "watch_events_total",
    COUNTER,
    Scope.EXPORTER,
    "Watch events received, by event type.",
    labels=("resource", "type"),
)
INVALID_OBJECTS_TOTAL = _declare(
    "invalid_objects_total",
    COUNTER,
    Scope.EXPORTER,
    "Objects skipped because they lacked a field the rules need or had the wrong type.",
    labels=("resource",),
)
OBJECTS = _declare(
    "objects",
    GAUGE,
    Scope.EXPORTER,
    "Objects held in the exporter's cluster snapshot.",
    labels=("resource",),
)
LAST_EVALUATION_TIMESTAMP_SECONDS = _declare(
    "last_evaluation_timestamp_seconds",
    GAUGE,
    Scope.EXPORTER,
    "Unix time of the latest evaluation.",
)
EVALUATION_DURATION_SECONDS = _declare(
    "evaluation_duration_seconds",
    HISTOGRAM,
    Scope.EXPORTER,
    "Time to apply one batch of changes and re-evaluate the affected Services.",
)
SHARD_ORDINAL = _declare(
    "shard_ordinal", GAUGE, Scope.EXPORTER, "This exporter's shard ordinal (0 when not sharded)."
)
TOTAL_SHARDS = _declare(
    "total_shards", GAUGE, Scope.EXPORTER, "The number of shards Services are split into."
)
READY = _declare(
    "ready",
    GAUGE,
    Scope.EXPORTER,
    "1 once every required informer has listed its resource; hint metrics wait for it.",
)


FAMILIES = _declare.families
