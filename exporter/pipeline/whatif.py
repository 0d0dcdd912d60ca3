"""What-if (behaviour section 11): the difference of two results of the pipeline.

A scenario is answered by the one-shot pipeline run twice (exporter.run.oneshot): a step
over the cluster's objects, the scenario written into the store, a second step. The
evaluator's incremental policy decides what the second step evaluates again (a scale
re-evaluates one Service; a lost zone or node, every Service). This module reads the two
`ClusterResult`s: each entry's outcome (its verdict with the routing kube-proxy converges
to) on each side, and how it changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from exporter.engine import EndpointSlice
from exporter.engine.whatif.outcome import EntryChange, Outcome, classify, entry_outcome
from exporter.engine.whatif.scenario import ScenarioStep
from exporter.state.result import ClusterResult
from exporter.vocabulary import EntryKey, ServiceKey

# Each Service's slices as the step evaluated them (the store's, in its order).
SlicesOf = Callable[[ServiceKey], Sequence[EndpointSlice]]


@dataclass(frozen=True, slots=True)
class Outcomes:
    """One result's entries, each with its outcome (aligned with the result's Services)."""

    result: ClusterResult
    by_entry: Mapping[EntryKey, Outcome]


def outcomes_of(
    result: ClusterResult, slices_of: SlicesOf, earlier: Outcomes | None = None
) -> Outcomes:
    """Every entry's outcome in `result`, from the slices its verdicts were evaluated on.

    `earlier`: the outcomes of the previous step's result. A Service whose result the
    evaluator kept (the same object: same verdicts and Ready nodes) on the same slice
    objects keeps its outcomes: they are what this step would compute again.
    """
    behaviour = result.profile.kube_proxy_behaviour
    by_entry: dict[EntryKey, Outcome] = {}
    for key, service_result in result.services.items():
        slices = tuple(slices_of(key))
        if earlier is not None and earlier.result.services.get(key) is service_result:
            kept = [earlier.by_entry[verdict.key] for verdict in service_result.verdicts]
            if _same_slices(kept, slices):
                by_entry.update((outcome.verdict.key, outcome) for outcome in kept)
                continue
        by_type: dict[str, list[EndpointSlice]] = {}
        for endpoint_slice in slices:
            by_type.setdefault(endpoint_slice.address_type, []).append(endpoint_slice)
        for verdict in service_result.verdicts:
            by_entry[verdict.key] = entry_outcome(
                verdict, by_type[verdict.address_type], result.nodes, behaviour
            )
    return Outcomes(result, by_entry)


def _same_slices(kept: Sequence[Outcome], slices: Sequence[EndpointSlice]) -> bool:
    before = [endpoint_slice for outcome in kept for endpoint_slice in outcome.slices]
    return len(before) == len(slices) and {id(s) for s in before} == {id(s) for s in slices}


@dataclass(frozen=True, slots=True)
class WhatIf:
    """A scenario's answer: the pipeline's result before and after it, and how every entry
    of both changes (by namespace, name and address type)."""

    steps: tuple[ScenarioStep, ...]
    before: ClusterResult
    after: ClusterResult
    changes: tuple[EntryChange, ...]


def difference(steps: Sequence[ScenarioStep], before: Outcomes, after: Outcomes) -> WhatIf:
    """How each entry of both results changes, from its outcome on each side."""
    later = after.by_entry
    changes = tuple(
        EntryChange(key, classify(outcome, later[key]), outcome, later[key])
        for key, outcome in sorted(before.by_entry.items())
        if key in later
    )
    return WhatIf(tuple(steps), before.result, after.result, changes)
