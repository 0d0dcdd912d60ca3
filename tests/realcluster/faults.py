"""Faults a real control plane makes, made the way they happen in clusters.

- etcd compaction, through etcd's v3 HTTP gateway (the API server compacts every 5 minutes
  itself; here it is done at once, at the current revision);
- the exporter's ClusterRoleBinding removed, then applied again, as an operator would;
- the exporter's ServiceAccount deleted and created again, which revokes every token
  issued for it (a token is bound to the ServiceAccount's UID);
- API Priority and Fairness: a priority level of the exporter's own, matched by a
  FlowSchema naming its ServiceAccount, that rejects what it cannot run at once (429 with
  Retry-After). With no seat it still runs one request when none is running (the queue
  set admits a request wider than its limit into an idle level), so `seat_held` keeps one
  running: another client with the same ServiceAccount (a second replica) whose LIST asks
  for a resourceVersion far ahead, which the watch cache waits 3 s for before answering 504,
  one after the other.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.realcluster.cluster import RealCluster
from tests.realcluster.controlplane import ControlPlane, ControlPlaneSettings
from tests.realcluster.installed import Install, apply, kubectl

Json = dict[str, Any]

# An API server as some clusters tune it: no watch cache (every watch and LIST goes to etcd,
# so a resume from a compacted revision is 410; no bookmarks) and no WatchList (a
# streaming list is refused with 422). One plane for both keeps the suite's cost down.
# test_faults restarts its API server: clients made before that may hold dead connections.
WITHOUT_CACHE_OR_WATCH_LIST = ControlPlaneSettings(
    extra_apiserver_args=("--watch-cache=false", "--feature-gates=WatchList=false")
)


def _etcd(plane: ControlPlane, path: str, body: Json) -> Json:
    request = urllib.request.Request(  # noqa: S310 - the suite's own etcd on loopback
        plane.etcd_url + path, data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        answer: Json = json.loads(response.read())
    return answer


def etcd_revision(plane: ControlPlane) -> int:
    """etcd's current revision (the API server's newest resourceVersion)."""
    answer = _etcd(plane, "/v3/kv/range", {"key": base64.b64encode(b"\0").decode()})
    return int(answer["header"]["revision"])


def compact(plane: ControlPlane, revision: int | None = None) -> int:
    """Compact etcd's history at `revision` (its current one by default), physically:
    revisions below it are gone, it stays. The revision."""
    if revision is None:
        revision = etcd_revision(plane)
    _etcd(plane, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


@contextlib.contextmanager
def binding_removed(cluster: RealCluster, install: Install) -> Iterator[None]:
    """The exporter's ClusterRoleBinding deleted for the block, then applied again."""
    binding = install.cluster_role_binding
    cluster.rbac.delete_cluster_role_binding(binding["metadata"]["name"])
    try:
        yield
    finally:
        apply(cluster.plane, [binding])


def recreate_service_account(cluster: RealCluster, install: Install) -> None:
    """Delete the exporter's ServiceAccount and create it again: its old tokens die."""
    kubectl(
        cluster.plane,
        "delete",
        "serviceaccount",
        "-n",
        install.namespace,
        install.service_account,
        "--wait=true",
    )
    (account,) = (doc for doc in install.objects if doc["kind"] == "ServiceAccount")
    apply(cluster.plane, [account])


# --- API Priority and Fairness -------------------------------------------------------------

FLOW_CONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
THROTTLE_NAME = "suite-exporter-throttle"
# Below every default FlowSchema but exempt (1) and probes (2): the exporter's requests
# are classified here first.
MATCHING_PRECEDENCE = 100


def _priority_level(shares: int) -> Json:
    return {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": THROTTLE_NAME},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": shares,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    }


def _flow_schema(install: Install) -> Json:
    return {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": THROTTLE_NAME},
        "spec": {
            "priorityLevelConfiguration": {"name": THROTTLE_NAME},
            "matchingPrecedence": MATCHING_PRECEDENCE,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [
                        {
                            "kind": "ServiceAccount",
                            "serviceAccount": {
                                "name": install.service_account,
                                "namespace": install.namespace,
                            },
                        }
                    ],
                    "resourceRules": [
                        {
                            "verbs": ["*"],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "clusterScope": True,
                            "namespaces": ["*"],
                        }
                    ],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }


@dataclass
class Throttle:
    """The exporter's own APF priority level; `seats(n)` gives it about n seats."""

    cluster: RealCluster
    install: Install

    def shares(self, shares: int) -> None:
        apply(self.cluster.plane, [_priority_level(shares)])

    def remove(self) -> None:
        for kind in ("flowschemas", "prioritylevelconfigurations"):
            with contextlib.suppress(ApiException, AssertionError):
                kubectl(self.cluster.plane, "delete", kind, THROTTLE_NAME, "--ignore-not-found")


@contextlib.contextmanager
def throttled(cluster: RealCluster, install: Install, shares: int = 0) -> Iterator[Throttle]:
    """The exporter's requests classified into a priority level of `shares` (0: no seat,
    every request is rejected), for the block."""
    throttle = Throttle(cluster, install)
    apply(cluster.plane, [_priority_level(shares), _flow_schema(install)])
    try:
        yield throttle
    finally:
        throttle.remove()


# The user agent of the harness's own requests (ControlPlane.get), unlike the exporter's.
HARNESS_USER_AGENT = "Python-urllib/"


@contextlib.contextmanager
def seat_held(plane: ControlPlane, token: str) -> Iterator[Callable[[], None]]:
    """The priority level's one running request taken by another client with `token`
    (its LISTs of Nodes ahead of the newest resourceVersion each wait 3 s) until the
    block ends or it calls the function it is given."""
    ahead = etcd_revision(plane) + 10**9
    path = f"/api/v1/nodes?resourceVersion={ahead}&resourceVersionMatch=NotOlderThan"
    stop = threading.Event()

    def hold() -> None:
        while not stop.is_set():
            status, _ = plane.get(path, token=token)
            if status == 429:
                stop.wait(0.05)  # the exporter holds the seat: take it when it is free

    holder = threading.Thread(target=hold, name="seat-holder", daemon=True)

    def release() -> None:
        stop.set()
        holder.join(timeout=10)

    holder.start()
    try:
        yield release
    finally:
        release()
