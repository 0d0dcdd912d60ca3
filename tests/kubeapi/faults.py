"""Fault injection for the test API server: failures, throttling, 403s and stalls per resource.

Public interface (thread-safe): `fail(resource, status, times)`, `throttle(resource,
retry_after, status, times)`, `forbid(resource)`, `stall(resource, seconds, verbs)`,
`trickle(resource, interval)`, `misorder_initial_events(resource, end)`, `clear()`; the
HTTP handler calls `check(resource, verb, namespace)` before it serves a request,
`trickled(resource)` and `pause(seconds)` to send a LIST body slowly and
`initial_lines(resource, lines)` for a streaming list's first lines, and the server calls
`interrupt()` when it goes down (a stalled request ends at once).
"""

from __future__ import annotations

import dataclasses
import http
import threading
from dataclasses import dataclass

from tests.kubeapi.objects import Resource, resource
from tests.kubeapi.status import REASONS, ApiError

SERVICE_ACCOUNT = "system:serviceaccount:monitoring:topology-hints-exporter"


@dataclass(frozen=True)
class _Failure:
    status: int
    remaining: int | None  # None: until clear()
    retry_after: int | None = None  # seconds, sent as the Retry-After header
    verbs: tuple[str, ...] = ()  # only requests of these verbs; (): every request


class Faults:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._failures: dict[str, _Failure] = {}
        self._forbidden: set[str] = set()
        self._stalls: dict[str, float] = {}
        self._trickles: dict[str, float] = {}
        self._stalled_verbs: dict[str, tuple[str, ...]] = {}
        self._initial_end: dict[str, str] = {}
        self._generation = 0  # bumped by interrupt(): ends stalls
        self._throttled = 0

    def fail(
        self, kind: str, status: int = 500, times: int | None = 1, verbs: tuple[str, ...] = ()
    ) -> None:
        """The next `times` requests for a resource get `status` (None: until clear()).

        Every request, or only those of `verbs` ("get", "list", "watch") when given.
        """
        with self._cond:
            self._failures[resource(kind).name] = _Failure(status, times, verbs=verbs)

    def throttle(
        self, kind: str, retry_after: int = 1, status: int = 429, times: int | None = 1
    ) -> None:
        """The next `times` requests get `status` (429 or 503) with `Retry-After: retry_after`.

        As API Priority and Fairness answers a client it sheds: the body is a Status whose
        details carry retryAfterSeconds too.
        """
        with self._cond:
            self._failures[resource(kind).name] = _Failure(status, times, retry_after)

    def forbid(self, kind: str) -> None:
        """Requests for a resource get 403 Forbidden until clear()."""
        with self._cond:
            self._forbidden.add(resource(kind).name)

    def stall(self, kind: str, seconds: float, verbs: tuple[str, ...] = ()) -> None:
        """Delay responses for a resource by `seconds` until clear() (0: no delay).

        Every request, or only those of `verbs` ("get", "list", "watch") when given.
        """
        with self._cond:
            self._stalls[resource(kind).name] = seconds
            self._stalled_verbs[resource(kind).name] = verbs

    def trickle(self, kind: str, interval: float) -> None:
        """LIST bodies of a resource are sent a few bytes every `interval` s until clear().

        As over a congested link: each write comes well within a client's read timeout, but
        the whole body takes as long as its size says.
        """
        with self._cond:
            self._trickles[resource(kind).name] = interval

    def trickled(self, served: Resource) -> float:
        """The trickle interval of a resource's LIST bodies (0: sent at once)."""
        with self._cond:
            return self._trickles.get(served.name, 0.0)

    def misorder_initial_events(self, kind: str, end: str) -> None:
        """Streaming lists of a resource send their end bookmark (k8s.io/initial-events-end)
        `end` until clear(): "first", before the objects (which then come with older
        resourceVersions than it), or "never" (the objects, then the watch goes on)."""
        if end not in {"first", "never"}:
            raise ValueError(f"end must be 'first' or 'never', not {end!r}")
        with self._cond:
            self._initial_end[resource(kind).name] = end

    def initial_lines(self, served: Resource, lines: list[bytes]) -> list[bytes]:
        """A watch's first lines as misorder_initial_events() has them sent."""
        with self._cond:
            end = self._initial_end.get(served.name)
        if end is None or not lines or not lines[-1].startswith(b'{"type":"BOOKMARK"'):
            return lines
        if end == "first":
            return [lines[-1], *lines[:-1]]
        return lines[:-1]

    def pause(self, seconds: float) -> bool:
        """Wait `seconds`; False if the server went down meanwhile."""
        with self._cond:
            generation = self._generation
            return not self._cond.wait_for(lambda: self._generation != generation, seconds)

    def clear(self) -> None:
        with self._cond:
            self._failures.clear()
            self._forbidden.clear()
            self._stalls.clear()
            self._stalled_verbs.clear()
            self._trickles.clear()
            self._initial_end.clear()

    def interrupt(self) -> None:
        """End every stall now (the server is going down)."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    @property
    def throttled(self) -> int:
        """How many requests were answered with a Retry-After so far."""
        with self._cond:
            return self._throttled

    def check(self, served: Resource, verb: str, namespace: str | None) -> None:
        """Stall, then raise the ApiError injected for this request, if any."""
        with self._cond:
            delay = self._stalls.get(served.name, 0.0)
            if verb not in (self._stalled_verbs.get(served.name) or (verb,)):
                delay = 0.0
            generation = self._generation
            if delay > 0:
                self._cond.wait_for(lambda: self._generation != generation, delay)
            if served.name in self._forbidden:
                raise _forbidden(served, verb, namespace)
            failure = self._failures.get(served.name)
            if failure is None or verb not in (failure.verbs or (verb,)):
                return
            if failure.remaining is not None:
                if failure.remaining <= 1:
                    del self._failures[served.name]
                else:
                    self._failures[served.name] = dataclasses.replace(
                        failure, remaining=failure.remaining - 1
                    )
            if failure.retry_after is not None:
                self._throttled += 1
        raise _injected(failure)


def _forbidden(served: Resource, verb: str, namespace: str | None) -> ApiError:
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return ApiError(
        403,
        "Forbidden",
        f'{served.name} is forbidden: User "{SERVICE_ACCOUNT}" cannot {verb} '
        f'resource "{served.name}" in API group "{served.group}" {scope}',
        {"group": served.group, "kind": served.name},
    )


def _injected(failure: _Failure) -> ApiError:
    try:
        phrase = http.HTTPStatus(failure.status).phrase
    except ValueError:
        phrase = "Error"
    reason = REASONS.get(failure.status, "InternalError")
    if failure.retry_after is None:
        return ApiError(failure.status, reason, f"injected: {phrase}")
    return ApiError(
        failure.status,
        reason,
        "Too many requests, please try again later.",
        {"retryAfterSeconds": failure.retry_after},
        {"Retry-After": str(failure.retry_after)},
    )
