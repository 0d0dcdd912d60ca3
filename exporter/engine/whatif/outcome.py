"""Before and after: every entry's expected result on each side of a scenario, and how it
changes (behaviour section 11: `loses-hints`, `gains-hints`, `reason-changed`, `unchanged`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.capacity import ClusterCapacity, cluster_capacity
from exporter.engine.context import context_of
from exporter.engine.evaluate import (
    EntryVerdict,
    Evaluation,
    ExpectedState,
    evaluate_service,
    ready_nodes,
    slices_by_service,
)
from exporter.engine.kubeproxy import ProxyView, ReadyNodes
from exporter.engine.model import EndpointSlice, Service
from exporter.engine.profile import ASSUMED, Profile
from exporter.engine.whatif.converged import converged_proxy_view, routes_locally
from exporter.engine.whatif.scenario import Cluster, ScenarioStep, apply_scenario


class Change(StrEnum):
    """How a scenario changes an entry's hints: lost, gained, refused for another reason, or not."""

    LOSES_HINTS = "loses-hints"
    GAINS_HINTS = "gains-hints"
    REASON_CHANGED = "reason-changed"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One entry's expected result, on one side of a scenario."""

    verdict: EntryVerdict
    # The entry's slices as they were evaluated (their identity tells what changed).
    slices: tuple[EndpointSlice, ...]
    converged: ProxyView

    @property
    def enabled(self) -> bool:
        return self.verdict.expected_state is ExpectedState.ENABLED

    @property
    def local(self) -> bool:
        return routes_locally(self.converged)


@dataclass(frozen=True, slots=True)
class EntryChange:
    """One entry's outcome before and after a scenario, and the kind of change between them."""

    key: tuple[str, str, str]
    change: Change
    before: Outcome
    after: Outcome


def classify(before: Outcome, after: Outcome) -> Change:
    """The state decides first; with no state flip, the converged routing does."""
    was, now = before.verdict.expected_state, after.verdict.expected_state
    states = {ExpectedState.ENABLED, ExpectedState.DISABLED}
    if was in states and now in states and was is not now:
        return Change.GAINS_HINTS if now is ExpectedState.ENABLED else Change.LOSES_HINTS
    if was is ExpectedState.DISABLED and now is ExpectedState.DISABLED:
        same = before.verdict.reason == after.verdict.reason
        return Change.UNCHANGED if same else Change.REASON_CHANGED
    if before.local != after.local:
        return Change.GAINS_HINTS if after.local else Change.LOSES_HINTS
    return Change.UNCHANGED


@dataclass(frozen=True, slots=True)
class ClusterOutcome:
    """Every entry's outcome over one cluster, grouped by Service, with the evaluation behind it."""

    evaluation: Evaluation
    # Per Service, its entries (one per address type) in address-type order.
    by_service: Mapping[tuple[str, str], tuple[Outcome, ...]]

    @property
    def outcomes(self) -> dict[tuple[str, str, str], Outcome]:
        return {o.verdict.key: o for own in self.by_service.values() for o in own}


def service_outcomes(
    service: Service,
    slices: Sequence[EndpointSlice],
    capacity: ClusterCapacity,
    nodes: ReadyNodes,
    profile: Profile = ASSUMED,
) -> tuple[Outcome, ...]:
    """The Service's verdicts with their converged routing, one per address type."""
    by_type: dict[str, list[EndpointSlice]] = {}
    for endpoint_slice in slices:
        by_type.setdefault(endpoint_slice.address_type, []).append(endpoint_slice)
    return tuple(
        Outcome(
            verdict,
            tuple(by_type[verdict.address_type]),
            converged_proxy_view(
                verdict, by_type[verdict.address_type], nodes, profile.kube_proxy_behaviour
            ),
        )
        for verdict in evaluate_service(
            service, slices, context_of(capacity, nodes, profile=profile)
        )
    )


def _unchanged_slices(earlier: tuple[Outcome, ...], own: Sequence[EndpointSlice]) -> bool:
    before = [endpoint_slice for outcome in earlier for endpoint_slice in outcome.slices]
    return len(before) == len(own) and {id(s) for s in before} == {id(s) for s in own}


def cluster_outcome(cluster: Cluster, reuse: ClusterOutcome | None = None) -> ClusterOutcome:
    """Evaluate a cluster and its converged routing.

    With `reuse`, a Service whose slices are the same objects, in a cluster whose capacity
    and Ready nodes did not change, keeps its earlier outcome: scaling one Service
    re-evaluates one Service.
    """
    capacity = cluster_capacity(cluster.nodes)
    nodes = ready_nodes(cluster.nodes)
    reusable = (
        reuse.by_service
        if reuse is not None
        and reuse.evaluation.capacity == capacity
        and reuse.evaluation.nodes == nodes
        else {}
    )
    grouped = slices_by_service(cluster.slices)
    by_service: dict[tuple[str, str], tuple[Outcome, ...]] = {}
    for service in cluster.services:
        own = grouped.get(service.key)
        if own is None:
            continue
        earlier = reusable.get(service.key)
        if (
            earlier is not None
            and earlier[0].verdict.service is service
            and (_unchanged_slices(earlier, own))
        ):
            by_service[service.key] = earlier
        else:
            by_service[service.key] = service_outcomes(
                service, own, capacity, nodes, cluster.profile
            )
    verdicts = sorted(
        (outcome.verdict for own in by_service.values() for outcome in own),
        key=lambda verdict: verdict.key,
    )
    evaluation = Evaluation(
        capacity=capacity, nodes=nodes, services=tuple(verdicts), profile=cluster.profile
    )
    return ClusterOutcome(evaluation, MappingProxyType(by_service))


@dataclass(frozen=True, slots=True)
class WhatIf:
    """A what-if answer: the scenario's steps, the cluster's outcome before and after, and the
    entries that change."""

    steps: tuple[ScenarioStep, ...]
    before: ClusterOutcome
    after: ClusterOutcome
    changes: tuple[EntryChange, ...]


def what_if(cluster: Cluster, steps: Sequence[ScenarioStep]) -> WhatIf:
    """Every entry before and after the scenario, with how it changes."""
    before = cluster_outcome(cluster)
    after = cluster_outcome(apply_scenario(cluster, steps), reuse=before)
    after_outcomes = after.outcomes
    changes = [
        EntryChange(key, classify(outcome, after_outcomes[key]), outcome, after_outcomes[key])
        for key, outcome in sorted(before.outcomes.items())
        if key in after_outcomes
    ]
    return WhatIf(tuple(steps), before, after, tuple(changes))
