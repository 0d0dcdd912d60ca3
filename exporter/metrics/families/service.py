"""Per-Service families: what the Service asks for, and per (Service, address type) what
the EndpointSlice controller should do with its hints and how far it is from changing.
"""

from __future__ import annotations

from collections.abc import Iterator

from exporter.engine import ExpectedState
from exporter.metrics.family import (
    COUNTER,
    GAUGE,
    Declarations,
    Sample,
    Scope,
    ServiceEntry,
    each_entry,
    each_service,
    one_sample,
)
from exporter.state.result import ServiceResult

_declare = Declarations()

# -- per Service -----------------------------------------------------------------------------


def _service_info(result: ServiceResult) -> Iterator[Sample]:
    service = result.service
    mechanism = str(result.verdicts[0].mechanism)
    yield (
        (
            mechanism,
            service.traffic_distribution or "",
            service.internal_traffic_policy or "",
            "true" if service.proxied else "false",
            "true" if service.controller_synced else "false",
        ),
        1.0,
    )


SERVICE_INFO = _declare(
    "service_info",
    GAUGE,
    Scope.SERVICE,
    "1 per exported Service, with its hint mechanism, the raw trafficDistribution and "
    "internalTrafficPolicy fields (empty when unset), and whether a data plane proxies it "
    "(false for headless and ExternalName Services, whose hints no data plane reads), and "
    "whether the EndpointSlice controller syncs it (false for Services without a selector "
    "and ExternalName Services, whose slices, if any, are made by something else).",
    each_service(_service_info, parts=("service", "mechanism")),
    labels=(
        "mechanism",
        "traffic_distribution",
        "internal_traffic_policy",
        "proxied",
        "controller_synced",
    ),
)
SERVICE_CONFIG_ISSUE = _declare(
    "service_config_issue",
    GAUGE,
    Scope.SERVICE,
    "1 per configuration mistake found on the Service (issue id, see the runbook).",
    each_service(
        lambda result: (((str(issue),), 1.0) for issue in sorted(result.verdicts[0].config_issues)),
        parts=("config_issues",),
    ),
    labels=("issue",),
)

SERVICE_NOTICE = _declare(
    "service_notice",
    GAUGE,
    Scope.SERVICE,
    "1 per notice about the Service (e.g. prefer-close-deprecated): worth knowing, never a "
    "problem, and no alert fires on it.",
    each_service(
        lambda result: (((str(notice),), 1.0) for notice in sorted(result.verdicts[0].notices)),
        parts=("notices",),
    ),
    labels=("notice",),
)


# -- per (Service, address type) --------------------------------------------------------------


def _expected_enabled(entry: ServiceEntry) -> Iterator[Sample]:
    state = entry.verdict.expected_state
    if state is not ExpectedState.NOT_APPLICABLE:
        yield (), float(state is ExpectedState.ENABLED)


def _nearest_feasible(entry: ServiceEntry) -> Iterator[Sample]:
    nearest = entry.verdict.nearest_feasible
    if nearest is None:
        return
    if nearest.below is not None:
        yield ("below",), float(nearest.below)
    if nearest.above is not None:
        yield ("above",), float(nearest.above)


def _endpoint_margin(entry: ServiceEntry) -> Iterator[Sample]:
    margin = entry.forecast.margin
    if margin is not None:
        yield ("down",), float(margin.down)
        yield ("up",), float(margin.up)


SERVICE_EXPECTED_ENABLED = _declare(
    "service_expected_enabled",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "1 when the EndpointSlice controller should keep hints for the Service, 0 when it "
    "removes them (absent without a hint mechanism).",
    each_entry(_expected_enabled, parts=("expected_state",)),
)
SERVICE_DISABLED_REASON = _declare(
    "service_disabled_reason",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "1 for the reason the controller refuses hints (its event reason constant).",
    each_entry(
        lambda entry: (
            [((str(entry.verdict.reason),), 1.0)] if entry.verdict.reason is not None else []
        ),
        parts=("reason",),
    ),
    labels=("reason",),
)
SERVICE_READY_ENDPOINTS = _declare(
    "service_ready_endpoints",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready endpoints in controller-managed EndpointSlices (N of the allocation).",
    each_entry(
        lambda entry: one_sample(entry.verdict.ready_endpoints),
        parts=("ready_endpoints",),
    ),
)
SERVICE_HINTED_ENDPOINTS = _declare(
    "service_hinted_endpoints",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready endpoints that carry at least one zone hint.",
    each_entry(
        lambda entry: one_sample(entry.verdict.hinted_endpoints),
        parts=("hinted_endpoints",),
    ),
)
SERVICE_HINT_COMPLETENESS = _declare(
    "service_hint_completeness",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Hinted / ready endpoints; strictly between 0 and 1 means kube-proxy ignores "
    "every hint of the Service.",
    each_entry(
        lambda entry: (
            one_sample(entry.verdict.hint_completeness)
            if entry.verdict.hint_completeness is not None
            else []
        ),
        parts=("hint_completeness",),
    ),
)
SERVICE_DRIFT = _declare(
    "service_drift",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "1 while observed hints disagree with the expected result "
    "(kind: hints-missing, unexpected-hints, zone-out-of-range).",
    each_entry(
        lambda entry: (((str(kind),), 1.0) for kind in sorted(entry.verdict.drift)),
        parts=("drift",),
    ),
    labels=("kind",),
)
SERVICE_NEAREST_FEASIBLE_ENDPOINTS = _declare(
    "service_nearest_feasible_endpoints",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "The nearest ready endpoint count below or above today's that would let the "
    "controller enable auto hints with today's zone ratios.",
    each_entry(_nearest_feasible, parts=("nearest_feasible",)),
    labels=("direction",),
)
SERVICE_ENDPOINT_MARGIN = _declare(
    "service_endpoint_margin",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready endpoints that may go (down) or come (up), one at a time, before the controller "
    "removes the auto hints; 0 means one pod more or less disables them, up is +Inf when no "
    "higher count is refused (absent unless auto and enabled).",
    each_entry(_endpoint_margin, parts=("forecast",)),
    labels=("direction",),
)
SERVICE_STATE_CHANGES_TOTAL = _declare(
    "service_state_changes_total",
    COUNTER,
    Scope.SERVICE_ENTRY,
    "Flips of the expected state between enabled and disabled seen since the exporter started.",
    each_entry(lambda entry: one_sample(entry.state_changes), parts=("state_changes",)),
)


FAMILIES = _declare.families
