"""The converged result: the slices and kube-proxy routing once the controller has written
the hints it should (behaviour section 11).

Answers about a scenario concern the *expected* result: observed hints are stale by
definition after a change that has not happened, so the converged routing is computed from
the hints the controller would write, not from the hints the slices carry today.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from exporter.engine.evaluate import EntryVerdict, ExpectedState, ZoneVerdict
from exporter.engine.kubeproxy import ProxyMode, ProxyView, ReadyNodes, proxy_view
from exporter.engine.mechanism import Mechanism
from exporter.engine.model import Endpoint, EndpointSlice
from exporter.engine.profile import NEWEST_KUBE_PROXY, KubeProxyBehaviour

# kube-proxy modes that keep a client's traffic on its node or in its zone.
LOCAL_MODES = frozenset({ProxyMode.PREFER_SAME_NODE, ProxyMode.PREFER_SAME_ZONE, ProxyMode.LOCAL})


def _converged_hints(
    endpoint: Endpoint, verdict: EntryVerdict
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


def _converged_slice(endpoint_slice: EndpointSlice, verdict: EntryVerdict) -> EndpointSlice:
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


def enabled_auto(verdict: EntryVerdict) -> bool:
    return verdict.mechanism is Mechanism.AUTO and verdict.expected_state is ExpectedState.ENABLED


def _writes_no_hints(verdict: EntryVerdict) -> bool:
    """The controller removes every hint of this entry's managed slices."""
    return verdict.mechanism is not Mechanism.TRAFFIC_DISTRIBUTION and not enabled_auto(verdict)


def converged_slices(
    verdict: EntryVerdict, slices: Sequence[EndpointSlice]
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
    verdict: EntryVerdict,
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
