"""The `evaluate` JSON document of behaviour §8."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from exporter.engine import EntryVerdict
from exporter.engine.problems import ProblemId
from exporter.engine.profile import Component, Profile
from exporter.state.result import ClusterResult


def routing_fields(verdict: EntryVerdict) -> dict[str, Any]:
    """behaviour §10: `routing` and `local_routing_ratio`, both null where no routing applies."""
    views = verdict.routing
    if not views or not all(view.applies for view in views.values()):
        return {"routing": None, "local_routing_ratio": None}
    return {
        "routing": {
            str(dataplane): {
                zone: {str(routing): count for routing, count in counts.items()}
                for zone, counts in view.nodes.items()
            }
            for dataplane, view in views.items()
        },
        "local_routing_ratio": {
            str(dataplane): view.local_ratio for dataplane, view in views.items()
        },
    }


def cross_zone_field(verdict: EntryVerdict) -> dict[str, Any] | None:
    """behaviour §13: per data plane, null where no client has a share; null as a whole
    where no routing applies."""
    if not verdict.cross_zone:
        return None
    return {
        str(dataplane): None
        if figures is None
        else {
            "effective": figures.effective,
            "floor": figures.floor,
            "zones": {
                zone: {"effective": share.effective, "floor": share.floor}
                for zone, share in figures.zones.items()
            },
        }
        for dataplane, figures in verdict.cross_zone.items()
    }


def service_document(verdict: EntryVerdict, problems: Sequence[ProblemId]) -> dict[str, Any]:
    """One entry, with its problems as the result holds them (ClusterResult.problems)."""
    nearest = verdict.nearest_feasible
    return {
        "namespace": verdict.service.namespace,
        "name": verdict.service.name,
        "address_type": verdict.address_type,
        "mechanism": str(verdict.mechanism),
        "ready_endpoints": verdict.ready_endpoints,
        "expected_state": str(verdict.expected_state),
        "reason": str(verdict.reason) if verdict.reason is not None else None,
        "zones": {
            zone: {
                "minimum": zone_verdict.minimum,
                "maximum": zone_verdict.maximum,
                "desired": zone_verdict.desired,
                "hinted": zone_verdict.hinted,
                "load_factor": zone_verdict.load_factor,
                "endpoints": verdict.zone_endpoints.get(zone, 0),
                "cpu_ratio": zone_verdict.ratio,
            }
            for zone, zone_verdict in verdict.zones.items()
        },
        "hint_completeness": verdict.hint_completeness,
        "proxy_mode_by_zone": {zone: str(mode) for zone, mode in verdict.proxy.by_zone.items()},
        "proxy_same_node": list(verdict.proxy.same_node),
        "nearest_feasible_endpoints": (
            {"below": nearest.below, "above": nearest.above} if nearest is not None else None
        ),
        "config_issues": sorted(str(issue) for issue in verdict.config_issues),
        "drift": sorted(str(kind) for kind in verdict.drift),
        "notices": sorted(str(notice) for notice in verdict.notices),
        **routing_fields(verdict),
        "cross_zone": cross_zone_field(verdict),
        # The problem table's ids (exporter.engine.problems), as the result holds them.
        "problems": [str(problem) for problem in problems],
    }


def evaluation_document(result: ClusterResult) -> dict[str, Any]:
    return {
        "cluster": _cluster_document(result),
        "kubernetes": profile_document(result.profile),
        "services": [
            service_document(verdict, result.problems(verdict)) for verdict in result.verdicts()
        ],
    }


def _indented(value: object, depth: int) -> bytes:
    """`value` as msgspec formats it with indent=2, nested `depth` levels deep."""
    formatted = msgspec.json.format(msgspec.json.encode(value), indent=2)
    return formatted.replace(b"\n", b"\n" + b"  " * depth)


def formatted_evaluation_document(result: ClusterResult) -> Iterator[bytes]:
    """The evaluation document, indented, in pieces: byte for byte
    `msgspec.json.format(encode(evaluation_document(...)), indent=2)`, without ever holding
    the whole document (10,000 Services make hundreds of MB of dicts and their text)."""
    yield b'{\n  "cluster": ' + _indented(_cluster_document(result), 1)
    yield b',\n  "kubernetes": ' + _indented(profile_document(result.profile), 1)
    if not result.verdicts():
        yield b',\n  "services": []\n}'
        return
    yield b',\n  "services": ['
    separator = b"\n    "
    for verdict in result.verdicts():
        yield separator + _indented(service_document(verdict, result.problems(verdict)), 2)
        separator = b",\n    "
    yield b"\n  ]\n}"


def _cluster_document(result: ClusterResult) -> dict[str, Any]:
    capacity = result.capacity
    return {
        "sufficient_node_info": capacity.sufficient,
        "zone_cpu_ratio": dict(capacity.zone_ratios),
        "insufficient_nodes": list(capacity.insufficient_nodes),
        "node_problems": [
            {"node": problem.node, "missing": str(problem.missing)} for problem in capacity.problems
        ],
    }


def _component_document(component: Component) -> dict[str, Any]:
    return {
        "version": component.version,
        "source": str(component.source),
        "feature_gates": {str(gate): value for gate, value in component.gates.items()},
    }


def profile_document(profile: Profile) -> dict[str, Any]:
    """behaviour §12: the versions and gates the verdicts were computed under."""
    control_plane = profile.control_plane
    return {
        "version": control_plane.version,
        # Non-null only for an API server that emulates another version than its binary's.
        "binary_version": control_plane.binary_version,
        **_component_document(control_plane),
        "kube_proxy": _component_document(profile.kube_proxy),
    }
