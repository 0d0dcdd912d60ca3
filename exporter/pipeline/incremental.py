"""The live evaluator's incremental policy: what one step may reuse from the previous one.

The engine evaluates an entry in a node view (exporter.engine.context.NodeContext); this
module decides, step by step, how much of the previous view and of the previous verdicts
still holds:

- `next_view`: the node view after a Node change, and what it moved (`Moved`). Equal
  capacity, Ready nodes and clients are kept as the same objects, and so are the memos
  made for them, the Feasibility memo and the zone-loss views: node heartbeats move
  nothing.
- `rejudged`: where only CPU shares moved, a verdict is re-judged from its own counts
  instead of evaluated again (routing and proxy modes do not depend on capacity).
- `PreparedInputs`: what each Service's verdicts read from its Service and slices alone,
  kept for the objects they were made from, so that a change of the Ready nodes evaluates
  every Service again without reading its slices again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import TypeVar

from exporter.engine import EndpointSlice, EntryVerdict, Service, cluster_capacity
from exporter.engine.context import NodeContext, ready_nodes
from exporter.engine.crosszone import Clients
from exporter.engine.evaluate import EntryInputs, rejudge_entry, service_inputs
from exporter.engine.model import Node
from exporter.engine.profile import Profile
from exporter.engine.whatif.feasibility import Feasibility
from exporter.engine.whatif.zoneloss import ZoneLossView, zone_loss_beyond_cap, zone_loss_views
from exporter.vocabulary import ServiceKey

_V = TypeVar("_V")


class Moved(Enum):
    """What a Node change moved."""

    NOTHING = "nothing"
    # Capacity or client CPU only: the Ready nodes and zone membership are the same.
    SHARES = "shares"
    # Ready nodes or zone membership.
    NODES = "nodes"


@dataclass(frozen=True, slots=True)
class NodeView:
    """What every Service's evaluation of one step shares: the engine's context and the
    live exporter's forecasts' parts (feasibility memo, the cluster without each zone)."""

    context: NodeContext
    feasibility: Feasibility
    zone_loss_views: tuple[ZoneLossView, ...] = ()
    # The zone labels of the Nodes when more than MAX_ZONE_LOSS_ZONES (no zone-loss
    # forecast is made then); 0 otherwise.
    zone_loss_skipped: int = 0
    # The Nodes last seen: a profile change rebuilds the zone-loss views from them.
    all_nodes: tuple[Node, ...] = ()
    # Which node is in which zone: zone-loss views also depend on not-Ready nodes.
    zone_membership: frozenset[tuple[str, str]] = frozenset()
    # The zone-loss views remove the same nodes as the previous view's (only Ready nodes
    # or capacity moved): forecasts re-decide from what they counted on unchanged slices.
    same_zone_loss: bool = True


def _kept(earlier: _V, now: _V) -> _V:
    return earlier if now == earlier else now


def _zone_membership(nodes: tuple[Node, ...]) -> frozenset[tuple[str, str]]:
    return frozenset((node.name, node.zone) for node in nodes if node.zone)


def next_view(
    view: NodeView, nodes: tuple[Node, ...] | None, profile: Profile
) -> tuple[NodeView, Moved]:
    """The node view after the store's Nodes (None: unchanged) under `profile`."""
    before = view.context
    profile_changed = profile != before.profile
    if nodes is None and not profile_changed:
        # A Service, slice or event change: the view stands, memos and all.
        return (view if view.same_zone_loss else replace(view, same_zone_loss=True)), Moved.NOTHING
    all_nodes = view.all_nodes if nodes is None else nodes
    capacity, ready, clients = before.capacity, before.nodes, before.clients
    feasibility, views = view.feasibility, view.zone_loss_views
    skipped, membership = view.zone_loss_skipped, view.zone_membership
    moved = Moved.NOTHING
    if profile_changed:
        # The zone-loss views judge the cluster without each zone under the profile.
        views = zone_loss_views(all_nodes, (), profile)
    if nodes is not None:
        # Equal ones are kept, not replaced by a copy: verdicts, memos and families
        # refer to them, and comparing an object with itself is immediate.
        clients = _kept(before.clients, Clients.of(nodes))
        capacity = _kept(before.capacity, cluster_capacity(nodes))
        ready = _kept(before.nodes, ready_nodes(nodes))
        membership = _zone_membership(nodes)
        same_nodes = ready is before.nodes and membership == view.zone_membership
        if capacity is not before.capacity or not same_nodes:
            moved = Moved.SHARES if same_nodes else Moved.NODES
            feasibility = Feasibility(capacity)
            views = zone_loss_views(nodes, views if same_nodes else (), profile)
            skipped = zone_loss_beyond_cap(nodes)
        elif clients is not before.clients:
            # Only client CPU moved (a control-plane node's, say): re-weigh, as for shares.
            moved = Moved.SHARES
    after = NodeView(
        context=before.succeeded_by(capacity, ready, clients, profile),
        feasibility=feasibility,
        zone_loss_views=views,
        zone_loss_skipped=skipped,
        all_nodes=all_nodes,
        zone_membership=membership,
        # Which nodes each view removes follows from zone membership alone.
        same_zone_loss=not profile_changed and membership == view.zone_membership,
    )
    return after, moved


def rejudged(
    verdict: EntryVerdict,
    context: NodeContext,
    reweighed: tuple[EntryInputs, Clients] | None = None,
) -> EntryVerdict:
    """The verdict in `context`, whose Ready nodes are those of the verdict's view.

    What a node change that moves only CPU shares asks of every entry: the engine's
    `rejudge_entry` replaces the fields capacity decides and keeps the others. `reweighed`:
    the entry's inputs and the earlier clients, when client CPU moved (the cross-zone shares
    weigh it).
    """
    cross_zone = (
        None
        if reweighed is None
        else context.cross_zones.reweighed(
            verdict.cross_zone, verdict.routing, reweighed[0].endpoints, reweighed[1]
        )
    )
    return rejudge_entry(verdict, context, cross_zone)


def rejudged_service(
    verdicts: Sequence[EntryVerdict],
    entries: Sequence[EntryInputs | None],
    context: NodeContext,
    before: Clients,
) -> tuple[EntryVerdict, ...]:
    """A Service's verdicts re-judged in `context` (`entries`: their kept inputs, None where
    unknown); their cross-zone shares are re-weighed where the clients moved from `before`."""
    reweigh = context.clients is not before
    return tuple(
        rejudged(verdict, context, (entry, before) if reweigh and entry is not None else None)
        for verdict, entry in zip(verdicts, entries, strict=True)
    )


class PreparedInputs:
    """Each Service's EntryInputs, for the Service and slice objects they were made from."""

    __slots__ = ("_prepared", "_retain", "_zone_sets")

    def __init__(self, *, retain: bool = True) -> None:
        # False for a one-shot evaluation: there is no next step to reuse them in.
        self._retain = retain
        self._prepared: dict[
            ServiceKey, tuple[Service, tuple[EndpointSlice, ...], tuple[EntryInputs, ...]]
        ] = {}
        # Equal zone-hint sets of those inputs, shared (a handful of distinct ones).
        self._zone_sets: dict[frozenset[str], frozenset[str]] = {}

    def of(
        self, key: ServiceKey, service: Service, slices: tuple[EndpointSlice, ...], profile: Profile
    ) -> tuple[tuple[EntryInputs, ...], bool]:
        """The Service's inputs under `profile` (the one of every call until `clear`), and
        whether they were kept (same objects as before)."""
        prepared = self._prepared.get(key)
        if prepared is not None and prepared[0] is service and prepared[1] is slices:
            return prepared[2], True
        inputs = service_inputs(service, slices, self._zone_sets, profile)
        if self._retain:
            self._prepared[key] = (service, slices, inputs)
        return inputs, False

    def entries_of(
        self, key: ServiceKey, verdicts: Sequence[EntryVerdict]
    ) -> tuple[EntryInputs | None, ...]:
        """The kept inputs of each verdict (both sorted by address type), None where unknown."""
        prepared = self._prepared.get(key)
        if prepared is not None and len(prepared[2]) == len(verdicts):
            return prepared[2]
        return (None,) * len(verdicts)

    def forget(self, key: ServiceKey) -> None:
        self._prepared.pop(key, None)

    def clear(self) -> None:
        """Nothing prepared is kept (the profile changed)."""
        self._prepared.clear()
