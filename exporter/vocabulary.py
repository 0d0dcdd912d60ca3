"""The bottom vocabulary every layer shares: the keys of Services and their entries, the
controller's events, the watched resources and watch events.

It imports no other exporter module, so the engine, the sources, the live exporter and
every renderer can name these without depending on each other. The metrics' `resource`,
`type` and `cause` label values are the ones defined here and nothing else, so a value that
comes from the API server cannot create a new series.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, NewType, get_args

# A Service: (namespace, name).
ServiceKey = tuple[str, str]
# Any namespaced object (an EndpointSlice in the store, every kind in the test API server):
# (namespace, name).
ObjectKey = NewType("ObjectKey", tuple[str, str])
# One entry of a Service, one per address type: (namespace, name, address type). A NewType,
# as EventKey: both are three strings, and mypy must tell an address type from a reason.
EntryKey = NewType("EntryKey", tuple[str, str, str])
# The latest controller event of a Service by reason: (namespace, name, reason).
EventKey = NewType("EventKey", tuple[str, str, str])


@dataclass(frozen=True, slots=True)
class ControllerEvent:
    """A TopologyAwareHints* event the EndpointSlice controller recorded on a Service."""

    uid: str
    namespace: str
    service: str
    reason: str
    # How many times the event occurred (Event.count; 1 when unset).
    count: int
    # Unix time of its latest occurrence, when known.
    timestamp: float | None


class Resource(StrEnum):
    """A watched resource, by its plural name as in the API's URLs and the `resource` label."""

    NODES = "nodes"
    SERVICES = "services"
    ENDPOINT_SLICES = "endpointslices"
    EVENTS = "events"


# Resources the exporter works without (RBAC often lacks them): a failing watch of one costs
# only its own metrics, so it is a warning (TopologyHintsExporterOptionalWatchDown), not the
# critical TopologyHintsExporterWatchDown, and its informer does not gate readiness.
OPTIONAL_RESOURCES: frozenset[Resource] = frozenset({Resource.EVENTS})


WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
WATCH_EVENT_TYPES: tuple[WatchEventType, ...] = get_args(WatchEventType)
# The `type` label of an event type outside the known set: an unknown type from the API
# server is counted, but cannot add a series.
EventTypeLabel = WatchEventType | Literal["other"]
EVENT_TYPE_LABELS: tuple[EventTypeLabel, ...] = (*WATCH_EVENT_TYPES, "other")

# Why a watch was opened again: the server ended it; its resourceVersion expired (410); a
# request failed; RBAC forbids it (403); the server asked the client to slow down (429 or
# 503 with Retry-After); it stalled (no event and no bookmark for a while).
RestartCause = Literal["closed", "expired", "error", "forbidden", "throttled", "stalled"]
RESTART_CAUSES: tuple[RestartCause, ...] = get_args(RestartCause)


def event_type_label(event_type: str) -> EventTypeLabel:
    """The `type` label value of a watch event type as received."""
    for known in WATCH_EVENT_TYPES:
        if event_type == known:
            return known
    return "other"
