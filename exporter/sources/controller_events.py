"""The EndpointSlice controller's hint events: which Events are theirs, read from an Event's
JSON however invalid the rest of it is, and the ControllerEvent a RawEvent gives."""

from __future__ import annotations

from datetime import datetime

import msgspec

from exporter.engine.reasons import HINTS_DISABLED_EVENT, HINTS_ENABLED_EVENT
from exporter.sources.decode import JsonDecoder, RawEvent
from exporter.vocabulary import ControllerEvent

CONTROLLER_EVENT_REASONS = frozenset({HINTS_DISABLED_EVENT, HINTS_ENABLED_EVENT})


def _unix_time(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except (ValueError, OverflowError):
        return None


class _InvolvedKind(msgspec.Struct, gc=False):
    kind: str = ""


class _EventRelevance(msgspec.Struct, gc=False):
    # Unbounded: the strings are compared and dropped; the bounds are RawEvent's.
    reason: str = ""
    involvedObject: _InvolvedKind | None = None  # noqa: N815


_EVENT_RELEVANCE = JsonDecoder(_EventRelevance)


def is_controller_event_json(data: bytes | msgspec.Raw) -> bool:
    """Whether an Event's JSON is a hint event on a Service, however invalid the rest is.

    For an Event that fails to decode as a RawEvent: one of another reason is none of the
    exporter's business and is skipped silently; only the events it reads can be invalid.
    Undecodable JSON counts as relevant (nothing says otherwise).
    """
    try:
        event = _EVENT_RELEVANCE.decode(data)
    except msgspec.DecodeError:
        return True
    involved = event.involvedObject
    return (
        involved is not None
        and involved.kind == "Service"
        and event.reason in CONTROLLER_EVENT_REASONS
    )


def controller_event_from_raw(raw: RawEvent) -> ControllerEvent | None:
    """The EndpointSlice controller's hint events on Services; None for any other event."""
    involved = raw.involvedObject
    if involved.kind != "Service" or raw.reason not in CONTROLLER_EVENT_REASONS:
        return None
    timestamp = (
        _unix_time(raw.lastTimestamp)
        or _unix_time(raw.eventTime)
        or _unix_time(raw.firstTimestamp)
        or _unix_time(raw.metadata.creationTimestamp)
    )
    return ControllerEvent(
        uid=raw.metadata.uid or f"{raw.metadata.namespace}/{raw.metadata.name}",
        namespace=involved.namespace or raw.metadata.namespace,
        service=involved.name,
        reason=raw.reason,
        count=max(raw.count or 1, 1),
        timestamp=timestamp,
    )
