"""Rendering /metrics in process: first, unchanged, one-Service and node-change renders.

    python bench/render.py                  # 5,000 nodes, 10,000 Services, 150,000 endpoints
    python bench/render.py --services 600 --nodes 300 --endpoints 9000 --runs 3

Each figure is the median (min-max) of `--runs` runs, beside `generate_latest` over the
same state (the prometheus_client collector) measured in the same run. Times are the
process' CPU time, not wall time: on a shared machine, neighbours' load would otherwise
decide the ratios (everything measured runs in this one thread). `measure()` is what
bench/bench.py may call to add these rows to its table.
"""

from __future__ import annotations

import argparse
import gzip
import logging
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import orjson
import structlog
from prometheus_client import CollectorRegistry, generate_latest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from cluster import ClusterSize, cluster_objects  # noqa: E402

from exporter.engine.model import EndpointSlice, Node  # noqa: E402
from exporter.metrics.collector import HintsCollector  # noqa: E402
from exporter.metrics.exposition import ExpositionRenderer, Format  # noqa: E402
from exporter.pipeline.evaluator import Evaluator  # noqa: E402
from exporter.sources.snapshot import parse_snapshot  # noqa: E402
from exporter.state.store import ClusterStore  # noqa: E402


@dataclass(frozen=True, slots=True)
class RenderTiming:
    """One render measured over the runs: its name and the CPU seconds of each run."""

    name: str
    runs: tuple[float, ...]  # seconds

    def __str__(self) -> str:
        ms = [run * 1000 for run in self.runs]
        return f"{self.name:<44} {statistics.median(ms):9.2f} ms CPU  ({min(ms):.2f}-{max(ms):.2f})"


@dataclass
class MeasuredExporter:
    """The in-process exporter render.py measures: store, evaluator, and the objects it changes."""

    store: ClusterStore
    evaluator: Evaluator
    slices: list[EndpointSlice]
    nodes: list[Node]


def build(size: ClusterSize) -> MeasuredExporter:
    """The synthetic cluster, loaded into a store and evaluated once."""
    document = {"apiVersion": "v1", "kind": "List", "items": list(cluster_objects(size))}
    snapshot = parse_snapshot("bench", orjson.dumps(document))
    store = ClusterStore()
    snapshot.write_to(store)
    evaluator = Evaluator(store, clock=time.time)
    evaluator.step()
    return MeasuredExporter(store, evaluator, list(snapshot.endpoint_slices), list(snapshot.nodes))


def _timed(action: Callable[[], object]) -> float:
    started = time.process_time()
    action()
    return time.process_time() - started


def _one_service_changes(cluster: MeasuredExporter) -> Iterator[None]:
    """Each step drops one endpoint of the next sizeable slice (a real re-evaluation)."""
    candidates = [s for s in cluster.slices if len(s.endpoints) > 3]
    for slice_ in candidates:
        cluster.store.upsert_endpoint_slice(replace(slice_, endpoints=slice_.endpoints[:-1]))
        cluster.evaluator.step()
        yield None


def _node_changes(cluster: MeasuredExporter) -> Iterator[None]:
    """Each step adds a Ready node to the first zone, then removes it: the Ready node set
    changes (and CPU shares with it), so every Service is evaluated again."""
    template = cluster.nodes[0]
    extra = replace(template, name="bench-extra-node")
    present = False
    while True:
        nodes = cluster.nodes if present else [*cluster.nodes, extra]
        present = not present
        cluster.store.replace_nodes(nodes)
        cluster.evaluator.step()
        yield None


def _cpu_changes(cluster: MeasuredExporter) -> Iterator[None]:
    """Each step moves CPU shares only: one node's allocatable CPU up, then back (the
    Ready node set stays the same)."""
    node = cluster.nodes[0]
    grown = replace(node, allocatable_cpu=(node.allocatable_cpu or Fraction(4)) * 2)
    while True:
        for version in (grown, node):
            cluster.store.upsert_node(version)
            cluster.evaluator.step()
            yield None


def measure(cluster: MeasuredExporter, runs: int = 3) -> list[RenderTiming]:
    """The render figures, each over `runs` runs, with generate_latest as the reference."""
    evaluator = cluster.evaluator
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HintsCollector(lambda: evaluator.state, ready=lambda: True))
    reference = tuple(_timed(lambda: generate_latest(registry)) for _ in range(runs))

    def fresh() -> ExpositionRenderer:
        renderer = ExpositionRenderer(lambda: evaluator.state, ready=lambda: True)
        evaluator.add_listener(renderer.observe)
        return renderer

    first: list[float] = []
    unchanged: list[float] = []
    first_gzip: list[float] = []
    for _ in range(runs):
        renderer = fresh()
        first.append(_timed(lambda: renderer.render(Format.TEXT)))  # noqa: B023
        unchanged.append(_timed(lambda: renderer.render(Format.TEXT)))  # noqa: B023
        first_gzip.append(_timed(lambda: renderer.render_gzip(Format.TEXT)))  # noqa: B023
    unchanged_gzip = tuple(_timed(lambda: renderer.render_gzip(Format.TEXT)) for _ in range(runs))
    renderer = fresh()
    renderer.render(Format.TEXT)
    renderer.render_gzip(Format.TEXT)
    changes = _one_service_changes(cluster)
    one_service: list[float] = []
    one_service_gzip: list[float] = []
    for _ in range(max(runs, 5)):
        next(changes)
        one_service.append(_timed(lambda: renderer.render(Format.TEXT)))
        next(changes)
        one_service_gzip.append(_timed(lambda: renderer.render_gzip(Format.TEXT)))
    node_change: list[float] = []
    nodes = _node_changes(cluster)
    for _ in range(runs):
        next(nodes)
        node_change.append(_timed(lambda: renderer.render(Format.TEXT)))
    cpu_change: list[float] = []
    shares = _cpu_changes(cluster)
    for _ in range(runs):
        next(shares)
        cpu_change.append(_timed(lambda: renderer.render(Format.TEXT)))
    body = renderer.render(Format.TEXT)
    size = sum(map(len, body))
    joined = b"".join(body)
    single_gzip = tuple(_timed(lambda: gzip.compress(joined, 1)) for _ in range(runs))
    zipped = sum(map(len, renderer.render_gzip(Format.TEXT)))
    samples = joined.count(b"\n") - joined.count(b"\n# ") - 1
    print(
        f"exposition {size / 1e6:.1f} MB, {samples} samples;"
        f" gzip of cached segments {zipped / 1e6:.2f} MB vs gzip.compress"
        f" {len(gzip.compress(joined, 1)) / 1e6:.2f} MB"
    )
    return [
        RenderTiming("generate_latest (reference)", reference),
        RenderTiming("first render (uncached)", tuple(first)),
        RenderTiming("unchanged render", tuple(unchanged)),
        RenderTiming("render after a one-Service change", tuple(one_service)),
        RenderTiming("render after a node is added or removed", tuple(node_change)),
        RenderTiming("render after a CPU-share node change", tuple(cpu_change)),
        RenderTiming("first gzip (after a text render)", tuple(first_gzip)),
        RenderTiming("unchanged gzip", unchanged_gzip),
        RenderTiming("gzip after a one-Service change", tuple(one_service_gzip)),
        RenderTiming("gzip.compress of the whole body (reference)", single_gzip),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--services", type=int, default=10000)
    parser.add_argument("--endpoints", type=int, default=150000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    # Node changes flip verdicts; their log lines are not what is measured.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    size = ClusterSize(nodes=args.nodes, services=args.services, endpoints=args.endpoints)
    started = time.perf_counter()
    cluster = build(size)
    print(f"cluster built and evaluated in {time.perf_counter() - started:.1f} s")
    for figure in measure(cluster, args.runs):
        print(figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
