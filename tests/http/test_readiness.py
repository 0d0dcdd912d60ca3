"""/readyz and / say what is wrong for people: never a library's text, host or identity."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from exporter.run.readiness import describe_watch_failure
from tests.processes import free_port, serving
from tests.scrape import http_get, wait_until

NOW = 1_764_556_800.0  # 2025-12-01T02:40:00Z
URLLIB3_TEXT = (
    "error: HTTPSConnectionPool(host='10.96.0.1', port=443): Max retries exceeded with url: "
    "/api/v1/nodes?limit=500 (Caused by NewConnectionError('<urllib3.connection."
    "HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno 111] "
    "Connection refused'))"
)
FORBIDDEN_TEXT = (
    "forbidden: HTTP 403 Forbidden: nodes is forbidden: User "
    '"system:serviceaccount:monitoring:exporter" cannot list resource "nodes"'
)
EXPIRED = "LIST answered 410 Gone 3 times (the streaming list was refused with HTTP 422)"
LEAKS = ("10.96.0.1", "443", "HTTPSConnectionPool", "Max retries", "Errno", "urllib3", "/api/v1")


@pytest.mark.parametrize(
    ("problem", "words"),
    [
        (URLLIB3_TEXT, "cannot be reached"),
        (FORBIDDEN_TEXT, "ClusterRole grants list and watch on nodes"),
        ("error: HTTP 401 Unauthorized", "credentials"),
        ("error: HTTP 429 Too Many Requests: too many requests", "slow down"),
        ("throttled: HTTP 429 Too Many Requests", "slow down"),
        ("error: HTTP 503 Service Unavailable: etcd leader changed", "HTTP 503"),
        ("error: HTTP 400 Bad Request: resourceVersion abc", "HTTP 400"),
        ("error: JSON is malformed: invalid character (byte 12)", "cannot be read"),
        ("stalled: no event or bookmark for 150 s (stopped in the middle of an event)",
         "its watch went silent"),
        (f"list expired: {EXPIRED}", f"its list cannot complete: {EXPIRED}"),
        ("list stalled: no end-of-list bookmark after 150 s",
         "its streaming list has not ended: no end-of-list bookmark after 150 s"),
    ],
    ids=["unreachable", "forbidden", "401", "429", "throttled", "503", "400", "decode", "stalled",
         "list-expired", "list-stalled"],
)  # fmt: skip
def test_problems_are_told_for_people(problem: str, words: str) -> None:
    text = describe_watch_failure("nodes", problem, {"nodes": NOW - 75}, NOW)
    assert words in text
    assert text.startswith("- nodes: ")
    assert "since 2025-12-01T02:38:45Z (75 s ago)" in text
    assert "check" in text
    for leak in (*LEAKS, "system:serviceaccount", "etcd", "resourceVersion", "byte 12"):
        assert leak not in text, leak


def test_forbidden_endpointslices_name_their_api_group() -> None:
    text = describe_watch_failure("endpointslices", "forbidden: HTTP 403 Forbidden", {}, NOW)
    assert "API group discovery.k8s.io" in text
    assert "since" not in text  # not known: not invented


@pytest.fixture
def unreachable_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig whose API server address has nothing listening (connection refused)."""
    port = free_port()
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "http://127.0.0.1:{port}"}}
users:
- name: alice@example.com
  user: {{token: not-a-secret}}
contexts:
- name: c
  context: {{cluster: c, user: alice@example.com}}
current-context: c
""")
    return path


def test_unreachable_api_server_is_explained_without_hosts(unreachable_kubeconfig: Path) -> None:
    """The issue's case: /readyz showed urllib3's `HTTPConnectionPool(host=...)` text."""
    server = unreachable_kubeconfig.read_text().split("127.0.0.1:")[1].split('"')[0]
    # Never ready: wait until it listens, then for the words.
    with serving("--kubeconfig", str(unreachable_kubeconfig), ready=None) as exporter:
        url = exporter.url
        wait_until(lambda: "cannot be reached" in http_get(url + "/readyz", timeout=2)[1], 30)
        time.sleep(1.1)  # "since" counts whole seconds
        status, body = http_get(url + "/readyz")
        _, index = http_get(url + "/")
    assert status == 503
    assert body.startswith("not ready:\n- ")
    assert "since " in body
    assert "network path to the API server" in body
    for text in (body, index):
        for leak in ("127.0.0.1", server, "HTTPConnectionPool", "Max retries", "Errno",
                     "alice", "/api/v1/nodes"):  # fmt: skip
            assert leak not in text, (leak, text)
