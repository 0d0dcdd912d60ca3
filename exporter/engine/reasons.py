"""Why the EndpointSlice controller refuses hints: its reason constants and event messages."""

from __future__ import annotations

from enum import StrEnum


class DisableReason(StrEnum):
    """The controller's reason constants, in the order its checks run."""

    INSUFFICIENT_NODE_INFO = "InsufficientNodeInfo"
    NODES_READY_IN_ONE_ZONE_ONLY = "NodesReadyInOneZoneOnly"
    INSUFFICIENT_NUMBER_OF_ENDPOINTS = "InsufficientNumberOfEndpoints"
    MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD = "MinAllocationExceedsOverloadThreshold"
    NO_ZONE_SPECIFIED = "NoZoneSpecified"
    NO_ALLOCATED_HINTS_FOR_ZONES = "NoAllocatedHintsForZones"

    @property
    def event_message(self) -> str:
        """The text the controller's event message starts with (the address type follows)."""
        return _EVENT_MESSAGES[self]

    @property
    def explanation(self) -> str:
        """The same refusal in words an operator can act on."""
        return _EXPLANATIONS[self]


_EVENT_MESSAGES = {
    DisableReason.INSUFFICIENT_NODE_INFO: (
        "Insufficient Node information: allocatable CPU or zone not specified on one or more nodes"
    ),
    DisableReason.NODES_READY_IN_ONE_ZONE_ONLY: "Nodes only ready in one zone",
    DisableReason.INSUFFICIENT_NUMBER_OF_ENDPOINTS: "Insufficient number of endpoints",
    DisableReason.MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD: (
        "Unable to allocate minimum required endpoints to each zone without exceeding "
        "overload threshold"
    ),
    DisableReason.NO_ZONE_SPECIFIED: "One or more endpoints do not have a zone specified",
    DisableReason.NO_ALLOCATED_HINTS_FOR_ZONES: "No hints allocated for zones",
}

_EXPLANATIONS = {
    DisableReason.INSUFFICIENT_NODE_INFO: (
        "a Ready worker node lacks a zone label or allocatable CPU, or fewer than two zones "
        "have CPU, so the controller has no zone ratios and disables hints for every Service"
    ),
    DisableReason.NODES_READY_IN_ONE_ZONE_ONLY: "Ready nodes exist in one zone only",
    DisableReason.INSUFFICIENT_NUMBER_OF_ENDPOINTS: (
        "there are fewer ready endpoints than zones, so some zone would get none"
    ),
    DisableReason.MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD: (
        "giving every zone enough endpoints to stay within 20% of its fair share needs more "
        "endpoints than there are"
    ),
    DisableReason.NO_ZONE_SPECIFIED: "a ready endpoint has no zone, so it cannot be placed",
    DisableReason.NO_ALLOCATED_HINTS_FOR_ZONES: "the allocation produced no hints",
}

HINTS_DISABLED_EVENT = "TopologyAwareHintsDisabled"
HINTS_ENABLED_EVENT = "TopologyAwareHintsEnabled"
