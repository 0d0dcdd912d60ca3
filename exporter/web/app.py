"""The status pages' WSGI application: routes, headers and the per-state cache.

Every request reads the published state once (`state()`), so a page is consistent with
one evaluation even while the evaluator publishes the next one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING

import msgspec

from exporter import __version__
from exporter.report.document import evaluation_document, service_document
from exporter.state.result import ClusterResult
from exporter.web.links import API_PATH, SERVICES_PATH, Links
from exporter.web.render import (
    PageContext,
    WatchHealth,
    bad_request_page,
    index_page,
    not_found_page,
    preload,
    service_page,
    shard_notice,
)
from exporter.web.table import Query, QueryError, StatusView, status_view

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

Check = Callable[[], tuple[bool, str]]

# Only this exporter's own stylesheet and script; nothing inline, nothing from elsewhere.
# Even a value that escaped escaping could not run a script.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_ASSETS = {"status.css": "text/css", "status.js": "text/javascript"}
_METHODS = ("GET", "HEAD")
_HTML = "text/html; charset=utf-8"
_JSON = "application/json"


def _asset(name: str) -> bytes:
    return resources.files("exporter.web").joinpath("static", name).read_bytes()


class _PerState:
    """The StatusView of the latest state, built once per published state."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: ClusterResult | None = None
        self._view: StatusView | None = None
        self._evaluation_json: bytes | None = None

    def view(self, state: ClusterResult) -> StatusView:
        with self._lock:
            if self._state is not state or self._view is None:
                self._state, self._view = state, status_view(state, self._view)
                self._evaluation_json = None
            return self._view

    def evaluation_json(self, state: ClusterResult) -> bytes:
        view = self.view(state)
        with self._lock:
            if self._evaluation_json is None or self._state is not state:
                document = evaluation_document(view.state)
                self._evaluation_json = msgspec.json.encode(document) + b"\n"
            return self._evaluation_json


class StatusPages:
    """/, /services/NS/NAME, /api/v1/evaluation, /api/v1/services/NS/NAME and /static/."""

    def __init__(
        self,
        state: Callable[[], ClusterResult],
        *,
        readiness: Check,
        watches: Callable[[], tuple[WatchHealth, ...]] = tuple,
        source: str = "",
        external_url: str | None = None,
        shard: int = 0,
        total_shards: int = 1,
    ) -> None:
        self._state = state
        self._shard_notice = shard_notice(shard, total_shards)
        self._readiness = readiness
        self._watches = watches
        self._source = source
        self.links = Links.from_external_url(external_url)
        self._cache = _PerState()
        self._assets = {name: _asset(name) for name in _ASSETS}

    def preload(self) -> None:
        """Compile every template now, so that no visitor waits for it (45 ms of CPU: the
        exporter calls it once ready, not before, so that /readyz does not wait either)."""
        preload()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        # PEP 3333 hands the path over as latin-1 text: get the UTF-8 the client sent back.
        raw_path = environ.get("PATH_INFO", "/") or "/"
        path = self.links.strip(raw_path.encode("latin-1").decode("utf-8", "replace"))
        if method not in _METHODS:
            body = f"{method} is not allowed here: use GET\n".encode()
            return self._respond(
                start_response, "405 Method Not Allowed", "text/plain; charset=utf-8", body,
                extra=[("Allow", ", ".join(_METHODS))],
            )  # fmt: skip
        status, content_type, body = self.handle(path, environ.get("QUERY_STRING", ""))
        return self._respond(start_response, status, content_type, body, head=method == "HEAD")

    def handle(self, path: str, query_string: str = "") -> tuple[str, str, bytes]:
        """(status, content type, body) for a route; the pure core of __call__."""
        state = self._state()
        if path.startswith(f"{API_PATH}/"):
            return self._api(state, path)
        if path.startswith("/static/") and path[len("/static/") :] in _ASSETS:
            name = path[len("/static/") :]
            return "200 OK", f"{_ASSETS[name]}; charset=utf-8", self._assets[name]
        return self._page(state, path, query_string)

    def _page(self, state: ClusterResult, path: str, query_string: str) -> tuple[str, str, bytes]:
        if path == "/":
            try:
                query = Query.parse(query_string)
            except QueryError as error:
                message = f"{error}."
                return (
                    "400 Bad Request",
                    _HTML,
                    bad_request_page(message, self.links, self._context(state)),
                )
            view = self._cache.view(state)
            page = index_page(view, query, self.links, self._context(state))
            return "200 OK", _HTML, page
        key = _service_key(path, f"{SERVICES_PATH}/")
        if key is None:
            return self._not_found(state, "Nothing is served at this address.")
        page_or_none = service_page(self._cache.view(state), *key, self.links, self._context(state))
        if page_or_none is None:
            return self._not_found(state, _unknown_service(*key))
        return "200 OK", _HTML, page_or_none

    def _api(self, state: ClusterResult, path: str) -> tuple[str, str, bytes]:
        key = _service_key(path, f"{API_PATH}{SERVICES_PATH}/")
        if path != f"{API_PATH}/evaluation" and key is None:
            return _json_error("404 Not Found", "no such API route")
        if state.generation == 0:
            _, readiness = self._readiness()
            return _json_error("503 Service Unavailable", f"no evaluation yet: {readiness}")
        if key is None:
            return "200 OK", _JSON, self._cache.evaluation_json(state)
        result = state.services.get(key)
        if result is None:
            return _json_error("404 Not Found", _unknown_service(*key))
        document = [
            service_document(verdict, problems)
            for verdict, problems in zip(result.verdicts, result.problems, strict=True)
        ]
        return "200 OK", _JSON, msgspec.json.encode(document) + b"\n"

    # -- internals ---------------------------------------------------------------------

    def _context(self, state: ClusterResult) -> PageContext:
        ready, readiness = self._readiness()
        evaluated_at = (
            datetime.fromtimestamp(state.evaluated_at, UTC).isoformat(timespec="seconds")
            if state.evaluated_at is not None
            else None
        )
        return PageContext(
            version=__version__,
            source=self._source,
            ready=ready,
            readiness=readiness,
            evaluated_at=evaluated_at,
            watches=self._watches(),
            shard_notice=self._shard_notice,
        )

    def _not_found(self, state: ClusterResult, message: str) -> tuple[str, str, bytes]:
        return "404 Not Found", _HTML, not_found_page(message, self.links, self._context(state))

    @staticmethod
    def _respond(
        start_response: StartResponse,
        status: str,
        content_type: str,
        body: bytes,
        extra: list[tuple[str, str]] | None = None,
        *,
        head: bool = False,
    ) -> Iterable[bytes]:
        """HEAD gets the headers GET would, Content-Length included, and no body."""
        start_response(
            status,
            [
                ("Content-Type", content_type),
                ("Content-Length", str(len(body))),
                # Every response describes the cluster now; an old copy would mislead.
                ("Cache-Control", "no-store"),
                ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
                ("X-Content-Type-Options", "nosniff"),
                ("Referrer-Policy", "no-referrer"),
                *(extra or []),
            ],
        )
        return [b""] if head else [body]


def _service_key(path: str, prefix: str) -> tuple[str, str] | None:
    """(namespace, name) of PREFIX/NAMESPACE/NAME, or None for any other path."""
    if not path.startswith(prefix):
        return None
    namespace, slash, name = path[len(prefix) :].partition("/")
    if not slash or not namespace or not name or "/" in name:
        return None
    return namespace, name


def _unknown_service(namespace: str, name: str) -> str:
    return (
        f"No Service {namespace}/{name} with EndpointSlices is known to this exporter "
        "(check the name, and the exporter's --namespaces and --shard flags)."
    )


def _json_error(status: str, message: str) -> tuple[str, str, bytes]:
    return status, _JSON, msgspec.json.encode({"error": message}) + b"\n"
