"""The result a command or the live exporter would publish for some objects: one evaluator
step over them (exporter.run.oneshot), or the two steps of a what-if, for tests that build
objects by hand."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from exporter.engine import DEFAULT_DATAPLANES, DataPlane, EndpointSlice, Node, Service
from exporter.engine.profile import ASSUMED, Profile
from exporter.engine.whatif.scenario import Cluster, ScenarioStep
from exporter.pipeline.whatif import WhatIf
from exporter.run.oneshot import evaluate_snapshot, what_if_snapshot
from exporter.sources.snapshot import Snapshot
from exporter.state.result import ClusterResult


def result_of(
    nodes: Iterable[Node],
    services: Iterable[Service],
    slices: Iterable[EndpointSlice],
    dataplanes: Sequence[DataPlane] = DEFAULT_DATAPLANES,
    profile: Profile = ASSUMED,
) -> ClusterResult:
    snapshot = Snapshot(tuple(nodes), tuple(services), tuple(slices))
    return evaluate_snapshot(snapshot, dataplanes, profile)


def what_if_of(cluster: Cluster, steps: Sequence[ScenarioStep]) -> WhatIf:
    """What `what-if` answers for the cluster's objects: the pipeline stepped before and after
    the scenario (exporter.run.oneshot)."""
    snapshot = Snapshot(cluster.nodes, cluster.services, cluster.slices)
    return what_if_snapshot(snapshot, steps, cluster.profile)
