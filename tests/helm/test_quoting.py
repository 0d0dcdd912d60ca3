"""No chart value becomes YAML of its own (issue 30, finding 4).

Every string a template writes goes through `quote` or `toYaml`, and values.schema.json refuses
newlines and control characters wherever Kubernetes has a rule for the text (names,
namespaces, labels, image references, URLs, list items). The tests walk values.yaml and the
schema generically, so a value added later is covered without a line here: each string value
(list items, map keys and values included) is set to a newline and a YAML document, and the
chart either refuses it by schema or renders the same objects and arguments, the payload held
as one string where a harmless marker would have been.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import helm_python as helm
import pytest

from tests.test_helm import (
    CHART,
    INGRESS_NGINX_PEER,
    VALUES_DEFAULTS,
    _chart,
    render_chart,
    the_container,
)

SCHEMA: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
TEMPLATES = CHART / "templates"

# A position holding a string: keys and list indexes from the top of the values, where the
# last part NEW_KEY stands for a key added to the map (the payload is then the key).
Position = tuple[str | int, ...]
NEW_KEY = "<new key>"
# Stands where the payload goes, in a render that must otherwise equal the payload's.
MARKER = "qqqmarker"

PAYLOADS = {
    # A second document: a Secret the release would create. Written unquoted anywhere, it
    # changes the objects; the other two are what the report showed in particular places.
    "document": "\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: injected\n",
    # Another item after a list item: an argument of the exporter's.
    "argument": "\n- --web.config.file=/etc/passwd",
    # A key after a mapping's value: the pod on the node's network.
    "field": "\nhostNetwork: true",
}
# What a YAML plain scalar loses: a comment (` #`) and a mapping (`: `).
VERBATIM = " #c: d"

# Every feature on and every optional string set, so that each value reaches a template.
EVERYTHING: dict[str, Any] = {
    "image": {"repository": "registry.example/topology-hints-exporter", "tag": "1.0.0"},
    "imagePullSecrets": [{"name": "pull"}],
    "nameOverride": "thx",
    "fullnameOverride": "",
    "commonLabels": {"team": "platform"},
    "sharding": {"enabled": True},
    "replicas": 2,
    "externalUrl": "https://ops.example.com/topology",
    "allServices": True,
    "namespaces": ["shop", "payments"],
    "namespacesExclude": ["kube-system"],
    "metricAllowlist": ["topology_hints_service_.*"],
    "metricDenylist": ["topology_hints_zone_.*"],
    "logLevel": "debug",
    "logFormat": "console",
    "extraArgs": ["--max-input-bytes=64Mi"],
    "extraEnv": [{"name": "TZ", "value": "UTC"}],
    "extraVolumes": [{"name": "web", "secret": {"secretName": "web-config"}}],
    "extraVolumeMounts": [{"name": "web", "mountPath": "/etc/web"}],
    "dataplaneDetection": {"enabled": True, "namespace": "kube-system"},
    "serviceAccount": {
        "name": "exporter",
        "annotations": {"example.com/role": "reader"},
        "labels": {"team": "platform"},
    },
    "service": {"annotations": {"example.com/note": "yes"}, "labels": {"tier": "monitoring"}},
    "podAnnotations": {"example.com/note": "yes"},
    "podLabels": {"team": "platform"},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["infra"]}]}]}}},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "ScheduleAnyway"}],
    "priorityClassName": "system-cluster-critical",
    "networkPolicy": {"reverseProxy": [INGRESS_NGINX_PEER]},
    "serviceMonitor": {
        "enabled": True,
        "additionalLabels": {"team": "platform"},
        "relabelings": [{"action": "replace", "targetLabel": "cluster", "replacement": "eu"}],
        "metricRelabelings": [{"action": "drop", "sourceLabels": ["__name__"], "regex": "x_.*"}],
    },
    "prometheusRule": {
        "enabled": True,
        "additionalLabels": {"role": "alert-rules"},
        "excludeGroups": ["topology-hints-traffic-linkerd"],
    },
    "releaseLabel": "kube-prometheus-stack",
    "dashboards": {"enabled": True, "annotations": {"grafana_folder": "K8s"},
                   "namespace": "grafana"},
    "grafanaOperator": {"enabled": True, "folder": "Kubernetes"},
}  # fmt: skip
# The other branches: explicit data planes, a ServiceAccount of the user's, an image digest.
EXPLICIT: dict[str, Any] = {
    **EVERYTHING,
    "image": {"repository": "registry.example/the", "digest": "sha256:" + "ab" * 32},
    "sharding": {"enabled": False},
    "dataplaneDetection": {"enabled": False, "namespace": "kube-system"},
    "dataplanes": ["kube-proxy", "cilium"],
    "serviceAccount": {"create": False, "name": "exporter"},
}
BASES = {"everything": EVERYTHING, "explicit": EXPLICIT}


def merged(defaults: Any, overrides: Any) -> Any:
    """The values Helm hands the templates: maps merged, anything else replaced."""
    if isinstance(defaults, dict) and isinstance(overrides, dict):
        out = dict(defaults)
        for key, value in overrides.items():
            out[key] = merged(defaults.get(key), value)
        return out
    return copy.deepcopy(overrides)


def resolved(schema: Any) -> dict[str, Any]:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = SCHEMA["definitions"][schema["$ref"].removeprefix("#/definitions/")]
    return schema if isinstance(schema, dict) else {}


def is_string(schema: Any) -> bool:
    return resolved(schema).get("type") == "string"


def string_positions(schema: Any, value: Any, at: Position = ()) -> Iterator[Position]:
    """Every string of `value` (list items and map keys too), and the strings the schema
    declares where `value` has none yet (an empty list of names, an empty label map)."""
    schema = resolved(schema)
    if isinstance(value, str):
        yield at
    elif isinstance(value, dict):
        yield from _map_positions(schema, value, at)
    elif isinstance(value, list):
        items = schema.get("items", {})
        for index, item in enumerate(value):
            yield from string_positions(items, item, (*at, index))
        if not value and is_string(items):
            yield (*at, 0)
        elif not value:
            declared = resolved(items).get("properties", {})
            yield from ((*at, 0, key) for key, item in declared.items() if is_string(item))


def _map_positions(
    schema: dict[str, Any], value: dict[str, Any], at: Position
) -> Iterator[Position]:
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        yield from string_positions(properties.get(key, extra or {}), item, (*at, key))
    yield from (
        (*at, key) for key, item in properties.items() if key not in value and is_string(item)
    )
    yield (*at, NEW_KEY)
    if not value and is_string(extra):
        yield (*at, "added")


def with_string(values: dict[str, Any], at: Position, suffix: str) -> dict[str, Any]:
    """A copy of `values` whose string at `at` has `suffix` appended ("x" if it was empty)."""
    values = copy.deepcopy(values)
    node: Any = values
    for part, following in itertools.pairwise(at):
        fresh: Any = [] if isinstance(following, int) else {}
        if isinstance(node, list):
            assert isinstance(part, int)
            if part == len(node):
                node.append(fresh)
            node = node[part]
        else:
            node = node.setdefault(part, fresh)
    last = at[-1]
    if last == NEW_KEY:
        node["x" + suffix] = "x"
    elif isinstance(node, list) and last == len(node):
        node.append("x" + suffix)
    else:
        node[last] = (node.get(last) if isinstance(node, dict) else node[last]) or "x"
        node[last] += suffix
    return values


def name(at: Position) -> str:
    return ".".join(str(part) for part in at)


CASES = [
    (base, at)
    for base, overrides in BASES.items()
    for at in string_positions(SCHEMA, merged(VALUES_DEFAULTS, overrides))
]


def _validate(values: dict[str, Any]) -> None:
    _chart().validate_schema(copy.deepcopy(values))


def accepted(values: dict[str, Any]) -> bool:
    try:
        _validate(values)
    except helm.HelmValuesError:
        return False
    return True


def strings_replaced(value: Any, old: str, new: str) -> Any:
    """`value` with `old` replaced by `new` in every string, keys included."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {
            strings_replaced(k, old, new): strings_replaced(v, old, new) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [strings_replaced(item, old, new) for item in value]
    return value


def kinds_and_names(docs: Any) -> list[tuple[str, str]]:
    return sorted((doc["kind"], doc["metadata"]["name"]) for doc in docs)


def assert_held_as_one_string(base: str, at: Position, suffix: str) -> bool:
    """The payload `suffix` at `at` is refused by the schema (False), or renders exactly what a
    marker there renders, with the marker's text replaced by the payload (True)."""
    values = merged(VALUES_DEFAULTS, BASES[base])
    with_payload = with_string(values, at, suffix)
    if not accepted(with_payload):
        return False
    with_marker = with_string(values, at, MARKER)
    assert accepted(with_marker), f"{name(at)}: the schema takes {suffix!r} but not {MARKER!r}"
    try:
        marked = render_chart(with_marker)
    except helm.HelmRenderError:
        # The chart refuses the marker itself (dataplanes with detection): the payload too.
        with pytest.raises(helm.HelmRenderError):
            render_chart(with_payload)
        return True
    rendered = render_chart(with_payload)
    expected = strings_replaced(marked, MARKER, suffix)
    # The same objects, and the same arguments, the payload inside one of them at most.
    assert kinds_and_names(rendered) == kinds_and_names(expected), name(at)
    assert the_container(rendered)["args"] == the_container(expected)["args"], name(at)
    assert strings_replaced(list(rendered), MARKER, suffix) == expected, name(at)
    return True


# The values of the report (issue 30, finding 4), as the walk names them.
_REPORTED_EVERYTHING: tuple[Position, ...] = (
    ("dashboards", "namespace"), ("dashboards", "label"), ("dataplaneDetection", "namespace"),
    ("priorityClassName",), ("image", "tag"), ("namespaces", 0), ("namespacesExclude", 0),
    ("metricAllowlist", 0), ("metricDenylist", 0), ("externalUrl",), ("fullnameOverride",),
    ("serviceAccount", "name"), ("releaseLabel",), ("extraArgs", 0),
    ("commonLabels", "team"), ("podAnnotations", NEW_KEY), ("imagePullSecrets", 0, "name"),
)  # fmt: skip
REPORTED: list[tuple[str, Position]] = [("everything", at) for at in _REPORTED_EVERYTHING] + [
    ("explicit", ("dataplanes", 0)),
    ("explicit", ("image", "digest")),
]


def test_the_walk_reaches_the_reported_values() -> None:
    """The generic walk covers every value of the report, list items and map keys included."""
    reached = set(CASES)
    for case in REPORTED:
        assert case in reached, case
    assert len(CASES) > 150


@pytest.mark.parametrize(("base", "at"), CASES, ids=[f"{b}:{name(at)}" for b, at in CASES])
def test_a_newline_and_a_document_stay_one_string(base: str, at: Position) -> None:
    """Each string value followed by a newline and a YAML document is refused by
    values.schema.json, or adds no object, argument or field: it is one string where the
    value was."""
    assert_held_as_one_string(base, at, PAYLOADS["document"])


@pytest.mark.parametrize("payload", ["argument", "field"])
@pytest.mark.parametrize(("base", "at"), REPORTED, ids=[f"{b}:{name(at)}" for b, at in REPORTED])
def test_a_newline_and_an_argument_or_a_field_stay_one_string(
    base: str, at: Position, payload: str
) -> None:
    """The report's values followed by a newline and another argument or a pod field
    (hostNetwork) are refused, or stay one string."""
    assert_held_as_one_string(base, at, PAYLOADS[payload])


@pytest.mark.parametrize(("base", "at"), CASES, ids=[f"{b}:{name(at)}" for b, at in CASES])
def test_comments_and_colons_survive_verbatim(base: str, at: Position) -> None:
    """` #` and `: ` in a value are refused, or reach the objects verbatim (not a comment that
    cuts the value, not a mapping)."""
    assert_held_as_one_string(base, at, VERBATIM)


def test_free_text_values_keep_comments_and_colons() -> None:
    """The values that are free text take ` #` and `: `, and the objects hold them as given."""
    free: list[tuple[str, Position]] = [
        ("everything", ("extraArgs", 0)),
        ("everything", ("podAnnotations", "example.com/note")),
        ("everything", ("dashboards", "annotations", "grafana_folder")),
        ("everything", ("grafanaOperator", "folder")),
        ("everything", ("extraEnv", 0, "value")),
    ]
    for base, at in free:
        assert assert_held_as_one_string(base, at, VERBATIM), name(at)
    docs = render_chart(with_string(EVERYTHING, ("extraArgs", 0), VERBATIM))
    assert the_container(docs)["args"][-1] == "--max-input-bytes=64Mi #c: d"


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"dashboards": {"namespace": "grafana\n---\nkind: Secret"}}, "/dashboards/namespace"),
        ({"dashboards": {"label": "grafana_dashboard\nx: y"}}, "/dashboards/label"),
        ({"dataplaneDetection": {"namespace": "kube-system\n"}}, "/dataplaneDetection/namespace"),
        ({"priorityClassName": "high\nhostNetwork: true"}, "/priorityClassName"),
        ({"image": {"tag": "1.0\ncommand: [sh]"}}, "/image/tag"),
        ({"namespaces": ["shop\n- --web.config.file=/etc/passwd"]}, "/namespaces/0"),
        ({"metricAllowlist": ["a.*\n- --x"]}, "/metricAllowlist/0"),
        ({"metricDenylist": ["a,b"]}, "/metricDenylist/0"),
        ({"dataplanes": ["cilium\n- --x"]}, "/dataplanes/0"),
        ({"externalUrl": "https://x/a: b"}, "/externalUrl"),
        ({"externalUrl": "https://x/a #b"}, "/externalUrl"),
        ({"externalUrl": "https://x/a?q=1"}, "/externalUrl"),
        ({"fullnameOverride": "Exporter"}, "/fullnameOverride"),
        ({"serviceAccount": {"name": "a b"}}, "/serviceAccount/name"),
        ({"commonLabels": {"team": "a b"}}, "/commonLabels/team"),
        ({"releaseLabel": "kube-prometheus-stack\n"}, "/releaseLabel"),
        ({"extraArgs": ["--x=\u0007"]}, "/extraArgs/0"),
        ({"image": {"repository": "Registry.example/x y"}}, "/image/repository"),
    ],
)
def test_schema_refuses_what_kubernetes_would(values: dict[str, Any], complaint: str) -> None:
    """Names and namespaces are DNS-1123 (Services DNS-1035), labels follow the label rules,
    URLs and list items have no whitespace or control characters: refused, naming the value."""
    with pytest.raises(helm.HelmValuesError, match=re.escape(complaint)):
        _validate(values)


# An output action of a template: what `{{ ... }}` writes, unless it is control flow.
_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.DOTALL)
_CONTROL = re.compile(r"^(/\*|if |else|end$|with |range |define |fail |\$\w+\s*:?=)")
_SAFE = re.compile(
    r"\|\s*quote$"  # one string, double-quoted (Go's %q, which YAML reads back)
    r"|\btoYaml\b[^|]*(\|\s*n?indent \d+)?$"  # YAML written by a YAML writer
    r'|^include "the\.(labels|selectorLabels|args)" \$?\.?\s*(\|\s*nindent \d+)?$'
)
# The helpers that write YAML; the others return one value, quoted where it is used.
_YAML_HELPERS = re.compile(
    r'\{\{- define "the\.(?:labels|selectorLabels|args)" -\}\}(.*?)\{\{- end -\}\}', re.DOTALL
)


def test_every_template_writes_strings_quoted_or_as_yaml() -> None:
    """Each `{{ ... }}` that writes into a manifest ends in `quote`, is `toYaml`, or includes
    a helper that does the same: nothing a value holds is read as YAML."""
    checked = 0
    for path in sorted(TEMPLATES.iterdir()):
        text = path.read_text()
        if path.name == "_helpers.tpl":
            text = "".join(_YAML_HELPERS.findall(text))
        for action in _ACTION.findall(text):
            if _CONTROL.match(action):
                continue
            assert _SAFE.search(action), (
                f"{path.name}: {{{{ {action} }}}} is neither quoted nor YAML"
            )
            checked += 1
    assert checked > 60
