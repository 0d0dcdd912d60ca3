"""behaviour §1 (mechanism) and the config issues of section 6 / the conformance README."""

from __future__ import annotations

import pytest

from exporter.engine import ConfigIssue, Mechanism, config_issues, mechanism_of
from tests.engine.builders import service

AUTO = Mechanism.AUTO
TD = Mechanism.TRAFFIC_DISTRIBUTION
NONE = Mechanism.NONE

MECHANISM_TABLE = [
    # id, deprecated annotation, topology-mode annotation, trafficDistribution, mechanism
    ("nothing", None, None, None, NONE),
    ("mode-Auto", None, "Auto", None, AUTO),
    ("mode-auto", None, "auto", None, AUTO),
    ("mode-AUTO-is-off", None, "AUTO", None, NONE),
    ("mode-aUto-is-off", None, "aUto", None, NONE),
    ("mode-Disabled", None, "Disabled", None, NONE),
    ("mode-PreferZone-is-off", None, "PreferZone", None, NONE),
    ("mode-empty-is-off", None, "", None, NONE),
    ("mode-auto-with-space-is-off", None, "auto ", None, NONE),
    ("deprecated-Auto", "Auto", None, None, AUTO),
    ("deprecated-auto", "auto", None, None, AUTO),
    ("deprecated-auto-beats-mode-disabled", "auto", "Disabled", None, AUTO),
    ("deprecated-disabled-beats-mode-auto", "Disabled", "Auto", None, NONE),
    ("deprecated-empty-beats-mode-auto", "", "auto", None, NONE),
    ("deprecated-typo-beats-mode-auto", "Atuo", "Auto", None, NONE),
    ("td-PreferClose", None, None, "PreferClose", TD),
    ("td-PreferSameZone", None, None, "PreferSameZone", TD),
    ("td-PreferSameNode", None, None, "PreferSameNode", TD),
    ("td-lowercase-is-invalid", None, None, "preferClose", NONE),
    ("td-unknown-is-invalid", None, None, "PreferRegion", NONE),
    ("td-empty-is-invalid", None, None, "", NONE),
    ("annotation-on-beats-valid-td", None, "Auto", "PreferClose", AUTO),
    ("annotation-on-beats-invalid-td", None, "auto", "Bogus", AUTO),
    ("deprecated-on-beats-td", "auto", None, "PreferSameNode", AUTO),
    ("annotation-off-lets-td-decide", None, "Disabled", "PreferClose", TD),
    ("deprecated-off-lets-td-decide", "Disabled", "Auto", "PreferSameZone", TD),
    ("annotation-AUTO-off-lets-td-decide", None, "AUTO", "PreferSameNode", TD),
]


@pytest.mark.parametrize(
    ("deprecated", "mode", "traffic_distribution", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in MECHANISM_TABLE],
)
def test_mechanism_table(
    deprecated: str | None, mode: str | None, traffic_distribution: str | None, expected: Mechanism
) -> None:
    """The mechanism follows behaviour §1: deprecated key decides alone, Auto/auto only."""
    svc = service(deprecated=deprecated, mode=mode, traffic_distribution=traffic_distribution)
    assert mechanism_of(svc) is expected


SHADOWS_TD = ConfigIssue.ANNOTATION_SHADOWS_TRAFFIC_DISTRIBUTION
DEPRECATED_SHADOWS = ConfigIssue.DEPRECATED_ANNOTATION_SHADOWS_TOPOLOGY_MODE
UNKNOWN_VALUE = ConfigIssue.UNKNOWN_ANNOTATION_VALUE
UNKNOWN_TD = ConfigIssue.UNKNOWN_TRAFFIC_DISTRIBUTION
LOCAL = ConfigIssue.LOCAL_TRAFFIC_POLICY_WITH_HINTS

ISSUE_TABLE = [
    # id, service keyword arguments, issues
    ("clean-nothing", {}, set()),
    ("clean-auto", {"mode": "Auto"}, set()),
    ("clean-disabled", {"mode": "Disabled"}, set()),
    ("clean-lowercase-disabled", {"mode": "disabled"}, set()),
    ("clean-td", {"traffic_distribution": "PreferClose"}, set()),
    # annotation-shadows-traffic-distribution
    ("auto-shadows-td", {"mode": "auto", "traffic_distribution": "PreferClose"}, {SHADOWS_TD}),
    (
        "deprecated-auto-shadows-td",
        {"deprecated": "Auto", "traffic_distribution": "PreferSameNode"},
        {SHADOWS_TD},
    ),
    (
        "auto-shadows-any-td-value",
        {"mode": "Auto", "traffic_distribution": "Bogus"},
        {SHADOWS_TD, UNKNOWN_TD},
    ),
    (
        "disabled-annotation-does-not-shadow",
        {"mode": "Disabled", "traffic_distribution": "PreferClose"},
        set(),
    ),
    (
        "AUTO-annotation-does-not-shadow",
        {"mode": "AUTO", "traffic_distribution": "PreferClose"},
        {UNKNOWN_VALUE},
    ),
    # deprecated-annotation-shadows-topology-mode
    ("both-keys-off", {"deprecated": "Disabled", "mode": "Auto"}, {DEPRECATED_SHADOWS}),
    ("both-keys-on", {"deprecated": "auto", "mode": "auto"}, {DEPRECATED_SHADOWS}),
    (
        "both-keys-empty",
        {"deprecated": "", "mode": ""},
        {DEPRECATED_SHADOWS, UNKNOWN_VALUE},
    ),
    ("deprecated-key-alone", {"deprecated": "Auto"}, set()),
    # unknown-annotation-value: judged on the deciding value only
    ("mode-AUTO", {"mode": "AUTO"}, {UNKNOWN_VALUE}),
    ("mode-off", {"mode": "off"}, {UNKNOWN_VALUE}),
    ("mode-empty", {"mode": ""}, {UNKNOWN_VALUE}),
    ("mode-PreferZone", {"mode": "PreferZone"}, {UNKNOWN_VALUE}),
    ("deprecated-typo", {"deprecated": "Atuo"}, {UNKNOWN_VALUE}),
    (
        "deprecated-typo-decides-over-good-mode",
        {"deprecated": "Atuo", "mode": "Auto"},
        {DEPRECATED_SHADOWS, UNKNOWN_VALUE},
    ),
    (
        "typo-in-ignored-mode-not-reported",
        {"deprecated": "Disabled", "mode": "Atuo"},
        {DEPRECATED_SHADOWS},
    ),
    # unknown-traffic-distribution
    ("td-bogus", {"traffic_distribution": "Bogus"}, {UNKNOWN_TD}),
    ("td-lowercase", {"traffic_distribution": "preferClose"}, {UNKNOWN_TD}),
    ("td-PreferSameZone-known", {"traffic_distribution": "PreferSameZone"}, set()),
    ("td-PreferSameNode-known", {"traffic_distribution": "PreferSameNode"}, set()),
    # local-traffic-policy-with-hints
    ("local-with-auto", {"mode": "Auto", "internal_traffic_policy": "Local"}, {LOCAL}),
    (
        "local-with-td",
        {"traffic_distribution": "PreferClose", "internal_traffic_policy": "Local"},
        {LOCAL},
    ),
    ("local-without-mechanism", {"internal_traffic_policy": "Local"}, set()),
    (
        "local-with-disabled-annotation",
        {"mode": "Disabled", "internal_traffic_policy": "Local"},
        set(),
    ),
    (
        "local-with-invalid-td",
        {"traffic_distribution": "Bogus", "internal_traffic_policy": "Local"},
        {UNKNOWN_TD},
    ),
    ("cluster-policy-with-auto", {"mode": "Auto", "internal_traffic_policy": "Cluster"}, set()),
]


@pytest.mark.parametrize(
    ("kwargs", "expected"), [pytest.param(row[1], row[2], id=row[0]) for row in ISSUE_TABLE]
)
def test_config_issues(kwargs: dict[str, str], expected: set[ConfigIssue]) -> None:
    """Each config issue is reported exactly when the conformance README's table says."""
    assert config_issues(service(**kwargs)) == expected


def test_config_issue_ids_are_the_contract_ids() -> None:
    """The issue ids are the five of the conformance README and the two of behaviour §12."""
    assert {issue.value for issue in ConfigIssue} == {
        "traffic-distribution-unsupported",
        "topology-aware-hints-gate-off",
        "annotation-shadows-traffic-distribution",
        "deprecated-annotation-shadows-topology-mode",
        "unknown-annotation-value",
        "unknown-traffic-distribution",
        "local-traffic-policy-with-hints",
    }


def test_mechanism_values_are_the_contract_values() -> None:
    """The mechanism names are the three of behaviour §8."""
    assert {mechanism.value for mechanism in Mechanism} == {"auto", "traffic-distribution", "none"}
