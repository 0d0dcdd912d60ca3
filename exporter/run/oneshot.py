"""One-shot commands run the live pipeline once: the same store, evaluator and result.

`explain` and `evaluate` read a snapshot file or a LIST of the cluster (exporter.sources),
write it into a store as the informers would, and take one evaluator step: the result is
the very type the live exporter publishes, with the same verdicts, forecasts and problems,
so a command and the status page of an exporter watching the same objects cannot differ.
"""

from __future__ import annotations

from collections.abc import Sequence

from exporter.engine import DEFAULT_DATAPLANES, DataPlane
from exporter.engine.profile import ASSUMED, Profile
from exporter.pipeline.evaluator import Evaluator
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
    store = ClusterStore()
    snapshot.write_to(store)
    evaluator = Evaluator(
        store,
        dataplanes=dataplanes,
        profile=profile,
        one_shot=True,
        forecasts=forecasts,
        nodes_known=bool(snapshot.nodes),
    )
    return evaluator.step()
