"""The prometheus_client custom collector: renders every hint family from one ExporterState.

Built fresh on each scrape from the state the evaluator last published, so series of
deleted Services vanish without any purge code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter.engine import Mechanism, ProxyMode, ServiceVerdict
from exporter.evaluator import ExporterState, ServiceResult
from exporter.metrics.families import (
    CLUSTER_FAMILIES,
    CONTROLLER_EVENTS,
    HINT_FAMILIES,
    LAST_EVENT_TIMESTAMP,
    NODE_PROXY_SERVICES,
    SERVICE_CONFIG_ISSUE,
    SERVICE_ENTRY_FAMILIES,
    SERVICE_INFO,
    SERVICE_PROXY_NODES,
    Family,
    MetricType,
    Sample,
    entries_of,
    entry_family_samples,
    proxy_node_counts,
)


@dataclass(frozen=True, slots=True)
class ExportOptions:
    # Export every Service, not only those that opted in, carry hints or have config issues.
    all_services: bool = False


class FamilyFilter:
    """kube-state-metrics' --metric-allowlist / --metric-denylist: full-match regexes."""

    def __init__(self, allow: Sequence[str] = (), deny: Sequence[str] = ()) -> None:
        if allow and deny:
            raise ValueError("use either an allowlist or a denylist, not both")
        self._allow = [re.compile(pattern) for pattern in allow]
        self._deny = [re.compile(pattern) for pattern in deny]

    def allows(self, name: str) -> bool:
        if self._allow:
            return any(pattern.fullmatch(name) for pattern in self._allow)
        return not any(pattern.fullmatch(name) for pattern in self._deny)


def is_exported(verdicts: Iterable[ServiceVerdict], options: ExportOptions) -> bool:
    """By default, only Services where hints are in play: keeps cardinality bounded."""
    return options.all_services or any(
        verdict.mechanism is not Mechanism.NONE or verdict.carries_hints or verdict.config_issues
        for verdict in verdicts
    )


def new_family(family: Family) -> GaugeMetricFamily | CounterMetricFamily:
    if family.type is MetricType.COUNTER:
        return CounterMetricFamily(family.name, family.help, labels=family.labels)
    return GaugeMetricFamily(family.name, family.help, labels=family.labels)


def _filled(family: Family, samples: Iterable[Sample]) -> Metric:
    metric = new_family(family)
    for labels, value in samples:
        metric.add_metric(list(labels), value)
    return metric


class HintsCollector(Collector):
    def __init__(
        self,
        state: Callable[[], ExporterState],
        *,
        ready: Callable[[], bool],
        options: ExportOptions | None = None,
    ) -> None:
        self._state = state
        self._ready = ready
        self._options = options or ExportOptions()

    def describe(self) -> Iterator[Metric]:
        """The families, empty: lets a registry serve `name[]`-filtered scrapes."""
        for family in HINT_FAMILIES:
            yield new_family(family)

    def collect(self) -> Iterator[Metric]:
        # Until every informer has listed once, a partial snapshot would report false
        # refusals (a cluster with half its nodes): export nothing rather than wrong values.
        if not self._ready():
            return
        state = self._state()
        exported = [
            result
            for _, result in sorted(state.services.items())
            if is_exported(result.verdicts, self._options)
        ]
        entries = [entry for result in exported for entry in entries_of(result)]
        verdicts = [entry.verdict for entry in entries]
        for family, cluster_samples in CLUSTER_FAMILIES:
            yield _filled(family, cluster_samples(state))
        yield _filled(SERVICE_INFO, service_info_samples(exported))
        yield _filled(SERVICE_CONFIG_ISSUE, config_issue_samples(exported))
        for family, entry_samples in SERVICE_ENTRY_FAMILIES:
            yield _filled(family, entry_family_samples(entry_samples, entries))
        yield _filled(SERVICE_PROXY_NODES, proxy_node_samples(verdicts, state))
        yield _filled(NODE_PROXY_SERVICES, node_proxy_service_samples(verdicts, state))
        exported_keys = {result.service.key for result in exported}
        yield _filled(LAST_EVENT_TIMESTAMP, last_event_samples(state, exported_keys))
        yield _filled(
            CONTROLLER_EVENTS,
            (((reason,), float(total)) for reason, total in sorted(state.event_totals.items())),
        )


def last_event_samples(state: ExporterState, exported: set[tuple[str, str]]) -> Iterator[Sample]:
    """Events of exported Services only: a deleted Service's timestamps vanish with it."""
    for key, timestamp in sorted(state.last_event.items()):
        if key[:2] in exported:
            yield key, timestamp


def service_info_samples(exported: Iterable[ServiceResult]) -> Iterator[Sample]:
    for result in exported:
        service = result.service
        yield (
            (
                service.namespace,
                service.name,
                str(result.verdicts[0].mechanism),
                service.traffic_distribution or "",
                service.internal_traffic_policy or "",
            ),
            1.0,
        )


def config_issue_samples(exported: Iterable[ServiceResult]) -> Iterator[Sample]:
    for result in exported:
        service = result.service
        for issue in sorted(result.verdicts[0].config_issues):
            yield (service.namespace, service.name, str(issue)), 1.0


def proxy_node_samples(
    verdicts: Iterable[ServiceVerdict], state: ExporterState
) -> Iterator[Sample]:
    for verdict in verdicts:
        for mode, count in sorted(proxy_node_counts(verdict, state).items()):
            yield (*verdict.key, str(mode)), float(count)


def node_proxy_service_samples(
    verdicts: Iterable[ServiceVerdict], state: ExporterState
) -> Iterator[Sample]:
    """Per node and mode, over exported entries; computed per zone, then adjusted per node.

    Every node of a zone shares the zone's mode unless a node hint names it, so the cost
    is zones x entries plus the PreferSameNode nodes, not nodes x entries.
    """
    by_zone: dict[str, dict[ProxyMode, int]] = {}
    adjustments: dict[str, dict[ProxyMode, int]] = {}
    for verdict in verdicts:
        proxy = verdict.proxy
        for zone, mode in proxy.by_zone.items():
            counts = by_zone.setdefault(zone, {})
            counts[mode] = counts.get(mode, 0) + 1
        for node in proxy.same_node:
            zone_mode = proxy.by_zone.get(state.nodes.zone_of.get(node, ""))
            adjust = adjustments.setdefault(node, {})
            adjust[ProxyMode.PREFER_SAME_NODE] = adjust.get(ProxyMode.PREFER_SAME_NODE, 0) + 1
            if zone_mode is not None:
                adjust[zone_mode] = adjust.get(zone_mode, 0) - 1
    for zone, nodes in state.nodes.by_zone.items():
        zone_counts = by_zone.get(zone, {})
        for node in nodes:
            counts = dict(zone_counts)
            for mode, delta in adjustments.get(node, {}).items():
                counts[mode] = counts.get(mode, 0) + delta
            for mode, count in sorted(counts.items()):
                if count > 0:
                    yield (node, zone, str(mode)), float(count)


class FilteringCollector(Collector):
    """Drops whole families the allowlist or denylist excludes, whoever produced them."""

    def __init__(self, inner: Collector, family_filter: FamilyFilter) -> None:
        self._inner = inner
        self._filter = family_filter

    def _allowed(self, metrics: Iterable[Metric]) -> Iterator[Metric]:
        for metric in metrics:
            exposed = metric.name + "_total" if metric.type == "counter" else metric.name
            if self._filter.allows(exposed):
                yield metric

    def describe(self) -> Iterator[Metric]:
        describe = getattr(self._inner, "describe", None)
        return self._allowed(describe() if describe is not None else self._inner.collect())

    def collect(self) -> Iterator[Metric]:
        return self._allowed(self._inner.collect())
