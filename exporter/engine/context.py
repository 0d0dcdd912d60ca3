"""What every entry's evaluation of one node view shares: one value, built in one place.

A node view is the cluster's capacity, its Ready nodes and its clients (behaviour §13)
under one profile and one list of data planes. Its entries share three memos: the
judgements of the capacity, kube-proxy's routings over the Ready nodes and the cross-zone
shares of the clients. They are made here, for exactly the view they sit in, so that the
evaluation functions take the context and never check that a memo fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from exporter.engine.capacity import ClusterCapacity, cluster_capacity
from exporter.engine.crosszone import NO_CLIENTS, Clients, CrossZones
from exporter.engine.judgement import Judgements
from exporter.engine.kubeproxy import KubeProxyRoutes, ReadyNodes
from exporter.engine.model import Node
from exporter.engine.profile import ASSUMED, Profile
from exporter.engine.routing import DataPlane

DEFAULT_DATAPLANES = (DataPlane.KUBE_PROXY,)


def ready_nodes(nodes: Iterable[Node]) -> ReadyNodes:
    return ReadyNodes.from_pairs((node.name, node.zone or "") for node in nodes if node.ready)


@dataclass(frozen=True, slots=True)
class NodeContext:
    """One node view and the memos its entries share; build it with `node_context` or
    `context_of` (the memos are made for these capacity, nodes and clients)."""

    capacity: ClusterCapacity
    nodes: ReadyNodes
    # behaviour §13's clients: Ready nodes with a zone and CPU, weighted by CPU.
    clients: Clients
    # behaviour §12: the versions and gates; entry inputs must be made under the same.
    profile: Profile
    # behaviour §10: the data planes whose routing each verdict carries, in this order.
    dataplanes: tuple[DataPlane, ...]
    # Judgements of `capacity`, shared by entries of one shape.
    judgements: Judgements
    # kube-proxy's routings over `nodes` by the profile's kube-proxy (computed whether
    # kube-proxy is configured or not: section 5's proxy modes read it).
    routes: KubeProxyRoutes
    # Cross-zone shares weighed by `clients`, shared by shape.
    cross_zones: CrossZones

    def succeeded_by(
        self, capacity: ClusterCapacity, nodes: ReadyNodes, clients: Clients, profile: Profile
    ) -> NodeContext:
        """The context of the next node view, with the same data planes: each memo of this
        one is kept where what it was made for is the same object (and kube-proxy's
        behaviour is the same), so entries of both views share it."""
        behaviour = profile.kube_proxy_behaviour
        return NodeContext(
            capacity=capacity,
            nodes=nodes,
            clients=clients,
            profile=profile,
            dataplanes=self.dataplanes,
            judgements=self.judgements
            if self.judgements.capacity is capacity
            else Judgements(capacity),
            routes=self.routes
            if self.routes.serves(nodes, behaviour)
            else KubeProxyRoutes(nodes, behaviour),
            cross_zones=self.cross_zones
            if self.cross_zones.clients is clients
            else CrossZones(clients),
        )


def context_of(
    capacity: ClusterCapacity,
    nodes: ReadyNodes,
    *,
    clients: Clients = NO_CLIENTS,
    dataplanes: Sequence[DataPlane] = DEFAULT_DATAPLANES,
    profile: Profile = ASSUMED,
) -> NodeContext:
    """A context with fresh memos for a view already computed. Without `clients` no client
    has a cross-zone share (what-if outcomes do not weigh them)."""
    return NodeContext(
        capacity=capacity,
        nodes=nodes,
        clients=clients,
        profile=profile,
        dataplanes=tuple(dataplanes),
        judgements=Judgements(capacity),
        routes=KubeProxyRoutes(nodes, profile.kube_proxy_behaviour),
        cross_zones=CrossZones(clients),
    )


def node_context(
    nodes: Iterable[Node],
    dataplanes: Sequence[DataPlane] = DEFAULT_DATAPLANES,
    profile: Profile = ASSUMED,
) -> NodeContext:
    """The context of these Nodes: their capacity, Ready nodes and clients."""
    node_list = tuple(nodes)
    return context_of(
        cluster_capacity(node_list),
        ready_nodes(node_list),
        clients=Clients.of(node_list),
        dataplanes=dataplanes,
        profile=profile,
    )
