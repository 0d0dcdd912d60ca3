"""The cluster's families: node capacity as the EndpointSlice controller counts it, the
Kubernetes version and the feature gates the rules assume (the same on every shard).
"""

from __future__ import annotations

from collections.abc import Iterator

from exporter.metrics.family import (
    GAUGE,
    Declarations,
    Sample,
    Scope,
    Scrape,
    from_scrape,
    one_sample,
)
from exporter.state.result import ClusterResult

_declare = Declarations()


def _capacity(state: ClusterResult) -> tuple[object, ...]:
    return (state.capacity,)


SUFFICIENT_NODE_INFO = _declare(
    "sufficient_node_info",
    GAUGE,
    Scope.CLUSTER,
    "1 when every Ready worker node has a zone label and allocatable CPU and at least "
    "two zones have CPU; 0 disables auto hints for every Service.",
    from_scrape(lambda scrape: one_sample(scrape.state.capacity.sufficient), reads=_capacity),
    same_on_every_shard=True,
)
ZONE_CPU_RATIO = _declare(
    "zone_cpu_ratio",
    GAUGE,
    Scope.CLUSTER,
    "The EndpointSlice controller's share of allocatable CPU for the zone "
    "(absent while node info is insufficient).",
    from_scrape(
        lambda scrape: (
            ((zone,), ratio) for zone, ratio in scrape.state.capacity.zone_ratios.items()
        ),
        reads=_capacity,
    ),
    labels=("zone",),
    same_on_every_shard=True,
)
ZONE_ALLOCATABLE_CPU_CORES = _declare(
    "zone_allocatable_cpu_cores",
    GAUGE,
    Scope.CLUSTER,
    "Allocatable CPU counted for the zone, in cores, rounded up to millicores "
    "(absent while node info is insufficient).",
    from_scrape(
        lambda scrape: (
            ((zone,), millicores / 1000)
            for zone, millicores in scrape.state.capacity.zone_millicores.items()
        ),
        reads=_capacity,
    ),
    labels=("zone",),
    same_on_every_shard=True,
)
NODE_MISSING_TOPOLOGY_INFO = _declare(
    "node_missing_topology_info",
    GAUGE,
    Scope.NODE,
    "1 for each Ready worker node that lacks a zone label or allocatable CPU "
    "(missing is zone or cpu); one such node disables auto hints cluster-wide.",
    from_scrape(
        lambda scrape: (
            ((problem.node, str(problem.missing)), 1.0)
            for problem in scrape.state.capacity.problems
        ),
        reads=_capacity,
    ),
    labels=("missing",),
    same_on_every_shard=True,
)


def _profile(state: ClusterResult) -> tuple[object, ...]:
    return (state.profile,)


CLUSTER_INFO = _declare(
    "cluster_info",
    GAUGE,
    Scope.CLUSTER,
    "1, labelled with the control plane's Kubernetes version the rules are evaluated under "
    "(empty when assumed; the emulated version of an API server started with "
    "--emulated-version), the binary's version beside it (empty unless emulated) and where "
    "it came from: flag, api (the API server's /version) or assumed (the newest semantics).",
    from_scrape(
        lambda scrape: [
            (
                (
                    scrape.state.profile.control_plane.version or "",
                    scrape.state.profile.control_plane.binary_version or "",
                    str(scrape.state.profile.control_plane.source),
                ),
                1.0,
            )
        ],
        reads=_profile,
    ),
    labels=("kubernetes_version", "binary_version", "source"),
    same_on_every_shard=True,
)


def _feature_gates(scrape: Scrape) -> Iterator[Sample]:
    profile = scrape.state.profile
    for component, part in (
        ("controller", profile.control_plane),
        ("kube-proxy", profile.kube_proxy),
    ):
        for gate, enabled in part.gates.items():
            yield (component, str(gate), part.stage(gate).label), float(enabled)


FEATURE_GATE_ENABLED = _declare(
    "feature_gate_enabled",
    GAUGE,
    Scope.CLUSTER,
    "1 when the feature gate is on for the component (controller: the control plane's "
    "EndpointSlice controller; kube-proxy), 0 when off, as the rules assume it; one series "
    "per gate that the component's version has, with its stage as the components' own "
    'kubernetes_feature_enabled labels it (ALPHA, BETA, or "" for GA).',
    from_scrape(_feature_gates, reads=_profile),
    labels=("component", "name", "stage"),
    same_on_every_shard=True,
)


FAMILIES = _declare.families
