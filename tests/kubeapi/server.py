"""A Kubernetes-compatible API server for tests: LIST, WATCH and fault injection over real HTTP.

It serves Nodes, Services, Events, ConfigMaps, EndpointSlices (discovery.k8s.io/v1) and
DaemonSets (apps/v1) the way kube-apiserver does, closely enough for the real `kubernetes`
Python client: one global, monotonically increasing resourceVersion; GET of named objects;
paginated, consistent LISTs (limit/continue, 410 Expired for a compacted continue token) and
LISTs from the watch cache (resourceVersion=0: the whole list, limit ignored); streaming lists;
chunked WATCH streams of newline-delimited events replayed from a bounded per-resource history
(410 Expired as an ERROR event when the history no longer reaches back; 400 BadRequest for a
resourceVersion that is not a number); field and label selectors; bookmarks; timeoutSeconds.

Three parts, each with a public interface:

- `tests.kubeapi.store.ObjectStore`: the versioned objects, their history, LIST pages and
  watch streams;
- `tests.kubeapi.faults.Faults`: failures, throttling (429/503 with Retry-After), 403 and
  stalls, per resource;
- `tests.kubeapi.handler`: the HTTP handler, which uses only the public interface of this
  class (`store`, `faults`, `record_request`, ...).

`FakeKubeAPI` composes them and is what tests use. Its hooks (all thread-safe):

- lifecycle: `start`, `stop`, `down` (refuse connections, end open ones), `up`, a context
  manager; `url`, `port`, `write_kubeconfig(path, context)`;
- objects: `apply(obj)`, `delete(kind, namespace, name)`, `get`, `objects(kind)`,
  `load(objs)` (no watch events), `resource_version`;
- history and watches: `compact()`, `bookmark(resource)`, `drop_watches(resource)`,
  `stall_watches(resource, partial)` (open watches go silent, after `partial` bytes),
  `inject_event(resource, type, obj)` (any event, even undecodable bytes, replayed on every
  resume from before it), `open_watches`, `wait_for_watches(resource, n)` (watches whose
  response has started streaming);
- faults: `fail(resource, status, times, verbs)`, `throttle(resource, retry_after, status, times)`,
  `forbid(resource)` (403), `stall(resource, seconds)`, `trickle(resource, interval)` (a
  LIST body sent a few bytes at a time), `misorder_initial_events(resource, end)` (a
  streaming list's end bookmark sent "first" or "never"), `clear_faults()`, `throttled`
  (how many requests were answered with Retry-After); a server without bookmarks (as
  kube-apiserver --watch-cache=false) is one with a `bookmark_interval` of an hour;
- features: `watch_cache` and `watch_list` (the WatchList gate), each a switch as on a real
  API server: LISTs at resourceVersion 0 from memory (limit ignored) or from etcd; streaming
  lists (sendInitialEvents, ended by the bookmark annotated k8s.io/initial-events-end) or
  the 422 Invalid a server without the gate answers;
- observation: `requests` (every Request received, each with what serving it cost in
  `request.served`: status, bytes, "cache" or "etcd"), `clear_requests()`, `errors` (the
  server's own bugs, answered with 500).

It refuses what kube-apiserver refuses: unknown field selectors and malformed label selectors
(400 with the apiserver's messages), invalid ListOptions (422); `/healthz`, `/livez` and
`/readyz` answer `ok`.

Resources are named by kind (`Node`) or plural (`nodes`) wherever a hook takes one.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml

from tests.kubeapi.faults import Faults
from tests.kubeapi.handler import Request, Server
from tests.kubeapi.objects import RESOURCES, Resource
from tests.kubeapi.store import ObjectStore

__all__ = ["RESOURCES", "FakeKubeAPI", "Request", "Resource"]

_POLL_INTERVAL = 0.05  # how fast serve_forever notices shutdown()


class FakeKubeAPI:
    """A Kubernetes-compatible API server on 127.0.0.1 with hooks for tests; see the module doc.

    `history` bounds the watch-event history kept per resource; `bookmark_interval` is how often
    a watch with allowWatchBookmarks=true gets a BOOKMARK. With `require_token`, requests must
    carry `Authorization: Bearer <token>` (the kubeconfig's token) or get 401.
    `kubernetes_version` is what `GET /version` answers ("1.MINOR", or a provider's "1.33+");
    None answers 404. Tests may change it while the server runs (an upgrade). `/version`'s
    other knobs, also changeable at any time: `emulated_version` ("1.33": the server runs
    with `--emulated-version`, so the answer carries emulationMajor/emulationMinor),
    `version_delay` (seconds before the answer; the server going down ends the wait) and
    `version_body` (raw bytes answered instead, sent `version_body_repeat` times in one
    chunked body: a hostile or broken server).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history: int = 1000,
        bookmark_interval: float = 1.0,
        token: str = "fake-token",  # noqa: S107 - a dummy bearer token for a test server
        require_token: bool = False,
        watch_cache: bool = True,
        watch_list: bool = True,
        kubernetes_version: str | None = "1.34",
    ) -> None:
        self.host = host
        # The newest semantics by default (both topology gates on), as most tests assume.
        self.kubernetes_version = kubernetes_version
        self.emulated_version: str | None = None
        self.version_delay = 0.0
        self.version_body: bytes | None = None
        self.version_body_repeat = 1
        self.bookmark_interval = bookmark_interval
        self.token = token
        self.require_token = require_token
        self.store = ObjectStore(history)
        self.watch_cache = watch_cache
        self.watch_list = watch_list
        self.faults = Faults()
        self._port = port
        self._cond = threading.Condition()
        self._connections: set[socket.socket] = set()
        self._requests: list[Request] = []
        self._errors: list[Exception] = []
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Listen on host:port (port 0: a free one, kept for the server's lifetime) and serve."""
        if self._server is not None:
            raise RuntimeError("already serving")
        server = Server((self.host, self._port), self)
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": _POLL_INTERVAL},
            name=f"fake-kube-api:{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and end every open connection; waits briefly for handler threads."""
        self.down()
        deadline = time.monotonic() + 2.0
        with self._cond:
            while self._connections and time.monotonic() < deadline:
                self._cond.wait(0.05)

    def down(self) -> None:
        """Close the listening socket (connections are refused) and every open connection."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=2.0)
        self.faults.interrupt()
        self.store.drop_watches()
        with self._cond:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def up(self) -> None:
        """Serve again on the same port after down()."""
        self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    def write_kubeconfig(self, path: str | Path, context: str = "fake") -> Path:
        """Write a kubeconfig whose `context` points at this server with a dummy bearer token."""
        if not self._port:
            raise RuntimeError("start() the server first: its port is not known yet")
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": self.token}}],
            "contexts": [
                {"name": context, "context": {"cluster": context, "user": context}},
            ],
            "current-context": context,
            "preferences": {},
        }
        target = Path(path)
        target.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return target

    # --- objects -----------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        return self.store.resource_version

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or update an object (by kind/namespace/name); returns it as stored."""
        return self.store.apply(obj)

    def delete(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """Delete an object (kind `Node` or resource `nodes`); returns its final state."""
        return self.store.delete(kind, namespace, name)

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored object (with kind and apiVersion), or None."""
        return self.store.get(kind, namespace, name)

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """Every stored object of a kind (or resource name), sorted by namespace and name."""
        return self.store.objects(kind)

    def load(self, objs: Iterable[dict[str, Any]]) -> int:
        """Store many objects without recording watch events; returns the resourceVersion.

        A watch from a resourceVersion before the load cannot see these objects, so it gets the
        410 Expired ERROR event (as after a compaction), and open watches of the loaded
        resources end with it too.
        """
        return self.store.load(objs)

    # --- history and watches -----------------------------------------------------------------

    def compact(self) -> None:
        """Forget all watch history and continue-token snapshots, as an etcd compaction does.

        Every resourceVersion older than the current one becomes too old: a watch from it gets
        the 410 ERROR event and a continue token from before gets 410 Expired. Open watches
        that have seen every event go on; one still behind gets the ERROR event.
        """
        self.store.compact()

    def bookmark(self, resource: str) -> None:
        """Send a BOOKMARK now on every open watch of a resource that allows bookmarks."""
        self.store.bookmark(resource)

    def stall_watches(self, resource: str, partial: bytes = b"") -> int:
        """Open watches of a resource send `partial` and then nothing; see ObjectStore."""
        return self.store.stall_watches(resource, partial)

    def drop_watches(self, resource: str | None = None) -> int:
        """Abruptly close open watch streams (of one resource or all); returns how many."""
        return self.store.drop_watches(resource)

    def inject_event(self, resource: str, event_type: str, obj: dict[str, Any] | bytes) -> int:
        """Send any event on a resource's watches; see ObjectStore.inject_event."""
        return self.store.inject_event(resource, event_type, obj)

    def open_watches(self, resource: str) -> int:
        return self.store.open_watches(resource)

    def wait_for_watches(
        self, resource: str, n: int = 1, timeout: float = 5.0, *, exact: bool = False
    ) -> None:
        """Block until at least `n` (with `exact`: exactly `n`) watches of a resource stream.

        A watch counts from when its response headers are sent (so that a drop is seen by the
        client as a broken stream, not as a request to retry) until the stream ends or the
        client hangs up (noticed within about 50 ms). Raises TimeoutError after `timeout`.
        """
        self.store.wait_for_watches(resource, n, timeout, exact=exact)

    # --- faults ------------------------------------------------------------------------------

    def fail(
        self, resource: str, status: int = 500, times: int | None = 1, verbs: tuple[str, ...] = ()
    ) -> None:
        """The next `times` requests for a resource (of `verbs` only, when given) get
        `status` (None: until clear_faults())."""
        self.faults.fail(resource, status, times, verbs)

    def throttle(
        self, resource: str, retry_after: int = 1, status: int = 429, times: int | None = 1
    ) -> None:
        """The next `times` requests get `status` (429, 503) with `Retry-After: retry_after`."""
        self.faults.throttle(resource, retry_after, status, times)

    def forbid(self, resource: str) -> None:
        """Requests for a resource get 403 Forbidden until clear_faults()."""
        self.faults.forbid(resource)

    def stall(self, resource: str, seconds: float, verbs: tuple[str, ...] = ()) -> None:
        """Delay responses for a resource (of `verbs` only, when given) until clear_faults()."""
        self.faults.stall(resource, seconds, verbs)

    def trickle(self, resource: str, interval: float) -> None:
        """LIST responses of a resource come a few bytes every `interval` s until clear_faults()."""
        self.faults.trickle(resource, interval)

    def misorder_initial_events(self, resource: str, end: str) -> None:
        """Streaming lists send their end bookmark "first" (before the objects) or "never"."""
        self.faults.misorder_initial_events(resource, end)

    def clear_faults(self) -> None:
        """Forget every fault set: fail(), throttle(), forbid(), stall(), and the rest."""
        self.faults.clear()

    @property
    def throttled(self) -> int:
        """How many requests were answered with a Retry-After header."""
        return self.faults.throttled

    # --- features ------------------------------------------------------------------------------

    @property
    def watch_cache(self) -> bool:
        """kube-apiserver's --watch-cache: LISTs at resourceVersion 0 are served from memory.

        Off, every LIST is a range read from etcd (limit honoured), as on a server started
        with --watch-cache=false.
        """
        return self.store.watch_cache

    @watch_cache.setter
    def watch_cache(self, on: bool) -> None:
        self.store.watch_cache = on

    @property
    def watch_list(self) -> bool:
        """The WatchList feature gate: streaming lists (sendInitialEvents=true).

        Off, a watch asking for sendInitialEvents gets the API server's 422 Invalid
        ("sendInitialEvents is forbidden for watch unless the WatchList feature gate is
        enabled").
        """
        return self.store.watch_list

    @watch_list.setter
    def watch_list(self, on: bool) -> None:
        self.store.watch_list = on

    # --- observation -------------------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        """Every request received so far, oldest first."""
        with self._cond:
            return list(self._requests)

    @property
    def errors(self) -> list[Exception]:
        """Unexpected exceptions raised while handling requests (answered with 500): bugs."""
        with self._cond:
            return list(self._errors)

    def clear_requests(self) -> None:
        with self._cond:
            self._requests.clear()

    # --- called by the HTTP handler ----------------------------------------------------------

    def authorized(self, authorization: str | None) -> bool:
        return not self.require_token or authorization == f"Bearer {self.token}"

    def record_request(self, request: Request) -> None:
        with self._cond:
            self._requests.append(request)

    def record_error(self, error: Exception) -> None:
        with self._cond:
            self._errors.append(error)

    def connection_opened(self, connection: socket.socket) -> None:
        with self._cond:
            self._connections.add(connection)

    def connection_closed(self, connection: socket.socket) -> None:
        with self._cond:
            self._connections.discard(connection)
            self._cond.notify_all()
