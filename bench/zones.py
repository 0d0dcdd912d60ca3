"""A snapshot with one Node per zone, as per-node zone labels make it (issue 22, item 2).

Some clusters label every Node with a zone of its own. The exporter forecasts, per zone,
what losing it would do: this snapshot is what shows whether that work grows linearly with
the zones (it once grew as zones x nodes). Every kind of forecast is exercised:

- `auto-all`: `auto`, one endpoint on every Node, hinted for its zone (enabled);
- `close-all`: `trafficDistribution: PreferClose`, one endpoint on every Node (local);
- `close-few`: `PreferClose`, endpoints on the first 3 Nodes only;
- `auto-few`: `auto`, 3 endpoints (refused: fewer endpoints than zones);
- `plain`: no topology, 3 endpoints.

Usage: python bench/zones.py ZONES > zones.json
       python bench/zones.py --measure 500 1000 2000   # serve --snapshot: ready time, RSS
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, the project is not
    sys.path.insert(0, str(ROOT))

from tests.processes import serving  # noqa: E402

Obj = dict[str, Any]
MANAGED_BY = "endpointslice-controller.k8s.io"
SLICE_CAPACITY = 100
NAMESPACE = "shop"


def zone_of(index: int) -> str:
    return f"zone-{index:05d}"


def node_of(index: int) -> str:
    return f"node-{index:05d}"


def _node(index: int) -> Obj:
    name = node_of(index)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-node-{index}",
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": zone_of(index),
            },
        },
        "status": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _service(name: str, number: int, *, auto: bool, close: bool) -> Obj:
    metadata: Obj = {"name": name, "namespace": NAMESPACE, "uid": f"uid-svc-{name}"}
    if auto:
        metadata["annotations"] = {"service.kubernetes.io/topology-mode": "Auto"}
    spec: Obj = {
        "type": "ClusterIP",
        "clusterIP": f"10.96.0.{number + 10}",
        "ports": [{"port": 80, "protocol": "TCP"}],
    }
    if close:
        spec["trafficDistribution"] = "PreferClose"
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def _slices(name: str, number: int, nodes: int, *, hinted: bool) -> Iterator[Obj]:
    endpoints = []
    for index in range(nodes):
        endpoint: Obj = {
            "addresses": [f"10.{number}.{index // 250}.{index % 250 + 1}"],
            "conditions": {"ready": True},
            "zone": zone_of(index),
            "nodeName": node_of(index),
        }
        if hinted:
            endpoint["hints"] = {"forZones": [{"name": zone_of(index)}]}
        endpoints.append(endpoint)
    for start in range(0, len(endpoints), SLICE_CAPACITY):
        part = start // SLICE_CAPACITY
        yield {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-{part}",
                "namespace": NAMESPACE,
                "uid": f"uid-slice-{name}-{part}",
                "labels": {
                    "kubernetes.io/service-name": name,
                    "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
                },
            },
            "addressType": "IPv4",
            "ports": [{"port": 8080, "protocol": "TCP"}],
            "endpoints": endpoints[start : start + SLICE_CAPACITY],
        }


def zone_objects(zones: int) -> Iterator[Obj]:
    """`zones` Nodes, each alone in its zone, and the five Services above."""
    for index in range(zones):
        yield _node(index)
    few = min(3, zones)
    plans = (
        ("auto-all", zones, True, False, True),
        ("close-all", zones, False, True, True),
        ("close-few", few, False, True, True),
        ("auto-few", few, True, False, False),
        ("plain", few, False, False, False),
    )
    for number, (name, endpoints, auto, close, hinted) in enumerate(plans, start=1):
        yield _service(name, number, auto=auto, close=close)
        yield from _slices(name, number, endpoints, hinted=hinted)


def zone_snapshot(zones: int) -> bytes:
    """The snapshot as `kubectl get nodes,services,endpointslices -A -o json` prints it."""
    items = list(zone_objects(zones))
    return orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def serve_ready(snapshot: Path) -> tuple[float, float]:
    """(seconds from start to /readyz answering 200, RSS MiB then) of `serve --snapshot`."""
    started = time.monotonic()
    with serving(
        "--snapshot", str(snapshot), "--log-level", "error",
        command=[sys.executable, "-m", "exporter"], timeout=600, interval=0.01,
    ) as exporter:  # fmt: skip
        return time.monotonic() - started, _rss_mib(exporter.process.pid)


def measure(counts: list[int], repeat: int = 3) -> None:
    """Medians of `repeat` starts, for each zone count."""
    with tempfile.TemporaryDirectory() as directory:
        for zones in counts:
            snapshot = Path(directory) / f"zones-{zones}.json"
            snapshot.write_bytes(zone_snapshot(zones))
            runs = [serve_ready(snapshot) for _ in range(repeat)]
            ready = statistics.median(seconds for seconds, _ in runs)
            rss = statistics.median(mib for _, mib in runs)
            print(f"{zones:>6} zones: ready in {ready:7.2f} s, RSS {rss:6.0f} MiB", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--measure":
        measure([int(count) for count in sys.argv[2:]])
    else:
        sys.stdout.buffer.write(zone_snapshot(int(sys.argv[1])))
