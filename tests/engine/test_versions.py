"""behaviour §12: one version parser for flags, /version and image tags, and the gate flag's
syntax as component-base reads it (issue 30 findings 2, 3 and 10)."""

from __future__ import annotations

import pytest

from exporter.engine.gates import GATES, Gate, parse_gates
from exporter.engine.versions import (
    MAX_VERSION_CHARS,
    ProfileError,
    parse_api_version,
    parse_version,
    version_or_none,
)


@pytest.mark.parametrize(
    ("text", "minor"),
    [("1.33", 33), ("v1.31", 31), ("1.30.2", 30), (" 1.36 ", 36), ("v1.33.2-eks-1a2b3c4", 33),
     ("1.37.2+k3s1", 37), ("1.40", 40), ("1.9", 9)],
)  # fmt: skip
def test_parse_version(text: str, minor: int) -> None:
    assert parse_version(text) == minor


@pytest.mark.parametrize(
    "text",
    [
        "2.1",
        "1",
        "1.x",
        "133",
        "",  # finding 10: an empty value was taken for "no version"
        "1.\u0663\u0663",  # finding 10: Arabic-Indic digits were read as 1.33
        "1.33" * 1000,  # finding 10: read as 1.331
        "1.33.",
        "1." + "3" * 4301,  # finding 2: a traceback (int() refuses 4,300+ digits)
        "1.3333",
    ],
    ids=["2.1", "1", "1.x", "133", "empty", "arabic-indic", "repeated", "dot", "4301", "4-digit"],
)
def test_parse_version_refuses_with_one_short_line(text: str) -> None:
    with pytest.raises(ProfileError, match=r"expected 1\.MINOR") as refused:
        parse_version(text, "--kube-proxy-version")
    message = str(refused.value)
    assert message.startswith("--kube-proxy-version: ")
    assert "\n" not in message
    assert len(message) < 200


def test_a_long_value_is_cut_and_measured() -> None:
    text = "1." + "3" * 5000
    with pytest.raises(ProfileError, match="5,002 characters"):
        parse_version(text)
    assert len(text) > MAX_VERSION_CHARS


@pytest.mark.parametrize(("major", "minor", "expected"), [("1", "33", 33), ("1", "33+", 33),
                                                         ("1", "28-gke.100", 28)])  # fmt: skip
def test_parse_api_version_reads_provider_suffixes(major: str, minor: str, expected: int) -> None:
    assert parse_api_version(major, minor, "the API server's /version") == expected


@pytest.mark.parametrize(
    ("major", "minor"),
    [("1", ""), ("2", "0"), ("1", "3" * 5000), ("1", "\u0663\u0663"), ("\u0661", "33"),
     ("1", "abc")],
    ids=["empty", "major-2", "5000-digits", "arabic-indic", "arabic-major", "abc"],
)  # fmt: skip
def test_parse_api_version_refuses(major: str, minor: str) -> None:
    """Finding 3: a 5,000-digit minor reached int() outside any try and crashed serve."""
    with pytest.raises(ProfileError, match=r"the API server's /version .* does not read") as no:
        parse_api_version(major, minor, "the API server's /version")
    assert len(str(no.value)) < 200


def test_version_or_none() -> None:
    assert version_or_none("v1.32.4") == 32
    assert version_or_none("latest") is None


def test_parse_gates_as_component_base_does() -> None:
    assert parse_gates(
        "ServiceTrafficDistribution=true, PreferSameTrafficDistribution=False,,"
        "TopologyAwareHints=0,TopologyAwareHints=t"
    ) == {
        Gate.SERVICE_TRAFFIC_DISTRIBUTION: True,
        Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION: False,
        Gate.TOPOLOGY_AWARE_HINTS: True,
    }
    with pytest.raises(ProfileError, match="missing bool value for 'ServiceTrafficDistribution'"):
        parse_gates("ServiceTrafficDistribution")
    with pytest.raises(ProfileError, match="invalid value of 'TopologyAwareHints'='yes'"):
        parse_gates("TopologyAwareHints=yes")
    with pytest.raises(ProfileError, match="'SidecarContainers' is not a gate the rules read"):
        parse_gates("SidecarContainers=true")


def test_the_gate_table_matches_section_12() -> None:
    """First and last version, default-on version and locked versions of each gate."""
    rows = {
        gate: (
            spec.added_in,
            spec.removed_in,
            spec.on_by_default_from,
            spec.locked_from,
        )
        for gate, spec in GATES.items()
    }
    assert rows == {
        Gate.TOPOLOGY_AWARE_HINTS: (21, 36, 24, 33),
        Gate.SERVICE_TRAFFIC_DISTRIBUTION: (30, 36, 31, 33),
        Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION: (33, None, 34, 35),
    }
