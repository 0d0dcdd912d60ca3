"""behaviour §12: the gates per version, the settings refused, emulation, and what a profile
changes. The expectations are written from the section's table, not from the engine's."""

from __future__ import annotations

import pytest

from exporter.engine import DataPlane, Endpoint, Mechanism
from exporter.engine.health import DriftKind
from exporter.engine.mechanism import ConfigIssue, config_issues, mechanism_of
from exporter.engine.profile import (
    ASSUMED,
    KUBE_PROXY_1_29,
    KUBE_PROXY_1_33,
    NEWEST_KUBE_PROXY,
    SAME_AS_NEWEST_FROM,
    Component,
    Gate,
    KubeProxyBehaviour,
    Notice,
    ProfileError,
    ProfileFlags,
    Source,
    Stage,
    build_profile,
    kube_proxy_effect,
    notices_of,
)
from exporter.engine.routing import Routing
from exporter.engine.versions import NEWEST_MINOR, ServerVersion
from tests.engine.builders import endpoint, endpoint_slice, node, service
from tests.engine.views import routing_of
from tests.results import result_of

TAH = Gate.TOPOLOGY_AWARE_HINTS
STD = Gate.SERVICE_TRAFFIC_DISTRIBUTION
PSTD = Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION
ALPHA, BETA, GA = Stage.ALPHA, Stage.BETA, Stage.GA

# Section 12's table: per supported minor, each gate the components have, its default and
# stage. (TopologyAwareHints 1.21-1.35, on from 1.24, GA and locked 1.33-1.35;
# ServiceTrafficDistribution 1.30-1.35, alpha off, beta on in 1.31, GA and locked from 1.33;
# PreferSameTrafficDistribution from 1.33, alpha off, beta on in 1.34, GA and locked 1.35.)
TABLE: dict[int, dict[Gate, tuple[bool, Stage]]] = {
    29: {TAH: (True, BETA)},
    30: {TAH: (True, BETA), STD: (False, ALPHA)},
    31: {TAH: (True, BETA), STD: (True, BETA)},
    32: {TAH: (True, BETA), STD: (True, BETA)},
    33: {TAH: (True, GA), STD: (True, GA), PSTD: (False, ALPHA)},
    34: {TAH: (True, GA), STD: (True, GA), PSTD: (True, BETA)},
    35: {TAH: (True, GA), STD: (True, GA), PSTD: (True, GA)},
    36: {PSTD: (True, GA)},
    37: {PSTD: (True, GA)},
}
LOCKED: dict[Gate, range] = {TAH: range(33, 36), STD: range(33, 36), PSTD: range(35, 38)}


@pytest.mark.parametrize("minor", sorted(TABLE))
def test_each_supported_version_has_exactly_its_gates(minor: int) -> None:
    part = build_profile(minor, Source.FLAG).control_plane
    assert dict(part.gates) == {gate: default for gate, (default, _) in TABLE[minor].items()}
    assert {gate: part.stage(gate) for gate in part.gates} == {
        gate: stage for gate, (_, stage) in TABLE[minor].items()
    }


@pytest.mark.parametrize("minor", sorted(TABLE))
@pytest.mark.parametrize("gate", list(Gate))
@pytest.mark.parametrize("value", [True, False])
def test_exactly_the_settings_the_components_refuse_are_refused(
    minor: int, gate: Gate, *, value: bool
) -> None:
    known = TABLE[minor].get(gate)
    refused = known is None or (minor in LOCKED[gate] and value != known[0])
    if refused:
        with pytest.raises(
            ProfileError, match=r"unrecognized feature gate|cannot set feature gate"
        ):
            build_profile(minor, Source.FLAG, gates={gate: value})
        return
    profile = build_profile(minor, Source.FLAG, gates={gate: value})
    assert profile.control_plane.gates[gate] is value
    assert profile.kube_proxy.gates[gate] is value


def test_the_refusals_read_as_the_components_word_them() -> None:
    with pytest.raises(ProfileError) as removed:
        build_profile(36, Source.FLAG, gates={STD: True})
    assert str(removed.value) == (
        "--feature-gates: unrecognized feature gate: ServiceTrafficDistribution "
        "(removed in Kubernetes 1.36)"
    )
    with pytest.raises(ProfileError) as added:
        build_profile(32, Source.FLAG, gates={PSTD: True})
    assert str(added.value).endswith("PreferSameTrafficDistribution (added in Kubernetes 1.33)")
    with pytest.raises(ProfileError) as locked:
        build_profile(35, Source.FLAG, gates={PSTD: False})
    assert str(locked.value) == (
        "--feature-gates: cannot set feature gate PreferSameTrafficDistribution to false, "
        "feature is locked to true in Kubernetes 1.35 (GA and locked from 1.35)"
    )


def test_the_locked_gate_message_names_the_component_that_locks_it() -> None:
    """Issue 30 finding 10: kube-proxy's version was called "the profile"."""
    with pytest.raises(ProfileError) as locked:
        build_profile(36, Source.FLAG, 33, Source.FLAG, gates={STD: False})
    assert "feature is locked to true in kube-proxy 1.33" in str(locked.value)
    assert "profile" not in str(locked.value)


def test_the_locked_gate_message_names_the_given_version_before_an_assumed_one() -> None:
    """Issue 30 finding 10: `--kube-proxy-version 1.35` alone named the assumed control
    plane, "Kubernetes 1.34 or newer", for a gate locked from 1.35."""
    with pytest.raises(ProfileError) as locked:
        build_profile(None, Source.ASSUMED, 35, Source.FLAG, gates={PSTD: False})
    assert "feature is locked to true in kube-proxy 1.35 (GA and locked from 1.35)" in str(
        locked.value
    )


def test_a_lock_under_assumed_semantics_names_the_newest_version() -> None:
    """Without any version, the lock is the newest version's, said as assumed: not
    "Kubernetes 1.34 or newer" (1.34 does not lock PreferSameTrafficDistribution)."""
    with pytest.raises(ProfileError) as locked:
        build_profile(None, Source.ASSUMED, gates={PSTD: False})
    message = str(locked.value)
    assert f"locked to true in Kubernetes 1.{NEWEST_MINOR}, the newest semantics, assumed" in (
        message
    )
    assert "1.34 or newer" not in message


def test_a_gate_given_once_applies_to_each_component_whose_version_has_it() -> None:
    """TopologyAwareHints=false with a 1.36 control plane and kube-proxy 1.32: only
    kube-proxy has the gate; it takes it, the control plane keeps its behaviour."""
    profile = build_profile(36, Source.FLAG, 32, Source.FLAG, gates={TAH: False})
    assert profile.control_plane.gates == {PSTD: True}
    assert profile.control_plane.enabled(TAH)
    assert profile.kube_proxy.gates == {TAH: False, STD: True}
    assert not profile.kube_proxy_behaviour.uses_hints


def test_a_gate_neither_component_has_names_both() -> None:
    with pytest.raises(ProfileError, match=r"neither Kubernetes 1\.36 nor kube-proxy 1\.29"):
        build_profile(36, Source.FLAG, 29, Source.FLAG, gates={STD: True})


def test_features_without_their_gate_are_off_before_and_on_after() -> None:
    before, after = Component(29, Source.FLAG), Component(36, Source.FLAG)
    assert not before.enabled(STD)
    assert not before.enabled(PSTD)
    assert after.enabled(STD)
    assert after.enabled(TAH)


def test_a_lenient_profile_keeps_the_locked_value_and_drops_unknown_gates() -> None:
    """A running exporter whose cluster was upgraded under its flag keeps running."""
    profile = build_profile(35, Source.API, gates={PSTD: False}, lenient=True)
    assert profile.control_plane.enabled(PSTD)
    upgraded = build_profile(36, Source.API, gates={STD: False}, lenient=True)
    assert upgraded.control_plane.gates == {PSTD: True}
    assert upgraded.control_plane.enabled(STD)


# -- emulated versions -----------------------------------------------------------------------


def test_an_emulating_api_server_runs_the_emulated_versions_gates() -> None:
    """1.36 emulating 1.33: the binary has only PreferSameTrafficDistribution, at its 1.33
    spec (alpha, off); the two gates 1.36 removed are unknown to it, their features on."""
    profile = ProfileFlags().profile(ServerVersion(33, binary_minor=36))
    control_plane = profile.control_plane
    assert (control_plane.version, control_plane.binary_version) == ("1.33", "1.36")
    assert control_plane.source is Source.API
    assert control_plane.gates == {PSTD: False}
    assert control_plane.stage(PSTD) is ALPHA
    assert control_plane.enabled(STD)
    assert control_plane.enabled(TAH)
    assert control_plane.describe("Kubernetes") == "Kubernetes 1.33, emulated by a 1.36 API server"
    assert not profile.accepts("PreferSameZone")
    assert profile.unsupported("PreferSameZone")
    assert profile.accepts("PreferClose")
    # kube-proxy has no emulation: it takes the control plane's (emulated) version.
    assert (profile.kube_proxy.version, profile.kube_proxy.binary_version) == ("1.33", None)


def test_emulation_changes_what_the_server_refuses() -> None:
    flags = ProfileFlags(gates={PSTD: True})
    assert flags.profile(ServerVersion(33, 36)).control_plane.enabled(PSTD)
    # 1.37 emulating 1.34: the gate is beta there, not locked.
    unlocked = ProfileFlags(gates={PSTD: False}).profile(ServerVersion(34, 37))
    assert not unlocked.control_plane.enabled(PSTD)
    # 1.35 emulating 1.32: the binary has the gate, but not at 1.32 (component-base's
    # PreAlpha): neither listed nor settable.
    early = ProfileFlags().profile(ServerVersion(32, 35))
    assert early.control_plane.gates == {TAH: True, STD: True}
    with pytest.raises(
        ProfileError, match=r"not available in Kubernetes 1\.32, emulated by a 1\.35"
    ):
        ProfileFlags(kube_proxy_minor=36, gates={PSTD: True}).profile(ServerVersion(32, 35))


def test_a_server_that_reports_its_own_version_as_emulated_is_not_emulating() -> None:
    profile = ProfileFlags().profile(ServerVersion(36, None))
    assert profile.control_plane.binary_version is None
    assert build_profile(36, Source.API, binary_minor=36).control_plane.binary_minor is None


# -- the supported range ---------------------------------------------------------------------


def test_versions_outside_1_29_to_1_37_are_evaluated_at_the_ends_and_say_so() -> None:
    old = build_profile(27, Source.FLAG)
    assert old.control_plane.version == "1.27"
    assert old.control_plane.evaluated_minor == 29
    assert old.notes() == (
        "Kubernetes 1.27 is older than 1.29: evaluated as 1.29",
        "kube-proxy 1.27 is older than 1.29: evaluated as 1.29",
    )
    new = build_profile(38, Source.FLAG, 37, Source.FLAG)
    assert new.control_plane.evaluated_minor == 37
    assert new.control_plane.gates == {PSTD: True}
    assert new.notes() == ("Kubernetes 1.38 is newer than 1.37: evaluated as 1.37",)


def test_assumed_is_the_newest_semantics() -> None:
    assert ASSUMED.control_plane.gates == {PSTD: True}
    assert ASSUMED.kube_proxy.gates == {PSTD: True}
    assert SAME_AS_NEWEST_FROM == 34
    assert ASSUMED.control_plane.describe("Kubernetes") == "Kubernetes 1.34 or newer"
    assert build_profile(None, Source.API) == ASSUMED


def test_sources() -> None:
    skewed = build_profile(34, Source.API, 31, Source.DETECTED)
    assert (skewed.control_plane.source, skewed.kube_proxy.source) == (Source.API, Source.DETECTED)
    same = build_profile(33, Source.FLAG)
    assert (same.kube_proxy.minor, same.kube_proxy.source) == (33, Source.CONTROL_PLANE)
    flagged = ProfileFlags(kubernetes_minor=35).profile(ServerVersion(33, 36))
    assert (flagged.control_plane.version, flagged.control_plane.source) == ("1.35", Source.FLAG)
    assert flagged.control_plane.binary_version is None


# -- kube-proxy ------------------------------------------------------------------------------


def _behaviour(*, hints: bool = True, annotation: bool, node: bool, zoneless: bool) -> object:
    return KubeProxyBehaviour(
        uses_hints=hints,
        needs_annotation=annotation,
        reads_node_hints=node,
        zoneless_nodes_use_hints=zoneless,
    )


@pytest.mark.parametrize(
    ("minor", "gates", "expected"),
    [
        (28, {}, _behaviour(annotation=True, node=False, zoneless=False)),
        (30, {}, _behaviour(annotation=True, node=False, zoneless=False)),
        (30, {STD: True}, _behaviour(annotation=False, node=False, zoneless=False)),
        (31, {}, _behaviour(annotation=False, node=False, zoneless=False)),
        (32, {TAH: False}, _behaviour(hints=False, annotation=False, node=False, zoneless=False)),
        (33, {}, _behaviour(annotation=False, node=False, zoneless=True)),
        (33, {PSTD: True}, _behaviour(annotation=False, node=True, zoneless=True)),
        (34, {}, _behaviour(annotation=False, node=True, zoneless=True)),
        (37, {}, _behaviour(annotation=False, node=True, zoneless=True)),
    ],
)
def test_kube_proxy_behaviour_per_version(
    minor: int, gates: dict[Gate, bool], expected: KubeProxyBehaviour
) -> None:
    profile = build_profile(37, Source.API, minor, Source.FLAG, gates=gates, lenient=True)
    assert profile.kube_proxy_behaviour == expected


def test_the_fixed_kube_proxy_ids_are_those_releases_defaults() -> None:
    assert _behaviour(annotation=True, node=False, zoneless=False) == KUBE_PROXY_1_29
    assert _behaviour(annotation=False, node=False, zoneless=True) == KUBE_PROXY_1_33
    assert _behaviour(annotation=False, node=True, zoneless=True) == NEWEST_KUBE_PROXY


# -- the controller --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "minor", "gates", "mechanism", "unsupported"),
    [
        ("PreferSameZone", 33, {}, Mechanism.NONE, True),
        ("PreferSameNode", 33, {}, Mechanism.NONE, True),
        ("PreferSameZone", 33, {PSTD: True}, Mechanism.TRAFFIC_DISTRIBUTION, False),
        ("PreferSameZone", 34, {}, Mechanism.TRAFFIC_DISTRIBUTION, False),
        ("PreferSameZone", 37, {}, Mechanism.TRAFFIC_DISTRIBUTION, False),
        ("PreferClose", 30, {}, Mechanism.NONE, True),
        ("PreferClose", 30, {STD: True}, Mechanism.TRAFFIC_DISTRIBUTION, False),
        ("PreferClose", 31, {}, Mechanism.TRAFFIC_DISTRIBUTION, False),
        ("PreferClose", 36, {}, Mechanism.TRAFFIC_DISTRIBUTION, False),
        ("PreferClose", 28, {}, Mechanism.NONE, True),
        ("Bogus", 35, {}, Mechanism.NONE, False),
    ],
)
def test_mechanism_and_unsupported_value(
    value: str, minor: int, gates: dict[Gate, bool], mechanism: Mechanism, *, unsupported: bool
) -> None:
    profile = build_profile(minor, Source.FLAG, gates=gates)
    svc = service(traffic_distribution=value)
    assert mechanism_of(svc, profile) is mechanism
    issues = config_issues(svc, profile)
    assert (ConfigIssue.TRAFFIC_DISTRIBUTION_UNSUPPORTED in issues) is unsupported
    assert (ConfigIssue.UNKNOWN_TRAFFIC_DISTRIBUTION in issues) is (value == "Bogus")


def test_topology_aware_hints_off_gives_auto_no_hints_and_an_issue() -> None:
    """1.32 with TopologyAwareHints=false: no topology cache, so `auto` writes nothing; the
    annotation still shadows the field; trafficDistribution alone still works."""
    profile = build_profile(32, Source.FLAG, gates={TAH: False})
    auto = service(mode="Auto")
    assert mechanism_of(auto, profile) is Mechanism.NONE
    assert config_issues(auto, profile) == {ConfigIssue.TOPOLOGY_AWARE_HINTS_GATE_OFF}
    both = service(mode="Auto", traffic_distribution="PreferClose")
    assert mechanism_of(both, profile) is Mechanism.NONE
    assert ConfigIssue.ANNOTATION_SHADOWS_TRAFFIC_DISTRIBUTION in config_issues(both, profile)
    field = service(traffic_distribution="PreferClose")
    assert mechanism_of(field, profile) is Mechanism.TRAFFIC_DISTRIBUTION
    assert config_issues(field, profile) == frozenset()
    assert mechanism_of(auto, build_profile(32, Source.FLAG)) is Mechanism.AUTO


def test_unsupported_is_reported_beside_a_shadowing_annotation() -> None:
    profile = build_profile(33, Source.FLAG)
    svc = service(mode="Auto", traffic_distribution="PreferSameZone")
    assert mechanism_of(svc, profile) is Mechanism.AUTO
    assert config_issues(svc, profile) >= {
        ConfigIssue.ANNOTATION_SHADOWS_TRAFFIC_DISTRIBUTION,
        ConfigIssue.TRAFFIC_DISTRIBUTION_UNSUPPORTED,
    }


# -- notices ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "minor", "expected"),
    [("PreferClose", 34, True), ("PreferClose", None, True), ("PreferClose", 33, False),
     ("PreferSameZone", 34, False)],
)  # fmt: skip
def test_prefer_close_notice(value: str, minor: int | None, *, expected: bool) -> None:
    svc = service(traffic_distribution=value)
    notices = notices_of(svc, auto=False, profile=build_profile(minor, Source.FLAG))
    assert (Notice.PREFER_CLOSE_DEPRECATED in notices) is expected


@pytest.mark.parametrize(
    ("minor", "auto", "expected"),
    [(33, True, True), (37, True, True), (None, True, True), (32, True, False),
     (34, False, False)],
)  # fmt: skip
def test_topology_mode_notice(minor: int | None, *, auto: bool, expected: bool) -> None:
    notices = notices_of(service(mode="Auto"), auto=auto, profile=build_profile(minor, Source.FLAG))
    assert (Notice.TOPOLOGY_MODE_DEPRECATED in notices) is expected


def test_the_topology_mode_notice_says_what_replacing_it_changes() -> None:
    text = Notice.TOPOLOGY_MODE_DEPRECATED.text
    assert "deprecated since Kubernetes 1.33" in text
    assert "trafficDistribution: PreferSameZone" in text
    assert "no overload guard" in text


def test_an_auto_service_gets_the_notice_in_evaluate() -> None:
    slices = [endpoint_slice(endpoint("zone-a", hints=("zone-a",)))]
    (entry,) = result_of(NODES, [service(mode="Auto")], slices).verdicts()
    assert entry.notices == {Notice.TOPOLOGY_MODE_DEPRECATED}
    profile = build_profile(32, Source.FLAG)
    (old,) = result_of(NODES, [service(mode="Auto")], slices, profile=profile).verdicts()
    assert old.notices == frozenset()


# -- routing under a profile -----------------------------------------------------------------

NODES = [node("a-1", "zone-a"), node("b-1", "zone-b"), node("n-1", None)]


def _routing(
    svc_endpoints: list[Endpoint],
    profile_minor: int | None,
    *,
    mode: str | None = None,
    traffic_distribution: str | None = None,
    gates: dict[Gate, bool] | None = None,
) -> str:
    slices = [endpoint_slice(*svc_endpoints)]
    profile = build_profile(profile_minor, Source.FLAG, gates=gates)
    svc = service(mode=mode, traffic_distribution=traffic_distribution)
    (verdict,) = result_of(NODES, [svc], slices, profile=profile).verdicts()
    view = verdict.routing[DataPlane.KUBE_PROXY]
    letters = {Routing.SAME_NODE: "N", Routing.SAME_ZONE: "Z", Routing.CLUSTER: "C"}
    zone_of = {"a-1": "zone-a", "b-1": "zone-b", "n-1": ""}
    routings = [routing_of(view, name, zone) for name, zone in zone_of.items()]
    return "".join(letters[routing] for routing in routings if routing is not None)


def test_kube_proxy_routing_follows_the_profile() -> None:
    node_hinted = [
        endpoint("zone-a", node_name="a-1", hints=("zone-a",), node_hints=("a-1",)),
        endpoint("zone-b", node_name="b-1", hints=("zone-b",), node_hints=("b-1",)),
    ]
    assert _routing(node_hinted, None, traffic_distribution="PreferSameNode") == "NNC"
    assert _routing(node_hinted, 37, traffic_distribution="PreferSameNode") == "NNC"
    assert _routing(node_hinted, 33, traffic_distribution="PreferSameNode") == "ZZC"
    # ServiceTrafficDistribution off: hints only under an annotation.
    assert _routing(node_hinted, 30, traffic_distribution="PreferSameNode") == "CCC"
    assert _routing(node_hinted, 30, mode="Auto") == "ZZC"
    # TopologyAwareHints off: no hint at all, whatever the Service asks.
    off = {TAH: False}
    assert _routing(node_hinted, 32, mode="Auto", gates=off) == "CCC"
    assert _routing(node_hinted, 32, traffic_distribution="PreferClose", gates=off) == "CCC"


def test_a_zone_hint_for_empty_is_followed_on_zoneless_nodes_from_1_33() -> None:
    """The controller 1.30-1.32 hints a zoneless endpoint for "": kube-proxy 1.33 follows it on
    a node without a zone label, 1.32 never uses zone hints there."""
    hinted = [endpoint(None, hints=("",)), endpoint("zone-a", hints=("zone-a",))]
    assert _routing(hinted, 33, traffic_distribution="PreferClose") == "ZCZ"
    assert _routing(hinted, 32, traffic_distribution="PreferClose") == "ZCC"


def test_controller_1_32_expects_an_empty_zone_hint_under_prefer_close() -> None:
    unhinted = [endpoint(None), endpoint("zone-a", hints=("zone-a",))]
    with_empty = [endpoint(None, hints=("",)), endpoint("zone-a", hints=("zone-a",))]

    def drift(endpoints: list[Endpoint], minor: int) -> frozenset[DriftKind]:
        profile = build_profile(minor, Source.FLAG)
        slices = [endpoint_slice(*endpoints)]
        svc = service(traffic_distribution="PreferClose")
        (verdict,) = result_of(NODES, [svc], slices, profile=profile).verdicts()
        return verdict.drift

    assert drift(unhinted, 32) == {DriftKind.HINTS_MISSING}
    assert drift(with_empty, 32) == frozenset()
    assert drift(unhinted, 33) == frozenset()


def test_kube_proxy_effect_names_the_version_and_gate() -> None:
    profile = build_profile(35, Source.API, 32, Source.FLAG)
    assert kube_proxy_effect(service(traffic_distribution="PreferSameNode"), profile) == (
        "PreferSameNode needs kube-proxy 1.34 or the PreferSameTrafficDistribution gate: "
        "kube-proxy 1.32 routes this Service same-zone"
    )
    assert kube_proxy_effect(service(traffic_distribution="PreferClose"), profile) is None
    assert kube_proxy_effect(service(traffic_distribution="PreferSameNode"), ASSUMED) is None
    off = build_profile(32, Source.FLAG, gates={TAH: False})
    assert kube_proxy_effect(service(mode="Auto"), off) == (
        "kube-proxy 1.32 runs with the TopologyAwareHints gate off: it uses no hints, and "
        "routes this Service cluster-wide"
    )
    assert kube_proxy_effect(service(), off) is None
