"""The exporter's own health metrics: watches, invalid objects, evaluations, build, shard."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter.metrics.families import (
    BUILD_INFO,
    CROSS_ZONE_PRICE_PER_GIB,
    DATAPLANE_INFO,
    EVALUATION_DURATION_SECONDS,
    INVALID_OBJECTS_TOTAL,
    LAST_EVALUATION_TIMESTAMP_SECONDS,
    OBJECTS,
    READY,
    SHARD_ORDINAL,
    STATUS_PAGE_INFO,
    TOTAL_SHARDS,
    WATCH_EVENTS_TOTAL,
    WATCH_RESTARTS_TOTAL,
    WATCH_UP,
)
from exporter.state.result import ClusterResult
from exporter.vocabulary import (
    EVENT_TYPE_LABELS,
    RESTART_CAUSES,
    EventTypeLabel,
    Resource,
    RestartCause,
)

RESOURCES = tuple(Resource)
# An incremental evaluation takes well under a millisecond; a full one of a large cluster
# takes seconds.
EVALUATION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                      0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)  # fmt: skip


class ExporterMetrics:
    """Instruments updated by the informers and the evaluator as things happen."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        version: str,
        shard: int = 0,
        total_shards: int = 1,
        resources: tuple[Resource, ...] = RESOURCES,
        dataplanes: Iterable[tuple[str, str]] = (),
        external_url: str | None = None,
        cross_zone_price_per_gib: float | None = None,
    ) -> None:
        build = Gauge(BUILD_INFO.name, BUILD_INFO.help, BUILD_INFO.labels, registry=registry)
        build.labels(version).set(1)
        if external_url is not None:
            page = Gauge(
                STATUS_PAGE_INFO.name, STATUS_PAGE_INFO.help, STATUS_PAGE_INFO.labels,
                registry=registry,
            )  # fmt: skip
            page.labels(external_url.rstrip("/")).set(1)
        if cross_zone_price_per_gib is not None:
            Gauge(
                CROSS_ZONE_PRICE_PER_GIB.name, CROSS_ZONE_PRICE_PER_GIB.help, registry=registry
            ).set(cross_zone_price_per_gib)
        # (data plane, source): fixed for the process's life, chosen before the first watch.
        dataplane_info = Gauge(
            DATAPLANE_INFO.name, DATAPLANE_INFO.help, DATAPLANE_INFO.labels, registry=registry
        )
        for dataplane, source in dataplanes:
            dataplane_info.labels(dataplane, source).set(1)
        Gauge(SHARD_ORDINAL.name, SHARD_ORDINAL.help, registry=registry).set(shard)
        Gauge(TOTAL_SHARDS.name, TOTAL_SHARDS.help, registry=registry).set(total_shards)
        self._up = Gauge(WATCH_UP.name, WATCH_UP.help, WATCH_UP.labels, registry=registry)
        self._restarts = Counter(
            WATCH_RESTARTS_TOTAL.name,
            WATCH_RESTARTS_TOTAL.help,
            WATCH_RESTARTS_TOTAL.labels,
            registry=registry,
        )
        self._events = Counter(
            WATCH_EVENTS_TOTAL.name,
            WATCH_EVENTS_TOTAL.help,
            WATCH_EVENTS_TOTAL.labels,
            registry=registry,
        )
        self._invalid = Counter(
            INVALID_OBJECTS_TOTAL.name,
            INVALID_OBJECTS_TOTAL.help,
            INVALID_OBJECTS_TOTAL.labels,
            registry=registry,
        )
        self._duration = Histogram(
            EVALUATION_DURATION_SECONDS.name,
            EVALUATION_DURATION_SECONDS.help,
            buckets=EVALUATION_BUCKETS,
            registry=registry,
        )
        # Zero-valued series from the start, so rate() and alerts see the first increment.
        # Each watch event counts one: the labelled children are looked up once, here, as
        # `labels()` costs more than the increment (25,000 events in a sync at 5,000 nodes).
        self._event_counts: dict[tuple[str, str], Counter] = {}
        for resource in resources:
            self._up.labels(resource).set(0)
            self._invalid.labels(resource)
            for cause in RESTART_CAUSES:
                self._restarts.labels(resource, cause)
            for event_type in EVENT_TYPE_LABELS:
                self._event_counts[resource, event_type] = self._events.labels(resource, event_type)

    def watch_up(self, resource: Resource, *, up: bool) -> None:
        self._up.labels(resource).set(1 if up else 0)

    def watch_restart(self, resource: Resource, cause: RestartCause) -> None:
        self._restarts.labels(resource, cause).inc()

    def watch_event(self, resource: Resource, event_type: EventTypeLabel) -> None:
        counter = self._event_counts.get((resource, event_type))
        if counter is None:
            counter = self._events.labels(resource, event_type)
        counter.inc()

    def invalid_object(self, resource: Resource) -> None:
        self._invalid.labels(resource).inc()

    def evaluation(self, seconds: float) -> None:
        self._duration.observe(seconds)


class StatusCollector(Collector):
    """Scrape-time figures: objects held, readiness, and when the state was last evaluated."""

    def __init__(
        self,
        counts: Callable[[], Mapping[Resource, int]],
        state: Callable[[], ClusterResult],
        ready: Callable[[], bool],
    ) -> None:
        self._counts = counts
        self._state = state
        self._ready = ready

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(OBJECTS.name, OBJECTS.help, labels=OBJECTS.labels)
        yield GaugeMetricFamily(READY.name, READY.help)
        yield GaugeMetricFamily(
            LAST_EVALUATION_TIMESTAMP_SECONDS.name, LAST_EVALUATION_TIMESTAMP_SECONDS.help
        )

    def collect(self) -> Iterator[Metric]:
        objects = GaugeMetricFamily(OBJECTS.name, OBJECTS.help, labels=OBJECTS.labels)
        for resource, count in sorted(self._counts().items()):
            objects.add_metric([resource], count)
        yield objects
        yield GaugeMetricFamily(READY.name, READY.help, value=float(self._ready()))
        evaluated_at = self._state().evaluated_at
        if evaluated_at is not None:
            yield GaugeMetricFamily(
                LAST_EVALUATION_TIMESTAMP_SECONDS.name,
                LAST_EVALUATION_TIMESTAMP_SECONDS.help,
                value=evaluated_at,
            )
