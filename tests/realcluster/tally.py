"""Counts of what was checked against the real controller, per control plane.

Written as JSON lines to the file REAL_CLUSTER_REPORT names (nothing without it), so that a
run can say how many vectors, clusters, Services and entries met the controller, and how
many disagreed.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.realcluster.agreement import Agreement
from tests.realcluster.plans import ClusterPlan


@dataclass
class Tally:
    """What one kind of plan checked on one control plane (`plane`: "1.37", "1.34", ...)."""

    plane: str
    kind: str
    plans: int = 0
    vectors: set[str] = field(default_factory=set)
    services: int = 0
    entries: int = 0
    vector_entries: int = 0
    disagreements: list[str] = field(default_factory=list)
    settled_outside: list[str] = field(default_factory=list)
    verdicts: Counter[str] = field(default_factory=Counter)

    def add(self, plan: ClusterPlan, agreement: Agreement) -> None:
        self.plans += 1
        self.vectors.update(service.vector for service in plan.services if service.vector)
        self.services += agreement.services
        self.entries += agreement.entries
        self.vector_entries += agreement.vector_entries
        self.verdicts.update(agreement.verdicts)
        self.disagreements += [f"{plan.name}: {line}" for line in agreement.disagreements]
        self.settled_outside += [f"{plan.name}: {line}" for line in agreement.settled_outside]

    def write(self) -> None:
        target = os.environ.get("REAL_CLUSTER_REPORT")
        if not target or not self.plans:
            return
        line = {
            "plane": self.plane,
            "kind": self.kind,
            "plans": self.plans,
            "vectors": sorted(self.vectors),
            "services": self.services,
            "entries": self.entries,
            "vector_entries": self.vector_entries,
            "disagreements": self.disagreements,
            "settled_outside": self.settled_outside,
            "verdicts": dict(sorted(self.verdicts.items())),
        }
        with Path(target).open("a") as output:
            output.write(json.dumps(line) + "\n")
