"""Turns store changes into a new immutable ClusterResult, re-evaluating only what changed.

A Service or EndpointSlice change re-evaluates that Service; a Node change recomputes
cluster capacity and re-evaluates every Service only when capacity or the set of Ready
nodes actually moved (node heartbeats do not). The what-if forecasts (endpoint margin and
zones whose loss ends an entry's hints) follow the same rule: one Feasibility memo and one
set of zone-loss views per published node view, rebuilt only when nodes move, and each
re-evaluated Service's forecasts computed from them (exporter.pipeline.incremental decides
what a step reuses). The collector reads `state`, one reference swapped atomically, so a
scrape never sees a half-applied update.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TypeVar

import immutables

from exporter.engine import (
    DEFAULT_DATAPLANES,
    DataPlane,
    EndpointSlice,
    EntryVerdict,
    ExpectedState,
    Service,
)
from exporter.engine.context import context_of
from exporter.engine.evaluate import EntryInputs, evaluate_entry
from exporter.engine.problems import problems_of
from exporter.engine.profile import ASSUMED, Profile
from exporter.engine.whatif.forecast import EntryForecast, service_forecasts
from exporter.pipeline.incremental import (
    Moved,
    NodeView,
    PreparedInputs,
    next_view,
    rejudged_service,
)
from exporter.pipeline.transitions import TransitionLog
from exporter.state.result import ClusterResult, ServiceResult
from exporter.state.store import Changes, ClusterStore
from exporter.vocabulary import ControllerEvent, EntryKey, EventKey, ServiceKey

_FLIPPING_STATES = (ExpectedState.ENABLED, ExpectedState.DISABLED)


_K = TypeVar("_K")
_V = TypeVar("_V")


def _frozen(mapping: Mapping[_K, _V]) -> Mapping[_K, _V]:
    return MappingProxyType(dict(mapping))


class Evaluator:
    """Turns the store's changes into the next ClusterResult, re-judging only the Services a
    change touched, and keeps what spans steps (flips, events, the change log)."""

    def __init__(  # noqa: PLR0913 - keyword settings of the run, one each
        self,
        store: ClusterStore,
        *,
        clock: Callable[[], float] | None = None,
        observe: Callable[[float], None] | None = None,
        dataplanes: Sequence[DataPlane] = DEFAULT_DATAPLANES,
        profile: Profile = ASSUMED,
        one_shot: bool = False,
        forecasts: bool = True,
        retain_inputs: bool | None = None,
        nodes_known: bool = True,
    ) -> None:
        """`one_shot`: a command's steps (exporter.run.oneshot): no flips or change log, and
        no prepared inputs kept for a next step unless `retain_inputs` (what-if's second
        step, after the scenario's writes, reuses them). `forecasts`: False when no reader
        of the result shows them (`evaluate`, `what-if`). `nodes_known`: False only for a
        one-shot input without Nodes; the problems are judged knowing it."""
        self._store = store
        self._nodes_known = nodes_known
        self._one_shot = one_shot
        self._forecasts = forecasts
        # behaviour §12: what every verdict is computed under, and the one to switch to
        # (set from the thread that reads the API server's /version; read at each step).
        self._profile = profile
        self._next_profile = profile
        # Each verdict carries these data planes' routing (behaviour §10).
        self._dataplanes = tuple(dataplanes)
        # Looked up now, not at import, so a frozen clock in tests applies.
        self._clock = clock or time.time
        self._observe = observe or (lambda _seconds: None)
        self._inputs: dict[ServiceKey, tuple[Service | None, tuple[EndpointSlice, ...]]] = {}
        # What each Service's verdicts read from its Service and slices alone, for the
        # objects it was computed from: a change of the Ready nodes reuses it.
        self._prepared = PreparedInputs(
            retain=not one_shot if retain_inputs is None else retain_inputs
        )
        # Persistent: publishing shares every entry with the previous state, and a
        # one-Service change costs O(log n), not a copy of 10,000 entries.
        self._results: immutables.Map[ServiceKey, ServiceResult] = immutables.Map()
        self._last_state: dict[EntryKey, ExpectedState] = {}
        self._flips: dict[EntryKey, int] = {}
        # Flips are counted against states served as ready only: one computed before (from
        # a list that was not whole: 0 Nodes, every Service refused) was never a verdict
        # anyone saw, and a change from it is no flip of the Service (issue 30, 6).
        self._counting = True
        self._event_counts: dict[str, int] = {}
        self._event_totals: dict[str, int] = {}
        self._last_event: dict[EventKey, float] = {}
        # Event figures changed since last published: only then are they copied again.
        self._events_dirty = False
        self._state = state = ClusterResult(nodes_known=nodes_known)
        # The published node view: its context's memos (judgements, kube-proxy routings,
        # cross-zone shares) are shared by every Service's evaluation.
        self._view = NodeView(
            context_of(
                state.capacity,
                state.nodes,
                clients=state.clients,
                dataplanes=self._dataplanes,
                profile=profile,
            ),
            state.feasibility,
            state.zone_loss_views,
        )
        self._listeners: list[Callable[[ClusterResult], None]] = []
        # One log line when a Service's verdict changes, rate-limited per Service.
        self.transitions = TransitionLog()

    @property
    def state(self) -> ClusterResult:
        return self._state

    def count_flips_once_ready(self) -> None:
        """No flip is counted until `published_as_ready` (the live exporter, before /readyz)."""
        self._counting = False

    def published_as_ready(self) -> None:
        """The state now published is served as ready: flips are counted from it on."""
        self._counting = True

    @property
    def profile(self) -> Profile:
        return self._next_profile

    def set_profile(self, profile: Profile) -> None:
        """Evaluate under `profile` from the next step on (every Service, if it differs)."""
        self._next_profile = profile

    def add_listener(self, listener: Callable[[ClusterResult], None]) -> None:
        """Called with each newly published state, in the evaluator's thread."""
        self._listeners.append(listener)

    def step(self) -> ClusterResult:
        """Apply whatever changed in the store and publish the new state."""
        started = time.perf_counter()
        # Held-back lines of flapping Services are due with time, not only with changes.
        self.transitions.flush()
        changes = self._store.take_changes()
        profile_changed = self._next_profile != self._profile
        if changes.empty and not profile_changed and self._state.generation > 0:
            self.transitions.end_step()
            return self._state
        self._apply(changes)
        self.transitions.end_step()
        self._observe(time.perf_counter() - started)
        for listener in self._listeners:
            listener(self._state)
        return self._state

    # -- internals ---------------------------------------------------------------------

    def _apply(self, changes: Changes) -> None:
        previous = self._state
        dirty = set(changes.services)
        profile_changed = self._next_profile != self._profile
        if profile_changed:
            # The mechanism, config issues, notices and kube-proxy's routing of every Service
            # depend on the profile: nothing prepared under the old one is kept.
            self._profile = self._next_profile
            self._prepared.clear()
            dirty |= self._inputs.keys()
        view, moved = next_view(self._view, changes.nodes, self._profile)
        self._view = view
        # Only CPU shares moved: the other Services are re-judged from their verdicts.
        rejudge: set[ServiceKey] = set()
        if moved is Moved.SHARES:
            rejudge = self._inputs.keys() - dirty
        elif moved is Moved.NODES:
            dirty |= self._inputs.keys()
        self._inputs.update(changes.services)
        changed = set()
        results = self._results.mutate()
        # Families read the Ready nodes too: a result is kept only where they are the same.
        keep_unchanged = view.context.nodes is previous.nodes
        for key in dirty | rejudge:
            before = results.get(key)
            after = self._reevaluate(
                key, view, rejudge=key in rejudge, keep_unchanged=keep_unchanged
            )
            if after is None:
                if before is not None:
                    del results[key]
                    changed.add(key)
            elif after is not before:
                results[key] = after
                changed.add(key)
        self._results = results.finish()
        if changes.events_changed:
            self._count_events(self._store.events())
        last_event, event_totals = previous.last_event, previous.event_totals
        if self._events_dirty:
            last_event, event_totals = _frozen(self._last_event), _frozen(self._event_totals)
            self._events_dirty = False
        self._state = ClusterResult(
            capacity=view.context.capacity,
            nodes=view.context.nodes,
            services=self._results,
            last_event=last_event,
            event_totals=event_totals,
            evaluated_at=self._clock(),
            generation=previous.generation + 1,
            feasibility=view.feasibility,
            zone_loss_views=view.zone_loss_views,
            zone_loss_skipped=view.zone_loss_skipped,
            clients=view.context.clients,
            changed=frozenset(changed),
            profile=self._profile,
            nodes_known=self._nodes_known,
        )

    def _reevaluate(
        self, key: ServiceKey, view: NodeView, *, rejudge: bool, keep_unchanged: bool
    ) -> ServiceResult | None:
        """The Service's new result; None when it has none; the old one when nothing changed.

        `rejudge`: only CPU shares moved since its result, which is re-judged from its
        verdicts. `keep_unchanged`: the Ready nodes the families read are those of the old
        result, so an equal result may keep the old object (renderers keep its output).
        """
        service, slices = self._inputs.get(key, (None, ()))
        old = self._results.get(key)
        old_keys = {verdict.key for verdict in old.verdicts} if old is not None else set()
        if service is None or not slices:
            if service is None:
                self._inputs.pop(key, None)
                self._forget_events_of(key)
            self._prepared.forget(key)
            self._forget(old_keys)
            return None
        same_slices: tuple[EntryForecast, ...] = ()
        inputs: tuple[EntryInputs, ...] = ()
        context = view.context
        if rejudge and old is not None:
            entries = self._prepared.entries_of(key, old.verdicts)
            # The published state's clients are still those the old verdicts weighed.
            verdicts = rejudged_service(old.verdicts, entries, context, self._state.clients)
            previous_forecasts = old.forecasts
        else:
            inputs, kept = self._prepared.of(key, service, slices, self._profile)
            verdicts = tuple(evaluate_entry(entry, context) for entry in inputs)
            previous_forecasts = ()
            if kept and view.same_zone_loss and old is not None:
                same_slices = old.forecasts
        self._forget(old_keys - {verdict.key for verdict in verdicts})
        earlier = old.verdicts if rejudge and old is not None else (None,) * len(verdicts)
        for verdict, last in zip(verdicts, earlier, strict=True):
            self._track_flip(verdict, last)
        flips = tuple(self._flips[verdict.key] for verdict in verdicts)
        forecasts = (
            ()
            if not self._forecasts
            else service_forecasts(
                verdicts,
                slices,
                context.nodes,
                view.feasibility,
                view.zone_loss_views,
                previous_forecasts,
                same_slices=same_slices,
                routes=context.routes,
                inputs=inputs,
            )
        )
        if (
            keep_unchanged
            and old is not None
            and old.state_changes == flips
            and old.forecasts == forecasts
            and old.verdicts == verdicts
        ):
            return old
        # The one place problems are judged: every surface reads them from the result.
        problems = tuple(
            problems_of(verdict, nodes_known=self._nodes_known) for verdict in verdicts
        )
        return ServiceResult(verdicts, problems, flips, forecasts)

    def _track_flip(self, verdict: EntryVerdict, last: EntryVerdict | None) -> None:
        """`last`: the entry's verdict tracked last, when known (re-judged ones)."""
        key = verdict.key
        self._flips.setdefault(key, 0)
        if self._one_shot:
            return
        self.transitions.observe(verdict, last)
        state = verdict.expected_state
        if state not in _FLIPPING_STATES:
            return
        previous = self._last_state.get(key)
        if self._counting and previous is not None and previous is not state:
            self._flips[key] += 1
        self._last_state[key] = state

    def _forget(self, keys: set[EntryKey]) -> None:
        if not keys:
            return
        self.transitions.forget(keys)
        for key in keys:
            self._flips.pop(key, None)
            self._last_state.pop(key, None)

    def _forget_events_of(self, service: ServiceKey) -> None:
        for key in [key for key in self._last_event if key[:2] == service]:
            del self._last_event[key]
            self._events_dirty = True

    def _count_events(self, events: tuple[ControllerEvent, ...]) -> None:
        self._events_dirty = True
        seen: dict[str, int] = {}
        for event in events:
            before = self._event_counts.get(event.uid, 0)
            if event.count > before:
                self._event_totals[event.reason] = (
                    self._event_totals.get(event.reason, 0) + event.count - before
                )
            seen[event.uid] = max(before, event.count)
            if event.timestamp is not None:
                key = EventKey((event.namespace, event.service, event.reason))
                self._last_event[key] = max(self._last_event.get(key, 0.0), event.timestamp)
        self._event_counts = seen
