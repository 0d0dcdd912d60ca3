"""Issue 30 finding 1: no request drops its connection or sprays a traceback.

An Accept header prometheus_client cannot read (`version=abc`) raised TypeError before the
app ran: no response, the connection closed, a traceback at error level. Negotiation now
never raises, and whatever else fails in answering a request is a 500 and one log line.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from exporter.metrics import negotiation
from exporter.metrics.negotiation import honoured, honouring_quality, negotiate
from exporter.run.serve import Exporter, ServeOptions
from tests.conftest import EXAMPLES_DIR
from tests.scrape import running_exporter, wait_until

TEXT_0_0_4 = "text/plain; version=0.0.4; charset=utf-8"

# Accept values a client may send, as raw bytes (the server reads headers as latin-1).
HOSTILE_ACCEPT = [
    b"application/openmetrics-text; version=abc",
    b"application/openmetrics-text; version=1.x",
    b"text/plain; version=abc",
    b"text/plain;version=1.0.x;escaping=dots",
    b"application/openmetrics-text;version=1.0.0.0.0.0",
    b"application/openmetrics-text;version=" + b"9" * 5000,
    b"application/openmetrics-text;version=1." + b"9" * 5000,
    # Latin-1 superscripts: digits to str.isdigit, not to int().
    b"application/openmetrics-text;version=\xb9.0.0",
    # Arabic-Indic digits, UTF-8 encoded (latin-1 mojibake to the server).
    "application/openmetrics-text;version=\u0661.\u0660.\u0660".encode(),
    b"application/openmetrics-text;version=1_0.0.0",
    b"application/openmetrics-text;version= 1.0.0",
    b"application/openmetrics-text;version=NaN",
    b"application/openmetrics-text;version=1e3",
    b"application/openmetrics-text;version=-1.0.0",
    b"application/openmetrics-text;=;==;version==1",
    b"text/plain;version=1.x;escaping=" + b"x" * 200,
    b"text/plain;q=;version=abc",
    b";;;,,,;=;=",
    b"*/*;q=abc;version=abc",
    b"a/b;" * 1000,
]


def _request(port: int, method: bytes, accept: bytes, path: bytes = b"/metrics") -> bytes:
    """One raw request on a new connection; everything the server sent until it closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"%s %s HTTP/1.1\r\nHost: a\r\nAccept: %s\r\nConnection: close\r\n\r\n"
            % (method, path, accept)
        )
        received = b""
        while data := sock.recv(65536):
            received += data
        return received


def _head(response: bytes) -> tuple[int, dict[str, str]]:
    head = response.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    lines = head.split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ", 2)[1]), {name.lower(): value for name, value in headers.items()}


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    options = ServeOptions(
        listen_address="127.0.0.1:0", snapshot=str(EXAMPLES_DIR / "demo-cluster.json")
    )
    with running_exporter(options) as running:
        wait_until(lambda: running.readiness()[0])
        yield running


@pytest.mark.parametrize("method", [b"GET", b"HEAD"])
@pytest.mark.parametrize("accept", HOSTILE_ACCEPT, ids=lambda value: repr(value[:48]))
def test_an_unreadable_accept_header_gets_the_default_text_format(
    exporter: Exporter, method: bytes, accept: bytes
) -> None:
    """A hostile Accept is answered 200 in text 0.0.4 (as client_golang does), nothing logged
    at error level."""
    with capture_logs() as logs:
        response = _request(exporter.server.port, method, accept)
    assert response, "the connection was closed without a response"
    status, headers = _head(response)
    assert status == 200
    assert headers["content-type"] == TEXT_0_0_4
    if method == b"GET":
        assert b"topology_hints_service_info" in response
    assert [log for log in logs if log["log_level"] == "error"] == []


@pytest.mark.parametrize("accept", HOSTILE_ACCEPT, ids=lambda value: repr(value[:48]))
def test_negotiate_never_raises_even_on_a_header_not_rewritten(accept: bytes) -> None:
    """`negotiate` reads any header, rewritten by `honoured` or not."""
    header = accept.decode("latin-1")
    assert negotiate({"HTTP_ACCEPT": header}).content_type
    assert negotiate(honouring_quality({"HTTP_ACCEPT": header})).content_type == TEXT_0_0_4


def test_a_malformed_version_drops_only_its_own_entry() -> None:
    """The next readable entry is chosen, as client_golang skips a version it cannot read."""
    header = "application/openmetrics-text;version=abc,application/openmetrics-text;version=1.0.0"
    assert honoured(header) == "application/openmetrics-text;version=1.0.0"
    assert negotiate({"HTTP_ACCEPT": honoured(header)}).openmetrics


def _error_lines(logs: list[structlog.typing.EventDict]) -> list[structlog.typing.EventDict]:
    return [log for log in logs if log["log_level"] == "error"]


@pytest.mark.parametrize("method", [b"GET", b"HEAD"])
def test_negotiation_that_raises_is_a_500_and_one_log_line(
    exporter: Exporter, monkeypatch: pytest.MonkeyPatch, method: bytes
) -> None:
    """A bug before the app runs (the server's `expensive` check negotiates) is a 500,
    not a dropped connection, and exactly one structured error line with no traceback."""

    def broken(_environ: object) -> object:
        raise TypeError("negotiation bug")

    monkeypatch.setattr(negotiation, "negotiate", broken)
    monkeypatch.setattr("exporter.metrics.endpoint.negotiate", broken)
    with capture_logs() as logs:
        response = _request(exporter.server.port, method, b"*/*")
    assert _head(response)[0] == 500
    (line,) = _error_lines(logs)
    assert line["event"] == "request failed"
    assert line["error"] == "TypeError: negotiation bug"
    assert line["frames"][-1].endswith(":broken")
    assert "exc_info" not in line
    assert "exception" not in line


def test_a_handler_that_raises_is_a_500_and_one_log_line(
    exporter: Exporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception in a route's app is a 500 and one error line; the server goes on."""

    def broken(_environ: object, _start_response: object) -> list[bytes]:
        raise RuntimeError("handler bug /etc/passwd")

    monkeypatch.setitem(exporter.routes, "/healthz", broken)
    with capture_logs() as logs:
        received = _request(exporter.server.port, b"GET", b"*/*", b"/healthz")
    assert _head(received)[0] == 500
    assert b"/etc/passwd" not in received
    (line,) = _error_lines(logs)
    assert (line["event"], line["path"]) == ("request failed", "/healthz")
    assert line["error"] == "RuntimeError: handler bug /etc/passwd"


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ([("Content-Type", "text/plain"), ("Content-Length", "99")], [b"short\n"]),
        ([("Content-Type", "text/plain")], ["a str, not bytes\n"]),
        ([("Content-Type", "text/pläin ☃")], [b"x\n"]),
    ],
    ids=["wrong-content-length", "str-chunk", "header-not-latin-1"],
)
def test_a_response_h11_would_refuse_midway_is_a_500_before_anything_is_sent(
    exporter: Exporter,
    monkeypatch: pytest.MonkeyPatch,
    headers: list[tuple[str, str]],
    body: list[object],
) -> None:
    """An app's malformed answer is caught before its head is written: a 500, one line."""

    def malformed(_environ: object, start_response: object) -> list[object]:
        start_response("200 OK", headers)  # type: ignore[operator]
        return body

    monkeypatch.setitem(exporter.routes, "/healthz", malformed)
    with capture_logs() as logs:
        received = _request(exporter.server.port, b"GET", b"*/*", b"/healthz")
    assert _head(received)[0] == 500
    assert len(_error_lines(logs)) == 1
    assert _head(_request(exporter.server.port, b"GET", b"*/*"))[0] == 200


def test_head_with_a_name_filter_gets_the_headers_of_get(exporter: Exporter) -> None:
    """prometheus_client's app answers HEAD 405: the filtered path asks it for GET."""
    path = b"/metrics?name[]=topology_hints_service_info"
    get = _request(exporter.server.port, b"GET", b"*/*", path)
    head = _request(exporter.server.port, b"HEAD", b"*/*", path)
    (get_status, get_headers), (status, headers) = _head(get), _head(head)
    get_headers.pop("date"), headers.pop("date")
    assert (status, headers) == (get_status, get_headers) == (200, get_headers)
    assert head.endswith(b"\r\n\r\n")
