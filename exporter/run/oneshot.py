"""One-shot commands run the live pipeline: the same store, evaluator and result.

`explain` and `evaluate` read a snapshot file or a LIST of the cluster (exporter.sources),
write it into a store as the informers would, and take one evaluator step: the result is
the very type the live exporter publishes, with the same verdicts, forecasts and problems,
so a command and the status page of an exporter watching the same objects cannot differ.
`what-if` takes that step, writes the scenario's changed cluster into the same store and
takes a second one: its answer is the difference of the two results.
"""

from __future__ import annotations

from collections.abc import Sequence

from exporter.engine import DEFAULT_DATAPLANES, DataPlane
from exporter.engine.profile import ASSUMED, Profile
from exporter.engine.whatif.scenario import Cluster, ScenarioStep, apply_scenario
from exporter.pipeline.evaluator import Evaluator
from exporter.pipeline.whatif import WhatIf, difference, outcomes_of
from exporter.sources.snapshot import Snapshot
from exporter.state.result import ClusterResult
from exporter.state.store import ClusterStore


def evaluate_snapshot(
    snapshot: Snapshot,
    dataplanes: Sequence[DataPlane] = DEFAULT_DATAPLANES,
    profile: Profile = ASSUMED,
    *,
    forecasts: bool = True,
) -> ClusterResult:
    """The result of one evaluator step over the snapshot's objects; `forecasts`: False
    leaves them out when nothing will show them (`evaluate`'s document).

    The input's completeness is the result's too: an input without Nodes (a snapshot that
    holds none, a LIST of them refused) gives a result whose `nodes_known` is False, and
    problems judged knowing it (nodes-unknown instead of what needs Nodes)."""
    _store, evaluator = _one_shot(snapshot, dataplanes, profile, forecasts=forecasts)
    return evaluator.step()


def _one_shot(
    snapshot: Snapshot,
    dataplanes: Sequence[DataPlane],
    profile: Profile,
    *,
    forecasts: bool,
    retain_inputs: bool = False,
) -> tuple[ClusterStore, Evaluator]:
    """The snapshot written into a store, and a one-shot evaluator over it: the input's
    completeness (`nodes_known`) is the snapshot's, for every one-shot command alike."""
    store = ClusterStore()
    snapshot.write_to(store)
    evaluator = Evaluator(
        store,
        dataplanes=dataplanes,
        profile=profile,
        one_shot=True,
        forecasts=forecasts,
        nodes_known=bool(snapshot.nodes),
        retain_inputs=retain_inputs,
    )
    return store, evaluator


def what_if_snapshot(
    snapshot: Snapshot,
    steps: Sequence[ScenarioStep],
    profile: Profile = ASSUMED,
    dataplanes: Sequence[DataPlane] = DEFAULT_DATAPLANES,
) -> WhatIf:
    """The scenario's answer: a step over the snapshot's objects, then, with the scenario
    written into the store, a step over the changed cluster.

    Raises ScenarioError, before any step, when the scenario does not apply to the snapshot.
    The second step re-evaluates what the evaluator's incremental policy says the writes
    moved; outcomes of the Services it kept are kept.
    """
    cluster = Cluster(snapshot.nodes, snapshot.services, snapshot.endpoint_slices, profile=profile)
    changed = apply_scenario(cluster, steps)
    # Where Nodes go, the second step evaluates every Service again: those whose slices
    # the scenario leaves reuse their inputs. Else it evaluates only the changed ones.
    store, evaluator = _one_shot(
        snapshot, dataplanes, profile, forecasts=False, retain_inputs=changed.nodes != cluster.nodes
    )
    before = outcomes_of(evaluator.step(), store.slices_of)
    # The scenario as the informers would see it happen: Nodes gone, slices rewritten.
    store.replace_nodes(changed.nodes)
    store.replace_endpoint_slices(changed.slices)
    after = outcomes_of(evaluator.step(), store.slices_of, before)
    return difference(steps, before, after)
