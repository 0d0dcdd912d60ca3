"""A Kubernetes-compatible API server for tests: LIST, WATCH and fault injection over real HTTP.

It serves Nodes, Services, Events and EndpointSlices the way kube-apiserver does, closely enough
for the real `kubernetes` Python client: one global, monotonically increasing resourceVersion;
paginated, consistent LISTs (limit/continue, 410 Expired for a compacted continue token); chunked
WATCH streams of newline-delimited events replayed from a bounded per-resource history (410
Expired as an ERROR event when the history no longer reaches back); field and label selectors;
bookmarks; timeoutSeconds. Tests drive it through thread-safe hooks (`apply`, `delete`, `load`,
`fail`, `forbid`, `stall`, `drop_watches`, `compact`, `down`/`up`, ...).

Every stored object is kept as its serialized JSON bytes (orjson), so a LIST page or a watch event
is built by joining bytes, never by re-serializing dicts: a synthetic cluster of thousands of
objects is served at the speed of `bytes.join`.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import dataclasses
import http
import itertools
import select
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self
from urllib.parse import parse_qs, urlsplit

import orjson
import yaml

__all__ = ["RESOURCES", "FakeKubeAPI", "Request", "Resource"]

_POLL_INTERVAL = 0.05  # how fast serve_forever notices shutdown()
_CHUNK_TARGET = 1 << 20  # watch events are batched into chunks of about this many bytes
_PEER_POLL = 0.05  # how often an idle watch checks that its client is still there
_MAX_SNAPSHOTS = 256  # continue-token snapshots kept (least recently used are evicted: 410)
_SERVICE_ACCOUNT = "system:serviceaccount:monitoring:topology-hints-exporter"


@dataclass(frozen=True)
class Resource:
    """One served resource type: its plural name, kind and API group/version."""

    name: str
    kind: str
    api_version: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def prefix(self) -> bytes:
        """The opening of a full object's JSON, to splice in front of an item's fields."""
        return b'{"kind":"%s","apiVersion":"%s",' % (self.kind.encode(), self.api_version.encode())


RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource("nodes", "Node", "v1", namespaced=False),
        Resource("services", "Service", "v1", namespaced=True),
        Resource("events", "Event", "v1", namespaced=True),
        Resource("endpointslices", "EndpointSlice", "discovery.k8s.io/v1", namespaced=True),
    )
}
_BY_KIND = {r.kind: r for r in RESOURCES.values()}


def _resource(kind_or_name: str) -> Resource:
    """A Resource from its kind (`Node`) or plural name (`nodes`)."""
    found = RESOURCES.get(kind_or_name) or _BY_KIND.get(kind_or_name)
    if found is None:
        raise ValueError(f"unknown resource or kind {kind_or_name!r}; known: {sorted(RESOURCES)}")
    return found


class _Entry:
    """One stored object version: key, resourceVersion, JSON bytes without kind/apiVersion."""

    __slots__ = ("_full", "item", "key", "rv")

    def __init__(self, key: tuple[str, str], rv: int, item: bytes) -> None:
        self.key = key
        self.rv = rv
        self.item = item
        self._full: bytes | None = None

    def full(self, resource: Resource) -> bytes:
        """The object's JSON with kind and apiVersion, as a watch event or a GET carries it."""
        if self._full is None:
            self._full = resource.prefix + self.item[1:]
        return self._full

    def obj(self) -> dict[str, Any]:
        decoded: dict[str, Any] = orjson.loads(self.item)
        return decoded


@dataclass(frozen=True)
class _Event:
    rv: int
    type: str
    entry: _Entry
    prev: _Entry | None  # the version a MODIFIED replaced (selectors turn it into ADDED/DELETED)


@dataclass(eq=False)
class _Watch:
    resource: Resource
    namespace: str | None
    selector: _Selector
    bookmarks: bool
    cursor: int  # every event of this resource up to this resourceVersion has been handled
    connection: socket.socket
    dropped: bool = False
    bookmark_now: bool = False


@dataclass(frozen=True)
class _Snapshot:
    """The sorted state of one resource at one resourceVersion, kept for a continue token."""

    resource: Resource
    namespace: str | None
    rv: int
    entries: tuple[_Entry, ...]
    id: int = 0  # 0: not yet kept for a continue token


@dataclass(frozen=True)
class Request:
    """One request the server received, for assertions (query values: the last one given)."""

    method: str
    path: str
    query: dict[str, str]
    resource: str | None
    headers: dict[str, str] = field(repr=False)

    @property
    def watch(self) -> bool:
        return self.query.get("watch", "").lower() in {"1", "true"}


class _HTTPError(Exception):
    """Answer the request with a Status body."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details


def _status(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


# --- selectors -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Term:
    path: tuple[str, ...]  # () for a label selector term
    key: str  # the label key for a label selector term
    value: str | None  # None: an existence test (labels only)
    negate: bool


def _field_value(obj: Any, path: tuple[str, ...]) -> str:
    for part in path:
        if not isinstance(obj, dict):
            return ""
        obj = obj.get(part)
    if obj is None or isinstance(obj, dict | list):
        return ""
    if isinstance(obj, bool):
        return "true" if obj else "false"
    return str(obj)


def _split_term(raw: str, what: str) -> tuple[str, str | None, bool]:
    for op, negate in (("!=", True), ("==", False), ("=", False)):
        if op in raw:
            key, _, value = raw.partition(op)
            key = key.strip()
            if not key:
                raise _HTTPError(400, "BadRequest", f"invalid {what}: {raw!r}")
            return key, value.strip(), negate
    return raw, None, False


class _Selector:
    """A parsed fieldSelector plus labelSelector (equality and existence terms only)."""

    def __init__(self, field_selector: str = "", label_selector: str = "") -> None:
        terms: list[_Term] = []
        for raw in filter(None, (t.strip() for t in field_selector.split(","))):
            key, value, negate = _split_term(raw, "field selector")
            if value is None:
                raise _HTTPError(400, "BadRequest", f"invalid field selector: {raw!r}")
            terms.append(_Term(tuple(key.split(".")), key, value, negate))
        for raw in filter(None, (t.strip() for t in label_selector.split(","))):
            if "(" in raw or " in " in raw or " notin " in raw:
                raise _HTTPError(400, "BadRequest", f"unsupported label selector: {raw!r}")
            key, value, negate = _split_term(raw, "label selector")
            if value is None and key.startswith("!"):
                key, negate = key[1:].strip(), True
            terms.append(_Term((), key, value, negate))
        self.terms = tuple(terms)

    def __bool__(self) -> bool:
        return bool(self.terms)

    def matches(self, entry: _Entry | None) -> bool:
        if entry is None:
            return False
        if not self.terms:
            return True
        obj = entry.obj()
        for term in self.terms:
            if term.path:
                ok = _field_value(obj, term.path) == term.value
            else:
                labels = (obj.get("metadata") or {}).get("labels") or {}
                if term.value is None:
                    ok = term.key in labels
                else:
                    ok = term.key in labels and str(labels[term.key]) == term.value
            if ok == term.negate:
                return False
        return True


# --- the server --------------------------------------------------------------------------------


class FakeKubeAPI:
    """A Kubernetes-compatible API server on 127.0.0.1 with hooks for tests; see the module doc.

    `history` bounds the watch-event history kept per resource; `bookmark_interval` is how often
    a watch with allowWatchBookmarks=true gets a BOOKMARK. With `require_token`, requests must
    carry `Authorization: Bearer <token>` (the kubeconfig's token) or get 401.
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
    ) -> None:
        if history < 1:
            raise ValueError("history must be at least 1")
        self.host = host
        self.history = history
        self.bookmark_interval = bookmark_interval
        self.token = token
        self.require_token = require_token
        self._port = port
        self._cond = threading.Condition(threading.RLock())
        self._rv = 0
        self._compact_rv = 0
        self._store: dict[str, dict[tuple[str, str], _Entry]] = {r: {} for r in RESOURCES}
        self._sorted: dict[str, tuple[tuple[_Entry, ...], list[tuple[str, str]]] | None] = (
            dict.fromkeys(RESOURCES)
        )
        self._events: dict[str, deque[_Event]] = {r: deque() for r in RESOURCES}
        self._horizon = dict.fromkeys(RESOURCES, 0)  # newest forgotten event, per resource
        self._snapshots: dict[int, _Snapshot] = {}
        self._snapshot_ids = itertools.count(1)
        self._watches: dict[str, list[_Watch]] = {r: [] for r in RESOURCES}
        self._failures: dict[str, tuple[int, int | None]] = {}
        self._forbidden: set[str] = set()
        self._stalls: dict[str, float] = {}
        self._connections: set[socket.socket] = set()
        self._requests: list[Request] = []
        self._errors: list[Exception] = []  # exceptions of the server's own code (bugs)
        self._generation = 0  # bumped by down()/stop(): interrupts stalls
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Listen on host:port (port 0: a free one, kept for the server's lifetime) and serve."""
        if self._server is not None:
            raise RuntimeError("already serving")
        server = _Server((self.host, self._port), _Handler)
        server.api = self
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
        with self._cond:
            self._generation += 1
            for watches in self._watches.values():
                for watch in watches:
                    watch.dropped = True
                watches.clear()
            connections = list(self._connections)
            self._cond.notify_all()
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

    # --- object hooks ------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        with self._cond:
            return self._rv

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or update an object (by kind/namespace/name); returns it as stored."""
        with self._cond:
            resource, entry, prev = self._put(obj)
            self._record(resource, "MODIFIED" if prev else "ADDED", entry, prev)
            return self._full_obj(resource, entry)

    def delete(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """Delete an object (kind `Node` or resource `nodes`); returns its final state."""
        resource = _resource(kind)
        key = (namespace or "", name) if resource.namespaced else ("", name)
        with self._cond:
            prev = self._store[resource.name].pop(key, None)
            if prev is None:
                raise KeyError(f"{resource.name} {'/'.join(filter(None, key))} not found")
            self._rv += 1
            obj = prev.obj()
            obj["metadata"]["resourceVersion"] = str(self._rv)
            entry = _Entry(key, self._rv, orjson.dumps(obj))
            self._sorted[resource.name] = None
            self._record(resource, "DELETED", entry, prev)
            return self._full_obj(resource, entry)

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored object (with kind and apiVersion), or None."""
        resource = _resource(kind)
        key = (namespace or "", name) if resource.namespaced else ("", name)
        with self._cond:
            entry = self._store[resource.name].get(key)
            return None if entry is None else self._full_obj(resource, entry)

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """Every stored object of a kind (or resource name), sorted by namespace and name."""
        resource = _resource(kind)
        with self._cond:
            entries, _ = self._sorted_entries(resource)
            return [self._full_obj(resource, e) for e in entries]

    def load(self, objs: Iterable[dict[str, Any]]) -> int:
        """Store many objects without recording watch events; returns the resourceVersion.

        A watch from a resourceVersion before the load cannot see these objects, so it gets the
        410 Expired ERROR event (as after a compaction), and open watches of the loaded
        resources end with it too.
        """
        with self._cond:
            touched: set[str] = set()
            for obj in objs:
                resource, _, _ = self._put(obj)
                touched.add(resource.name)
            for name in touched:
                self._events[name].clear()
                self._horizon[name] = self._rv
            self._cond.notify_all()
            return self._rv

    def _put(self, obj: dict[str, Any]) -> tuple[Resource, _Entry, _Entry | None]:
        resource = _resource(str(obj.get("kind", "")))
        body = {k: v for k, v in obj.items() if k not in {"kind", "apiVersion"}}
        meta = dict(body.get("metadata") or {})
        name = meta.get("name")
        if not name:
            raise ValueError(f"{resource.kind} without metadata.name")
        if resource.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        key = (meta.get("namespace", ""), str(name))
        store = self._store[resource.name]
        prev = store.get(key)
        if prev is not None:
            old_meta = prev.obj()["metadata"]
            meta.setdefault("uid", old_meta.get("uid"))
            meta.setdefault("creationTimestamp", old_meta.get("creationTimestamp"))
        else:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        body = {"metadata": meta, **{k: v for k, v in body.items() if k != "metadata"}}
        entry = _Entry(key, self._rv, orjson.dumps(body))
        store[key] = entry
        self._sorted[resource.name] = None
        return resource, entry, prev

    def _record(self, resource: Resource, kind: str, entry: _Entry, prev: _Entry | None) -> None:
        events = self._events[resource.name]
        events.append(_Event(entry.rv, kind, entry, prev))
        while len(events) > self.history:
            self._horizon[resource.name] = events.popleft().rv
        self._cond.notify_all()

    @staticmethod
    def _full_obj(resource: Resource, entry: _Entry) -> dict[str, Any]:
        decoded: dict[str, Any] = orjson.loads(entry.full(resource))
        return decoded

    def _sorted_entries(
        self, resource: Resource
    ) -> tuple[tuple[_Entry, ...], list[tuple[str, str]]]:
        cached = self._sorted[resource.name]
        if cached is None:
            entries = tuple(sorted(self._store[resource.name].values(), key=lambda e: e.key))
            cached = (entries, [e.key for e in entries])
            self._sorted[resource.name] = cached
        return cached

    # --- fault hooks -------------------------------------------------------------------------

    def fail(self, resource: str, status: int = 500, times: int | None = 1) -> None:
        """The next `times` requests for a resource get `status` (None: until clear_faults())."""
        with self._cond:
            self._failures[_resource(resource).name] = (status, times)

    def forbid(self, resource: str) -> None:
        """Requests for a resource get 403 Forbidden until clear_faults()."""
        with self._cond:
            self._forbidden.add(_resource(resource).name)

    def stall(self, resource: str, seconds: float) -> None:
        """Delay every response for a resource by `seconds` until clear_faults() (0: no delay)."""
        with self._cond:
            self._stalls[_resource(resource).name] = seconds

    def clear_faults(self) -> None:
        """Forget every fail(), forbid() and stall()."""
        with self._cond:
            self._failures.clear()
            self._forbidden.clear()
            self._stalls.clear()

    def drop_watches(self, resource: str | None = None) -> int:
        """Abruptly close open watch streams (of one resource or all); returns how many."""
        names = [_resource(resource).name] if resource else list(RESOURCES)
        with self._cond:
            dropped = [w for n in names for w in self._watches[n]]
            for name in names:
                self._watches[name].clear()
            for watch in dropped:
                watch.dropped = True
            self._cond.notify_all()
        for watch in dropped:
            with contextlib.suppress(OSError):
                watch.connection.shutdown(socket.SHUT_RDWR)
        return len(dropped)

    def compact(self) -> None:
        """Forget all watch history and continue-token snapshots, as an etcd compaction does.

        Every resourceVersion older than the current one becomes too old: a watch from it gets
        the 410 ERROR event and a continue token from before gets 410 Expired. Open watches
        that have seen every event go on; one still behind gets the ERROR event.
        """
        with self._cond:
            self._compact_rv = self._rv
            for name, events in self._events.items():
                if events:
                    self._horizon[name] = max(self._horizon[name], events[-1].rv)
                events.clear()
            self._snapshots.clear()
            self._cond.notify_all()

    def bookmark(self, resource: str) -> None:
        """Send a BOOKMARK now on every open watch of a resource that allows bookmarks."""
        with self._cond:
            for watch in self._watches[_resource(resource).name]:
                watch.bookmark_now = True
            self._cond.notify_all()

    # --- observation hooks -------------------------------------------------------------------

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

    def open_watches(self, resource: str) -> int:
        with self._cond:
            return len(self._watches[_resource(resource).name])

    def wait_for_watches(
        self, resource: str, n: int = 1, timeout: float = 5.0, *, exact: bool = False
    ) -> None:
        """Block until at least `n` (with `exact`: exactly `n`) watches of a resource are open.

        Raises TimeoutError when that does not happen within `timeout` seconds. A watch counts
        as open from its request's arrival until the stream ends or the client hangs up (noticed
        within about 50 ms).
        """
        name = _resource(resource).name

        def reached() -> bool:
            count = len(self._watches[name])
            return count == n if exact else count >= n

        with self._cond:
            if not self._cond.wait_for(reached, timeout):
                wanted = f"{'exactly' if exact else 'at least'} {n}"
                raise TimeoutError(
                    f"{len(self._watches[name])} open {name} watches after {timeout}s, "
                    f"wanted {wanted}"
                )

    # --- request handling (called by _Handler) -----------------------------------------------

    def _log(self, request: Request) -> None:
        with self._cond:
            self._requests.append(request)

    def _apply_faults(self, resource: Resource, verb: str, namespace: str | None) -> None:
        with self._cond:
            delay = self._stalls.get(resource.name, 0.0)
            generation = self._generation
        if delay > 0:
            with self._cond:
                self._cond.wait_for(lambda: self._generation != generation, delay)
        with self._cond:
            if resource.name in self._forbidden:
                scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
                raise _HTTPError(
                    403,
                    "Forbidden",
                    f'{resource.name} is forbidden: User "{_SERVICE_ACCOUNT}" cannot {verb} '
                    f'resource "{resource.name}" in API group "{resource.group}" {scope}',
                    {"group": resource.group, "kind": resource.name},
                )
            failure = self._failures.get(resource.name)
            if failure is None:
                return
            status, times = failure
            if times is not None:
                if times <= 1:
                    del self._failures[resource.name]
                else:
                    self._failures[resource.name] = (status, times - 1)
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "Error"
        raise _HTTPError(status, _REASONS.get(status, "InternalError"), f"injected: {phrase}")

    def _list(self, resource: Resource, namespace: str | None, query: dict[str, str]) -> bytes:
        limit = _int_param(query, "limit", 0)
        if limit < 0:
            raise _HTTPError(400, "BadRequest", "limit must not be negative")
        selector = _Selector(query.get("fieldSelector", ""), query.get("labelSelector", ""))
        token = query.get("continue", "")
        rv_param = query.get("resourceVersion", "")
        with self._cond:
            if token:
                if rv_param:
                    raise _HTTPError(
                        400,
                        "BadRequest",
                        "specifying resource version is not allowed when using continue",
                    )
                snap, start = self._resume(token, resource, namespace)
            else:
                wanted = 0 if rv_param in {"", "0"} else _int_value("resourceVersion", rv_param)
                if wanted > self._rv:
                    raise _too_large(wanted, self._rv)
                entries, keys = self._sorted_entries(resource)
                snap = _Snapshot(resource, namespace, self._rv, entries)
                start = bisect.bisect_left(keys, (namespace, "")) if namespace else 0
        items, next_index = _page(snap, start, limit, selector)
        meta = b'"resourceVersion":"%d"' % snap.rv
        if next_index is not None:
            if not snap.id:
                with self._cond:
                    snap = dataclasses.replace(snap, id=next(self._snapshot_ids))
                    self._snapshots[snap.id] = snap
                    while len(self._snapshots) > _MAX_SNAPSHOTS:
                        del self._snapshots[next(iter(self._snapshots))]
            meta += b',"continue":"%s"' % _encode_token(snap.rv, snap.id, next_index)
            if not selector and namespace is None:
                meta += b',"remainingItemCount":%d' % (len(snap.entries) - next_index)
        return b'{"kind":"%s","apiVersion":"%s","metadata":{%s},"items":[%s]}' % (
            resource.list_kind.encode(),
            resource.api_version.encode(),
            meta,
            b",".join(items),
        )

    def _resume(
        self, token: str, resource: Resource, namespace: str | None
    ) -> tuple[_Snapshot, int]:
        rv, snap_id, start = _decode_token(token)
        snap = self._snapshots.get(snap_id)
        if snap is None or rv < self._compact_rv:
            raise _HTTPError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
            )
        if snap.resource != resource or snap.namespace != namespace or snap.rv != rv:
            raise _HTTPError(400, "BadRequest", "continue key is not valid: wrong resource")
        # Move to the end so that eviction is least-recently-used.
        self._snapshots[snap_id] = self._snapshots.pop(snap_id)
        return snap, start

    def _get(self, resource: Resource, namespace: str | None, name: str) -> bytes:
        with self._cond:
            entry = self._store[resource.name].get((namespace or "", name))
        if entry is None:
            raise _HTTPError(
                404,
                "NotFound",
                f'{resource.name} "{name}" not found',
                {"name": name, "group": resource.group, "kind": resource.name},
            )
        return entry.full(resource)


def _page(
    snap: _Snapshot, start: int, limit: int, selector: _Selector
) -> tuple[list[bytes], int | None]:
    """Items of one page from a snapshot, and the index to continue at (None: the last page)."""
    items: list[bytes] = []
    entries = snap.entries
    namespace = snap.namespace
    for index in range(start, len(entries)):
        entry = entries[index]
        if namespace is not None and entry.key[0] != namespace:
            if entry.key[0] > namespace:
                return items, None
            continue
        if selector and not selector.matches(entry):
            continue
        if limit and len(items) == limit:
            return items, index
        items.append(entry.item)
    return items, None


def _too_large(wanted: int, current: int) -> _HTTPError:
    cause = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    return _HTTPError(
        504,
        "Timeout",
        f"Too large resource version: {wanted}, current: {current}",
        {"causes": [cause], "retryAfterSeconds": 1},
    )


def _encode_token(rv: int, snap_id: int, start: int) -> bytes:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "snap": snap_id, "start": start})
    return base64.urlsafe_b64encode(raw).rstrip(b"=")


def _decode_token(token: str) -> tuple[int, int, int]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = orjson.loads(raw)
        return int(data["rv"]), int(data["snap"]), int(data["start"])
    except (binascii.Error, ValueError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
        raise _HTTPError(400, "BadRequest", f"continue key is not valid: {exc}") from exc


def _int_value(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise _HTTPError(400, "BadRequest", f"invalid {name}: {value!r}") from None


def _int_param(query: dict[str, str], name: str, default: int) -> int:
    value = query.get(name, "")
    return default if value == "" else _int_value(name, value)


# --- HTTP ------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    api: FakeKubeAPI

    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002 - stdlib API
        # Clients hang up mid-response all the time (watches stopped, drop_watches, down()).
        return


_DISCOVERY_GROUPS = {
    "kind": "APIGroupList",
    "apiVersion": "v1",
    "groups": [
        {
            "name": "discovery.k8s.io",
            "versions": [{"groupVersion": "discovery.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "discovery.k8s.io/v1", "version": "v1"},
        }
    ],
}


_SHORT_NAMES = {"nodes": ["no"], "services": ["svc"], "events": ["ev"]}


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
                "shortNames": _SHORT_NAMES.get(r.name, []),
            }
            for r in RESOURCES.values()
            if r.api_version == group_version
        ],
    }


def _route(path: str) -> tuple[Resource, str | None, str | None] | None:
    """(resource, namespace, name) for a resource path, None for anything else."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        rest, api_version = parts[2:], "v1"
    elif parts[:3] == ["apis", "discovery.k8s.io", "v1"]:
        rest, api_version = parts[3:], "discovery.k8s.io/v1"
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not 1 <= len(rest) <= 2:
        return None
    resource = RESOURCES.get(rest[0])
    if resource is None or resource.api_version != api_version:
        return None
    if namespace is not None and not resource.namespaced:
        return None
    name = rest[1] if len(rest) == 2 else None
    if name is not None and resource.namespaced and namespace is None:
        return None
    return resource, namespace, name


class _Handler(BaseHTTPRequestHandler):
    # Go's net/http, and so the real API server, disables Nagle: without this, a watch event
    # written right after another waits for the client's delayed ACK (40 ms).
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"
    server: _Server
    _STATIC: ClassVar[dict[str, Callable[[FakeKubeAPI], dict[str, Any]]]] = {
        "/version": lambda _api: {
            "major": "1",
            "minor": "33",
            "gitVersion": "v1.33.0-fake",
            "platform": "linux/amd64",
        },
        "/api": lambda api: {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{api.host}:{api.port}"}
            ],
        },
        "/apis": lambda _api: _DISCOVERY_GROUPS,
        "/api/v1": lambda _api: _resource_list("v1"),
        "/apis/discovery.k8s.io/v1": lambda _api: _resource_list("discovery.k8s.io/v1"),
    }

    def setup(self) -> None:
        super().setup()
        with self.server.api._cond:
            self.server.api._connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            api = self.server.api
            with api._cond:
                api._connections.discard(self.connection)
                api._cond.notify_all()

    def log_message(self, *_args: Any) -> None:
        return

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        path = split.path.rstrip("/") or "/"
        route = _route(path)
        api = self.server.api
        api._log(
            Request(
                "GET",
                path,
                query,
                route[0].name if route else None,
                {k.lower(): v for k, v in self.headers.items()},
            )
        )
        try:
            self._check_token()
            if route is None:
                self._send(200, orjson.dumps(self._static(path)))
                return
            resource, namespace, name = route
            watch = query.get("watch", "").lower() in {"1", "true"}
            verb = "get" if name else "watch" if watch else "list"
            api._apply_faults(resource, verb, namespace)
            if name is not None:
                self._send(200, api._get(resource, namespace, name))
            elif watch:
                self._watch(resource, namespace, query)
            else:
                self._send(200, api._list(resource, namespace, query))
        except _HTTPError as err:
            self._send(
                err.code, orjson.dumps(_status(err.code, err.reason, err.message, err.details))
            )
        except OSError:
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - a server bug must answer, not hang the client
            with api._cond:
                api._errors.append(exc)
            body = _status(500, "InternalError", f"fake API server bug: {exc!r}")
            with contextlib.suppress(OSError):
                self._send(500, orjson.dumps(body))
            self.close_connection = True

    def _static(self, path: str) -> dict[str, Any]:
        static = self._STATIC.get(path)
        if static is None:
            raise _HTTPError(404, "NotFound", "the server could not find the requested resource")
        return static(self.server.api)

    def _other(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.api._log(
            Request(
                self.command,
                urlsplit(self.path).path,
                {},
                None,
                {k.lower(): v for k, v in self.headers.items()},
            )
        )
        body = _status(405, "MethodNotAllowed", f"{self.command} is not supported by this server")
        self._send(405, orjson.dumps(body))

    do_POST = do_PUT = do_PATCH = do_DELETE = _other  # noqa: N815 - http.server dispatch names

    def _check_token(self) -> None:
        api = self.server.api
        if api.require_token and self.headers.get("Authorization") != f"Bearer {api.token}":
            raise _HTTPError(401, "Unauthorized", "Unauthorized")

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _watch(self, resource: Resource, namespace: str | None, query: dict[str, str]) -> None:
        api = self.server.api
        selector = _Selector(query.get("fieldSelector", ""), query.get("labelSelector", ""))
        timeout = _int_param(query, "timeoutSeconds", 0)
        rv_param = query.get("resourceVersion", "")
        start_rv = None if rv_param in {"", "0"} else _int_value("resourceVersion", rv_param)
        bookmarks = query.get("allowWatchBookmarks", "").lower() in {"1", "true"}
        watch = _Watch(resource, namespace, selector, bookmarks, 0, self.connection)
        initial: list[bytes] = []
        too_old: bytes | None = None
        with api._cond:
            if start_rv is None:
                entries, _ = api._sorted_entries(resource)
                initial = [
                    _event_line("ADDED", e.full(resource))
                    for e in entries
                    if (namespace is None or e.key[0] == namespace) and selector.matches(e)
                ]
                watch.cursor = api._rv
            else:
                floor = max(api._compact_rv, api._horizon[resource.name])
                if start_rv < floor:
                    too_old = _expired_line(start_rv, floor)
                watch.cursor = start_rv
            api._watches[resource.name].append(watch)
            api._cond.notify_all()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache, private")
            self.end_headers()
            if too_old is not None:
                self._chunk(too_old)
            else:
                for batch in _batches(initial):
                    self._chunk(batch)
                if not self._stream(watch, timeout):
                    self.close_connection = True
                    return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True
        finally:
            with api._cond:
                with contextlib.suppress(ValueError):
                    api._watches[resource.name].remove(watch)
                api._cond.notify_all()

    def _stream(self, watch: _Watch, timeout: int) -> bool:
        """Send events until the timeout (True: end normally) or a drop (False: abort)."""
        api = self.server.api
        now = time.monotonic()
        deadline = now + timeout if timeout > 0 else None
        next_bookmark = now + api.bookmark_interval if watch.bookmarks else None
        while True:
            with api._cond:
                lines = self._wait(watch, deadline, next_bookmark)
            if lines is None:
                return False
            if lines and lines[-1].startswith(b'{"type":"ERROR"'):
                self._chunk(lines[-1])
                return True
            if lines and lines[-1].startswith(b'{"type":"BOOKMARK"'):
                next_bookmark = time.monotonic() + api.bookmark_interval
            for batch in _batches(lines):
                self._chunk(batch)
            if deadline is not None and time.monotonic() >= deadline:
                return True

    def _wait(
        self, watch: _Watch, deadline: float | None, next_bookmark: float | None
    ) -> list[bytes] | None:
        """Under the lock: wait for something to send; its lines (None: the watch was dropped).

        The lines are every event after the watch's cursor that passes its selectors, then a
        BOOKMARK when one is due, or a lone ERROR event when the history no longer reaches back
        to the cursor.
        """
        api = self.server.api
        resource = watch.resource
        events = api._events[resource.name]
        while True:
            if watch.dropped:
                return None
            horizon = api._horizon[resource.name]
            if watch.cursor < horizon:
                return [_expired_line(watch.cursor, horizon)]
            pending = bool(events) and events[-1].rv > watch.cursor
            now = time.monotonic()
            due = [t for t in (deadline, next_bookmark) if t is not None]
            if pending or watch.bookmark_now or any(now >= t for t in due):
                break
            if _peer_closed(watch.connection):
                return None
            api._cond.wait(min([*due, now + _PEER_POLL]) - now)
        lines = [
            line
            for event in _since(events, watch.cursor)
            if (line := _filtered_line(resource, watch, event)) is not None
        ]
        watch.cursor = api._rv
        if watch.bookmarks and (
            watch.bookmark_now or (next_bookmark is not None and now >= next_bookmark)
        ):
            lines.append(_bookmark_line(resource, api._rv))
        watch.bookmark_now = False
        return lines


def _peer_closed(conn: socket.socket) -> bool:
    """Whether the client hung up (a watch client sends nothing after its request)."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def _since(events: deque[_Event], rv: int) -> list[_Event]:
    newer: list[_Event] = []
    for event in reversed(events):
        if event.rv <= rv:
            break
        newer.append(event)
    newer.reverse()
    return newer


def _filtered_line(resource: Resource, watch: _Watch, event: _Event) -> bytes | None:
    entry = event.entry
    if watch.namespace is not None and entry.key[0] != watch.namespace:
        return None
    kind = event.type
    if watch.selector:
        now_in = watch.selector.matches(entry)
        if kind == "MODIFIED":
            was_in = watch.selector.matches(event.prev)
            if not (now_in or was_in):
                return None
            kind = "MODIFIED" if now_in and was_in else "ADDED" if now_in else "DELETED"
        elif not now_in:
            return None
    return _event_line(kind, entry.full(resource))


def _event_line(kind: str, obj: bytes) -> bytes:
    return b'{"type":"%s","object":%s}\n' % (kind.encode(), obj)


def _bookmark_line(resource: Resource, rv: int) -> bytes:
    return _event_line("BOOKMARK", resource.prefix + b'"metadata":{"resourceVersion":"%d"}}' % rv)


def _expired_line(rv: int, oldest: int) -> bytes:
    status = _status(410, "Expired", f"too old resource version: {rv} ({oldest})")
    return _event_line("ERROR", orjson.dumps(status))


def _batches(lines: list[bytes]) -> Iterator[bytes]:
    batch: list[bytes] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if size >= _CHUNK_TARGET:
            yield b"".join(batch)
            batch, size = [], 0
    if batch:
        yield b"".join(batch)
