"""The HTTP side of the test API server: routing, discovery, Status answers, watch streams.

`Handler` serves one connection for a `Backend` (the FakeKubeAPI), using only its public
interface: `store` (an ObjectStore), `faults` (Faults), `record_request`, `record_error`,
`connection_opened`, `connection_closed`, `authorized`, `host`, `port`, `bookmark_interval`.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Protocol
from urllib.parse import parse_qs, urlsplit

import orjson

from tests.kubeapi.faults import Faults
from tests.kubeapi.objects import API_VERSIONS, RESOURCES, Resource
from tests.kubeapi.options import validate as validate_list_options
from tests.kubeapi.status import ApiError, int_param, status_body
from tests.kubeapi.store import ObjectStore, WatchStream
from tests.kubeapi.wire import batches, is_bookmark_line, is_error_line

_TRICKLE_BYTES = 16


@dataclass
class Served:
    """What answering one request cost the server, filled in while it is answered."""

    status: int = 0
    # Response bytes written so far (headers excluded; a watch's grow while it streams).
    bytes: int = 0
    # Where a LIST or a streaming list's initial state came from: "cache" (the watch
    # cache's memory) or "etcd" (a range read of every object: a consistent or uncached
    # LIST page); "" for everything else.
    source: str = ""


@dataclass(frozen=True)
class Request:
    """One request the server received, for assertions (query values: the last one given)."""

    method: str
    path: str
    query: dict[str, str]
    resource: str | None
    headers: dict[str, str] = field(repr=False)
    # time.monotonic() when the request arrived (to measure how long a client waited).
    received: float = field(default_factory=time.monotonic, compare=False)
    served: Served = field(default_factory=Served, compare=False, repr=False)

    @property
    def watch(self) -> bool:
        return self.query.get("watch", "").lower() in {"1", "true"}

    @property
    def streaming_list(self) -> bool:
        """A watch that starts with the current state (sendInitialEvents=true)."""
        return self.watch and self.query.get("sendInitialEvents", "").lower() in {"1", "true"}

    @property
    def consistent_list(self) -> bool:
        """A LIST served by a range read from etcd (no watch cache involved)."""
        return not self.watch and self.served.source == "etcd"


class Backend(Protocol):
    store: ObjectStore
    faults: Faults
    host: str
    bookmark_interval: float
    # What GET /version answers ("1.34", "1.33+"); None: 404.
    kubernetes_version: str | None
    # --emulated-version ("1.33"): the answer carries emulationMajor/emulationMinor.
    emulated_version: str | None
    # Seconds before /version answers; raw bytes answered instead, and how many times.
    version_delay: float
    version_body: bytes | None
    version_body_repeat: int

    @property
    def port(self) -> int: ...
    def authorized(self, authorization: str | None) -> bool: ...
    def record_request(self, request: Request) -> None: ...
    def record_error(self, error: Exception) -> None: ...
    def connection_opened(self, connection: socket.socket) -> None: ...
    def connection_closed(self, connection: socket.socket) -> None: ...


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], backend: Backend) -> None:
        super().__init__(address, Handler)
        self.backend = backend

    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002 - stdlib API
        # Clients hang up mid-response all the time (watches stopped, drop_watches, down()).
        return


# The API server's health endpoints and the checks ?verbose lists.
_HEALTH: dict[str, tuple[str, ...]] = {
    "/healthz": ("ping", "log", "etcd", "poststarthook/start-apiextensions-informers"),
    "/livez": ("ping", "log", "etcd", "poststarthook/start-apiextensions-informers"),
    "/readyz": ("ping", "log", "etcd", "etcd-readiness", "informer-sync", "shutdown"),
}


# --- discovery -------------------------------------------------------------------------------


def _group_list() -> dict[str, Any]:
    groups = []
    for api_version in API_VERSIONS:
        if "/" not in api_version:
            continue
        group, _, version = api_version.partition("/")
        entry = {"groupVersion": api_version, "version": version}
        groups.append({"name": group, "versions": [entry], "preferredVersion": entry})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource_list(group_version: str) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {
                "name": r.name,
                "singularName": r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "list", "watch"],
                "shortNames": list(r.short_names),
            }
            for r in RESOURCES.values()
            if r.api_version == group_version
        ],
    }


def _version(api: Backend) -> dict[str, Any]:
    """The API server's version, as `kubectl version` reads it."""
    if api.kubernetes_version is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    major, _, minor = api.kubernetes_version.partition(".")
    answer = {
        "major": major,
        "minor": minor,
        "gitVersion": f"v{major}.{minor.rstrip('+')}.0-fake",
        "platform": "linux/amd64",
    }
    if api.emulated_version is not None:
        # component-base compatibility's Info(): the emulated and the minimum compatibility
        # versions beside the binary's.
        emulation_major, _, emulation_minor = api.emulated_version.partition(".")
        answer |= {
            "emulationMajor": emulation_major,
            "emulationMinor": emulation_minor,
            "minCompatibilityMajor": emulation_major,
            "minCompatibilityMinor": str(max(0, int(emulation_minor) - 1)),
        }
    return answer


def _static_documents() -> dict[str, Callable[[Backend], dict[str, Any]]]:
    documents: dict[str, Callable[[Backend], dict[str, Any]]] = {
        "/version": _version,
        "/api": lambda api: {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{api.host}:{api.port}"}
            ],
        },
        "/apis": lambda _api: _group_list(),
    }
    for api_version in API_VERSIONS:
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        documents[path] = _discovery_of(api_version)
    return documents


def _discovery_of(group_version: str) -> Callable[[Backend], dict[str, Any]]:
    return lambda _api: _resource_list(group_version)


def route(path: str) -> tuple[Resource, str | None, str | None] | None:
    """(resource, namespace, name) for a resource path, None for anything else."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        rest, api_version = parts[2:], "v1"
    elif len(parts) >= 3 and parts[0] == "apis":
        rest, api_version = parts[3:], f"{parts[1]}/{parts[2]}"
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not 1 <= len(rest) <= 2:
        return None
    served = RESOURCES.get(rest[0])
    if served is None or served.api_version != api_version:
        return None
    if namespace is not None and not served.namespaced:
        return None
    name = rest[1] if len(rest) == 2 else None
    if name is not None and served.namespaced and namespace is None:
        return None
    return served, namespace, name


# --- the handler -----------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    # Go's net/http, and so the real API server, disables Nagle: without this, a watch event
    # written right after another waits for the client's delayed ACK (40 ms).
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"
    server: Server
    _served: Served
    _STATIC: ClassVar[dict[str, Callable[[Backend], dict[str, Any]]]] = _static_documents()

    @property
    def backend(self) -> Backend:
        return self.server.backend

    def setup(self) -> None:
        super().setup()
        self.backend.connection_opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.backend.connection_closed(self.connection)

    def log_message(self, *_args: Any) -> None:
        return

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        path = split.path.rstrip("/") or "/"
        found = route(path)
        backend = self.backend
        request = Request(
            "GET",
            path,
            query,
            found[0].name if found else None,
            {k.lower(): v for k, v in self.headers.items()},
        )
        self._served = request.served
        backend.record_request(request)
        try:
            if path in _HEALTH:
                # Served to anyone, as the API server's default RBAC lets unauthenticated
                # clients read them.
                self._health(path, query)
                return
            self._check_authorization()
            if found is None:
                self._send_static(path)
                return
            served, namespace, name = found
            watch = query.get("watch", "").lower() in {"1", "true"}
            verb = "get" if name else "watch" if watch else "list"
            backend.faults.check(served, verb, namespace)
            if name is not None:
                self._send(200, backend.store.get_json(served, namespace, name))
                return
            store = backend.store
            validate_list_options(query, watch=watch, watch_list=store.watch_list)
            if watch:
                if request.streaming_list:
                    self._served.source = "cache" if store.watch_cache else "etcd"
                self._watch(served, namespace, query)
            else:
                self._served.source = "cache" if store.served_from_cache(query) else "etcd"
                page = store.list_json(served, namespace, query)
                interval = backend.faults.trickled(served)
                if interval:
                    self._send_trickled(page, interval)
                else:
                    self._send(200, page)
        except ApiError as err:
            self._send(err.code, orjson.dumps(err.body()), err.headers)
        except OSError:
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - a server bug must answer, not hang the client
            backend.record_error(exc)
            body = status_body(500, "InternalError", f"fake API server bug: {exc!r}")
            with contextlib.suppress(OSError):
                self._send(500, orjson.dumps(body))
            self.close_connection = True

    def _check_authorization(self) -> None:
        if not self.backend.authorized(self.headers.get("Authorization")):
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def _health(self, path: str, query: dict[str, str]) -> None:
        """ok, or with ?verbose the checks, as kube-apiserver lists them."""
        body = b"ok"
        if "verbose" in query:
            checks = _HEALTH[path]
            lines = [f"[+]{check} ok" for check in checks]
            body = ("\n".join([*lines, f"{path.lstrip('/')} check passed"]) + "\n").encode()
        self._send(200, body, content_type="text/plain; charset=utf-8")

    def _send_static(self, path: str) -> None:
        if path == "/version":
            self._send_version()
        else:
            self._send(200, orjson.dumps(self._static(path)))

    def _send_version(self) -> None:
        """GET /version, after `version_delay`, or the raw `version_body` (chunked)."""
        backend = self.backend
        if backend.version_delay and not backend.faults.pause(backend.version_delay):
            self.close_connection = True
            return
        body, repeat = backend.version_body, backend.version_body_repeat
        if body is None:
            self._send(200, orjson.dumps(self._static("/version")))
            return
        self._served.status = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for _ in range(repeat):
            self._chunk(body)
        self.wfile.write(b"0\r\n\r\n")

    def _static(self, path: str) -> dict[str, Any]:
        static = self._STATIC.get(path)
        if static is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return static(self.backend)

    def _other(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        request = Request(
            self.command,
            urlsplit(self.path).path,
            {},
            None,
            {k.lower(): v for k, v in self.headers.items()},
        )
        self._served = request.served
        self.backend.record_request(request)
        body = status_body(
            405, "MethodNotAllowed", f"{self.command} is not supported by this server"
        )
        self._send(405, orjson.dumps(body))

    do_POST = do_PUT = do_PATCH = do_DELETE = _other  # noqa: N815 - http.server dispatch names

    def _send(
        self,
        code: int,
        body: bytes,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self._served.status = code
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        # Counted before it is written: a client that has read the body may look at the
        # record at once, before this thread returns from the write.
        self._served.bytes += len(body)
        self.wfile.write(body)

    def _send_trickled(self, body: bytes, interval: float) -> None:
        """A 200 whose body goes out a few bytes at a time (Faults.trickle)."""
        self._served.status = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for start in range(0, len(body), _TRICKLE_BYTES):
            self._served.bytes += len(body[start : start + _TRICKLE_BYTES])
            self.wfile.write(body[start : start + _TRICKLE_BYTES])
            if not self.backend.faults.pause(interval):
                self.close_connection = True
                return

    def _chunk(self, data: bytes) -> None:
        if data:
            self._served.bytes += len(data)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _watch(self, served: Resource, namespace: str | None, query: dict[str, str]) -> None:
        timeout = int_param(query, "timeoutSeconds", 0)
        stream = self.backend.store.open_watch(served, namespace, query, self.connection)
        try:
            self._served.status = 200
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache, private")
            self.end_headers()
            for batch in batches(self.backend.faults.initial_lines(served, stream.first_lines)):
                self._chunk(batch)
            self.wfile.flush()
            stream.started()
            if not stream.expired and not self._stream(stream, timeout):
                self.close_connection = True
                return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True
        finally:
            stream.close()

    def _stream(self, stream: WatchStream, timeout: int) -> bool:
        """Send events until the timeout (True: end normally) or a drop (False: abort)."""
        interval = self.backend.bookmark_interval
        now = time.monotonic()
        deadline = now + timeout if timeout > 0 else None
        next_bookmark = now + interval if stream.bookmarks else None
        while True:
            lines = stream.next_lines(deadline, next_bookmark)
            if lines is None:
                return False
            if lines and is_error_line(lines[-1]):
                self._chunk(lines[-1])
                return True
            if next_bookmark is not None and lines and is_bookmark_line(lines[-1]):
                next_bookmark = time.monotonic() + interval
            for batch in batches(lines):
                self._chunk(batch)
            if deadline is not None and time.monotonic() >= deadline:
                return True
