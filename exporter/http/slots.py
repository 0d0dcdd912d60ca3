"""Slots for costly requests (scrapes, expensive scrapes, credential checks) and their queue.

A request that finds every slot taken waits in a bounded queue for a bounded time, then is
answered 503 with Retry-After (`exporter.http.response.busy`). A slot held by a client that
stopped reading is given up to a waiting request after a grace period.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog

from exporter.http.limits import HttpLimits

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

logger = structlog.get_logger("exporter.http")


def _never(_environ: WSGIEnvironment) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class ScrapeCosts:
    """What a scrape costs the app, as the app tells: `expensive` ones (more than a cached
    body) queue for max_expensive_scrapes; `prepared` ones the app answers from what it
    has at hand, in well under a millisecond, so they run on the loop thread: no hop to a
    worker and back, which on a busy machine waits twice for the scheduler."""

    expensive: Callable[[WSGIEnvironment], bool] = _never
    prepared: Callable[[WSGIEnvironment], bool] = _never


class Holder(Protocol):
    """A connection that holds a slot; cancelling its task closes it."""

    @property
    def task(self) -> asyncio.Task[None] | None: ...


class Gate:
    """At most `slots` requests at once, at most `max_queued` more waiting, each for
    `queue_timeout` at most; a waiting one closes a holder stalled `stall_grace` on its
    client, the one stalled longest. Used only on the event loop thread."""

    def __init__(self, slots: int, limits: HttpLimits) -> None:
        self._semaphore = asyncio.Semaphore(slots)
        self._limits = limits
        self._waiting = 0
        # Holders waiting for their client to read: since when, and what they answer.
        self._stalled: dict[Holder, tuple[float, str | None]] = {}

    async def acquire(self) -> bool:
        """True once the request holds a slot (release() it); False: answer it 503."""
        limits = self._limits
        if self._semaphore.locked() and self._waiting >= limits.max_queued:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.queue_timeout
        self._waiting += 1
        try:
            while True:
                self._close_stalled(loop.time() - limits.stall_grace)
                try:
                    async with asyncio.timeout(min(limits.stall_grace, deadline - loop.time())):
                        await self._semaphore.acquire()
                except TimeoutError:
                    if loop.time() >= deadline:
                        return False
                    continue
                return True
        finally:
            self._waiting -= 1

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot now."""
        return self._waiting

    def release(self) -> None:
        self._semaphore.release()

    def stalled(self, connection: Holder, since: float, path: str | None) -> None:
        self._stalled[connection] = (since, path)

    def moving(self, connection: Holder) -> None:
        self._stalled.pop(connection, None)

    def _close_stalled(self, before: float) -> None:
        """Close the holder stalled longest, if since `before`: its slot goes to a waiter."""
        if not self._semaphore.locked() or not self._stalled:
            return
        connection, (since, path) = next(iter(self._stalled.items()))
        if since > before:
            return
        del self._stalled[connection]
        if connection.task is not None:
            logger.info(
                "response abandoned",
                reason="client stopped reading; its slot went to a waiting request",
                path=path,
            )
            connection.task.cancel()
