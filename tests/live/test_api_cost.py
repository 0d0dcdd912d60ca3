"""What the exporter costs the API server: requests, etcd range reads and bytes, counted.

A start, a resume (every watch dropped, history intact) and a 410 (history compacted, every
watch dropped: each resource lists again), each counted on the test API server, against the
benchmark's synthetic cluster (bench/cluster.py) at a small scale, three ways:

- consistent: `use_apiserver_cache=False` and no streaming: what every LIST was before
  (`limit=500` pages without resourceVersion, each a quorum read of etcd);
- cache LIST: the default against a server without the WatchList feature (it answers the
  streaming list with 422, then one LIST at resourceVersion=0 per resource, from memory);
- streaming: the default against a server with it (one watch request per resource, which
  starts with the current objects).

`-k table -s` prints the table of docs/performance.md ("What the API server pays").
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from exporter.run.serve import Exporter, ServeOptions
from exporter.sources.informer import InformerSettings
from tests.conftest import PROJECT_ROOT
from tests.kubeapi import FakeKubeAPI, Request
from tests.live.conftest import FAST
from tests.scrape import running_exporter, wait_until

RESOURCES = ("nodes", "services", "endpointslices", "events")
# 500 Nodes, 1,000 Services, 15,000 endpoints: Services and slices take more than one
# 500-object page. API_COST_SCALE=1 counts the benchmark's own size (minutes, not run by
# default).
SCALE = float(os.environ.get("API_COST_SCALE", "0.1"))


def _bench_cluster() -> ModuleType:
    path = PROJECT_ROOT / "bench" / "cluster.py"
    spec = importlib.util.spec_from_file_location("bench_cluster", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cluster() -> list[dict[str, object]]:
    bench = _bench_cluster()
    return list(bench.cluster_objects(bench.ClusterSize().scaled(SCALE)))


@dataclass(frozen=True)
class Cost:
    requests: int
    # Range reads of etcd: consistent (or uncached) LIST pages.
    etcd_reads: int
    consistent_lists: int
    streaming_lists: int
    cache_lists: int
    bytes: int

    @classmethod
    def of(cls, requests: list[Request]) -> Cost:
        ours = [r for r in requests if r.resource in RESOURCES]
        return cls(
            requests=len(ours),
            etcd_reads=sum(1 for r in ours if r.served.source == "etcd"),
            consistent_lists=sum(1 for r in ours if r.consistent_list),
            streaming_lists=sum(1 for r in ours if r.streaming_list and r.served.status == 200),
            cache_lists=sum(1 for r in ours if not r.watch and r.served.source == "cache"),
            bytes=sum(r.served.bytes for r in ours),
        )


# The production page size (FAST pages by 50).
MEASURED = dataclasses.replace(FAST, page_size=InformerSettings().page_size)
WAYS: dict[str, tuple[InformerSettings, bool]] = {
    # name: (informer settings, the server's WatchList feature)
    "consistent (before)": (
        dataclasses.replace(MEASURED, use_apiserver_cache=False, streaming_list=False),
        True,
    ),
    "cache LIST": (dataclasses.replace(MEASURED, streaming_list=True), False),
    "streaming list": (dataclasses.replace(MEASURED, streaming_list=True), True),
}


@contextmanager
def _exporter(api: FakeKubeAPI, kubeconfig: Path, settings: InformerSettings) -> Iterator[Exporter]:
    options = ServeOptions(
        listen_address="127.0.0.1:0",
        kubeconfig=str(kubeconfig),
        context="fake",
        informer=settings,
    )
    with running_exporter(options) as exporter:
        yield exporter


def _since(api: FakeKubeAPI, mark: int) -> list[Request]:
    return api.requests[mark:]


def _listed_and_watching(api: FakeKubeAPI, mark: int) -> Callable[[], bool]:
    """Every resource read again since `mark`, and watched again after that read."""

    def done() -> bool:
        requests = _since(api, mark)
        for resource in RESOURCES:
            mine = [r for r in requests if r.resource == resource and r.served.status == 200]
            reads = [i for i, r in enumerate(mine) if not r.watch or r.streaming_list]
            if not reads or not any(r.watch for r in mine[reads[0] :]):
                return False
            if api.open_watches(resource) != 1:
                return False
        return True

    return done


def _settle(api: FakeKubeAPI, mark: int) -> None:
    """Wait until every resource is read and watched again, its first lines all sent."""
    wait_until(_listed_and_watching(api, mark), timeout=30)
    for resource in RESOURCES:
        # A watch streams once its first lines (a streaming list's objects) are out.
        api.wait_for_watches(resource, 1, timeout=30, exact=True)


def _resumed(api: FakeKubeAPI, mark: int) -> Callable[[], bool]:
    def done() -> bool:
        requests = _since(api, mark)
        return all(
            any(r.resource == resource and r.watch and r.served.status == 200 for r in requests)
            and api.open_watches(resource) == 1
            for resource in RESOURCES
        )

    return done


def _one_of_each(cluster: list[dict[str, object]]) -> list[dict[str, object]]:
    changed: dict[object, dict[str, object]] = {}
    for obj in cluster:
        changed.setdefault(obj["kind"], obj)
    event: dict[str, object] = {
        "kind": "Event",
        "metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Service", "name": "web", "namespace": "default"},
        "reason": "TopologyAwareHintsDisabled",
        "type": "Warning",
        "message": "Insufficient Node information",
    }
    return [*changed.values(), event]


def measure(
    cluster: list[dict[str, object]],
    tmp_path: Path,
    settings: InformerSettings,
    *,
    watch_list: bool,
) -> dict[str, Cost]:
    """The cost of a start, a resume and a 410 for one way of listing."""
    with FakeKubeAPI(bookmark_interval=0.2, watch_list=watch_list) as api:
        api.load(cluster)
        kubeconfig = api.write_kubeconfig(tmp_path / f"kubeconfig-{watch_list}", "fake")
        with _exporter(api, kubeconfig, settings) as exporter:
            wait_until(lambda: exporter.readiness()[0], timeout=60)
            # Events too (optional, not awaited by /readyz): an empty streaming list is
            # complete at the bookmark after its end bookmark.
            wait_until(lambda: all(i.synced.is_set() for i in exporter.informers), timeout=30)
            _settle(api, 0)
            start = Cost.of(api.requests)
            mark = len(api.requests)
            api.drop_watches()
            wait_until(_resumed(api, mark), timeout=30)
            resume = Cost.of(_since(api, mark))
            mark = len(api.requests)
            # One object of each resource changes while the history is lost (load() records
            # no events): every open watch ends with 410 Gone, as after an etcd compaction
            # that passed it.
            api.load(_one_of_each(cluster))
            _settle(api, mark)
            expired = Cost.of(_since(api, mark))
        assert not api.errors
    return {"start": start, "resume": resume, "410": expired}


def test_a_start_makes_no_consistent_list_by_default(
    cluster: list[dict[str, object]], tmp_path: Path
) -> None:
    """Done-when of issue 21: one streaming list per resource, nothing read from etcd."""
    default = dataclasses.replace(MEASURED, streaming_list=InformerSettings().streaming_list)
    assert InformerSettings().use_apiserver_cache
    costs = measure(cluster, tmp_path, default, watch_list=True)
    for event in ("start", "410"):
        assert costs[event].consistent_lists == 0, event
        assert costs[event].etcd_reads == 0, event
        assert costs[event].streaming_lists == len(RESOURCES), event
        assert costs[event].cache_lists == 0, event
    assert costs["resume"].streaming_lists == 0
    assert costs["resume"].requests == len(RESOURCES)


def test_without_watch_list_a_start_lists_from_the_cache(
    cluster: list[dict[str, object]], tmp_path: Path
) -> None:
    """WatchList off: the 422 is taken once per resource, then LIST at resourceVersion 0."""
    costs = measure(cluster, tmp_path, WAYS["cache LIST"][0], watch_list=False)
    start = costs["start"]
    assert (start.consistent_lists, start.etcd_reads) == (0, 0)
    assert start.cache_lists == len(RESOURCES)
    # One refused streaming list, one LIST, one watch per resource.
    assert start.requests == 3 * len(RESOURCES)
    # The refusal is remembered: a 410 costs a LIST and a watch, no new streaming attempt.
    assert costs["410"].cache_lists == len(RESOURCES)
    assert costs["410"].consistent_lists == 0
    assert costs["410"].streaming_lists == 0


def test_consistent_reads_page_through_etcd(
    cluster: list[dict[str, object]], tmp_path: Path
) -> None:
    """--use-apiserver-cache=false: the consistent paged LISTs of before, each from etcd."""
    costs = measure(cluster, tmp_path, WAYS["consistent (before)"][0], watch_list=True)
    start = costs["start"]
    assert start.cache_lists == 0
    assert start.consistent_lists == start.etcd_reads
    assert start.consistent_lists > len(RESOURCES)  # Services and slices take several pages


def test_table(cluster: list[dict[str, object]], tmp_path: Path) -> None:
    """The table of docs/performance.md; `-s` prints it."""
    rows = []
    for way, (settings, watch_list) in WAYS.items():
        for event, cost in measure(cluster, tmp_path, settings, watch_list=watch_list).items():
            rows.append(
                f"| {way} | {event} | {cost.requests} | {cost.etcd_reads} | "
                f"{cost.bytes / 1e6:.2f} MB |"
            )
    header = "| way | event | requests | etcd range reads | bytes sent |\n|---|---|---|---|---|"
    print("\n" + header + "\n" + "\n".join(rows))  # noqa: T201 - the table for the docs
    assert len(rows) == 9
