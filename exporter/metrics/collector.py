"""The prometheus_client custom collector over the family table, and what both renderers share.

It serves `name[]`-filtered scrapes; `exposition.py` renders the same table from cached
per-Service fragments, and a test holds the two byte for byte equal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter.engine import EntryVerdict
from exporter.engine.problems import in_play
from exporter.metrics.families import HINT_FAMILIES
from exporter.metrics.family import Family, MetricType, PerScrape, PerService, Sample, Scrape
from exporter.state.result import ClusterResult


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """Which Services a scrape exports: all of them (--all-services), or the ones that ask for
    topology, carry hints or have config issues."""

    # Export every Service, not only those that opted in, carry hints or have config issues.
    all_services: bool = False


class FamilyFilter:
    """kube-state-metrics' --metric-allowlist / --metric-denylist: full-match regexes.

    `withheld` names families this exporter leaves to another (a shard other than 0 leaves
    the families that every shard would export alike to shard 0), whatever the lists say.
    """

    def __init__(
        self,
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        *,
        withheld: Iterable[str] = (),
    ) -> None:
        if allow and deny:
            raise ValueError("use either an allowlist or a denylist, not both")
        self._allow = [re.compile(pattern) for pattern in allow]
        self._deny = [re.compile(pattern) for pattern in deny]
        self._withheld = frozenset(withheld)

    def allows(self, name: str) -> bool:
        if name in self._withheld:
            return False
        if self._allow:
            return any(pattern.fullmatch(name) for pattern in self._allow)
        return not any(pattern.fullmatch(name) for pattern in self._deny)


def is_exported(verdicts: Iterable[EntryVerdict], options: ExportOptions) -> bool:
    """By default, only Services where hints are in play (the entries that can have a
    problem, exporter.engine.problems): keeps cardinality bounded."""
    return options.all_services or any(in_play(verdict) for verdict in verdicts)


def new_family(family: Family) -> GaugeMetricFamily | CounterMetricFamily:
    if family.type is MetricType.COUNTER:
        return CounterMetricFamily(family.name, family.help, labels=family.labels)
    return GaugeMetricFamily(family.name, family.help, labels=family.labels)


def family_samples(family: Family, scrape: Scrape) -> Iterator[Sample]:
    """Every sample of a hint family in exposition order, whichever way it is produced."""
    match family.samples:
        case PerService(function):
            for service in scrape.subjects:
                yield from function(service)
        case PerScrape(function):
            yield from function(scrape)
        case None:
            raise ValueError(f"{family.name} is updated by instruments, not rendered")


def exported_scrape(state: ClusterResult, options: ExportOptions) -> Scrape:
    """The state with the Services this exporter exports, in key order."""
    exported = tuple(
        result
        for _, result in sorted(state.services.items())
        if is_exported(result.verdicts, options)
    )
    return Scrape(state, exported)


class HintsCollector(Collector):
    """Every hint family of the table, in its order, from the state last published.

    Built fresh on each scrape, so series of deleted Services vanish without purge code.
    """

    def __init__(
        self,
        state: Callable[[], ClusterResult],
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
        scrape = exported_scrape(self._state(), self._options)
        for family in HINT_FAMILIES:
            metric = new_family(family)
            for labels, value in family_samples(family, scrape):
                metric.add_metric(list(labels), value)
            yield metric


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
