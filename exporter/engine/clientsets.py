"""behaviour §13: the endpoints a client spreads its traffic over, per routing and data plane.

Each data plane's rule (`exporter.engine.dataplanes`) declares beside its routing what its
`same-zone`, `same-node`, `mixed` and `cluster` clients get; `Given` builds those sets for
one (data plane, Service entry), for the cross-zone share (`exporter.engine.crosszone`).
"""

from __future__ import annotations

from collections.abc import Sequence

from exporter.engine.dataplanes import DATA_PLANES, NodeSet, ZoneSet, usable_endpoints
from exporter.engine.model import Endpoint
from exporter.engine.routing import DataPlane, Routing, ServiceEndpoints, serving_terminating

_NO_ENDPOINTS: tuple[Endpoint, ...] = ()


class Given:
    """behaviour §13: the endpoints a client gets under each routing of one data plane.

    Built per (data plane, Service entry) from the rule's own declarations (`same_zone`,
    `same_node`, `mixed`), so a rule is stated in one place. The per-node and per-zone
    groupings are made on first use, once, and cost one pass over R.
    """

    __slots__ = (
        "_by_node",
        "_by_node_hint",
        "_by_zone_set",
        "_cluster",
        "_endpoints",
        "_entry",
        "_fallback",
        "fallback",
        "usable",
    )

    @property
    def same_zone(self) -> ZoneSet:
        return self._entry.same_zone

    @property
    def cluster_narrowed(self) -> bool:
        """`cluster` gives a client a subset of R that depends on its zone (memo keys)."""
        return self._cluster is not None

    def __init__(self, dataplane: DataPlane, endpoints: ServiceEndpoints) -> None:
        self._entry = DATA_PLANES[dataplane]
        self._endpoints = endpoints
        self.usable = usable_endpoints(dataplane, endpoints)
        # No usable endpoint anywhere: what `cluster` gives instead where the data plane
        # falls back (kube-proxy: every serving terminating endpoint); empty otherwise.
        self.fallback: tuple[Endpoint, ...] = (
            tuple(e for e in endpoints.unique if serving_terminating(e))
            if not self.usable and self._entry.no_ready_fallback
            else _NO_ENDPOINTS
        )
        cluster = self._entry.cluster
        self._cluster = cluster(endpoints) if cluster is not None else None
        self._by_node: dict[str, list[Endpoint]] | None = None
        self._by_node_hint: dict[str, list[Endpoint]] | None = None
        self._by_zone_set: dict[str, list[Endpoint]] | None = None
        self._fallback: dict[str, list[Endpoint]] | None = None

    def endpoints(self, routing: Routing, zone: str, node: str | None) -> Sequence[Endpoint]:
        """What a client on `node` in `zone` spreads its traffic over; empty for none.

        `node` matters only for `same-node` and `local`; without it they give nothing.
        """
        if routing is Routing.CLUSTER:
            return self.fallback or self.usable if self._cluster is None else self._cluster(zone)
        if routing is Routing.SAME_ZONE:
            return self._zone_sets().get(zone, _NO_ENDPOINTS)
        if routing is Routing.LOCAL:
            return self._local(node or "")
        if routing is Routing.SAME_NODE:
            nodes = (
                self._on_node()
                if self._entry.same_node is NodeSet.ON_NODE
                else (self._node_hinted())
            )
            return nodes.get(node or "", _NO_ENDPOINTS)
        if routing is Routing.MIXED and self._entry.mixed is not None:
            return self._entry.mixed(self._endpoints, zone)
        return _NO_ENDPOINTS

    def _on_node(self) -> dict[str, list[Endpoint]]:
        if self._by_node is None:
            self._by_node = {}
            for endpoint in self.usable:
                if endpoint.node_name:
                    self._by_node.setdefault(endpoint.node_name, []).append(endpoint)
        return self._by_node

    def _local(self, node: str) -> Sequence[Endpoint]:
        """internalTrafficPolicy Local: the node's own usable endpoints, else (where the data
        plane falls back) its serving terminating ones, as section 10 picks them."""
        own = self._on_node().get(node)
        if own:
            return own
        if not self._entry.local_terminating_fallback:
            return _NO_ENDPOINTS
        return self._serving_terminating().get(node, _NO_ENDPOINTS)

    def _serving_terminating(self) -> dict[str, list[Endpoint]]:
        if self._fallback is None:
            self._fallback = {}
            for endpoint in self._endpoints.unique:
                if endpoint.node_name and serving_terminating(endpoint):
                    self._fallback.setdefault(endpoint.node_name, []).append(endpoint)
        return self._fallback

    def _node_hinted(self) -> dict[str, list[Endpoint]]:
        if self._by_node_hint is None:
            self._by_node_hint = {}
            for endpoint in self.usable:
                for node in set(endpoint.node_hints):
                    self._by_node_hint.setdefault(node, []).append(endpoint)
        return self._by_node_hint

    def _zone_sets(self) -> dict[str, list[Endpoint]]:
        if self._by_zone_set is None:
            self._by_zone_set = {}
            located = self._entry.same_zone is ZoneSet.LOCATED
            for endpoint in self.usable:
                zones = (endpoint.zone,) if located else set(endpoint.zone_hints)
                for zone in zones:
                    if zone:
                        self._by_zone_set.setdefault(zone, []).append(endpoint)
        return self._by_zone_set
