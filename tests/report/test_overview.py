"""Which Services `explain` counts as problems, and the exit status a CI gate reads."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from exporter.engine import Endpoint, EndpointSlice, Node, Service, ServiceVerdict, evaluate
from exporter.report.overview import (
    EXIT_HINTS_MISSING,
    EXIT_HINTS_OK,
    EXIT_INCOMPLETE,
    NODES,
    Problem,
    exit_status,
    gets_hints,
    problems,
)

ZONES = ("zone-a", "zone-b", "zone-c")
AUTO = Service(
    namespace="shop",
    name="cart",
    deprecated_hints_annotation=None,
    topology_mode_annotation="Auto",
    traffic_distribution=None,
    internal_traffic_policy=None,
    type="ClusterIP",
    cluster_ip="10.96.0.10",
)


def verdict_of(service: Service, replicas: int = 9, *, hinted: bool = True) -> ServiceVerdict:
    nodes = [
        Node(f"node-{zone}", zone, Fraction(4), ready=True, control_plane=False) for zone in ZONES
    ]
    endpoints = tuple(
        Endpoint(
            f"10.1.0.{i + 1}",
            ready=True,
            zone=ZONES[i % 3],
            node_name=f"node-{ZONES[i % 3]}",
            zone_hints=(ZONES[i % 3],) if hinted else (),
        )
        for i in range(replicas)
    )
    slices = [EndpointSlice("shop", "cart-1", "cart", "IPv4", managed=True, endpoints=endpoints)]
    (verdict,) = evaluate(nodes, [service], slices).services
    return verdict


def test_enabled_and_followed_hints_pass_the_gate() -> None:
    verdict = verdict_of(AUTO)
    assert problems(verdict) == ()
    assert gets_hints(verdict)
    assert exit_status([verdict], {}) == EXIT_HINTS_OK


def test_refused_hints_fail_the_gate() -> None:
    verdict = verdict_of(AUTO, 8, hinted=False)
    assert problems(verdict) == (Problem.OFF,)
    assert exit_status([verdict], {}) == EXIT_HINTS_MISSING


def test_local_traffic_policy_makes_hints_ineffective() -> None:
    """internalTrafficPolicy: Local: hints are written but no kube-proxy follows them."""
    verdict = verdict_of(replace(AUTO, internal_traffic_policy="Local"))
    assert Problem.INEFFECTIVE in problems(verdict)
    assert Problem.CONFIG in problems(verdict)
    assert not gets_hints(verdict)


def test_a_misspelled_request_asks_and_gets_nothing() -> None:
    """An annotation value the controller ignores is a request for hints that fails."""
    verdict = verdict_of(replace(AUTO, topology_mode_annotation="Enabled"), hinted=False)
    assert problems(verdict) == (Problem.CONFIG,)
    assert not gets_hints(verdict)
    assert exit_status([verdict], {}) == EXIT_HINTS_MISSING


def test_no_mechanism_does_not_ask() -> None:
    verdict = verdict_of(replace(AUTO, topology_mode_annotation=None), hinted=False)
    assert problems(verdict) == ()
    assert exit_status([verdict], {}) == EXIT_HINTS_OK


def test_missing_nodes_make_auto_unknown_and_the_input_incomplete() -> None:
    """Without Nodes, auto is 'unknown' (not 'off'), and the gate exits 2 whatever it sees."""
    verdict = verdict_of(AUTO, 8, hinted=False)
    assert problems(verdict, nodes_known=False) == (Problem.UNKNOWN,)
    assert exit_status([verdict], {NODES: "the snapshot holds no Nodes"}) == EXIT_INCOMPLETE
    assert exit_status([], {NODES: "the snapshot holds no Nodes"}) == EXIT_INCOMPLETE


def test_a_headless_service_s_hints_are_no_problem() -> None:
    """Headless (not proxied): no data plane reads its hints, so missing hints are neither
    `ineffective` nor `drifting`, and the gate passes; a config issue is still reported."""
    verdict = verdict_of(replace(AUTO, cluster_ip="None"), hinted=False)
    assert verdict.drift
    assert problems(verdict) == ()
    assert gets_hints(verdict)
    assert exit_status([verdict], {}) == EXIT_HINTS_OK
    both = replace(AUTO, cluster_ip="None", traffic_distribution="PreferClose")
    assert problems(verdict_of(both)) == (Problem.CONFIG,)
