"""Random clusters for the real controller: seeded, so a failing one can be built again.

`random_plans(seed, node_sets, services)` gives the same plans for the same arguments on
every machine (`random.Random` seeded with a string is deterministic). Each node set has a
shape, chosen in turn so that every run of at least eight sets holds the boundary shapes of
behaviour section 3: three equal zones with a Service of exactly 8 ready endpoints, a Ready
worker without a zone label or without CPU, a control-plane node (with Pods on it), unready
nodes (with Pods on them), one zone only, and the float64 ratio boundaries. Services mix
every mechanism: both annotations (also the deprecated one beside `topology-mode` and
beside `trafficDistribution`), every `trafficDistribution` value the control plane takes,
`internalTrafficPolicy: Local`, headless and NodePort Services, `publishNotReadyAddresses`,
and Pods that are Ready, not ready or terminating.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence

from tests.realcluster.cluster import ZONE_LABEL, node_body
from tests.realcluster.plans import ClusterPlan, Json, PodPlan, ServicePlan

# In turn; the shapes whose node info is insufficient (zone-missing, cpu-missing,
# single-zone) refuse every `auto` Service, so the others come more often.
SHAPES = (
    "three-equal",
    "zone-missing",
    "control-plane",
    "unready",
    "uneven",
    "cpu-missing",
    "uneven",
    "single-zone",
    "float-boundary",
    "control-plane",
    "uneven",
)
CPUS = ("1", "2", "4", "8", "16", "500m", "1500m", "2500m", "3", "750m")
ZONES = ("zone-a", "zone-b", "zone-c", "zone-d")
ALL_DISTRIBUTIONS = ("PreferClose", "PreferSameZone", "PreferSameNode")
TOPOLOGY_MODE = "service.kubernetes.io/topology-mode"
DEPRECATED = "service.kubernetes.io/topology-aware-hints"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
# Endpoint counts, small ones often (where the boundaries are), a few past one slice (100).
COUNTS = (0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 11, 12, 13, 15, 18, 24)
BIG = 105


def _worker(rng: random.Random, name: str, zones: Sequence[str], cpu: str | None = None) -> Json:
    return node_body(name, zone=rng.choice(zones), cpu=cpu or rng.choice(CPUS))


def _nodes(rng: random.Random, shape: str) -> list[Json]:
    if shape == "three-equal":
        per_zone = rng.choice((1, 2))
        return [
            node_body(f"n{zone[-1]}{i}", zone=zone, cpu="4")
            for zone in ZONES[:3]
            for i in range(per_zone)
        ]
    if shape == "single-zone":
        return [node_body(f"n{i}", zone="zone-a", cpu=rng.choice(CPUS)) for i in range(3)]
    if shape == "float-boundary":
        if rng.random() < 0.5:
            return [
                node_body("na", zone="zone-a", cpu="2"),
                node_body("nb", zone="zone-b", cpu="3"),
            ]
        return [
            node_body("na", zone="zone-a", cpu="1"),
            node_body("nb", zone="zone-b", cpu="2"),
            node_body("nc", zone="zone-c", cpu="2"),
        ]
    zones = ZONES[: rng.choice((2, 3, 3, 4))]
    nodes = [
        node_body(f"n{i}", zone=zones[i % len(zones)], cpu=rng.choice(CPUS))
        for i in range(len(zones))
    ]
    nodes += [
        _worker(rng, f"n{i}", zones) for i in range(len(zones), len(zones) + rng.randint(0, 4))
    ]
    if shape == "zone-missing":
        nodes.append(node_body("no-zone", zone=rng.choice((None, "")), cpu="4"))
    elif shape == "cpu-missing":
        nodes.append(node_body("no-cpu", zone=zones[0], cpu=rng.choice((None, "0"))))
    elif shape == "control-plane":
        zone = rng.choice((None, zones[0], "zone-cp"))
        label = rng.choice((CONTROL_PLANE, "node-role.kubernetes.io/master"))
        nodes.append(node_body("cp", zone=zone, cpu=rng.choice((None, "2")), labels={label: ""}))
    elif shape == "unready":
        nodes.append(node_body("down-1", zone=zones[-1], cpu="8", ready=False))
        nodes.append(node_body("down-2", zone=rng.choice((None, zones[0])), cpu=None, ready=False))
    return nodes


def _mechanism(
    rng: random.Random, distributions: Sequence[str]
) -> tuple[dict[str, str], str | None]:
    """(annotations, trafficDistribution) for one Service."""
    kind = rng.choice(
        (
            "auto", "auto", "auto", "auto-lower", "deprecated", "deprecated-beside-mode",
            "deprecated-off", "distribution", "distribution", "distribution", "auto-and-field",
            "deprecated-beside-field", "deprecated-off-beside-field", "none", "unknown",
        )
    )  # fmt: skip
    field = rng.choice(distributions) if distributions else None
    return {
        "auto": ({TOPOLOGY_MODE: "Auto"}, None),
        "auto-lower": ({TOPOLOGY_MODE: "auto"}, None),
        "deprecated": ({DEPRECATED: rng.choice(("Auto", "auto"))}, None),
        # The API server refuses the two keys with different values (validation.go).
        "deprecated-beside-mode": ({DEPRECATED: "auto", TOPOLOGY_MODE: "auto"}, None),
        "deprecated-off": ({DEPRECATED: "Disabled", TOPOLOGY_MODE: "Disabled"}, None),
        "distribution": ({}, field),
        "auto-and-field": ({TOPOLOGY_MODE: "Auto"}, field),
        "deprecated-beside-field": ({DEPRECATED: "Auto"}, field),
        "deprecated-off-beside-field": ({DEPRECATED: "disabled"}, field),
        "none": ({}, None),
        "unknown": ({TOPOLOGY_MODE: rng.choice(("AUTO", "PreferZone", ""))}, None),
    }[kind]


PLAIN: Json = {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}


def _spec(rng: random.Random) -> Json:
    spec: Json = dict(PLAIN)
    roll = rng.random()
    if roll < 0.05:
        spec["clusterIP"] = "None"
        return spec
    if roll < 0.15:
        spec["type"] = "NodePort"
    if rng.random() < 0.15:
        spec["internalTrafficPolicy"] = "Local"
    if rng.random() < 0.05:
        spec["publishNotReadyAddresses"] = True
    return spec


class _Addresses:
    def __init__(self, index: int) -> None:
        self.second = 20 + index % 200
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"10.{self.second}.{self.count // 250}.{self.count % 250 + 1}"


def _pods(
    rng: random.Random, service: str, nodes: Sequence[Json], count: int, ips: _Addresses
) -> tuple[PodPlan, ...]:
    names = [node["metadata"]["name"] for node in nodes]
    pods = []
    for i in range(count):
        roll = rng.random()
        pods.append(
            PodPlan(
                f"{service}-{i}",
                rng.choice(names),
                ips.next(),
                ready=roll < 0.85 or (roll > 0.95 and rng.random() < 0.5),
                terminating=roll > 0.95,
            )
        )
    return tuple(pods)


def _eight_in_three_zones(
    service: str, nodes: Sequence[Json], ips: _Addresses
) -> tuple[PodPlan, ...]:
    by_zone: dict[str, list[str]] = {}
    for node in nodes:
        by_zone.setdefault(node["metadata"]["labels"][ZONE_LABEL], []).append(
            node["metadata"]["name"]
        )
    zones = sorted(by_zone)
    return tuple(
        PodPlan(
            f"{service}-{i}", by_zone[zones[i % 3]][i // 3 % len(by_zone[zones[i % 3]])], ips.next()
        )
        for i in range(8)
    )


def random_plan(
    seed: int, index: int, services: int, distributions: Sequence[str] = ALL_DISTRIBUTIONS
) -> ClusterPlan:
    """Node set `index` of the run seeded `seed`, with `services` Services."""
    rng = random.Random(f"{seed}:{index}")  # noqa: S311 - seeded on purpose: reproducible
    shape = SHAPES[index % len(SHAPES)]
    nodes = _nodes(rng, shape)
    ips = _Addresses(index)
    plans = []
    for i in range(services):
        name = f"s{i:02d}"
        annotations, field = _mechanism(rng, distributions)
        if shape == "three-equal" and i == 0:
            # Section 3's best-known refusal, always present: 8 ready endpoints, 3 equal zones.
            pods = _eight_in_three_zones(name, nodes, ips)
            annotations, field, spec = {TOPOLOGY_MODE: "Auto"}, None, dict(PLAIN)
        else:
            count = BIG if rng.random() < 0.02 else rng.choice(COUNTS)
            pods, spec = _pods(rng, name, nodes, count, ips), _spec(rng)
        plans.append(
            ServicePlan(
                namespace=f"set{index}-{'ab'[i % 2]}",
                name=name,
                spec=spec,
                pods=pods,
                annotations=annotations,
                traffic_distribution=field,
            )
        )
    return ClusterPlan(
        name=f"random-{seed}-{index:03d}-{shape}",
        origin=f"random_plan(seed={seed}, index={index}, services={services}, "
        f"distributions={tuple(distributions)})",
        nodes=tuple(nodes),
        services=tuple(plans),
    )


def random_plans(
    seed: int,
    node_sets: int,
    services: int,
    distributions: Sequence[str] = ALL_DISTRIBUTIONS,
    first: int = 0,
) -> list[ClusterPlan]:
    """`node_sets` plans carrying `services` Services in all (spread evenly)."""
    per_set, extra = divmod(services, node_sets)
    return [
        random_plan(seed, first + index, per_set + (1 if index < extra else 0), distributions)
        for index in range(node_sets)
    ]


# A run's size: REAL_CLUSTER_SEED, REAL_CLUSTER_NODE_SETS, REAL_CLUSTER_SERVICES (in all).
SEED = int(os.environ.get("REAL_CLUSTER_SEED", "2026"))
NODE_SETS = int(os.environ.get("REAL_CLUSTER_NODE_SETS", "30"))
SERVICES = int(os.environ.get("REAL_CLUSTER_SERVICES", "300"))


def configured_plans() -> list[ClusterPlan]:
    """The run's plans, as the environment sizes it (30 node sets, 300 Services by default)."""
    return random_plans(SEED, NODE_SETS, SERVICES)
