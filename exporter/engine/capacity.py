"""behaviour §2: the controller's view of cluster capacity, zone by zone."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType

from exporter.engine.model import Node

_EMPTY: Mapping[str, float] = MappingProxyType({})


class MissingInfo(StrEnum):
    """What a node lacks for the controller to count it: a zone label or allocatable CPU."""

    ZONE = "zone"
    CPU = "cpu"


@dataclass(frozen=True, slots=True)
class NodeProblem:
    """One Ready node the controller cannot count, and what it lacks."""

    node: str
    missing: MissingInfo


@dataclass(frozen=True, slots=True)
class ClusterCapacity:
    """The cluster as the controller's topology cache sees it: whether node info suffices, each
    zone's share of allocatable CPU, and every node that spoils it."""

    sufficient: bool
    # Empty whenever node info is insufficient: the controller drops its ratios then.
    zone_ratios: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    zone_millicores: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # Every offending node (the controller stops at the first; operators need them all).
    problems: tuple[NodeProblem, ...] = ()

    @property
    def insufficient_nodes(self) -> tuple[str, ...]:
        return tuple(sorted({problem.node for problem in self.problems}))


def counts_for_capacity(node: Node) -> bool:
    """The controller skips control-plane nodes and nodes that are not Ready."""
    return node.ready and not node.control_plane


def node_problems(node: Node) -> tuple[NodeProblem, ...]:
    problems = []
    if not node.zone:
        problems.append(NodeProblem(node.name, MissingInfo.ZONE))
    if not node.allocatable_cpu:
        problems.append(NodeProblem(node.name, MissingInfo.CPU))
    return tuple(problems)


def to_millicores(cores: Fraction) -> int:
    """Quantity.MilliValue(): millicores rounded up."""
    return math.ceil(cores * 1000)


def _exact_sums(numerators: Mapping[str, Mapping[int, int]]) -> dict[str, Fraction]:
    return {
        zone: sum(
            (Fraction(numerator, denominator) for denominator, numerator in by_denominator.items()),
            Fraction(0),
        )
        for zone, by_denominator in numerators.items()
    }


def cluster_capacity(nodes: Iterable[Node]) -> ClusterCapacity:
    # Exact sums, kept as integer numerators per denominator: nodes of one size share a
    # denominator, and adding Fractions node by node costs a gcd each (5,000 nodes).
    numerators: dict[str, dict[int, int]] = {}
    problems: list[NodeProblem] = []
    for node in nodes:
        if not counts_for_capacity(node):
            continue
        found = node_problems(node)
        if found:
            problems.extend(found)
            continue
        assert node.zone is not None  # noqa: S101 - node_problems guarantees it
        cpu = node.allocatable_cpu
        assert cpu is not None  # noqa: S101
        by_denominator = numerators.setdefault(node.zone, {})
        by_denominator[cpu.denominator] = by_denominator.get(cpu.denominator, 0) + cpu.numerator
    problems.sort(key=lambda problem: (problem.node, problem.missing))
    if problems:
        return ClusterCapacity(sufficient=False, problems=tuple(problems))
    cpu_by_zone = _exact_sums(numerators)
    total = sum(cpu_by_zone.values(), Fraction(0))
    if total == 0 or len(cpu_by_zone) < 2:
        return ClusterCapacity(sufficient=False)
    # Sum exactly, then round each sum (not each node) up to millicores, as upstream does.
    total_millicores = to_millicores(total)
    millicores = {zone: to_millicores(cpu) for zone, cpu in sorted(cpu_by_zone.items())}
    ratios = {zone: float(milli) / float(total_millicores) for zone, milli in millicores.items()}
    return ClusterCapacity(
        sufficient=True,
        zone_ratios=MappingProxyType(ratios),
        zone_millicores=MappingProxyType(millicores),
    )
