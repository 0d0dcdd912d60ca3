"""The status pages' WSGI app on real evaluated states: routes, filters, pages, escaping, API."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import msgspec
import pytest

from bench.cluster import ClusterSize, cluster_objects
from exporter.engine import DEFAULT_DATAPLANES, DataPlane
from exporter.engine.problems import ProblemId
from exporter.pipeline.evaluator import Evaluator
from exporter.report.document import evaluation_document, service_document
from exporter.report.explain import INDENT
from exporter.run.oneshot import evaluate_snapshot
from exporter.run.serve import ServeOptions
from exporter.sources.snapshot import Snapshot, load_snapshot, parse_snapshot
from exporter.state.result import ClusterResult
from exporter.state.store import ClusterStore
from exporter.web.app import StatusPages
from exporter.web.links import Links, explain_url, parse_external_url
from exporter.web.table import Query, Standing, status_view
from tests.conftest import EXAMPLES_DIR, PROJECT_ROOT, exporter_command, run_cli
from tests.k8s_objects import (
    endpoint,
    endpoint_slice,
    service,
    three_zone_nodes,
    zone_endpoints,
)
from tests.scrape import running_exporter, wait_until

DEMO = EXAMPLES_DIR / "demo-cluster.json"
MARKUP = "<img src=x onerror=alert(1)>"


def evaluated(
    snapshot: Snapshot, dataplanes: tuple[DataPlane, ...] = DEFAULT_DATAPLANES
) -> ClusterResult:
    """The state `serve --snapshot [--dataplane ...]` publishes for this snapshot."""
    store = ClusterStore()
    store.replace_nodes(snapshot.nodes)
    store.replace_services(snapshot.services)
    store.replace_endpoint_slices(snapshot.endpoint_slices)
    return Evaluator(store, dataplanes=dataplanes).step()


@pytest.fixture(scope="module")
def demo_state() -> ClusterResult:
    return evaluated(load_snapshot(str(DEMO)))


@pytest.fixture(scope="module")
def big_state() -> ClusterResult:
    """250 Services of the benchmark's generator, in 50 namespaces."""
    objects = list(cluster_objects(ClusterSize(nodes=30, services=250, endpoints=1500)))
    data = msgspec.json.encode({"kind": "List", "items": objects})
    return evaluated(parse_snapshot("bench", data))


def pages(state: ClusterResult, **options: Any) -> StatusPages:
    return StatusPages(lambda: state, readiness=lambda: (True, "ready"), **options)


def get(app: StatusPages, path: str, method: str = "GET") -> tuple[str, dict[str, str], bytes]:
    """One request through the WSGI interface, as wsgiref would make it."""
    path_info, _, query = path.partition("?")
    environ = {
        "REQUEST_METHOD": method,
        # wsgiref percent-decodes the path and hands its UTF-8 bytes over as latin-1 text.
        "PATH_INFO": unquote(path_info).encode().decode("latin-1"),
        "QUERY_STRING": query,
    }
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], _exc: object = None) -> None:
        seen["status"], seen["headers"] = status, dict(headers)

    body: Iterable[bytes] = app(environ, start_response)  # type: ignore[arg-type]
    return seen["status"], seen["headers"], b"".join(body)


def row_names(html: bytes) -> list[str]:
    """Service names of the table, in order (the row headers link to each Service)."""
    text = html.decode()
    return [
        part.split('">', 1)[1].split("<", 1)[0]
        for part in text.split('<th scope="row"><a href="/services/')[1:]
    ]


def test_index_lists_problems_first(demo_state: ClusterResult) -> None:
    status, headers, body = get(pages(demo_state), "/")
    assert status == "200 OK"
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    view = status_view(demo_state)
    standings = [row.standing for row in view.rows]
    assert standings == sorted(standings)
    # The demo's worst problems are warnings (hints off, partial hints), as their alerts.
    assert view.rows[0].standing is Standing.WARNING
    assert row_names(body) == [row.name for row in view.rows]
    assert dict(view.counts["state"]) == {"enabled": 4, "disabled": 2, "not-applicable": 1}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=disabled", ["checkout", "ledger"]),
        ("mechanism=none", ["frontend"]),
        ("problem=partial-hints", ["inventory"]),
        ("problem=overloaded-zone", ["search"]),
        ("q=LEDGER", ["ledger"]),
        ("namespace=payments", ["checkout", "ledger"]),
        ("namespace=payments&state=enabled", []),
        (
            "state=bogus",
            ["checkout", "ledger", "inventory", "search", "cart", "catalog", "frontend"],
        ),
    ],
)
def test_filters(demo_state: ClusterResult, query: str, expected: list[str]) -> None:
    _, _, body = get(pages(demo_state), f"/?{query}")
    assert row_names(body) == expected


def test_pagination_is_server_side(big_state: ClusterResult) -> None:
    app = pages(big_state)
    view = status_view(big_state)
    assert len(view.rows) == 250
    names = [row.name for row in view.rows]
    assert row_names(get(app, "/")[2]) == names[:100]
    third = get(app, "/?page=3")[2]
    assert row_names(third) == names[200:]
    assert b"Showing 201\xe2\x80\x93250 of 250" in third
    assert row_names(get(app, "/?page=99")[2]) == names[200:], "past the end: the last page"
    assert row_names(get(app, f"/?page={10**12}")[2]) == names[200:], "far past the end too"
    # More digits than int() reads (4,300): still a number, so still the last page.
    assert row_names(get(app, f"/?page={'9' * 4_301}")[2]) == names[200:]
    assert row_names(get(app, f"/?per_page={'9' * 4_301}")[2]) == names
    assert row_names(get(app, "/?per_page=50&page=2")[2]) == names[50:100]
    assert b'href="/?page=2"' in get(app, "/")[2]
    filtered = get(app, "/?namespace=team-3&page=1&per_page=50")[2]
    assert set(row_names(filtered)) == {row.name for row in view.rows if row.namespace == "team-3"}


@pytest.mark.parametrize(
    "query",
    [
        "page=%C2%B2",  # a digit to str.isdigit(), not to int()
        "page=0",
        "page=-1",
        "page=x",
        "page=1.5",
        "per_page=%D9%A3",  # ARABIC-INDIC DIGIT THREE
        "per_page=0",
        "per_page=x",
    ],
)
def test_a_malformed_page_number_is_400_naming_the_parameter(
    demo_state: ClusterResult, query: str
) -> None:
    status, headers, body = get(pages(demo_state), f"/?{query}")
    parameter = query.partition("=")[0]
    assert status == "400 Bad Request"
    assert headers["Content-Type"].startswith("text/html")
    assert f"{parameter} must be a whole number, 1 or more.".encode() in body


def test_query_keeps_filters_across_pages() -> None:
    query = Query.parse("namespace=a&state=disabled&q=x&per_page=50&page=4")
    assert query.encode(page=5) == "namespace=a&q=x&state=disabled&page=5&per_page=50"
    assert query.encode(page=1, state="enabled") == "namespace=a&q=x&state=enabled&per_page=50"


def test_service_page_has_the_explain_content(demo_state: ClusterResult) -> None:
    status, _, body = get(pages(demo_state), "/services/payments/ledger")
    text = body.decode()
    assert status == "200 OK"
    for words in (
        "Service payments/ledger",
        "MinAllocationExceedsOverloadThreshold",
        "3+3+3 = 9",
        "TopologyAwareHintsDisabled",
        '<table class="zones">',
        '<th scope="col">Zone</th>',
        "Replica advisor",
        "scale to 7 or 9 ready endpoints",
    ):
        assert words in text, words


def test_config_issue_fix_and_drift_are_shown(demo_state: ClusterResult) -> None:
    checkout = get(pages(demo_state), "/services/payments/checkout")[2].decode()
    assert "annotation-shadows-traffic-distribution" in checkout
    assert "remove the annotation" in checkout
    inventory = get(pages(demo_state), "/services/shop/inventory")[2].decode()
    assert "<h3>Drift</h3>" in inventory
    assert "kube-proxy ignores every hint" in inventory


def test_cluster_values_are_escaped(tmp_path: Path) -> None:
    """An annotation value is free text: it is shown, never parsed as markup."""
    snapshot = json.loads(DEMO.read_text())
    for item in snapshot["items"]:
        if item["kind"] == "Service" and item["metadata"]["name"] == "frontend":
            item["metadata"]["annotations"] = {"service.kubernetes.io/topology-mode": MARKUP}
            item["spec"]["trafficDistribution"] = "\"'><script>x</script>"
    state = evaluated(parse_snapshot("markup", json.dumps(snapshot).encode()))
    text = get(pages(state), "/services/shop/frontend")[2].decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "&#34;&#39;&gt;&lt;script&gt;x&lt;/script&gt;" in text
    assert "<img" not in text
    assert "<script>" not in text
    unknown = get(pages(state), "/services/%3Cb%3E/x")
    assert unknown[0] == "404 Not Found"
    assert b"&lt;b&gt;/x" in unknown[2]
    assert b"<b>" not in unknown[2]


def test_api_serves_the_evaluate_document(demo_state: ClusterResult) -> None:
    app = pages(demo_state)
    status, headers, body = get(app, "/api/v1/evaluation")
    assert status == "200 OK"
    assert headers["Content-Type"] == "application/json"
    evaluation = evaluate_snapshot(load_snapshot(str(DEMO)))
    assert json.loads(body) == json.loads(json.dumps(evaluation_document(evaluation)))
    status, _, body = get(app, "/api/v1/services/payments/ledger")
    ledger = [v for v in evaluation.verdicts() if v.key[:2] == ("payments", "ledger")]
    assert json.loads(body) == json.loads(
        json.dumps([service_document(v, evaluation.problems(v)) for v in ledger])
    )
    status, _, body = get(app, "/api/v1/services/payments/nope")
    assert status == "404 Not Found"
    assert "No Service payments/nope" in json.loads(body)["error"]
    assert get(app, "/api/v1/nothing")[0] == "404 Not Found"


def test_the_evaluate_command_and_the_api_agree(demo_state: ClusterResult) -> None:
    completed = subprocess.run(
        [*exporter_command(), "evaluate", "--snapshot", str(DEMO)],
        capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    api = get(pages(demo_state), "/api/v1/evaluation")[2]
    assert json.loads(api) == json.loads(completed.stdout)


def test_before_the_first_evaluation() -> None:
    app = StatusPages(ClusterResult, readiness=lambda: (False, "not ready: nodes: listing"))
    status, _, body = get(app, "/")
    assert status == "200 OK"
    assert b"not ready: nodes: listing" in body
    assert b"no Service with EndpointSlices yet" in body
    status, _, body = get(app, "/api/v1/evaluation")
    assert status == "503 Service Unavailable"
    assert json.loads(body) == {"error": "no evaluation yet: not ready: nodes: listing"}


def test_methods_and_assets(demo_state: ClusterResult) -> None:
    app = pages(demo_state)
    status, headers, body = get(app, "/", method="HEAD")
    assert (status, body) == ("200 OK", b"")
    assert int(headers["Content-Length"]) == len(get(app, "/")[2])
    status, headers, _ = get(app, "/", method="POST")
    assert status == "405 Method Not Allowed"
    assert headers["Allow"] == "GET, HEAD"
    status, headers, body = get(app, "/static/status.css")
    assert (status, headers["Content-Type"]) == ("200 OK", "text/css; charset=utf-8")
    assert b"prefers-color-scheme: dark" in body
    assert get(app, "/static/../app.py")[0] == "404 Not Found"
    assert get(app, "/services/payments")[0] == "404 Not Found"


def test_external_url_prefixes_links_and_routes(demo_state: ClusterResult) -> None:
    app = pages(demo_state, external_url="https://ops.example.com/topology/")
    for path in ("/", "/topology/", "/topology"):
        status, _, body = get(app, path)
        assert status == "200 OK", path
        assert b'href="/topology/services/payments/ledger"' in body
        assert b'href="/topology/static/status.css"' in body
    assert get(app, "/topology/services/payments/ledger")[0] == "200 OK"
    assert get(app, "/services/payments/ledger")[0] == "200 OK", "a proxy that strips it"
    assert explain_url("https://ops.example.com/topology/", "shop", "cart") == (
        "https://ops.example.com/topology/services/shop/cart"
    )
    assert Links.from_external_url(None).service("a", "b") == "/services/a/b"


@pytest.mark.parametrize(
    "url", ["ops.example.com", "ftp://ops.example.com", "https://", "http://x/?a=1", "http://x/#a"]
)
def test_bad_external_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="external URL"):
        parse_external_url(url)


def test_bad_external_url_flag_exits_2_with_one_line() -> None:
    completed = subprocess.run(
        [*exporter_command(), "serve", "--snapshot", str(DEMO), "--external-url", "nope"],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    assert completed.returncode == 2
    assert completed.stderr == (
        "topology-hints-exporter: error: external URL 'nope' is not an absolute http:// or "
        "https:// URL\n"
    )


def test_rows_of_unchanged_services_are_reused() -> None:
    """After one Service changes, the next view builds one new row and reuses the others."""
    snapshot = load_snapshot(str(DEMO))
    store = ClusterStore()
    store.replace_nodes(snapshot.nodes)
    store.replace_services(snapshot.services)
    store.replace_endpoint_slices(snapshot.endpoint_slices)
    evaluator = Evaluator(store)
    before = status_view(evaluator.step())
    ledger = next(s for s in snapshot.services if s.key == ("payments", "ledger"))
    store.upsert_service(replace(ledger, topology_mode_annotation=None))
    state = evaluator.step()
    after, fresh = status_view(state, before), status_view(state)
    assert [row.order for row in after.rows] == [row.order for row in fresh.rows]
    assert {k: dict(v) for k, v in after.counts.items()} == {
        k: dict(v) for k, v in fresh.counts.items()
    }
    assert after.counts["mechanism"]["none"] == before.counts["mechanism"]["none"] + 1
    reused = {key for key in state.services if after.rows_of[key] is before.rows_of[key]}
    assert reused == set(state.services) - {("payments", "ledger")}


def test_status_page_benchmark_runs() -> None:
    """`bench/status_page.py` still works at a tiny size (no timing asserted)."""
    completed = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "bench" / "status_page.py"), "--nodes", "30",
         "--services", "60", "--endpoints", "400"],
        capture_output=True, text=True, timeout=120, check=False, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
    for row in ("/ (cold: builds the rows)", "/ (after one Service changed)", "/services/NS/NAME",
                "/api/v1/evaluation"):  # fmt: skip
        assert row in completed.stdout, completed.stdout


@pytest.mark.parametrize("example", sorted(EXAMPLES_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_every_page_of_every_example_renders(example: Path) -> None:
    """Insufficient node info, partial hints, overrides...: each page renders (strict templates)."""
    state = evaluated(load_snapshot(str(example)))
    app = pages(state)
    index = get(app, "/")
    assert index[0] == "200 OK"
    for namespace, name in state.services:
        status, _, body = get(app, f"/services/{namespace}/{name}")
        assert status == "200 OK", (namespace, name)
        assert f"Service {namespace}/{name}".encode() in body
    if not state.capacity.sufficient:
        assert b"insufficient" in index[2]
        assert b"kubectl label node" in index[2] or b"label worker nodes" in index[2]


def test_routing_and_margin_columns_tell_what_the_verdict_does_not() -> None:
    """An endpoint without a ready condition: enabled and 100% hinted, yet 0% local; the row
    sorts with the problems and the routing filter finds it. The demo's cart shows its
    margin (one endpoint fewer or two more turn hints off)."""
    vector = PROJECT_ROOT / "tests" / "conformance"
    snapshot = load_snapshot(
        str(vector / "upstream-addhints-2-ready-1-unready-1-unknown-after.snapshot.json")
    )
    view = status_view(evaluated(snapshot))
    [row] = view.rows
    assert row.verdict.expected_state == "enabled"
    assert ProblemId.HINTS_IGNORED in row.problems
    assert row.standing is Standing.WARNING
    _, _, html = get(pages(evaluated(snapshot)), "/?problem=hints-ignored")
    assert b"traffic leaves its zone" in html
    assert b"0.0% local" in html or b"0% local" in html
    assert row_names(html) == [row.verdict.service.name]

    cart = next(r for r in status_view(evaluated(load_snapshot(str(DEMO)))).rows
                if r.verdict.service.name == "cart")  # fmt: skip
    assert cart.forecast.margin is not None
    assert (cart.forecast.margin.down, cart.forecast.margin.up) == (0, 1)
    _, _, page = get(pages(evaluated(load_snapshot(str(DEMO)))), "/?q=cart")
    assert b"one endpoint fewer turns hints off; 1 surge pod more keeps them on" in page


def test_zone_loss_card_names_each_zone() -> None:
    """Two zones: losing either leaves one zone, which turns the Service's hints off."""
    vector = (
        PROJECT_ROOT / "tests" / "conformance" / "float-boundary-ratio-0.4-0.6-n9.snapshot.json"
    )
    state = evaluated(load_snapshot(str(vector)))
    assert dict(status_view(state).zone_loss) == {"zone-a": 1, "zone-b": 1}
    _, _, html = get(pages(state), "/")
    assert b"If a zone is lost" in html


@pytest.mark.server
def test_the_footer_names_the_snapshot_file_not_its_folders(tmp_path: Path) -> None:
    """The page answers anyone who reaches the port: a path would show users and layouts."""
    folder = tmp_path / "home-alice-clusters"
    folder.mkdir()
    snapshot = folder / "prod.json"
    snapshot.write_bytes(DEMO.read_bytes())
    with running_exporter(
        ServeOptions(listen_address="127.0.0.1:0", snapshot=str(snapshot))
    ) as live:
        wait_until(lambda: live.readiness()[0], timeout=30)
        _, _, body = live.pages.handle("/")
    page = body.decode()
    assert "source: snapshot prod.json" in page
    assert "home-alice-clusters" not in page


def test_local_policy_drops_are_a_warning_and_headless_hints_no_problem() -> None:
    """internalTrafficPolicy Local with endpoints on 1 of 3 nodes: 33% local and "local policy
    drops" (a warning), never "fails closed" (that is a data plane refusing clients because
    of hints). A headless Service without hints: nothing proxies it, so no "drift"."""
    items = [
        *three_zone_nodes(),
        # Asks for hints, so they are in play (a Service that does not is never a problem).
        service(
            "infra", "cache", traffic_distribution="PreferClose", internal_traffic_policy="Local"
        ),
        endpoint_slice(
            "infra",
            "cache-1",
            "cache",
            [endpoint("10.0.0.1", "zone-a", "node-a-0", hint_zones=("zone-a",))],
        ),
        service("shop", "db", topology_mode="Auto", cluster_ip="None"),
        endpoint_slice("shop", "db-1", "db", zone_endpoints(6, hinted=False)),
    ]
    data = msgspec.json.encode({"kind": "List", "items": items})
    state = evaluated(parse_snapshot("local", data))
    rows = {row.name: row for row in status_view(state).rows}
    cache, db = rows["cache"], rows["db"]
    assert ProblemId.LOCAL_POLICY_DROPS in cache.problems
    assert cache.standing is Standing.WARNING
    assert ProblemId.FAILS_CLOSED not in cache.problems
    assert db.verdict.drift
    assert db.problems == ()
    _, _, html = get(pages(state), "/?problem=local-policy-drops")
    assert row_names(html) == ["cache"]
    assert b"33.3% local" in html


def test_cross_zone_share_is_on_the_list_the_service_page_and_the_api(
    demo_state: ClusterResult,
) -> None:
    """behaviour §13: the numbers explain prints, said to be a model, on every surface."""
    app = pages(demo_state)
    page = get(app, "/services/payments/ledger")[2].decode()
    assert "Cross-zone traffic" in page
    assert '<th scope="row">kube-proxy</th><td class="num">67%</td><td class="num">0%</td>' in page
    assert "eu-west-1c 75%" in page
    assert "a model" in page
    listing = get(app, "/?namespace=payments")[2].decode()
    assert '<th scope="col"' in listing
    assert "Cross-zone" in listing
    assert "floor 0%" in listing
    (entry,) = json.loads(get(app, "/api/v1/services/payments/ledger")[2])
    figures = entry["cross_zone"]["kube-proxy"]
    assert round(figures["effective"], 4) == 0.6667
    assert figures["floor"] == 0
    assert set(figures["zones"]) == {"eu-west-1a", "eu-west-1b", "eu-west-1c"}


# -- the Service page says what `explain` says (issue 18) ------------------------------------

# The order `serve --dataplane` was given, not kube-proxy first nor alphabetical.
DATAPLANES = (DataPlane.CILIUM_NO_TOPOLOGY, DataPlane.KUBE_PROXY)


def explain_fields(namespace: str, name: str, *args: str) -> dict[str, list[str]]:
    """What `explain NAMESPACE/NAME` prints, as label -> paragraphs (wrapped lines joined)."""
    completed = run_cli("explain", "--snapshot", str(DEMO), "-n", namespace, name, *args)
    assert completed.returncode in {0, 1}, completed.stderr
    fields: dict[str, list[str]] = {}
    label, apart = "", False
    service = completed.stdout[completed.stdout.index(f"Service {namespace}/{name} (") :]
    for line in service.splitlines()[1:]:
        if not line.strip():
            apart = True  # a command too wide to follow its lead comes after a blank line
            continue
        if line.startswith("  ") and not line.startswith(INDENT):
            label, _, value = line.strip().partition(":")
            fields[label] = [value.strip()] if value.strip() else []
        elif line.startswith(INDENT + "  ") and fields[label] and not apart:
            fields[label][-1] += " " + line.strip()  # a paragraph's wrapped line
        else:
            fields[label].append(line.strip())
        apart = False
    return fields


def plain(markup: str) -> str:
    """The text a reader sees in a piece of the page."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup)).strip()


def test_service_page_routes_every_configured_data_plane_as_explain_does() -> None:
    """`serve --dataplane cilium-no-topology,kube-proxy`: the list says cart's traffic leaves
    its zone (under Cilium without topology); the Service page says where, per data plane,
    in that order and in explain's words, not only kube-proxy's per-zone modes."""
    app = pages(evaluated(load_snapshot(str(DEMO)), DATAPLANES))
    listing = get(app, "/?q=cart")[2].decode()
    assert "traffic leaves its zone" in listing
    page = get(app, "/services/shop/cart")[2].decode()
    items = page.split('<ul class="notes routing">', 1)[1].split("</ul>", 1)[0]
    shown = [plain(item) for item in re.findall(r"<li>(.*?)</li>", items, re.DOTALL)]
    explain = explain_fields("shop", "cart", "--dataplane", "cilium-no-topology,kube-proxy")
    assert shown == explain["Effective routing"]
    assert shown[0].startswith("cilium-no-topology: cluster-wide on every node: ")
    assert shown[1] == "kube-proxy: same-zone on 6 of 6 nodes"
    assert '<span class="badge tone-warn">cilium-no-topology</span>' in items
    assert '<span class="badge tone-good">kube-proxy</span>' in items


def test_suggestion_shows_the_whole_command_explain_prints(demo_state: ClusterResult) -> None:
    """The Suggestion line used to end at "(it never refuses):", before the command."""
    page = get(pages(demo_state), "/services/payments/checkout")[2].decode()
    (command,) = re.findall(r'<pre class="command"><code>(.*?)</code></pre>', page)
    suggestion = explain_fields("payments", "checkout")["Suggestion"]
    assert suggestion[-1].startswith("kubectl annotate service")
    assert html.unescape(command) == suggestion[-1]
    assert command == (
        "kubectl annotate service -n payments checkout service.kubernetes.io/topology-mode-"
    )


def test_margin_is_said_in_explains_words_on_the_list_and_the_page(
    demo_state: ClusterResult,
) -> None:
    """Not "-0 / +1", which reads as two signed numbers: both pages say explain's Margin."""
    app = pages(demo_state)
    (margin,) = explain_fields("shop", "cart")["Margin"]
    assert margin == "one endpoint fewer turns hints off; 1 surge pod more keeps them on"
    listing = get(app, "/?q=cart")[2].decode()
    assert margin in listing
    assert "-0 / +1" not in listing
    page = get(app, "/services/shop/cart")[2].decode()
    assert f"<strong>Margin:</strong> {margin}</p>" in page


SHARD_NOTICE = "Shard 1 of 2 (numbered from 0): counts cover only the Services this shard owns"


@pytest.mark.server
def test_a_sharded_exporter_says_its_pages_cover_its_shard_only(tmp_path: Path) -> None:
    """`serve --shard 1 --total-shards 2`: the list and each Service page say which shard
    they show; an exporter that is not sharded says nothing of shards."""
    options = ServeOptions(
        listen_address="127.0.0.1:0", snapshot=str(DEMO), shard=1, total_shards=2
    )
    with running_exporter(options) as live:
        wait_until(lambda: live.readiness()[0], timeout=30)
        listing = live.pages.handle("/")[2].decode()
        owned = sorted(live.evaluator.state.services)
        service = live.pages.handle(f"/services/{owned[0][0]}/{owned[0][1]}")[2].decode()
    assert 0 < len(owned) < len(load_snapshot(str(DEMO)).services), "the demo splits"
    assert SHARD_NOTICE in listing
    assert SHARD_NOTICE in service
    unsharded = pages(evaluated(load_snapshot(str(DEMO))))
    assert "Shard" not in get(unsharded, "/")[2].decode()
    assert "Shard" not in get(unsharded, "/services/shop/cart")[2].decode()
