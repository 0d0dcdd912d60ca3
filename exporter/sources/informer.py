"""List, then watch, one resource; relist on 410 Gone; back off on errors; stop cleanly.

One loop (`Informer.run`): a streaming list when there is no resourceVersion to resume
from (one watch request that starts with the current objects, ready at the bookmark
annotated k8s.io/initial-events-end, and goes on as the watch), or, where the API server
refuses it (WatchList off: 422), a LIST from its watch cache (or a consistent paged one,
`use_apiserver_cache=False`; see `exporter.sources.lists`) then WATCH; each pass of the
loop is one watch request, whose timeoutSeconds is drawn in [min, 2 min) as client-go's
reflector draws it, so that exporters restarted together do not re-watch in lockstep.
What ends a watch decides the next pass: resume from the last
resourceVersion seen, or list again (410 Gone, or repeated failures from the same one).

The watch stream's lines are read and decoded here rather than through
`kubernetes.watch.Watch`: with `deserialize=False` it raises `KeyError: 'raw_object'` on
an ERROR event (kubernetes 37.0.2), which is exactly the 410 Gone that must trigger a
relist.

A list that cannot complete is reported as any failure is (`problem`, watch_up 0, one
warning): LISTs answered 410 Gone again and again, and a streaming list whose end bookmark
does not come within `watch_silence_seconds` (it is read on: the bookmark may still come).

This module is the loop; its parts live beside it: splitting the stream into lines
(`exporter.sources.watchlines`), the waits and which failures count against a
resourceVersion (`exporter.sources.retry`), what a resource is (`exporter.sources.spec`),
a streaming list's objects until its end (`exporter.sources.initial`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar

import msgspec
import structlog
import urllib3

from exporter.sources.decode import (
    JsonDecoder,
    ObjectMeta,
    Status,
    WatchEvent,
    decode_json,
)
from exporter.sources.initial import InitialList, Key, StreamingLists
from exporter.sources.kubeapi import ApiStatusError, Timeouts, read_body
from exporter.sources.lists import NOT_OLDER_THAN, ResourceReader
from exporter.sources.retry import (
    HTTP_FORBIDDEN,
    Backoff,
    ExpiredError,
    ListStalledError,
    WatchStalledError,
    blames_resource_version,
    retry_after,
)
from exporter.sources.settings import InformerSettings
from exporter.sources.spec import RawObject, ResourceSpec
from exporter.sources.watchlines import LineSplitter, OversizedLine
from exporter.vocabulary import EventTypeLabel, Resource, RestartCause, event_type_label

__all__ = ["ExpiredError", "Informer", "InformerSettings", "WatchStalledError"]

_Raw = TypeVar("_Raw", bound=RawObject)
_Slim = TypeVar("_Slim")

HTTP_BAD_REQUEST = 400
HTTP_UNPROCESSABLE = 422
HTTP_GONE = 410
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_READ_CHUNK = 1 << 16

logger = structlog.get_logger("exporter.informer")


class Transport(Protocol):
    """How an informer reaches the API server: one GET, answered with a streaming response."""

    def get(
        self, path: str, query: list[tuple[str, str]], timeouts: Timeouts
    ) -> urllib3.BaseHTTPResponse: ...


class Sink(Protocol[_Slim]):
    """Where an informer puts what it decodes (the store, for one resource)."""

    def replace(self, objects: list[_Slim]) -> None: ...
    def upsert(self, obj: _Slim) -> None: ...
    def delete(self, namespace: str, name: str, uid: str) -> None: ...


class InformerMetrics(Protocol):
    """What an informer reports about its watch: up or down, restarts, events, invalid objects."""

    def watch_up(self, resource: Resource, *, up: bool) -> None: ...
    def watch_restart(self, resource: Resource, cause: RestartCause) -> None: ...
    def watch_event(self, resource: Resource, event_type: EventTypeLabel) -> None: ...
    def invalid_object(self, resource: Resource) -> None: ...


class Informer(Generic[_Raw, _Slim]):
    """Keeps one resource in the store in step with the API server: lists, then watches from the
    list's version, and lists again when the watch cannot resume."""

    def __init__(
        self,
        spec: ResourceSpec[_Raw, _Slim],
        transport: Transport,
        sink: Sink[_Slim],
        metrics: InformerMetrics,
        settings: InformerSettings | None = None,
    ) -> None:
        self.spec = spec
        self._transport = transport
        self._sink = sink
        self._metrics = metrics
        self._settings = settings or InformerSettings()
        self._stop = threading.Event()
        self._response: urllib3.BaseHTTPResponse | None = None
        # exporter.sources.decode's decoders: every failure is a msgspec.DecodeError (or, for one
        # object, an InvalidObjectError), never UnicodeDecodeError or RecursionError.
        self._reader: ResourceReader[_Raw, _Slim] = ResourceReader(
            spec, lambda error: self._invalid(error.name, error.problem)
        )
        self._event_decoder = JsonDecoder(WatchEvent)
        self._rng = random.Random()  # noqa: S311 - jitter, not cryptography
        self._streaming = self._settings.streaming_list
        # Lists answered 410 Gone in a row; the status a streaming list was refused with.
        self._expired_lists = 0
        self._refused: int | None = None
        self._relist_backoff = Backoff(
            self._settings.relist_backoff_initial, self._settings.backoff_max, self._rng
        )
        self._log = logger.bind(resource=spec.resource)
        # The streaming list under way, if any, and how the last one ended.
        self._lists: StreamingLists[_Slim] = StreamingLists(
            self._log, self._initial_events_end, wait_past_empty_end=spec.resource is Resource.NODES
        )
        self.synced = threading.Event()
        # Why the resource cannot be read, while it cannot (shown by /readyz).
        self.problem: str | None = None
        self._logged_invalid: set[str] = set()
        # The newest resourceVersion seen, where a broken watch resumes; None: list first.
        self._resource_version: str | None = None
        # Consecutive watches from _resource_version that failed before any progress; at
        # settings.resume_attempts, list again.
        self._failed_resumes = 0
        self._backoff = Backoff(self._settings.backoff_initial, self._settings.backoff_max)
        self._forbidden_backoff = Backoff(
            self._settings.backoff_initial, self._settings.forbidden_retry
        )
        # The server sends bookmarks: a silent watch is then a stalled one, not a quiet one.
        # Periodic ones only: a server without the watch cache may end a streaming list with
        # a bookmark and send none after it.
        self._bookmarks_seen = False
        # time.monotonic() of the last complete line on the current watch.
        self._last_line = 0.0
        self._logged_oversized = False

    @property
    def _initial(self) -> InitialList[_Slim] | None:
        """The objects of the streaming list under way; None when not in one."""
        return self._lists.current

    # -- lifecycle -----------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            # Unblocks a read waiting on the socket in the informer's thread. The informer
            # may have released the response meanwhile: urllib3 then raises RuntimeError
            # (released to the pool) or ValueError (no socket); nothing is left to cut.
            with contextlib.suppress(OSError, AttributeError, RuntimeError, ValueError):
                response.shutdown()

    def run(self) -> None:
        """List, then watch until stopped.

        A failed or dropped watch resumes from the last resourceVersion seen (a relist of a
        large cluster costs far more). 410 Gone lists again at once; so does a
        resourceVersion whose watches fail `resume_attempts` times in a row before any event,
        whatever the failure (a 400, a 500 or an ERROR event the server answers on every
        resume, an undecodable event replayed each time, a stall), except those that say
        nothing about it: a connection that fails or breaks, throttling and 403, retried as
        they are.
        Every failure waits a jittered, growing backoff (or Retry-After), reset only when a
        watch makes progress: relists that keep failing are paced too. Anything else is a
        bug and ends the thread (the liveness probe reports it).
        """
        while not self._stop.is_set():
            try:
                if self._resource_version is None and not self._streaming:
                    self._resource_version = self._list()
                    self._failed_resumes = 0
                self._watch(self._resource_version)
                if not self._stop.is_set():
                    self._metrics.watch_restart(self.spec.resource, "closed")
                    if self._quiet_works():
                        self._healthy()  # it stayed open to its timeout: it works
            except ExpiredError as expired:
                self._expired(expired)
            except WatchStalledError as stall:
                if self._stop.is_set():
                    break
                self._stalled(stall)
            except (
                ApiStatusError,
                urllib3.exceptions.HTTPError,
                OSError,
                msgspec.DecodeError,
            ) as error:
                if self._stop.is_set():
                    break  # stop() cut the connection: not a failure
                self._on_error(error)

    def _on_error(self, error: Exception) -> None:
        if self._streaming_refused(error):
            return  # list instead, at once
        if self._resource_version is not None and blames_resource_version(error):
            self._resume_failed(error)
        self._failed(error)

    def _streaming_refused(self, error: Exception) -> bool:
        """A streaming list the API server does not serve: LIST then WATCH from now on.

        Without the WatchList feature it answers 422 Invalid ("sendInitialEvents is
        forbidden for watch unless the WatchList feature gate is enabled"); an older one, 400.
        """
        if not (
            # Refused before any event: not a stream that broke later.
            self._initial is not None
            and self._initial.events == 0
            and isinstance(error, ApiStatusError)
            and error.status in {HTTP_BAD_REQUEST, HTTP_UNPROCESSABLE}
        ):
            return False
        self._log.info("the API server does not stream lists; listing instead", error=str(error))
        self._streaming = False
        self._refused = error.status
        self._lists.abandon()
        return True

    def _expired(self, error: ExpiredError) -> None:
        self._metrics.watch_restart(self.spec.resource, "expired")
        if self._resource_version is None:
            self._list_expired(error)
        else:
            self._log.info("resource version expired, listing again")
        self._resource_version = None
        self._stop.wait(self._relist_backoff.next_delay())

    def _list_expired(self, error: ExpiredError) -> None:
        """A LIST (or streaming list) answered 410 Gone: listed again; reported once that
        has happened `resume_attempts` times in a row (a paged LIST slower than etcd's
        compaction, a proxy or server that answers 410 to everything)."""
        self._expired_lists += 1
        attempts = self._expired_lists
        if attempts < self._settings.resume_attempts:
            self._log.info("list expired, listing again", attempts=attempts, error=str(error))
            return
        what = "the streaming list" if self._streaming else "LIST"
        problem = f"list expired: {what} answered 410 Gone {attempts} times"
        if self._refused is not None and not self._streaming:
            problem += f" (the streaming list was refused with HTTP {self._refused})"
        first = not (self.problem or "").startswith("list expired:")
        self._report(problem, "expired", error, restart=False, log=first)

    def _stalled(self, stall: WatchStalledError) -> None:
        held = self._initial
        if held is not None and held.end is not None and not stall.partial:
            # Silent since an end bookmark that came before any object: nothing follows, the
            # resource is empty (a server without periodic bookmarks says so no other way).
            self._resource_version = held.end
            self._lists.settle()
        if not (stall.partial or self._bookmarks_seen):
            # A server that sends no bookmarks (watch cache disabled) is silent whenever
            # nothing changes: reopen the watch from where it was, as after its timeout.
            self._metrics.watch_restart(self.spec.resource, "closed")
            if self._quiet_works():
                self._healthy()  # open and quiet for the whole bound: it works
            return
        self._metrics.watch_restart(self.spec.resource, "stalled")
        self._resume_failed(stall)
        self._report(f"stalled: {stall}", "stalled", stall, restart=False)
        self._stop.wait(self._backoff.next_delay())

    def _quiet_works(self) -> bool:
        """Whether a watch that delivered nothing is a working one: on a server that sends
        no bookmarks, outside a streaming list (whose end is the only sign it worked)."""
        return not self._bookmarks_seen and self._initial is None

    def _resume_failed(self, error: Exception) -> None:
        self._failed_resumes += 1
        if self._failed_resumes >= self._settings.resume_attempts:
            self._log.warning(
                "cannot resume watch; listing again",
                resource_version=self._resource_version,
                attempts=self._failed_resumes,
                error=str(error),
            )
            self._resource_version = None
            self._failed_resumes = 0

    # -- list ------------------------------------------------------------------------------

    def _list(self) -> str:
        resource_version, objects = self._reader.list_all(
            self._read_all,
            cached=self._settings.use_apiserver_cache,
            page_size=self._settings.page_size,
        )
        self._listed(objects)
        self._log.debug("listed", objects=len(objects), resource_version=resource_version)
        return resource_version

    def _listed(self, objects: list[_Slim]) -> None:
        # Up before the objects are stored: whoever sees the new state sees watch_up 1 too.
        self._expired_lists = 0
        self._healthy()
        # Objects that vanished while we were not watching go away with the replace.
        self._sink.replace(objects)
        self.synced.set()

    @contextmanager
    def _request(
        self, query: list[tuple[str, str]], timeouts: Timeouts
    ) -> Iterator[urllib3.BaseHTTPResponse]:
        """One GET, held where stop() can cut it; 410 Gone becomes ExpiredError."""
        try:
            response = self._transport.get(self.spec.path, query, timeouts)
        except ApiStatusError as error:
            if error.status == HTTP_GONE:
                raise ExpiredError(str(error)) from None
            raise
        self._response = response
        try:
            yield response
        except BaseException:
            # Left unread (a stall, a deadline, an event that breaks the watch): the server may
            # still be sending on this connection, or be stuck, so it cannot carry another
            # request. Pooled as it was, it would look idle and be reused.
            with contextlib.suppress(OSError, AttributeError, RuntimeError, ValueError):
                response.close()
            raise
        finally:
            self._response = None
            response.release_conn()

    def _read_all(self, query: list[tuple[str, str]]) -> bytes:
        with self._request(query, self._settings.timeouts) as response:
            return read_body(response, self._settings.timeouts)

    def _invalid(self, name: str, problem: str) -> None:
        self._metrics.invalid_object(self.spec.resource)
        # Logged once per object name: a bad object relisted every few minutes is one line.
        if name not in self._logged_invalid:
            self._logged_invalid.add(name)
            self._log.warning("skipping invalid object", object=name, problem=problem)

    # -- watch -----------------------------------------------------------------------------

    def watch_timeout(self) -> int:
        """The timeoutSeconds of the next watch: jittered, as client-go's reflector draws it."""
        shortest = self._settings.watch_timeout_seconds
        return int(shortest * (1.0 + self._rng.random()))

    def _watch(self, resource_version: str | None) -> None:
        """Stream events until the server ends the watch; progress is kept in _resource_version.

        Without a resourceVersion, a streaming list: the current objects as ADDED events,
        then the bookmark annotated k8s.io/initial-events-end, then the watch goes on.
        """
        query = [("watch", "true"), ("allowWatchBookmarks", "true")]
        if resource_version is None:
            self._lists.begin(time.monotonic())
            query += [
                ("sendInitialEvents", "true"),
                ("resourceVersionMatch", NOT_OLDER_THAN),
                # "0": any state the watch cache has; none: a consistent start.
                *([("resourceVersion", "0")] if self._settings.use_apiserver_cache else []),
            ]
        else:
            self._lists.abandon()
            query.append(("resourceVersion", resource_version))
        query.append(("timeoutSeconds", str(self.watch_timeout())))
        if self.spec.field_selector:
            query.append(("fieldSelector", self.spec.field_selector))
        silence = self._settings.watch_silence_seconds
        # A socket silent that long ends the read; bytes that trickle in without completing
        # an event are caught by _chunks.
        timeouts = dataclasses.replace(self._settings.timeouts, read=silence)
        splitter = LineSplitter(self._settings.max_line_bytes)
        with self._request(query, timeouts) as response:
            self._last_line = time.monotonic()
            if resource_version is not None and self._quiet_works() and not self._failed_resumes:
                # A server without bookmarks is silent while nothing changes: the watch it
                # accepted is all that says it works (waiting for an event kept watch_up 0
                # in a quiet cluster). After an error for this resourceVersion: once it
                # has stayed open (`_quiet_works`).
                self._healthy()
            try:
                for chunk in response.stream(_READ_CHUNK, decode_content=True):
                    self._apply(splitter.feed(chunk))
                    if self._stop.is_set():
                        return
                    if splitter.pending and time.monotonic() - self._last_line > silence:
                        # Bytes trickle in, each within the read timeout, but no event ends.
                        raise WatchStalledError(silence, partial=True)
            except urllib3.exceptions.ReadTimeoutError:
                raise WatchStalledError(silence, partial=splitter.pending) from None
            self._apply(splitter.finish())

    def _apply(self, lines: list[bytes | OversizedLine]) -> None:
        for line in lines:
            self._last_line = time.monotonic()
            if isinstance(line, OversizedLine):
                self._oversized(line.size)
            else:
                self._handle(line)
            if self._stop.is_set():
                return
        initial = self._initial
        if (
            initial is not None
            and not initial.reported
            and self._last_line - initial.started > self._settings.watch_silence_seconds
        ):
            self._list_stalled(initial)

    def _oversized(self, size: int) -> None:
        """Skip the event: the object keeps its last state here until it changes or a relist."""
        self._metrics.invalid_object(self.spec.resource)
        if self._initial is not None:
            self._initial.note()
        if not self._logged_oversized:
            # Once per informer: a flood of them must not flood the log.
            self._logged_oversized = True
            self._log.warning(
                "skipping watch events longer than the limit",
                bytes=size,
                limit=self._settings.max_line_bytes,
            )

    def _handle(self, line: bytes) -> None:
        event = self._event_decoder.decode(line)
        event_type = event_type_label(event.type)
        self._metrics.watch_event(self.spec.resource, event_type)
        if event_type == "ERROR":
            status = decode_json(event.object, Status)
            if status.code == HTTP_GONE:
                raise ExpiredError(status.message)
            raise ApiStatusError(status.code, status.reason, status.message)
        if event_type == "other":
            return  # counted; nothing the informer knows how to apply
        # A valid added or modified object is decoded once, metadata included; only
        # deletions, bookmarks and invalid objects need the metadata on its own.
        raw = (
            self._reader.decode_object(event.object)
            if event_type in {"ADDED", "MODIFIED"}
            else None
        )
        if raw is not None:
            resource_version = raw.metadata.resourceVersion
            self._follow_initial(event_type, resource_version)
            self._apply_object(raw)
        else:
            meta = decode_json(event.object, ObjectMeta)
            resource_version = meta.metadata.resourceVersion
            self._follow_initial(event_type, resource_version, meta.metadata.annotations)
            if event_type == "DELETED":
                self._deleted(meta)
            elif self._initial is not None and event_type != "BOOKMARK":
                self._initial.note()  # an invalid object: counted, skipped
        if self._initial is not None:
            return  # no progress to resume from until the streaming list is complete
        self._healthy()
        self._failed_resumes = 0
        self._backoff.reset()
        self._forbidden_backoff.reset()
        self._relist_backoff.reset()
        if resource_version:
            self._resource_version = resource_version

    def _deleted(self, meta: ObjectMeta) -> None:
        metadata = meta.metadata
        if meta.kind != self.spec.kind:
            self._invalid(metadata.name, f"kind {meta.kind!r} on the {self.spec.kind} watch")
        elif self._initial is not None:
            self._initial.remove((metadata.namespace, metadata.name), metadata.resourceVersion)
        else:
            self._sink.delete(metadata.namespace, metadata.name, metadata.uid)

    def _apply_object(self, raw: _Raw) -> None:
        if raw.kind != self.spec.kind:
            self._invalid(raw.metadata.name, f"kind {raw.kind!r} on the {self.spec.kind} watch")
            if self._initial is not None:
                self._initial.note()
            return
        slim = self._reader.convert(raw)
        if self._initial is not None:
            key: Key = (raw.metadata.namespace, raw.metadata.name)
            self._initial.put(key, slim, raw.metadata.resourceVersion)
        elif slim is not None:
            self._sink.upsert(slim)

    # -- the end of a streaming list -------------------------------------------------------

    def _follow_initial(
        self, event_type: str, resource_version: str, annotations: dict[str, str] | None = None
    ) -> None:
        """Before a line is applied: where it stands against the streaming list's end."""
        bookmark = event_type == "BOOKMARK"
        end = bookmark and (annotations or {}).get(INITIAL_EVENTS_END) == "true"
        # Periodic bookmarks only: a stream that ends its list with one may send no other.
        self._bookmarks_seen |= bookmark and not end
        self._lists.follow(event_type, resource_version, end=end)
        if end and self._initial is not None:
            self._healthy()  # held past a bookmark before its objects: the stream works

    def _initial_events_end(self, objects: list[_Slim], resource_version: str) -> None:
        """The streaming list is complete: the state as of this resourceVersion."""
        self._listed(objects)
        self._log.debug("listed", objects=len(objects), resource_version=resource_version)

    def _list_stalled(self, initial: InitialList[_Slim]) -> None:
        """No end bookmark in time: reported once per list; it is read on, as the watch."""
        initial.reported = True
        bound = self._settings.watch_silence_seconds
        error = ListStalledError(
            f"{initial.events} events for {len(initial.objects)} objects and no bookmark "
            f"annotated {INITIAL_EVENTS_END} after {bound:g} s"
        )
        previous = self.problem or ""
        self._report(
            f"list stalled: no end-of-list bookmark after {bound:g} s",
            "stalled",
            error,
            restart=False,
            log=not previous.startswith("list stalled:"),
        )

    # -- health ----------------------------------------------------------------------------

    def _healthy(self) -> None:
        if self.problem is not None:
            self._log.info("resource readable again")
        self.problem = None
        self._metrics.watch_up(self.spec.resource, up=True)

    def _failed(self, error: Exception) -> None:
        forbidden = isinstance(error, ApiStatusError) and error.status == HTTP_FORBIDDEN
        requested = retry_after(error)
        cause: RestartCause = (
            "forbidden" if forbidden else "throttled" if requested is not None else "error"
        )
        self._report(f"{cause}: {error}", cause, error)
        if requested is not None:
            # As the server asks; the backoff still grows, for when it stops asking.
            asked = min(requested, self._settings.retry_after_max)
            delay = max(asked, self._backoff.next_delay())
        elif forbidden:
            delay = self._forbidden_backoff.next_delay()
        else:
            delay = self._backoff.next_delay()
        self._stop.wait(delay)

    def _report(
        self,
        problem: str,
        cause: RestartCause,
        error: Exception,
        *,
        restart: bool = True,
        log: bool | None = None,
    ) -> None:
        """The problem (for /readyz), the restart counted, watch_up 0: in that order, so that
        whoever sees watch_up 0 sees the rest too. One log line per distinct problem (`log`:
        whether to log, when the caller knows better)."""
        previous, self.problem = self.problem, problem
        if restart:
            self._metrics.watch_restart(self.spec.resource, cause)
        self._metrics.watch_up(self.spec.resource, up=False)
        if problem != previous if log is None else log:
            # One line per distinct problem, not one per retry.
            optional = not self.spec.required and cause == "forbidden"
            log_line = self._log.info if optional else self._log.warning
            log_line(
                "cannot list/watch resource"
                if self.spec.required
                else "cannot read optional resource; its metrics are disabled until it can",
                error=str(error),
                cause=cause,
            )
