"""behaviour §2: the controller's node view (exclusions, problems, exact CPU sums, ratios)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest

from exporter.engine import MissingInfo, NodeProblem, cluster_capacity
from exporter.sources.decode import cpu_cores, decode_node
from tests.engine.builders import node, zone_nodes

ZONE = MissingInfo.ZONE
CPU = MissingInfo.CPU


@pytest.mark.parametrize(
    ("quantity", "cores"),
    [
        pytest.param("3920m", Fraction(392, 100), id="millicores"),
        pytest.param("4", Fraction(4), id="integer"),
        pytest.param("1.5", Fraction(3, 2), id="decimal"),
        pytest.param("0", Fraction(0), id="zero"),
        pytest.param("100m", Fraction(1, 10), id="100m"),
        pytest.param("0.0005", Fraction(1, 2000), id="sub-millicore"),
        pytest.param("2k", Fraction(2000), id="decimal-si-suffix"),
        # Binary suffixes are valid Kubernetes quantities, so the parser accepts them for CPU.
        pytest.param("2Ki", Fraction(2048), id="binary-si-suffix-accepted"),
        pytest.param("1e3", Fraction(1000), id="exponent"),
        pytest.param(4, Fraction(4), id="json-number"),
        pytest.param(2.5, Fraction(5, 2), id="json-float"),
    ],
)
def test_cpu_quantity_parsing(quantity: str | float, cores: Fraction) -> None:
    """Allocatable CPU quantities parse to exact cores with the real quantity parser."""
    assert cpu_cores(quantity) == cores


@pytest.mark.parametrize("quantity", ["abc", "", "1.2.3", "0x10", "--1", "NaN", "4 cores"])
def test_invalid_cpu_quantity_is_an_error(quantity: str) -> None:
    """A CPU value that is not a Kubernetes quantity raises ValueError (an invalid Node)."""
    with pytest.raises(ValueError, match=r"\S"):
        cpu_cores(quantity)


def _raw_node(labels: dict[str, str], ready: str | None = "True", cpu: Any = "4") -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    allocatable = {} if cpu is None else {"cpu": cpu}
    return {
        "kind": "Node",
        "metadata": {"name": "n", "labels": labels},
        "status": {"allocatable": allocatable, "conditions": conditions},
    }


@pytest.mark.parametrize(
    "label", ["node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"]
)
@pytest.mark.parametrize("value", ["", "true", "false"])
def test_control_plane_labels_any_value(label: str, value: str) -> None:
    """Either control-plane label marks the node as control plane, whatever its value."""
    decoded = decode_node(_raw_node({label: value}))
    assert decoded.control_plane


@pytest.mark.parametrize(
    ("ready", "expected"),
    [
        pytest.param("True", True, id="True"),
        pytest.param("False", False, id="False"),
        pytest.param("Unknown", False, id="Unknown"),
        pytest.param(None, False, id="no-condition"),
    ],
)
def test_node_ready_only_when_condition_true(*, ready: str | None, expected: bool) -> None:
    """A node is Ready only when its Ready condition's status is exactly True."""
    assert decode_node(_raw_node({}, ready=ready)).ready is expected


def test_control_plane_nodes_are_skipped() -> None:
    """Control-plane nodes add no CPU and are never reported, even without zone or CPU."""
    nodes = [
        *zone_nodes({"a": ["4"], "b": ["4"]}),
        node("cp-1", "a", "64", control_plane=True),
        node("cp-2", None, None, control_plane=True),
    ]
    result = cluster_capacity(nodes)
    assert result.sufficient
    assert result.zone_ratios == {"a": 0.5, "b": 0.5}
    assert result.problems == ()


def test_not_ready_nodes_are_skipped() -> None:
    """Nodes that are not Ready add no CPU and are never reported."""
    nodes = [
        *zone_nodes({"a": ["4"], "b": ["4"]}),
        node("down-1", "a", "64", ready=False),
        node("down-2", "", "0", ready=False),
    ]
    result = cluster_capacity(nodes)
    assert result.zone_ratios == {"a": 0.5, "b": 0.5}
    assert result.problems == ()


def test_every_offending_node_is_listed() -> None:
    """Every Ready worker node lacking zone or CPU is reported, not just the first."""
    nodes = [
        node("n1-no-zone", None, "4"),
        node("n2-zero-cpu", "a", "0"),
        node("n3-nothing", None, None),
        node("n4-empty-zone", "", "4"),
        node("n5-no-cpu", "b", None),
        node("ok", "a", "4"),
        node("ok2", "b", "4"),
    ]
    result = cluster_capacity(nodes)
    assert not result.sufficient
    assert set(result.problems) == {
        NodeProblem("n1-no-zone", ZONE),
        NodeProblem("n2-zero-cpu", CPU),
        NodeProblem("n3-nothing", ZONE),
        NodeProblem("n3-nothing", CPU),
        NodeProblem("n4-empty-zone", ZONE),
        NodeProblem("n5-no-cpu", CPU),
    }
    assert result.insufficient_nodes == (
        "n1-no-zone",
        "n2-zero-cpu",
        "n3-nothing",
        "n4-empty-zone",
        "n5-no-cpu",
    )
    assert dict(result.zone_ratios) == {}


def test_one_bad_node_makes_whole_cluster_insufficient() -> None:
    """A single node without a zone drops every ratio of an otherwise healthy cluster."""
    nodes = [*zone_nodes({"a": ["4"] * 5, "b": ["4"] * 5}), node("stray", None, "4")]
    result = cluster_capacity(nodes)
    assert not result.sufficient
    assert dict(result.zone_ratios) == {}
    assert result.insufficient_nodes == ("stray",)


@pytest.mark.parametrize(
    "nodes",
    [
        pytest.param(zone_nodes({"a": ["4", "8"]}), id="single-zone"),
        pytest.param([], id="no-nodes"),
        pytest.param(
            [node("w", "a", "4"), node("cp", "b", "4", control_plane=True)],
            id="second-zone-only-control-plane",
        ),
        pytest.param(
            [node("w", "a", "4"), node("down", "b", "4", ready=False)],
            id="second-zone-not-ready",
        ),
    ],
)
def test_fewer_than_two_zones_is_insufficient_without_offenders(nodes: list[Any]) -> None:
    """Fewer than two zones with CPU is insufficient node info, with no node listed."""
    result = cluster_capacity(nodes)
    assert not result.sufficient
    assert result.problems == ()
    assert dict(result.zone_ratios) == {}


def test_ratios_are_zone_millicores_over_total() -> None:
    """Each ratio is the zone's millicores over the total's, as float64."""
    result = cluster_capacity(zone_nodes({"a": ["3920m", "4"], "b": ["1.5"], "c": ["100m"]}))
    assert dict(result.zone_millicores) == {"a": 7920, "b": 1500, "c": 100}
    assert dict(result.zone_ratios) == {
        "a": 7920.0 / 9520.0,
        "b": 1500.0 / 9520.0,
        "c": 100.0 / 9520.0,
    }


def test_zone_sums_are_exact_then_rounded_once() -> None:
    """Sub-millicore CPU is summed exactly per zone and rounded up once, not per node."""
    per_node = "333.4m"
    result = cluster_capacity(zone_nodes({"a": [per_node] * 3, "b": ["1"]}))
    exact_zone = math.ceil(cpu_cores(per_node) * 3 * 1000)
    per_node_rounding = 3 * math.ceil(cpu_cores(per_node) * 1000)
    assert exact_zone != per_node_rounding
    assert result.zone_millicores["a"] == exact_zone
    total = math.ceil((cpu_cores(per_node) * 3 + 1) * 1000)
    assert result.zone_ratios["a"] == float(exact_zone) / float(total)
    assert result.zone_ratios["a"] != float(per_node_rounding) / float(per_node_rounding + 1000)


def test_total_is_rounded_separately_from_zones() -> None:
    """The total is its own exact sum rounded up, so two 0.5m zones have ratio 1.0 each."""
    result = cluster_capacity(zone_nodes({"a": ["0.0005"], "b": ["0.0005"]}))
    assert dict(result.zone_millicores) == {"a": 1, "b": 1}
    assert dict(result.zone_ratios) == {"a": 1.0, "b": 1.0}
