"""The `what-if` command's answers: a JSON document for scripts and text for people.

The pipeline says what changes (exporter.pipeline.whatif); this module words it, shaped like
`explain`: for each Service that changes, before -> after, the reason, and what to do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exporter.engine import EntryVerdict, ExpectedState
from exporter.engine.whatif.feasibility import (
    endpoint_margin,
    rollout_refused_counts,
)
from exporter.engine.whatif.outcome import Change, EntryChange, Outcome
from exporter.engine.whatif.scenario import (
    MAX_SCENARIO_COUNT,
    LoseNodes,
    LoseZone,
    Scale,
    ScenarioError,
    ScenarioStep,
)
from exporter.pipeline.whatif import WhatIf
from exporter.report.explain import ExplainOptions, field, prose, verdict_text
from exporter.report.phrases import refusal_text, share_words

# A Deployment's rolling update defaults, used when --rollout is given without them.
DEFAULT_MAX_SURGE = "25%"
DEFAULT_MAX_UNAVAILABLE = "25%"


@dataclass(frozen=True, slots=True)
class RolloutRequest:
    """A rollout to check: the Service and its Deployment's maxSurge and maxUnavailable as given."""

    namespace: str
    name: str
    max_surge: str
    max_unavailable: str


@dataclass(frozen=True, slots=True)
class RolloutAnswer:
    """The answer to a RolloutRequest: the entry's verdict, the surge and unavailability resolved
    to counts, and the ready counts the rollout passes through at which hints are refused."""

    verdict: EntryVerdict
    max_surge: int
    max_unavailable: int
    refused_counts: tuple[int, ...]


def parse_service_name(text: str) -> tuple[str, str]:
    namespace, slash, name = text.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ScenarioError(f"{text!r} is not NAMESPACE/NAME")
    return namespace, name


def parse_scale(text: str) -> Scale:
    """NAMESPACE/NAME=N."""
    target, equals, count = text.rpartition("=")
    if not equals or not count.isascii() or not count.isdigit() or len(count) > 9:
        raise ScenarioError(f"--scale {text!r}: expected NAMESPACE/NAME=N with N a count")
    namespace, name = parse_service_name(target)
    if int(count) > MAX_SCENARIO_COUNT:
        raise ScenarioError(f"--scale {text!r}: N is at most {MAX_SCENARIO_COUNT:,}")
    return Scale(namespace, name, int(count))


def rollout_amount(text: str, endpoints: int, *, round_up: bool, flag: str) -> int:
    """A count, or a percentage of N rounded as a Deployment rounds it (surge up, down else)."""
    number = text.removesuffix("%")
    if not number.isascii() or not number.isdigit() or len(number) > 9:
        raise ScenarioError(f"{flag} {text!r}: expected a count or a percentage such as 25%")
    if not text.endswith("%"):
        amount = int(number)
    else:
        scaled = int(number) * endpoints
        amount = -(-scaled // 100) if round_up else scaled // 100
    if amount > MAX_SCENARIO_COUNT:
        raise ScenarioError(
            f"{flag} {text!r}: {amount:,} endpoints; a rollout's is at most {MAX_SCENARIO_COUNT:,}"
        )
    return amount


def answer_rollouts(
    result: WhatIf, requests: Sequence[RolloutRequest]
) -> tuple[RolloutAnswer, ...]:
    """Rollouts are judged in the cluster after the scenario's steps (today's without any)."""
    feasibility = result.after.feasibility
    answers = []
    for request in requests:
        own = result.after.services.get((request.namespace, request.name))
        verdicts = own.verdicts if own is not None else ()
        if not verdicts:
            raise ScenarioError(
                f"no such Service with EndpointSlices: {request.namespace}/{request.name}"
            )
        for verdict in verdicts:
            count = verdict.ready_endpoints
            surge = rollout_amount(request.max_surge, count, round_up=True, flag="--max-surge")
            unavailable = rollout_amount(
                request.max_unavailable, count, round_up=False, flag="--max-unavailable"
            )
            if surge == 0 and unavailable == 0:
                raise ScenarioError("--max-surge and --max-unavailable cannot both be 0")
            refused = rollout_refused_counts(verdict, feasibility, surge, unavailable)
            answers.append(RolloutAnswer(verdict, surge, unavailable, refused))
    return tuple(answers)


def exit_status(result: WhatIf, rollouts: Sequence[RolloutAnswer]) -> int:
    """0 when nothing loses hints; 1 when something does (a gate for drains and rollouts)."""
    loses = any(change.change is Change.LOSES_HINTS for change in result.changes)
    return 1 if loses or any(answer.refused_counts for answer in rollouts) else 0


# -- JSON --------------------------------------------------------------------------------------


def _outcome_document(outcome: Outcome) -> dict[str, Any]:
    verdict = outcome.verdict
    nearest = verdict.nearest_feasible
    return {
        "expected_state": str(verdict.expected_state),
        "reason": str(verdict.reason) if verdict.reason is not None else None,
        "ready_endpoints": verdict.ready_endpoints,
        "zones": {
            zone: {"minimum": z.minimum, "desired": z.desired, "maximum": z.maximum}
            for zone, z in verdict.zones.items()
        },
        "nearest_feasible_endpoints": (
            {"below": nearest.below, "above": nearest.above} if nearest is not None else None
        ),
        "converged_proxy_mode_by_zone": {
            zone: str(mode) for zone, mode in outcome.converged.by_zone.items()
        },
        "converged_proxy_same_node": list(outcome.converged.same_node),
    }


def what_if_document(
    result: WhatIf, rollouts: Sequence[RolloutAnswer], *, show_all: bool
) -> dict[str, Any]:
    return {
        "scenario": [step.describe() for step in result.steps],
        "services": [
            {
                "namespace": change.key[0],
                "name": change.key[1],
                "address_type": change.key[2],
                "change": str(change.change),
                "before": _outcome_document(change.before),
                "after": _outcome_document(change.after),
            }
            for change in result.changes
            if show_all or change.change is not Change.UNCHANGED
        ],
        "rollout": [
            {
                "namespace": answer.verdict.service.namespace,
                "name": answer.verdict.service.name,
                "address_type": answer.verdict.address_type,
                "max_surge": answer.max_surge,
                "max_unavailable": answer.max_unavailable,
                "refused_counts": list(answer.refused_counts),
            }
            for answer in rollouts
        ],
    }


# -- text --------------------------------------------------------------------------------------


def step_text(step: ScenarioStep) -> str:
    match step:
        case LoseZone(zone):
            return f"lose zone {zone}"
        case LoseNodes(names):
            return f"lose node{'s' if len(names) > 1 else ''} {', '.join(names)}"
        case Scale(namespace, name, endpoints):
            return f"scale {namespace}/{name} to {endpoints} ready endpoint" + (
                "" if endpoints == 1 else "s"
            )


def _endpoints(count: int) -> str:
    return f"{count} ready endpoint{'' if count == 1 else 's'}"


def _routing_text(outcome: Outcome) -> str:
    view = outcome.converged
    if not view.by_zone and not view.same_node:
        return "not proxied"
    local = sorted(z or "(no zone)" for z, mode in view.by_zone.items() if mode != "Cluster")
    if not local and not view.same_node:
        return "kube-proxy routes cluster-wide in every zone"
    if len(local) == len(view.by_zone):
        return "kube-proxy keeps traffic local in every zone"
    return f"kube-proxy keeps traffic local in {', '.join(local)} only"


def _state_line(outcome: Outcome, options: ExplainOptions) -> str:
    verdict = outcome.verdict
    return (
        f"{verdict_text(verdict, options)}, {_endpoints(verdict.ready_endpoints)}; "
        f"{_routing_text(outcome)}"
    )


def _why(result: WhatIf, change: EntryChange) -> str:
    after = change.after.verdict
    capacity = result.after.capacity
    if after.expected_state is ExpectedState.DISABLED and after.reason is not None:
        return refusal_text(capacity, after, after.reason)
    if change.change is Change.LOSES_HINTS:
        return (
            "the controller keeps writing hints, but no client zone has an endpoint hinted "
            "for it any more, so kube-proxy routes cluster-wide"
        )
    if change.change is Change.GAINS_HINTS:
        return f"{_endpoints(after.ready_endpoints)} fit the zone shares {share_words(capacity)}"
    return "the outcome does not change"


def _to_do(result: WhatIf, change: EntryChange) -> str | None:
    after = change.after.verdict
    if change.change is not Change.LOSES_HINTS:
        return None
    nearest = after.nearest_feasible
    targets = [t for t in (nearest.below, nearest.above) if t is not None] if nearest else []
    if after.expected_state is ExpectedState.DISABLED and targets:
        counts = " or ".join(map(str, targets))
        return f"run {counts} ready endpoints after the change to keep hints on"
    if after.expected_state is ExpectedState.DISABLED:
        if not result.after.capacity.sufficient:
            return "hints stay off whatever the count until node info is sufficient again"
        return "no endpoint count keeps hints on in the changed cluster"
    return "add endpoints in the zones that keep their nodes before making the change"


def _change_lines(result: WhatIf, change: EntryChange, options: ExplainOptions) -> list[str]:
    namespace, name, address_type = change.key
    lines = [
        f"Service {namespace}/{name} ({address_type}): {change.change}",
        *prose("Before", _state_line(change.before, options), options),
        *prose("After", _state_line(change.after, options), options),
        *prose("Why", _why(result, change), options),
    ]
    to_do = _to_do(result, change)
    if to_do is not None:
        lines += prose("To do", to_do, options)
    return lines


def _rollout_lines(answer: RolloutAnswer, result: WhatIf) -> list[str]:
    verdict = answer.verdict
    service = verdict.service
    head = (
        f"Rollout {service.namespace}/{service.name} ({verdict.address_type}): maxSurge "
        f"{answer.max_surge}, maxUnavailable {answer.max_unavailable}, from "
        f"{_endpoints(verdict.ready_endpoints)}"
    )
    if not answer.refused_counts:
        return [head, field("Verdict", "hints stay on at every count the rollout passes")]
    margin = endpoint_margin(verdict, result.after.feasibility)
    counts = ", ".join(map(str, answer.refused_counts))
    lines = [head, field("Verdict", f"hints drop while the rollout passes {counts}")]
    if margin is not None:
        up = "any maxSurge" if math.isinf(margin.up) else f"maxSurge up to {int(margin.up)}"
        lines.append(field("To do", f"{up} and maxUnavailable up to {margin.down} keep hints on"))
    return lines


def what_if_text(
    result: WhatIf,
    rollouts: Sequence[RolloutAnswer],
    options: ExplainOptions,
    *,
    show_all: bool,
) -> str:
    steps = "; then ".join(step_text(step) for step in result.steps) or "no change"
    lines = [f"Scenario: {steps}"]
    before, after = result.before.capacity, result.after.capacity
    if after.zone_ratios != before.zone_ratios:
        lines.append(
            field(
                "Zone shares",
                f"{share_words(before) or 'none'} -> {share_words(after) or 'none'}",
            )
        )
    shown = [c for c in result.changes if show_all or c.change is not Change.UNCHANGED]
    for change in shown:
        lines += ["", *_change_lines(result, change, options)]
    for answer in rollouts:
        lines += ["", *_rollout_lines(answer, result)]
    counts = {kind: sum(1 for c in result.changes if c.change is kind) for kind in Change}
    lines += [
        "",
        (
            f"{len(result.changes)} entries: {counts[Change.LOSES_HINTS]} lose hints, "
            f"{counts[Change.GAINS_HINTS]} gain hints, {counts[Change.REASON_CHANGED]} change "
            f"reason, {counts[Change.UNCHANGED]} unchanged."
        ),
    ]
    return "\n".join(lines) + "\n"
