"""The one result type: what an evaluator step publishes and every surface reads.

The live exporter publishes one per step (watches -> store -> evaluator); `explain` and
`evaluate` run the same pipeline once over a snapshot or a LIST (exporter.run.oneshot). Per
entry it holds the verdict (with its routing per data plane and its cross-zone shares), its
forecasts (endpoint margin, zones whose loss ends its hints), its flips and its problems:
the problem table's judgement of the verdict (exporter.engine.problems), made once by the step
that built the result. Every surface (`explain`, `evaluate`, the status page, `/api/v1`) reads
those problems and the input's completeness (`nodes_known`) from here, never judging again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import immutables

from exporter.engine import ClusterCapacity, EntryVerdict, ReadyNodes, Service
from exporter.engine.crosszone import NO_CLIENTS, Clients
from exporter.engine.problems import ProblemId
from exporter.engine.profile import ASSUMED, Profile
from exporter.engine.whatif.feasibility import Feasibility
from exporter.engine.whatif.forecast import NO_FORECAST, EntryForecast, services_losing_hints
from exporter.engine.whatif.zoneloss import ZoneLossView
from exporter.vocabulary import EventKey, ServiceKey


@dataclass(frozen=True, slots=True)
class ServiceResult:
    """One Service's entries (one per address type): verdicts, problems, flips and forecasts."""

    verdicts: tuple[EntryVerdict, ...]
    # The problem table's ids per entry (exporter.engine.problems), in its order, aligned
    # with `verdicts`: judged once by the evaluator step that made the verdicts.
    problems: tuple[tuple[ProblemId, ...], ...]
    # Flips between enabled and disabled seen since start, aligned with `verdicts`.
    state_changes: tuple[int, ...]
    # Endpoint margin and zones whose loss ends the hints, aligned with `verdicts`.
    forecasts: tuple[EntryForecast, ...] = ()

    @property
    def service(self) -> Service:
        return self.verdicts[0].service

    def problems_of_entry(self, verdict: EntryVerdict) -> tuple[ProblemId, ...]:
        """The problems of the entry of `verdict`'s address type."""
        for mine, problems in zip(self.verdicts, self.problems, strict=True):
            if mine.address_type == verdict.address_type:
                return problems
        raise KeyError(verdict.key)

    def entries(self) -> Iterator[tuple[EntryVerdict, EntryForecast]]:
        """(verdict, forecast) per address type; NO_FORECAST where none was made."""
        forecasts = self.forecasts or (NO_FORECAST,) * len(self.verdicts)
        return zip(self.verdicts, forecasts, strict=True)


@dataclass(frozen=True, slots=True)
class ClusterResult:
    """The result: everything `explain`, `evaluate`, the metrics, the status page and
    `/api/v1` render, computed together by one evaluator step (exporter.pipeline.evaluator),
    whether the objects came from watches or from a snapshot."""

    capacity: ClusterCapacity = field(default_factory=lambda: ClusterCapacity(sufficient=False))
    nodes: ReadyNodes = field(
        default_factory=lambda: ReadyNodes(MappingProxyType({}), MappingProxyType({}))
    )
    # Services that have EndpointSlices (an immutables.Map in published states: each
    # state shares unchanged entries with the previous one). A result is replaced only
    # when its Service's verdicts, flips, forecasts or Ready nodes changed, so its
    # identity tells renderers whether cached output still holds.
    services: Mapping[ServiceKey, ServiceResult] = field(default_factory=immutables.Map)
    # (namespace, service, reason) -> unix time of the latest controller event.
    last_event: Mapping[EventKey, float] = field(default_factory=lambda: MappingProxyType({}))
    # reason -> occurrences seen since start.
    event_totals: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    evaluated_at: float | None = None
    generation: int = 0
    # The node view's feasibility memo and the cluster without each zone (zone order):
    # replaced only when capacity, Ready nodes or zone membership change.
    feasibility: Feasibility = field(
        default_factory=lambda: Feasibility(ClusterCapacity(sufficient=False))
    )
    zone_loss_views: tuple[ZoneLossView, ...] = ()
    # The zone labels of the cluster's Nodes when more than MAX_ZONE_LOSS_ZONES: no
    # zone-loss forecast is made then (and zone_loss_views is empty); 0 otherwise.
    zone_loss_skipped: int = 0
    # behaviour §13's clients (Ready nodes with a zone and CPU) the cross-zone shares weigh.
    clients: Clients = NO_CLIENTS
    # Services whose result was added, replaced or removed since generation - 1 (a
    # renderer that saw that generation updates only these); None when unknown.
    changed: frozenset[ServiceKey] | None = None
    # behaviour §12: the Kubernetes versions and gates the verdicts were computed under.
    profile: Profile = ASSUMED
    # Input completeness: False only for a one-shot input without Nodes (exporter.run.oneshot),
    # where what needs them is unknown, not wrong (the problem nodes-unknown). The live
    # exporter always watches Nodes.
    nodes_known: bool = True

    def problems(self, verdict: EntryVerdict) -> tuple[ProblemId, ...]:
        """The problems of `verdict`'s entry, as the step that built this result judged them."""
        return self.services[verdict.service.key].problems_of_entry(verdict)

    def verdicts(self) -> tuple[EntryVerdict, ...]:
        """Every entry's verdict, by namespace, name and address type."""
        return tuple(
            verdict for key in sorted(self.services) for verdict in self.services[key].verdicts
        )

    def zone_loss(self) -> dict[str, int]:
        """Per zone, the Services whose hints losing it would take away (what-if, §11)."""
        forecasts = (
            (key, forecast)
            for key, result in self.services.items()
            for _, forecast in result.entries()
        )
        return services_losing_hints(forecasts, self.zone_loss_views)
