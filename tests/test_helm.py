"""The Helm chart in deploy/helm: it lints and renders with the real Helm library (the Helm
v4 SDK, helm-python-sdk), and its objects are those of the kustomize targets.

With default values and the release named topology-hints-exporter, the chart deploys what
`kubectl kustomize deploy/base` does, object for object, with these intended differences:
no Namespace (Helm installs into one, `--create-namespace`), Helm's standard labels, and
selectors that add app.kubernetes.io/instance so that two releases never select each other's
pods. tests/test_deploy.py checks the kustomize side.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from exporter import __version__
from tests.conftest import PROJECT_ROOT, exporter_command, require_binary
from tests.test_deploy import (
    ALLOWED_RULES,
    IMAGE,
    METRICS_PORT,
    METRICS_PORT_NAME,
    _render_cached,
    container_port,
    matches,
    metrics_service,
    objects_of,
    only,
    render,
    selector_matches,
    workload,
)

CHART = PROJECT_ROOT / "deploy" / "helm" / "topology-hints-exporter"
RELEASE = "topology-hints-exporter"
NAMESPACE = "topology-hints-exporter"
DASHBOARDS = sorted((PROJECT_ROOT / "dashboards").glob("*.json"))
RULE_FILES = sorted((PROJECT_ROOT / "alerts").glob("*.yaml"))
PROMETHEUS = {"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"}
INGRESS_NGINX_PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "ingress-nginx"}},
}

# The value sets the chart is linted and rendered with.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "sharding": {"sharding": {"enabled": True}, "replicas": 3},
    "monitoring": {
        "serviceMonitor": {
            "enabled": True,
            "additionalLabels": {"team": "platform"},
            "interval": "1m",
            "scrapeTimeout": "50s",
            "relabelings": [
                {"action": "replace", "targetLabel": "cluster", "replacement": "prod-eu"}
            ],
            "metricRelabelings": [
                {"action": "drop", "sourceLabels": ["__name__"], "regex": "python_.*"}
            ],
        },
        "prometheusRule": {"enabled": True, "additionalLabels": {"role": "alert-rules"}},
        "dashboards": {"enabled": True, "annotations": {"grafana_folder": "Kubernetes"}},
        "releaseLabel": "kube-prometheus-stack",
    },
    "grafanaOperator": {
        "grafanaOperator": {
            "enabled": True,
            "instanceSelector": {"matchLabels": {"dashboards": "main"}},
            "folder": "Kubernetes",
        }
    },
    "networkPolicyOff": {"networkPolicy": {"enabled": False}},
    "reverseProxy": {
        "externalUrl": "https://ops.example.com/topology",
        "networkPolicy": {"reverseProxy": [INGRESS_NGINX_PEER]},
    },
    "dataplaneDetection": {"dataplaneDetection": {"enabled": True}},
    "shardedDetection": {
        "sharding": {"enabled": True},
        "replicas": 3,
        "dataplaneDetection": {"enabled": True},
    },
    "flags": {
        "externalUrl": "https://ops.example.com/topology",
        "allServices": True,
        "namespaces": ["shop", "payments"],
        "namespacesExclude": ["kube-system"],
        "metricAllowlist": ["topology_hints_service_.*"],
        "metricDenylist": ["topology_hints_zone_.*"],
        "dataplanes": ["kube-proxy", "cilium"],
        "logLevel": "debug",
        "logFormat": "console",
        "extraArgs": ["--max-input-bytes=64Mi"],
    },
}


VALUES_DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())


@functools.cache
def _chart() -> helm.Chart:
    return helm.Chart.load(CHART)


def render_chart(
    values: dict[str, Any], *, release: str = RELEASE, namespace: str = NAMESPACE
) -> tuple[dict[str, Any], ...]:
    """The objects the chart renders (no cluster involved), NOTES.txt left out."""
    rendered = _chart().render(copy.deepcopy(values), name=release, namespace=namespace)
    return tuple(
        doc
        for template, manifest in sorted(rendered.items())
        if not template.endswith("NOTES.txt")
        # libyaml's loader: the pure-Python one takes 50 ms per render (the dashboards' JSON).
        for doc in yaml.load_all(manifest, Loader=yaml.CSafeLoader)
        if doc
    )


def notes(values: dict[str, Any]) -> str:
    rendered = _chart().render(copy.deepcopy(values), name=RELEASE, namespace=NAMESPACE)
    (text,) = (manifest for name, manifest in rendered.items() if name.endswith("NOTES.txt"))
    return text


def identity(doc: dict[str, Any]) -> tuple[str, str, str | None]:
    return doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace")


def the_container(docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    (container,) = workload(docs)["spec"]["template"]["spec"]["containers"]
    return dict(container)


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """(API group, resource, resource name or "*", verb) for every grant of RULES."""
    return {
        (group, resource, name, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for name in rule.get("resourceNames", ["*"])
        for verb in rule["verbs"]
    }


def kustomized(tmp_path: Path, resources: list[str], components: list[str]) -> Any:
    """`kubectl kustomize` of a kustomization of TARGETS plus COMPONENTS of this repository."""
    root = Path(os.path.relpath(PROJECT_ROOT, tmp_path))
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [str(root / target) for target in resources],
                "components": [str(root / component) for component in components],
            }
        )
    )
    return _render_cached(require_binary("kubectl"), str(tmp_path))


@pytest.mark.parametrize("name", VALUE_SETS)
def test_chart_lints_strictly(name: str) -> None:
    """`helm lint --strict` finds nothing above "info" with each value set (schema included)."""
    report = helm.lint(CHART, copy.deepcopy(VALUE_SETS[name]), strict=True)
    assert report["errors"] == []
    assert [message for message in report["messages"] if message["severity"] >= 2] == []


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"replica": 2}, "replica"),
        ({"serviceMonitor": {"enable": True}}, "enable"),
        ({"replicas": "3"}, "replicas"),
        ({"image": {"digest": "latest"}}, "digest"),
        ({"logLevel": "verbose"}, "logLevel"),
        ({"extraArgs": ["serve"]}, "extraArgs"),
        ({"networkPolicy": {"reverseProxy": [{}]}}, "reverseProxy"),
    ],
)
def test_values_schema_rejects_typos_and_wrong_types(
    values: dict[str, Any], complaint: str
) -> None:
    """values.schema.json refuses unknown keys, wrong types and bad values, naming the key."""
    with pytest.raises(helm.HelmValuesError, match=complaint):
        _chart().validate_schema(values)
    with pytest.raises(helm.HelmError):
        render_chart(values)


def test_chart_versions_follow_the_package() -> None:
    """The chart's version and appVersion are the package's, so the default image tag is too."""
    metadata = _chart().metadata
    assert metadata["version"] == metadata["appVersion"] == __version__
    assert the_container(render_chart({}))["image"] == f"{IMAGE}:{__version__}"


def test_image_values() -> None:
    """image.tag replaces appVersion; image.digest pins the image by digest."""
    digest = "sha256:" + "ab" * 32
    tagged = render_chart({"image": {"repository": "registry.example/the", "tag": "1.2.3"}})
    assert the_container(tagged)["image"] == "registry.example/the:1.2.3"
    pinned = render_chart({"image": {"digest": digest, "pullPolicy": "Always"}})
    assert the_container(pinned)["image"] == f"{IMAGE}@{digest}"
    assert the_container(pinned)["imagePullPolicy"] == "Always"
    secrets = render_chart({"imagePullSecrets": [{"name": "pull"}]})
    assert workload(secrets)["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "pull"}]


def comparable(docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """What must agree between the chart and kustomize: names, pods, RBAC, Services, policy."""
    pod = workload(docs)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    policy = objects_of(docs, "NetworkPolicy")
    service = metrics_service(docs)
    return {
        "objects": sorted(identity(doc) for doc in docs if doc["kind"] != "Namespace"),
        "replicas": workload(docs)["spec"]["replicas"],
        "pod": {key: value for key, value in pod.items() if key != "containers"},
        "container": container,
        "cluster_role": granted(only(docs, "ClusterRole")["rules"]),
        "roles": sorted(
            (identity(role), sorted(granted(role["rules"]))) for role in objects_of(docs, "Role")
        ),
        "bindings": sorted(
            (identity(binding), binding["roleRef"]["name"], json.dumps(binding["subjects"]))
            for binding in objects_of(docs, "ClusterRoleBinding") + objects_of(docs, "RoleBinding")
        ),
        "service": (service["spec"]["ports"], service["metadata"].get("annotations")),
        "policy": [(p["spec"]["policyTypes"], p["spec"]["ingress"]) for p in policy],
    }


def test_default_chart_deploys_what_the_kustomize_base_does() -> None:
    """Same objects (kinds, names, namespaces), same pod, container, RBAC, Service and policy.

    Differences by intent: the Namespace (Helm's --create-namespace makes it) and labels.
    """
    chart = comparable(render_chart({}))
    base = comparable(render("deploy/base"))
    assert chart == base
    assert ("Namespace", NAMESPACE, None) in {identity(doc) for doc in render("deploy/base")}


def test_sharded_chart_deploys_what_the_sharded_overlay_does() -> None:
    """sharding with 3 replicas = deploy/overlays/sharded (StatefulSet, headless Service)."""
    chart_docs = render_chart(VALUE_SETS["sharding"])
    assert comparable(chart_docs) == comparable(render("deploy/overlays/sharded"))
    spec = workload(chart_docs)["spec"]
    assert spec["podManagementPolicy"] == "Parallel"
    (headless,) = (
        doc for doc in objects_of(chart_docs, "Service") if doc["spec"].get("clusterIP") == "None"
    )
    assert headless["metadata"]["name"] == spec["serviceName"]
    assert matches(headless["spec"]["selector"], spec["template"]["metadata"]["labels"])


@pytest.mark.parametrize(
    ("name", "target"),
    [("dataplaneDetection", "deploy"), ("shardedDetection", "deploy/overlays/sharded")],
)
def test_dataplane_detection_deploys_what_the_component_does(
    name: str, target: str, tmp_path: Path
) -> None:
    """dataplaneDetection.enabled = deploy/components/dataplane-detection on the same install."""
    with_component = kustomized(tmp_path, [target], ["deploy/components/dataplane-detection"])
    chart_docs = render_chart(VALUE_SETS[name])
    assert comparable(chart_docs) == comparable(with_component)
    assert "--dataplane=auto" in the_container(chart_docs)["args"]


def test_dataplane_detection_and_explicit_data_planes_conflict() -> None:
    """`--dataplane=auto` and a list of data planes cannot both be asked for: one clear error."""
    values = {"dataplaneDetection": {"enabled": True}, "dataplanes": ["cilium"]}
    with pytest.raises(helm.HelmRenderError, match="dataplaneDetection"):
        render_chart(values)


@pytest.mark.parametrize("name", VALUE_SETS)
def test_rbac_is_list_and_watch_only(name: str) -> None:
    """The ClusterRole grants list/watch on the four resources and nothing else; the only
    other grant is detection's `get` on four named objects of kube-system."""
    docs = render_chart(VALUE_SETS[name])
    role = only(docs, "ClusterRole")
    assert "aggregationRule" not in role
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
    assert {(g, r, v) for g, r, _, v in granted(role["rules"])} == ALLOWED_RULES
    binding = only(docs, "ClusterRoleBinding")
    account = only(docs, "ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    assert workload(docs)["spec"]["template"]["spec"]["serviceAccountName"] == account["name"]
    roles = objects_of(docs, "Role")
    if VALUE_SETS[name].get("dataplaneDetection", {}).get("enabled"):
        (detection,) = roles
        assert detection["metadata"]["namespace"] == "kube-system"
        assert granted(detection["rules"]) == {
            ("apps", "daemonsets", "kube-proxy", "get"),
            ("apps", "daemonsets", "cilium", "get"),
            ("apps", "daemonsets", "calico-node", "get"),
            ("", "configmaps", "cilium-config", "get"),
        }
    else:
        assert roles == []


def test_rbac_and_service_account_can_be_brought_by_the_user() -> None:
    """rbac.create=false leaves the grants out; serviceAccount.create=false uses a named one."""
    docs = render_chart(
        {"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "mine"}}
    )
    kinds = {doc["kind"] for doc in docs}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    assert "ServiceAccount" not in kinds
    assert workload(docs)["spec"]["template"]["spec"]["serviceAccountName"] == "mine"
    with pytest.raises(helm.HelmRenderError, match=r"serviceAccount\.name"):
        render_chart({"serviceAccount": {"create": False}})


def test_rule_and_dashboard_files_are_copies_of_the_generated_ones() -> None:
    """files/rules and files/dashboards hold exactly alerts/*.yaml and dashboards/*.json
    (`make generate` copies them; the chart cannot read outside its folder)."""
    for generated, copied in ((RULE_FILES, CHART / "files" / "rules"),
                              (DASHBOARDS, CHART / "files" / "dashboards")):  # fmt: skip
        assert generated
        assert sorted(path.name for path in copied.iterdir()) == [p.name for p in generated]
        for path in generated:
            assert (copied / path.name).read_bytes() == path.read_bytes(), (
                f"{copied / path.name} is stale: run `make generate`"
            )


def test_prometheus_rule_equals_the_generated_alerts() -> None:
    """The PrometheusRule's groups are those of alerts/*.yaml, verbatim, with the labels asked."""
    docs = render_chart(VALUE_SETS["monitoring"])
    rule = only(docs, "PrometheusRule")
    expected = [
        group for path in RULE_FILES for group in yaml.safe_load(path.read_text())["groups"]
    ]
    assert rule["spec"]["groups"] == expected
    assert rule["metadata"]["namespace"] == NAMESPACE
    labels = rule["metadata"]["labels"]
    assert labels["release"] == "kube-prometheus-stack"
    assert labels["role"] == "alert-rules"
    assert "PrometheusRule" not in {doc["kind"] for doc in render_chart({})}


def test_prometheus_rule_leaves_out_the_excluded_groups() -> None:
    """prometheusRule.excludeGroups drops a traffic source's recording group by name and keeps
    every other group in order (docs/traffic.md)."""
    values = {
        **VALUE_SETS["monitoring"],
        "prometheusRule": {"enabled": True, "excludeGroups": ["topology-hints-traffic-linkerd"]},
    }
    names = [
        group["name"] for group in only(render_chart(values), "PrometheusRule")["spec"]["groups"]
    ]
    expected = [
        group["name"]
        for path in RULE_FILES
        for group in yaml.safe_load(path.read_text())["groups"]
        if group["name"] != "topology-hints-traffic-linkerd"
    ]
    assert names == expected
    assert "topology-hints-traffic-istio" in names


@pytest.mark.parametrize("release", [RELEASE, "monitoring"])
def test_service_monitor_scrapes_the_metrics_service_as_the_job_the_alerts_select(
    release: str,
) -> None:
    """Whatever the release name, the job is topology-hints-exporter, and the alerts select it."""
    docs = render_chart(VALUE_SETS["monitoring"] | {"sharding": {"enabled": True}}, release=release)
    monitor = only(docs, "ServiceMonitor")
    spec = monitor["spec"]
    service = metrics_service(docs)
    selected = [
        doc
        for doc in objects_of(docs, "Service")
        if matches(spec["selector"]["matchLabels"], doc["metadata"]["labels"])
        and doc["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]
    ]
    assert selected == [service], "the shards' headless Service would be scraped twice"
    job = service["metadata"]["labels"][spec["jobLabel"]]
    expressions = [
        str(rule.get("expr")) for group in only(docs, "PrometheusRule")["spec"]["groups"]
        for rule in group["rules"]
    ]  # fmt: skip
    assert {m for e in expressions for m in re.findall(r'job="([^"]*)"', e)} == {job}
    (endpoint,) = spec["endpoints"]
    values = VALUE_SETS["monitoring"]["serviceMonitor"]
    assert endpoint["port"] == METRICS_PORT_NAME
    assert endpoint["honorLabels"] is True
    assert endpoint["interval"] == values["interval"]
    assert endpoint["scrapeTimeout"] == values["scrapeTimeout"]
    assert endpoint["relabelings"] == values["relabelings"]
    assert endpoint["metricRelabelings"] == values["metricRelabelings"]
    assert monitor["metadata"]["labels"]["team"] == "platform"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_service_monitor_defaults_match_the_prometheus_operator_overlay() -> None:
    """serviceMonitor.enabled alone scrapes as deploy/overlays/prometheus-operator does."""
    (chart_endpoint,) = only(render_chart({"serviceMonitor": {"enabled": True}}), "ServiceMonitor")[
        "spec"
    ]["endpoints"]
    overlay = only(render("deploy/overlays/prometheus-operator"), "ServiceMonitor")
    assert chart_endpoint == overlay["spec"]["endpoints"][0]


@pytest.mark.parametrize(
    ("values", "label", "value", "namespace"),
    [
        (VALUE_SETS["monitoring"], "grafana_dashboard", "1", NAMESPACE),
        (
            {"dashboards": {"enabled": True, "label": "dash", "labelValue": "yes",
                            "namespace": "grafana"}},
            "dash", "yes", "grafana",
        ),
    ],
)  # fmt: skip
def test_one_dashboard_config_map_per_dashboard(
    values: dict[str, Any], label: str, value: str, namespace: str
) -> None:
    """Each dashboards/*.json is a ConfigMap the Grafana sidecar loads, holding the file as is."""
    maps = objects_of(render_chart(values), "ConfigMap")
    assert len(maps) == len(DASHBOARDS)
    held = {}
    for config_map in maps:
        assert config_map["metadata"]["labels"][label] == value
        assert config_map["metadata"]["namespace"] == namespace
        assert config_map["metadata"].get("annotations") == values["dashboards"].get("annotations")
        ((file_name, text),) = config_map["data"].items()
        held[file_name] = text
    assert held == {path.name: path.read_text() for path in DASHBOARDS}
    assert len({config_map["metadata"]["name"] for config_map in maps}) == len(maps)
    assert not objects_of(render_chart({}), "ConfigMap")


def test_grafana_operator_dashboards() -> None:
    """grafanaOperator.enabled makes a GrafanaDashboard per dashboard for the selected Grafana."""
    values = VALUE_SETS["grafanaOperator"]["grafanaOperator"]
    dashboards = objects_of(render_chart(VALUE_SETS["grafanaOperator"]), "GrafanaDashboard")
    assert len(dashboards) == len(DASHBOARDS)
    held = set()
    for dashboard in dashboards:
        assert dashboard["apiVersion"] == "grafana.integreatly.org/v1beta1"
        spec = dashboard["spec"]
        assert spec["instanceSelector"] == values["instanceSelector"]
        assert spec["folder"] == values["folder"]
        held.add(json.dumps(json.loads(spec["json"]), sort_keys=True))
    assert held == {json.dumps(json.loads(p.read_text()), sort_keys=True) for p in DASHBOARDS}


def test_network_policy_can_be_turned_off() -> None:
    """networkPolicy.enabled=false renders no NetworkPolicy and changes nothing else."""
    off = render_chart(VALUE_SETS["networkPolicyOff"])
    assert not objects_of(off, "NetworkPolicy")
    on = render_chart({})
    assert [doc for doc in on if doc["kind"] != "NetworkPolicy"] == list(off)


def admitted_peers(docs: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    policy = only(docs, "NetworkPolicy")["spec"]
    pod = workload(docs)["spec"]["template"]
    assert selector_matches(policy["podSelector"], pod["metadata"]["labels"])
    (rule,) = policy["ingress"]
    (container,) = pod["spec"]["containers"]
    assert [container_port(container, port["port"]) for port in rule["ports"]] == [METRICS_PORT]
    return list(rule["from"])


def test_network_policy_admits_the_reverse_proxy_of_the_external_url() -> None:
    """networkPolicy.reverseProxy adds the proxy's peers beside Prometheus, on the same port;
    with externalUrl set and no proxy admitted, the release notes warn."""
    prometheus, proxy = admitted_peers(render_chart(VALUE_SETS["reverseProxy"]))
    assert selector_matches(prometheus["podSelector"], PROMETHEUS)
    assert proxy == INGRESS_NGINX_PEER
    (only_prometheus,) = admitted_peers(render_chart({}))
    assert only_prometheus == prometheus
    assert "WARNING" in notes({"externalUrl": "https://ops.example.com/topology"})
    assert "WARNING" not in notes(VALUE_SETS["reverseProxy"])


def test_kustomize_reverse_proxy_component_admits_the_proxy(tmp_path: Path) -> None:
    """deploy/components/reverse-proxy adds one peer (ingress-nginx, to adapt) to the policy."""
    docs = kustomized(tmp_path, ["deploy"], ["deploy/components/reverse-proxy"])
    prometheus, proxy = admitted_peers(docs)
    assert selector_matches(prometheus["podSelector"], PROMETHEUS)
    assert proxy["namespaceSelector"] == INGRESS_NGINX_PEER["namespaceSelector"]
    assert selector_matches(proxy["podSelector"], {"app.kubernetes.io/name": "ingress-nginx"})
    assert not selector_matches(proxy["podSelector"], PROMETHEUS)


def test_flag_values_become_serve_flags_the_cli_accepts() -> None:
    """Each flag value reaches the args as its flag, and the real CLI accepts the command line."""
    args = the_container(render_chart(VALUE_SETS["flags"]))["args"]
    assert args == [
        "serve",
        "--listen-address=:9808",
        "--external-url=https://ops.example.com/topology",
        "--all-services",
        "--namespaces=shop,payments",
        "--namespaces-exclude=kube-system",
        "--metric-allowlist=topology_hints_service_.*",
        "--metric-denylist=topology_hints_zone_.*",
        "--log-level=debug",
        "--log-format=console",
        "--dataplane=kube-proxy,cilium",
        "--max-input-bytes=64Mi",
    ]
    # argparse checks each value as it reads it, before --help exits 0.
    completed = subprocess.run(
        [*exporter_command(), *args, "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr


def test_scheduling_and_pod_metadata_values_reach_the_pod() -> None:
    """Scheduling keys, pod labels/annotations, resources and security contexts are passed on."""
    values: dict[str, Any] = {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "pool", "operator": "In", "values": ["infra"]}]}]}}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                       "whenUnsatisfiable": "ScheduleAnyway"}],
        "priorityClassName": "system-cluster-critical",
        "podAnnotations": {"example.com/note": "yes"},
        "podLabels": {"team": "platform"},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}},
        "podSecurityContext": {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 1000},
    }  # fmt: skip
    template = workload(render_chart(values))["spec"]["template"]
    pod = template["spec"]
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints",
                "priorityClassName"):  # fmt: skip
        assert pod[key] == values[key], key
    # Helm merges maps with the defaults: the keys given win, the others stay.
    assert pod["securityContext"] == {
        **VALUES_DEFAULTS["podSecurityContext"],
        **values["podSecurityContext"],
    }
    assert template["metadata"]["annotations"] == values["podAnnotations"]
    assert template["metadata"]["labels"]["team"] == "platform"
    (container,) = pod["containers"]
    assert container["resources"] == values["resources"]


def test_release_name_other_than_the_chart_prefixes_every_object() -> None:
    """Two releases do not collide: names carry the release, selectors its instance label."""
    docs = render_chart({"dataplaneDetection": {"enabled": True}}, release="blue")
    for doc in docs:
        assert doc["metadata"]["name"].startswith("blue-topology-hints-exporter"), identity(doc)
    pod_labels = workload(docs)["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["app.kubernetes.io/instance"] == "blue"
    assert metrics_service(docs)["spec"]["selector"]["app.kubernetes.io/instance"] == "blue"
