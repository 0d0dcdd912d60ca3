"""A small cluster of every kind of Service, and whether a running exporter agrees with a
`kubectl get ... -o json` dump of it taken at the same moment.

The exporter's `/api/v1/evaluation` is the `evaluate` document of its live state; the
reference is `evaluate --snapshot` of the real kubectl's dump, with the control plane's
version given as a flag (a live exporter reads it from /version). Once the cluster is
settled the two must become equal; the wait is on that condition.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import run_cli
from tests.realcluster.cluster import RealCluster, node_body
from tests.scrape import http_get

Json = dict[str, Any]

AUTO = {"service.kubernetes.io/topology-mode": "Auto"}
ZONES = ("zone-a", "zone-b", "zone-c")
NODES = tuple(f"node-{zone[-1]}{index}" for zone in ZONES for index in (1, 2))
AGREE_TIMEOUT = 60.0


@dataclass(frozen=True)
class Shape:
    """One Service of the cluster and its ready endpoints."""

    name: str
    replicas: int
    annotations: dict[str, str] | None = None
    traffic_distribution: str | None = None
    internal_traffic_policy: str | None = None

    def body(self) -> Json:
        spec: Json = {"selector": {"app": self.name}, "ports": [{"port": 80, "targetPort": 8080}]}
        if self.traffic_distribution:
            spec["trafficDistribution"] = self.traffic_distribution
        if self.internal_traffic_policy:
            spec["internalTrafficPolicy"] = self.internal_traffic_policy
        metadata: Json = {"name": self.name, "annotations": dict(self.annotations or {})}
        return {"metadata": metadata, "spec": spec}


# The best-known refusal beside its neighbours, both trafficDistribution kinds, a policy
# the data plane reads, and a Service with no hint mechanism at all.
SHAPES = (
    Shape("web-7", 7, annotations=AUTO),
    Shape("web-8", 8, annotations=AUTO),
    Shape("close", 6, traffic_distribution="PreferClose"),
    Shape("same-node", 3, traffic_distribution="PreferSameNode"),
    Shape("local", 3, internal_traffic_policy="Local"),
    Shape("plain", 2),
)


def node_set() -> list[Json]:
    return [node_body(name, zone=f"zone-{name[5]}") for name in NODES]


def pods_of(shape: Shape, index: int) -> Iterator[tuple[str, str, str]]:
    """(pod name, node, IP) of each replica of the `index`-th Service."""
    for replica in range(shape.replicas):
        yield (
            f"{shape.name}-{replica}",
            NODES[(replica + index) % len(NODES)],
            f"10.{100 + index}.0.{replica + 1}",
        )


def build(cluster: RealCluster, namespace: str, shapes: tuple[Shape, ...] = SHAPES) -> None:
    """Nodes first, then each Service and its Pods; settled, every Service synced again
    (the controller does not revisit a Service the Nodes alone changed), settled."""
    build_namespaces(cluster, {namespace: shapes})


def build_namespaces(cluster: RealCluster, namespaces: dict[str, tuple[Shape, ...]]) -> None:
    """`build` of several namespaces at once (one settle), Pod IPs unique across them."""
    cluster.replace_nodes(node_set())
    index = 0
    for namespace, shapes in namespaces.items():
        cluster.create_namespace(namespace)
        cluster.clear_namespace(namespace)
        for shape in shapes:
            cluster.create_service(namespace, shape.body())
            for pod, node, ip in pods_of(shape, index):
                cluster.run_pod(namespace, pod, node=node, ip=ip, labels={"app": shape.name})
            index += 1
    cluster.settle()
    for namespace, shapes in namespaces.items():
        for shape in shapes:
            cluster.touch_service(namespace, shape.name, 1)
    cluster.settle()


def server_minor(cluster: RealCluster) -> str:
    """The control plane's version as the exporter reads it from /version: 1.MINOR."""
    version = cluster.plane.version()
    return f"{version['major']}.{version['minor']}"


def evaluate_dump(cluster: RealCluster, folder: Path, *flags: str) -> Json:
    """`evaluate --snapshot` of the real kubectl's dump of the cluster, taken now."""
    dump = folder / f"dump-{time.monotonic_ns()}.json"
    dump.write_bytes(cluster.dump())
    result = run_cli(
        "evaluate", "--snapshot", str(dump), "--kubernetes-version", server_minor(cluster), *flags
    )
    assert result.returncode == 0, result.stderr
    document: Json = json.loads(result.stdout)
    return document


def live_evaluation(url: str) -> Json | None:
    status, body = http_get(url.rstrip("/") + "/api/v1/evaluation")
    if status != 200:
        return None
    document: Json = json.loads(body)
    return document


def comparable(document: Json) -> Json:
    """What the two must agree on: the cluster and every Service (the Kubernetes block
    differs by where the version came from: /version, or the reference's flag)."""
    return {"cluster": document["cluster"], "services": document["services"]}


def difference(live: Json | None, reference: Json) -> str:
    """A short account of where `live` differs from `reference` ("" when equal)."""
    if live is None:
        return "the exporter has no evaluation yet"
    mine, theirs = comparable(live), comparable(reference)
    if mine == theirs:
        return ""
    if mine["cluster"] != theirs["cluster"]:
        return f"cluster: {mine['cluster']} != {theirs['cluster']}"

    def keyed(doc: Json) -> dict[tuple[str, str, str], Json]:
        return {(s["namespace"], s["name"], s["address_type"]): s for s in doc["services"]}

    a, b = keyed(mine), keyed(theirs)
    lines = [f"only in the exporter: {key}" for key in sorted(a.keys() - b.keys())]
    lines += [f"only in the dump: {key}" for key in sorted(b.keys() - a.keys())]
    for key in sorted(a.keys() & b.keys()):
        if a[key] != b[key]:
            fields = sorted(name for name in a[key] if a[key].get(name) != b[key].get(name))
            # Each side's value, cut short: which side is behind is what a failure must say.
            shown = [
                f"{name} (exporter {_short(a[key].get(name))}, dump {_short(b[key].get(name))})"
                for name in fields
            ]
            lines.append(f"{key}: {'; '.join(shown)}")
    return "\n".join(lines[:20])


def _short(value: object, limit: int = 80) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def wait_agreeing(url: str, reference: Json, timeout: float = AGREE_TIMEOUT) -> Json:
    """Poll the exporter's evaluation until it equals `reference`; return it."""
    deadline = time.monotonic() + timeout
    while True:
        live = live_evaluation(url)
        diff = difference(live, reference)
        if not diff:
            assert live is not None
            return live
        if time.monotonic() > deadline:
            raise AssertionError(f"the exporter disagrees with the dump:\n{diff}")
        time.sleep(0.2)
