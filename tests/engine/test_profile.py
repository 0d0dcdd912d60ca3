"""behaviour §12: the profile's gate table, locked gates, and what a profile changes."""

from __future__ import annotations

import pytest

from exporter.engine import DataPlane, Endpoint, Mechanism, evaluate
from exporter.engine.health import DriftKind
from exporter.engine.mechanism import ConfigIssue, config_issues, mechanism_of
from exporter.engine.profile import (
    ASSUMED,
    Gate,
    KubeProxyRule,
    Notice,
    ProfileError,
    Source,
    build_profile,
    component,
    default_gates,
    kube_proxy_effect,
    notices_of,
    parse_api_minor,
    parse_gates,
    parse_minor,
)
from exporter.engine.routing import Routing
from tests.engine.builders import endpoint, endpoint_slice, node, service
from tests.engine.views import routing_of

STD, PSTD = Gate.SERVICE_TRAFFIC_DISTRIBUTION, Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION


@pytest.mark.parametrize(
    ("minor", "service_traffic_distribution", "prefer_same"),
    [
        (28, False, False),
        (29, False, False),
        (30, False, False),
        (31, True, False),
        (32, True, False),
        (33, True, False),
        (34, True, True),
        (36, True, True),
        (None, True, True),
    ],
)
def test_gate_defaults_per_minor(
    minor: int | None, *, service_traffic_distribution: bool, prefer_same: bool
) -> None:
    assert default_gates(minor) == {STD: service_traffic_distribution, PSTD: prefer_same}


@pytest.mark.parametrize(
    ("minor", "gates"),
    [(33, {STD: False}), (35, {PSTD: False}), (36, {STD: False, PSTD: True})],
)
def test_a_locked_gate_cannot_be_set_against_its_default(
    minor: int, gates: dict[Gate, bool]
) -> None:
    with pytest.raises(ProfileError, match="locked"):
        build_profile(minor, Source.FLAG, gates=gates)


@pytest.mark.parametrize(
    ("minor", "gates"),
    [(30, {STD: True}), (32, {STD: False}), (33, {PSTD: True}), (34, {PSTD: False}),
     (35, {PSTD: True}), (None, {PSTD: False})],
)  # fmt: skip
def test_unlocked_gates_and_locked_ones_at_their_default_are_accepted(
    minor: int | None, gates: dict[Gate, bool]
) -> None:
    profile = build_profile(minor, Source.FLAG, gates=gates)
    for gate, value in gates.items():
        assert profile.control_plane.enabled(gate) is value
        assert profile.kube_proxy.enabled(gate) is value


def test_a_lenient_profile_keeps_the_locked_value() -> None:
    """A running exporter whose cluster was upgraded under its flag keeps the locked value."""
    profile = build_profile(35, Source.API, gates={PSTD: False}, lenient=True)
    assert profile.control_plane.prefer_same_traffic_distribution


def test_older_than_1_29_is_evaluated_as_1_29_and_says_so() -> None:
    profile = build_profile(27, Source.FLAG)
    assert profile.control_plane.version == "1.27"
    assert profile.control_plane.evaluated_minor == 29
    assert profile.notes() == (
        "Kubernetes 1.27 is older than 1.29: evaluated as 1.29",
        "kube-proxy 1.27 is older than 1.29: evaluated as 1.29",
    )


def test_sources() -> None:
    assert build_profile(None, Source.API) == ASSUMED
    skewed = build_profile(34, Source.API, 31, Source.DETECTED)
    assert (skewed.control_plane.source, skewed.kube_proxy.source) == (Source.API, Source.DETECTED)
    same = build_profile(33, Source.FLAG)
    assert (same.kube_proxy.minor, same.kube_proxy.source) == (33, Source.CONTROL_PLANE)


@pytest.mark.parametrize(
    ("minor", "rule", "zoneless"),
    [
        (28, KubeProxyRule.ANNOTATION, False),
        (30, KubeProxyRule.ANNOTATION, False),
        (31, KubeProxyRule.NO_NODE_HINTS, False),
        (32, KubeProxyRule.NO_NODE_HINTS, False),
        (33, KubeProxyRule.NO_NODE_HINTS, True),
        (34, KubeProxyRule.NEWEST, True),
    ],
)
def test_kube_proxy_behaviour_per_version(
    minor: int, rule: KubeProxyRule, *, zoneless: bool
) -> None:
    behaviour = build_profile(35, Source.API, minor, Source.FLAG).kube_proxy_behaviour
    assert (behaviour.rule, behaviour.zoneless_nodes_use_hints) == (rule, zoneless)


def test_kube_proxy_gates_follow_the_flag_not_the_version() -> None:
    profile = build_profile(33, Source.FLAG, gates={PSTD: True})
    assert profile.kube_proxy_behaviour.rule is KubeProxyRule.NEWEST


@pytest.mark.parametrize(
    ("value", "minor", "gates", "mechanism", "unsupported"),
    [
        ("PreferSameZone", 33, {}, Mechanism.NONE, True),
        ("PreferSameNode", 33, {}, Mechanism.NONE, True),
        ("PreferSameZone", 33, {PSTD: True}, Mechanism.TRAFFIC_DISTRIBUTION, False),
        ("PreferSameZone", 34, {}, Mechanism.TRAFFIC_DISTRIBUTION, False),
        ("PreferClose", 30, {}, Mechanism.NONE, True),
        ("PreferClose", 30, {STD: True}, Mechanism.TRAFFIC_DISTRIBUTION, False),
        ("PreferClose", 31, {}, Mechanism.TRAFFIC_DISTRIBUTION, False),
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


def test_unsupported_is_reported_beside_a_shadowing_annotation() -> None:
    profile = build_profile(33, Source.FLAG)
    svc = service(mode="Auto", traffic_distribution="PreferSameZone")
    assert mechanism_of(svc, profile) is Mechanism.AUTO
    assert config_issues(svc, profile) >= {
        ConfigIssue.ANNOTATION_SHADOWS_TRAFFIC_DISTRIBUTION,
        ConfigIssue.TRAFFIC_DISTRIBUTION_UNSUPPORTED,
    }


@pytest.mark.parametrize(
    ("value", "minor", "expected"),
    [("PreferClose", 34, True), ("PreferClose", None, True), ("PreferClose", 33, False),
     ("PreferSameZone", 34, False)],
)  # fmt: skip
def test_prefer_close_notice(value: str, minor: int | None, *, expected: bool) -> None:
    notices = notices_of(value, build_profile(minor, Source.FLAG))
    assert (Notice.PREFER_CLOSE_DEPRECATED in notices) is expected


NODES = [node("a-1", "zone-a"), node("b-1", "zone-b"), node("n-1", None)]


def _routing(
    svc_endpoints: list[Endpoint],
    profile_minor: int | None,
    *,
    mode: str | None = None,
    traffic_distribution: str | None = None,
) -> str:
    slices = [endpoint_slice(*svc_endpoints)]
    profile = build_profile(profile_minor, Source.FLAG)
    svc = service(mode=mode, traffic_distribution=traffic_distribution)
    (verdict,) = evaluate(NODES, [svc], slices, profile=profile).services
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
    assert _routing(node_hinted, 33, traffic_distribution="PreferSameNode") == "ZZC"
    # ServiceTrafficDistribution off: hints only under an annotation.
    assert _routing(node_hinted, 30, traffic_distribution="PreferSameNode") == "CCC"
    assert _routing(node_hinted, 30, mode="Auto") == "ZZC"


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
        (verdict,) = evaluate(NODES, [svc], slices, profile=profile).services
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


@pytest.mark.parametrize(
    ("text", "minor"), [("1.33", 33), ("v1.31", 31), ("1.30.2", 30), (" 1.36 ", 36)]
)
def test_parse_minor(text: str, minor: int) -> None:
    assert parse_minor(text) == minor


@pytest.mark.parametrize("text", ["2.1", "1", "1.x", "", "133"])
def test_parse_minor_refuses(text: str) -> None:
    with pytest.raises(ProfileError, match=r"1\.MINOR"):
        parse_minor(text)


def test_parse_api_minor_reads_provider_suffixes() -> None:
    assert parse_api_minor("1", "33+") == 33
    assert parse_api_minor("1", "") is None
    assert parse_api_minor("2", "0") is None


def test_parse_gates() -> None:
    assert parse_gates("ServiceTrafficDistribution=true, PreferSameTrafficDistribution=False") == {
        STD: True,
        PSTD: False,
    }
    with pytest.raises(ProfileError, match="unknown gate"):
        parse_gates("TopologyAwareHints=true")
    with pytest.raises(ProfileError, match="is not"):
        parse_gates("ServiceTrafficDistribution")


def test_component_keeps_the_version_as_given() -> None:
    part = component(27, Source.FLAG)
    assert (part.version, part.clamped, part.gates) == ("1.27", True, {STD: False, PSTD: False})
