"""The incremental renderer: a change costs what changed, and the bytes stay prometheus_client's.

A small synthetic cluster (bench/cluster.py's generator) with tiny blocks, so that inserts
and deletions split and merge blocks; after every step the renderer's chunks, joined, must
equal `generate_latest` over the collector for the same state, in text and OpenMetrics,
and its gzip members must decompress to the same bytes.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from types import MappingProxyType
from typing import cast

import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as _generate_openmetrics

from bench.cluster import ClusterSize, cluster_objects
from exporter.engine import ReadyNodes
from exporter.engine.model import EndpointSlice, Node, Service
from exporter.metrics.blocks import SortedBlocks
from exporter.metrics.collector import ExportOptions, HintsCollector
from exporter.metrics.exposition import ExpositionRenderer, Format
from exporter.metrics.families import HINT_FAMILIES
from exporter.metrics.family import PerService
from exporter.pipeline.evaluator import Evaluator
from exporter.run.serve import Exporter
from exporter.sources.snapshot import parse_snapshot
from exporter.state.result import ClusterResult
from exporter.state.store import ClusterStore
from exporter.vocabulary import ControllerEvent
from tests.metrics.conftest import ServeSnapshot
from tests.scrape import base_url, wait_until

generate_openmetrics = cast("Callable[[CollectorRegistry], bytes]", _generate_openmetrics)

PER_SERVICE_FAMILIES = sum(isinstance(family.samples, PerService) for family in HINT_FAMILIES)
SIZE = ClusterSize(nodes=24, services=60, endpoints=600, namespaces=4)


@dataclass
class Cluster:
    store: ClusterStore
    evaluator: Evaluator
    services: list[Service]
    slices: list[EndpointSlice]
    nodes: list[Node]


def _snapshot_objects(size: ClusterSize) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "List", "items": list(cluster_objects(size))})


@pytest.fixture
def cluster() -> Cluster:
    snapshot = parse_snapshot("test", _snapshot_objects(SIZE))
    store = ClusterStore()
    store.replace_nodes(snapshot.nodes)
    store.replace_services(snapshot.services)
    store.replace_endpoint_slices(snapshot.endpoint_slices)
    evaluator = Evaluator(store, clock=lambda: 1.8e9)
    evaluator.step()
    return Cluster(
        store,
        evaluator,
        list(snapshot.services),
        list(snapshot.endpoint_slices),
        list(snapshot.nodes),
    )


def _registry(state: Callable[[], ClusterResult], *, all_services: bool) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    options = ExportOptions(all_services=all_services)
    registry.register(HintsCollector(state, ready=lambda: True, options=options))
    return registry


def _assert_same_bytes(renderer: ExpositionRenderer, registry: CollectorRegistry) -> None:
    text = b"".join(renderer.render(Format.TEXT))
    assert text == generate_latest(registry)
    openmetrics = b"".join(renderer.render(Format.OPENMETRICS)) + b"# EOF\n"
    assert openmetrics == generate_openmetrics(registry)
    assert gzip.decompress(b"".join(renderer.render_gzip(Format.TEXT))) == text


def _without_last_endpoint(slice_: EndpointSlice) -> EndpointSlice:
    return replace(slice_, endpoints=slice_.endpoints[:-1])


def _renderer(
    cluster: Cluster, *, listen: bool = True, all_services: bool = False
) -> ExpositionRenderer:
    renderer = ExpositionRenderer(
        lambda: cluster.evaluator.state,
        ready=lambda: True,
        options=ExportOptions(all_services=all_services),
        block_load=4,
    )
    if listen:
        cluster.evaluator.add_listener(renderer.observe)
    return renderer


def test_a_one_service_change_renders_one_fragment_and_joins_one_block(cluster: Cluster) -> None:
    """One Service's new result: its fragment alone is rendered, its block alone re-joined."""
    renderer = _renderer(cluster)
    registry = _registry(lambda: cluster.evaluator.state, all_services=False)
    renderer.render(Format.TEXT)
    exported = len(renderer._blocks)
    assert exported > 20
    assert len(renderer._blocks.blocks) > 3
    before = dataclasses.replace(renderer.counts)
    renderer.render(Format.TEXT)
    assert renderer.counts == before, "an unchanged state renders nothing"

    slice_ = next(s for s in cluster.slices if len(s.endpoints) > 5)
    cluster.store.upsert_endpoint_slice(_without_last_endpoint(slice_))
    cluster.evaluator.step()
    renderer.render(Format.TEXT)
    assert renderer.counts.services - before.services == 1
    joins = renderer.counts.joins - before.joins
    assert 1 <= joins <= PER_SERVICE_FAMILIES
    _assert_held_once(renderer)
    _assert_same_bytes(renderer, registry)


def test_gzip_recompresses_only_changed_chunks(cluster: Cluster) -> None:
    """After a one-Service change, the deflate segments of untouched blocks are reused, and
    the response is one gzip member that decompresses to the text body and a tail."""
    renderer = _renderer(cluster)
    first = renderer.render_gzip(Format.TEXT)
    compressed = renderer.counts.deflated
    assert compressed > 3 * PER_SERVICE_FAMILIES
    slice_ = next(s for s in cluster.slices if len(s.endpoints) > 5)
    cluster.store.upsert_endpoint_slice(_without_last_endpoint(slice_))
    cluster.evaluator.step()
    second = renderer.render_gzip(Format.TEXT, b"# the tail\n")
    assert renderer.counts.deflated - compressed <= PER_SERVICE_FAMILIES + 3
    assert second != first
    zipped = b"".join(second)
    text = b"".join(renderer.render(Format.TEXT))
    assert gzip.decompress(zipped) == text + b"# the tail\n"
    # One member: a reader that stops after the first member (curl, browsers) reads it all.
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    assert decompressor.decompress(zipped) == text + b"# the tail\n"
    assert decompressor.eof
    assert not decompressor.unused_data


def _more_cpu(node: Node, factor: int) -> Node:
    return replace(node, allocatable_cpu=(node.allocatable_cpu or Fraction(4)) * factor)


def _steps(cluster: Cluster, seed: int) -> Iterator[str]:  # noqa: C901, PLR0912 - one branch per kind
    """Changes of every kind, one per step: what each step did, for the failure message."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible sequence, not a secret
    store = cluster.store
    slices = list(cluster.slices)
    removed: list[tuple[Service, list[EndpointSlice]]] = []
    for step in range(40):
        kind = rng.choice(["slice", "delete", "restore", "nodes", "cpu", "event", "batch"])
        if kind == "slice":
            index = rng.randrange(len(slices))
            slices[index] = _without_last_endpoint(slices[index])
            store.upsert_endpoint_slice(slices[index])
        elif kind == "delete" and len(cluster.services) > 10:
            # Several neighbours at once: blocks empty and merge.
            start = rng.randrange(len(cluster.services) - 6)
            for service in cluster.services[start : start + 6]:
                store.delete_service(service.namespace, service.name)
                owned = [s for s in slices if s.service_name == service.name]
                removed.append((service, owned))
                for slice_ in owned:
                    store.delete_endpoint_slice(slice_.namespace, slice_.name)
            del cluster.services[start : start + 6]
        elif kind == "restore" and removed:
            # Back in a burst: blocks grow past twice their load and split.
            for service, owned in removed:
                store.upsert_service(service)
                for slice_ in owned:
                    store.upsert_endpoint_slice(slice_)
                cluster.services.append(service)
            cluster.services.sort(key=lambda service: service.key)
            removed.clear()
        elif kind == "nodes":
            # One node more or less moves CPU shares: every Service is judged again.
            extra = replace(cluster.nodes[step % 3], name=f"extra-{step}")
            count = rng.randrange(len(cluster.nodes) - 3, len(cluster.nodes))
            store.replace_nodes([*cluster.nodes[:count], extra])
        elif kind == "cpu":
            # Only CPU shares move: results replaced, most of their families kept.
            store.upsert_node(_more_cpu(rng.choice(cluster.nodes), rng.randrange(1, 5)))
        elif kind == "event":
            service = rng.choice(cluster.services)
            store.upsert_event(
                ControllerEvent(
                    f"uid-{step}", *service.key, "TopologyAwareHintsDisabled", 1, 1.7e9 + step
                )
            )
        else:
            for slice_ in rng.sample(slices, 5):
                store.upsert_endpoint_slice(_without_last_endpoint(slice_))
        cluster.evaluator.step()
        yield f"step {step}: {kind}"


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("all_services", [False, True], ids=["default", "all-services"])
def test_chunks_equal_generate_latest_through_every_kind_of_change(
    cluster: Cluster, seed: int, *, all_services: bool
) -> None:
    """Inserts, deletions (blocks split and merge), node changes and events: after each, the
    streamed chunks are prometheus_client's bytes, whether the renderer saw every generation
    (listener), one in two (skipped scrapes), or none (identity comparison)."""
    state = lambda: cluster.evaluator.state  # noqa: E731
    registry = _registry(state, all_services=all_services)
    every = _renderer(cluster, all_services=all_services)
    skipping = _renderer(cluster, all_services=all_services)
    unlistened = _renderer(cluster, listen=False, all_services=all_services)
    for renderer in (every, skipping, unlistened):
        _assert_same_bytes(renderer, registry)
    for number, step in enumerate(_steps(cluster, seed)):
        renderers = [every, unlistened] if number % 2 else [every, skipping, unlistened]
        for renderer in renderers:
            try:
                _assert_same_bytes(renderer, registry)
            except AssertionError as error:
                raise AssertionError(f"after {step}") from error
    # The blocks stayed sorted and within bounds.
    keys = list(every._blocks)
    assert keys == sorted(keys)
    assert all(len(block.keys) <= 8 for block in every._blocks.blocks)


def test_node_view_change_with_unchanged_results(cluster: Cluster) -> None:
    """Ready nodes that move while every result stays the same object (an evaluator that keeps
    unchanged results): only the node-reading families are rendered again, and correctly."""
    renderer = _renderer(cluster, listen=False)
    state = cluster.evaluator.state
    current = [state]
    renderer._state = lambda: current[0]
    registry = _registry(lambda: current[0], all_services=False)
    _assert_same_bytes(renderer, registry)
    zone, names = next(iter(state.nodes.by_zone.items()))
    fewer = {z: n for z, n in state.nodes.by_zone.items() if z != zone}
    fewer[zone] = names[:-1]
    nodes = ReadyNodes(
        MappingProxyType(fewer),
        MappingProxyType({node: z for z, zone_nodes in fewer.items() for node in zone_nodes}),
    )
    current[0] = replace(state, nodes=nodes, generation=state.generation + 1, changed=frozenset())
    before = renderer.counts.services
    _assert_same_bytes(renderer, registry)
    assert renderer.counts.services - before == len(renderer._blocks)


def test_cpu_share_change_renders_only_the_families_it_changes(cluster: Cluster) -> None:
    """One node's CPU doubles: every Service's result is replaced, but only the families
    that read the allocation are rendered again; the bytes stay prometheus_client's."""
    renderer = _renderer(cluster)
    registry = _registry(lambda: cluster.evaluator.state, all_services=False)
    _assert_same_bytes(renderer, registry)
    text_before = b"".join(renderer.render(Format.TEXT))
    before = cluster.evaluator.state
    cluster.store.upsert_node(_more_cpu(cluster.nodes[0], 2))
    cluster.evaluator.step()
    after = cluster.evaluator.state
    replaced = [key for key, result in after.services.items() if before.services[key] is not result]
    assert len(replaced) > len(after.services) // 2
    _assert_same_bytes(renderer, registry)
    text_after = b"".join(renderer.render(Format.TEXT))
    rerendered = renderer.counts.rerendered
    exported = len(renderer._blocks)
    for stable in ("service_info", "service_ready_endpoints", "service_proxy_nodes"):
        assert rerendered["topology_hints_" + stable] == 0
    # The families that read the allocation are rendered again exactly for the Services
    # whose samples moved (their inputs are derived from the samples): most of them.
    for moving in ("zone_allocation_desired", "zone_load_factor"):
        name = b"topology_hints_" + moving.encode()
        moved = _services_with_other_lines(name, text_before, text_after)
        assert exported // 4 < len(moved) <= exported
        assert rerendered[name.decode()] == len(moved)
    assert renderer.counts.reused >= exported * 10
    _assert_held_once(renderer)


def _services_with_other_lines(family: bytes, before: bytes, after: bytes) -> set[bytes]:
    """The Services (their namespace and service labels) whose lines of `family` differ."""

    def lines(text: bytes) -> dict[bytes, set[bytes]]:
        by_service: dict[bytes, set[bytes]] = {}
        for line in text.splitlines():
            if line.startswith(family + b"{"):
                # address_type, namespace, service, zone: the Service is the 2nd and 3rd.
                labels = line[len(family) + 1 :].split(b",")
                service = b",".join(labels[1:3])
                by_service.setdefault(service, set()).add(line)
        return by_service

    old, new = lines(before), lines(after)
    return {service for service in old.keys() | new.keys() if old.get(service) != new.get(service)}


def _assert_held_once(renderer: ExpositionRenderer) -> None:
    """The body is held once: after a render, every row's lines are in its block's joined
    bytes only (no row keeps a copy of its own)."""
    for block in renderer._blocks.blocks:
        assert not block.stale
        assert block.rows == [None] * len(block.keys)


def test_sorted_blocks_split_merge_and_rejoin() -> None:
    """Random inserts, replacements (whole, or keeping a column's chunk) and removals against
    a dict: order, bounds, joined bytes, each row read back."""
    rng = random.Random(7)  # noqa: S311 - a reproducible sequence, not a secret
    blocks = SortedBlocks(columns=2, load=4)
    reference: dict[tuple[str, str], tuple[bytes, ...]] = {}
    for step in range(2000):
        key = ("ns", f"svc-{rng.randrange(200):03d}")
        if rng.random() < 0.4:
            blocks.remove(key)
            reference.pop(key, None)
        elif key in reference and rng.random() < 0.5:
            # A replacement that keeps one column's chunk as it is (None).
            kept = rng.randrange(2)
            update = tuple(
                None if column == kept else f"{key[1]}:{step}:{column}\n".encode()
                for column in range(2)
            )
            blocks.set(key, update)
            reference[key] = tuple(
                old if new is None else new for old, new in zip(reference[key], update, strict=True)
            )
        else:
            row = (f"{key[1]}:{step}\n".encode(), b"" if step % 3 else b"x\n")
            blocks.set(key, row)
            reference[key] = row
        if step % 50 == 0:
            # Rows set since the last join are whole, the others read from the joined bytes.
            assert {key: blocks.row(key) for key in reference} == reference
            for block in blocks.blocks:
                block.rejoin()
                assert 1 <= len(block.keys) <= 8
                # The body is held once: no row keeps bytes of its own after a join.
                assert block.rows == [None] * len(block.keys)
            assert {key: blocks.row(key) for key in reference} == reference
            ordered = sorted(reference.items())
            assert list(blocks) == [key for key, _ in ordered]
            for column in range(2):
                joined = b"".join(block.joined[column] for block in blocks.blocks)
                assert joined == b"".join(row[column] for _, row in ordered)


def _get(url: str, headers: dict[str, str]) -> tuple[dict[str, str], bytes]:
    import urllib.request  # noqa: PLC0415

    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - loopback test server
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return dict(response.headers), response.read()


def _hint_part(exporter: Exporter, fmt: Format) -> bytes:
    return b"".join(exporter.renderer.render(fmt))


@pytest.mark.parametrize("zipped", [False, True], ids=["identity", "gzip"])
def test_http_response_streams_the_same_bytes(
    serve_snapshot: ServeSnapshot, *, zipped: bool
) -> None:
    """A real GET: the hint families arrive as generate_latest writes them over the same
    state, in text and OpenMetrics, gzipped (multi-member) or not, Content-Length exact."""
    snapshot = json.loads(_snapshot_objects(SIZE))
    with serve_snapshot(snapshot) as exporter:
        wait_until(lambda: exporter.readiness()[0])
        url = base_url(exporter) + "/metrics"
        registry = _registry(lambda: exporter.evaluator.state, all_services=False)
        expected = {
            Format.TEXT: generate_latest(registry),
            Format.OPENMETRICS: generate_openmetrics(registry).removesuffix(b"# EOF\n"),
        }
        accept = {
            Format.TEXT: "text/plain",
            Format.OPENMETRICS: "application/openmetrics-text;version=1.0.0",
        }
        for fmt, media in accept.items():
            headers = {"Accept": media, "Accept-Encoding": "gzip" if zipped else "identity"}
            response_headers, body = _get(url, headers)
            assert int(response_headers["Content-Length"]) == len(body)
            if zipped:
                assert response_headers["Content-Encoding"] == "gzip"
                body = gzip.decompress(body)
            assert body.startswith(expected[fmt]), fmt
            assert _hint_part(exporter, fmt) == expected[fmt]
            assert b"topology_hints_node_proxy_services{" in body


def test_curl_reads_the_multi_member_gzip(serve_snapshot: ServeSnapshot) -> None:
    """curl --compressed (zlib's reader) decodes every member, not only the first."""
    import shutil  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    snapshot = json.loads(_snapshot_objects(SIZE))
    with serve_snapshot(snapshot) as exporter:
        wait_until(lambda: exporter.readiness()[0])
        url = base_url(exporter) + "/metrics"
        completed = subprocess.run(
            [curl, "--silent", "--fail", "--compressed", url],
            capture_output=True,
            check=True,
            timeout=60,
        )
        expected = b"".join(exporter.renderer.render(Format.TEXT))
    assert completed.stdout.startswith(expected)
    # The exporter's own families come last, in the last member.
    assert b"\ntopology_hints_ready 1.0\n" in completed.stdout[len(expected) :]


def test_prepared_says_whether_a_scrape_only_hands_out_the_cache(cluster: Cluster) -> None:
    """What the server answers on its loop thread: the current state's body, rendered, and for
    gzip its segments; a new state, or a format not yet compressed, is not prepared."""
    renderer = _renderer(cluster)
    assert not renderer.prepared(Format.TEXT, zipped=False)
    renderer.render(Format.TEXT)
    assert renderer.prepared(Format.TEXT, zipped=False)
    assert not renderer.prepared(Format.TEXT, zipped=True)
    renderer.render_gzip(Format.TEXT)
    assert renderer.prepared(Format.TEXT, zipped=True)
    assert not renderer.prepared(Format.OPENMETRICS, zipped=True)
    cluster.store.upsert_endpoint_slice(
        replace(cluster.slices[0], endpoints=cluster.slices[0].endpoints[:-1])
    )
    cluster.evaluator.step()
    assert not renderer.prepared(Format.TEXT, zipped=False)
    assert not renderer.prepared(Format.TEXT, zipped=True)
