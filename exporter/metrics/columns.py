"""The renderer's columns: how one hint family's lines are rendered and kept.

- `ServiceColumn`: a family of one Service (per Service or per address type), rendered
  for one Service from its result; the renderer keeps the bytes per Service in its blocks.
  `Prepared` escapes a Service's identity labels once for all its families.
- `ScrapeColumn`: a family computed over the whole state, either a running sum that
  each changed Service adjusts, or lines kept while the parts of the state it reads are
  the same objects.

The renderer (`exposition.py`) holds one column per hint family it exports, in the
table's order; `Fragment` is what it remembers of each Service.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.metrics.family import (
    Family,
    PerScrape,
    PerService,
    RunningSum,
    Sample,
    Scope,
    Scrape,
    ServiceEntry,
    ServiceSubject,
    service_entries,
)
from exporter.metrics.lines import (
    ESCAPED_LABELS,
    VALUE_TEXT,
    SplitLine,
    escaped,
    escaped_labels,
    escaped_once,
    format_lines,
    identity_text,
    line_format,
    value_text,
)
from exporter.state.result import ClusterResult, ServiceResult
from exporter.vocabulary import ServiceKey


def service_lines(
    line: Callable[..., str],
    function: Callable[[Any], Iterable[Sample]],
    subjects: Sequence[tuple[tuple[str, ...], Any]],
) -> bytes:
    """One family's lines for one Service: its function over the Service's entries (or the
    Service), each line one `str.format` over pre-escaped labels and a cached value text.

    The hot loop of a first render: 200,000 lines at 10,000 Services.
    """
    cached_value = VALUE_TEXT.get
    cached_labels = ESCAPED_LABELS.get
    parts: list[str] = []
    append = parts.append
    for identity, subject in subjects:
        for labels, value in function(subject):
            text = cached_value(value)
            if text is None or not value:
                text = value_text(value)
            if labels:
                own = cached_labels(labels) or escaped_labels(labels)
                append(line(*identity, *own, text))
            else:
                append(line(*identity, text))
    return "".join(parts).encode() if parts else b""


def split_service_lines(
    split: SplitLine,
    function: Callable[[Any], Iterable[Sample]],
    subjects: Sequence[tuple[str, Any]],
) -> bytes:
    """`service_lines` for a family whose own labels sort after the identity: three cached pieces
    per line, no formatting for a sample seen before."""
    cached = split.cached
    tail = split.tail
    opening = split.open
    parts: list[str] = []
    append = parts.append
    for identity, subject in subjects:
        for sample in function(subject):
            text = cached(sample)
            if text is None or not sample[1]:
                text = tail(sample)
            append(opening)
            append(identity)
            append(text)
    return "".join(parts).encode() if parts else b""


class ServiceColumn:
    """One per-Service family: renders its lines for one Service."""

    def __init__(self, family: Family, samples: PerService) -> None:
        self.family = family
        self.reads_nodes = samples.reads_nodes
        self.inputs = samples.inputs
        self.parts = samples.parts
        self.line = line_format(family)
        # The function without identity labels and whether it runs per entry; None for a
        # family that only declares the full function (rendered through it, slower).
        self.function: Callable[[Any], Iterable[Sample]] | None = samples.entry or samples.service
        self.per_entry = samples.entry is not None
        identity = len((Scope.SERVICE_ENTRY if self.per_entry else Scope.SERVICE).identity_labels)
        self.split = (
            SplitLine(family, identity)
            if self.function is not None and SplitLine.applies(family, identity)
            else None
        )
        self._samples = samples

    def render(self, subject: ServiceSubject, prepared: Prepared) -> bytes:
        if self.function is None:
            return format_lines(self.line, self._samples.function(subject))
        if self.split is not None:
            texts = prepared.entry_texts if self.per_entry else prepared.service_texts
            return split_service_lines(self.split, self.function, texts)
        subjects = prepared.entries if self.per_entry else prepared.service
        return service_lines(self.line, self.function, subjects)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A Service's identity labels, escaped once for all its lines."""

    # ((namespace, service, address type), entry) per address type, as escaped label values
    # (not an EntryKey: the values are escaped for the exposition).
    entries: list[tuple[tuple[str, str, str], ServiceEntry]]
    # ((namespace, service), result): the one subject of per-Service families.
    service: list[tuple[tuple[str, str], ServiceResult]]
    # The same with the identity as `label="value",...` text (for split lines).
    entry_texts: list[tuple[str, ServiceEntry]]
    service_texts: list[tuple[str, ServiceResult]]

    @classmethod
    def of(cls, subject: ServiceSubject) -> Prepared:
        result = subject.result
        service = result.service
        namespace, name = escaped_once(service.namespace), escaped_once(service.name)
        # Not `subject.entries`: a cached_property takes a lock on every first read.
        entries = [
            ((namespace, name, escaped(key[2])), entry)
            for key, entry in service_entries(result, subject.nodes)
        ]
        return cls(
            entries,
            [((namespace, name), result)],
            [(identity_text(_ENTRY_LABELS, values), entry) for values, entry in entries],
            [(identity_text(_SERVICE_LABELS, (namespace, name)), result)],
        )


_ENTRY_LABELS = Scope.SERVICE_ENTRY.identity_labels
_SERVICE_LABELS = Scope.SERVICE.identity_labels


class ScrapeColumn:
    """One family computed over the state: a running sum, or lines cached by what it reads."""

    def __init__(self, family: Family, samples: PerScrape) -> None:
        self.family = family
        self._line = line_format(family)
        self._samples = samples
        self._read: tuple[object, ...] | None = None
        self.running_sum: RunningSum[Any] | None = None
        self.contributions: dict[ServiceKey, object] = {}
        self.chunk = b""
        self.dirty = True

    def _reads_changed(self, state: ClusterResult) -> bool:
        reads = self._samples.reads
        if reads is None:
            return True
        read = reads(state)
        previous = self._read
        self._read = read
        return previous is None or any(
            new is not old and new != old for new, old in zip(read, previous, strict=True)
        )

    def update(
        self,
        state: ClusterResult,
        fragments: Mapping[ServiceKey, Fragment],
        applied: Iterable[ServiceKey],
        exported: Callable[[], tuple[ServiceResult, ...]],
    ) -> tuple[bool, bool]:
        """Bring the lines up to `state`, given the Services whose fragment was replaced.

        Returns whether the lines were rendered again and whether the running sum was rebuilt
        over every exported Service."""
        factory = self._samples.running_sum
        if factory is None:
            if self._reads_changed(state):
                self.chunk = format_lines(
                    self._line, self._samples.function(Scrape(state, exported()))
                )
                return True, False
            return False, False
        if self._reads_changed(state) or self.running_sum is None:
            self._rebuild(factory(state), fragments)
            rebuilt = True
        else:
            self._adjust(self.running_sum, fragments, applied)
            rebuilt = False
        if self.dirty and self.running_sum is not None:
            self.chunk = format_lines(self._line, self.running_sum.samples())
            self.dirty = False
            return True, rebuilt
        return False, rebuilt

    def _rebuild(
        self, running_sum: RunningSum[Any], fragments: Mapping[ServiceKey, Fragment]
    ) -> None:
        self.running_sum = running_sum
        self.contributions = {}
        for key, fragment in fragments.items():
            if fragment.exported:
                contribution = running_sum.contribution(fragment.result)
                self.contributions[key] = contribution
                running_sum.add(contribution, 1)
        self.dirty = True

    def _adjust(
        self,
        running_sum: RunningSum[Any],
        fragments: Mapping[ServiceKey, Fragment],
        applied: Iterable[ServiceKey],
    ) -> None:
        """Take away each replaced Service's old contribution and add its new one."""
        for key in applied:
            old = self.contributions.pop(key, _ABSENT)
            fragment = fragments.get(key)
            new = (
                running_sum.contribution(fragment.result)
                if fragment is not None and fragment.exported
                else _ABSENT
            )
            if new is not _ABSENT:
                self.contributions[key] = new
            if old == new:
                continue
            if old is not _ABSENT:
                running_sum.add(old, -1)
            if new is not _ABSENT:
                running_sum.add(new, 1)
            self.dirty = True


_ABSENT = object()


@dataclass(frozen=True, slots=True)
class Fragment:
    """A Service as the renderer last rendered it."""

    # The result these lines were rendered from: still valid while it is the same object.
    result: ServiceResult
    # Whether the Service is exported: its lines per family are then a row of the blocks
    # (held there once, in the joined bytes).
    exported: bool
