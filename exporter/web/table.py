"""The status page's Service table and overview counts, declared once.

A column of the table is one `Column` in `COLUMNS`; a count of the overview (and the
filter that goes with it) is one `Tally` in `TALLIES`. Rows are built once per published
state; a request only filters, slices and renders one page of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import chain
from operator import attrgetter
from types import MappingProxyType
from urllib.parse import parse_qs, urlencode

from exporter.engine import EntryVerdict, ExpectedState, Mechanism
from exporter.engine.problems import PROBLEMS, ProblemId, Severity, severity_of
from exporter.engine.whatif.forecast import NO_FORECAST, EntryForecast
from exporter.report.advice import zone_loss_skipped_text
from exporter.report.phrases import whole_percent
from exporter.report.traffic import AVOIDABLE_WORTH_SAYING
from exporter.state.result import ClusterResult, ServiceResult
from exporter.vocabulary import ServiceKey
from exporter.web.facts import ClusterFacts, cluster_facts, margin_words, share
from exporter.web.links import Links

DEFAULT_PER_PAGE = 100
PER_PAGE_CHOICES = (50, 100, 500)
MAX_PER_PAGE = 1000
# Larger page numbers show the last page, as every number past the end does.
MAX_PAGE = 10**9


class Standing(IntEnum):
    """How a row sorts: by the worst severity of its problems (the alert's), then the rest."""

    CRITICAL = 0
    WARNING = 1
    INFO = 2
    FINE = 3
    UNUSED = 4  # no hint mechanism and nothing wrong


_STANDING_OF = {
    Severity.CRITICAL: Standing.CRITICAL,
    Severity.WARNING: Standing.WARNING,
    Severity.INFO: Standing.INFO,
}


@dataclass(frozen=True, slots=True)
class ServiceRow:
    """One entry of the status page's table, with what its filters and order read."""

    verdict: EntryVerdict
    # The problem table's ids (exporter.engine.problems), in its order.
    problems: tuple[ProblemId, ...]
    standing: Standing
    # Problems first, then namespace, name and address type.
    order: tuple[int, str, str, str]
    # The endpoint margin and zone loss of the live exporter (what-if, behaviour §11).
    forecast: EntryForecast = NO_FORECAST

    @property
    def search_text(self) -> str:
        """Lower-case words the text filter searches; built only when a text filter is set."""
        verdict = self.verdict
        words = (
            f"{self.namespace}/{self.name}",
            verdict.address_type,
            verdict.mechanism,
            verdict.expected_state,
            verdict.reason or "",
            *self.problems,
            *(PROBLEMS[problem].words for problem in self.problems),
        )
        return " ".join(words).lower()

    @property
    def namespace(self) -> str:
        return self.verdict.service.namespace

    @property
    def name(self) -> str:
        return self.verdict.service.name


def service_row(
    verdict: EntryVerdict,
    problems: tuple[ProblemId, ...],
    forecast: EntryForecast = NO_FORECAST,
) -> ServiceRow:
    """`problems`: the entry's, as the result holds them (ServiceResult.problems)."""
    severity = severity_of(problems)
    if severity is not None:
        standing = _STANDING_OF[severity]
    elif verdict.mechanism is Mechanism.NONE:
        standing = Standing.UNUSED
    else:
        standing = Standing.FINE
    service = verdict.service
    order = (int(standing), service.namespace, service.name, verdict.address_type)
    return ServiceRow(verdict, problems, standing, order, forecast)


# Columns


class CellTone:
    """The colour class of a table cell."""

    GOOD = "good"
    BAD = "bad"
    WARN = "warn"
    NONE = ""


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of the table: its text, colour and a smaller second line."""

    text: str
    tone: str = CellTone.NONE
    # A second, smaller line under the text.
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the table: its title and how a row's cell is made."""

    title: str
    cell: Callable[[ServiceRow], Cell]
    # The column that names the row: a row header linked to the Service's page.
    names_row: bool = False
    numeric: bool = False


_STATE_TONES = {
    ExpectedState.ENABLED: CellTone.GOOD,
    ExpectedState.DISABLED: CellTone.BAD,
    ExpectedState.NOT_APPLICABLE: CellTone.NONE,
}


def _verdict_cell(row: ServiceRow) -> Cell:
    verdict = row.verdict
    return Cell(
        str(verdict.expected_state),
        _STATE_TONES[verdict.expected_state],
        str(verdict.reason) if verdict.reason is not None else "",
    )


def _completeness_cell(row: ServiceRow) -> Cell:
    completeness = row.verdict.hint_completeness
    if completeness is None:
        return Cell("-")
    tone = CellTone.WARN if ProblemId.PARTIAL_HINTS in row.problems else CellTone.NONE
    return Cell(share(completeness), tone, f"{row.verdict.ready_endpoints:,} ready")


def _routing_cell(row: ServiceRow) -> Cell:
    """Per data plane, the share of Ready nodes whose traffic stays local."""
    views = [(plane, view) for plane, view in row.verdict.routing.items() if view.applies]
    if not views:
        return Cell("-")
    texts, ratios = [], []
    for plane, view in views:
        ratio = view.local_ratio or 0.0
        ratios.append(ratio)
        texts.append(f"{share(ratio)} local" + (f" ({plane})" if len(views) > 1 else ""))
    tone = (
        CellTone.GOOD if min(ratios) == 1 else CellTone.BAD if min(ratios) == 0 else CellTone.WARN
    )
    if row.verdict.mechanism is Mechanism.NONE and min(ratios) == 0:
        tone = CellTone.NONE  # nothing was asked for: cluster-wide is what it should be
    return Cell(", ".join(texts), tone)


def _cross_zone_cell(row: ServiceRow) -> Cell:
    """Per data plane, the share of traffic expected to cross zones; the floor beneath."""
    figures = [(plane, f) for plane, f in row.verdict.cross_zone.items() if f is not None]
    if not figures:
        return Cell("-")
    several = len(figures) > 1
    texts = [
        whole_percent(f.effective) + (f" ({plane})" if several else "") for plane, f in figures
    ]
    floors = ", ".join(whole_percent(f.floor) for _, f in figures)
    avoidable = max(f.avoidable for _, f in figures)
    tone = CellTone.WARN if avoidable >= AVOIDABLE_WORTH_SAYING else CellTone.NONE
    return Cell(", ".join(texts), tone, f"floor {floors}")


def _margin_cell(row: ServiceRow) -> Cell:
    """How many endpoints may go or come before the controller removes every hint."""
    margin = row.forecast.margin
    if margin is None:
        return Cell("-")
    # In explain's words, as the Service's page says it: "-0 / +1" read as signed numbers.
    tone = CellTone.WARN if margin.down == 0 or margin.up == 0 else CellTone.NONE
    return Cell(margin_words(margin), tone)


def _problems_cell(row: ServiceRow) -> Cell:
    if not row.problems:
        return Cell("none")
    tone = CellTone.BAD if row.standing is Standing.CRITICAL else CellTone.WARN
    return Cell(", ".join(PROBLEMS[problem].words for problem in row.problems), tone)


COLUMNS: tuple[Column, ...] = (
    Column("Namespace", lambda row: Cell(row.namespace)),
    Column("Name", lambda row: Cell(row.name), names_row=True),
    Column("Address type", lambda row: Cell(row.verdict.address_type)),
    Column("Mechanism", lambda row: Cell(str(row.verdict.mechanism))),
    Column("Verdict", _verdict_cell),
    Column("Problems", _problems_cell),
    Column("Hint completeness", _completeness_cell, numeric=True),
    Column("Routing", _routing_cell),
    Column("Cross-zone", _cross_zone_cell, numeric=True),
    Column("Margin", _margin_cell),
)


# Overview counts, each with the filter of the same name


@dataclass(frozen=True, slots=True)
class Tally:
    """One overview count over the rows, and the filter of the same name its choices set."""

    # The query parameter that filters the table on one of the tally's values.
    param: str
    title: str
    classify: Callable[[ServiceRow], tuple[str, ...]]
    # (value, label) in display order.
    choices: tuple[tuple[str, str], ...]
    # A choice that matches a row with any value at all (e.g. any problem).
    any_choice: tuple[str, str] | None = None

    def matches(self, row: ServiceRow, value: str) -> bool:
        values = self.classify(row)
        if self.any_choice is not None and value == self.any_choice[0]:
            return bool(values)
        return value in values

    def accepts(self, value: str) -> bool:
        return value in {choice for choice, _ in self.all_choices}

    @property
    def all_choices(self) -> tuple[tuple[str, str], ...]:
        return (self.any_choice, *self.choices) if self.any_choice else self.choices


TALLIES: tuple[Tally, ...] = (
    Tally(
        "state",
        "Verdict",
        lambda row: (str(row.verdict.expected_state),),
        tuple((str(state), str(state)) for state in ExpectedState),
    ),
    Tally(
        "mechanism",
        "Mechanism",
        lambda row: (str(row.verdict.mechanism),),
        tuple((str(mechanism), str(mechanism)) for mechanism in Mechanism),
    ),
    Tally(
        "problem",
        "Problems",
        lambda row: row.problems,
        # The live exporter always has Nodes: nodes-unknown is for one-shot inputs only.
        tuple(
            (str(problem.id), problem.words)
            for problem in PROBLEMS.values()
            if problem.id is not ProblemId.NODES_UNKNOWN
        ),
        any_choice=("any", "any problem"),
    ),
)


# One published state, seen by the pages


@dataclass(frozen=True, slots=True)
class StatusView:
    """Everything the pages show of one published state, computed once for it."""

    state: ClusterResult
    cluster: ClusterFacts
    rows: tuple[ServiceRow, ...]
    namespaces: tuple[str, ...]
    # Tally param -> value -> number of rows.
    counts: Mapping[str, Mapping[str, int]]
    # The rows of each Service result, for the next state to reuse.
    rows_of: Mapping[ServiceKey, tuple[ServiceResult, tuple[ServiceRow, ...]]]
    # Zone -> Services whose hints losing it would take away (what-if, behaviour §11).
    zone_loss: Mapping[str, int] = field(default_factory=dict)
    # Why there is no zone-loss forecast when the cluster has too many zones ("" otherwise).
    zone_loss_note: str = ""


def status_view(state: ClusterResult, previous: StatusView | None = None) -> StatusView:
    """The view of a state; rows of Services not re-evaluated since `previous` are reused.

    The evaluator replaces a Service's result only when it re-evaluates it, so after a
    change only the changed Services get new rows; the rest is sorting and counting.
    """
    reusable = previous.rows_of if previous is not None else {}
    rows_of = {}
    for key, result in state.services.items():
        known = reusable.get(key)
        if known is not None and known[0] is result:
            rows_of[key] = known
        else:
            rows_of[key] = (
                result,
                tuple(
                    service_row(verdict, problems, forecast)
                    for (verdict, forecast), problems in zip(
                        result.entries(), result.problems, strict=True
                    )
                ),
            )
    rows = sorted(
        (row for _, service_rows in rows_of.values() for row in service_rows),
        key=attrgetter("order"),
    )
    return StatusView(
        state=state,
        cluster=cluster_facts(state),
        rows=tuple(rows),
        namespaces=tuple(sorted({key[0] for key in state.services})),
        counts=_counts(rows),
        rows_of=MappingProxyType(rows_of),
        zone_loss=state.zone_loss(),
        zone_loss_note=(
            zone_loss_skipped_text(state.zone_loss_skipped) if state.zone_loss_skipped else ""
        ),
    )


def _counts(rows: list[ServiceRow]) -> Mapping[str, Mapping[str, int]]:
    counts = {}
    for tally in TALLIES:
        values = list(map(tally.classify, rows))
        counter = Counter(chain.from_iterable(values))
        if tally.any_choice is not None:
            counter[tally.any_choice[0]] = sum(map(bool, values))
        counts[tally.param] = MappingProxyType(dict(counter))
    return MappingProxyType(counts)


# Filtering and pagination, from the query string


@dataclass(frozen=True, slots=True)
class Query:
    """The table's filters and page, read from the query string."""

    namespace: str = ""
    text: str = ""
    # Tally param -> chosen value.
    choices: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    page: int = 1
    per_page: int = DEFAULT_PER_PAGE

    @classmethod
    def parse(cls, query_string: str) -> Query:
        """Lenient with choices: one the page does not offer is ignored, never an error page.

        A page number or page size that is not a whole number of at least 1 raises
        QueryError (a 400 naming the parameter); one past the end shows the last page.
        """
        values = {key: items[-1].strip() for key, items in parse_qs(query_string).items()}
        choices = {
            tally.param: values[tally.param]
            for tally in TALLIES
            if tally.accepts(values.get(tally.param, ""))
        }
        return cls(
            namespace=values.get("namespace", ""),
            text=values.get("q", "")[:200],
            choices=MappingProxyType(choices),
            page=_positive(values, "page", 1, MAX_PAGE),
            per_page=_positive(values, "per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE),
        )

    @property
    def filtered(self) -> bool:
        return bool(self.namespace or self.text or self.choices)

    def matches(self, row: ServiceRow) -> bool:
        if self.namespace and row.namespace != self.namespace:
            return False
        if self.text and self.text.lower() not in row.search_text:
            return False
        return all(
            tally.matches(row, self.choices[tally.param])
            for tally in TALLIES
            if tally.param in self.choices
        )

    def encode(self, *, page: int | None = None, **choices: str) -> str:
        """This query string with some values changed; defaults are left out."""
        pairs = {"namespace": self.namespace, "q": self.text, **self.choices, **choices}
        wanted_page = self.page if page is None else page
        if wanted_page > 1:
            pairs["page"] = str(wanted_page)
        if self.per_page != DEFAULT_PER_PAGE:
            pairs["per_page"] = str(self.per_page)
        return urlencode([(key, value) for key, value in pairs.items() if value])


class QueryError(ValueError):
    """A query string the page cannot answer; the message (one line) says what to send."""


def _positive(values: Mapping[str, str], key: str, default: int, maximum: int) -> int:
    value = values.get(key)
    if value is None:
        return default
    # ASCII digits only: str.isdigit() also takes "²" and other digits int() refuses.
    if not (value.isascii() and value.isdigit()) or not value.strip("0"):
        raise QueryError(f"{key} must be a whole number, 1 or more")
    # Longer than the maximum's digits: past it (int() refuses over 4,300 digits anyway).
    if len(value.lstrip("0")) > len(str(maximum)):
        return maximum
    return min(int(value), maximum)


@dataclass(frozen=True, slots=True)
class TablePage:
    """One page of the filtered table, with where it sits among the matching rows."""

    query: Query
    rows: tuple[ServiceRow, ...]
    # Rows that match the filters, on every page.
    matched: int
    page: int
    pages: int

    @property
    def first(self) -> int:
        """1-based position of the first row shown."""
        return (self.page - 1) * self.query.per_page + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1 if self.rows else 0


def table_page(view: StatusView, query: Query) -> TablePage:
    matching = [row for row in view.rows if query.matches(row)] if query.filtered else view.rows
    pages = max(1, -(-len(matching) // query.per_page))
    page = min(query.page, pages)
    start = (page - 1) * query.per_page
    return TablePage(
        query=query,
        rows=tuple(matching[start : start + query.per_page]),
        matched=len(matching),
        page=page,
        pages=pages,
    )


def page_links(page: TablePage, links: Links) -> tuple[tuple[str, str | None, bool], ...]:
    """(label, href or None, current) for the pagination bar: first, nearby and last pages."""
    wanted = sorted(
        {1, page.pages, *range(max(1, page.page - 2), min(page.pages, page.page + 2) + 1)}
    )
    result: list[tuple[str, str | None, bool]] = []
    previous = 0
    for number in wanted:
        if number > previous + 1:
            result.append(("…", None, False))
        result.append(
            (str(number), links.home(page.query.encode(page=number)), number == page.page)
        )
        previous = number
    return tuple(result)
