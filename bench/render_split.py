"""Where a render's CPU goes: the first render, and the render after a node resize, split.

    python bench/render_split.py --scale 0.3 --runs 3

Builds the synthetic cluster (bench/cluster.py) in-process as bench/render.py does, GC tuned
as `serve` tunes it, and prints CPU times (`time.process_time`, median of `--runs`, min-max):

- the first render, beside its parts measured apart: building every per-Service sample
  alone (the family table's functions, no formatting), the rows (samples and lines), and
  `generate_latest` of the same state;
- a node resize (one node's CPU doubled, then back): the evaluator's step, then the render
  of the new state and the renderer's own steps within it (comparing replaced results,
  rendering their rows, setting them in the blocks).

Issue 29 (docs/performance.md, "The open targets, profiled apart") reads these.
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, generate_latest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from cluster import ClusterSize  # noqa: E402
from render import MeasuredExporter, build  # noqa: E402

from exporter.metrics.blocks import SortedBlocks  # noqa: E402
from exporter.metrics.collector import ExportOptions, HintsCollector, is_exported  # noqa: E402
from exporter.metrics.columns import Prepared  # noqa: E402
from exporter.metrics.exposition import ExpositionRenderer, Format  # noqa: E402
from exporter.metrics.family import ServiceSubject  # noqa: E402
from exporter.runtime import tune_garbage_collector  # noqa: E402

Times = dict[str, list[float]]


def _cpu(action: Callable[[], object]) -> float:
    started = time.process_time()
    action()
    return time.process_time() - started


def first_render(cluster: MeasuredExporter, runs: int) -> Times:
    evaluator = cluster.evaluator
    state = evaluator.state
    exported = [r for r in state.services.values() if is_exported(r.verdicts, ExportOptions())]
    times: Times = defaultdict(list)

    def samples() -> None:
        renderer = ExpositionRenderer(lambda: state, ready=lambda: True)
        for result in exported:
            prepared = Prepared.of(ServiceSubject(result, state.nodes))
            for column in renderer._service_columns:  # noqa: SLF001 - what is measured
                function: Any = column.function
                if column.per_entry:
                    for _, entry in prepared.entries:
                        list(function(entry))
                else:
                    list(function(result))

    for _ in range(runs):
        renderer = ExpositionRenderer(lambda: evaluator.state, ready=lambda: True)
        times["first render"].append(_cpu(lambda: renderer.render(Format.TEXT)))  # noqa: B023
        times["  the samples alone"].append(_cpu(samples))
        rows = lambda: [renderer._row(r, state.nodes) for r in exported]  # noqa: B023, E731, SLF001
        times["  the rows (samples and lines)"].append(_cpu(rows))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HintsCollector(lambda: evaluator.state, ready=lambda: True))
    for _ in range(runs):
        times["generate_latest (reference)"].append(_cpu(lambda: generate_latest(registry)))
    return times


def _timing(times: Times, owner: type, name: str) -> None:
    """Adds each call's CPU time of owner.name to times[name] (the last run's are kept)."""
    original = getattr(owner, name)

    def timed(*args: object, **kwargs: object) -> object:
        started = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            times[name][-1] += time.process_time() - started

    setattr(owner, name, timed)


def resize(cluster: MeasuredExporter, runs: int) -> Times:
    evaluator = cluster.evaluator
    renderer = ExpositionRenderer(lambda: evaluator.state, ready=lambda: True)
    evaluator.add_listener(renderer.observe)
    renderer.render(Format.TEXT)
    inner: Times = defaultdict(list)
    for name in ("_kept", "_rerow", "_row"):
        _timing(inner, ExpositionRenderer, name)
    _timing(inner, SortedBlocks, "set")
    node = cluster.nodes[0]
    grown = replace(node, allocatable_cpu=(node.allocatable_cpu or Fraction(4)) * 2)
    times: Times = defaultdict(list)
    for run in range(runs):
        cluster.store.upsert_node(grown if run % 2 == 0 else node)
        times["evaluator step"].append(_cpu(evaluator.step))
        for name in ("_kept", "_rerow", "_row", "set"):
            inner[name].append(0.0)
        times["render of the new state"].append(_cpu(lambda: renderer.render(Format.TEXT)))
    for name, label in (
        ("_kept", "comparing replaced results (_kept)"),
        ("_rerow", "re-rendering their rows (_rerow)"),
        ("_row", "rows rendered whole (_row)"),
        ("set", "setting rows in the blocks (set)"),
    ):
        times["  " + label] = inner[name]
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    tune_garbage_collector()
    size = ClusterSize(
        nodes=round(5000 * args.scale),
        services=round(10000 * args.scale),
        endpoints=round(150000 * args.scale),
    )
    cluster = build(size)
    gc.freeze()
    for times in (first_render(cluster, args.runs), resize(cluster, args.runs)):
        for name, values in times.items():
            ms = [value * 1000 for value in values]
            print(f"{name:<44} {statistics.median(ms):9.1f} ms CPU ({min(ms):.1f}-{max(ms):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
