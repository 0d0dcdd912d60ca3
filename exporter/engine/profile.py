"""behaviour §12: the Kubernetes versions and feature gates the rules are evaluated under.

A profile names the control plane's version and gates (sections 1, 3, 4) and kube-proxy's
(section 5 and the `kube-proxy` data plane), each with where it came from. Building one
from flags, the API server's /version or detection happens at the edges; this module only
turns versions and gate overrides into a profile, and says what a profile changes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.model import Service
from exporter.engine.routing import hints_annotation_asks


class Gate(StrEnum):
    SERVICE_TRAFFIC_DISTRIBUTION = "ServiceTrafficDistribution"
    PREFER_SAME_TRAFFIC_DISTRIBUTION = "PreferSameTrafficDistribution"


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


# Versions older than this are evaluated as this one (the table starts here).
OLDEST_MINOR = 29
# The first minor with both gates on by default: what "assumed" means.
NEWEST_MINOR = 34
# The minor from which a gate is locked to its default (cannot be set against it).
LOCKED_FROM: Mapping[Gate, int] = MappingProxyType(
    {Gate.SERVICE_TRAFFIC_DISTRIBUTION: 33, Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION: 35}
)
# The first minor where each gate is on by default.
_ON_BY_DEFAULT_FROM: Mapping[Gate, int] = MappingProxyType(
    {Gate.SERVICE_TRAFFIC_DISTRIBUTION: 31, Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION: 34}
)
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
_VERSION = re.compile(r"^v?1\.(\d+)(?:\.\d+\S*)?$")


class ProfileError(ValueError):
    """A version or gate setting that cannot be used; the message is one line."""


def default_gates(minor: int | None) -> Mapping[Gate, bool]:
    """Both gates' defaults at a minor version (None: the newest, both on)."""
    return MappingProxyType(
        {gate: minor is None or minor >= since for gate, since in _ON_BY_DEFAULT_FROM.items()}
    )


def parse_minor(text: str, what: str = "--kubernetes-version") -> int:
    """The MINOR of `1.MINOR` (`v1.33` and `1.33.2` are read too)."""
    match = _VERSION.match(text.strip())
    if match is None:
        raise ProfileError(f"{what}: expected 1.MINOR (for example 1.33), got {text!r}")
    return int(match.group(1))


def parse_api_minor(major: str, minor: str) -> int | None:
    """The minor of the API server's /version answer ("33+" on some providers); None if not 1.x."""
    digits = re.match(r"\d+", minor or "")
    if major.strip() != "1" or digits is None:
        return None
    return int(digits.group(0))


def parse_gates(text: str) -> Mapping[Gate, bool]:
    """`Name=true|false[,...]`, as the components' own --feature-gates flag reads it."""
    gates: dict[Gate, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, equals, value = item.partition("=")
        name = name.strip()
        if name not in Gate.__members__.values():
            raise ProfileError(
                f"--feature-gates: unknown gate {name!r}: the rules read only " + " and ".join(Gate)
            )
        if not equals or value.strip().lower() not in {"true", "false"}:
            raise ProfileError(f"--feature-gates: {item!r} is not {name}=true or {name}=false")
        gates[Gate(name)] = value.strip().lower() == "true"
    return MappingProxyType(gates)


@dataclass(frozen=True, slots=True)
class Component:
    """One component's version and gates."""

    # The minor version as known (None when assumed); older than OLDEST_MINOR is kept as
    # given and evaluated as OLDEST_MINOR.
    minor: int | None
    source: Source
    service_traffic_distribution: bool = True
    prefer_same_traffic_distribution: bool = True

    @property
    def version(self) -> str | None:
        return f"1.{self.minor}" if self.minor is not None else None

    @property
    def evaluated_minor(self) -> int | None:
        """The minor whose rules apply (1.28 and older are evaluated as 1.29)."""
        return None if self.minor is None else max(self.minor, OLDEST_MINOR)

    @property
    def clamped(self) -> bool:
        return self.minor is not None and self.minor < OLDEST_MINOR

    def enabled(self, gate: Gate) -> bool:
        if gate is Gate.SERVICE_TRAFFIC_DISTRIBUTION:
            return self.service_traffic_distribution
        return self.prefer_same_traffic_distribution

    @property
    def gates(self) -> Mapping[Gate, bool]:
        return MappingProxyType({gate: self.enabled(gate) for gate in Gate})

    def describe(self, name: str) -> str:
        """`Kubernetes 1.33` / `kube-proxy 1.32`; `... 1.34 or newer` when assumed."""
        if self.minor is None:
            return f"{name} {NEWEST_MINOR} or newer"
        return f"{name} {self.version}"


def component(
    minor: int | None,
    source: Source,
    overrides: Mapping[Gate, bool] | None = None,
    *,
    lenient: bool = False,
) -> Component:
    """A component at `minor` with its default gates, then `overrides` applied.

    Raises ProfileError when an override sets a gate the version locks against its default;
    `lenient` keeps the locked value instead (a live exporter whose cluster was upgraded
    under a flag keeps running, and says so in its log).
    """
    evaluated = None if minor is None else max(minor, OLDEST_MINOR)
    gates = dict(default_gates(evaluated))
    for gate, value in (overrides or {}).items():
        locked = LOCKED_FROM[gate]
        if evaluated is not None and evaluated >= locked and value != gates[gate]:
            if lenient:
                continue
            raise ProfileError(
                f"--feature-gates: {gate} is locked to {str(gates[gate]).lower()} from "
                f"Kubernetes 1.{locked} (the profile is 1.{minor}) and cannot be set to "
                f"{str(value).lower()}"
            )
        gates[gate] = value
    return Component(
        minor,
        source,
        service_traffic_distribution=gates[Gate.SERVICE_TRAFFIC_DISTRIBUTION],
        prefer_same_traffic_distribution=gates[Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION],
    )


class KubeProxyRule(StrEnum):
    """Which of section 5's readings a kube-proxy applies (section 12)."""

    # Both gates on (1.34 and newer): section 5 as written.
    NEWEST = "kube-proxy"
    # ServiceTrafficDistribution on, PreferSameTrafficDistribution off (1.31-1.33): zone
    # hints without any annotation, never node hints.
    NO_NODE_HINTS = "kube-proxy-1.33"
    # ServiceTrafficDistribution off (1.30 and older): zone hints only under a hints
    # annotation that is not off, never node hints.
    ANNOTATION = "kube-proxy-1.29"


@dataclass(frozen=True, slots=True)
class KubeProxyBehaviour:
    rule: KubeProxyRule
    # kube-proxy 1.33 and newer follow a zone hint for "" on a node without a zone label;
    # 1.32 and older never use zone hints on such a node.
    zoneless_nodes_use_hints: bool

    @property
    def reads_node_hints(self) -> bool:
        return self.rule is KubeProxyRule.NEWEST

    @property
    def needs_annotation(self) -> bool:
        return self.rule is KubeProxyRule.ANNOTATION


NEWEST_KUBE_PROXY = KubeProxyBehaviour(KubeProxyRule.NEWEST, zoneless_nodes_use_hints=True)
KUBE_PROXY_1_33 = KubeProxyBehaviour(KubeProxyRule.NO_NODE_HINTS, zoneless_nodes_use_hints=True)
KUBE_PROXY_1_29 = KubeProxyBehaviour(KubeProxyRule.ANNOTATION, zoneless_nodes_use_hints=False)


@dataclass(frozen=True, slots=True)
class Profile:
    control_plane: Component
    kube_proxy: Component

    def accepts(self, traffic_distribution: str | None) -> bool:
        """The controller treats the value as valid (mechanism traffic-distribution)."""
        gates = _VALUE_GATES.get(traffic_distribution or "")
        return gates is not None and all(self.control_plane.enabled(gate) for gate in gates)

    def unsupported(self, traffic_distribution: str | None) -> bool:
        """A known value this control plane does not accept (traffic-distribution-unsupported)."""
        return traffic_distribution in _VALUE_GATES and not self.accepts(traffic_distribution)

    @property
    def writes_empty_zone_hints(self) -> bool:
        """Controller 1.30-1.32: under PreferClose, a ready endpoint without a zone gets a
        zone hint for "" (the endpointslice library stopped writing these in 1.33)."""
        minor = self.control_plane.evaluated_minor
        return minor is not None and minor <= _LAST_EMPTY_ZONE_HINTS

    @property
    def prefer_close_deprecated(self) -> bool:
        """PreferClose is an alias of PreferSameZone, which recent API servers warn about."""
        return self.control_plane.prefer_same_traffic_distribution

    @property
    def kube_proxy_behaviour(self) -> KubeProxyBehaviour:
        proxy = self.kube_proxy
        minor = proxy.evaluated_minor
        zoneless = minor is None or minor >= _ZONELESS_NODES_FROM
        if not proxy.service_traffic_distribution:
            return KUBE_PROXY_1_29
        if not proxy.prefer_same_traffic_distribution:
            return (
                KUBE_PROXY_1_33
                if zoneless
                else KubeProxyBehaviour(KubeProxyRule.NO_NODE_HINTS, zoneless_nodes_use_hints=False)
            )
        return (
            NEWEST_KUBE_PROXY
            if zoneless
            else KubeProxyBehaviour(KubeProxyRule.NEWEST, zoneless_nodes_use_hints=False)
        )

    def notes(self) -> tuple[str, ...]:
        """What a reader must know about the profile itself (old versions evaluated as 1.29)."""
        return tuple(
            f"{name} {part.version} is older than 1.{OLDEST_MINOR}: evaluated as 1.{OLDEST_MINOR}"
            for name, part in (("Kubernetes", self.control_plane), ("kube-proxy", self.kube_proxy))
            if part.clamped
        )


ASSUMED = Profile(Component(None, Source.ASSUMED), Component(None, Source.ASSUMED))


def build_profile(
    kubernetes_minor: int | None,
    kubernetes_source: Source,
    kube_proxy_minor: int | None = None,
    kube_proxy_source: Source | None = None,
    gates: Mapping[Gate, bool] | None = None,
    *,
    lenient: bool = False,
) -> Profile:
    """The profile of section 12's sources, first that applies having been chosen by the caller.

    kube-proxy without a version of its own takes the control plane's (source
    `control-plane`, or `assumed` when that is assumed). `gates` override both components'
    defaults; ProfileError when one sets a gate its version locks.
    """
    if kubernetes_minor is None:
        kubernetes_source = Source.ASSUMED
    control_plane = component(kubernetes_minor, kubernetes_source, gates, lenient=lenient)
    if kube_proxy_minor is None:
        kube_proxy_minor = kubernetes_minor
        kube_proxy_source = Source.ASSUMED if kubernetes_minor is None else Source.CONTROL_PLANE
    kube_proxy = component(
        kube_proxy_minor, kube_proxy_source or Source.FLAG, gates, lenient=lenient
    )
    return Profile(control_plane, kube_proxy)


@dataclass(frozen=True, slots=True)
class ProfileFlags:
    """The profile flags as parsed; a version the flags do not give is None."""

    kubernetes_minor: int | None = None
    kube_proxy_minor: int | None = None
    gates: Mapping[Gate, bool] = field(default_factory=dict)

    def profile(
        self,
        server_minor: int | None = None,
        kube_proxy_detected: int | None = None,
        *,
        lenient: bool = False,
    ) -> Profile:
        """Section 12's sources, first that applies: flags, then the cluster, else assumed.

        ProfileError when a gate is set against a version that locks it.
        """
        minor: int | None
        if self.kubernetes_minor is not None:
            minor, source = self.kubernetes_minor, Source.FLAG
        else:
            minor, source = server_minor, Source.API
        proxy_minor, proxy_source = self.kube_proxy_minor, Source.FLAG
        if proxy_minor is None and kube_proxy_detected is not None:
            proxy_minor, proxy_source = kube_proxy_detected, Source.DETECTED
        return build_profile(minor, source, proxy_minor, proxy_source, self.gates, lenient=lenient)


class Notice(StrEnum):
    """Shown and reported, never a problem: no exit status, no alert."""

    PREFER_CLOSE_DEPRECATED = "prefer-close-deprecated"

    @property
    def text(self) -> str:
        return _NOTICE_TEXTS[self]


_NOTICE_TEXTS = {
    Notice.PREFER_CLOSE_DEPRECATED: (
        "trafficDistribution: PreferClose is deprecated where PreferSameZone is accepted "
        "(the API server warns on it): PreferSameZone means the same; keep PreferClose only "
        "while a control plane of 1.31-1.33 must read it"
    ),
}
_NO_NOTICES: frozenset[Notice] = frozenset()


def notices_of(traffic_distribution: str | None, profile: Profile) -> frozenset[Notice]:
    if traffic_distribution == "PreferClose" and profile.prefer_close_deprecated:
        return frozenset({Notice.PREFER_CLOSE_DEPRECATED})
    return _NO_NOTICES


def kube_proxy_effect(service: Service, profile: Profile) -> str | None:
    """Why this profile's kube-proxy routes the Service otherwise than the newest one would.

    None when the profile does not change kube-proxy's reading of the Service.
    """
    traffic_distribution = service.traffic_distribution
    proxy = profile.kube_proxy
    name = proxy.describe("kube-proxy")
    if not proxy.service_traffic_distribution:
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
    if traffic_distribution == "PreferSameNode" and not proxy.prefer_same_traffic_distribution:
        return (
            "PreferSameNode needs kube-proxy 1.34 or the PreferSameTrafficDistribution gate: "
            f"{name} routes this Service same-zone"
        )
    return None
