"""Which Services `explain` counts as problems (the problem table), and the exit status a CI
gate reads."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from exporter.engine import Endpoint, EndpointSlice, EntryVerdict, Node, Service
from exporter.engine.problems import ProblemId, problems_of
from exporter.report.overview import (
    EXIT_HINTS_MISSING,
    EXIT_HINTS_OK,
    EXIT_INCOMPLETE,
    NODE_KIND,
    exit_status,
)
from tests.results import result_of

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


def verdict_of(service: Service, replicas: int = 9, *, hinted: bool = True) -> EntryVerdict:
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
    (verdict,) = result_of(nodes, [service], slices).verdicts()
    return verdict


def test_enabled_and_followed_hints_pass_the_gate() -> None:
    verdict = verdict_of(AUTO)
    assert problems_of(verdict) == ()
    assert exit_status([problems_of(verdict)], {}) == EXIT_HINTS_OK


def test_refused_hints_fail_the_gate() -> None:
    verdict = verdict_of(AUTO, 8, hinted=False)
    assert problems_of(verdict) == (ProblemId.HINTS_OFF,)
    assert exit_status([problems_of(verdict)], {}) == EXIT_HINTS_MISSING
    assert exit_status([problems_of(verdict)], {}, {ProblemId.DRIFT}) == EXIT_HINTS_OK


def test_local_traffic_policy_is_a_config_issue_not_traffic_leaving_its_zone() -> None:
    """internalTrafficPolicy: Local: kube-proxy ignores the hints, yet every node keeps its
    traffic on its own endpoints, so only the setting is reported (as its alert does)."""
    verdict = verdict_of(replace(AUTO, internal_traffic_policy="Local"))
    assert problems_of(verdict) == (ProblemId.CONFIG_ISSUE,)
    assert exit_status([problems_of(verdict)], {}) == EXIT_HINTS_MISSING


def test_a_misspelled_request_asks_and_gets_nothing() -> None:
    """An annotation value the controller ignores is a request for hints that fails."""
    verdict = verdict_of(replace(AUTO, topology_mode_annotation="Enabled"), hinted=False)
    assert problems_of(verdict) == (ProblemId.CONFIG_ISSUE,)
    assert exit_status([problems_of(verdict)], {}) == EXIT_HINTS_MISSING


def test_no_mechanism_does_not_ask() -> None:
    verdict = verdict_of(replace(AUTO, topology_mode_annotation=None), hinted=False)
    assert problems_of(verdict) == ()
    assert exit_status([problems_of(verdict)], {}) == EXIT_HINTS_OK


def test_missing_nodes_make_auto_unknown_and_the_input_incomplete() -> None:
    """Without Nodes, auto is 'nodes-unknown' (not 'hints-off'), and the gate exits 2."""
    verdict = verdict_of(AUTO, 8, hinted=False)
    assert problems_of(verdict, nodes_known=False) == (ProblemId.NODES_UNKNOWN,)
    assert (
        exit_status([problems_of(verdict)], {NODE_KIND: "the snapshot holds no Nodes"})
        == EXIT_INCOMPLETE
    )
    assert exit_status([], {NODE_KIND: "the snapshot holds no Nodes"}) == EXIT_INCOMPLETE


def test_a_headless_service_s_hints_are_no_problem() -> None:
    """Headless (not proxied): no data plane reads its hints, so missing hints are neither
    off nor drift, and the gate passes; a config issue is still reported."""
    verdict = verdict_of(replace(AUTO, cluster_ip="None"), hinted=False)
    assert verdict.drift
    assert problems_of(verdict) == ()
    assert exit_status([problems_of(verdict)], {}) == EXIT_HINTS_OK
    both = replace(AUTO, cluster_ip="None", traffic_distribution="PreferClose")
    assert problems_of(verdict_of(both)) == (ProblemId.CONFIG_ISSUE,)
