"""behaviour §1: which hint mechanism applies to a Service, and its configuration mistakes."""

from __future__ import annotations

from enum import StrEnum

from exporter.engine.model import DEPRECATED_HINTS_ANNOTATION, TOPOLOGY_MODE_ANNOTATION, Service
from exporter.engine.profile import ASSUMED, KNOWN_TRAFFIC_DISTRIBUTIONS, Profile


class Mechanism(StrEnum):
    """Which setting asks for topology-aware routing: the `auto` annotation, trafficDistribution,
    or neither."""

    AUTO = "auto"
    TRAFFIC_DISTRIBUTION = "traffic-distribution"
    NONE = "none"


class ConfigIssue(StrEnum):
    """A Service setting that does not do what it seems to, each with the change that fixes it."""

    ANNOTATION_SHADOWS_TRAFFIC_DISTRIBUTION = "annotation-shadows-traffic-distribution"
    DEPRECATED_ANNOTATION_SHADOWS_TOPOLOGY_MODE = "deprecated-annotation-shadows-topology-mode"
    UNKNOWN_ANNOTATION_VALUE = "unknown-annotation-value"
    UNKNOWN_TRAFFIC_DISTRIBUTION = "unknown-traffic-distribution"
    # behaviour §12: a known value the control plane's version or gates do not accept.
    TRAFFIC_DISTRIBUTION_UNSUPPORTED = "traffic-distribution-unsupported"
    # behaviour §12: an `auto` annotation where the controller's TopologyAwareHints gate is
    # off (1.29-1.32 only): no topology cache, so no hints and no event.
    TOPOLOGY_AWARE_HINTS_GATE_OFF = "topology-aware-hints-gate-off"
    LOCAL_TRAFFIC_POLICY_WITH_HINTS = "local-traffic-policy-with-hints"

    @property
    def fix(self) -> str:
        """What the operator should change."""
        return _FIXES[self]


_FIXES = {
    ConfigIssue.ANNOTATION_SHADOWS_TRAFFIC_DISTRIBUTION: (
        "the topology annotation wins and spec.trafficDistribution is ignored: remove the "
        "annotation to use trafficDistribution, or unset the field"
    ),
    ConfigIssue.DEPRECATED_ANNOTATION_SHADOWS_TOPOLOGY_MODE: (
        "service.kubernetes.io/topology-aware-hints is read first and topology-mode is ignored: "
        "remove the deprecated annotation"
    ),
    ConfigIssue.UNKNOWN_ANNOTATION_VALUE: (
        "the controller only understands Auto/auto (on) and Disabled (off): fix the value"
    ),
    ConfigIssue.UNKNOWN_TRAFFIC_DISTRIBUTION: (
        "use PreferClose, PreferSameZone or PreferSameNode: any other value is ignored"
    ),
    ConfigIssue.TRAFFIC_DISTRIBUTION_UNSUPPORTED: (
        "this control plane does not accept the value, so the controller writes no hints: "
        "PreferSameZone and PreferSameNode need Kubernetes 1.34 or newer (or the "
        "PreferSameTrafficDistribution gate on 1.33); PreferClose works from 1.31 (or with the "
        "ServiceTrafficDistribution gate on 1.30)"
    ),
    ConfigIssue.TOPOLOGY_AWARE_HINTS_GATE_OFF: (
        "the control plane runs with the TopologyAwareHints gate off, so the controller keeps "
        "no topology cache and writes no hints for the annotation: turn the gate back on for "
        "kube-controller-manager (and kube-proxy, which otherwise uses no hints either), or "
        "use spec.trafficDistribution: PreferClose"
    ),
    ConfigIssue.LOCAL_TRAFFIC_POLICY_WITH_HINTS: (
        "internalTrafficPolicy: Local keeps in-cluster traffic on the node, so hints do not "
        "apply to it: drop one of the two"
    ),
}

ANNOTATION_ON_VALUES = frozenset({"Auto", "auto"})
KNOWN_ANNOTATION_VALUES = ANNOTATION_ON_VALUES | {"Disabled", "disabled"}
# Valid under the newest semantics; which of them a control plane accepts depends on its
# version and gates (behaviour §12, Profile.accepts).
VALID_TRAFFIC_DISTRIBUTIONS = KNOWN_TRAFFIC_DISTRIBUTIONS


def deciding_annotation(service: Service) -> tuple[str, str] | None:
    """(key, value) of the annotation the controller reads.

    The deprecated annotation, when present, decides alone; topology-mode is not read.
    """
    if service.deprecated_hints_annotation is not None:
        return DEPRECATED_HINTS_ANNOTATION, service.deprecated_hints_annotation
    if service.topology_mode_annotation is not None:
        return TOPOLOGY_MODE_ANNOTATION, service.topology_mode_annotation
    return None


def _deciding_value(service: Service) -> str | None:
    decider = deciding_annotation(service)
    return decider[1] if decider is not None else None


def annotation_on(service: Service) -> bool:
    return _deciding_value(service) in ANNOTATION_ON_VALUES


def mechanism_of(service: Service, profile: Profile = ASSUMED) -> Mechanism:
    if annotation_on(service):
        # The annotation still shadows the field without a topology cache: no hints at all.
        return Mechanism.AUTO if profile.topology_cache else Mechanism.NONE
    if profile.accepts(service.traffic_distribution):
        return Mechanism.TRAFFIC_DISTRIBUTION
    return Mechanism.NONE


_NO_ISSUES: frozenset[ConfigIssue] = frozenset()


def config_issues(service: Service, profile: Profile = ASSUMED) -> frozenset[ConfigIssue]:
    issues: set[ConfigIssue] = set()
    if annotation_on(service) and service.traffic_distribution is not None:
        issues.add(ConfigIssue.ANNOTATION_SHADOWS_TRAFFIC_DISTRIBUTION)
    if (
        service.deprecated_hints_annotation is not None
        and service.topology_mode_annotation is not None
    ):
        issues.add(ConfigIssue.DEPRECATED_ANNOTATION_SHADOWS_TOPOLOGY_MODE)
    decider = _deciding_value(service)
    if decider is not None and decider not in KNOWN_ANNOTATION_VALUES:
        issues.add(ConfigIssue.UNKNOWN_ANNOTATION_VALUE)
    if (
        service.traffic_distribution is not None
        and service.traffic_distribution not in VALID_TRAFFIC_DISTRIBUTIONS
    ):
        issues.add(ConfigIssue.UNKNOWN_TRAFFIC_DISTRIBUTION)
    if profile.unsupported(service.traffic_distribution):
        # Reported whatever the mechanism: also beside an annotation that shadows it.
        issues.add(ConfigIssue.TRAFFIC_DISTRIBUTION_UNSUPPORTED)
    if annotation_on(service) and not profile.topology_cache:
        issues.add(ConfigIssue.TOPOLOGY_AWARE_HINTS_GATE_OFF)
    if (
        service.internal_traffic_policy == "Local"
        and mechanism_of(service, profile) is not Mechanism.NONE
    ):
        issues.add(ConfigIssue.LOCAL_TRAFFIC_POLICY_WITH_HINTS)
    # Held by every verdict: most have none, and share one empty set.
    return frozenset(issues) if issues else _NO_ISSUES
