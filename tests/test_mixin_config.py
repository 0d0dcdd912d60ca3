"""The mixin refuses a `_config` that would change what an alert means (issue 30, finding 14).

`_config` values are pasted into PromQL and into Prometheus' annotation templates:
`flapThreshold: "3 or vector(1)"` or a selector that closes its braces still passes promtool,
and a runbook URL with `{{ query }}` is expanded by Prometheus. mixin/checks.libsonnet checks
every key; rendering any output then fails with one message naming each wrong key and its
rule.
"""

from __future__ import annotations

import json
import re
from typing import Any

import _jsonnet
import pytest

from exporter.metrics.monitoring import MIXIN_CONFIG_NAMES
from tests.test_mixin import MIXIN_DIR, OVERRIDES, render_mixin

PREFIX = "topology-hints-exporter mixin: "
SELECTOR_RULE = "must be PromQL label matchers"
URL_RULE = "must be an http:// or https:// URL with %s (the alert name) once"
DURATION_RULE = "must be a Prometheus duration longer than zero"
BOOLEAN_RULE = "must be true or false"

# (key, a wrong value, the rule the message gives): each key has at least one.
INVALID: list[tuple[str, Any, str]] = [
    # The report's: PromQL in a threshold, a Prometheus template in a URL.
    ("flapThreshold", "3 or vector(1)", "must be a whole number of at least 2"),
    ("runbookURLPattern", "https://runbooks.example/{{ query }}/%s", URL_RULE),
    ("flapThreshold", 2.5, "must be a whole number of at least 2"),
    ("flapThreshold", 1, "must be a whole number of at least 2"),
    ("flapThreshold", True, "must be a whole number of at least 2"),
    ("topologyHintsExporterSelector", 'job="x"} or vector(1) or up{job="x"', SELECTOR_RULE),
    ("topologyHintsExporterSelector", "", SELECTOR_RULE),
    ("topologyHintsExporterSelector", "job=x", SELECTOR_RULE),
    ("topologyHintsExporterSelector", 'job="x",', SELECTOR_RULE),
    ("topologyHintsExporterSelector", 'job=="x"', SELECTOR_RULE),
    ("topologyHintsExporterSelector", 'job="x\ny"', SELECTOR_RULE),
    ("topologyHintsExporterSelector", 'job="x" namespace="y"', SELECTOR_RULE),
    ("topologyHintsExporterSelector", '1job="x"', SELECTOR_RULE),
    ("topologyHintsExporterSelector", 'job="x', SELECTOR_RULE),
    ("topologyHintsExporterSelector", 42, SELECTOR_RULE),
    ("clusterLabel", "cluster) or vector(1", "must be a Prometheus label name"),
    ("clusterLabel", "", "must be a Prometheus label name"),
    ("clusterLabel", "k8s-cluster", "must be a Prometheus label name"),
    ("clusterLabel", "__name__", "must be a Prometheus label name"),
    ("clusterLabel", "0cluster", "must be a Prometheus label name"),
    ("showMultiCluster", "false", BOOLEAN_RULE),
    ("runbookURLPattern", "https://runbooks.example/", URL_RULE),
    ("runbookURLPattern", "https://runbooks.example/%s/%s", URL_RULE),
    ("runbookURLPattern", "https://runbooks.example/%d", URL_RULE),
    ("runbookURLPattern", "https://runbooks.example/a%2Fb/%s", URL_RULE),
    ("runbookURLPattern", "https://runbooks.example/%s?x={{ $labels.service }}", URL_RULE),
    ("runbookURLPattern", "https://runbooks.example/a b/%s", URL_RULE),
    ("runbookURLPattern", 'https://runbooks.example/"%s', URL_RULE),
    ("runbookURLPattern", "https://runbooks.example/\n%s", URL_RULE),
    ("runbookURLPattern", "ftp://runbooks.example/%s", URL_RULE),
    ("runbookURLPattern", "https:///%s", URL_RULE),
    ("runbookURLPattern", "runbooks/%s", URL_RULE),
    ("overloadLimit", "1.2 or vector(1)", "must be a number above 1"),
    ("overloadLimit", 1, "must be a number above 1"),
    ("overloadLimit", 0.5, "must be a number above 1"),
    ("flapWindow", "1h] or vector(1) or foo[1h", DURATION_RULE),
    ("flapWindow", "", DURATION_RULE),
    ("flapWindow", "0s", DURATION_RULE),
    ("flapWindow", "1x", DURATION_RULE),
    ("flapWindow", "30m1h", DURATION_RULE),
    ("flapWindow", "1h1h", DURATION_RULE),
    ("flapWindow", "h", DURATION_RULE),
    ("flapWindow", "1.5h", DURATION_RULE),
    ("flapWindow", 3600, DURATION_RULE),
    ("istioZtunnelTraffic", 1, BOOLEAN_RULE),
    ("linkerdTraffic", "yes", BOOLEAN_RULE),
    ("measuredCrossZoneMargin", "0.25 or vector(1)", "must be a number from 0 to below 1"),
    ("measuredCrossZoneMargin", -0.1, "must be a number from 0 to below 1"),
    ("measuredCrossZoneMargin", 1, "must be a number from 0 to below 1"),
    ("measuredMinBytesPerSecond", "10240 or vector(1)", "must be a number of bytes per second"),
    ("measuredMinBytesPerSecond", -1, "must be a number of bytes per second"),
]

# Values the checks must let through: each spelling the rules allow.
VALID: list[tuple[str, Any]] = [
    ("topologyHintsExporterSelector", 'job="x"'),
    ("topologyHintsExporterSelector", 'job = "x" , namespace!="kube-system",pod=~"e-.*",a!~"b"'),
    ("topologyHintsExporterSelector", r'job="a \"quoted\" \\ name"'),
    ("topologyHintsExporterSelector", 'job=~"topology-hints(-exporter)?", cluster=""'),
    ("clusterLabel", "k8s_cluster"),
    ("clusterLabel", "_cluster"),
    ("runbookURLPattern", "http://wiki.internal:8080/runbooks/%s.md"),
    ("runbookURLPattern", "https://runbooks.example/100%%/%s#top"),
    ("runbookURLPattern", "https://runbooks.example/?alert=%s&x=y"),
    ("overloadLimit", 1.01),
    ("overloadLimit", 3),
    ("flapWindow", "90s"),
    ("flapWindow", "1h30m"),
    ("flapWindow", "1d12h"),
    ("flapWindow", "1w"),
    ("flapWindow", "0h10m"),
    ("flapThreshold", 2),
    ("flapThreshold", 10.0),
    ("measuredCrossZoneMargin", 0),
    ("measuredCrossZoneMargin", 0.99),
    ("measuredMinBytesPerSecond", 0),
    ("measuredMinBytesPerSecond", 1024.5),
]


# The defaults and the checks, with outputs of one field each, standing in for the mixin:
# its rules and dashboards are 4,000 lines to parse at each evaluation.
CHECKED_CONFIG = (
    "(import 'config.libsonnet') + (import 'checks.libsonnet') + { prometheusAlerts+:: "
    "{ groups: [] }, prometheusRules+:: { groups: [] }, grafanaDashboards+:: { 'a.json': {} } }"
)
MIXIN = "(import 'mixin.libsonnet')"


def evaluate(config: dict[str, Any], output: str = "prometheusAlerts", base: str = MIXIN) -> str:
    """The type of `output`'s first field, with `config` merged into `_config`: reading a field
    runs the checks without rendering the rules or dashboards (tests/test_mixin.py does)."""
    snippet = (
        f"local output = ({base} + {{ _config+:: {json.dumps(config)} }}).{output};\n"
        "std.type(output[std.objectFieldsAll(output)[0]])"
    )
    return str(_jsonnet.evaluate_snippet("config.jsonnet", snippet, jpathdir=[str(MIXIN_DIR)]))


def refusal(config: dict[str, Any], output: str = "prometheusAlerts", base: str = MIXIN) -> str:
    """The error evaluating `output` of `base` with `config` merged into `_config`."""
    with pytest.raises(RuntimeError) as raised:
        evaluate(config, output, base)
    return str(raised.value)


def checked_keys() -> list[str]:
    keys: list[str] = json.loads(
        _jsonnet.evaluate_snippet(
            "keys.jsonnet",
            "(import 'mixin.libsonnet').topologyHintsConfigChecks",
            jpathdir=[str(MIXIN_DIR)],
        )
    )
    return keys


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    INVALID,
    ids=[f"{key}={json.dumps(value)}" for key, value, _ in INVALID],
)
def test_a_wrong_value_fails_with_its_rule(key: str, value: Any, rule: str) -> None:
    """The evaluation fails, naming the key, its rule and the value given."""
    message = refusal({key: value}, base=CHECKED_CONFIG)
    expected = f"{PREFIX}_config.{key} {rule}"
    assert expected in message
    assert f"not {json.dumps(value, separators=(',', ':'))}" in message
    # Only the wrong key is named.
    assert message.count("_config.") == 1, message


@pytest.mark.parametrize(("key", "value"), VALID, ids=[f"{k}={json.dumps(v)}" for k, v in VALID])
def test_a_value_the_rules_allow_renders(key: str, value: Any) -> None:
    """Every spelling the rules allow passes the checks of every output."""
    for output in ("prometheusAlerts", "prometheusRules", "grafanaDashboards"):
        assert json.loads(evaluate({key: value}, output, CHECKED_CONFIG)) in {"array", "object"}


@pytest.mark.parametrize(
    ("key", "value", "rule"), INVALID[:2], ids=["flapThreshold", "runbookURLPattern"]
)
def test_the_reported_values_fail_the_whole_mixin(key: str, value: Any, rule: str) -> None:
    """The report's values fail the mixin as users import it, before any rule is written."""
    assert f"{PREFIX}_config.{key} {rule}" in refusal({key: value})


def test_the_default_and_the_overrides_render() -> None:
    """The default `_config` and the documented overrides pass every check."""
    assert render_mixin()["alerts"]["groups"]
    assert render_mixin(OVERRIDES)["rules"]["groups"]


@pytest.mark.parametrize("output", ["prometheusAlerts", "prometheusRules", "grafanaDashboards"])
def test_every_output_is_checked(output: str) -> None:
    """Alerts, recording rules and dashboards each refuse a wrong `_config`."""
    assert f"{PREFIX}_config.flapThreshold" in refusal({"flapThreshold": "3"}, output)


def test_every_wrong_key_is_named_in_one_message() -> None:
    """Several wrong keys: one message names them all, and a key removed is missing."""
    message = refusal({"flapThreshold": 0, "clusterLabel": "a-b"})
    assert re.search(r"_config\.clusterLabel .*; _config\.flapThreshold ", message), message
    snippet = "((import 'mixin.libsonnet') + { _config:: { clusterLabel: 'cluster' } })"
    with pytest.raises(RuntimeError, match=r"_config\.flapWindow is missing"):
        _jsonnet.evaluate_snippet(
            "c.jsonnet", snippet + ".prometheusRules", jpathdir=[str(MIXIN_DIR)]
        )


def test_every_config_key_has_a_check() -> None:
    """The checks cover exactly the `_config` keys, and each key has a wrong value here."""
    assert sorted(checked_keys()) == sorted(MIXIN_CONFIG_NAMES.values())
    assert {key for key, _, _ in INVALID} == set(MIXIN_CONFIG_NAMES.values())
