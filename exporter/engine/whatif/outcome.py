"""Before and after: an entry's expected result on each side of a scenario, and how it
changes (behaviour section 11: `loses-hints`, `gains-hints`, `reason-changed`, `unchanged`).

The pipeline answers a scenario from two results (exporter.pipeline.whatif); the live
exporter's zone-loss forecasts classify each zone's loss with the same `classify`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from exporter.engine.context import NodeContext
from exporter.engine.evaluate import (
    EntryVerdict,
    ExpectedState,
    evaluate_service,
)
from exporter.engine.kubeproxy import ProxyView, ReadyNodes
from exporter.engine.model import EndpointSlice, Service
from exporter.engine.profile import NEWEST_KUBE_PROXY, KubeProxyBehaviour
from exporter.engine.whatif.converged import converged_proxy_view, routes_locally


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


def entry_outcome(
    verdict: EntryVerdict,
    slices: Sequence[EndpointSlice],
    nodes: ReadyNodes,
    behaviour: KubeProxyBehaviour = NEWEST_KUBE_PROXY,
) -> Outcome:
    """The entry's outcome from its verdict and the slices of its address type it was
    evaluated on, among `nodes` (those of the verdict's view)."""
    return Outcome(verdict, tuple(slices), converged_proxy_view(verdict, slices, nodes, behaviour))


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


def service_outcomes(
    service: Service, slices: Sequence[EndpointSlice], context: NodeContext
) -> tuple[Outcome, ...]:
    """The Service's verdicts in the node view with their converged routing, one per address
    type (through `evaluate_service`, the evaluator's entry point)."""
    by_type: dict[str, list[EndpointSlice]] = {}
    for endpoint_slice in slices:
        by_type.setdefault(endpoint_slice.address_type, []).append(endpoint_slice)
    behaviour = context.profile.kube_proxy_behaviour
    return tuple(
        entry_outcome(verdict, by_type[verdict.address_type], context.nodes, behaviour)
        for verdict in evaluate_service(service, slices, context)
    )
