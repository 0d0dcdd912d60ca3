"""The cross-zone share of one Service over many zones (issue 30, finding 8).

One `auto` Service whose endpoints are spread evenly over ZONES zones (one Node per zone),
each hinted for its own zone, evaluated for every data plane but the last one listed (ten).
Its cost once grew as zones x endpoints: each zone's clients counted the endpoints outside
their zone one by one. Linear, 3,000 zones and 30,000 endpoints take about 3x the time of
1,000 and 10,000.

Usage: python bench/crosszone.py ZONES:ENDPOINTS [ZONES:ENDPOINTS ...] [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, the project is not
    sys.path.insert(0, str(ROOT))

from exporter.engine import DataPlane, Endpoint, EndpointSlice, Node, Service  # noqa: E402
from exporter.engine.context import node_context  # noqa: E402
from exporter.engine.crosszone import Clients, CrossZones  # noqa: E402
from exporter.engine.evaluate import evaluate_service  # noqa: E402
from exporter.engine.routing import service_endpoints  # noqa: E402

DATAPLANES = tuple(DataPlane)[:10]
SLICE_CAPACITY = 100


def cluster(zones: int, endpoints: int) -> tuple[list[Node], Service, list[EndpointSlice]]:
    nodes = [
        Node(f"node-{z}", f"zone-{z}", Fraction(4), ready=True, control_plane=False)
        for z in range(zones)
    ]
    service = Service("shop", "web", None, "Auto", None, None, "ClusterIP", "10.96.0.10")
    every = [
        Endpoint(
            address=f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
            ready=True,
            zone=f"zone-{i % zones}",
            node_name=f"node-{i % zones}",
            zone_hints=(f"zone-{i % zones}",),
        )
        for i in range(endpoints)
    ]
    slices = [
        EndpointSlice(
            namespace="shop",
            name=f"web-{start // SLICE_CAPACITY}",
            service_name="web",
            address_type="IPv4",
            managed=True,
            endpoints=tuple(every[start : start + SLICE_CAPACITY]),
        )
        for start in range(0, endpoints, SLICE_CAPACITY)
    ]
    return nodes, service, slices


def measure(zones: int, endpoints: int) -> float:
    """Seconds of the cross-zone shares of every data plane, for one verdict's routing."""
    nodes, service, slices = cluster(zones, endpoints)
    verdict = evaluate_service(service, slices, node_context(nodes, DATAPLANES))[0]
    clients = Clients.of(nodes)
    entry = service_endpoints(service, "IPv4", slices)
    started = time.perf_counter()
    CrossZones(clients).of(verdict.routing, entry)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="+", help="ZONES:ENDPOINTS")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for size in args.sizes:
        zones, endpoints = (int(part) for part in size.split(":"))
        runs = [measure(zones, endpoints) for _ in range(args.runs)]
        print(
            f"{zones} zones / {endpoints} endpoints: median {statistics.median(runs):.3f} s "
            f"[{min(runs):.3f}-{max(runs):.3f}] over {args.runs} runs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
