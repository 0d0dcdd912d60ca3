"""Pure rendering: a StatusView (one published state) and a request's choices -> HTML bytes.

Jinja2 with autoescape on for every template: every value from the cluster (names,
annotation values, reasons) is escaped, in text and in attributes, without a call site
having to remember it.
"""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

from exporter.engine import ExpectedState
from exporter.report.traffic import CROSS_ZONE_MODEL
from exporter.web.facts import service_facts
from exporter.web.links import Links
from exporter.web.table import (
    COLUMNS,
    PER_PAGE_CHOICES,
    TALLIES,
    CellTone,
    Query,
    StatusView,
    page_links,
    table_page,
)

_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("exporter.web", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)

STATE_TONES = {
    ExpectedState.ENABLED: CellTone.GOOD,
    ExpectedState.DISABLED: CellTone.BAD,
    ExpectedState.NOT_APPLICABLE: CellTone.NONE,
}


@dataclass(frozen=True, slots=True)
class WatchHealth:
    """One watched resource's line on the status pages: how its watch is doing, and its colour."""

    resource: str
    state: str
    tone: str


@dataclass(frozen=True, slots=True)
class PageContext:
    """What every page says about the exporter itself."""

    version: str
    source: str
    ready: bool
    readiness: str
    evaluated_at: str | None
    watches: tuple[WatchHealth, ...] = ()
    # Set on a sharded exporter: what its pages leave out (`shard_notice`).
    shard_notice: str = ""


def shard_notice(shard: int, total_shards: int) -> str:
    """What a sharded exporter's pages cover: its own Services, never the whole cluster."""
    if total_shards <= 1:
        return ""
    return (
        f"Shard {shard} of {total_shards} (numbered from 0): counts cover only the Services "
        "this shard owns; the other shards' pages show the rest. Nodes and zone shares are "
        "the whole cluster's."
    )


TEMPLATES = ("index.html", "service.html", "not_found.html")


def preload() -> None:
    """Compile every template now, so that no visitor waits for it."""
    for template in TEMPLATES:
        _ENVIRONMENT.get_template(template)


def _render(template: str, **values: object) -> bytes:
    return _ENVIRONMENT.get_template(template).render(**values).encode()


def index_page(view: StatusView, query: Query, links: Links, context: PageContext) -> bytes:
    page = table_page(view, query)
    return _render(
        "index.html",
        current="home",
        links=links,
        context=context,
        cluster=view.cluster,
        zone_loss=view.zone_loss,
        zone_loss_note=view.zone_loss_note,
        tallies=TALLIES,
        counts=view.counts,
        watches=context.watches,
        namespaces=view.namespaces,
        query=page.query,
        per_page_choices=PER_PAGE_CHOICES,
        page=page,
        total=len(view.rows),
        columns=COLUMNS,
        # Cells computed here, not through template calls: a page can hold 1,000 rows.
        cells=[[column.cell(row) for column in COLUMNS] for row in page.rows],
        pagination=page_links(page, links),
    )


def service_page(
    view: StatusView, namespace: str, name: str, links: Links, context: PageContext
) -> bytes | None:
    """One Service's page, or None when the state holds no such Service."""
    known = view.rows_of.get((namespace, name))
    if known is None:
        return None
    # The rows carry the live forecasts: the page's margin is the one the list shows.
    _, rows = known
    return _render(
        "service.html",
        current="service",
        links=links,
        context=context,
        namespace=namespace,
        name=name,
        namespace_query=Query(namespace=namespace).encode(),
        services=[service_facts(view.state, row.verdict, row.forecast.margin) for row in rows],
        state_tones=STATE_TONES,
        cross_zone_model=CROSS_ZONE_MODEL,
    )


def not_found_page(message: str, links: Links, context: PageContext) -> bytes:
    return _render(
        "not_found.html",
        current="",
        links=links,
        context=context,
        heading="Not found",
        message=message,
    )


def bad_request_page(message: str, links: Links, context: PageContext) -> bytes:
    """A request the page cannot answer (a malformed page number): what to send instead."""
    return _render(
        "not_found.html",
        current="",
        links=links,
        context=context,
        heading="Bad request",
        message=message,
    )
