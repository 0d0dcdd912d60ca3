"""When a failed request to the API server is tried again, and after how long.

Exponential backoff with full jitter, the Retry-After the server asks for, which failures
of a watch count against its resourceVersion (enough of them: list again), and the
informer's own failures (expired, stalled).
"""

from __future__ import annotations

import random

import urllib3

from exporter.sources.kubeapi import ApiStatusError

HTTP_FORBIDDEN = 403
HTTP_TOO_MANY_REQUESTS = 429
HTTP_SERVICE_UNAVAILABLE = 503


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


def retry_after(error: Exception) -> float | None:
    """The wait a 429 or 503 asked for (429 without Retry-After: the backoff's own)."""
    if not isinstance(error, ApiStatusError):
        return None
    if error.status == HTTP_TOO_MANY_REQUESTS:
        return error.retry_after if error.retry_after is not None else 0.0
    if error.status == HTTP_SERVICE_UNAVAILABLE:
        return error.retry_after
    return None


def blames_resource_version(error: Exception) -> bool:
    """Whether a failed watch counts towards listing again (see `informer.Informer.run`).

    Whatever the server answered does, whatever its code: a 400, a 500 or an ERROR event
    answered on every resume from one resourceVersion would otherwise wedge the watch
    forever (client-go's reflector lists again after such errors too), and so does data
    that cannot be decoded. What says nothing about the resourceVersion does not: a
    connection that cannot be made or breaks (a restarting API server must not cost every
    client a relist), throttling, and 403 (RBAC).
    """
    if isinstance(error, ApiStatusError):
        return retry_after(error) is None and error.status not in {
            HTTP_FORBIDDEN,
            HTTP_TOO_MANY_REQUESTS,
        }
    return not connection_failed(error)


def connection_failed(error: BaseException) -> bool:
    """The connection could not be made, or broke: the network's failure, not an answer."""
    if isinstance(error, urllib3.exceptions.MaxRetryError):
        return error.reason is None or connection_failed(error.reason)
    return isinstance(
        error,
        urllib3.exceptions.NewConnectionError
        | urllib3.exceptions.ConnectTimeoutError
        | urllib3.exceptions.ProtocolError
        | ConnectionError,
    )


class ExpiredError(Exception):
    """The resourceVersion or continue token is too old: list again from scratch."""


class ListStalledError(Exception):
    """A streaming list went on past the bound without its end bookmark."""


class WatchStalledError(Exception):
    """Nothing complete arrived on a watch for InformerSettings.watch_silence_seconds."""

    def __init__(self, seconds: float, *, partial: bool) -> None:
        where = "in the middle of an event" if partial else "between events"
        super().__init__(f"no event or bookmark for {seconds:g} s (stopped {where})")
        # Bytes of an unfinished event were pending: a stall, whatever the server's bookmarks.
        self.partial = partial
