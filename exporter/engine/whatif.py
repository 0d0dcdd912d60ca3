"""Section 11: what-if scenarios, endpoint margins, rollout ranges and zone loss.

A scenario changes the engine's inputs (lose a zone, lose nodes, scale a Service); the
ordinary rules then run on the changed cluster. Answers concern the *expected* result,
the state the controller converges to: observed hints are stale by definition after a
change that has not happened, so the converged routing is computed from the hints the
controller would write, not from the hints the slices carry today.

Feasibility of an `auto` Service depends only on (zone ratios, N), so `Feasibility`
memoises it per set of ratios: margins and zone loss for thousands of Services share
the few counts they ask about.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.allocation import NearestFeasible, ratio_groups, refusal_reason
from exporter.engine.capacity import ClusterCapacity, cluster_capacity
from exporter.engine.context import context_of
from exporter.engine.evaluate import (
    EntryInputs,
    Evaluation,
    ExpectedState,
    ServiceVerdict,
    ZoneVerdict,
    counted_endpoints,
    evaluate_service,
    ready_nodes,
    slices_by_service,
)
from exporter.engine.kubeproxy import (
    KubeProxyRoutes,
    ProxyMode,
    ProxyView,
    ReadyNodes,
    proxy_view,
)
from exporter.engine.mechanism import Mechanism
from exporter.engine.model import Endpoint, EndpointSlice, Node, Service
from exporter.engine.profile import ASSUMED, NEWEST_KUBE_PROXY, KubeProxyBehaviour, Profile
from exporter.engine.reasons import DisableReason
from exporter.engine.routing import HintSets, ready_hint_sets

# Above this many endpoints per zone every count is feasible: the minimums sum to at most
# N/1.2 + zones, which is N or less once N >= 6 x zones.
ALWAYS_FEASIBLE_PER_ZONE = 6
# The largest endpoint count a scenario takes (--scale N, a rollout's surge and
# unavailable): a scenario builds each endpoint and judges each count of a rollout, so
# 100,000,000 took minutes and gigabytes, or ran out of memory. 100,000 answers in a few
# seconds and is far above the endpoint count of any one Service in practice.
MAX_SCENARIO_COUNT = 100_000
# Zone-loss forecasts are made for clusters of at most this many zone labels. Each zone's
# view is the cluster without it, so their cost grows as zones x nodes: with a zone label
# per Node (some clusters have them), 10,000 Nodes once took 9 minutes and 24 GB. Beyond
# the cap no forecast is made, and every surface says so (`zone_loss_beyond_cap`).
MAX_ZONE_LOSS_ZONES = 100
# kube-proxy modes that keep a client's traffic on its node or in its zone.
LOCAL_MODES = frozenset({ProxyMode.PREFER_SAME_NODE, ProxyMode.PREFER_SAME_ZONE, ProxyMode.LOCAL})


class ScenarioError(ValueError):
    """A scenario that names something the cluster does not have, or cannot be applied."""


# -- the cluster a scenario changes ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cluster:
    """The engine's inputs, as a scenario sees them."""

    nodes: tuple[Node, ...]
    services: tuple[Service, ...]
    slices: tuple[EndpointSlice, ...]
    # behaviour §12: the Kubernetes versions and gates, before and after alike.
    profile: Profile = ASSUMED


@dataclass(frozen=True, slots=True)
class LoseZone:
    zone: str

    def describe(self) -> dict[str, str]:
        return {"lose-zone": self.zone}


@dataclass(frozen=True, slots=True)
class LoseNodes:
    names: tuple[str, ...]

    def describe(self) -> dict[str, str]:
        return {"lose-node": ",".join(self.names)}


@dataclass(frozen=True, slots=True)
class Scale:
    namespace: str
    name: str
    endpoints: int

    def describe(self) -> dict[str, str]:
        return {"scale": f"{self.namespace}/{self.name}={self.endpoints}"}


ScenarioStep = LoseZone | LoseNodes | Scale


def _without_endpoints(
    slices: Iterable[EndpointSlice], gone: Callable[[Endpoint], bool]
) -> tuple[EndpointSlice, ...]:
    """The slices minus the endpoints `gone` selects; untouched slices keep their identity."""
    kept: list[EndpointSlice] = []
    for endpoint_slice in slices:
        endpoints = tuple(e for e in endpoint_slice.endpoints if not gone(e))
        if len(endpoints) != len(endpoint_slice.endpoints):
            endpoint_slice = replace(endpoint_slice, endpoints=endpoints)  # noqa: PLW2901
        kept.append(endpoint_slice)
    return tuple(kept)


def lose_zone(cluster: Cluster, zone: str) -> Cluster:
    """Every Node of the zone goes, with every endpoint in the zone or on those Nodes."""
    if not any(node.zone == zone for node in cluster.nodes):
        known = sorted({node.zone for node in cluster.nodes if node.zone})
        raise ScenarioError(f"no node has zone {zone!r} (zones: {', '.join(known) or 'none'})")
    removed = {node.name for node in cluster.nodes if node.zone == zone}
    return replace(
        cluster,
        nodes=tuple(node for node in cluster.nodes if node.name not in removed),
        slices=_without_endpoints(
            cluster.slices,
            lambda endpoint: endpoint.zone == zone or endpoint.node_name in removed,
        ),
    )


def lose_nodes(cluster: Cluster, names: Sequence[str]) -> Cluster:
    """The Nodes go, with every endpoint whose nodeName names one of them."""
    known = {node.name for node in cluster.nodes}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ScenarioError(f"no such node: {', '.join(unknown)}")
    removed = set(names)
    return replace(
        cluster,
        nodes=tuple(node for node in cluster.nodes if node.name not in removed),
        slices=_without_endpoints(cluster.slices, lambda endpoint: endpoint.node_name in removed),
    )


def _zone_key(endpoint: Endpoint) -> str:
    return endpoint.zone or ""


def _scale_down(slices: Sequence[EndpointSlice], target: int) -> tuple[EndpointSlice, ...]:
    """Remove ready endpoints one at a time from the zone that has most (ties: first name)."""
    counted = counted_endpoints(slices)
    by_zone = Counter(_zone_key(endpoint) for endpoint in counted)
    remove_per_zone: Counter[str] = Counter()
    for _ in range(len(counted) - target):
        zone = min(by_zone, key=lambda z: (-by_zone[z], z))
        by_zone[zone] -= 1
        remove_per_zone[zone] += 1
    # Within a zone, the last endpoints in List order go first.
    doomed: set[int] = set()
    for endpoint in reversed(counted):
        zone = _zone_key(endpoint)
        if remove_per_zone[zone] > 0:
            remove_per_zone[zone] -= 1
            doomed.add(id(endpoint))
    return _without_endpoints(slices, lambda endpoint: id(endpoint) in doomed)


def _scale_up(
    slices: Sequence[EndpointSlice], target: int, nodes: Sequence[Node], service: Service
) -> tuple[EndpointSlice, ...]:
    """Add ready endpoints one at a time to the zone with fewest (ties: first name)."""
    nodes_by_zone: dict[str, list[str]] = {}
    for node in nodes:
        if node.ready and not node.control_plane and node.zone:
            nodes_by_zone.setdefault(node.zone, []).append(node.name)
    if not nodes_by_zone:
        raise ScenarioError(
            f"cannot scale {service.namespace}/{service.name} up: no Ready node has a zone"
        )
    counted = counted_endpoints(slices)
    by_zone = Counter(dict.fromkeys(nodes_by_zone, 0))
    by_zone.update(e.zone for e in counted if e.zone in nodes_by_zone)
    added: list[Endpoint] = []
    for index in range(target - len(counted)):
        zone = min(by_zone, key=lambda z: (by_zone[z], z))
        zone_nodes = sorted(nodes_by_zone[zone])
        node_name = zone_nodes[by_zone[zone] % len(zone_nodes)]
        by_zone[zone] += 1
        added.append(
            Endpoint(address=f"what-if-{index}", ready=True, zone=zone, node_name=node_name)
        )
    managed = next((i for i, s in enumerate(slices) if s.managed), None)
    if managed is None:
        template = slices[0]
        extra = EndpointSlice(
            namespace=template.namespace,
            name=f"{template.name}-what-if",
            service_name=template.service_name,
            address_type=template.address_type,
            managed=True,
            endpoints=tuple(added),
        )
        return (*slices, extra)
    grown = replace(slices[managed], endpoints=(*slices[managed].endpoints, *added))
    return (*slices[:managed], grown, *slices[managed + 1 :])


def scale(cluster: Cluster, namespace: str, name: str, endpoints: int) -> Cluster:
    """Set the Service's N to `endpoints` for each of its address types."""
    service = next((s for s in cluster.services if s.key == (namespace, name)), None)
    if service is None:
        raise ScenarioError(f"no such Service: {namespace}/{name}")
    if endpoints < 0:
        raise ScenarioError(f"cannot scale {namespace}/{name} to {endpoints} endpoints")
    own = [s for s in cluster.slices if (s.namespace, s.service_name) == service.key]
    if not own:
        raise ScenarioError(f"Service {namespace}/{name} has no EndpointSlices to scale")
    by_type: dict[str, list[EndpointSlice]] = {}
    for endpoint_slice in own:
        by_type.setdefault(endpoint_slice.address_type, []).append(endpoint_slice)
    replaced: dict[str, tuple[EndpointSlice, ...]] = {}
    for address_type, typed in by_type.items():
        current = len(counted_endpoints(typed))
        if endpoints < current:
            replaced[address_type] = _scale_down(typed, endpoints)
        elif endpoints > current:
            replaced[address_type] = _scale_up(typed, endpoints, cluster.nodes, service)
    if not replaced:
        return cluster
    others = tuple(
        s
        for s in cluster.slices
        if not ((s.namespace, s.service_name) == service.key and s.address_type in replaced)
    )
    return replace(cluster, slices=others + tuple(s for typed in replaced.values() for s in typed))


def apply_step(cluster: Cluster, step: ScenarioStep) -> Cluster:
    match step:
        case LoseZone(zone):
            return lose_zone(cluster, zone)
        case LoseNodes(names):
            return lose_nodes(cluster, names)
        case Scale(namespace, name, endpoints):
            return scale(cluster, namespace, name, endpoints)


def apply_scenario(cluster: Cluster, steps: Iterable[ScenarioStep]) -> Cluster:
    """The cluster after every step, applied in the order given."""
    for step in steps:
        cluster = apply_step(cluster, step)
    return cluster


# -- feasibility, margins and rollouts -------------------------------------------------------


class Feasibility:
    """Checks 1-4 of the allocation for one set of zone ratios, memoised per count.

    The memo is a value, not a global: it lives as long as the capacity it was made for.
    """

    __slots__ = ("_capacity", "_groups", "_margins", "_memo")

    def __init__(self, capacity: ClusterCapacity) -> None:
        self._capacity = capacity
        self._groups = ratio_groups(capacity)
        self._memo: dict[int, DisableReason | None] = {}
        # Margins depend on the count alone too: Services of one size share one.
        self._margins: dict[int, Margin] = {}

    @property
    def capacity(self) -> ClusterCapacity:
        return self._capacity

    def reason(self, endpoints: int) -> DisableReason | None:
        try:
            return self._memo[endpoints]
        except KeyError:
            reason = refusal_reason(self._capacity, endpoints, self._groups)
            self._memo[endpoints] = reason
            return reason

    def feasible(self, endpoints: int) -> bool:
        return self.reason(endpoints) is None

    def margin(self, count: int) -> Margin:
        """The endpoint margin of an enabled `auto` entry with `count` ready endpoints."""
        try:
            return self._margins[count]
        except KeyError:
            pass
        down = 0
        while count - down - 1 >= 0 and self.feasible(count - down - 1):
            down += 1
        up: float = math.inf
        for candidate in range(count + 1, self.always_feasible_from() + 1):
            if not self.feasible(candidate):
                up = candidate - 1 - count
                break
        margin = self._margins[count] = Margin(down=down, up=up)
        return margin

    def always_feasible_from(self) -> int:
        return ALWAYS_FEASIBLE_PER_ZONE * len(self._capacity.zone_ratios)

    def nearest(self, endpoints: int) -> NearestFeasible:
        """The same answer as allocation.nearest_feasible, through the memo."""
        if not self._capacity.sufficient:
            return NearestFeasible(None, None)
        below = next((n for n in range(endpoints - 1, 0, -1) if self.feasible(n)), None)
        above = next(
            (n for n in range(endpoints + 1, 10 * endpoints + 11) if self.feasible(n)), None
        )
        return NearestFeasible(below, above)


@dataclass(frozen=True, slots=True)
class Margin:
    """How many endpoints may go (down) or come (up), one at a time, before hints drop."""

    down: int
    # math.inf when no refused count lies above today's.
    up: float


def endpoint_margin(verdict: ServiceVerdict, feasibility: Feasibility) -> Margin | None:
    """Only an `auto` Service whose hints are enabled has a margin."""
    if verdict.mechanism is not Mechanism.AUTO or verdict.expected_state is not (
        ExpectedState.ENABLED
    ):
        return None
    return feasibility.margin(verdict.ready_endpoints)


def every_counted_endpoint_has_zone(verdict: ServiceVerdict) -> bool:
    return sum(verdict.zone_endpoints.values()) == verdict.ready_endpoints


def rollout_refused_counts(
    verdict: ServiceVerdict, feasibility: Feasibility, max_surge: int, max_unavailable: int
) -> tuple[int, ...]:
    """The ready counts from N-U to N+S whose expected state is disabled."""
    if verdict.mechanism is not Mechanism.AUTO:
        # traffic-distribution never refuses by count; `none` has nothing to refuse.
        return ()
    count = verdict.ready_endpoints
    zoned = every_counted_endpoint_has_zone(verdict)
    return tuple(
        n
        for n in range(max(count - max_unavailable, 0), count + max_surge + 1)
        if not feasibility.feasible(n) or not zoned
    )


# -- the converged result --------------------------------------------------------------------


def _converged_hints(
    endpoint: Endpoint, verdict: ServiceVerdict
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The (zone, node) hints the controller writes on the endpoint; None leaves it as is."""
    mechanism = verdict.mechanism
    if mechanism is Mechanism.AUTO and verdict.expected_state is ExpectedState.ENABLED:
        # Not-ready endpoints never carry hints under auto.
        return ((endpoint.zone,) if endpoint.ready is True and endpoint.zone else ()), ()
    if mechanism is Mechanism.TRAFFIC_DISTRIBUTION:
        if endpoint.ready is not True:
            return None
        same_node = verdict.service.traffic_distribution == "PreferSameNode"
        return (
            (endpoint.zone,) if endpoint.zone is not None else (),
            (endpoint.node_name,) if same_node and endpoint.node_name else (),
        )
    return (), ()


def _converged_slice(endpoint_slice: EndpointSlice, verdict: ServiceVerdict) -> EndpointSlice:
    """A managed slice with the hints the controller converges to for this verdict.

    Endpoints that already carry those hints, and a slice none of whose endpoints change,
    are kept as they are: in a converged cluster that is nearly every one.
    """
    originals = endpoint_slice.endpoints
    # Built only from the first endpoint that changes: most slices have none.
    endpoints: list[Endpoint] | None = None
    for position, endpoint in enumerate(originals):
        hints = _converged_hints(endpoint, verdict)
        if hints is None or (hints[0] == endpoint.zone_hints and hints[1] == endpoint.node_hints):
            if endpoints is not None:
                endpoints.append(endpoint)
            continue
        if endpoints is None:
            endpoints = list(originals[:position])
        endpoints.append(replace(endpoint, zone_hints=hints[0], node_hints=hints[1]))
    if endpoints is None:
        return endpoint_slice
    return replace(endpoint_slice, endpoints=tuple(endpoints))


def _writes_no_hints(verdict: ServiceVerdict) -> bool:
    """The controller removes every hint of this entry's managed slices."""
    return verdict.mechanism is not Mechanism.TRAFFIC_DISTRIBUTION and not _enabled_auto(verdict)


def converged_slices(
    verdict: ServiceVerdict, slices: Sequence[EndpointSlice]
) -> tuple[EndpointSlice, ...]:
    """The Service's slices once the controller has written the expected hints.

    Under `auto` the controller also moves hints into zones short of their minimum; every
    zone with a ratio gets at least one, which is all kube-proxy's mode depends on.
    """
    if not verdict.carries_hints and _writes_no_hints(verdict):
        # No hint to remove and none to write: the slices are converged already.
        return tuple(slices)
    converged = [_converged_slice(s, verdict) if s.managed else s for s in slices]
    if verdict.mechanism is Mechanism.AUTO and verdict.expected_state is ExpectedState.ENABLED:
        hinted = {zone for s in converged for e in s.endpoints for zone in e.zone_hints}
        missing = tuple(
            zone for zone in verdict.zones if zone not in hinted and _has_ratio(verdict.zones[zone])
        )
        if missing:
            converged = _add_hints(converged, missing)
    return tuple(converged)


def _has_ratio(zone: ZoneVerdict) -> bool:
    return zone.ratio is not None


def _add_hints(slices: list[EndpointSlice], zones: tuple[str, ...]) -> list[EndpointSlice]:
    """Hint the first hinted endpoint for the zones that got none (the controller's moves)."""
    for index, endpoint_slice in enumerate(slices):
        for position, endpoint in enumerate(endpoint_slice.endpoints):
            if endpoint_slice.managed and endpoint.zone_hints:
                moved = replace(endpoint, zone_hints=(*endpoint.zone_hints, *zones))
                endpoints = (
                    *endpoint_slice.endpoints[:position],
                    moved,
                    *endpoint_slice.endpoints[position + 1 :],
                )
                slices[index] = replace(endpoint_slice, endpoints=endpoints)
                return slices
    return slices


def converged_proxy_view(
    verdict: ServiceVerdict,
    slices: Sequence[EndpointSlice],
    nodes: ReadyNodes,
    behaviour: KubeProxyBehaviour = NEWEST_KUBE_PROXY,
) -> ProxyView:
    """Section 5's kube-proxy modes once the controller has converged.

    `slices` and `nodes` must be those the verdict was evaluated on: when the slices already
    carry the converged hints (nearly always in a settled cluster), the verdict's own
    kube-proxy view is the converged one and nothing is recomputed.
    """
    converged = converged_slices(verdict, slices)
    if all(after is before for after, before in zip(converged, slices, strict=True)):
        return verdict.proxy
    return proxy_view(verdict.service, verdict.address_type, converged, nodes, behaviour)


def routes_locally(view: ProxyView) -> bool:
    """Some client keeps its traffic on its node or in its zone."""
    return bool(view.same_node) or any(mode in LOCAL_MODES for mode in view.by_zone.values())


# -- before and after ------------------------------------------------------------------------


class Change(StrEnum):
    LOSES_HINTS = "loses-hints"
    GAINS_HINTS = "gains-hints"
    REASON_CHANGED = "reason-changed"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One entry's expected result, on one side of a scenario."""

    verdict: ServiceVerdict
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


# -- zone loss ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZoneLossView:
    """The cluster as it would be without one zone: computed once, shared by every Service."""

    zone: str
    # Nodes that go with the zone.
    removed_nodes: frozenset[str]
    nodes: ReadyNodes
    feasibility: Feasibility
    # kube-proxy's routings over `nodes`: entries of one hint shape share one.
    routes: KubeProxyRoutes
    # behaviour §12: the versions and gates the cluster without the zone is judged under.
    profile: Profile = ASSUMED


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
    behaviour = profile.kube_proxy_behaviour
    views = []
    for zone in zones:
        kept = [node for node in nodes if node.zone != zone]
        earlier = reusable.get(zone)
        views.append(
            ZoneLossView(
                zone=zone,
                removed_nodes=earlier.removed_nodes
                if earlier is not None
                else frozenset(node.name for node in nodes if node.zone == zone),
                nodes=earlier.nodes if earlier is not None else (zone_nodes := ready_nodes(kept)),
                feasibility=Feasibility(cluster_capacity(kept)),
                routes=earlier.routes
                if earlier is not None
                else KubeProxyRoutes(zone_nodes, behaviour),
                profile=profile,
            )
        )
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
    slices = _without_endpoints(outcome.slices, _survives_not(view))
    after = service_outcomes(
        verdict.service, slices, view.feasibility.capacity, view.nodes, view.profile
    )
    same_type = [o for o in after if o.verdict.address_type == verdict.address_type]
    return any(classify(outcome, o) is Change.LOSES_HINTS for o in same_type)


def _enabled_auto_loses_hints(counted: Sequence[Endpoint], view: ZoneLossView) -> bool:
    survives = _survives(view)
    return not view.feasibility.feasible(sum(1 for e in counted if survives(e)))


def _survivors(counted: Sequence[Endpoint], views: Sequence[ZoneLossView]) -> list[int]:
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


# -- the live exporter's per-entry answers -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class EntryForecast:
    """What one (Service, address type) entry's hints survive, under today's node view."""

    # None where no margin exists (not `auto`, or not enabled).
    margin: Margin | None
    # The zones whose loss would take the entry's hints away (`loses-hints`).
    zones_losing_hints: frozenset[str]
    # Enabled `auto` entries: per zone-loss view (aligned), the counted endpoints that
    # survive it. What a capacity change re-judges zone loss from, without the slices;
    # not part of the forecast's value.
    survivors: tuple[int, ...] = field(default=(), compare=False)
    # Entries without `auto`: the ready hints of today's converged slices, then, when it
    # routes locally, of what survives each zone-loss view (aligned). What a change of the
    # Ready nodes re-decides zone loss from, without the slices; not part of the value.
    converged_ready: tuple[HintSets, ...] = field(default=(), compare=False)


NO_FORECAST = EntryForecast(margin=None, zones_losing_hints=frozenset())


def _forecast(
    margin: Margin | None, zones: frozenset[str], converged_ready: tuple[HintSets, ...] = ()
) -> EntryForecast:
    # Most entries have neither: they share one object rather than hold one each (unless
    # they carry what a node change re-decides from).
    if margin is None and not zones and not converged_ready:
        return NO_FORECAST
    return EntryForecast(margin, zones, converged_ready=converged_ready)


def _converged_ready(
    verdict: ServiceVerdict,
    slices: Sequence[EndpointSlice],
    routes: KubeProxyRoutes,
    views: Sequence[ZoneLossView],
    ready: HintSets | None = None,
) -> tuple[HintSets, ...]:
    """Ready hints of the converged slices, then, if they route locally, of what survives
    each view: what `proxy_view` reads of `_without_endpoints(converged, ...)`.

    `ready`: the ready hints of `slices` themselves, when known (`EntryInputs`).
    """
    converged_today = converged_slices(verdict, slices)
    converged = [e for s in converged_today for e in s.endpoints]
    if ready is not None and all(c is s for c, s in zip(converged_today, slices, strict=True)):
        today = ready
    else:
        today = ready_hint_sets(converged)
    if not _routes_locally_with(verdict, today, routes):
        return (today,)
    survivors = []
    for view in views:
        kept = [
            e for e in converged if not (e.zone == view.zone or e.node_name in view.removed_nodes)
        ]
        # A zone without any of the entry's endpoints leaves today's hints: one shared object,
        # not a copy per zone (memory would grow as zones x endpoints).
        survivors.append(today if len(kept) == len(converged) else ready_hint_sets(kept))
    return (today, *survivors)


def _routes_locally_with(verdict: ServiceVerdict, ready: HintSets, routes: KubeProxyRoutes) -> bool:
    return routes_locally(routes.route_ready(verdict.service, verdict.address_type, ready)[1])


def _non_auto_forecast(
    verdict: ServiceVerdict,
    converged_ready: tuple[HintSets, ...],
    routes: KubeProxyRoutes,
    views: Sequence[ZoneLossView],
) -> EntryForecast | None:
    """Zone loss of an entry without `auto`, from its converged ready hints; None when
    they lack the views' hints this routing needs.

    Without `auto` the expected state never depends on capacity or count, so the change
    is decided by the converged routing alone: no re-evaluation needed. Each endpoint's
    converged hints depend on that endpoint only, so removing endpoints from today's
    converged slices is converging the slices that remain. No margin: it needs `auto`.
    """
    if not _routes_locally_with(verdict, converged_ready[0], routes):
        # Nothing local today: there is nothing to lose.
        return _forecast(None, frozenset(), converged_ready)
    if len(converged_ready) != len(views) + 1:
        return None
    losing = frozenset(
        view.zone
        for view, ready in zip(views, converged_ready[1:], strict=True)
        if not _routes_locally_with(verdict, ready, view.routes)
    )
    return _forecast(None, losing, converged_ready)


def _enabled_auto(verdict: ServiceVerdict) -> bool:
    return verdict.mechanism is Mechanism.AUTO and verdict.expected_state is ExpectedState.ENABLED


def _enabled_auto_forecast(
    margin: Margin | None, survivors: tuple[int, ...], views: Sequence[ZoneLossView]
) -> EntryForecast:
    """Zone loss of an enabled `auto` entry: feasibility of what survives each view."""
    losing = frozenset(
        view.zone
        for view, count in zip(views, survivors, strict=True)
        if not view.feasibility.feasible(count)
    )
    return EntryForecast(margin, losing, survivors)


def entry_forecast(
    verdict: ServiceVerdict,
    slices: Sequence[EndpointSlice],
    nodes: ReadyNodes,
    feasibility: Feasibility,
    views: Sequence[ZoneLossView],
    routes: KubeProxyRoutes | None = None,
    ready: HintSets | None = None,
) -> EntryForecast:
    """The entry's margin and zone loss, from its verdict and the slices it was evaluated on.

    `routes`: kube-proxy's routings over `nodes`, shared between entries. `ready`: the
    ready endpoints' hints of `slices` (`EntryInputs.endpoints.ready`), when known.

    An enabled `auto` entry needs no converged routing (zone loss is judged from the count
    through the shared memo), so the common case costs one pass over its endpoints; other
    entries build the converged view only when there are zones to lose.
    """
    margin = endpoint_margin(verdict, feasibility)
    if not views:
        return _forecast(margin, frozenset())
    if _enabled_auto(verdict):
        return _enabled_auto_forecast(
            margin, tuple(_survivors(counted_endpoints(slices), views)), views
        )
    if verdict.mechanism is not Mechanism.AUTO:
        if routes is None or routes.nodes is not nodes:
            routes = KubeProxyRoutes(nodes, _behaviour_of(views))
        forecast = _non_auto_forecast(
            verdict, _converged_ready(verdict, slices, routes, views, ready), routes, views
        )
        if forecast is None:  # pragma: no cover - _converged_ready gives every view's
            raise AssertionError(verdict.key)
        return forecast
    converged_today = converged_slices(verdict, slices)
    if all(c is s for c, s in zip(converged_today, slices, strict=True)):
        # The slices already carry the hints the controller converges to: the verdict's own
        # kube-proxy view, computed from the same slices and nodes, is the converged one.
        converged = verdict.proxy
    else:
        converged = proxy_view(
            verdict.service, verdict.address_type, converged_today, nodes, _behaviour_of(views)
        )
    if not routes_locally(converged):
        # Nothing local today: there is nothing to lose.
        return _forecast(margin, frozenset())
    outcome = Outcome(verdict, tuple(slices), converged)
    return _forecast(margin, zones_losing_hints(outcome, views))


def _behaviour_of(views: Sequence[ZoneLossView]) -> KubeProxyBehaviour:
    """The profile's kube-proxy, which the views of one node view share."""
    return views[0].profile.kube_proxy_behaviour if views else NEWEST_KUBE_PROXY


def depends_on_capacity(verdict: ServiceVerdict) -> bool:
    """Whether the entry's forecast can change when only CPU shares move.

    Without `auto` the expected state never depends on capacity: the margin is None and
    zone loss is decided by the converged routing over each view's Ready nodes.
    """
    return verdict.mechanism is Mechanism.AUTO


def service_forecasts(  # noqa: PLR0913 - the node view's shared values, passed in
    verdicts: Sequence[ServiceVerdict],
    slices: Sequence[EndpointSlice],
    nodes: ReadyNodes,
    feasibility: Feasibility,
    views: Sequence[ZoneLossView],
    previous: Sequence[EntryForecast] = (),
    *,
    same_slices: Sequence[EntryForecast] = (),
    routes: KubeProxyRoutes | None = None,
    inputs: Sequence[EntryInputs] = (),
) -> tuple[EntryForecast, ...]:
    """One forecast per verdict (aligned), each from the slices of its address type.

    `previous`, when given, are forecasts of the same entries (aligned) made on the same
    slices and Ready nodes, with views of the same zones and nodes, under another
    capacity: entries whose forecast does not depend on capacity keep theirs.
    `same_slices`, when given, are forecasts of the same entries made on the same slices
    with views of the same zones and removed nodes, whatever the Ready nodes and
    capacity: what they counted from the slices is re-decided, not counted again.
    `routes`: kube-proxy's routings over `nodes`, shared between entries. `inputs`: the
    entries' EntryInputs (aligned), when the caller has them: their hints are not
    gathered again.
    """
    if len(previous) != len(verdicts):
        previous = ()
    if len(same_slices) != len(verdicts):
        same_slices = previous
    if routes is None or routes.nodes is not nodes:
        routes = KubeProxyRoutes(nodes, _behaviour_of(views))
    by_type: dict[str, list[EndpointSlice]] | None = None
    forecasts = []
    for index, verdict in enumerate(verdicts):
        if previous and not depends_on_capacity(verdict):
            forecasts.append(previous[index])
            continue
        earlier = same_slices[index] if same_slices else None
        if earlier is not None and views:
            reused = _re_decided(verdict, earlier, feasibility, routes, views)
            if reused is not None:
                forecasts.append(reused)
                continue
        if by_type is None:
            by_type = {}
            for endpoint_slice in slices:
                by_type.setdefault(endpoint_slice.address_type, []).append(endpoint_slice)
        ready = inputs[index].endpoints.ready if len(inputs) == len(verdicts) else None
        forecasts.append(
            entry_forecast(
                verdict,
                by_type.get(verdict.address_type, ()),
                nodes,
                feasibility,
                views,
                routes,
                ready,
            )
        )
    return tuple(forecasts)


def _re_decided(
    verdict: ServiceVerdict,
    earlier: EntryForecast,
    feasibility: Feasibility,
    routes: KubeProxyRoutes,
    views: Sequence[ZoneLossView],
) -> EntryForecast | None:
    """The forecast from what `earlier` counted on the same slices; None if it lacks it."""
    if earlier.survivors and _enabled_auto(verdict):
        # What survives each zone's loss did not move: only its feasibility may have.
        margin = endpoint_margin(verdict, feasibility)
        return _enabled_auto_forecast(margin, earlier.survivors, views)
    if earlier.converged_ready and verdict.mechanism is not Mechanism.AUTO:
        return _non_auto_forecast(verdict, earlier.converged_ready, routes, views)
    return None


def forecast_zone_loss(
    forecasts: Iterable[EntryForecast], views: Sequence[ZoneLossView]
) -> dict[str, int]:
    """Per zone (every zone of the views, 0 included), how many of these entries would lose
    hints if it were lost: `zone_loss` from forecasts already made."""
    counts = dict.fromkeys((view.zone for view in views), 0)
    for forecast in forecasts:
        for zone in forecast.zones_losing_hints:
            if zone in counts:
                counts[zone] += 1
    return counts


def services_losing_hints(
    forecasts: Iterable[tuple[tuple[str, str], EntryForecast]], views: Sequence[ZoneLossView]
) -> dict[str, int]:
    """Per zone (every zone of the views, 0 included), how many Services (not address types)
    would lose hints if it were lost: what `explain` and the status page say in words."""
    losing: dict[str, set[tuple[str, str]]] = {view.zone: set() for view in views}
    for service, forecast in forecasts:
        for zone in forecast.zones_losing_hints:
            losing.setdefault(zone, set()).add(service)
    return {zone: len(services) for zone, services in sorted(losing.items())}
