"""`explain` at cluster scale: which Services have a problem, a one-line summary of each, the
exit status a CI gate reads, and warnings for a snapshot that lacks a kind of object.

Pure rendering over a result, like `exporter.report.explain`: no I/O. Problems and the
input's completeness (`nodes_known`) are the result's, judged once by the step that built it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from exporter.engine import EntryVerdict, Mechanism
from exporter.engine.problems import PROBLEM_ORDER, ProblemId
from exporter.state.result import ClusterResult

NODE_KIND, SERVICE_KIND, ENDPOINT_SLICE_KIND = "Nodes", "Services", "EndpointSlices"
KINDS = (NODE_KIND, SERVICE_KIND, ENDPOINT_SLICE_KIND)

# Exit statuses of `explain`: a CI gate reads them.
EXIT_HINTS_OK = 0
EXIT_HINTS_MISSING = 1
EXIT_INCOMPLETE = 2
# What `explain` fails on unless --fail-on says otherwise: every problem of the table.
ALL_PROBLEMS: frozenset[ProblemId] = frozenset(ProblemId)

# What each kind of object tells, so a warning can say what is unknown without it.
_WITHOUT = {
    NODE_KIND: (
        "the zones' CPU shares and each node's zone are unknown, so no auto verdict (enabled "
        "or refused), replica advice, kube-proxy mode or what-if answer can be told, only "
        "mechanisms, config issues, the hints in place and trafficDistribution verdicts "
        "(which never depend on Nodes)"
    ),
    SERVICE_KIND: (
        "no EndpointSlice can be tied to a Service's annotation or trafficDistribution, so "
        "there is no verdict at all; only node info is shown"
    ),
    ENDPOINT_SLICE_KIND: (
        "no Service has endpoints to judge, so there is no verdict at all; only node info is shown"
    ),
}


# -- the gate ----------------------------------------------------------------------------------


def exit_status(
    problems: Iterable[Collection[ProblemId]],
    missing: Mapping[str, str],
    fail_on: Collection[ProblemId] = ALL_PROBLEMS,
) -> int:
    """2: the input lacks a kind of object; 1: an entry has a problem of `fail_on` (by
    default any problem of the table, exactly what the alerts cover); else 0. `problems`:
    each entry's, as the result holds them (ClusterResult.problems)."""
    if missing:
        return EXIT_INCOMPLETE
    for found in problems:
        if any(problem in fail_on for problem in found):
            return EXIT_HINTS_MISSING
    return EXIT_HINTS_OK


def entries_status(
    result: ClusterResult,
    verdicts: Iterable[EntryVerdict],
    missing: Mapping[str, str],
    fail_on: Collection[ProblemId] = ALL_PROBLEMS,
) -> int:
    """`exit_status` of these entries of the result."""
    return exit_status((result.problems(verdict) for verdict in verdicts), missing, fail_on)


# -- choosing Services -------------------------------------------------------------------------


def select(
    result: ClusterResult, namespace: str | None, name: str | None
) -> tuple[EntryVerdict, ...]:
    """The verdicts of one namespace (None: all), or of one Service; LookupError if it has none."""
    chosen = tuple(
        verdict
        for verdict in result.verdicts()
        if (namespace is None or verdict.service.namespace == namespace)
        and (name is None or verdict.service.name == name)
    )
    if name is not None and not chosen:
        raise LookupError(f"no Service {namespace}/{name} with EndpointSlices")
    return chosen


def with_problems(
    result: ClusterResult, verdicts: Iterable[EntryVerdict]
) -> tuple[EntryVerdict, ...]:
    return tuple(verdict for verdict in verdicts if result.problems(verdict))


def problems_first(result: ClusterResult, verdicts: Iterable[EntryVerdict]) -> list[EntryVerdict]:
    """Services with problems first, each group in namespace, name, address type order."""
    return sorted(verdicts, key=lambda verdict: (not result.problems(verdict), verdict.key))


# -- the summary -------------------------------------------------------------------------------


def verdict_word(result: ClusterResult, verdict: EntryVerdict) -> str:
    if not result.nodes_known and verdict.mechanism is Mechanism.AUTO:
        return "unknown"
    return str(verdict.expected_state)


def summary_row(result: ClusterResult, verdict: EntryVerdict, *, wide: bool) -> dict[str, str]:
    """One Service and address type as table cells, keyed by column header."""
    service = verdict.service
    completeness = verdict.hint_completeness
    known_reason = verdict.reason is not None and (
        result.nodes_known or verdict.mechanism is not Mechanism.AUTO
    )
    row = {
        "NAMESPACE": service.namespace,
        "NAME": service.name,
        "ADDRESS TYPE": verdict.address_type,
        "MECHANISM": str(verdict.mechanism),
        "VERDICT": verdict_word(result, verdict),
        "REASON": str(verdict.reason) if known_reason else "-",
        "READY": str(verdict.ready_endpoints),
        "HINTED": "-" if completeness is None else f"{completeness * 100:.0f}%",
        "PROBLEMS": ",".join(result.problems(verdict)) or "-",
        "ENDPOINTS BY ZONE": " ".join(f"{zone}={n}" for zone, n in verdict.zone_endpoints.items())
        or "-",
        "NEAREST FEASIBLE": nearest_words(verdict) if result.nodes_known else "-",
    }
    if not wide:
        for column in ("ADDRESS TYPE", "ENDPOINTS BY ZONE", "NEAREST FEASIBLE"):
            del row[column]
    return row


def nearest_words(verdict: EntryVerdict) -> str:
    nearest = verdict.nearest_feasible
    if nearest is None or verdict.reason is None:
        return "-"
    found = [str(count) for count in (nearest.below, nearest.above) if count is not None]
    return " or ".join(found) or "none"


def table(rows: Sequence[Mapping[str, str]]) -> list[str]:
    """Columns as `kubectl get` aligns them: headers, then cells, three spaces apart."""
    if not rows:
        return []
    headers = list(rows[0])
    widths = {h: max(len(h), *(len(row[h]) for row in rows)) for h in headers}
    return [
        "   ".join(cells[h].ljust(widths[h]) for h in headers).rstrip()
        for cells in ({h: h for h in headers}, *rows)
    ]


def count_line(result: ClusterResult, verdicts: Sequence[EntryVerdict], shown: int) -> str:
    """'6 Services: 2 enabled, 2 disabled, 2 not-applicable; 3 with problems (2 off, ...)'."""
    if not verdicts:
        return "0 Services"
    states = Counter(verdict_word(result, verdict) for verdict in verdicts)
    found = [result.problems(verdict) for verdict in verdicts]
    kinds = Counter(problem for listed in found for problem in listed)
    noun = "Service" if len(verdicts) == 1 else "Services"
    dual = len({verdict.service.key for verdict in verdicts}) < len(verdicts)
    line = f"{len(verdicts)} {noun}{' (one line per address type)' if dual else ''}: " + ", ".join(
        f"{states[state]} {state}" for state in sorted(states)
    )
    troubled = sum(1 for listed in found if listed)
    line += f"; {troubled} with problems"
    if kinds:
        line += " (" + ", ".join(f"{kinds[p]} {p}" for p in PROBLEM_ORDER if kinds[p]) + ")"
    if shown != len(verdicts):
        line += f"; {shown} shown"
    return line


def summary_text(
    result: ClusterResult,
    verdicts: Sequence[EntryVerdict],
    missing: Mapping[str, str],
    *,
    only_problems: bool,
    wide: bool,
) -> str:
    shown = problems_first(result, with_problems(result, verdicts) if only_problems else verdicts)
    rows = [summary_row(result, verdict, wide=wide) for verdict in shown]
    lines = [f"Warning: {warning}" for warning in missing_warnings(missing)]
    lines += table(rows) or ["No Service with EndpointSlices to show."]
    lines.append(count_line(result, verdicts, len(shown)))
    return "\n".join(lines) + "\n"


def summary_document(
    result: ClusterResult,
    verdicts: Sequence[EntryVerdict],
    missing: Mapping[str, str],
    *,
    only_problems: bool,
    fail_on: Collection[ProblemId] = ALL_PROBLEMS,
) -> dict[str, Any]:
    shown = problems_first(result, with_problems(result, verdicts) if only_problems else verdicts)
    return {
        "missing": dict(missing),
        "exit_status": entries_status(result, verdicts, missing, fail_on),
        "services": [
            {
                "namespace": verdict.service.namespace,
                "name": verdict.service.name,
                "address_type": verdict.address_type,
                "mechanism": str(verdict.mechanism),
                "verdict": verdict_word(result, verdict),
                "reason": str(verdict.reason) if verdict.reason is not None else None,
                "ready_endpoints": verdict.ready_endpoints,
                "hint_completeness": verdict.hint_completeness,
                "problems": [str(p) for p in result.problems(verdict)],
            }
            for verdict in shown
        ],
    }


# -- what the input lacks ----------------------------------------------------------------------


def missing_kinds(nodes: int, services: int, endpoint_slices: int) -> list[str]:
    """Kinds of which the input holds no object: every real cluster has some of each."""
    counts = {NODE_KIND: nodes, SERVICE_KIND: services, ENDPOINT_SLICE_KIND: endpoint_slices}
    return [kind for kind in KINDS if counts[kind] == 0]


def missing_warnings(missing: Mapping[str, str]) -> list[str]:
    """One sentence per missing kind: what is missing, why, and what that leaves unknown."""
    return [f"{why}: {_WITHOUT[kind]}" for kind, why in missing.items()]


def missing_error(missing: Mapping[str, str]) -> str:
    """The same sentences on one line: what `what-if` exits 2 with, as `explain` does."""
    return "; ".join(missing_warnings(missing))
