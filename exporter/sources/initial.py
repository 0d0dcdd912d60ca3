"""A streaming list's objects until its end, and what tells that end (issue 30: 5, 6).

A streaming list (`sendInitialEvents=true`) sends the current objects as ADDED events, then
the BOOKMARK annotated k8s.io/initial-events-end at the resourceVersion the objects are as
of; the watch goes on from there. `InitialList` holds what arrived so far as the newest
object per namespace/name (a DELETED removes it), so a stream that never ends, however many
events it carries, holds as much as the objects themselves: one Node modified without end
once grew the exporter by 5 MiB a second, every event kept.

An end bookmark that comes before any object is not the end: kube-apiserver sends the
objects first, and a server (or proxy) that sends the bookmark first and the objects after
it, at older resourceVersions, would otherwise be taken for an empty cluster (0 Nodes:
every Service refused). Such a list ends at the first line past its bookmark: a later
bookmark, or an object newer than it, or at its end bookmark once the watch has been silent
for the silence bound (a server that sends no periodic bookmark). The cost is a genuinely
empty resource taken as empty at the next bookmark, about a minute later on kube-apiserver:
so only Nodes wait (a cluster without Nodes has nothing to judge, and 0 Nodes is where a
misordered list did harm: every Service refused, a flip counted). Services, EndpointSlices
and Events are often empty where the exporter watches them (a new cluster, one namespace):
their empty list ends at its bookmark, and objects that come after it at older
resourceVersions are applied as watch events, with a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import structlog

_Slim = TypeVar("_Slim")
Key = tuple[str, str]  # (namespace, name); "" for cluster-scoped objects


def version_number(resource_version: str) -> int | None:
    """A resourceVersion as the number kube-apiserver makes it (etcd's revision); None if
    it is not one (resourceVersions are opaque: nothing is compared then)."""
    return int(resource_version) if resource_version.isdigit() else None


class InitialList(Generic[_Slim]):
    """The objects of one streaming list so far: the newest per key, and its bookkeeping."""

    __slots__ = ("end", "events", "newest", "objects", "reported", "started")

    def __init__(self, started: float) -> None:
        self.objects: dict[Key, _Slim] = {}
        self.events = 0  # every event of the list, objects or not
        # time.monotonic() when the list was asked for.
        self.started = started
        # The highest resourceVersion of an object of the list (0: none seen, or opaque).
        self.newest = 0
        # The end bookmark's resourceVersion, while the list waits past it (it came before
        # any object); None: no end bookmark yet.
        self.end: str | None = None
        # Reported as stalled (no end bookmark in time): once per list.
        self.reported = False

    def put(self, key: Key, obj: _Slim | None, resource_version: str) -> None:
        """An ADDED or MODIFIED object; None: one the exporter does not keep (counted)."""
        self._seen(resource_version)
        if obj is not None:
            self.objects[key] = obj

    def remove(self, key: Key, resource_version: str) -> None:
        self._seen(resource_version)
        self.objects.pop(key, None)

    def note(self) -> None:
        """An event that holds no object of the list (an invalid one, a bookmark)."""
        self.events += 1

    def _seen(self, resource_version: str) -> None:
        self.events += 1
        number = version_number(resource_version)
        if number is not None and number > self.newest:
            self.newest = number

    def past_end(self, resource_version: str, *, bookmark: bool) -> bool:
        """Whether a line after a premature end bookmark ends the list: a bookmark (the
        server has sent everything up to it), or an object newer than the end bookmark."""
        if self.end is None:
            return False
        if bookmark:
            return True
        number, end = version_number(resource_version), version_number(self.end)
        # Opaque versions cannot be ordered: the first object after the bookmark ends it.
        return number is None or end is None or number > end

    def older_than_seen(self, resource_version: str) -> bool:
        """An end bookmark older than objects the list already holds (a server that lags)."""
        number = version_number(resource_version)
        return number is not None and number < self.newest


class StreamingLists(Generic[_Slim]):
    """The streaming list under way (`current`) and where the one completed last ended.

    `follow` is told every line before it is applied; it calls `complete` with the list's
    objects and the resourceVersion the state is as of when the list ends.
    """

    __slots__ = ("_complete", "_ended", "_log", "_wait_past_empty_end", "current")

    def __init__(
        self,
        log: structlog.typing.FilteringBoundLogger,
        complete: Callable[[list[_Slim], str], None],
        *,
        wait_past_empty_end: bool = True,
    ) -> None:
        self._log = log
        self._complete = complete
        # Whether an end bookmark before any object is waited past (see the module's
        # docstring) or taken as an empty resource at once.
        self._wait_past_empty_end = wait_past_empty_end
        self.current: InitialList[_Slim] | None = None
        # The end bookmark's resourceVersion of the list completed last, while objects of
        # that list may still come after it (at no newer resourceVersion); None once a line
        # past it has come.
        self._ended: int | None = None

    def begin(self, now: float) -> None:
        self.current = InitialList(now)

    def abandon(self) -> None:
        self.current = None

    def settle(self) -> None:
        """A list waiting past a premature end bookmark ends at it (silence followed it)."""
        if self.current is not None and self.current.end is not None:
            self._finish(self.current.end)

    def follow(self, event_type: str, resource_version: str, *, end: bool) -> None:
        """One line; `end`: the bookmark annotated k8s.io/initial-events-end."""
        initial = self.current
        bookmark = event_type == "BOOKMARK"
        if initial is None:
            self._late(event_type, resource_version, bookmark=bookmark)
        elif initial.past_end(resource_version, bookmark=bookmark):
            # The list waited past a bookmark that came before its objects: it ends here,
            # as of this bookmark (everything up to it has been sent), or as of its end
            # bookmark when an object newer than that comes.
            if initial.objects:  # else an empty list: it ends here, and nothing is wrong
                self._log.warning(
                    "the streaming list's end bookmark came before its objects; "
                    "the objects after it were taken as part of the list",
                    end_resource_version=initial.end,
                    objects=len(initial.objects),
                )
            self._finish(resource_version if bookmark else initial.end or "")
        elif end:
            self._end_bookmark(initial, resource_version)

    def _end_bookmark(self, initial: InitialList[_Slim], resource_version: str) -> None:
        if not initial.objects and self._wait_past_empty_end:
            # Before any object (kube-apiserver sends them first): what follows at no newer
            # resourceVersion is the list's still; it ends at the next line past it.
            initial.end = resource_version
            return
        if initial.older_than_seen(resource_version):
            self._log.warning(
                "the streaming list's end bookmark is older than objects of the list; "
                "resuming from the bookmark",
                resource_version=resource_version,
                newest_object=str(initial.newest),
            )
        self._finish(resource_version)

    def _finish(self, resource_version: str) -> None:
        initial, self.current = self.current, None
        self._ended = version_number(resource_version)
        self._complete(list(initial.objects.values()) if initial else [], resource_version)

    def _late(self, event_type: str, resource_version: str, *, bookmark: bool) -> None:
        """After a list completed: objects at no newer resourceVersion than its end bookmark
        are its own, sent late (applied all the same); said once."""
        end = self._ended
        if end is None:
            return
        number = version_number(resource_version)
        if bookmark or number is None or number > end:
            self._ended = None  # past the list: nothing of it can come any more
        elif event_type in {"ADDED", "MODIFIED", "DELETED"}:
            self._ended = None
            self._log.warning(
                "objects of the streaming list came after its end bookmark; "
                "they are applied as part of the list",
                end_resource_version=str(end),
                resource_version=resource_version,
            )
