"""The real kube-proxy on simulated nodes, and the endpoints its rules send a Service to.

Each simulated node is a network namespace of its own (`ip netns add`), where upstream
kube-proxy runs in nftables mode named as its Node (`hostnameOverride`), from a
KubeProxyConfiguration file: no conntrack sysctl is written (`maxPerCore: 0` and zero
timeouts), its health and metrics servers bind the namespace's own loopback. It reaches the
real API server through a relay that never leaves loopback: socat inside the namespace
listens on the namespace's 127.0.0.1 at the API server's own port (so the suite's URL and
CA hold unchanged) and forwards over a unix socket to one socat in the root namespace,
which connects to the API server's 127.0.0.1 port. kube-proxy is the ServiceAccount
kube-system/kube-proxy bound to the bootstrap ClusterRole system:node-proxier, as kubeadm
installs it, with a token from the TokenRequest API.

What the rules say, and the exporter's routing beside them: tests/realcluster/proxy_rules.py.

A zone label is given to a Node after its kube-proxy has started, and the start waits for
kube-proxy to say it has it. kube-proxy v1.37.2 (cmd/kube-proxy/app/server.go) adds its
node-topology handler to an informer that has already synced and registers the proxier as
its receiver only after: the replayed ADD of its own Node may be handled before, with no
receiver, and the labels it carried are remembered as delivered (a later event with the same
labels is skipped). The proxier then never learns its zone and ignores every hint ("node is
missing label") until the label changes; seen here in one kube-proxy of about twenty under
a loaded full run. A label added after the start is an update both handlers see.

Freshness without a sleep: a selectorless marker Service is changed last (its port and its
hand-written slice's one endpoint name a generation); once every node's rules DNAT the
marker's new port to the new endpoint, kube-proxy has synced from caches holding every
earlier Service and EndpointSlice event (a watch delivers events in order), and the
cluster, settled before, has not changed since.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path

import yaml
from kubernetes.client.exceptions import ApiException

from tests.realcluster.binaries import KubeBinaries
from tests.realcluster.cluster import ZONE_LABEL, RealCluster
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.processes import ServerProcess, StartError
from tests.realcluster.proxy_rules import ABSENT, SERVICE_IPS, Destination, Json, Rules

TABLE = ("ip", "kube-proxy")
# What kube-proxy logs (V(4)) when its proxier takes new topology labels of its Node.
TOPOLOGY_UPDATED = "Updated proxier node topology labels"
PROXY_NAMESPACE = "kube-system"
PROXY_ACCOUNT = "kube-proxy"
# The bootstrap role kubeadm binds kube-proxy's ServiceAccount to.
NODE_PROXIER = "system:node-proxier"
START_TIMEOUT = 90.0
SYNC_TIMEOUT = 60.0
POLL = 0.2
# The marker's port is MARKER_PORT_BASE + generation; its endpoint 10.255.0.<generation>.
MARKER = "sync-marker"
MARKER_PORT_BASE = 1000
MARKER_TARGET_PORT = 9000
TOKEN_SECONDS = 3600


def _run(*argv: str) -> str:
    completed = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    if completed.returncode != 0:
        raise StartError(f"{' '.join(argv)}: {completed.stderr.strip() or completed.stdout}")
    return completed.stdout


def in_namespace(netns: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


@contextlib.contextmanager
def _exists_already() -> Iterator[None]:
    """A create answered 409 Conflict is no error here; any other answer is."""
    try:
        yield
    except ApiException as error:
        if error.status != HTTPStatus.CONFLICT:
            raise


def proxy_identity(cluster: RealCluster, folder: Path) -> Path:
    """kube-proxy's ServiceAccount, bound to system:node-proxier as kubeadm binds it, and a
    kubeconfig with a TokenRequest token for it."""
    # Either may be there already, from an earlier use of the session's control plane.
    with _exists_already():
        cluster.core.create_namespaced_service_account(
            PROXY_NAMESPACE, {"metadata": {"name": PROXY_ACCOUNT}}
        )
    with _exists_already():
        cluster.rbac.create_cluster_role_binding(
            {
                "metadata": {"name": "suite:node-proxier"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": NODE_PROXIER,
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": PROXY_ACCOUNT, "namespace": PROXY_NAMESPACE}
                ],
            }
        )
    answer = cluster.core.create_namespaced_service_account_token(
        PROXY_ACCOUNT, PROXY_NAMESPACE, {"spec": {"expirationSeconds": TOKEN_SECONDS}}
    )
    return cluster.plane.write_kubeconfig(
        folder / "kube-proxy.kubeconfig", str(answer.status.token), PROXY_ACCOUNT
    )


@dataclass
class ProxyNode:
    """One simulated node: its network namespace, its end of the relay, its kube-proxy."""

    node: str
    netns: str
    folder: Path
    relay: ServerProcess | None = field(default=None, repr=False)
    proxy: ServerProcess | None = field(default=None, repr=False)

    def rules(self) -> Rules:
        table = _run(*in_namespace(self.netns, "nft", "-j", "list", "table", *TABLE))
        return Rules(json.loads(table))

    def rules_or_none(self) -> Rules | None:
        try:
            return self.rules()
        except StartError:  # the table is not there yet
            return None

    def topology_updates(self) -> list[str]:
        """Every line in which kube-proxy says its proxier took new labels of its Node."""
        with contextlib.suppress(OSError):
            lines = self.log.read_text(errors="replace").splitlines()
            return [line for line in lines if TOPOLOGY_UPDATED in line]
        return []

    def wait_topology(self, zone: str, *, since: int, timeout: float = START_TIMEOUT) -> None:
        """Wait until kube-proxy says (after its first `since` updates) that its proxier has
        `zone`."""
        deadline = time.monotonic() + timeout
        while not any(f'"{zone}"' in line for line in self.topology_updates()[since:]):
            self.check_running()
            if time.monotonic() > deadline:
                raise StartError(
                    f"kube-proxy ({self.node}) did not take zone {zone}:\n{_tail(self.log)}"
                )
            time.sleep(POLL)

    @property
    def log(self) -> Path:
        return self.folder / "kube-proxy.log"

    def check_running(self) -> None:
        for server in (self.relay, self.proxy):
            if server is not None and not server.running:
                raise StartError(f"{server.name} exited:\n{_tail(server.log)}")

    def stop(self) -> None:
        for server in (self.proxy, self.relay):
            if server is not None:
                server.stop()
        self.proxy = self.relay = None
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, check=False)


def _tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


def proxy_config(node: str, kubeconfig: Path) -> Json:
    """The KubeProxyConfiguration of one node (kubeproxy.config.k8s.io/v1alpha1)."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node,
        "mode": "nftables",
        "clusterCIDR": "10.200.0.0/16",
        # The namespace's own loopback: every node may use the default ports.
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "oomScoreAdj": 0,
        # Zero: kube-proxy writes no nf_conntrack sysctl.
        "conntrack": {
            "maxPerCore": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        # Verbosity 2 logs why a node ignores hints ("Ignoring same-zone topology hints"),
        # 4 when the proxier takes its Node's zone (TOPOLOGY_UPDATED).
        "logging": {"verbosity": 4},
    }


class ProxyFleet:
    """The simulated nodes of one control plane: the root end of the relay, one
    `ProxyNode` per node; `close()` stops them all and removes their namespaces."""

    def __init__(
        self, binaries: KubeBinaries, cluster: RealCluster, folder: Path, tag: str | None = None
    ) -> None:
        self.binaries = binaries
        self.cluster = cluster
        self.plane: ControlPlane = cluster.plane
        self.folder = folder
        self.tag = tag or f"thx{os.getpid()}"
        self.socket = folder / "relay.sock"
        self.nodes: dict[str, ProxyNode] = {}
        self.root_relay: ServerProcess | None = None
        self.kubeconfig: Path | None = None

    def _start_root_relay(self) -> None:
        self.socket.unlink(missing_ok=True)
        self.root_relay = ServerProcess(
            "relay (root namespace)",
            [
                "socat",
                f"UNIX-LISTEN:{self.socket},fork,mode=600",
                f"TCP:127.0.0.1:{self.plane.apiserver_port}",
            ],
            self.folder / "relay-root.log",
        )
        self.root_relay.start()
        self.root_relay.wait_ready(self.socket.exists, START_TIMEOUT)

    def start(self, node: str) -> ProxyNode:
        """A namespace for `node` (its Node must exist, with an InternalIP), the relay's
        end in it, and kube-proxy named as the Node; ready once its table exists."""
        if self.root_relay is None:
            self._start_root_relay()
        if self.kubeconfig is None:
            self.kubeconfig = proxy_identity(self.cluster, self.folder)
        folder = self.folder / node
        folder.mkdir(parents=True, exist_ok=True)
        member = ProxyNode(node, f"{self.tag}-{node}", folder)
        self.nodes[node] = member
        subprocess.run(["ip", "netns", "del", member.netns], capture_output=True, check=False)
        _run("ip", "netns", "add", member.netns)
        _run(*in_namespace(member.netns, "ip", "link", "set", "lo", "up"))
        port = self.plane.apiserver_port
        member.relay = ServerProcess(
            f"relay ({node})",
            in_namespace(
                member.netns,
                "socat",
                f"TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr",
                f"UNIX-CONNECT:{self.socket}",
            ),
            folder / "relay.log",
        )
        member.relay.start()
        member.relay.wait_ready(lambda: _listening(member.netns, port), START_TIMEOUT)
        config = folder / "kube-proxy.yaml"
        config.write_text(yaml.safe_dump(proxy_config(node, self.kubeconfig)))
        member.proxy = ServerProcess(
            f"kube-proxy ({node})",
            in_namespace(member.netns, str(self.binaries.kube_proxy), f"--config={config}"),
            member.log,
        )
        member.proxy.start()
        member.proxy.wait_ready(lambda: _has_service_ips(member), START_TIMEOUT)
        return member

    def set_zone(self, node: str, zone: str) -> None:
        """Label the Node with `zone` and wait until its kube-proxy has taken it."""
        member = self.nodes[node]
        since = len(member.topology_updates())
        self.cluster.core.patch_node(node, {"metadata": {"labels": {ZONE_LABEL: zone}}})
        member.wait_topology(zone, since=since)

    def remove(self, node: str) -> None:
        """Stop the node's kube-proxy (before its Node goes: kube-proxy exits on that)."""
        member = self.nodes.pop(node, None)
        if member is not None:
            member.stop()

    def close(self) -> None:
        for node in list(self.nodes):
            self.remove(node)
        if self.root_relay is not None:
            self.root_relay.stop()
            self.root_relay = None
        self.socket.unlink(missing_ok=True)

    def rules(self) -> dict[str, Rules]:
        return {node: member.rules() for node, member in sorted(self.nodes.items())}

    def wait_synced(
        self, cluster_ip: str, port: int, endpoint: tuple[str, int], timeout: float = SYNC_TIMEOUT
    ) -> dict[str, Rules]:
        """Every node's rules once each DNATs `cluster_ip:port` to `endpoint` (the marker)."""
        wanted = Destination("dnat", frozenset({endpoint}))
        deadline = time.monotonic() + timeout
        while True:
            seen: dict[str, Destination] = {}
            for node, member in sorted(self.nodes.items()):
                member.check_running()
                rules = member.rules_or_none()
                seen[node] = ABSENT if rules is None else rules.destination(cluster_ip, port)
            if all(destination == wanted for destination in seen.values()):
                return self.rules()
            if time.monotonic() > deadline:
                lines = [f"{node}: {destination}" for node, destination in seen.items()]
                raise AssertionError(f"kube-proxy did not sync {wanted}:\n" + "\n".join(lines))
            time.sleep(POLL)


def _listening(netns: str, port: int) -> bool:
    listed = _run(*in_namespace(netns, "ss", "-Hltn", f"sport = :{port}"))
    return bool(listed.strip())


def _has_service_ips(member: ProxyNode) -> bool:
    rules = member.rules_or_none()
    return rules is not None and SERVICE_IPS in rules.maps


@contextlib.contextmanager
def fleet(binaries: KubeBinaries, cluster: RealCluster, folder: Path) -> Iterator[ProxyFleet]:
    """A `ProxyFleet` for the block, every process stopped and namespace removed after."""
    found = ProxyFleet(binaries, cluster, folder)
    try:
        yield found
    finally:
        found.close()


def requirements() -> list[str]:
    """What this machine lacks to run kube-proxy in namespaces ("" list when nothing)."""
    missing = [name for name in ("ip", "nft", "socat", "ss") if shutil.which(name) is None]
    if os.geteuid() != 0:
        missing.append("root (network namespaces)")
    return missing


# --- the marker -------------------------------------------------------------------------


def marker_slice(generation: int) -> Json:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": MARKER, "labels": {"kubernetes.io/service-name": MARKER}},
        "addressType": "IPv4",
        "ports": [{"name": "", "port": MARKER_TARGET_PORT, "protocol": "TCP"}],
        "endpoints": [{"addresses": [f"10.255.0.{generation}"], "conditions": {"ready": True}}],
    }


def bump_marker(cluster: RealCluster, namespace: str, generation: int) -> tuple[str, int]:
    """Point the marker at `generation` (created on first use); its ClusterIP and port."""
    port = MARKER_PORT_BASE + generation
    ports = [{"port": port, "targetPort": MARKER_TARGET_PORT, "protocol": "TCP"}]
    existing = cluster.core.list_namespaced_service(namespace).items
    if not any(service.metadata.name == MARKER for service in existing):
        cluster.create_service(namespace, {"metadata": {"name": MARKER}, "spec": {"ports": ports}})
        cluster.discovery.create_namespaced_endpoint_slice(namespace, marker_slice(generation))
    else:
        # A JSON patch: a strategic merge would add the port beside the old one.
        cluster.core.patch_namespaced_service(
            MARKER, namespace, [{"op": "replace", "path": "/spec/ports", "value": ports}]
        )
        cluster.discovery.replace_namespaced_endpoint_slice(
            MARKER, namespace, marker_slice(generation)
        )
    service = cluster.core.read_namespaced_service(MARKER, namespace)
    return str(service.spec.cluster_ip), port
