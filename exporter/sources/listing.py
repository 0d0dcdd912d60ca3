"""Read the cluster once, for `explain` and `evaluate`: one paginated LIST per resource, read-only.

The same configuration loading, transport and LIST (`exporter.sources.lists`, bounded
decoders) as the live exporter's informers, without their watch loop: the answer is a
snapshot, like a `kubectl get` dump.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import urllib3

from exporter.engine.versions import ServerVersion
from exporter.sources.cluster import ENDPOINT_SLICES, NODES, SERVICES
from exporter.sources.kubeapi import (
    ApiStatusError,
    KubeTransport,
    Timeouts,
    api_client,
    read_body,
)
from exporter.sources.lists import ResourceReader
from exporter.sources.snapshot import Snapshot
from exporter.sources.spec import ResourceSpec
from exporter.sources.version import read_server_version

HTTP_FORBIDDEN = 403
HTTP_GONE = 410
PAGE_SIZE = 500
# kind -> resource spec: the kinds name what a warning says is missing.
LISTED: tuple[tuple[str, ResourceSpec[Any, Any]], ...] = (
    ("Nodes", NODES),
    ("Services", SERVICES),
    ("EndpointSlices", ENDPOINT_SLICES),
)


class ClusterReadError(Exception):
    """The cluster cannot be read; the message is one line saying what to check."""


@dataclass(frozen=True, slots=True)
class ListedCluster:
    """What a one-shot LIST of the cluster read: the snapshot, the kinds it could not read and
    the objects it skipped, and the server it read them from."""

    snapshot: Snapshot
    # kind -> why it could not be listed (a 403): the verdicts must not pretend to know it.
    unreadable: dict[str, str]
    # Objects skipped because they do not decode, one "Kind namespace/name: problem" each.
    skipped: tuple[str, ...]
    server: str
    # The API server's version (/version), None when it could not be told, and why.
    server_version: ServerVersion | None = None
    version_problem: str = ""


def read_cluster(
    kubeconfig: str | None,
    context: str | None,
    *,
    page_size: int = PAGE_SIZE,
    timeouts: Timeouts | None = None,
) -> ListedCluster:
    """LIST Nodes, Services and EndpointSlices; raises ConfigError or ClusterReadError."""
    client = api_client(kubeconfig, context)
    server = str(client.configuration.host)
    transport = KubeTransport(client)
    listed: dict[str, list[Any]] = {}
    unreadable: dict[str, str] = {}
    skipped: list[str] = []
    server_version: ServerVersion | None = None
    version_problem = ""
    try:
        server_version, version_problem = read_server_version(transport, timeouts or Timeouts())
        for kind, spec in LISTED:
            try:
                listed[kind] = _list_all(
                    transport, spec, page_size, timeouts or Timeouts(), skipped.append
                )
            except ApiStatusError as error:
                if error.status != HTTP_FORBIDDEN:
                    raise
                unreadable[kind] = f"cannot list {spec.resource}: forbidden ({error.message})"
                listed[kind] = []
    except ApiStatusError as error:
        raise ClusterReadError(f"the API server at {server} answered {error}") from None
    except msgspec.DecodeError:
        raise ClusterReadError(
            f"the API server at {server} answered with something not JSON"
        ) from None
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise ClusterReadError(
            f"cannot reach the API server at {server}: {connection_problem(error)}"
        ) from None
    finally:
        transport.close()
    snapshot = Snapshot(
        tuple(listed["Nodes"]), tuple(listed["Services"]), tuple(listed["EndpointSlices"])
    )
    return ListedCluster(
        snapshot, unreadable, tuple(skipped), server, server_version, version_problem
    )


def _list_all(
    transport: KubeTransport,
    spec: ResourceSpec[Any, Any],
    page_size: int,
    timeouts: Timeouts,
    skip: Callable[[str], None],
) -> list[Any]:
    """Every object of one resource, page after page; from scratch if a continue token expires.

    Consistent reads, not the watch cache's: a command is one read that a user runs to see
    the cluster as it is now (after a change, as a CI gate), which a lagging cache could
    contradict, and it costs the API server a few pages once, not at every restart.
    """
    reader: ResourceReader[Any, Any] = ResourceReader(spec, lambda error: skip(str(error)))

    def fetch(query: list[tuple[str, str]]) -> bytes:
        response = transport.get(spec.path, query, timeouts)
        try:
            return read_body(response, timeouts)
        finally:
            response.release_conn()

    for _attempt in range(3):
        try:
            return reader.list_all(fetch, cached=False, page_size=page_size)[1]
        except ApiStatusError as error:
            if error.status != HTTP_GONE:
                raise
    raise ClusterReadError(f"cannot list {spec.resource}: the list kept changing under us")


def connection_problem(error: BaseException) -> str:
    """The root cause of a connection failure in a few words, not urllib3's whole chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return current.strerror
        reason = getattr(current, "reason", None)
        current = (
            reason
            if isinstance(reason, BaseException)
            else (current.__cause__ or current.__context__)
        )
    text = str(error)
    return text.rsplit(": ", 1)[-1].rstrip("')\"") if text else type(error).__name__
