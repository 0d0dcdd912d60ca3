"""kube-proxy's nftables rules read as destinations, and the exporter's routing beside them.

The rules, as upstream pkg/proxy/nftables/proxier.go names them in table `ip kube-proxy`:

- map `service-ips`: `CLUSTER-IP . PROTOCOL . PORT : goto CHAIN`, where CHAIN is
  `service-HASH-NS/NAME/PROTOCOL/PORTNAME` (Cluster policy) or `local-HASH-...`
  (internalTrafficPolicy Local); CHAIN holds `dnat to IP:PORT` for one endpoint, else
  `dnat ip addr . port to numgen random mod N map { I : IP . PORT, ... }`; with ClientIP
  session affinity `numgen random mod N vmap { I : goto endpoint-HASH-...__IP/PORT }`,
  each endpoint chain a `dnat to IP:PORT`;
- map `no-endpoint-services`: `CLUSTER-IP . PROTOCOL . PORT : drop` (internalTrafficPolicy
  Local, no local endpoint, endpoints elsewhere) or `: goto reject-chain` (no usable
  endpoint at all).

`Destination` is what one node does with one Service port: DNAT to a set of endpoints,
drop, reject, or nothing programmed yet. The exporter's routing gives the same: the
endpoints its `kube-proxy` data plane hands that node (`clientsets.Given`, section 13),
DNAT when there are some, drop for `no-endpoints` (the policy's drop), reject for an empty
`cluster` (nothing usable anywhere).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.engine.clientsets import Given
from exporter.engine.context import node_context
from exporter.engine.evaluate import evaluate_entry, service_inputs
from exporter.engine.model import EndpointSlice
from exporter.engine.profile import ProfileFlags
from exporter.engine.routing import DataPlane, Routing
from exporter.sources.snapshot import load_snapshot

Json = dict[str, Any]
SERVICE_IPS = "service-ips"
NO_ENDPOINT_SERVICES = "no-endpoint-services"


@dataclass(frozen=True, order=True)
class Destination:
    """What one node does with traffic to one Service port."""

    verdict: str  # "dnat", "drop", "reject", or "absent" (nothing programmed)
    endpoints: frozenset[tuple[str, int]] = frozenset()

    def __str__(self) -> str:
        if self.verdict != "dnat":
            return self.verdict
        return "dnat " + ", ".join(f"{ip}:{port}" for ip, port in sorted(self.endpoints))


ABSENT = Destination("absent")
DROP = Destination("drop")
REJECT = Destination("reject")


def _key(element: Any) -> tuple[str, str, int] | None:
    if isinstance(element, dict) and "elem" in element:  # an element with a comment
        element = element["elem"]["val"]
    parts = element.get("concat") if isinstance(element, dict) else None
    if not parts or len(parts) != 3:  # address . protocol . port
        return None
    return (str(parts[0]), str(parts[1]), int(parts[2]))


class Rules:
    """kube-proxy's table of one node (`nft -j list table ip kube-proxy`), read."""

    def __init__(self, document: Json) -> None:
        self.maps: dict[str, dict[tuple[str, str, int], Json]] = {}
        self.chains: dict[str, list[list[Json]]] = {}
        for item in document.get("nftables", []):
            if "map" in item:
                entries = self.maps.setdefault(item["map"]["name"], {})
                for element, verdict in item["map"].get("elem", []):
                    key = _key(element)
                    if key is not None:
                        entries[key] = verdict
            elif "chain" in item:
                self.chains.setdefault(item["chain"]["name"], [])
            elif "rule" in item:
                rule = item["rule"]
                self.chains.setdefault(rule["chain"], []).append(rule.get("expr", []))

    def destination(self, cluster_ip: str, port: int, protocol: str = "tcp") -> Destination:
        key = (cluster_ip, protocol, port)
        verdict = self.maps.get(SERVICE_IPS, {}).get(key)
        if verdict is not None and "goto" in verdict:
            return Destination("dnat", frozenset(self._dnat_targets(verdict["goto"]["target"])))
        verdict = self.maps.get(NO_ENDPOINT_SERVICES, {}).get(key)
        if verdict is None:
            return ABSENT
        if "drop" in verdict:
            return DROP
        if verdict.get("goto", {}).get("target") == "reject-chain":
            return REJECT
        return Destination(f"? {json.dumps(verdict)}")

    def _dnat_targets(self, chain: str, depth: int = 0) -> Iterator[tuple[str, int]]:
        """Every IP:port the chain DNATs to, following its gotos into endpoint chains (the
        affinity rules and the numgen vmap name the same chains)."""
        if depth > 2:  # service chain -> endpoint chain, no deeper
            return
        for expressions in self.chains.get(chain, []):
            for expression in expressions:
                if "dnat" in expression:
                    yield from _dnat(expression["dnat"])
                for target in _gotos(expression):
                    if "/" in target:  # the per-Service and per-endpoint chains only
                        yield from self._dnat_targets(target, depth + 1)


def _dnat(statement: Json) -> Iterator[tuple[str, int]]:
    address = statement.get("addr")
    if isinstance(address, str):
        yield (address, int(statement["port"]))
        return
    if isinstance(address, dict) and "map" in address:
        for _index, target in address["map"]["data"]["set"]:
            ip, port = target["concat"]
            yield (str(ip), int(port))


def _gotos(expression: Json) -> Iterator[str]:
    if "goto" in expression:
        yield str(expression["goto"]["target"])
    if "vmap" in expression:
        for _index, verdict in expression["vmap"]["data"]["set"]:
            if "goto" in verdict:
                yield str(verdict["goto"]["target"])


# --- the exporter's side ------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    """The exporter's routing of one Service for one node, and the destination it means."""

    routing: Routing
    destination: Destination


@dataclass(frozen=True)
class ServicePort:
    """A Service's one port as kube-proxy keys it, and the port its endpoints serve."""

    namespace: str
    name: str
    cluster_ip: str
    port: int
    protocol: str
    target_port: int | None


def service_ports(dump: Json) -> dict[tuple[str, str], ServicePort]:
    """The Services of a kubectl dump with a ClusterIP and one port, and their slices' port."""
    target: dict[tuple[str, str], int] = {}
    for item in dump["items"]:
        if item.get("kind") == "EndpointSlice" and item.get("ports"):
            owner = item["metadata"].get("labels", {}).get("kubernetes.io/service-name")
            if owner is not None and item["ports"][0].get("port") is not None:
                target[(item["metadata"]["namespace"], owner)] = int(item["ports"][0]["port"])
    found: dict[tuple[str, str], ServicePort] = {}
    for item in dump["items"]:
        spec = item.get("spec", {})
        if item.get("kind") != "Service" or spec.get("clusterIP") in {None, "None"}:
            continue
        ports = spec.get("ports") or []
        assert len(ports) == 1, f"the harness gives each Service one port: {item['metadata']}"
        key = (item["metadata"]["namespace"], item["metadata"]["name"])
        found[key] = ServicePort(
            key[0],
            key[1],
            spec["clusterIP"],
            int(ports[0]["port"]),
            ports[0].get("protocol", "TCP").lower(),
            target.get(key),
        )
    return found


def exporter_routing(
    dump_path: Path, nodes: Sequence[str], kubernetes_minor: int
) -> dict[tuple[str, str, str], Expected]:
    """(node, namespace, name) -> the exporter's `kube-proxy` routing for that node and the
    destination it means, for every IPv4 entry of the dump (`evaluate`'s own engine path)."""
    dump = json.loads(dump_path.read_bytes())
    ports = service_ports(dump)
    snapshot = load_snapshot(str(dump_path))
    profile = ProfileFlags(kubernetes_minor=kubernetes_minor).profile()
    context = node_context(snapshot.nodes, (DataPlane.KUBE_PROXY,), profile)
    grouped: dict[tuple[str, str], list[EndpointSlice]] = {}
    for endpoint_slice in snapshot.endpoint_slices:
        if endpoint_slice.service_name is not None:
            owner = (endpoint_slice.namespace, endpoint_slice.service_name)
            grouped.setdefault(owner, []).append(endpoint_slice)
    expected: dict[tuple[str, str, str], Expected] = {}
    for service in snapshot.services:
        port = ports.get(service.key)
        if port is None or service.key not in grouped:
            continue
        for inputs in service_inputs(service, grouped[service.key], profile=profile):
            if inputs.address_type != "IPv4":
                continue
            view = evaluate_entry(inputs, context).routing[DataPlane.KUBE_PROXY]
            given = Given(DataPlane.KUBE_PROXY, inputs.endpoints)
            for node in nodes:
                zone = context.nodes.zone_of[node]
                routing = view.by_node.get(node, view.by_zone[zone].routing)
                addresses = {e.address for e in given.endpoints(routing, zone, node) if e.address}
                if addresses:
                    assert port.target_port is not None
                    destination = Destination(
                        "dnat", frozenset((address, port.target_port) for address in addresses)
                    )
                elif routing is Routing.NO_ENDPOINTS:
                    destination = DROP
                else:
                    destination = REJECT
                expected[(node, *service.key)] = Expected(routing, destination)
    return expected


def routing_counts(
    expected: Mapping[tuple[str, str, str], Expected], zone_of: Mapping[str, str]
) -> dict[tuple[str, str], dict[str, dict[str, int]]]:
    """(namespace, name) -> zone -> routing -> nodes: `evaluate`'s `routing` block."""
    counts: dict[tuple[str, str], dict[str, Counter[str]]] = {}
    for (node, namespace, name), item in expected.items():
        zones = counts.setdefault((namespace, name), {})
        zones.setdefault(zone_of[node], Counter())[str(item.routing)] += 1
    return {
        key: {zone: dict(counter) for zone, counter in zones.items()}
        for key, zones in counts.items()
    }


# --- the processes ------------------------------------------------------------------------


def compare(
    rules: Mapping[str, Rules],
    expected: Mapping[tuple[str, str, str], Expected],
    ports: Mapping[tuple[str, str], ServicePort],
    services: Iterable[tuple[str, str]],
) -> tuple[int, list[str]]:
    """(pairs compared, disagreements): each node's programmed destination of each Service
    against the exporter's routing for that node."""
    compared = 0
    problems: list[str] = []
    for key in services:
        port = ports[key]
        for node, node_rules in rules.items():
            compared += 1
            programmed = node_rules.destination(port.cluster_ip, port.port, port.protocol)
            wanted = expected.get((node, *key))
            if wanted is None:
                problems.append(f"{node} {key[0]}/{key[1]}: the exporter has no routing")
            elif programmed != wanted.destination:
                problems.append(
                    f"{node} {key[0]}/{key[1]}: kube-proxy {programmed}; "
                    f"exporter {wanted.routing} -> {wanted.destination}"
                )
    return compared, problems
