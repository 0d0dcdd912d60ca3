"""Control planes that emulate older minors, and what SPEC section 12 says each must do.

kube-apiserver and kube-controller-manager v1.37.2 both take `--emulated-version` (1.34 to
1.37: component-base `compatibility` reaches back three minors) and `--feature-gates`.
Emulation changes gate defaults and locks; the gates a binary knows are its own: a gate
removed before 1.37 (ServiceTrafficDistribution, TopologyAwareHints: gone in 1.36) is
unknown to it at any emulated version.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tests.realcluster.controlplane import ControlPlaneSettings
from tests.realcluster.plans import SERVICE_NAME, ClusterPlan
from tests.realcluster.vectors import vector_plans

PREFER_SAME = "PreferSameTrafficDistribution"
ALL_VALUES = ("PreferClose", "PreferSameZone", "PreferSameNode")
BINARY_MINOR = 37
# Gates section 12 tables that no longer exist in the 1.37 binaries (removed in 1.36).
REMOVED_GATES = ("ServiceTrafficDistribution", "TopologyAwareHints")


@dataclass(frozen=True)
class Emulated:
    """One emulated control plane and what section 12 expects of it."""

    name: str
    settings: ControlPlaneSettings
    minor: int
    # PreferSameTrafficDistribution as each component runs it: (stage label, on).
    apiserver_gate: tuple[str, bool]
    controller_gate: tuple[str, bool]

    @property
    def admitted(self) -> tuple[str, ...]:
        """The trafficDistribution values the API server admits (validation.go)."""
        return ALL_VALUES if self.apiserver_gate[1] else ("PreferClose",)

    @property
    def honoured(self) -> tuple[str, ...]:
        """The values the controller treats as valid (reconciler.go
        validTrafficDistribution)."""
        return ALL_VALUES if self.controller_gate[1] else ("PreferClose",)

    @property
    def gate_flags(self) -> list[str]:
        """--feature-gates as the controller manager was given it: /version cannot say a
        gate was set, so an operator passes the exporter the same setting."""
        return [] if self.controller_gate[1] else ["--feature-gates", f"{PREFER_SAME}=false"]

    @property
    def profile(self) -> list[str]:
        """The exporter's flags for the controller's version and gates."""
        flags = ["--kubernetes-version", f"1.{self.minor}"]
        if not self.controller_gate[1]:
            flags += ["--feature-gates", f"{PREFER_SAME}=false"]
        return flags


def _gate_off() -> tuple[tuple[str, bool], ...]:
    return ((PREFER_SAME, False),)


# kubernetes_feature_enabled's stage label: GA is the empty string there
# (component-base featuregate: `GA = prerelease("")`), not "GA".
BETA_ON, GA_ON = ("BETA", True), ("", True)
EMULATED = (
    Emulated("1.34", ControlPlaneSettings(emulated_version="1.34"), 34, BETA_ON, BETA_ON),
    Emulated("1.35", ControlPlaneSettings(emulated_version="1.35"), 35, GA_ON, GA_ON),
    Emulated("1.36", ControlPlaneSettings(emulated_version="1.36"), 36, GA_ON, GA_ON),
    # The 1.33 behaviour: both components with the gate off.
    Emulated(
        "1.34-gate-off",
        ControlPlaneSettings(emulated_version="1.34", feature_gates=_gate_off()),
        34,
        ("BETA", False),
        ("BETA", False),
    ),
    # Skew in an upgrade: the API server admits PreferSameZone, the controller manager
    # (still with the gate off, as 1.33) does not honour it.
    Emulated(
        "1.34-controller-gate-off",
        ControlPlaneSettings(emulated_version="1.34", controller_manager_feature_gates=_gate_off()),
        34,
        ("BETA", True),
        ("BETA", False),
    ),
)  # fmt: skip


def refused(minor: int, gate: str, value: bool) -> str | None:  # noqa: FBT001
    """What a v1.37.2 component emulating 1.`minor` says of `--feature-gates gate=value`
    (component-base featuregate), None when it takes it."""
    if gate != PREFER_SAME:
        return f"unrecognized feature gate: {gate}"
    if minor >= 35 and not value:
        return f"cannot set feature gate {gate} to false, feature is locked to true"
    return None


def for_plane(plan: ClusterPlan, plane: Emulated) -> ClusterPlan:
    """The plan without what the plane's API server refuses, and without the vector's
    expected verdict where the plane's controller reads a Service otherwise than the
    newest semantics (the vectors assume them)."""
    services = []
    for service in plan.services:
        value = service.traffic_distribution
        if value is not None and value not in plane.admitted:
            continue
        if value is not None and value not in plane.honoured:
            service = dataclasses.replace(service, expected=None)  # noqa: PLW2901
        services.append(service)
    return dataclasses.replace(plan, name=f"{plan.name}-on-{plane.name}", services=tuple(services))


def version_sensitive_vectors() -> ClusterPlan:
    """The vectors' Services whose hints their trafficDistribution decides (zone and node
    hints), with the Nodes of their vectors: the plan without `auto`, narrowed."""
    (shared,) = [plan for plan in vector_plans() if plan.name == "vectors-without-auto"]
    services = tuple(s for s in shared.services if s.traffic_distribution is not None)
    prefixes = {service.name.split("-", 1)[0] for service in services}
    # The shared plan names its vectors in the order of their prefixes v0, v1, ...
    names = shared.origin.removeprefix("tests/conformance: ").split(", ")
    kept = [names[index] for index in sorted(int(prefix.removeprefix("v")) for prefix in prefixes)]
    owners = {(service.namespace, service.name) for service in services}
    used = {pod.node for service in services for pod in service.pods}
    return dataclasses.replace(
        shared,
        name="vectors-trafficdistribution",
        origin="tests/conformance: " + ", ".join(kept),
        # The Nodes that run an endpoint: the only ones trafficDistribution hints read.
        nodes=tuple(n for n in shared.nodes if n["metadata"]["name"] in used),
        services=services,
        slices=tuple(
            item
            for item in shared.slices
            if (item["metadata"]["namespace"], item["metadata"]["labels"].get(SERVICE_NAME))
            in owners
        ),
    )
