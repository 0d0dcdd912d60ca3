"""What a metric family is and how its samples are produced; the declarations are in
`families/`, one module per subject.

A declaration is a name, a type, a scope (what one series describes), a help text, the
labels after the scope's identity labels, and how its samples are produced:

- `each_entry` / `each_service`: from one Service's result (and the Ready nodes, whose
  change re-evaluates every Service). The cached fragment renderer keeps these lines until
  the Service is re-evaluated; the identity labels (`namespace, service[, address_type]`)
  are prepended, as kube-state-metrics does, so the function only yields its own labels.
- `from_scrape`: from the whole published state and the set of exported Services, for
  figures that span Services or change without re-evaluating one (controller events); the
  function yields every label, identity labels included.
- `summed`: a running sum over the exported Services, kept by the cached renderer.
- none, for the exporter's own families: `instruments.py` updates prometheus_client
  instruments as things happen.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from exporter.engine import EntryVerdict, ReadyNodes
from exporter.engine.whatif.forecast import NO_FORECAST, EntryForecast
from exporter.state.result import ClusterResult, ServiceResult
from exporter.vocabulary import EntryKey

PREFIX = "topology_hints_"

# (label values, value); label values in the family's label order.
Sample = tuple[tuple[str, ...], float]
_Contribution = TypeVar("_Contribution")


class MetricType(StrEnum):
    """A metric family's Prometheus type."""

    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


class Scope(StrEnum):
    """What one series of a family describes; the identity labels it starts with."""

    CLUSTER = "cluster"
    NODE = "node"
    SERVICE = "service"
    SERVICE_ENTRY = "service entry"  # one (Service, address type)
    EXPORTER = "exporter"

    @property
    def identity_labels(self) -> tuple[str, ...]:
        return _IDENTITY_LABELS[self]


_IDENTITY_LABELS = {
    Scope.CLUSTER: (),
    Scope.NODE: ("node",),
    Scope.SERVICE: ("namespace", "service"),
    Scope.SERVICE_ENTRY: ("namespace", "service", "address_type"),
    Scope.EXPORTER: (),
}


@dataclass(frozen=True, slots=True)
class ServiceEntry:
    """One exported (Service, address type) verdict, its flip counter, what-if forecast and
    the Ready nodes."""

    verdict: EntryVerdict
    state_changes: int
    nodes: ReadyNodes
    forecast: EntryForecast = NO_FORECAST


@dataclass(frozen=True)
class ServiceSubject:
    """One exported Service as the per-Service families see it; its entries built once."""

    result: ServiceResult
    nodes: ReadyNodes

    @functools.cached_property
    def entries(self) -> tuple[tuple[EntryKey, ServiceEntry], ...]:
        """(identity label values, entry) per address type."""
        return service_entries(self.result, self.nodes)


def service_entries(
    result: ServiceResult, nodes: ReadyNodes
) -> tuple[tuple[EntryKey, ServiceEntry], ...]:
    """(identity label values, entry) per address type of one Service."""
    forecasts = result.forecasts or (NO_FORECAST,) * len(result.verdicts)
    return tuple(
        [
            (verdict.key, ServiceEntry(verdict, flips, nodes, forecast))
            for verdict, flips, forecast in zip(
                result.verdicts, result.state_changes, forecasts, strict=True
            )
        ]
    )


@dataclass(frozen=True)
class Scrape:
    """What one scrape renders: the published state and its exported Services in key order."""

    state: ClusterResult
    exported: tuple[ServiceResult, ...]

    @functools.cached_property
    def verdicts(self) -> tuple[EntryVerdict, ...]:
        return tuple(verdict for result in self.exported for verdict in result.verdicts)

    @functools.cached_property
    def subjects(self) -> tuple[ServiceSubject, ...]:
        return tuple(ServiceSubject(result, self.state.nodes) for result in self.exported)


@dataclass(frozen=True, slots=True)
class PerService:
    """Samples of one Service from its result and the Ready nodes (identity labels included):
    cacheable until the evaluator replaces the result."""

    function: Callable[[ServiceSubject], Iterable[Sample]]
    # The same samples without the identity labels, per (Service, address type) entry or
    # per Service (one of the two): the renderer formats a Service's identity once.
    entry: Callable[[ServiceEntry], Iterable[Sample]] | None = None
    service: Callable[[ServiceResult], Iterable[Sample]] | None = None
    # The samples also read the Ready nodes: they change with the node view even when the
    # Service's result does not.
    reads_nodes: bool = False
    # What the samples read of one entry (or of the Service, for `service`) besides its
    # identity labels and, when `reads_nodes`, the Ready nodes: while it compares equal
    # (`is`, then `==`) for every entry of a replaced result, the cached renderer keeps the
    # family's lines. It must decide the samples wholly (order included), and cost less
    # than rendering them: a family names it only where an object the engine's memos share
    # lets `is` decide. None: when `parts` moved, the lines are rendered again and kept
    # only if their bytes differ (one pass over the samples, where comparing old and new
    # samples took two before the render).
    inputs: Callable[[Any], object] | None = None
    # The parts of an entry the samples read besides the identity labels and, when
    # `reads_nodes`, the Ready nodes (`ENTRY_PARTS`: its verdict's fields, its flip counter
    # and its forecast; for `service`, those of any of the Service's entries). A replaced
    # result none of whose entries changed in these keeps the family's lines without
    # `inputs` being compared: a node resize moves a verdict's zones and cross-zone figures
    # only. None: not declared (`inputs` decides).
    parts: frozenset[str] | None = None


# What `PerService.parts` may name: the fields of an entry's verdict, and its flip counter
# and what-if forecast (`ServiceEntry.state_changes`, `.forecast`).
VERDICT_PARTS = frozenset(field.name for field in fields(EntryVerdict))
ENTRY_PARTS = VERDICT_PARTS | {"state_changes", "forecast"}


def _parts(names: Iterable[str] | None) -> frozenset[str] | None:
    if names is None:
        return None
    parts = frozenset(names)
    if unknown := parts - ENTRY_PARTS:
        raise ValueError(f"not a part of an entry: {', '.join(sorted(unknown))}")
    return parts


def changed_parts(old: ServiceResult, new: ServiceResult) -> set[str]:
    """The `ENTRY_PARTS` in which any entry of `new` differs from the same entry of `old`
    (`is`, then `==`); the results have the same number of entries."""
    changed: set[str] = set()
    for before, after in zip(old.verdicts, new.verdicts, strict=True):
        if before is not after:
            changed.update(
                [
                    name
                    for name, a, b in zip(
                        _VERDICT_FIELD_NAMES,
                        _verdict_fields(before),
                        _verdict_fields(after),
                        strict=True,
                    )
                    if a is not b and a != b
                ]
            )
    if old.state_changes != new.state_changes:
        changed.add("state_changes")
    if old.forecasts is not new.forecasts and (
        old.forecasts or (NO_FORECAST,) * len(old.verdicts)
    ) != (new.forecasts or (NO_FORECAST,) * len(new.verdicts)):
        changed.add("forecast")
    return changed


_VERDICT_FIELD_NAMES = tuple(sorted(VERDICT_PARTS))
# Every field of a verdict in one call (a resize compares two verdicts per Service).
_verdict_fields = operator.attrgetter(*_VERDICT_FIELD_NAMES)


class RunningSum(Protocol[_Contribution]):
    """A family summed over the exported Services, kept running by the cached renderer.

    Built for one view of the state (what the family's `reads` returns); each exported
    Service adds its contribution, and a Service whose contribution changes is subtracted
    and added again, so a change costs that Service, not every Service. (Not the status
    page's `Tally`, a filter of its table with counts per value.)
    """

    def contribution(self, result: ServiceResult) -> _Contribution:
        """What the Service adds; equal contributions add the same."""
        ...

    def add(self, contribution: _Contribution, sign: int) -> None:
        """Add (sign 1) or take away (sign -1) a contribution added before."""
        ...

    def samples(self) -> Iterable[Sample]:
        """The family's samples over the contributions added so far (every label)."""
        ...


@dataclass(frozen=True, slots=True)
class PerScrape:
    """Samples computed from the whole scrape (every label included)."""

    function: Callable[[Scrape], Iterable[Sample]]
    # The parts of the state the samples read besides the exported Services: while each is
    # the same object, the samples are the same. None: anything (rendered for every state).
    reads: Callable[[ClusterResult], tuple[object, ...]] | None = None
    # For families summed over the exported Services: the running sum for a state's view.
    running_sum: Callable[[ClusterResult], RunningSum[Any]] | None = None


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family defined once: name, type, help, labels and where its samples come from;
    the renderer, the docs and the allow list all read it."""

    name: str
    type: MetricType
    scope: Scope
    help: str
    # Labels in exposition order, the scope's identity labels first.
    labels: tuple[str, ...]
    # None for the exporter's own families (prometheus_client instruments).
    samples: PerService | PerScrape | None
    # Computed from Nodes alone, so every shard of a sharded install would export the same
    # series: only shard 0 exports it.
    same_on_every_shard: bool = False


def each_entry(
    function: Callable[[ServiceEntry], Iterable[Sample]],
    *,
    reads_nodes: bool = False,
    inputs: Callable[[ServiceEntry], object] | None = None,
    parts: Iterable[str] | None = None,
) -> PerService:
    """A per-(Service, address type) function, its samples prefixed with the entry's key;
    `parts` and `inputs` as `PerService` has them."""

    def samples(service: ServiceSubject) -> Iterator[Sample]:
        for key, entry in service.entries:
            for labels, value in function(entry):
                yield (*key, *labels), value

    return PerService(
        samples, entry=function, reads_nodes=reads_nodes, inputs=inputs, parts=_parts(parts)
    )


def each_service(
    function: Callable[[ServiceResult], Iterable[Sample]],
    *,
    inputs: Callable[[ServiceResult], object] | None = None,
    parts: Iterable[str] | None = None,
) -> PerService:
    """A per-Service function, its samples prefixed with the Service's namespace and name;
    `parts` and `inputs` as `PerService` has them."""

    def samples(service: ServiceSubject) -> Iterator[Sample]:
        key = service.result.service.key
        for labels, value in function(service.result):
            yield (*key, *labels), value

    return PerService(samples, service=function, inputs=inputs, parts=_parts(parts))


def from_scrape(
    function: Callable[[Scrape], Iterable[Sample]],
    *,
    reads: Callable[[ClusterResult], tuple[object, ...]] | None = None,
) -> PerScrape:
    return PerScrape(function, reads=reads)


def summed(
    running_sum: Callable[[ClusterResult], RunningSum[Any]],
    *,
    reads: Callable[[ClusterResult], tuple[object, ...]],
) -> PerScrape:
    """A family summed over the exported Services: the collector sums them on each scrape,
    the cached renderer keeps the sum running (one implementation for both)."""

    def samples(scrape: Scrape) -> Iterable[Sample]:
        running = running_sum(scrape.state)
        for result in scrape.exported:
            running.add(running.contribution(result), 1)
        return running.samples()

    return PerScrape(samples, reads=reads, running_sum=running_sum)


class Declarations:
    """The families one module declares, in declaration order (its exposition order)."""

    def __init__(self) -> None:
        self._families: list[Family] = []

    def __call__(
        self,
        name: str,
        metric_type: MetricType,
        scope: Scope,
        help_text: str,
        samples: PerService | PerScrape | None = None,
        *,
        labels: tuple[str, ...] = (),
        same_on_every_shard: bool = False,
    ) -> Family:
        """Declare a family named PREFIX + `name`; its labels start with the scope's."""
        family = Family(
            PREFIX + name,
            metric_type,
            scope,
            help_text,
            (*scope.identity_labels, *labels),
            samples,
            same_on_every_shard,
        )
        self._families.append(family)
        return family

    @property
    def families(self) -> tuple[Family, ...]:
        return tuple(self._families)


GAUGE, COUNTER, HISTOGRAM = MetricType.GAUGE, MetricType.COUNTER, MetricType.HISTOGRAM


def one_sample(value: float) -> list[Sample]:
    """The one sample of a family without labels of its own."""
    return [((), float(value))]


def constant_name(family: Family) -> str:
    """The module constant that holds a family: its name without the prefix, upper-cased."""
    return family.name.removeprefix(PREFIX).upper()
