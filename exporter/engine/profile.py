"""behaviour §12: the Kubernetes versions and feature gates the rules are evaluated under.

A profile names the control plane's version and gates (sections 1, 3, 4) and kube-proxy's
(section 5 and the `kube-proxy` data plane), each with where it came from. Building one
from flags, the API server's /version or detection happens at the edges; this module turns
versions and gate settings into a profile, checks the settings as the components check
their own --feature-gates, and says what a profile changes. The gates themselves are data
(`exporter.engine.gates`), read by name; versions are parsed in `exporter.engine.versions`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.gates import GATES, FeatureSpec, Gate, Stage
from exporter.engine.model import Service
from exporter.engine.routing import hints_annotation_asks
from exporter.engine.versions import (
    NEWEST_MINOR,
    OLDEST_MINOR,
    ProfileError,
    ServerVersion,
    clamped,
)

__all__ = [
    "ASSUMED",
    "KNOWN_TRAFFIC_DISTRIBUTIONS",
    "KUBE_PROXY_1_29",
    "KUBE_PROXY_1_33",
    "NEWEST_KUBE_PROXY",
    "SAME_AS_NEWEST_FROM",
    "Component",
    "Gate",
    "KubeProxyBehaviour",
    "Notice",
    "Profile",
    "ProfileError",
    "ProfileFlags",
    "Source",
    "Stage",
    "build_profile",
    "kube_proxy_behaviour",
    "kube_proxy_effect",
    "notices_of",
]


class Source(StrEnum):
    """Where a component's version came from."""

    FLAG = "flag"
    API = "api"
    # kube-proxy only: the kube-proxy DaemonSet's image tag (data-plane detection).
    DETECTED = "detected"
    # kube-proxy only: taken to be the control plane's.
    CONTROL_PLANE = "control-plane"
    # Nothing known: the newest semantics.
    ASSUMED = "assumed"


# trafficDistribution values and the gates that make the controller accept them.
_VALUE_GATES: Mapping[str, tuple[Gate, ...]] = MappingProxyType(
    {
        "PreferClose": (Gate.SERVICE_TRAFFIC_DISTRIBUTION,),
        "PreferSameZone": (
            Gate.SERVICE_TRAFFIC_DISTRIBUTION,
            Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION,
        ),
        "PreferSameNode": (
            Gate.SERVICE_TRAFFIC_DISTRIBUTION,
            Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION,
        ),
    }
)
KNOWN_TRAFFIC_DISTRIBUTIONS = frozenset(_VALUE_GATES)
# The last controller release that hints a zoneless endpoint for zone "" under PreferClose.
_LAST_EMPTY_ZONE_HINTS = 32
# The first kube-proxy release that follows a zone hint for "" on a node without a zone label.
_ZONELESS_NODES_FROM = 33
# The first release of the topology-mode annotation's deprecation (its heuristic never went GA).
_TOPOLOGY_MODE_DEPRECATED_FROM = 33


@dataclass(frozen=True, slots=True)
class Component:
    """One component's version and gates, as the rules read them (gates by name)."""

    # The minor version as known (None when assumed), kept as given: older than
    # OLDEST_MINOR or newer than NEWEST_MINOR is evaluated at that end. For an API server
    # started with --emulated-version, the emulated minor.
    minor: int | None
    source: Source
    # The binary's minor when it emulates `minor`; None when it does not (or is not known).
    binary_minor: int | None = None
    # The --feature-gates settings this component takes, in Gate order.
    overrides: tuple[tuple[Gate, bool], ...] = ()

    @property
    def version(self) -> str | None:
        return f"1.{self.minor}" if self.minor is not None else None

    @property
    def binary_version(self) -> str | None:
        return f"1.{self.binary_minor}" if self.binary_minor is not None else None

    @property
    def evaluated_minor(self) -> int:
        """The minor whose rules apply: the supported range's ends outside it, the newest
        when assumed."""
        return NEWEST_MINOR if self.minor is None else clamped(self.minor)

    @property
    def evaluated_binary(self) -> int:
        """The binary's minor as evaluated: the gates it knows."""
        return self.evaluated_minor if self.binary_minor is None else clamped(self.binary_minor)

    def knows(self, gate: Gate) -> bool:
        """The binary recognises the gate in its --feature-gates."""
        return GATES[gate].known_to(self.evaluated_binary)

    def spec(self, gate: Gate) -> FeatureSpec | None:
        """The gate's spec as this component runs it; None where it is not available."""
        return GATES[gate].at(self.evaluated_minor) if self.knows(gate) else None

    def enabled(self, gate: Gate) -> bool:
        """The feature is on: the gate's value, or, where the binary has no such gate, what
        the code does without it (on once removed, off before it was added)."""
        if not self.knows(gate):
            return GATES[gate].without_gate(self.evaluated_binary)
        spec = self.spec(gate)
        if spec is None:
            return False
        return dict(self.overrides).get(gate, spec.default)

    @property
    def gates(self) -> Mapping[Gate, bool]:
        """Exactly the gates this component has (and the emulated version makes available)."""
        return MappingProxyType(
            {gate: self.enabled(gate) for gate in Gate if self.spec(gate) is not None}
        )

    def stage(self, gate: Gate) -> Stage:
        spec = self.spec(gate)
        if spec is None:
            raise KeyError(f"{self.describe('the component')} has no gate {gate}")
        return spec.stage

    def describe(self, name: str) -> str:
        """`Kubernetes 1.33` / `kube-proxy 1.32`; `... 1.34 or newer` when assumed;
        `Kubernetes 1.33, emulated by a 1.36 API server` when emulated."""
        if self.minor is None:
            return f"{name} 1.{SAME_AS_NEWEST_FROM} or newer"
        if self.binary_minor is not None:
            return f"{name} {self.version}, emulated by a {self.binary_version} API server"
        return f"{name} {self.version}"

    def notes(self, name: str) -> tuple[str, ...]:
        """What a reader must know about the version itself (outside the supported range)."""
        found = []
        for what, minor in ((name, self.minor), (f"{name}'s binary", self.binary_minor)):
            if minor is None or minor == clamped(minor):
                continue
            side = "older" if minor < OLDEST_MINOR else "newer"
            found.append(
                f"{what} 1.{minor} is {side} than 1.{clamped(minor)}: "
                f"evaluated as 1.{clamped(minor)}"
            )
        return tuple(found)


def _defaults_at(minor: int) -> tuple[bool, ...]:
    return tuple(Component(minor, Source.FLAG).enabled(gate) for gate in Gate)


# The first minor whose default gates behave as the newest: what "assumed" stands for.
SAME_AS_NEWEST_FROM = min(
    minor
    for minor in range(OLDEST_MINOR, NEWEST_MINOR + 1)
    if _defaults_at(minor) == _defaults_at(NEWEST_MINOR)
)


@dataclass(frozen=True, slots=True)
class KubeProxyBehaviour:
    """How a kube-proxy reads hints (section 5 and the rows of section 12): the one place
    that turns a kube-proxy's version and gates into its reading."""

    # TopologyAwareHints on: it uses hints at all (off: `cluster` everywhere).
    uses_hints: bool
    # ServiceTrafficDistribution off: zone hints only under a hints annotation that is not
    # off, and never on a node without a zone label (the 1.29 reading).
    needs_annotation: bool
    # PreferSameTrafficDistribution on: node hints are followed (section 5 step 2).
    reads_node_hints: bool
    # 1.33 and newer follow a zone hint for "" on a node without a zone label; 1.32 and
    # older never use zone hints on such a node.
    zoneless_nodes_use_hints: bool


def kube_proxy_behaviour(proxy: Component) -> KubeProxyBehaviour:
    return KubeProxyBehaviour(
        uses_hints=proxy.enabled(Gate.TOPOLOGY_AWARE_HINTS),
        needs_annotation=not proxy.enabled(Gate.SERVICE_TRAFFIC_DISTRIBUTION),
        reads_node_hints=proxy.enabled(Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION),
        zoneless_nodes_use_hints=proxy.evaluated_minor >= _ZONELESS_NODES_FROM,
    )


# The fixed data plane ids of section 10 and 12: a kube-proxy of that release, its defaults.
NEWEST_KUBE_PROXY = kube_proxy_behaviour(Component(None, Source.ASSUMED))
KUBE_PROXY_1_33 = kube_proxy_behaviour(Component(33, Source.FLAG))
KUBE_PROXY_1_29 = kube_proxy_behaviour(Component(29, Source.FLAG))


@dataclass(frozen=True, slots=True)
class Profile:
    """The Kubernetes the verdicts are computed under (behaviour §12): the control plane's and
    kube-proxy's versions and gates, and what they accept."""

    control_plane: Component
    kube_proxy: Component

    def accepts(self, traffic_distribution: str | None) -> bool:
        """The controller treats the value as valid (mechanism traffic-distribution)."""
        return traffic_distribution in _accepted(self.control_plane)

    def unsupported(self, traffic_distribution: str | None) -> bool:
        """A known value this control plane does not accept (traffic-distribution-unsupported)."""
        return traffic_distribution in _VALUE_GATES and not self.accepts(traffic_distribution)

    @property
    def topology_cache(self) -> bool:
        """The controller keeps a topology cache: `auto` hints are written (TopologyAwareHints)."""
        return self.control_plane.enabled(Gate.TOPOLOGY_AWARE_HINTS)

    @property
    def writes_empty_zone_hints(self) -> bool:
        """Controller 1.30-1.32: under PreferClose, a ready endpoint without a zone gets a
        zone hint for "" (the endpointslice library stopped writing these in 1.33)."""
        return self.control_plane.evaluated_minor <= _LAST_EMPTY_ZONE_HINTS

    @property
    def prefer_close_deprecated(self) -> bool:
        """PreferClose is an alias of PreferSameZone, which recent API servers warn about."""
        return self.control_plane.enabled(Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION)

    @property
    def topology_mode_deprecated(self) -> bool:
        return self.control_plane.evaluated_minor >= _TOPOLOGY_MODE_DEPRECATED_FROM

    @property
    def kube_proxy_behaviour(self) -> KubeProxyBehaviour:
        return kube_proxy_behaviour(self.kube_proxy)

    def notes(self) -> tuple[str, ...]:
        """What a reader must know about the profile itself (versions outside 1.29-1.37)."""
        return (*self.control_plane.notes("Kubernetes"), *self.kube_proxy.notes("kube-proxy"))


@functools.lru_cache(maxsize=64)
def _accepted(control_plane: Component) -> frozenset[str]:
    """The trafficDistribution values this controller accepts (read for every Service)."""
    return frozenset(
        value
        for value, gates in _VALUE_GATES.items()
        if all(control_plane.enabled(gate) for gate in gates)
    )


ASSUMED = Profile(Component(None, Source.ASSUMED), Component(None, Source.ASSUMED))


def _unrecognized(gate: Gate, control_plane: Component, kube_proxy: Component) -> ProfileError:
    """The components' own "unrecognized feature gate", with when the gate existed."""
    spec = GATES[gate]
    if spec.without_gate(control_plane.evaluated_binary):
        when = f"removed in Kubernetes 1.{spec.removed_in}"
    else:
        when = f"added in Kubernetes 1.{spec.added_in}"
    if control_plane.minor is None:
        detail = f"{when}; no --kubernetes-version: the newest semantics are assumed"
    elif control_plane.binary_minor is not None or kube_proxy.minor != control_plane.minor:
        span = f"added in Kubernetes 1.{spec.added_in}" + (
            f", removed in 1.{spec.removed_in}" if spec.removed_in is not None else ""
        )
        detail = (
            f"{span}: neither {control_plane.describe('Kubernetes')} nor "
            f"{kube_proxy.describe('kube-proxy')} has it"
        )
    else:
        detail = when
    return ProfileError(f"--feature-gates: unrecognized feature gate: {gate} ({detail})")


def _refused(gate: Gate, part: Component, name: str, *, value: bool) -> str | None:
    """Why the component refuses `gate=value` (as component-base words it); None if it takes it."""
    spec = part.spec(gate)
    setting = f"cannot set feature gate {gate} to {str(value).lower()}"
    if spec is None:
        return (
            f"{setting}, feature is not available in {part.describe(name)} "
            f"(added in Kubernetes 1.{GATES[gate].added_in})"
        )
    if spec.locked and spec.default != value:
        # An assumed version is the newest one, not "1.34 or newer": the lock may be younger.
        where = (
            part.describe(name)
            if part.minor is not None
            else f"{name} 1.{part.evaluated_minor}, the newest semantics, assumed without "
            "--kubernetes-version"
        )
        return (
            f"{setting}, feature is locked to {str(spec.default).lower()} in "
            f"{where} ({spec.stage} and locked from 1.{GATES[gate].locked_from})"
        )
    return None


def build_profile(
    kubernetes_minor: int | None,
    kubernetes_source: Source,
    kube_proxy_minor: int | None = None,
    kube_proxy_source: Source | None = None,
    gates: Mapping[Gate, bool] | None = None,
    *,
    binary_minor: int | None = None,
    lenient: bool = False,
) -> Profile:
    """The profile of section 12's sources, first that applies having been chosen by the caller.

    kube-proxy without a version of its own takes the control plane's (source
    `control-plane`, or `assumed` when that is assumed). `gates` apply to each component
    whose version has them, checked as the components check their own flag: ProfileError
    for a gate neither has, one not yet available, or one set against the value its version
    locks. `lenient` skips such settings instead (a live exporter whose cluster was upgraded
    under a flag keeps running, and says so in its log).
    """
    if kubernetes_minor is None:
        kubernetes_source, binary_minor = Source.ASSUMED, None
    if binary_minor == kubernetes_minor:
        binary_minor = None
    control_plane = Component(kubernetes_minor, kubernetes_source, binary_minor)
    if kube_proxy_minor is None:
        kube_proxy_minor = kubernetes_minor
        kube_proxy_source = Source.ASSUMED if kubernetes_minor is None else Source.CONTROL_PLANE
    kube_proxy = Component(kube_proxy_minor, kube_proxy_source or Source.FLAG)
    parts = (control_plane, kube_proxy)
    taken: tuple[dict[Gate, bool], dict[Gate, bool]] = ({}, {})
    for gate in Gate:
        if gate not in (gates or {}):
            continue
        value = (gates or {})[gate]
        holders = [index for index, part in enumerate(parts) if part.knows(gate)]
        if not holders and not lenient:
            raise _unrecognized(gate, control_plane, kube_proxy)
        refusals: list[tuple[Component, str]] = []
        for index in holders:
            refusal = _refused(gate, parts[index], ("Kubernetes", "kube-proxy")[index], value=value)
            if refusal is None:
                taken[index][gate] = value
            else:
                refusals.append((parts[index], refusal))
        if refusals and not lenient:
            # Named: the component whose version was given (kube-proxy's flag beside an
            # assumed control plane), before one whose version is assumed.
            refusals.sort(key=lambda found: found[0].minor is None)
            raise ProfileError(f"--feature-gates: {refusals[0][1]}")
    return Profile(
        Component(kubernetes_minor, kubernetes_source, binary_minor, tuple(taken[0].items())),
        Component(kube_proxy.minor, kube_proxy.source, None, tuple(taken[1].items())),
    )


@dataclass(frozen=True, slots=True)
class ProfileFlags:
    """The profile flags as parsed; a version the flags do not give is None."""

    kubernetes_minor: int | None = None
    kube_proxy_minor: int | None = None
    gates: Mapping[Gate, bool] = field(default_factory=dict)

    def profile(
        self,
        server: ServerVersion | None = None,
        kube_proxy_detected: int | None = None,
        *,
        lenient: bool = False,
    ) -> Profile:
        """Section 12's sources, first that applies: flags, then the cluster, else assumed.

        ProfileError when a gate setting is one the components would refuse.
        """
        minor: int | None
        binary: int | None = None
        if self.kubernetes_minor is not None:
            minor, source = self.kubernetes_minor, Source.FLAG
        elif server is not None:
            minor, binary, source = server.minor, server.binary_minor, Source.API
        else:
            minor, source = None, Source.ASSUMED
        proxy_minor, proxy_source = self.kube_proxy_minor, Source.FLAG
        if proxy_minor is None and kube_proxy_detected is not None:
            proxy_minor, proxy_source = kube_proxy_detected, Source.DETECTED
        return build_profile(
            minor,
            source,
            proxy_minor,
            proxy_source,
            self.gates,
            binary_minor=binary,
            lenient=lenient,
        )


class Notice(StrEnum):
    """Shown and reported, never a problem: no exit status, no alert."""

    PREFER_CLOSE_DEPRECATED = "prefer-close-deprecated"
    TOPOLOGY_MODE_DEPRECATED = "topology-mode-deprecated"

    @property
    def text(self) -> str:
        return _NOTICE_TEXTS[self]


_NOTICE_TEXTS = {
    Notice.PREFER_CLOSE_DEPRECATED: (
        "trafficDistribution: PreferClose is deprecated where PreferSameZone is accepted "
        "(the API server warns on it): PreferSameZone means the same; keep PreferClose only "
        "while a control plane of 1.31-1.33 must read it"
    ),
    Notice.TOPOLOGY_MODE_DEPRECATED: (
        "the topology-mode annotation (as the older topology-aware-hints) is deprecated since "
        "Kubernetes 1.33, its heuristic never went GA; its replacement, trafficDistribution: "
        "PreferSameZone (1.34+), has no overload guard: a zone with few endpoints takes its "
        "clients' whole load"
    ),
}
_NO_NOTICES: frozenset[Notice] = frozenset()


def notices_of(service: Service, *, auto: bool, profile: Profile) -> frozenset[Notice]:
    """The notices of a Service whose mechanism is `auto` or not, under `profile`."""
    found = set()
    if service.traffic_distribution == "PreferClose" and profile.prefer_close_deprecated:
        found.add(Notice.PREFER_CLOSE_DEPRECATED)
    if auto and profile.topology_mode_deprecated:
        found.add(Notice.TOPOLOGY_MODE_DEPRECATED)
    return frozenset(found) if found else _NO_NOTICES


def kube_proxy_effect(service: Service, profile: Profile) -> str | None:
    """Why this profile's kube-proxy routes the Service otherwise than the newest one would.

    None when the profile does not change kube-proxy's reading of the Service.
    """
    traffic_distribution = service.traffic_distribution
    behaviour = profile.kube_proxy_behaviour
    name = profile.kube_proxy.describe("kube-proxy")
    if not behaviour.uses_hints:
        return _hints_gate_off_effect(service, name)
    if behaviour.needs_annotation:
        if traffic_distribution is not None and not hints_annotation_asks(service):
            return (
                f"trafficDistribution needs kube-proxy 1.31 or the ServiceTrafficDistribution "
                f"gate: {name} reads zone hints only under a topology-mode annotation, and "
                "routes this Service cluster-wide"
            )
        if traffic_distribution == "PreferSameNode":
            return (
                f"PreferSameNode needs kube-proxy 1.34 or the PreferSameTrafficDistribution "
                f"gate: {name} never reads node hints"
            )
        return None
    if traffic_distribution == "PreferSameNode" and not behaviour.reads_node_hints:
        return (
            "PreferSameNode needs kube-proxy 1.34 or the PreferSameTrafficDistribution gate: "
            f"{name} routes this Service same-zone"
        )
    return None


def _hints_gate_off_effect(service: Service, name: str) -> str | None:
    if service.traffic_distribution is None and not hints_annotation_asks(service):
        return None
    return (
        f"{name} runs with the TopologyAwareHints gate off: it uses no hints, and routes "
        "this Service cluster-wide"
    )
