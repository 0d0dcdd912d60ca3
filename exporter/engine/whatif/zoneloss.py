"""Zone loss: which entries would lose hints if one zone were lost (behaviour section 11).

Each zone's view (`ZoneLossView`) is the cluster without that zone, computed once and shared
by every Service; clusters with more than MAX_ZONE_LOSS_ZONES zone labels get none. An entry's
change under a zone's loss is classified as `what-if` classifies it (`outcome.classify`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from exporter.engine.capacity import cluster_capacity
from exporter.engine.context import NodeContext, context_of
from exporter.engine.evaluate import counted_endpoints, ready_nodes
from exporter.engine.kubeproxy import KubeProxyRoutes, ReadyNodes
from exporter.engine.mechanism import Mechanism
from exporter.engine.model import Endpoint, Node
from exporter.engine.profile import ASSUMED, Profile
from exporter.engine.whatif.feasibility import Feasibility
from exporter.engine.whatif.outcome import Change, Outcome, classify, service_outcomes
from exporter.engine.whatif.scenario import without_endpoints

# Zone-loss forecasts are made for clusters of at most this many zone labels. Each zone's
# view is the cluster without it, so their cost grows as zones x nodes: with a zone label
# per Node (some clusters have them), 10,000 Nodes once took 9 minutes and 24 GB. Beyond
# the cap no forecast is made, and every surface says so (`zone_loss_beyond_cap`).
MAX_ZONE_LOSS_ZONES = 100


@dataclass(frozen=True, slots=True)
class ZoneLossView:
    """The cluster as it would be without one zone: computed once, shared by every Service.

    Its `context` is the engine's node view of that cluster, the kind every evaluator step
    evaluates in: an entry re-evaluated without the zone goes through `evaluate_service`, as
    `what-if --lose-zone` does, and entries of one shape share its judgements and routings.
    """

    zone: str
    # Nodes that go with the zone.
    removed_nodes: frozenset[str]
    feasibility: Feasibility
    # Its capacity is the feasibility's; no clients (forecasts do not weigh cross-zone shares).
    context: NodeContext

    @property
    def nodes(self) -> ReadyNodes:
        return self.context.nodes

    @property
    def routes(self) -> KubeProxyRoutes:
        """kube-proxy's routings over `nodes`: entries of one hint shape share one."""
        return self.context.routes

    @property
    def profile(self) -> Profile:
        """behaviour §12: the versions and gates the cluster without the zone is judged under."""
        return self.context.profile


def zone_loss_views(
    nodes: Sequence[Node], same_nodes: Sequence[ZoneLossView] = (), profile: Profile = ASSUMED
) -> tuple[ZoneLossView, ...]:
    """One view per zone label of the cluster's Nodes, in zone order, under `profile`; none at
    all when there are more than MAX_ZONE_LOSS_ZONES labels (see `zone_loss_beyond_cap`).

    `same_nodes`: views made for these Nodes' names, zones and readiness (only CPU moved);
    their node sets are kept and only capacity is computed again.
    """
    zones = sorted({node.zone for node in nodes if node.zone})
    if len(zones) > MAX_ZONE_LOSS_ZONES:
        return ()
    reusable = {view.zone: view for view in same_nodes if view.profile == profile}
    views = []
    for zone in zones:
        kept = [node for node in nodes if node.zone != zone]
        earlier = reusable.get(zone)
        capacity = cluster_capacity(kept)
        if earlier is None:
            removed = frozenset(node.name for node in nodes if node.zone == zone)
            context = context_of(capacity, ready_nodes(kept), profile=profile)
        else:
            # The same Ready nodes: their routings are kept, the capacity's judgements new.
            removed = earlier.removed_nodes
            context = earlier.context.succeeded_by(
                capacity, earlier.nodes, earlier.context.clients, profile
            )
        views.append(ZoneLossView(zone, removed, Feasibility(capacity), context))
    return tuple(views)


def zone_loss_beyond_cap(nodes: Iterable[Node]) -> int:
    """The number of zone labels of the Nodes when above MAX_ZONE_LOSS_ZONES (no zone-loss
    forecast is made for them), else 0."""
    zones = len({node.zone for node in nodes if node.zone})
    return zones if zones > MAX_ZONE_LOSS_ZONES else 0


def _survives(view: ZoneLossView) -> Callable[[Endpoint], bool]:
    return lambda endpoint: (
        not (endpoint.zone == view.zone or endpoint.node_name in view.removed_nodes)
    )


def loses_hints_without(outcome: Outcome, view: ZoneLossView) -> bool:
    """Whether the entry's change under lose-zone is `loses-hints`.

    An enabled `auto` entry is judged from the count alone, through the shared memo: with
    every counted endpoint zoned (check 5 passed), losing a zone changes only N and the
    ratios, and while hints stay enabled every remaining zone keeps a hinted endpoint, so
    the converged routing stays local. Other entries that route locally today are
    re-evaluated on their own slices without the zone.
    """
    verdict = outcome.verdict
    if verdict.mechanism is Mechanism.AUTO and outcome.enabled:
        return _enabled_auto_loses_hints(counted_endpoints(outcome.slices), view)
    if not outcome.local:
        # Neither enabled auto nor local: there is nothing to lose.
        return False
    slices = without_endpoints(outcome.slices, _survives_not(view))
    after = service_outcomes(verdict.service, slices, view.context)
    same_type = [o for o in after if o.verdict.address_type == verdict.address_type]
    return any(classify(outcome, o) is Change.LOSES_HINTS for o in same_type)


def _enabled_auto_loses_hints(counted: Sequence[Endpoint], view: ZoneLossView) -> bool:
    survives = _survives(view)
    return not view.feasibility.feasible(sum(1 for e in counted if survives(e)))


def surviving_counts(counted: Sequence[Endpoint], views: Sequence[ZoneLossView]) -> list[int]:
    """Per view (aligned), how many of the endpoints survive its zone's loss: one pass.

    `_survives` for every view, inlined: a node change asks it of every enabled `auto` entry.
    """
    lost = [0] * len(views)
    for endpoint in counted:
        zone, node = endpoint.zone, endpoint.node_name
        for index, view in enumerate(views):
            if zone == view.zone or node in view.removed_nodes:
                lost[index] += 1
    return [len(counted) - gone for gone in lost]


def _survives_not(view: ZoneLossView) -> Callable[[Endpoint], bool]:
    # Not `not _survives(view)(endpoint)`: one call per endpoint, not two.
    zone, removed = view.zone, view.removed_nodes
    return lambda endpoint: endpoint.zone == zone or endpoint.node_name in removed


def zones_losing_hints(outcome: Outcome, views: Sequence[ZoneLossView]) -> frozenset[str]:
    """The zones whose loss would take this entry's hints away."""
    return frozenset(view.zone for view in views if loses_hints_without(outcome, view))


def zone_loss(outcomes: Iterable[Outcome], views: Sequence[ZoneLossView]) -> dict[str, int]:
    """Per zone, how many of these entries would lose hints if the zone were lost."""
    counts = dict.fromkeys((view.zone for view in views), 0)
    for outcome in outcomes:
        for zone in zones_losing_hints(outcome, views):
            counts[zone] += 1
    return counts
