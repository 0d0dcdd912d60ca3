"""The engine's inputs: the few fields of Nodes, Services and EndpointSlices the rules read.

Everything here is immutable. Decoding from Kubernetes JSON happens at the edges
(`exporter.sources.decode`); the engine never sees a raw object.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from exporter.vocabulary import ServiceKey

ZONE_LABEL = "topology.kubernetes.io/zone"
CONTROL_PLANE_LABELS = (
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
)
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
ENDPOINTSLICE_CONTROLLER = "endpointslice-controller.k8s.io"
DEPRECATED_HINTS_ANNOTATION = "service.kubernetes.io/topology-aware-hints"
TOPOLOGY_MODE_ANNOTATION = "service.kubernetes.io/topology-mode"
# Istio's own routing preference, read when spec.trafficDistribution is unset or unknown.
ISTIO_TRAFFIC_DISTRIBUTION_ANNOTATION = "networking.istio.io/traffic-distribution"


@dataclass(frozen=True, slots=True)
class Node:
    """A Node as the rules read it: name, zone, allocatable CPU, readiness and role."""

    name: str
    # None when the zone label is absent, "" when it is present but empty.
    zone: str | None
    # Exact allocatable CPU in cores; None when absent. Exact so that sums match upstream.
    allocatable_cpu: Fraction | None
    ready: bool
    control_plane: bool


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One endpoint of a slice, its conditions kept as written (None where absent): each data
    plane reads absent values differently."""

    # addresses[0]: kube-proxy deduplicates on it. None if the endpoint lists no address.
    address: str | None
    # conditions.ready as written: the controller wants True, kube-proxy only rejects False.
    ready: bool | None
    zone: str | None
    node_name: str | None
    zone_hints: tuple[str, ...] = ()
    node_hints: tuple[str, ...] = ()
    # conditions.terminating as written: Calico eBPF still routes to terminating endpoints.
    terminating: bool | None = None
    # conditions.serving as written: under internalTrafficPolicy Local, kube-proxy falls
    # back to a node's serving terminating endpoints (absent counts as serving, as there).
    serving: bool | None = None


@dataclass(frozen=True, slots=True)
class EndpointSlice:
    """An EndpointSlice as the rules read it: its Service, address type, whether the controller
    manages it, and its endpoints."""

    namespace: str
    name: str
    # kubernetes.io/service-name label; None for slices that belong to no Service.
    service_name: str | None
    address_type: str
    # Managed by the EndpointSlice controller, i.e. counted for allocation.
    managed: bool
    endpoints: tuple[Endpoint, ...]


@dataclass(frozen=True, slots=True)
class Service:
    """A Service as the rules read it: the annotations and spec fields that ask for topology and
    those that decide which data planes route it."""

    namespace: str
    name: str
    # The two annotation values the controller reads; None when the key is absent.
    deprecated_hints_annotation: str | None
    topology_mode_annotation: str | None
    traffic_distribution: str | None
    internal_traffic_policy: str | None
    type: str
    # None for Services without a cluster IP field; "None" for headless ones.
    cluster_ip: str | None
    # The networking.istio.io/traffic-distribution annotation; None when absent.
    istio_traffic_distribution: str | None = None
    # spec.selector is set (and not empty): the EndpointSlice controller makes its slices.
    selects: bool = True

    @property
    def key(self) -> ServiceKey:
        return (self.namespace, self.name)

    @property
    def proxied(self) -> bool:
        """kube-proxy programs neither headless nor ExternalName Services."""
        return self.type != "ExternalName" and self.cluster_ip != "None"

    @property
    def controller_synced(self) -> bool:
        """The EndpointSlice controller syncs it: it has a selector and is not ExternalName
        (syncService returns early otherwise; its slices, if any, are made out of band)."""
        return self.type != "ExternalName" and self.selects
