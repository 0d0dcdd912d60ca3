"""The advisor: what to do about a verdict, in the words every surface says it with.

The fix for each offending node and its command, the endpoint counts that enable hints (the
replica advisor), how far today's count may move before hints turn off (the margin), the next
step for a Service, and what losing a zone would do. Plain strings, like
exporter.report.phrases (the words of the verdict itself); exporter.report.explain lays them
out for a terminal and exporter.web shows them on the status pages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

from exporter.engine import (
    ClusterCapacity,
    ConfigIssue,
    DisableReason,
    EntryVerdict,
    MissingInfo,
    NodeProblem,
)
from exporter.engine.allocation import refusal_reason
from exporter.engine.mechanism import deciding_annotation
from exporter.engine.model import ZONE_LABEL
from exporter.engine.whatif.feasibility import Margin
from exporter.engine.whatif.zoneloss import MAX_ZONE_LOSS_ZONES
from exporter.report.phrases import Tone, plural, zone_name

# The replica advisor lists at most about this many endpoint counts.
ADVISOR_SPAN = 20

# Said when node info is insufficient though no node lacks a label or CPU.
TOO_FEW_ZONES = (
    "fewer than two zones have Ready worker nodes with allocatable CPU: "
    f"label worker nodes of at least two zones with {ZONE_LABEL}"
)
# The replica advisor while node info is insufficient.
NO_COUNT_WITHOUT_NODE_INFO = "no endpoint count enables hints until node info is fixed"


# The cluster: offending nodes, zone loss


def node_lack(problem: NodeProblem) -> str:
    if problem.missing is MissingInfo.ZONE:
        return f"no {ZONE_LABEL} label (absent or empty)"
    return "no allocatable CPU (status.allocatable.cpu absent or zero)"


def node_fix(problem: NodeProblem) -> str:
    if problem.missing is MissingInfo.ZONE:
        return f"kubectl label node {problem.node} {ZONE_LABEL}=<zone> --overwrite"
    return (
        f"make the kubelet on {problem.node} report its CPU "
        f"(kubectl describe node {problem.node}: Allocatable)"
    )


def zone_loss_skipped_text(zones: int) -> str:
    """Why no zone-loss forecast is shown; the status page says the same."""
    return (
        f"not forecast: {zones:,} zone labels, more than the {MAX_ZONE_LOSS_ZONES} "
        "a forecast covers (its cost grows as zones x nodes)"
    )


# Said when losing no zone would take any Service's hints away.
ZONE_LOSS_HARMLESS = "losing any one zone keeps every Service's hints"


def zone_loss_texts(zone_loss: Mapping[str, int]) -> list[str]:
    """What losing each zone would do (section 11): a sentence per zone whose loss matters."""
    return [
        f"losing {zone_name(zone)} would turn hints off for {plural(count, 'Service')}"
        for zone, count in zone_loss.items()
        if count
    ]


# One Service (auto only): the replica advisor and the next step


def advisor_range(capacity: ClusterCapacity, current: int) -> range:
    """From 1 to a bit above today's count; a window around it when that is too long."""
    upper = max(current + 3, 2 * len(capacity.zone_ratios) + 3)
    if upper <= ADVISOR_SPAN:
        return range(1, upper + 1)
    half = ADVISOR_SPAN // 2
    return range(max(1, current - half), current + half + 1)


def margin_text(margin: Margin) -> str:
    """How far the endpoint count may move, one at a time, before the controller refuses."""
    if margin.down == 0:
        down = "one endpoint fewer turns hints off"
    else:
        down = f"hints survive losing {plural(margin.down, 'endpoint')}"
    if math.isinf(margin.up):
        up = "any number of surge pods keeps them on"
    elif margin.up == 0:
        up = "one surge pod turns them off"
    else:
        surge = int(margin.up)
        up = f"{plural(surge, 'surge pod')} more {'keeps' if surge == 1 else 'keep'} them on"
    return f"{down}; {up}"


class Advice(NamedTuple):
    """One thing to do about an entry, with the command that does it when there is one."""

    text: str
    tone: Tone | None = None
    # A command that does it, printed on a line of its own so that it copies whole.
    command: str | None = None


def suggestion(capacity: ClusterCapacity, verdict: EntryVerdict) -> Advice:
    """What to do next, and how to paint it."""
    n = verdict.ready_endpoints
    if verdict.reason is None:
        return _fragility(capacity, n)
    shadowed = _shadowed_field_suggestion(verdict)
    if shadowed is not None:
        return shadowed
    if verdict.reason is DisableReason.NO_ZONE_SPECIFIED:
        return Advice(
            "the endpoint count is fine: give every ready endpoint a zone (label its node)"
        )
    nearest = verdict.nearest_feasible
    targets = [t for t in (nearest.below, nearest.above) if t is not None] if nearest else []
    if not targets:
        return Advice("no endpoint count enables hints with today's zone shares")
    *others, last = targets
    wanted = " or ".join([*map(str, others), plural(last, "ready endpoint")])
    if n == 0:
        return Advice(
            "no endpoint is ready, so there is nothing to route: make the Service's pods ready "
            f"(or scale it up); the controller would enable hints at {wanted}"
        )
    return Advice(f"scale to {wanted} to enable hints")


def _shadowed_field_suggestion(verdict: EntryVerdict) -> Advice | None:
    """When an annotation hides spec.trafficDistribution, removing it is the fix, not scaling."""
    service = verdict.service
    decider = deciding_annotation(service)
    if (
        ConfigIssue.ANNOTATION_SHADOWS_TRAFFIC_DISTRIBUTION not in verdict.config_issues
        or decider is None
    ):
        return None
    return Advice(
        f"remove the annotation so that spec.trafficDistribution={service.traffic_distribution} "
        "applies (it never refuses):",
        command=f"kubectl annotate service -n {service.namespace} {service.name} {decider[0]}-",
    )


def _fragility(capacity: ClusterCapacity, n: int) -> Advice:
    """Hints are on; say whether one endpoint more or less (a rollout) would turn them off."""
    neighbours = {n - 1: "one pod down", n + 1: "one surge pod in a rollout"}
    risky = [
        f"{plural(m, 'ready endpoint')} ({why})"
        for m, why in neighbours.items()
        if m >= 1 and refusal_reason(capacity, m) is not None
    ]
    if not risky:
        return Advice(f"hints stay on at {n - 1} and {n + 1} ready endpoints too")
    return Advice(f"hints are on, but would be disabled at {' or '.join(risky)}", Tone.WARN)
