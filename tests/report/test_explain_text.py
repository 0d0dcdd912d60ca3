"""`explain`'s wording: singular and plural, suggestions that are true, zones named, widths kept."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from exporter.engine import Endpoint, EndpointSlice, Node, Service
from exporter.report.explain import WRAP_WIDTH, ExplainOptions, explain_text
from exporter.run.oneshot import evaluate_snapshot
from exporter.sources.snapshot import load_snapshot
from exporter.state.result import ClusterResult
from tests.conftest import EXAMPLES_DIR
from tests.results import result_of

ZONES = ("zone-a", "zone-b", "zone-c")


def flat(text: str) -> str:
    return " ".join(text.split())


def node(name: str, zone: str | None) -> Node:
    return Node(name=name, zone=zone, allocatable_cpu=Fraction(4), ready=True, control_plane=False)


def three_zone_nodes() -> list[Node]:
    return [node(f"node-{zone}", zone) for zone in ZONES]


def service(
    name: str = "web",
    *,
    mode: str | None = "Auto",
    traffic_distribution: str | None = None,
) -> Service:
    return Service(
        namespace="default",
        name=name,
        deprecated_hints_annotation=None,
        topology_mode_annotation=mode,
        traffic_distribution=traffic_distribution,
        internal_traffic_policy=None,
        type="ClusterIP",
        cluster_ip="10.96.0.10",
    )


def endpoint(index: int, zone: str | None, hints: tuple[str, ...] = ()) -> Endpoint:
    return Endpoint(
        address=f"10.1.0.{index + 1}",
        ready=True,
        zone=zone,
        node_name=f"node-{zone}",
        zone_hints=hints,
    )


def slice_of(svc: Service, endpoints: list[Endpoint]) -> EndpointSlice:
    return EndpointSlice(
        namespace=svc.namespace,
        name=f"{svc.name}-x1",
        service_name=svc.name,
        address_type="IPv4",
        managed=True,
        endpoints=tuple(endpoints),
    )


def text_of(svc: Service, endpoints: list[Endpoint], nodes: list[Node] | None = None) -> str:
    evaluation = result_of(
        three_zone_nodes() if nodes is None else nodes, [svc], [slice_of(svc, endpoints)]
    )
    return explain_text(evaluation, evaluation.verdicts(), ExplainOptions())


def test_one_ready_endpoint_is_singular() -> None:
    """One endpoint is 'the one ready endpoint', '1 of 1 ready endpoint has', never 'endpoints'."""
    td = service(mode=None, traffic_distribution="PreferClose")
    text = flat(text_of(td, [endpoint(0, "zone-a", ("zone-a",))]))
    assert "the controller hints its one ready endpoint for its own zone" in text
    assert "100.0% (1 of 1 ready endpoint has a zone hint)" in text
    assert "1 ready endpoints" not in text
    refused = flat(text_of(service(), [endpoint(0, "zone-a")]))
    assert "refused: 1 ready endpoint for 3 zones: some zone would get none" in refused
    assert "1 ready endpoints" not in refused


@pytest.mark.parametrize(
    ("zones", "expected"),
    [
        ([*ZONES, *ZONES, *ZONES[:2], None], "1 of the 9 ready endpoints has no zone, so it"),
        (
            [*ZONES, *ZONES, ZONES[0], None, None],
            "2 of the 9 ready endpoints have no zone, so they",
        ),
        ([None, None, None], "all 3 ready endpoints have no zone, so they"),
    ],
)
def test_endpoints_without_zone_agree_in_number(zones: list[str | None], expected: str) -> None:
    """'1 of the N ready endpoints has no zone'; 'have' for two or more."""
    text = flat(text_of(service(), [endpoint(i, zone) for i, zone in enumerate(zones)]))
    assert expected in text


def test_hint_completeness_agrees_in_number() -> None:
    """'1 of 3 ready endpoints has a zone hint', '2 of 3 ... have'."""
    td = service(mode=None, traffic_distribution="PreferClose")
    for hinted, words in ((1, "1 of 3 ready endpoints has"), (2, "2 of 3 ready endpoints have")):
        endpoints = [
            endpoint(i, zone, (zone,) if i < hinted else ()) for i, zone in enumerate(ZONES)
        ]
        assert f"({words} a zone hint)" in text_of(td, endpoints)


def test_zero_ready_endpoints_are_not_told_to_scale() -> None:
    """No ready endpoint: say so, and when hints would turn on; never 'scale to'."""
    text = flat(text_of(service(), []))
    assert "refused: no ready endpoint for 3 zones: every zone would get none" in text
    assert "Suggestion: no endpoint is ready, so there is nothing to route" in text
    assert "would enable hints at 3 ready endpoints" in text
    assert "scale to" not in text


def test_refused_auto_suggests_the_nearest_counts() -> None:
    """A refused count suggests the nearest feasible counts, plural."""
    text = flat(text_of(service(), [endpoint(i, ZONES[i % 3]) for i in range(8)]))
    assert "Suggestion: scale to 7 or 9 ready endpoints to enable hints" in text


def test_shadowing_annotation_suggests_removing_it() -> None:
    """When an annotation hides trafficDistribution, the fix is to remove it, not to scale."""
    shadowed = service(traffic_distribution="PreferClose")
    text = flat(text_of(shadowed, [endpoint(i, ZONES[i % 3]) for i in range(4)]))
    assert "disabled (" in text
    assert (
        "Suggestion: remove the annotation so that spec.trafficDistribution=PreferClose applies"
        in text
    )
    assert "kubectl annotate service -n default web service.kubernetes.io/topology-mode-" in text
    assert "scale to" not in text


def test_annotation_example_suggests_removing_the_annotation() -> None:
    """The bundled example of the shadowing annotation gets the same suggestion."""
    snapshot = load_snapshot(str(EXAMPLES_DIR / "annotation-overrides-field.json"))
    evaluation = evaluate_snapshot(snapshot)
    text = flat(explain_text(evaluation, evaluation.verdicts(), ExplainOptions()))
    assert "Suggestion: remove the annotation" in text


def test_drift_names_the_zone_out_of_range() -> None:
    """A zone hinted outside its MIN..MAX is named with its count and its range."""
    # 9 endpoints, 3 per zone, but zone-a's three hinted for zone-b: a 0, b 6, c 3.
    endpoints = [
        endpoint(i, ZONES[i % 3], ("zone-b",) if ZONES[i % 3] == "zone-a" else (ZONES[i % 3],))
        for i in range(9)
    ]
    text = flat(text_of(service(), endpoints))
    assert "Drift: zone-a: 0 hinted, outside its MIN..MAX range 3..3" in text
    assert "zone-b: 6 hinted, outside its MIN..MAX range 3..3" in text
    assert "zone-c: 3 hinted" not in text


def test_drift_names_the_zones_of_unexpected_hints() -> None:
    """Hints on a refused Service are named with their count and zones."""
    endpoints = [endpoint(i, ZONES[i % 3], (ZONES[i % 3],)) for i in range(8)]
    text = flat(text_of(service(), endpoints))
    assert (
        "8 ready endpoints carry zone hints for zone-a, zone-b, zone-c that the controller "
        "should have removed" in text
    )


def long_named(evaluation_names: int) -> ClusterResult:
    """Long zone, node and Service names, every mechanism, refused and enabled, with drift."""
    zones = [f"europe-west-{index}-a-long-zone-name-for-testing" for index in range(3)]
    nodes = [node(f"gke-production-cluster-pool-{i}-{zone}", zone) for i, zone in enumerate(zones)]
    nodes.append(node("gke-production-cluster-pool-without-any-zone-label-at-all", None))
    services, slices = [], []
    for index in range(evaluation_names):
        svc = replace(
            service(f"a-service-with-a-long-name-{index}", traffic_distribution="PreferSameNode"),
            namespace="a-namespace-with-a-fairly-long-name",
        )
        services.append(svc)
        slices.append(slice_of(svc, [endpoint(i, zones[i % 3], (zones[0],)) for i in range(5)]))
    return result_of(nodes, services, slices)


def test_no_line_runs_past_the_wrap_width() -> None:
    """Every line of every example, and of a cluster of long names, fits the wrap width."""
    evaluations = [
        evaluate_snapshot(load_snapshot(str(path))) for path in sorted(EXAMPLES_DIR.glob("*.json"))
    ]
    evaluations.append(long_named(2))
    for evaluation in evaluations:
        text = explain_text(evaluation, evaluation.verdicts(), ExplainOptions())
        long_lines = [line for line in text.splitlines() if len(line) > WRAP_WIDTH]
        # A title and a table row cannot wrap: only they may be longer...
        long_lines = [
            line
            for line in long_lines
            # ... and a command, which must copy whole.
            if not line.startswith(("Service ", "    europe-", "    ZONE"))
            and not line.lstrip().startswith("kubectl ")
        ]
        assert long_lines == []
