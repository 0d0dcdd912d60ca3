"""The /metrics body, kept rendered and updated by what changed since the last scrape.

A large cluster exports about 200,000 hint samples (22 MB); formatting each on every
scrape, as `generate_latest` does, costs seconds, and even re-joining cached lines costs
tens of milliseconds. So nothing is redone that did not change:

- A Service's lines (its fragment: one chunk per family) are rendered when its result is
  replaced; the evaluator names those Services in `ClusterResult.changed`, and a scrape
  that missed generations gets them from `observe` (registered as an evaluator listener),
  else compares results by identity. Of a replaced result, only the families whose
  declared `inputs` differ from the old result's are rendered again: a node change that
  moves CPU shares replaces every result but changes only the zone allocation families
  (`columns.py` renders one family's lines).
- Fragments sit in key order in sorted blocks of a few hundred Services (`blocks.py`); a
  block keeps each family's lines joined, and a change re-joins the families of its own
  block whose bytes changed. A family's body is one chunk per block.
- Families summed over Services (per node, per zone) keep running sums that a changed
  Service adjusts; those that read other parts of the state are rendered again only when
  those objects change.
- A scrape writes the chunks as they are (the server never joins them; `endpoint.py`
  serves them). Gzip is one gzip member made of one raw deflate segment per chunk
  (`gzipstream.py`), cached while the chunk is the same object; only the CRC-32 runs
  over the whole body, once per published state.

Families, their order and their samples come from the table in `families/` that the
prometheus_client collector also iterates; tests hold the two renderings byte for byte
equal in every format, through inserts, deletions and node changes.
"""

from __future__ import annotations

import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum, auto

from exporter.engine import ReadyNodes
from exporter.engine.whatif.forecast import NO_FORECAST
from exporter.metrics.blocks import Row, SortedBlocks, Update
from exporter.metrics.collector import ExportOptions, FamilyFilter, is_exported
from exporter.metrics.columns import (
    Fragment,
    Prepared,
    ScrapeColumn,
    ServiceColumn,
    service_lines,
    split_service_lines,
)
from exporter.metrics.families import HINT_FAMILIES
from exporter.metrics.family import (
    Family,
    MetricType,
    PerScrape,
    PerService,
    ServiceEntry,
    ServiceSubject,
    changed_parts,
)
from exporter.metrics.gzipstream import (
    DEFLATE_END,
    GZIP_HEADER,
    SegmentCache,
    checksum,
    deflate,
    gzip_stream,
    trailer,
)
from exporter.state.result import ClusterResult, ServiceResult
from exporter.vocabulary import ServiceKey

# Services per block: a change re-joins (and re-compresses) about this many fragments.
BLOCK_LOAD = 256
# Generations whose changed Services are remembered between scrapes; past that, a scrape
# compares results by identity instead.
_MAX_REMEMBERED = 10_000


class Format(Enum):
    """The exposition format a scrape negotiated: Prometheus text or OpenMetrics."""

    TEXT = auto()
    OPENMETRICS = auto()


def _escape_help(text: str, fmt: Format) -> str:
    escaped_text = text.replace("\\", "\\\\").replace("\n", "\\n")
    # OpenMetrics escapes quotes in HELP as in label values; the text format does not.
    return escaped_text.replace('"', '\\"') if fmt is Format.OPENMETRICS else escaped_text


def family_header(family: Family, fmt: Format) -> bytes:
    name = family.name
    if fmt is Format.OPENMETRICS and family.type is MetricType.COUNTER:
        name = name.removesuffix("_total")
    help_text = _escape_help(family.help, fmt)
    return f"# HELP {name} {help_text}\n# TYPE {name} {family.type}\n".encode()


@dataclass
class RenderCounts:
    """What the renderer did since it was made: tests bound the work a change costs."""

    # Services whose fragment was rendered (wholly, or only its node-reading families).
    services: int = 0
    # (block, family) pairs joined again.
    joins: int = 0
    # Renders of a family computed over the whole state.
    scrape_families: int = 0
    # Running sums rebuilt over every exported Service (a new node view).
    sum_rebuilds: int = 0
    # Chunks compressed into a deflate segment.
    deflated: int = 0
    # Per family name: its lines replaced (other bytes) for a Service whose result was.
    rerendered: Counter[str] = field(default_factory=Counter)
    # Family chunks kept from a replaced result: what the family reads was equal, or its
    # lines rendered again were the same bytes.
    reused: int = 0


@dataclass(frozen=True, slots=True)
class _Body:
    """The rendered hint families of one published state: never changed once made."""

    state: ClusterResult
    # Per family exported (HINT_FAMILIES order, filtered): its non-empty sample chunks.
    families: tuple[tuple[bytes, ...], ...]


class ExpositionRenderer:
    """Renders the hint families of the table in its order; thread-safe (scrapes overlap).

    A scrape sees the body of one published state, whole: the update to a new state runs
    under a lock and publishes a new immutable body at its end.
    """

    def __init__(
        self,
        state: Callable[[], ClusterResult],
        *,
        ready: Callable[[], bool],
        options: ExportOptions | None = None,
        family_filter: FamilyFilter | None = None,
        block_load: int = BLOCK_LOAD,
    ) -> None:
        self._state = state
        self._ready = ready
        self._options = options or ExportOptions()
        family_filter = family_filter or FamilyFilter()
        families = [family for family in HINT_FAMILIES if family_filter.allows(family.name)]
        self._service_columns: list[ServiceColumn] = []
        self._scrape_columns: list[ScrapeColumn] = []
        # Per family exported: (True, index of its service column) or (False, scrape column).
        self._layout: list[tuple[bool, int]] = []
        for family in families:
            if isinstance(family.samples, PerService):
                self._layout.append((True, len(self._service_columns)))
                self._service_columns.append(ServiceColumn(family, family.samples))
            elif isinstance(family.samples, PerScrape):
                self._layout.append((False, len(self._scrape_columns)))
                self._scrape_columns.append(ScrapeColumn(family, family.samples))
        self._plans = [
            (column.line, column.function, column.per_entry, column.split, column)
            for column in self._service_columns
        ]
        self._node_columns = [
            index for index, column in enumerate(self._service_columns) if column.reads_nodes
        ]
        # (index, inputs, per entry, reads nodes, parts) of the service columns.
        self._input_checks = [
            (index, column.inputs, column.per_entry, column.reads_nodes, column.parts)
            for index, column in enumerate(self._service_columns)
        ]
        self._headers = {
            fmt: tuple(family_header(family, fmt) for family in families) for fmt in Format
        }
        self._deflated_headers = {
            fmt: tuple(deflate(header) for header in headers)
            for fmt, headers in self._headers.items()
        }
        self._blocks = SortedBlocks(len(self._service_columns), block_load)
        self._fragments: dict[ServiceKey, Fragment] = {}
        # The Ready nodes the node-reading families were rendered with.
        self._nodes: ReadyNodes | None = None
        self._body: _Body | None = None
        self._lock = threading.Lock()
        # generation -> the Services it changed (None: unknown), until a scrape renders it.
        self._changes: dict[int, frozenset[ServiceKey] | None] = {}
        self._changes_lock = threading.Lock()
        self._gzip_lock = threading.Lock()
        self._segment_cache = SegmentCache()
        self._segments: tuple[_Body, tuple[tuple[bytes, ...], ...]] | None = None
        # Per format: the body whose CRC-32 and size (headers included) were computed.
        self._checksums: dict[Format, tuple[_Body, int, int]] = {}
        self.counts = RenderCounts()

    # -- the interface ------------------------------------------------------------------------

    def observe(self, state: ClusterResult) -> None:
        """An evaluator listener: remembers which Services each generation changed."""
        with self._changes_lock:
            if len(self._changes) >= _MAX_REMEMBERED:
                self._changes.clear()
            self._changes[state.generation] = state.changed

    def render(self, fmt: Format) -> list[bytes]:
        """The hint families' exposition, as chunks to write in order."""
        body = self._current()
        if body is None:
            return []
        chunks: list[bytes] = []
        for header, family in zip(self._headers[fmt], body.families, strict=True):
            chunks.append(header)
            chunks.extend(family)
        return chunks

    def render_gzip(self, fmt: Format, tail: bytes | Callable[[], bytes] = b"") -> list[bytes]:
        """The hint families then `tail`, gzipped: one gzip member, as chunks to write.

        A callable `tail` is called after the families are brought up to date (see
        MetricsEndpoint.chunks)."""
        body = self._current()
        if callable(tail):
            tail = tail()
        if body is None:
            return gzip_stream([deflate(tail)], zlib.crc32(tail), len(tail))
        segments = self._deflated(body)
        chunks: list[bytes] = [GZIP_HEADER]
        for header, family in zip(self._deflated_headers[fmt], segments, strict=True):
            chunks.append(header)
            chunks.extend(family)
        crc, size = self._checksum(body, fmt)
        if tail:
            chunks.append(deflate(tail))
        chunks.append(DEFLATE_END)
        chunks.append(trailer(zlib.crc32(tail, crc), size + len(tail)))
        return chunks

    def prepared(self, fmt: Format, *, zipped: bool) -> bool:
        """Whether `render` (or `render_gzip`) would only hand out what is cached: the body
        of the current state, and for gzip its segments and checksum in this format. (The
        evaluator may publish a state just after: then that call renders it.)"""
        if not self._ready():
            return True
        body = self._body
        if body is None or body.state is not self._state():
            return False
        if not zipped:
            return True
        segments, checksum = self._segments, self._checksums.get(fmt)
        return (
            segments is not None
            and segments[0] is body
            and checksum is not None
            and checksum[0] is body
        )

    # -- bringing the body up to date ---------------------------------------------------------

    def _current(self) -> _Body | None:
        if not self._ready():
            return None
        body = self._body
        if body is not None and body.state is self._state():
            return body
        with self._lock:
            # The newest state, read under the lock: overlapping scrapes render it once.
            state = self._state()
            body = self._body
            if body is None or body.state is not state:
                body = self._update(body.state if body is not None else None, state)
                self._body = body
            return body

    def _changed_since(
        self, previous: ClusterResult | None, state: ClusterResult
    ) -> set[ServiceKey] | None:
        """The Services changed from `previous` to `state`; None when not known."""
        if previous is None:
            return None
        first, last = previous.generation + 1, state.generation
        if last < first or last - first >= _MAX_REMEMBERED:
            return None
        keys: set[ServiceKey] = set()
        with self._changes_lock:
            remembered = self._changes
            for generation in range(first, last + 1):
                if generation in remembered:
                    changed = remembered[generation]
                elif generation == last:
                    changed = state.changed
                else:
                    return None
                if changed is None:
                    return None
                keys.update(changed)
            for generation in [generation for generation in remembered if generation <= last]:
                del remembered[generation]
        return keys

    def _identity_diff(self, state: ClusterResult) -> set[ServiceKey]:
        services = state.services
        fragments = self._fragments
        changed = {
            key
            for key, result in services.items()
            if (fragment := fragments.get(key)) is None or fragment.result is not result
        }
        changed.update(key for key in fragments if key not in services)
        return changed

    def _row(self, result: ServiceResult, nodes: ReadyNodes) -> Row | None:
        if not is_exported(result.verdicts, self._options):
            return None
        self.counts.services += 1
        subject = ServiceSubject(result, nodes)
        prepared = Prepared.of(subject)
        entries, service = prepared.entries, prepared.service
        entry_texts, service_texts = prepared.entry_texts, prepared.service_texts
        # column.render inlined: this runs 20 times per Service on a first render.
        return tuple(
            [
                split_service_lines(split, function, entry_texts if per_entry else service_texts)
                if split is not None and function is not None
                else service_lines(line, function, entries if per_entry else service)
                if function is not None
                else column.render(subject, prepared)
                for line, function, per_entry, split, column in self._plans
            ]
        )

    def _kept(
        self, old: ServiceResult, new: ServiceResult, nodes: ReadyNodes, *, nodes_moved: bool
    ) -> list[bool] | None:
        """Per service column, whether the old result's chunk holds for the new one; None
        when no chunk does (other address types: the identity labels differ)."""
        old_verdicts, new_verdicts = old.verdicts, new.verdicts
        if len(old_verdicts) != len(new_verdicts) or any(
            a.address_type != b.address_type
            for a, b in zip(old_verdicts, new_verdicts, strict=True)
        ):
            return None
        changed = changed_parts(old, new)
        pairs: list[tuple[ServiceEntry, ServiceEntry]] | None = None
        kept = [False] * len(self._service_columns)
        # Plain loops: this runs for every Service of a CPU-share change.
        for index, inputs, per_entry, reads_nodes, parts in self._input_checks:
            if nodes_moved and reads_nodes:
                continue
            if parts is not None and parts.isdisjoint(changed):
                # Nothing the samples read moved (a resize moves the zones and the
                # cross-zone figures): no samples to build and compare.
                kept[index] = True
            elif inputs is None:
                # Rendered again; the blocks keep the old chunk if the bytes are equal.
                continue
            elif per_entry:
                if pairs is None:
                    pairs = _entry_pairs(old, new, nodes)
                for old_entry, new_entry in pairs:
                    a = inputs(old_entry)
                    b = inputs(new_entry)
                    if a is not b and a != b:
                        break
                else:
                    kept[index] = True
            else:
                a = inputs(old)
                b = inputs(new)
                kept[index] = a is b or a == b
        return kept if any(kept) else None

    def _rerow(self, result: ServiceResult, nodes: ReadyNodes, kept: list[bool]) -> Update:
        """A replaced result's row: the families not kept rendered, None for the others
        (their chunks stay as they are)."""
        self.counts.services += 1
        subject = ServiceSubject(result, nodes)
        prepared = Prepared.of(subject)
        row: list[bytes | None] = [None] * len(kept)
        for index, column in enumerate(self._service_columns):
            if not kept[index]:
                row[index] = column.render(subject, prepared)
        return tuple(row)

    def _node_row(self, fragment: Fragment, nodes: ReadyNodes) -> Update:
        """The node-reading families rendered again, None for the others (kept)."""
        self.counts.services += 1
        subject = ServiceSubject(fragment.result, nodes)
        prepared = Prepared.of(subject)
        row: list[bytes | None] = [None] * len(self._service_columns)
        for index in self._node_columns:
            row[index] = self._service_columns[index].render(subject, prepared)
        return tuple(row)

    def _update(self, previous: ClusterResult | None, state: ClusterResult) -> _Body:
        nodes = state.nodes
        nodes_moved = self._nodes is not nodes and self._nodes != nodes
        self._nodes = nodes
        fragments = self._fragments
        if not fragments:
            applied: Iterable[ServiceKey] = self._load(state)
        else:
            changed = self._changed_since(previous, state)
            if changed is None:
                changed = self._identity_diff(state)
            applied = self._apply(state, changed, nodes_moved=nodes_moved)
            if nodes_moved and self._node_columns:
                for key in list(fragments):
                    fragment = fragments[key]
                    if fragment.exported and key not in applied:
                        self._blocks.set(key, self._node_row(fragment, nodes))
        exported_results: tuple[ServiceResult, ...] | None = None

        def exported() -> tuple[ServiceResult, ...]:
            nonlocal exported_results
            if exported_results is None:
                exported_results = tuple(fragments[key].result for key in self._blocks)
            return exported_results

        for column in self._scrape_columns:
            rendered, rebuilt = column.update(state, fragments, applied, exported)
            self.counts.scrape_families += rendered
            self.counts.sum_rebuilds += rebuilt
        return self._body_of(state)

    def _load(self, state: ClusterResult) -> list[ServiceKey]:
        """Render every Service (the first render, or after the renderer was emptied)."""
        nodes = state.nodes
        fragments = self._fragments

        def rows() -> Iterator[tuple[ServiceKey, Row]]:
            for key, result in sorted(state.services.items()):
                row = self._row(result, nodes)
                fragments[key] = Fragment(result, exported=row is not None)
                if row is not None:
                    yield key, row

        # Block by block: only one block's rows are held whole at a time.
        self.counts.joins += self._blocks.load(rows())
        return list(fragments)

    def _apply(
        self, state: ClusterResult, changed: Iterable[ServiceKey], *, nodes_moved: bool
    ) -> set[ServiceKey]:
        """Replace the fragments of the changed Services; returns those actually replaced.

        Every old row was rendered with the Ready nodes before this update (`nodes_moved`
        says whether they changed), so a node-reading family's chunk holds only if not.
        """
        services = state.services
        fragments = self._fragments
        nodes = state.nodes
        applied: set[ServiceKey] = set()
        for key in changed:
            result = services.get(key)
            old = fragments.get(key)
            if old is None if result is None else old is not None and old.result is result:
                continue
            applied.add(key)
            if result is None:
                del fragments[key]
                self._blocks.remove(key)
                continue
            kept = (
                self._kept(old.result, result, nodes, nodes_moved=nodes_moved)
                if old is not None and old.exported and is_exported(result.verdicts, self._options)
                else None
            )
            if kept is not None:
                row: Update | None = self._rerow(result, nodes, kept)
            else:
                row = self._row(result, nodes)
            fragments[key] = Fragment(result, exported=row is not None)
            if row is not None:
                replaced = self._blocks.set(key, row)
                if kept is not None:
                    for index in replaced:
                        self.counts.rerendered[self._service_columns[index].family.name] += 1
                    self.counts.reused += len(row) - len(replaced)
            elif old is not None and old.exported:
                self._blocks.remove(key)
        return applied

    def _body_of(self, state: ClusterResult) -> _Body:
        blocks = self._blocks.blocks
        for block in blocks:
            if block.stale:
                self.counts.joins += block.rejoin()
        families: list[tuple[bytes, ...]] = []
        for per_service, index in self._layout:
            if per_service:
                families.append(tuple(chunk for block in blocks if (chunk := block.joined[index])))
            else:
                chunk = self._scrape_columns[index].chunk
                families.append((chunk,) if chunk else ())
        return _Body(state, tuple(families))

    def _deflated(self, body: _Body) -> tuple[tuple[bytes, ...], ...]:
        """One deflate segment per chunk, reused while the chunk is the same object."""
        with self._gzip_lock:
            if self._segments is not None and self._segments[0] is body:
                return self._segments[1]
            segments, compressed = self._segment_cache.segments(body.families)
            self.counts.deflated += compressed
            self._segments = (body, segments)
            return segments

    def _checksum(self, body: _Body, fmt: Format) -> tuple[int, int]:
        """The CRC-32 and size of the body's bytes in a format, headers included: computed
        once per state."""
        with self._gzip_lock:
            known = self._checksums.get(fmt)
            if known is not None and known[0] is body:
                return known[1], known[2]
            crc, size = 0, 0
            for header, chunks in zip(self._headers[fmt], body.families, strict=True):
                crc, size = checksum((header, *chunks), crc, size)
            self._checksums[fmt] = (body, crc, size)
            return crc, size


def _entry_pairs(
    old: ServiceResult, new: ServiceResult, nodes: ReadyNodes
) -> list[tuple[ServiceEntry, ServiceEntry]]:
    """Each address type's (old entry, new entry), as the per-entry families read them."""
    forecasts = old.forecasts or (NO_FORECAST,) * len(old.verdicts)
    old_entries = [
        ServiceEntry(verdict, flips, nodes, forecast)
        for verdict, flips, forecast in zip(old.verdicts, old.state_changes, forecasts, strict=True)
    ]
    forecasts = new.forecasts or (NO_FORECAST,) * len(new.verdicts)
    return [
        (old_entry, ServiceEntry(verdict, flips, nodes, forecast))
        for old_entry, verdict, flips, forecast in zip(
            old_entries, new.verdicts, new.state_changes, forecasts, strict=True
        )
    ]
