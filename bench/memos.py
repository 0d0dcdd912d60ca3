"""What each of the engine's memos saves: the evaluator's work with it and without it.

    python bench/memos.py                         # scale 0.3, 3 runs of each variant
    python bench/memos.py --scale 1 --runs 3

The engine keeps four memos, each a value living as long as what it was made for:
`Judgements` (per capacity: one allocation per Service shape), `Feasibility` (per
capacity: checks 1-4 and margins per endpoint count, for the forecasts), `KubeProxyRoutes`
(per Ready nodes: one kube-proxy routing per hint shape) and `CrossZones` (per clients:
one set of cross-zone shares per routing shape). Each variant runs in a fresh process on
the benchmark's cluster (bench/cluster.py, as a snapshot file) with one memo made to
store nothing, so every lookup computes: the first evaluation, a node resize that moves
CPU shares, and a node turning NotReady (the Ready nodes change), each timed in CPU
(`process_time`, GC tuned as `serve` tunes it, the initial state frozen). With every memo
on, the lookups and the computations each memo made are counted too (deterministic).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from cluster import ClusterSize, node, write_snapshot  # noqa: E402

MEMOS = {
    "Judgements": ("exporter.engine.judgement", "Judgements", ("_memo",)),
    "Feasibility": ("exporter.engine.whatif.feasibility", "Feasibility", ("_memo", "_margins")),
    "KubeProxyRoutes": ("exporter.engine.kubeproxy", "KubeProxyRoutes", ("_memo",)),
    "CrossZones": ("exporter.engine.crosszone", "CrossZones", ("_memo", "_reweighed")),
}
STEPS = ("first evaluation", "node resize (CPU shares move)", "node NotReady (Ready nodes move)")


class _Counting(dict[Any, Any]):
    """A memo's dict that counts lookups and stores (stores are computations)."""

    lookups: dict[str, int]
    stores: dict[str, int]
    name = ""

    def __getitem__(self, key: Any) -> Any:  # noqa: ANN401 - any memo's value
        _Counting.lookups[self.name] = _Counting.lookups.get(self.name, 0) + 1
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:  # noqa: ANN401
        _Counting.lookups[self.name] = _Counting.lookups.get(self.name, 0) + 1
        return super().get(key, default)

    def __setitem__(self, key: Any, value: Any) -> None:  # noqa: ANN401
        _Counting.stores[self.name] = _Counting.stores.get(self.name, 0) + 1
        super().__setitem__(key, value)


_Counting.lookups, _Counting.stores = {}, {}


class _Forgetting(dict[Any, Any]):
    """A memo's dict that stores nothing: every lookup computes."""

    def __setitem__(self, key: Any, value: Any) -> None:  # noqa: ANN401
        pass


def _patch(name: str, table: type[dict[Any, Any]]) -> None:
    module_name, class_name, attributes = MEMOS[name]
    module = __import__(module_name, fromlist=[class_name])
    cls = getattr(module, class_name)
    original = cls.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401
        original(self, *args, **kwargs)
        for attribute in attributes:
            memo = table()
            if isinstance(memo, _Counting):
                memo.name = name
            setattr(self, attribute, memo)

    cls.__init__ = init


def _variant(snapshot: str, off: str | None, conn: Connection) -> None:
    import gc  # noqa: PLC0415

    from exporter.pipeline.evaluator import Evaluator  # noqa: PLC0415
    from exporter.runtime import tune_garbage_collector  # noqa: PLC0415
    from exporter.sources.decode import decode_node  # noqa: PLC0415
    from exporter.sources.snapshot import load_snapshot  # noqa: PLC0415
    from exporter.state.store import ClusterStore  # noqa: PLC0415

    tune_garbage_collector()
    for name in MEMOS:
        _patch(name, _Forgetting if name == off else _Counting)
    store = ClusterStore()
    load_snapshot(snapshot, 10**12).write_to(store)
    evaluator = Evaluator(store)
    seconds = []
    started = time.process_time()
    evaluator.step()
    seconds.append(time.process_time() - started)
    gc.freeze()
    started = time.process_time()
    store.upsert_node(decode_node(node(0, cpu="8")))
    evaluator.step()
    seconds.append(time.process_time() - started)
    started = time.process_time()
    store.upsert_node(decode_node(_not_ready(node(1))))
    evaluator.step()
    seconds.append(time.process_time() - started)
    conn.send((seconds, dict(_Counting.lookups), dict(_Counting.stores)))


def _not_ready(obj: dict[str, Any]) -> dict[str, Any]:
    for condition in obj["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "False"
    return obj


Outcome = tuple[list[float], dict[str, int], dict[str, int]]


def run_variant(snapshot: Path, off: str | None) -> Outcome:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_variant, args=(str(snapshot), off, child), daemon=True)
    process.start()
    result: Outcome = parent.recv()
    process.join(60)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    size = ClusterSize().scaled(args.scale)
    with tempfile.TemporaryDirectory() as directory:
        snapshot = Path(directory) / "snapshot.json"
        write_snapshot(size, snapshot)
        variants: dict[str | None, list[list[float]]] = {None: [], **{name: [] for name in MEMOS}}
        counts: tuple[dict[str, int], dict[str, int]] = ({}, {})
        for number in range(args.runs):
            # Alternately, so that a change in the machine's load spreads over all variants.
            for off, runs in variants.items():
                seconds, lookups, stores = run_variant(snapshot, off)
                runs.append(seconds)
                if off is None:
                    counts = (lookups, stores)
                print(f"[run {number + 1}] {off or 'every memo'}: {seconds}", file=sys.stderr)
    print(
        f"scale {args.scale:g}: {size.nodes} nodes, {size.services} Services, "
        f"{size.endpoints} endpoints; CPU s, median [min-max] of {args.runs}\n"
    )
    print("| memo off | " + " | ".join(STEPS) + " |")
    print("|---|" + "---|" * len(STEPS))
    for off, runs in variants.items():
        cells = []
        for step in range(len(STEPS)):
            values = [run[step] for run in runs]
            cell = f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"
            if off is not None:
                base = statistics.median(run[step] for run in variants[None])
                cell += f" (+{statistics.median(values) - base:.3f})"
            cells.append(cell)
        print(f"| {off or 'none (every memo on)'} | " + " | ".join(cells) + " |")
    lookups, stores = counts
    print("\n| memo | lookups | computed | served from the memo |")
    print("|---|---|---|---|")
    for name in MEMOS:
        looked, computed = lookups.get(name, 0), stores.get(name, 0)
        print(f"| {name} | {looked:,} | {computed:,} | {looked - computed:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
