"""Read the cluster once, for `explain` and `evaluate`: one paginated LIST per resource, read-only.

The same configuration loading, transport and raw-bytes decoding as the live exporter's
informers, without their watch loop: the answer is a snapshot, like a `kubectl get` dump.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import urllib3

from exporter.decode import InvalidObjectError, ListPage, object_name
from exporter.snapshot import Snapshot
from exporter.sources.cluster import ENDPOINT_SLICES, NODES, SERVICES
from exporter.sources.informer import ResourceSpec
from exporter.sources.kubeapi import (
    ApiStatusError,
    KubeTransport,
    Timeouts,
    api_client,
    read_body,
)

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
    snapshot: Snapshot
    # kind -> why it could not be listed (a 403): the verdicts must not pretend to know it.
    unreadable: dict[str, str]
    # Objects skipped because they do not decode, one "Kind namespace/name: problem" each.
    skipped: tuple[str, ...]
    server: str


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
    try:
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
    return ListedCluster(snapshot, unreadable, tuple(skipped), server)


def _list_all(
    transport: KubeTransport,
    spec: ResourceSpec[Any, Any],
    page_size: int,
    timeouts: Timeouts,
    skip: Callable[[str], None],
) -> list[Any]:
    """Every object of one resource, page after page; from scratch if a continue token expires."""
    typed = msgspec.json.Decoder(ListPage[spec.raw_type])  # type: ignore[name-defined]
    loose = msgspec.json.Decoder(ListPage[msgspec.Raw])
    for _attempt in range(3):
        objects: list[Any] = []
        token = ""
        try:
            while True:
                body = _read_page(transport, spec, token, page_size, timeouts)
                metadata, raws = _decode_page(body, typed, loose, spec, skip)
                objects += _convert(raws, spec, skip)
                token = metadata.continue_ or ""
                if not token:
                    return objects
        except ApiStatusError as error:
            if error.status != HTTP_GONE:
                raise
    raise ClusterReadError(f"cannot list {spec.resource}: the list kept changing under us")


def _read_page(
    transport: KubeTransport,
    spec: ResourceSpec[Any, Any],
    token: str,
    page_size: int,
    timeouts: Timeouts,
) -> bytes:
    query = [("limit", str(page_size))]
    if token:
        query.append(("continue", token))
    if spec.field_selector:
        query.append(("fieldSelector", spec.field_selector))
    response = transport.get(spec.path, query, timeouts)
    try:
        return read_body(response, timeouts)
    finally:
        response.release_conn()


def _convert(
    raws: list[Any], spec: ResourceSpec[Any, Any], skip: Callable[[str], None]
) -> list[Any]:
    objects = []
    for raw in raws:
        try:
            slim = spec.convert(raw)
        except InvalidObjectError as error:
            skip(f"{error.name}: {error.problem}")
            continue
        if slim is not None:
            objects.append(slim)
    return objects


def _decode_page(
    body: bytes,
    typed: msgspec.json.Decoder[Any],
    loose: msgspec.json.Decoder[Any],
    spec: ResourceSpec[Any, Any],
    skip: Callable[[str], None],
) -> tuple[Any, list[Any]]:
    try:
        page = typed.decode(body)
    except msgspec.ValidationError:
        # One malformed object must not cost the whole answer: decode item by item.
        page = loose.decode(body)
    else:
        return page.metadata, page.items or []
    item_decoder = msgspec.json.Decoder(spec.raw_type)
    raws = []
    for item in page.items or []:
        try:
            raws.append(item_decoder.decode(item))
        except msgspec.ValidationError as error:
            skip(f"{spec.resource} {_name_of(item)}: {error}")
    return page.metadata, raws


def _name_of(item: msgspec.Raw) -> str:
    try:
        return object_name(msgspec.json.decode(item))
    except msgspec.DecodeError:
        return "<undecodable>"


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
