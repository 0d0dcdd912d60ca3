"""The live exporter's per-entry answers: each entry's endpoint margin and the zones whose
loss would take its hints away (behaviour section 11), made once per node view and
re-decided, not recounted, when only capacity or the Ready nodes move.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from exporter.engine.evaluate import EntryInputs, EntryVerdict, counted_endpoints
from exporter.engine.kubeproxy import KubeProxyRoutes, ReadyNodes, proxy_view
from exporter.engine.mechanism import Mechanism
from exporter.engine.model import EndpointSlice
from exporter.engine.profile import NEWEST_KUBE_PROXY, KubeProxyBehaviour
from exporter.engine.routing import HintSets, ready_hint_sets
from exporter.engine.whatif.converged import converged_slices, enabled_auto, routes_locally
from exporter.engine.whatif.feasibility import Feasibility, Margin, endpoint_margin
from exporter.engine.whatif.outcome import Outcome
from exporter.engine.whatif.zoneloss import ZoneLossView, surviving_counts, zones_losing_hints


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
    verdict: EntryVerdict,
    slices: Sequence[EndpointSlice],
    routes: KubeProxyRoutes,
    views: Sequence[ZoneLossView],
    ready: HintSets | None = None,
) -> tuple[HintSets, ...]:
    """Ready hints of the converged slices, then, if they route locally, of what survives
    each view: what `proxy_view` reads of `without_endpoints(converged, ...)`.

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


def _routes_locally_with(verdict: EntryVerdict, ready: HintSets, routes: KubeProxyRoutes) -> bool:
    return routes_locally(routes.route_ready(verdict.service, verdict.address_type, ready)[1])


def _non_auto_forecast(
    verdict: EntryVerdict,
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
    verdict: EntryVerdict,
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
    if enabled_auto(verdict):
        return _enabled_auto_forecast(
            margin, tuple(surviving_counts(counted_endpoints(slices), views)), views
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


def depends_on_capacity(verdict: EntryVerdict) -> bool:
    """Whether the entry's forecast can change when only CPU shares move.

    Without `auto` the expected state never depends on capacity: the margin is None and
    zone loss is decided by the converged routing over each view's Ready nodes.
    """
    return verdict.mechanism is Mechanism.AUTO


def service_forecasts(  # noqa: PLR0913 - the node view's shared values, passed in
    verdicts: Sequence[EntryVerdict],
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
    verdict: EntryVerdict,
    earlier: EntryForecast,
    feasibility: Feasibility,
    routes: KubeProxyRoutes,
    views: Sequence[ZoneLossView],
) -> EntryForecast | None:
    """The forecast from what `earlier` counted on the same slices; None if it lacks it."""
    if earlier.survivors and enabled_auto(verdict):
        # What survives each zone's loss did not move: only its feasibility may have.
        margin = endpoint_margin(verdict, feasibility)
        return _enabled_auto_forecast(margin, earlier.survivors, views)
    if earlier.converged_ready and verdict.mechanism is not Mechanism.AUTO:
        return _non_auto_forecast(verdict, earlier.converged_ready, routes, views)
    return None


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
