"""Re-judging a verdict after a capacity change replaces only the fields capacity decides.

Every field of EntryVerdict is either one of CAPACITY_FIELDS (recomputed) or carried over
as the very object the verdict held: a field added later, with a default or not, cannot be
silently reset by a re-judge (the live evaluator re-judges every entry when CPU moves).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from exporter.engine import DataPlane, EntryVerdict, cluster_capacity
from exporter.engine.context import context_of, ready_nodes
from exporter.engine.crosszone import Clients
from exporter.engine.evaluate import (
    CAPACITY_FIELDS,
    evaluate_service,
    rejudge_entry,
    service_inputs,
)
from exporter.pipeline.incremental import rejudged
from tests.engine.builders import endpoint, endpoint_slice, service, zone_nodes

ZONES = ("zone-0", "zone-1", "zone-2")
# What re-judging reads to judge the counts again: carried, and compared as themselves.
READ_BY_THE_JUDGEMENT = frozenset(
    {"mechanism", "ready_endpoints", "hinted_endpoints", "zone_endpoints"}
)


SERVICE = service(mode="Auto")
SLICES = [endpoint_slice(*(endpoint(ZONES[i % 3], hints=(ZONES[i % 3],)) for i in range(7)))]


def _nodes(cpu: str) -> list[Any]:
    return zone_nodes({"zone-0": [cpu], "zone-1": ["4"], "zone-2": ["4"]})


def _verdict() -> EntryVerdict:
    """A real verdict: 7 endpoints of an `auto` Service in three zones."""
    nodes = _nodes("4")
    context = context_of(
        cluster_capacity(nodes),
        ready_nodes(nodes),
        clients=Clients.of(nodes),
        dataplanes=tuple(DataPlane),
    )
    (verdict,) = evaluate_service(SERVICE, SLICES, context)
    return verdict


def _with_sentinels(verdict: EntryVerdict) -> tuple[EntryVerdict, dict[str, Any]]:
    """The verdict with a unique object in every field re-judging neither recomputes nor
    reads: whatever a field's type or default, only carrying it over keeps that object."""
    sentinels: dict[str, Any] = {
        field.name: object()
        for field in dataclasses.fields(EntryVerdict)
        if field.name not in CAPACITY_FIELDS | READ_BY_THE_JUDGEMENT
    }
    return dataclasses.replace(verdict, **sentinels), sentinels


def test_the_recomputed_and_read_fields_are_fields_of_a_verdict() -> None:
    """The lists name real fields (a renamed field would leave them stale)."""
    names = {field.name for field in dataclasses.fields(EntryVerdict)}
    assert names >= CAPACITY_FIELDS
    assert names >= READ_BY_THE_JUDGEMENT
    assert not CAPACITY_FIELDS & READ_BY_THE_JUDGEMENT


@pytest.mark.parametrize("clients", ["same-clients", "clients-moved"])
def test_every_field_is_recomputed_or_carried_over(clients: str) -> None:
    """Through the evaluator's `rejudged` (and so the engine's `rejudge_entry`): each field
    not recomputed is the verdict's own object afterwards."""
    verdict = _verdict()
    marked, sentinels = _with_sentinels(verdict)
    moved = _nodes("8")
    context = context_of(
        cluster_capacity(moved),
        ready_nodes(moved),
        clients=Clients.of(moved),
        dataplanes=tuple(DataPlane),
    )
    if clients == "clients-moved":
        # Re-weighing reads the entry's routing and endpoints: give it the real ones.
        marked = dataclasses.replace(marked, routing=verdict.routing)
        sentinels.pop("routing")
        (entry,) = service_inputs(SERVICE, SLICES)
        after = rejudged(marked, context, (entry, Clients.of(_nodes("4"))))
    else:
        after = rejudged(marked, context)
    for field in dataclasses.fields(EntryVerdict):
        if field.name in CAPACITY_FIELDS:
            continue
        expected = sentinels.get(field.name, getattr(marked, field.name))
        assert getattr(after, field.name) is expected, field.name
    # The capacity moved: the judgement is the new capacity's, not the old one.
    assert after.zones != verdict.zones


def test_the_engine_rejudges_with_the_verdicts_own_cross_zone_unless_given() -> None:
    verdict = _verdict()
    marked, sentinels = _with_sentinels(verdict)
    moved = _nodes("8")
    context = context_of(cluster_capacity(moved), ready_nodes(moved))
    after = rejudge_entry(marked, context)
    assert after.cross_zone is marked.cross_zone
    assert all(getattr(after, name) is value for name, value in sentinels.items())
