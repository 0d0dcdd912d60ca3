"""The real EndpointSlice controller as the reference: build a plan, let the controller
settle, and compare the exporter's result on a real `kubectl` dump with what it wrote.

The order of the build matters, because the controller records an event on every sync that
refuses hints and reads Nodes and Pods from informers that may lag the Service it syncs:

1. the Nodes replace the previous node set (Nodes are cluster-wide: one set at a time);
2. every Pod is created, bound, and given its status; then every Service, *without* its
   hint mechanism, and the hand-written slices;
3. the run waits until the controller's slices hold exactly the endpoints the Pods make,
   zones included. That proves its Pod and Node informers have caught up, so the syncs
   that follow see the whole cluster (a sync against a half-seen cluster would leave a
   stale refusal event behind, or hints stuck after InsufficientNodeInfo: see
   REALCLUSTER.md);
4. the annotations and `trafficDistribution` are patched in, and the controller settles;
5. `kubectl` dumps the cluster, `evaluate --snapshot` reads the dump, and
   tests/realcluster/agreement.py compares the two.

Every plan is built in namespaces of its own (Events stay behind when a Service goes),
and its Services, Pods and slices are deleted afterwards.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from tests.conftest import run_cli
from tests.realcluster.agreement import Agreement, Comparison
from tests.realcluster.cluster import RealCluster
from tests.realcluster.plans import (
    CONTROLLER,
    MANAGED_BY,
    SELECTOR_LABEL,
    SERVICE_NAME,
    ClusterPlan,
    EndpointKey,
    Json,
    endpoint_key,
)

WRITERS = 8  # concurrent API writes while building (the API server takes them in parallel)
ENDPOINTS_TIMEOUT = 90.0
POLL = 0.1
MERGE_PATCH = "application/merge-patch+json"
_RUNS = itertools.count(1)


class BuildError(AssertionError):
    """The cluster could not be built as planned (the message names the plan)."""


@dataclass
class Run:
    """One built plan: where it lives, and what the exporter and the controller said."""

    plan: ClusterPlan
    namespaces: dict[str, str]
    dump_path: Path
    result: Json
    agreement: Agreement

    def failure(self, plan_path: Path) -> str:
        lines = "\n  ".join(self.agreement.disagreements)
        return (
            f"{self.plan.name} ({self.plan.origin}): {len(self.agreement.disagreements)} "
            f"disagreement(s) between the exporter and the real controller:\n  {lines}\n"
            f"plan: {plan_path}\nkubectl dump: {self.dump_path}"
        )


def _physical(prefix: str, namespace: str) -> str:
    return f"{prefix}-{namespace}"[:63].rstrip("-")


def _pod_labels(service: str) -> dict[str, str]:
    return {SELECTOR_LABEL: service}


def replace_nodes(cluster: RealCluster, nodes: Sequence[Json]) -> None:
    """RealCluster.replace_nodes, its deletes and creates in parallel (a plan may hold the
    Nodes of every vector)."""
    existing = [node.metadata.name for node in cluster.core.list_node().items]
    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(cluster.core.delete_node, existing))
        list(pool.map(cluster.core.create_node, [json.loads(json.dumps(n)) for n in nodes]))


def build(cluster: RealCluster, plan: ClusterPlan, namespaces: dict[str, str]) -> None:
    """Steps 1-4 of the module docstring."""
    replace_nodes(cluster, plan.nodes)
    for physical in namespaces.values():
        cluster.create_namespace(physical)
    pods = [
        (namespaces[service.namespace], service.name, pod)
        for service in plan.services
        if service.selector
        for pod in service.pods
    ]
    with ThreadPoolExecutor(WRITERS) as pool:
        list(
            pool.map(
                lambda job: cluster.run_pod(
                    job[0],
                    job[2].name,
                    node=job[2].node,
                    ip=job[2].ip,
                    labels=_pod_labels(job[1]),
                    ready=job[2].ready,
                    terminating=job[2].terminating,
                ),
                pods,
            )
        )
        list(
            pool.map(
                lambda service: cluster.create_service(
                    namespaces[service.namespace], service.body()
                ),
                plan.services,
            )
        )
    for item in plan.slices:
        body = json.loads(json.dumps(item))
        namespace = namespaces[body["metadata"]["namespace"]]
        body["metadata"]["namespace"] = namespace
        cluster.discovery.create_namespaced_endpoint_slice(namespace, body)
    wait_for_endpoints(cluster, plan, namespaces)
    for service in plan.services:
        patch = service.mechanism_patch()
        if patch is None:
            continue
        try:
            cluster.core.patch_namespaced_service(
                service.name,
                namespaces[service.namespace],
                patch,
                _content_type=MERGE_PATCH,
            )
        except ApiException as error:
            raise BuildError(
                f"{plan.name}: the API server refused {patch} for {service.name}: "
                f"{error.status} {error.body}"
            ) from error
    cluster.settle(namespaces=list(namespaces.values()))


def _managed_endpoints(
    cluster: RealCluster, namespaces: Sequence[str]
) -> dict[tuple[str, str], tuple[int, list[EndpointKey]]]:
    selector = urllib.parse.quote(f"{MANAGED_BY}={CONTROLLER}")
    status, body = cluster.plane.get(
        f"/apis/discovery.k8s.io/v1/endpointslices?labelSelector={selector}"
    )
    assert status == 200, body
    wanted = set(namespaces)
    found: dict[tuple[str, str], tuple[int, list[EndpointKey]]] = {}
    for item in json.loads(body)["items"]:
        namespace = item["metadata"]["namespace"]
        if namespace not in wanted or item["addressType"] != "IPv4":
            continue
        key = (namespace, item["metadata"]["labels"].get(SERVICE_NAME, ""))
        count, endpoints = found.get(key, (0, []))
        endpoints.extend(endpoint_key(endpoint) for endpoint in item.get("endpoints") or [])
        found[key] = (count + 1, endpoints)
    return found


def wait_for_endpoints(cluster: RealCluster, plan: ClusterPlan, namespaces: dict[str, str]) -> None:
    """Until every selector Service's IPv4 slices hold exactly its Pods' endpoints."""
    expected = {
        (namespaces[service.namespace], service.name): sorted(
            plan.expected_endpoints(service), key=str
        )
        for service in plan.services
        if service.selector and service.spec.get("type") != "ExternalName"
    }
    deadline = time.monotonic() + ENDPOINTS_TIMEOUT
    missing: list[str] = []
    while time.monotonic() < deadline:
        found = _managed_endpoints(cluster, list(namespaces.values()))
        missing = [
            f"{key[0]}/{key[1]}"
            for key, endpoints in expected.items()
            if key not in found or sorted(found[key][1], key=str) != endpoints
        ]
        if not missing:
            return
        time.sleep(POLL)
    raise BuildError(
        f"{plan.name}: the controller did not write the planned endpoints of {missing[:5]}"
    )


def clear(cluster: RealCluster, namespaces: Sequence[str]) -> None:
    """Services first (so that no Pod deletion syncs them), then Pods and every slice."""
    services = [
        (namespace, service.metadata.name)
        for namespace in namespaces
        for service in cluster.core.list_namespaced_service(namespace).items
    ]

    def delete(item: tuple[str, str]) -> None:
        with contextlib.suppress(ApiException):
            cluster.core.delete_namespaced_service(item[1], item[0])

    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(delete, services))
    for namespace in namespaces:
        with contextlib.suppress(ApiException):
            cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        with contextlib.suppress(ApiException):
            cluster.discovery.delete_collection_namespaced_endpoint_slice(namespace)


def evaluate(dump_path: Path, profile: Sequence[str] = ()) -> Json:
    answer = run_cli("evaluate", "--snapshot", str(dump_path), *profile)
    assert answer.returncode in {0, 1}, answer.stderr
    result: Json = json.loads(answer.stdout)
    return result


@contextlib.contextmanager
def built(cluster: RealCluster, plan: ClusterPlan) -> Iterator[dict[str, str]]:
    """The plan built in namespaces of its own (logical -> real), cleared on leaving."""
    prefix = f"r{next(_RUNS):03d}"
    namespaces = {namespace: _physical(prefix, namespace) for namespace in plan.namespaces}
    try:
        build(cluster, plan, namespaces)
        yield namespaces
    finally:
        clear(cluster, list(namespaces.values()))


def run(cluster: RealCluster, plan: ClusterPlan, folder: Path, profile: Sequence[str] = ()) -> Run:
    """Build, settle, dump, evaluate and compare one plan (the plan is cleared while
    `evaluate` reads the dump: the two do not meet)."""
    prefix = f"r{next(_RUNS):03d}"
    namespaces = {namespace: _physical(prefix, namespace) for namespace in plan.namespaces}
    dump_path = folder / f"{plan.name}.dump.json"
    try:
        build(cluster, plan, namespaces)
        dump_path.write_bytes(cluster.dump())
    except BaseException:
        clear(cluster, list(namespaces.values()))
        raise
    with ThreadPoolExecutor(1) as pool:
        cleared = pool.submit(clear, cluster, list(namespaces.values()))
        result = evaluate(dump_path, profile)
        cleared.result()
    dump = json.loads(dump_path.read_text())
    agreement = Comparison(plan, namespaces, dump).compare(result)
    return Run(plan, namespaces, dump_path, result, agreement)
