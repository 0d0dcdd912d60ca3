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
from exporter.sources.kubeapi import ApiStatusError, Timeouts


class _Metadata(Protocol):
    @property
    def resourceVersion(self) -> str: ...  # noqa: N802 - the API's spelling


class _RawObject(Protocol):
    @property
    def metadata(self) -> _Metadata: ...


_Raw = TypeVar("_Raw", bound=_RawObject)
_Slim = TypeVar("_Slim")

HTTP_FORBIDDEN = 403
HTTP_GONE = 410
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
    def watch_up(self, resource: str, *, up: bool) -> None: ...
    def watch_restart(self, resource: str, cause: str) -> None: ...
    def watch_event(self, resource: str, event_type: str) -> None: ...
    def invalid_object(self, resource: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ResourceSpec(Generic[_Raw, _Slim]):
    resource: str  # plural, as in the URL and the metrics' `resource` label
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

    # -- lifecycle -----------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            # Unblocks a read waiting on the socket in the informer's thread.
            with contextlib.suppress(OSError, AttributeError):
                response.shutdown()

    def run(self) -> None:
        """List, then watch until stopped; never raises.

        A failed or dropped watch resumes from the last resourceVersion seen (a relist of a
        large cluster costs far more); only 410 Gone, or a failed list, lists again.
        """
        backoff = Backoff(self._settings.backoff_initial, self._settings.backoff_max)
        while not self._stop.is_set():
            try:
                if self._resource_version is None:
                    self._resource_version = self._list()
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
                self._failed(error, backoff)

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
        self._metrics.watch_event(self.spec.resource, event.type)
        if event.type == "ERROR":
            status = decode_json(event.object, Status)
            if status.code == HTTP_GONE:
                raise ExpiredError
            raise ApiStatusError(status.code, status.reason, status.message)
        # A valid added or modified object is decoded once, metadata included; only
        # deletions, bookmarks and invalid objects need the metadata on its own.
        raw = self._decode_object(event.object) if event.type in {"ADDED", "MODIFIED"} else None
        if raw is not None:
            resource_version = raw.metadata.resourceVersion
            slim = self._convert(raw)
            if slim is not None:
                self._sink.upsert(slim)
        else:
            meta = decode_json(event.object, ObjectMeta).metadata
            resource_version = meta.resourceVersion
            if event.type == "DELETED":
                self._sink.delete(meta.namespace, meta.name, meta.uid)
        self._healthy()
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
        cause = "forbidden" if forbidden else "error"
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
        delay = self._settings.forbidden_retry if forbidden else backoff.next_delay()
        self._stop.wait(delay)


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
