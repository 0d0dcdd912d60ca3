"""Log lines that tell the story of the live exporter: a Service's verdict changed, from what,
to what, and why, at most one line per Service and aspect per window so that a flapping
Service cannot flood the log.

An aspect is one thing about a verdict worth a line when it changes: the expected state,
and the effective routing (the share of Ready nodes each data plane keeps local).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from exporter.engine import EntryVerdict
from exporter.vocabulary import EntryKey

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

# One line per Service and aspect per this many seconds; changes in between are counted.
DEFAULT_WINDOW = 60.0
# Lines per evaluation step: a node change can flip every Service at once; past this many,
# one line counts the rest.
DEFAULT_STEP_LINES = 20


@cache
def _logger() -> FilteringBoundLogger:
    """The transitions' logger. structlog is imported when a line is first written, not
    with this module: `evaluate`, `explain` and `what-if` run the same pipeline and never
    log a transition, and structlog (with rich, when installed) is half of their start-up."""
    import structlog  # noqa: PLC0415

    logger: FilteringBoundLogger = structlog.get_logger("exporter.pipeline.transitions")
    return logger


@dataclass(frozen=True, slots=True)
class Aspect:
    """One thing about a verdict whose changes are logged (its expected state, its effective
    routing): how to read its value, why it has it, and what it is computed from."""

    name: str
    event: str  # the log line's event text
    value: Callable[[EntryVerdict], str]
    # Why it has the new value, for the line (None: nothing to add).
    reason: Callable[[EntryVerdict], str | None]
    # What the value is computed from: while it is the same object, so is the value.
    inputs: Callable[[EntryVerdict], object]


def routing_summary(verdict: EntryVerdict) -> str:
    """Per data plane, the share of Ready nodes whose traffic stays local ("none": no routing)."""
    parts = [
        f"{plane}: {round((view.local_ratio or 0.0) * 100)}% of nodes local"
        for plane, view in verdict.routing.items()
        if view.applies
    ]
    return "; ".join(parts) or "none"


def routing_cause(verdict: EntryVerdict) -> str | None:
    """The cause the first data plane names for a zone that does not stay local."""
    for view in verdict.routing.values():
        for zone_routing in view.by_zone.values():
            if not zone_routing.routing.stays_local:
                return str(zone_routing.cause)
    return None


ASPECTS: tuple[Aspect, ...] = (
    Aspect(
        "expected_state",
        "expected state changed",
        lambda verdict: str(verdict.expected_state),
        lambda verdict: str(verdict.reason) if verdict.reason is not None else None,
        lambda verdict: verdict.expected_state,
    ),
    Aspect(
        "effective_routing",
        "effective routing changed",
        routing_summary,
        routing_cause,
        lambda verdict: verdict.routing,
    ),
)

_Slot = tuple[EntryKey, str]


class TransitionLog:
    """Remembers each verdict's aspects and logs their changes, rate-limited per Service."""

    def __init__(
        self,
        *,
        window: float = DEFAULT_WINDOW,
        step_lines: int = DEFAULT_STEP_LINES,
        clock: Callable[[], float] | None = None,
        aspects: tuple[Aspect, ...] = ASPECTS,
    ) -> None:
        self._window = window
        # Looked up now, not at import, so a frozen clock in tests applies.
        self._clock = clock or time.monotonic
        self._aspects = aspects
        self._current: dict[_Slot, str] = {}
        self._logged: dict[_Slot, str] = {}  # the value the last line ended on
        self._last_line: dict[_Slot, float] = {}
        self._held: dict[_Slot, tuple[Aspect, EntryVerdict, int]] = {}
        self._step_lines = step_lines
        self._lines_this_step = 0
        # (event, from, to) -> Services past this step's line budget.
        self._overflow: Counter[tuple[str, str, str]] = Counter()

    def observe(self, verdict: EntryVerdict, last: EntryVerdict | None = None) -> None:
        """A new verdict; the first one of a Service is its starting point, not a change.

        `last`: the entry's verdict observed last, when known. An aspect whose inputs
        are the same objects in both is unchanged and not computed again (a node change
        re-judges every Service and keeps its routing).
        """
        key = verdict.key
        for aspect in self._aspects:
            slot = (key, aspect.name)
            if (
                last is not None
                and aspect.inputs(last) is aspect.inputs(verdict)
                and slot in self._current
            ):
                continue
            value = aspect.value(verdict)
            previous = self._current.get(slot)
            self._current[slot] = value
            if previous is None or previous == value:
                continue
            self._logged.setdefault(slot, previous)
            if self._clock() - self._last_line.get(slot, -math.inf) >= self._window:
                _aspect, _verdict, held = self._held.pop(slot, (aspect, verdict, 0))
                self._line(slot, aspect, verdict, held_back=held)
            else:
                _aspect, _verdict, held = self._held.get(slot, (aspect, verdict, 0))
                self._held[slot] = (aspect, verdict, held + 1)

    def flush(self) -> None:
        """Log where held-back Services ended up, once their window has passed."""
        now = self._clock()
        for slot in [s for s in self._held if now - self._last_line[s] >= self._window]:
            aspect, verdict, held = self._held.pop(slot)
            self._line(slot, aspect, verdict, held_back=held)

    def end_step(self) -> None:
        """After an evaluation step: one line for the changes beyond its budget."""
        for (event, before, after), count in sorted(self._overflow.items()):
            _logger().info(event, services=count, **{"from": before, "to": after}, more=True)
        self._overflow.clear()
        self._lines_this_step = 0

    def forget(self, keys: Iterable[EntryKey]) -> None:
        """Verdicts that no longer exist (Service deleted, address type gone)."""
        # Slot by slot, not a scan of every store: the evaluator calls this for each
        # re-evaluated Service, so a scan made a node change quadratic in Services.
        stores = (self._current, self._logged, self._last_line, self._held)
        for key in keys:
            for aspect in self._aspects:
                slot = (key, aspect.name)
                for store in stores:
                    store.pop(slot, None)

    def _line(self, slot: _Slot, aspect: Aspect, verdict: EntryVerdict, *, held_back: int) -> None:
        to = aspect.value(verdict)
        fields: dict[str, Any] = {
            "namespace": verdict.service.namespace,
            "service": verdict.service.name,
            "address_type": verdict.address_type,
            "from": self._logged.get(slot, to),
            "to": to,
            "reason": aspect.reason(verdict),
            "ready_endpoints": verdict.ready_endpoints,
        }
        if held_back:
            # Changes between the last line and this one, not logged on their own.
            fields["changes_not_logged"] = held_back
        if self._lines_this_step < self._step_lines:
            _logger().info(aspect.event, **fields)
            self._lines_this_step += 1
        else:
            self._overflow[(aspect.event, fields["from"], to)] += 1
        self._logged[slot] = to
        self._last_line[slot] = self._clock()
