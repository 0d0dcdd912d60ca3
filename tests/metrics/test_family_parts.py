"""The parts of an entry each per-Service family declares it reads (`PerService.parts`).

The cached renderer keeps a family's lines for a replaced result when none of its declared
parts moved, without building its samples; so a declaration that leaves out a part the
samples read would keep stale lines. Here every declaration is held to the samples: over
many pairs of real results (the synthetic cluster's Services, each against others and
against itself after a node resize and a node going NotReady), an entry made of the first
result with only the declared parts taken from the second has the second's samples.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from fractions import Fraction
from itertools import pairwise

import orjson
import pytest

from bench.cluster import ClusterSize, cluster_objects
from exporter.engine import ReadyNodes
from exporter.engine.whatif.forecast import NO_FORECAST
from exporter.metrics.families import HINT_FAMILIES
from exporter.metrics.family import (
    ENTRY_PARTS,
    VERDICT_PARTS,
    Family,
    PerService,
    Sample,
    ServiceEntry,
    changed_parts,
    each_entry,
)
from exporter.pipeline.evaluator import Evaluator
from exporter.sources.snapshot import parse_snapshot
from exporter.state.result import ServiceResult
from exporter.state.store import ClusterStore

SIZE = ClusterSize(nodes=30, services=120, endpoints=1500, namespaces=3)
PER_SERVICE = [family for family in HINT_FAMILIES if isinstance(family.samples, PerService)]


def _results() -> tuple[list[ServiceResult], list[tuple[ServiceResult, ServiceResult]], ReadyNodes]:
    """Every Service's result, and (before, after) pairs of the same Service across a resize
    and a node going NotReady."""
    document = {"apiVersion": "v1", "kind": "List", "items": list(cluster_objects(SIZE))}
    snapshot = parse_snapshot("test", orjson.dumps(document))
    store = ClusterStore()
    snapshot.write_to(store)
    evaluator = Evaluator(store, clock=lambda: 1.8e9)
    evaluator.step()
    first = evaluator.state
    node = snapshot.nodes[0]
    store.upsert_node(
        dataclasses.replace(node, allocatable_cpu=(node.allocatable_cpu or Fraction(4)) * 3)
    )
    evaluator.step()
    resized = evaluator.state
    store.upsert_node(dataclasses.replace(snapshot.nodes[1], ready=False))
    evaluator.step()
    fewer = evaluator.state
    same = [
        (before.services[key], after.services[key])
        for before, after in ((first, resized), (resized, fewer))
        for key in before.services
        if key in after.services and before.services[key] is not after.services[key]
    ]
    return list(first.services.values()), same, first.nodes


RESULTS, SAME_SERVICE, NODES = _results()


def _pairs() -> Iterator[tuple[ServiceResult, ServiceResult]]:
    by_length: dict[int, list[ServiceResult]] = {}
    for result in RESULTS:
        by_length.setdefault(len(result.verdicts), []).append(result)
    for group in by_length.values():
        yield from pairwise(group)
        yield from zip(group, reversed(group), strict=True)
    yield from SAME_SERVICE
    yield from ((after, before) for before, after in SAME_SERVICE)


PAIRS = list(_pairs())


def _entries(result: ServiceResult) -> list[ServiceEntry]:
    forecasts = result.forecasts or (NO_FORECAST,) * len(result.verdicts)
    return [
        ServiceEntry(verdict, flips, NODES, forecast)
        for verdict, flips, forecast in zip(
            result.verdicts, result.state_changes, forecasts, strict=True
        )
    ]


def _hybrid(first: ServiceResult, second: ServiceResult, parts: frozenset[str]) -> ServiceResult:
    """`first`, with the declared parts of each entry taken from `second`."""
    fields = parts & VERDICT_PARTS
    verdicts = tuple(
        dataclasses.replace(a, **{name: getattr(b, name) for name in fields})
        for a, b in zip(first.verdicts, second.verdicts, strict=True)
    )
    return dataclasses.replace(
        first,
        verdicts=verdicts,
        state_changes=second.state_changes if "state_changes" in parts else first.state_changes,
        forecasts=second.forecasts if "forecast" in parts else first.forecasts,
    )


def _samples(samples: PerService, result: ServiceResult) -> list[list[Sample]]:
    if samples.service is not None:
        return [list(samples.service(result))]
    assert samples.entry is not None
    return [list(samples.entry(entry)) for entry in _entries(result)]


def test_the_results_vary() -> None:
    """The pairs move every part some family reads (but the configuration issues, which the
    synthetic cluster has none of), or the test below would prove little."""
    moved = set().union(*(changed_parts(a, b) for a, b in PAIRS))
    read = set().union(*(family.samples.parts or () for family in PER_SERVICE))  # type: ignore[union-attr]
    assert read - moved <= {"config_issues"}, read - moved
    assert len(PAIRS) > 200


def test_every_per_service_family_declares_its_parts() -> None:
    undeclared = [family.name for family in PER_SERVICE if family.samples.parts is None]  # type: ignore[union-attr]
    assert not undeclared


@pytest.mark.parametrize("family", PER_SERVICE, ids=lambda family: family.name)
def test_the_declared_parts_decide_the_samples(family: Family) -> None:
    samples = family.samples
    assert isinstance(samples, PerService)
    assert samples.parts is not None
    for first, second in PAIRS:
        hybrid = _hybrid(first, second, samples.parts)
        assert _samples(samples, hybrid) == _samples(samples, second), (
            f"{family.name} reads more than {sorted(samples.parts)}"
        )


def test_a_part_left_out_is_caught() -> None:
    """The check above fails for a declaration that misses a part the samples read."""
    wrong = each_entry(lambda entry: [((), float(entry.verdict.ready_endpoints))], parts=("drift",))
    assert any(
        _samples(wrong, _hybrid(first, second, frozenset({"drift"}))) != _samples(wrong, second)
        for first, second in PAIRS
    )


def test_unknown_parts_are_refused() -> None:
    with pytest.raises(ValueError, match="not a part of an entry: zone"):
        each_entry(lambda _entry: [], parts=("zone",))
    assert {"state_changes", "forecast", "zones"} <= ENTRY_PARTS


def test_changed_parts_names_what_moved() -> None:
    result = RESULTS[0]
    verdict = result.verdicts[0]
    moved = dataclasses.replace(
        result,
        verdicts=(
            dataclasses.replace(verdict, ready_endpoints=verdict.ready_endpoints + 1),
            *result.verdicts[1:],
        ),
        state_changes=tuple(flips + 1 for flips in result.state_changes),
    )
    assert changed_parts(result, moved) == {"ready_endpoints", "state_changes"}
    assert changed_parts(result, result) == set()
