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
event is built by joining bytes, never by re-serializing dicts. What is served and stored is
in `objects`, how a LIST page and its continue token are cut in `paging`, and the watch
stream's lines in `wire`.
"""

from __future__ import annotations

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
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from exporter.vocabulary import ObjectKey
from tests.kubeapi.objects import RESOURCES, Entry, Resource, Selector, resource
from tests.kubeapi.options import EXACT, send_initial_events
from tests.kubeapi.paging import ListSnapshot, decode_token, encode_token, page
from tests.kubeapi.status import (
    ApiError,
    bad_request,
    int_param,
    resource_version_param,
)
from tests.kubeapi.wire import bookmark_line, event_line, expired_line

_PEER_POLL = 0.05  # how often an idle watch checks that its client is still there
_MAX_SNAPSHOTS = 256  # continue-token snapshots kept (least recently used are evicted: 410)


@dataclass(frozen=True)
class _Event:
    rv: int
    type: str
    entry: Entry | None  # None: an injected event, sent as `line` to every watch
    prev: Entry | None  # the version a MODIFIED replaced (selectors turn it into ADDED/DELETED)
    line: bytes = b""


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
        self._objects: dict[str, dict[ObjectKey, Entry]] = {r: {} for r in RESOURCES}
        self._sorted: dict[str, tuple[tuple[Entry, ...], list[ObjectKey]] | None] = dict.fromkeys(
            RESOURCES
        )
        self._events: dict[str, deque[_Event]] = {r: deque() for r in RESOURCES}
        self._horizon = dict.fromkeys(RESOURCES, 0)  # newest forgotten event, per resource
        self._snapshots: dict[int, ListSnapshot] = {}
        self._snapshot_ids = itertools.count(1)
        self._watches: dict[str, list[_Watch]] = {r: [] for r in RESOURCES}
        # The API server's switches: --watch-cache, and the WatchList feature gate.
        self.watch_cache = True
        self.watch_list = True

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
        key = ObjectKey((namespace or "", name) if served.namespaced else ("", name))
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
        key = ObjectKey((namespace or "", name) if served.namespaced else ("", name))
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
        key = ObjectKey((meta.get("namespace", ""), str(name)))
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

    def _sorted_entries(self, served: Resource) -> tuple[tuple[Entry, ...], list[ObjectKey]]:
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
            entry = self._objects[served.name].get(ObjectKey((namespace or "", name)))
        if entry is None:
            raise ApiError(
                404,
                "NotFound",
                f'{served.name} "{name}" not found',
                {"name": name, "group": served.group, "kind": served.name},
            )
        return entry.full(served)

    def served_from_cache(self, query: dict[str, str]) -> bool:
        """Whether the watch cache answers this LIST (else etcd does: a range read).

        As the cacher's shouldDelegateList decides: with the cache on, a LIST at
        resourceVersion "0", or at a version with NotOlderThan (or none given) and no limit,
        is served from memory, and its limit is ignored; a consistent LIST (no
        resourceVersion), an Exact one and every continue page go to etcd. With the cache
        off, everything does, limit honoured.
        """
        rv = query.get("resourceVersion", "")
        match = query.get("resourceVersionMatch", "")
        if not self.watch_cache or query.get("continue") or not rv or match == EXACT:
            return False
        return rv == "0" or not query.get("limit")

    def list_json(self, served: Resource, namespace: str | None, query: dict[str, str]) -> bytes:
        """One LIST page as the API server sends it (limit, continue, selectors, the cache)."""
        limit = int_param(query, "limit", 0)
        if limit < 0:
            raise bad_request("limit must not be negative")
        if self.served_from_cache(query):
            limit = 0  # the watch cache ignores it
        selector = Selector.from_query(served, query)
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
                snap = ListSnapshot(served, namespace, self._rv, entries)
                start = bisect.bisect_left(keys, (namespace, "")) if namespace else 0
        items, next_index = page(snap, start, limit, selector)
        meta = b'"resourceVersion":"%d"' % snap.rv
        if next_index is not None:
            if not snap.id:
                with self._cond:
                    snap = dataclasses.replace(snap, id=next(self._snapshot_ids))
                    self._snapshots[snap.id] = snap
                    while len(self._snapshots) > _MAX_SNAPSHOTS:
                        del self._snapshots[next(iter(self._snapshots))]
            meta += b',"continue":"%s"' % encode_token(snap.rv, snap.id, next_index)
            if not selector and namespace is None:
                meta += b',"remainingItemCount":%d' % (len(snap.entries) - next_index)
        return b'{"kind":"%s","apiVersion":"%s","metadata":{%s},"items":[%s]}' % (
            served.list_kind.encode(),
            served.api_version.encode(),
            meta,
            b",".join(items),
        )

    def _resume(
        self, token: str, served: Resource, namespace: str | None
    ) -> tuple[ListSnapshot, int]:
        rv, snap_id, start = decode_token(token)
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
        selector = Selector.from_query(served, query)
        start_rv = resource_version_param(query.get("resourceVersion", ""))
        bookmarks = query.get("allowWatchBookmarks", "").lower() in {"1", "true"}
        initial = send_initial_events(query)
        watch = _Watch(served, namespace, selector, bookmarks, 0, connection)
        first: list[bytes] = []
        expired = False
        with self._cond:
            if initial or (initial is None and start_rv is None):
                # The state at a version not older than asked (the current one here, as
                # the fake's cache never lags), as ADDED events; a streaming list ends it
                # with the bookmark annotated k8s.io/initial-events-end.
                if start_rv is not None and start_rv > self._rv:
                    raise _too_large(start_rv, self._rv)
                entries, _ = self._sorted_entries(served)
                first = [
                    event_line("ADDED", e.full(served))
                    for e in entries
                    if (namespace is None or e.key[0] == namespace) and selector.matches(e)
                ]
                if initial:
                    first.append(bookmark_line(served, self._rv, initial_events_end=True))
                watch.cursor = self._rv
            elif start_rv is None:
                watch.cursor = self._rv  # sendInitialEvents=false: from now on
            else:
                floor = max(self._compact_rv, self._horizon[served.name])
                if start_rv < floor:
                    first, expired = [expired_line(start_rv, floor)], True
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
                    return [expired_line(watch.cursor, horizon)]
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
                lines.append(bookmark_line(served, self._rv))
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


def _too_large(wanted: int, current: int) -> ApiError:
    cause = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    return ApiError(
        504,
        "Timeout",
        f"Too large resource version: {wanted}, current: {current}",
        {"causes": [cause], "retryAfterSeconds": 1},
    )
