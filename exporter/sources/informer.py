"""List, then watch, one resource; relist on 410 Gone; back off on errors; stop cleanly.

The watch stream's lines are read and decoded here rather than through
`kubernetes.watch.Watch`: with `deserialize=False` it raises `KeyError: 'raw_object'` on
an ERROR event (kubernetes 37.0.2), which is exactly the 410 Gone that must trigger a
relist.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import msgspec
import structlog
import urllib3

from exporter.decode import (
    InvalidObjectError,
    JsonDecoder,
    ListMeta,
    ListPage,
    ObjectDecoder,
    ObjectMeta,
    Status,
    WatchEvent,
    decode_json,
)
from exporter.resources import EventTypeLabel, Resource, RestartCause, event_type_label
from exporter.sources.kubeapi import ApiStatusError, Timeouts


class _Metadata(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def resourceVersion(self) -> str: ...  # noqa: N802 - the API's spelling


class _RawObject(Protocol):
    @property
    def metadata(self) -> _Metadata: ...
    @property
    def kind(self) -> str: ...


_Raw = TypeVar("_Raw", bound=_RawObject)
_Slim = TypeVar("_Slim")

HTTP_BAD_REQUEST = 400
HTTP_FORBIDDEN = 403
HTTP_GONE = 410
HTTP_TOO_MANY_REQUESTS = 429
HTTP_INTERNAL_SERVER_ERROR = 500
HTTP_SERVICE_UNAVAILABLE = 503
_READ_CHUNK = 1 << 16

logger = structlog.get_logger("exporter.informer")


class Transport(Protocol):
    def get(
        self, path: str, query: list[tuple[str, str]], timeouts: Timeouts
    ) -> urllib3.BaseHTTPResponse: ...


class Sink(Protocol[_Slim]):
    """Where an informer puts what it decodes (the store, for one resource)."""

    def replace(self, objects: list[_Slim]) -> None: ...
    def upsert(self, obj: _Slim) -> None: ...
    def delete(self, namespace: str, name: str, uid: str) -> None: ...


class InformerMetrics(Protocol):
    def watch_up(self, resource: Resource, *, up: bool) -> None: ...
    def watch_restart(self, resource: Resource, cause: RestartCause) -> None: ...
    def watch_event(self, resource: Resource, event_type: EventTypeLabel) -> None: ...
    def invalid_object(self, resource: Resource) -> None: ...


@dataclass(frozen=True, slots=True)
class ResourceSpec(Generic[_Raw, _Slim]):
    resource: Resource
    kind: str  # the only kind accepted on this resource's watch (LIST items carry none)
    path: str
    raw_type: type[_Raw]
    # raw -> slim object, or None to ignore it (events of other reasons); may raise
    # InvalidObjectError.
    convert: Callable[[_Raw], _Slim | None]
    field_selector: str | None = None
    # Hint metrics wait for required resources; Events are optional (RBAC often lacks them).
    required: bool = True


@dataclass(frozen=True, slots=True)
class InformerSettings:
    page_size: int = 500
    watch_timeout_seconds: int = 300
    timeouts: Timeouts = field(default_factory=Timeouts)
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    # After a 403, retry rarely: RBAC changes are slow and each try costs a log line.
    forbidden_retry: float = 300.0
    # A Retry-After longer than this is cut to it: a misbehaving proxy cannot park a watch.
    retry_after_max: float = 300.0
    # Failures to resume a watch from the same resourceVersion (400, an event that cannot be
    # decoded replayed on every resume) before listing again.
    resume_attempts: int = 3


class ExpiredError(Exception):
    """The resourceVersion or continue token is too old: list again from scratch."""


class Backoff:
    """Exponential backoff with full jitter, reset after a success."""

    def __init__(self, initial: float, maximum: float, rng: random.Random | None = None) -> None:
        self._initial = initial
        self._maximum = maximum
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._attempt = 0

    def reset(self) -> None:
        self._attempt = 0

    def next_delay(self) -> float:
        ceiling = min(self._maximum, self._initial * (2**self._attempt))
        # Stop counting once the ceiling is reached: 2**1024 does not fit a float, and a long
        # outage must not turn the backoff into an OverflowError.
        if ceiling < self._maximum:
            self._attempt += 1
        return self._rng.uniform(ceiling / 2, ceiling)


class Informer(Generic[_Raw, _Slim]):
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
        # exporter.decode's decoders: every failure is a msgspec.DecodeError (or, for one
        # object, an InvalidObjectError), never UnicodeDecodeError or RecursionError.
        self._page_decoder = JsonDecoder(ListPage[spec.raw_type])  # type: ignore[name-defined]
        self._loose_page_decoder = JsonDecoder(ListPage[msgspec.Raw])
        self._object_decoder = ObjectDecoder(spec.raw_type)  # type: ignore[type-var]
        self._event_decoder = JsonDecoder(WatchEvent)
        self._log = logger.bind(resource=spec.resource)
        self.synced = threading.Event()
        # Why the resource cannot be read, while it cannot (shown by /readyz).
        self.problem: str | None = None
        self._logged_invalid: set[str] = set()
        # The newest resourceVersion seen, where a broken watch resumes; None: list first.
        self._resource_version: str | None = None
        # Consecutive resumes from _resource_version that the server refused or that broke
        # on an event before any progress; at settings.resume_attempts, list again.
        self._failed_resumes = 0

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
        large cluster costs far more); 410 Gone, a failed list, or a resourceVersion that
        fails to resume `resume_attempts` times in a row (400, an undecodable event replayed
        on every resume) lists again. Failures of the API server or the network are retried
        with backoff, or after Retry-After; anything else is a bug and ends the thread (the
        liveness probe reports it).
        """
        backoff = Backoff(self._settings.backoff_initial, self._settings.backoff_max)
        while not self._stop.is_set():
            resuming = self._resource_version is not None
            try:
                if self._resource_version is None:
                    self._resource_version = self._list()
                    self._failed_resumes = 0
                    backoff.reset()
                self._watch(self._resource_version)
                backoff.reset()
                if not self._stop.is_set():
                    self._metrics.watch_restart(self.spec.resource, "closed")
            except ExpiredError:
                self._metrics.watch_restart(self.spec.resource, "expired")
                self._log.info("resource version expired, listing again")
                self._resource_version = None
            except (
                ApiStatusError,
                urllib3.exceptions.HTTPError,
                OSError,
                msgspec.DecodeError,
            ) as error:
                if self._stop.is_set():
                    break  # stop() cut the connection: not a failure
                if resuming and _blames_resource_version(error):
                    self._resume_failed(error)
                self._failed(error, backoff)

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
        objects: list[_Slim] = []
        continue_token = ""
        while True:
            query = [("limit", str(self._settings.page_size))]
            if continue_token:
                query.append(("continue", continue_token))
            if self.spec.field_selector:
                query.append(("fieldSelector", self.spec.field_selector))
            body = self._read_all(query)
            page_meta, items = self._decode_page(body)
            objects.extend(items)
            continue_token = page_meta.continue_ or ""
            if not continue_token:
                break
        # Objects that vanished while we were not watching go away with the replace.
        self._sink.replace(objects)
        self._healthy()
        self.synced.set()
        self._log.debug("listed", objects=len(objects), resource_version=page_meta.resourceVersion)
        return page_meta.resourceVersion

    @contextmanager
    def _request(
        self, query: list[tuple[str, str]], timeouts: Timeouts
    ) -> Iterator[urllib3.BaseHTTPResponse]:
        """One GET, held where stop() can cut it; 410 Gone becomes ExpiredError."""
        try:
            response = self._transport.get(self.spec.path, query, timeouts)
        except ApiStatusError as error:
            if error.status == HTTP_GONE:
                raise ExpiredError from None
            raise
        self._response = response
        try:
            yield response
        finally:
            self._response = None
            response.release_conn()

    def _read_all(self, query: list[tuple[str, str]]) -> bytes:
        with self._request(query, self._settings.timeouts) as response:
            return response.read()

    def _decode_page(self, body: bytes) -> tuple[ListMeta, list[_Slim]]:
        try:
            page = self._page_decoder.decode(body)
            raws = page.items or []
        except msgspec.ValidationError:
            # One malformed object must not cost the whole list: decode item by item.
            loose = self._loose_page_decoder.decode(body)
            page = loose
            raws = [
                raw for item in loose.items or [] if (raw := self._decode_object(item)) is not None
            ]
        return page.metadata, [slim for raw in raws if (slim := self._convert(raw)) is not None]

    def _decode_object(self, data: msgspec.Raw | bytes) -> _Raw | None:
        try:
            return self._object_decoder.decode(data)
        except InvalidObjectError as error:
            self._invalid(error.name, error.problem)
            return None

    def _convert(self, raw: _Raw) -> _Slim | None:
        try:
            return self.spec.convert(raw)
        except InvalidObjectError as error:
            self._invalid(error.name, error.problem)
            return None

    def _invalid(self, name: str, problem: str) -> None:
        self._metrics.invalid_object(self.spec.resource)
        # Logged once per object name: a bad object relisted every few minutes is one line.
        if name not in self._logged_invalid:
            self._logged_invalid.add(name)
            self._log.warning("skipping invalid object", object=name, problem=problem)

    # -- watch -----------------------------------------------------------------------------

    def _watch(self, resource_version: str) -> None:
        """Stream events until the server ends the watch; progress is kept in _resource_version."""
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self._settings.watch_timeout_seconds)),
        ]
        if self.spec.field_selector:
            query.append(("fieldSelector", self.spec.field_selector))
        timeouts = Timeouts(
            connect=self._settings.timeouts.connect,
            # Bookmarks arrive about once a minute; silence far longer than the server's own
            # timeout means a stalled connection.
            read=self._settings.watch_timeout_seconds + self._settings.timeouts.read,
        )
        with self._request(query, timeouts) as response:
            for line in _lines(response):
                self._handle(line)
                if self._stop.is_set():
                    break

    def _handle(self, line: bytes) -> None:
        event = self._event_decoder.decode(line)
        event_type = event_type_label(event.type)
        self._metrics.watch_event(self.spec.resource, event_type)
        if event_type == "ERROR":
            status = decode_json(event.object, Status)
            if status.code == HTTP_GONE:
                raise ExpiredError
            raise ApiStatusError(status.code, status.reason, status.message)
        if event_type == "other":
            return  # counted; nothing the informer knows how to apply
        # A valid added or modified object is decoded once, metadata included; only
        # deletions, bookmarks and invalid objects need the metadata on its own.
        raw = self._decode_object(event.object) if event_type in {"ADDED", "MODIFIED"} else None
        if raw is not None:
            resource_version = raw.metadata.resourceVersion
            if raw.kind != self.spec.kind:
                self._invalid(raw.metadata.name, f"kind {raw.kind!r} on the {self.spec.kind} watch")
            elif (slim := self._convert(raw)) is not None:
                self._sink.upsert(slim)
        else:
            meta = decode_json(event.object, ObjectMeta)
            resource_version = meta.metadata.resourceVersion
            if event_type == "DELETED":
                if meta.kind != self.spec.kind:
                    name = meta.metadata.name
                    self._invalid(name, f"kind {meta.kind!r} on the {self.spec.kind} watch")
                else:
                    self._sink.delete(
                        meta.metadata.namespace, meta.metadata.name, meta.metadata.uid
                    )
        self._healthy()
        self._failed_resumes = 0
        if resource_version:
            self._resource_version = resource_version

    # -- health ----------------------------------------------------------------------------

    def _healthy(self) -> None:
        if self.problem is not None:
            self._log.info("resource readable again")
        self.problem = None
        self._metrics.watch_up(self.spec.resource, up=True)

    def _failed(self, error: Exception, backoff: Backoff) -> None:
        self._metrics.watch_up(self.spec.resource, up=False)
        forbidden = isinstance(error, ApiStatusError) and error.status == HTTP_FORBIDDEN
        retry_after = _retry_after(error)
        cause: RestartCause = (
            "forbidden" if forbidden else "throttled" if retry_after is not None else "error"
        )
        self._metrics.watch_restart(self.spec.resource, cause)
        problem = f"{cause}: {error}"
        if problem != self.problem:
            # One line per distinct problem, not one per retry.
            log = self._log.warning if self.spec.required or not forbidden else self._log.info
            log(
                "cannot list/watch resource"
                if self.spec.required
                else "cannot read optional resource; its metrics are disabled until it can",
                error=str(error),
                cause=cause,
            )
        self.problem = problem
        if retry_after is not None:
            # As the server asks; the backoff still grows, for when it stops asking.
            delay = max(min(retry_after, self._settings.retry_after_max), backoff.next_delay())
        elif forbidden:
            delay = self._settings.forbidden_retry
        else:
            delay = backoff.next_delay()
        self._stop.wait(delay)


def _retry_after(error: Exception) -> float | None:
    """The wait a 429 or 503 asked for (429 without Retry-After: the backoff's own)."""
    if not isinstance(error, ApiStatusError):
        return None
    if error.status == HTTP_TOO_MANY_REQUESTS:
        return error.retry_after if error.retry_after is not None else 0.0
    if error.status == HTTP_SERVICE_UNAVAILABLE:
        return error.retry_after
    return None


def _blames_resource_version(error: Exception) -> bool:
    """Whether retrying the same resourceVersion is likely to fail the same way.

    The server refused the request (a 4xx other than throttling and RBAC), or sent what
    cannot be decoded: both come back on every resume. Outages and 5xx do not count, so
    that a restarting API server does not cost a relist.
    """
    if isinstance(error, msgspec.DecodeError):
        return True
    return (
        isinstance(error, ApiStatusError)
        and HTTP_BAD_REQUEST <= error.status < HTTP_INTERNAL_SERVER_ERROR
        and error.status not in {HTTP_FORBIDDEN, HTTP_TOO_MANY_REQUESTS}
    )


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Newline-delimited JSON from a chunked watch response."""
    pending = b""
    for chunk in response.stream(_READ_CHUNK, decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending
