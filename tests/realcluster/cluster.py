"""What the suite does to a real cluster, as the components a cluster has would do it.

There is no kubelet: Nodes are created with their status (a kubelet would post it), Pods
are bound to a node when created (a scheduler would bind them) and get their status
(Running, podIP, the Ready condition) through the `/status` subresource, as the node's
kubelet would write it. A terminating Pod is a Pod deleted with a grace period that no
kubelet ends. Everything goes through the real `kubernetes` client.

`settle()` waits until the EndpointSlice controller has nothing left to do: its workqueue
is empty, no item is being worked on, nothing was added for longer than the controller's
own minimum resync delay after its writes (1 s, endpointslice_controller.go), and the
Events it records have stopped changing.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.realcluster.controlplane import ControlPlane

# The controller queues a Service again 1 s after each EndpointSlice it writes.
CONTROLLER_MIN_SYNC_DELAY = 1.0
QUIET = CONTROLLER_MIN_SYNC_DELAY + 0.5
SETTLE_TIMEOUT = 120.0
POLL = 0.1
ZONE_LABEL = "topology.kubernetes.io/zone"
_QUEUE = 'name="endpoint_slice"'
_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.MULTILINE)

Json = dict[str, Any]


class SettleTimeoutError(AssertionError):
    """The controller did not settle in time; the message says what was still moving."""


@dataclass(frozen=True)
class QueueState:
    """The EndpointSlice controller's workqueue, from its metrics."""

    depth: float
    unfinished_seconds: float
    adds: float

    @property
    def idle(self) -> bool:
        return self.depth == 0 and self.unfinished_seconds == 0


def queue_state(metrics_text: str) -> QueueState:
    values: dict[str, float] = {}
    for match in _SAMPLE.finditer(metrics_text):
        if _QUEUE in match.group("labels"):
            values[match.group("name")] = float(match.group("value"))
    return QueueState(
        values.get("workqueue_depth", 0.0),
        values.get("workqueue_unfinished_work_seconds", 0.0),
        values.get("workqueue_adds_total", 0.0),
    )


def node_body(
    name: str,
    *,
    zone: str | None,
    cpu: str | None = "4",
    ready: bool = True,
    labels: Mapping[str, str] | None = None,
    address: str | None = None,
) -> Json:
    """A Node as a kubelet registers it: labels, allocatable CPU, Ready, an InternalIP."""
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if zone is not None:
        all_labels[ZONE_LABEL] = zone
    allocatable = {"pods": "110", "memory": "8Gi"}
    if cpu is not None:
        allocatable["cpu"] = cpu
    status: Json = {
        "capacity": dict(allocatable),
        "allocatable": allocatable,
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
            }
        ],
    }
    if address is not None:
        status["addresses"] = [{"type": "InternalIP", "address": address}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "status": status,
    }


class RealCluster:
    """The suite's hands on a real control plane: the `kubernetes` client as its admin."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        load = cast("Callable[..., client.ApiClient]", config.new_client_from_config)
        self.api = load(str(plane.admin_kubeconfig))
        # Any: the suite sends objects as the JSON a manifest holds (dicts, camelCase), which
        # the client serialises as they are; its typed models would only be rebuilt from them.
        self.core: Any = client.CoreV1Api(self.api)
        self.discovery: Any = client.DiscoveryV1Api(self.api)
        self.rbac: Any = client.RbacAuthorizationV1Api(self.api)

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]  # unannotated upstream

    # --- Nodes ----------------------------------------------------------------------------

    def replace_nodes(self, nodes: Iterable[Json]) -> None:
        """Make the cluster's Nodes exactly `nodes` (created with their status)."""
        wanted = {node["metadata"]["name"]: node for node in nodes}
        for existing in self.core.list_node().items:
            if existing.metadata.name not in wanted:
                self.core.delete_node(existing.metadata.name)
        current = {node.metadata.name for node in self.core.list_node().items}
        for name, body in wanted.items():
            if name in current:
                self.core.delete_node(name)
            self.core.create_node(body)

    def set_node_ready(self, name: str, *, ready: bool) -> None:
        status = "True" if ready else "False"
        reason = "KubeletReady" if ready else "KubeletNotReady"
        self.core.patch_node_status(
            name,
            {"status": {"conditions": [{"type": "Ready", "status": status, "reason": reason}]}},
        )

    # --- Namespaces, Services, Pods ---------------------------------------------------------

    def create_namespace(self, name: str) -> None:
        with contextlib.suppress(ApiException):
            self.core.create_namespace({"metadata": {"name": name}})

    def clear_namespace(self, name: str) -> None:
        """Remove a namespace's Pods (at once: no kubelet will end them) and Services."""
        for pod in self.core.list_namespaced_pod(name).items:
            with contextlib.suppress(ApiException):
                self.core.delete_namespaced_pod(pod.metadata.name, name, grace_period_seconds=0)
        for service in self.core.list_namespaced_service(name).items:
            with contextlib.suppress(ApiException):
                self.core.delete_namespaced_service(service.metadata.name, name)

    def create_service(self, namespace: str, body: Json) -> None:
        self.core.create_namespaced_service(namespace, body)

    def touch_service(self, namespace: str, name: str, generation: int) -> None:
        """Change an annotation of no meaning, so the controller syncs the Service again."""
        self.core.patch_namespaced_service(
            name, namespace, {"metadata": {"annotations": {"suite.test/resync": str(generation)}}}
        )

    def run_pod(
        self,
        namespace: str,
        name: str,
        *,
        node: str,
        ip: str,
        labels: Mapping[str, str],
        ready: bool = True,
        terminating: bool = False,
        ports: Sequence[int] = (8080,),
    ) -> None:
        """A Pod bound to `node`, Running at `ip`, Ready or not; terminating if asked."""
        body: Json = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": dict(labels)},
            "spec": {
                "nodeName": node,
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.invalid/app:1",
                        "ports": [{"containerPort": port} for port in ports],
                    }
                ],
            },
        }
        self.core.create_namespaced_pod(namespace, body)
        self.write_pod_status(namespace, name, ip=ip, ready=ready)
        if terminating:
            # No kubelet confirms the deletion: the Pod stays terminating for the hour.
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=3600)

    def write_pod_status(self, namespace: str, name: str, *, ip: str, ready: bool) -> None:
        """What a kubelet writes once the Pod's containers run: phase, IPs, conditions."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        state = "True" if ready else "False"
        conditions = [
            {"type": kind, "status": status, "lastTransitionTime": now}
            for kind, status in (
                ("PodScheduled", "True"),
                ("Initialized", "True"),
                ("ContainersReady", state),
                ("Ready", state),
            )
        ]
        status = {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": now,
            "conditions": conditions,
        }
        self.core.patch_namespaced_pod_status(name, namespace, {"status": status})

    # --- what the controller wrote -----------------------------------------------------------

    def endpoint_slices(self, namespace: str) -> list[Any]:
        return list(self.discovery.list_namespaced_endpoint_slice(namespace).items)

    def wait_published(self, namespace: str, ip: str, timeout: float = SETTLE_TIMEOUT) -> None:
        """Wait until an EndpointSlice of `namespace` lists `ip` ready: the controller has
        seen the Pod. settle() alone cannot tell an idle controller from one that has not
        yet heard of the change (after an API server restart its informers relist, after
        403s while the new server's RBAC caches sync, with client-go's backoff: seconds)."""
        deadline = time.monotonic() + timeout
        while not any(
            # No conditions, or ready unset, is ready (discovery.k8s.io/v1).
            ip in (endpoint.addresses or ())
            and (endpoint.conditions is None or endpoint.conditions.ready is not False)
            for endpoint_slice in self.endpoint_slices(namespace)
            for endpoint in endpoint_slice.endpoints or ()
        ):
            if time.monotonic() > deadline:
                raise SettleTimeoutError(f"no EndpointSlice of {namespace} lists {ip} ready")
            time.sleep(POLL)

    def events_version(self, namespace: str | None = None) -> str:
        if namespace is None:
            return str(self.core.list_event_for_all_namespaces(limit=1).metadata.resource_version)
        return str(self.core.list_namespaced_event(namespace, limit=1).metadata.resource_version)

    def dump(self, resources: str = "nodes,services,endpointslices,events") -> bytes:
        """What `kubectl get RESOURCES -A -o json` prints, with the real kubectl."""
        return subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                str(self.plane.admin_kubeconfig),
                "get",
                resources,
                "-A",
                "-o",
                "json",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        ).stdout

    def events_marker(self, namespaces: Sequence[str]) -> str:
        """What changes when an Event of these namespaces is recorded or aggregated: unlike a
        list's resourceVersion, not every write of the cluster (lease renewals, ~2 per 10 s)."""
        versions = [
            int(event.metadata.resource_version)
            for namespace in namespaces
            for event in self.core.list_namespaced_event(namespace).items
        ]
        return f"{len(versions)}/{max(versions, default=0)}"

    def settle(
        self,
        timeout: float = SETTLE_TIMEOUT,
        quiet: float = QUIET,
        namespaces: Sequence[str] | None = None,
    ) -> None:
        """Wait until the EndpointSlice controller is idle and its Events still for `quiet`.

        `namespaces`: watch only the Events of these (the controller records them on the
        Services it syncs), so that unrelated writes do not restart the quiet period.
        """
        deadline = time.monotonic() + timeout
        last: tuple[float, str] | None = None
        still_since = time.monotonic()
        state = QueueState(0, 0, 0)
        while time.monotonic() < deadline:
            state = queue_state(self.plane.controller_manager_metrics())
            events = self.events_version() if namespaces is None else self.events_marker(namespaces)
            marker = (state.adds, events)
            if not state.idle or marker != last:
                last, still_since = marker, time.monotonic()
            elif time.monotonic() - still_since >= quiet:
                return
            time.sleep(POLL)
        raise SettleTimeoutError(f"the EndpointSlice controller did not settle: {state}")
