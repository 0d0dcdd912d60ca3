"""The versioned object store behind the test API server: objects, history, lists, watches.

Public interface (thread-safe; every method takes the store's lock):

- objects: `apply(obj)`, `delete(kind, namespace, name)`, `get(kind, namespace, name)`,
  `objects(kind)`, `load(objs)`, `resource_version`;
- history: `compact()`, `inject_event(resource, type, obj)` (an arbitrary event recorded in
  the history, replayed to every watch that resumes from before it);
- serving: `get_json`, `list_json` (a LIST page), `open_watch` (a `WatchStream` whose
  `next_lines` blocks until there is something to send);
- watches: `bookmark`, `stall_watches`, `drop_watches`, `drop_all`, `open_watches`,
  `wait_for_watches`.

Every stored object is kept as its serialized JSON bytes (orjson), so a LIST page or a watch
event is built by joining bytes, never by re-serializing dicts.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import dataclasses
import itertools
import select
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from tests.kubeapi.status import (
    ApiError,
    bad_request,
    int_param,
    resource_version_param,
    status_body,
)

_CHUNK_TARGET = 1 << 20  # watch events are batched into chunks of about this many bytes
_PEER_POLL = 0.05  # how often an idle watch checks that its client is still there
_MAX_SNAPSHOTS = 256  # continue-token snapshots kept (least recently used are evicted: 410)


@dataclass(frozen=True)
class Resource:
    """One served resource type: its plural name, kind and API group/version."""

    name: str
    kind: str
    api_version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()

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
        Resource("nodes", "Node", "v1", namespaced=False, short_names=("no",)),
        Resource("services", "Service", "v1", namespaced=True, short_names=("svc",)),
        Resource("events", "Event", "v1", namespaced=True, short_names=("ev",)),
        Resource("configmaps", "ConfigMap", "v1", namespaced=True, short_names=("cm",)),
        Resource("endpointslices", "EndpointSlice", "discovery.k8s.io/v1", namespaced=True),
        Resource("daemonsets", "DaemonSet", "apps/v1", namespaced=True, short_names=("ds",)),
    )
}
API_VERSIONS = tuple(dict.fromkeys(r.api_version for r in RESOURCES.values()))
_BY_KIND = {r.kind: r for r in RESOURCES.values()}


def resource(kind_or_name: str) -> Resource:
    """A Resource from its kind (`Node`) or plural name (`nodes`)."""
    found = RESOURCES.get(kind_or_name) or _BY_KIND.get(kind_or_name)
    if found is None:
        raise ValueError(f"unknown resource or kind {kind_or_name!r}; known: {sorted(RESOURCES)}")
    return found


class Entry:
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
    entry: Entry | None  # None: an injected event, sent as `line` to every watch
    prev: Entry | None  # the version a MODIFIED replaced (selectors turn it into ADDED/DELETED)
    line: bytes = b""


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
                raise bad_request(f"invalid {what}: {raw!r}")
            return key, value.strip(), negate
    return raw, None, False


class Selector:
    """A parsed fieldSelector plus labelSelector (equality and existence terms only)."""

    def __init__(self, field_selector: str = "", label_selector: str = "") -> None:
        terms: list[_Term] = []
        for raw in filter(None, (t.strip() for t in field_selector.split(","))):
            key, value, negate = _split_term(raw, "field selector")
            if value is None:
                raise bad_request(f"invalid field selector: {raw!r}")
            terms.append(_Term(tuple(key.split(".")), key, value, negate))
        for raw in filter(None, (t.strip() for t in label_selector.split(","))):
            if "(" in raw or " in " in raw or " notin " in raw:
                raise bad_request(f"unsupported label selector: {raw!r}")
            key, value, negate = _split_term(raw, "label selector")
            if value is None and key.startswith("!"):
                key, negate = key[1:].strip(), True
            terms.append(_Term((), key, value, negate))
        self.terms = tuple(terms)

    @classmethod
    def from_query(cls, query: dict[str, str]) -> Selector:
        return cls(query.get("fieldSelector", ""), query.get("labelSelector", ""))

    def __bool__(self) -> bool:
        return bool(self.terms)

    def matches(self, entry: Entry | None) -> bool:
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


# --- watches ---------------------------------------------------------------------------------


@dataclass(eq=False)
class _Watch:
    resource: Resource
    namespace: str | None
    selector: Selector
    bookmarks: bool
    cursor: int  # every event of this resource up to this resourceVersion has been handled
    connection: socket.socket
    dropped: bool = False
    bookmark_now: bool = False
    # stall_watches(): these bytes are sent, then nothing more (None: not stalled).
    stalled: bytes | None = None
    # The response headers are out: a drop from now on is seen by the client as a broken
    # stream, not as a connection closed before any answer (which urllib3 retries silently).
    streaming: bool = False


class WatchStream:
    """One open watch: its first lines, then `next_lines` until it ends; `close` when done."""

    def __init__(
        self, store: ObjectStore, watch: _Watch, first: list[bytes], *, expired: bool
    ) -> None:
        self._store = store
        self._watch = watch
        self.first_lines = first
        # The resourceVersion asked for is too old: first_lines is one ERROR event, and
        # nothing follows.
        self.expired = expired

    @property
    def bookmarks(self) -> bool:
        """Whether the client asked for bookmarks (allowWatchBookmarks=true)."""
        return self._watch.bookmarks

    def started(self) -> None:
        """The response headers and first lines are sent (see `wait_for_watches`)."""
        self._store.watch_started(self._watch)

    def next_lines(self, deadline: float | None, next_bookmark: float | None) -> list[bytes] | None:
        return self._store.next_lines(self._watch, deadline, next_bookmark)

    def close(self) -> None:
        self._store.close_watch(self._watch)


@dataclass(frozen=True)
class _Snapshot:
    """The sorted state of one resource at one resourceVersion, kept for a continue token."""

    resource: Resource
    namespace: str | None
    rv: int
    entries: tuple[Entry, ...]
    id: int = 0  # 0: not yet kept for a continue token


# --- the store -------------------------------------------------------------------------------


class ObjectStore:
    """Objects of every served resource under one global resourceVersion, with history."""

    def __init__(self, history: int = 1000) -> None:
        if history < 1:
            raise ValueError("history must be at least 1")
        self.history = history
        self._cond = threading.Condition(threading.RLock())
        self._rv = 0
        self._compact_rv = 0
        self._objects: dict[str, dict[tuple[str, str], Entry]] = {r: {} for r in RESOURCES}
        self._sorted: dict[str, tuple[tuple[Entry, ...], list[tuple[str, str]]] | None] = (
            dict.fromkeys(RESOURCES)
        )
        self._events: dict[str, deque[_Event]] = {r: deque() for r in RESOURCES}
        self._horizon = dict.fromkeys(RESOURCES, 0)  # newest forgotten event, per resource
        self._snapshots: dict[int, _Snapshot] = {}
        self._snapshot_ids = itertools.count(1)
        self._watches: dict[str, list[_Watch]] = {r: [] for r in RESOURCES}

    # --- objects -----------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self._cond:
            return self._rv

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            served, entry, prev = self._put(obj)
            self._record(served, _Event(entry.rv, "MODIFIED" if prev else "ADDED", entry, prev))
            return _full_obj(served, entry)

    def delete(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        served = resource(kind)
        key = (namespace or "", name) if served.namespaced else ("", name)
        with self._cond:
            prev = self._objects[served.name].pop(key, None)
            if prev is None:
                raise KeyError(f"{served.name} {'/'.join(filter(None, key))} not found")
            self._rv += 1
            obj = prev.obj()
            obj["metadata"]["resourceVersion"] = str(self._rv)
            entry = Entry(key, self._rv, orjson.dumps(obj))
            self._sorted[served.name] = None
            self._record(served, _Event(entry.rv, "DELETED", entry, prev))
            return _full_obj(served, entry)

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        served = resource(kind)
        key = (namespace or "", name) if served.namespaced else ("", name)
        with self._cond:
            entry = self._objects[served.name].get(key)
            return None if entry is None else _full_obj(served, entry)

    def objects(self, kind: str) -> list[dict[str, Any]]:
        served = resource(kind)
        with self._cond:
            entries, _ = self._sorted_entries(served)
            return [_full_obj(served, e) for e in entries]

    def load(self, objs: Iterable[dict[str, Any]]) -> int:
        """Store many objects without recording watch events; see FakeKubeAPI.load."""
        with self._cond:
            touched: set[str] = set()
            for obj in objs:
                served, _, _ = self._put(obj)
                touched.add(served.name)
            for name in touched:
                self._events[name].clear()
                self._horizon[name] = self._rv
            self._cond.notify_all()
            return self._rv

    def _put(self, obj: dict[str, Any]) -> tuple[Resource, Entry, Entry | None]:
        served = resource(str(obj.get("kind", "")))
        body = {k: v for k, v in obj.items() if k not in {"kind", "apiVersion"}}
        meta = dict(body.get("metadata") or {})
        name = meta.get("name")
        if not name:
            raise ValueError(f"{served.kind} without metadata.name")
        if served.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        key = (meta.get("namespace", ""), str(name))
        objects = self._objects[served.name]
        prev = objects.get(key)
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
        entry = Entry(key, self._rv, orjson.dumps(body))
        objects[key] = entry
        self._sorted[served.name] = None
        return served, entry, prev

    def _record(self, served: Resource, event: _Event) -> None:
        events = self._events[served.name]
        events.append(event)
        while len(events) > self.history:
            self._horizon[served.name] = events.popleft().rv
        self._cond.notify_all()

    def _sorted_entries(self, served: Resource) -> tuple[tuple[Entry, ...], list[tuple[str, str]]]:
        cached = self._sorted[served.name]
        if cached is None:
            entries = tuple(sorted(self._objects[served.name].values(), key=lambda e: e.key))
            cached = (entries, [e.key for e in entries])
            self._sorted[served.name] = cached
        return cached

    # --- history -----------------------------------------------------------------------------

    def compact(self) -> None:
        with self._cond:
            self._compact_rv = self._rv
            for name, events in self._events.items():
                if events:
                    self._horizon[name] = max(self._horizon[name], events[-1].rv)
                events.clear()
            self._snapshots.clear()
            self._cond.notify_all()

    def inject_event(self, kind: str, event_type: str, obj: dict[str, Any] | bytes) -> int:
        """Record `{"type": event_type, "object": obj}` as the next event of a resource.

        Sent as it is (no selector, no namespace filter) to every open watch, and replayed to
        every watch that resumes from an older resourceVersion; the stored objects do not
        change. `obj` as bytes is sent verbatim, even when it is not JSON. Returns the
        resourceVersion the event took.
        """
        served = resource(kind)
        raw = obj if isinstance(obj, bytes) else orjson.dumps(obj)
        line = b'{"type":%s,"object":%s}\n' % (orjson.dumps(event_type), raw)
        with self._cond:
            self._rv += 1
            self._record(served, _Event(self._rv, event_type, None, None, line))
            return self._rv

    # --- serving -----------------------------------------------------------------------------

    def get_json(self, served: Resource, namespace: str | None, name: str) -> bytes:
        with self._cond:
            entry = self._objects[served.name].get((namespace or "", name))
        if entry is None:
            raise ApiError(
                404,
                "NotFound",
                f'{served.name} "{name}" not found',
                {"name": name, "group": served.group, "kind": served.name},
            )
        return entry.full(served)

    def list_json(self, served: Resource, namespace: str | None, query: dict[str, str]) -> bytes:
        """One LIST page as the API server sends it (limit, continue, selectors)."""
        limit = int_param(query, "limit", 0)
        if limit < 0:
            raise bad_request("limit must not be negative")
        selector = Selector.from_query(query)
        token = query.get("continue", "")
        rv_param = query.get("resourceVersion", "")
        with self._cond:
            if token:
                if rv_param:
                    raise bad_request(
                        "specifying resource version is not allowed when using continue"
                    )
                snap, start = self._resume(token, served, namespace)
            else:
                wanted = resource_version_param(rv_param) or 0
                if wanted > self._rv:
                    raise _too_large(wanted, self._rv)
                entries, keys = self._sorted_entries(served)
                snap = _Snapshot(served, namespace, self._rv, entries)
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
            served.list_kind.encode(),
            served.api_version.encode(),
            meta,
            b",".join(items),
        )

    def _resume(self, token: str, served: Resource, namespace: str | None) -> tuple[_Snapshot, int]:
        rv, snap_id, start = _decode_token(token)
        snap = self._snapshots.get(snap_id)
        if snap is None or rv < self._compact_rv:
            raise ApiError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
            )
        if snap.resource != served or snap.namespace != namespace or snap.rv != rv:
            raise bad_request("continue key is not valid: wrong resource")
        # Move to the end so that eviction is least-recently-used.
        self._snapshots[snap_id] = self._snapshots.pop(snap_id)
        return snap, start

    def open_watch(
        self,
        served: Resource,
        namespace: str | None,
        query: dict[str, str],
        connection: socket.socket,
    ) -> WatchStream:
        """Register a watch (raises ApiError for a bad query before anything is sent)."""
        selector = Selector.from_query(query)
        start_rv = resource_version_param(query.get("resourceVersion", ""))
        bookmarks = query.get("allowWatchBookmarks", "").lower() in {"1", "true"}
        watch = _Watch(served, namespace, selector, bookmarks, 0, connection)
        first: list[bytes] = []
        expired = False
        with self._cond:
            if start_rv is None:
                entries, _ = self._sorted_entries(served)
                first = [
                    event_line("ADDED", e.full(served))
                    for e in entries
                    if (namespace is None or e.key[0] == namespace) and selector.matches(e)
                ]
                watch.cursor = self._rv
            else:
                floor = max(self._compact_rv, self._horizon[served.name])
                if start_rv < floor:
                    first, expired = [_expired_line(start_rv, floor)], True
                watch.cursor = start_rv
            self._watches[served.name].append(watch)
            self._cond.notify_all()
        return WatchStream(self, watch, first, expired=expired)

    def watch_started(self, watch: _Watch) -> None:
        with self._cond:
            watch.streaming = True
            self._cond.notify_all()

    def close_watch(self, watch: _Watch) -> None:
        with self._cond:
            with contextlib.suppress(ValueError):
                self._watches[watch.resource.name].remove(watch)
            self._cond.notify_all()

    def next_lines(
        self, watch: _Watch, deadline: float | None, next_bookmark: float | None
    ) -> list[bytes] | None:
        """Wait for something to send; its lines (None: the watch was dropped).

        The lines are every event after the watch's cursor that passes its selectors, then a
        BOOKMARK when one is due, or a lone ERROR event when the history no longer reaches back
        to the cursor.
        """
        served = watch.resource
        with self._cond:
            events = self._events[served.name]
            while True:
                if watch.dropped:
                    return None
                if watch.stalled is not None:
                    if watch.stalled:
                        partial, watch.stalled = watch.stalled, b""
                        return [partial]
                    # Nothing more, ever: the stream ends only with a drop or the client.
                    if _peer_closed(watch.connection):
                        return None
                    self._cond.wait(_PEER_POLL)
                    continue
                horizon = self._horizon[served.name]
                if watch.cursor < horizon:
                    return [_expired_line(watch.cursor, horizon)]
                pending = bool(events) and events[-1].rv > watch.cursor
                now = time.monotonic()
                due = [t for t in (deadline, next_bookmark) if t is not None]
                if pending or watch.bookmark_now or any(now >= t for t in due):
                    break
                if _peer_closed(watch.connection):
                    return None
                self._cond.wait(min([*due, now + _PEER_POLL]) - now)
            lines = [
                line
                for event in _since(events, watch.cursor)
                if (line := _filtered_line(served, watch, event)) is not None
            ]
            watch.cursor = self._rv
            if watch.bookmarks and (
                watch.bookmark_now or (next_bookmark is not None and now >= next_bookmark)
            ):
                lines.append(_bookmark_line(served, self._rv))
            watch.bookmark_now = False
            return lines

    # --- watch control -----------------------------------------------------------------------

    def bookmark(self, kind: str) -> None:
        with self._cond:
            for watch in self._watches[resource(kind).name]:
                watch.bookmark_now = True
            self._cond.notify_all()

    def stall_watches(self, kind: str, partial: bytes = b"") -> int:
        """Open watches of a resource send `partial`, then nothing, holding their connections.

        As a wedged proxy or server does, in the middle of an event when `partial` is its
        beginning: no more events and no bookmarks, until the client hangs up or the watch
        is dropped. Watches opened later are served normally. Returns how many stalled.
        """
        with self._cond:
            watches = list(self._watches[resource(kind).name])
            for watch in watches:
                watch.stalled = partial
            self._cond.notify_all()
        return len(watches)

    def drop_watches(self, kind: str | None = None) -> int:
        names = [resource(kind).name] if kind else list(RESOURCES)
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

    def open_watches(self, kind: str) -> int:
        with self._cond:
            return len(self._watches[resource(kind).name])

    def wait_for_watches(
        self, kind: str, n: int = 1, timeout: float = 5.0, *, exact: bool = False
    ) -> None:
        """Block until `n` watches of a resource stream (their response headers are sent)."""
        name = resource(kind).name

        def streaming() -> int:
            return sum(1 for watch in self._watches[name] if watch.streaming)

        def reached() -> bool:
            count = streaming()
            return count == n if exact else count >= n

        with self._cond:
            if not self._cond.wait_for(reached, timeout):
                wanted = f"{'exactly' if exact else 'at least'} {n}"
                raise TimeoutError(
                    f"{streaming()} open {name} watches after {timeout}s, wanted {wanted}"
                )


# --- helpers ---------------------------------------------------------------------------------


def _full_obj(served: Resource, entry: Entry) -> dict[str, Any]:
    decoded: dict[str, Any] = orjson.loads(entry.full(served))
    return decoded


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


def _filtered_line(served: Resource, watch: _Watch, event: _Event) -> bytes | None:
    entry = event.entry
    if entry is None:
        return event.line
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
    return event_line(kind, entry.full(served))


def event_line(kind: str, obj: bytes) -> bytes:
    return b'{"type":"%s","object":%s}\n' % (kind.encode(), obj)


def _bookmark_line(served: Resource, rv: int) -> bytes:
    return event_line("BOOKMARK", served.prefix + b'"metadata":{"resourceVersion":"%d"}}' % rv)


def _expired_line(rv: int, oldest: int) -> bytes:
    status = status_body(410, "Expired", f"too old resource version: {rv} ({oldest})")
    return event_line("ERROR", orjson.dumps(status))


def is_error_line(line: bytes) -> bool:
    return line.startswith(b'{"type":"ERROR"')


def is_bookmark_line(line: bytes) -> bool:
    return line.startswith(b'{"type":"BOOKMARK"')


def batches(lines: list[bytes]) -> Iterator[bytes]:
    """Lines joined into chunks of about 1 MiB."""
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


def _page(
    snap: _Snapshot, start: int, limit: int, selector: Selector
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


def _too_large(wanted: int, current: int) -> ApiError:
    cause = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    return ApiError(
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
        raise bad_request(f"continue key is not valid: {exc}") from exc
