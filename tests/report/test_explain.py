"""`explain`: its text through the real CLI, its renderer, and the docs that quote it."""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import shlex
import subprocess
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from exporter.cli import build_parser
from exporter.engine import (
    ConfigIssue,
    Endpoint,
    EndpointSlice,
    Node,
    Service,
)
from exporter.report.explain import ExplainOptions, explain_text
from exporter.report.overview import select
from exporter.state.result import ClusterResult
from tests.conftest import EXAMPLES_DIR, PROJECT_ROOT, exporter_command
from tests.conftest import run_cli as run
from tests.results import result_of

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CLI_DOC = PROJECT_ROOT / "docs" / "cli.md"
WALKTHROUGH = PROJECT_ROOT / "docs" / "walkthrough.md"
ZONES = ("zone-a", "zone-b", "zone-c")


def explain(example: str, *args: str) -> str:
    completed = run("explain", "--snapshot", str(EXAMPLES_DIR / f"{example}.json"), *args)
    # 1: some Service asking for hints lacks them (the examples tell such stories).
    assert completed.returncode in {0, 1}, completed.stderr
    return completed.stdout


def evaluate_document(example: str) -> dict[str, Any]:
    completed = run("evaluate", "--snapshot", str(EXAMPLES_DIR / f"{example}.json"))
    assert completed.returncode == 0, completed.stderr
    document: dict[str, Any] = json.loads(completed.stdout)
    return document


def flat(text: str) -> str:
    """Text with every run of whitespace made one space, so wrapped sentences compare whole."""
    return " ".join(text.split())


# Through the real CLI, on the examples


def test_refused_service_shows_verdict_reason_table_and_advisor() -> None:
    """A refused auto Service shows its reason, the failing sum, the zone rows and the advisor."""
    output = explain("eight-replicas-refused")
    (entry,) = evaluate_document("eight-replicas-refused")["services"]
    assert "Verdict:           disabled (MinAllocationExceedsOverloadThreshold)" in output
    assert "8 ready endpoints in 3 zones of 33% each need at least 3+3+3 = 9" in flat(output)
    header = "ZONE CPU SHARE ENDPOINTS HINTED MIN DESIRED MAX LOAD FACTOR"
    assert header in [flat(line) for line in output.splitlines()]
    rows = {
        line.split()[0]: line.split() for line in output.splitlines() if line.startswith("    eu")
    }
    assert set(rows) == set(entry["zones"])
    for zone, figures in entry["zones"].items():
        assert rows[zone][2:4] == [str(figures["endpoints"]), str(figures["hinted"])]
        assert rows[zone][4:] == ["-", "-", "-", "-"]
    assert "8 refused (now)" in output
    nearest = entry["nearest_feasible_endpoints"]
    assert f"scale to {nearest['below']} or {nearest['above']} ready endpoints" in output


def test_enabled_service_shows_allocation_and_proxy_modes() -> None:
    """An enabled auto Service shows MIN/DESIRED/MAX, PreferSameZone per zone, '(now)' enabled."""
    output = explain("healthy-three-zones", "shop/cart")
    entry = evaluate_document("healthy-three-zones")["services"][0]
    assert "Verdict:           enabled" in output
    for zone, figures in entry["zones"].items():
        row = next(line.split() for line in output.splitlines() if line.startswith(f"    {zone}"))
        assert row[4:7] == [
            str(figures["minimum"]),
            f"{figures['desired']:.2f}",
            str(figures["maximum"]),
        ]
        assert re.search(rf"{zone}\s+PreferSameZone\s+2 nodes", output)
    assert f"{entry['ready_endpoints']} enabled (now)" in output


def test_config_issue_is_shown_with_its_fix() -> None:
    """The shadowing annotation is named, with the field it hides and the engine's fix text."""
    output = explain("annotation-overrides-field")
    assert "spec.trafficDistribution=PreferClose is ignored" in flat(output)
    issue = ConfigIssue.ANNOTATION_SHADOWS_TRAFFIC_DISTRIBUTION
    assert f"{issue} fix: {flat(issue.fix)}" in flat(output)


def test_missing_zone_label_names_the_node_and_the_label_command() -> None:
    """An insufficient cluster lists the offending node and the kubectl label command to fix it."""
    output = explain("node-without-zone")
    assert "Node info:         insufficient" in output
    assert (
        "kubectl label node worker-manual-01 topology.kubernetes.io/zone=<zone> --overwrite"
        in output
    )
    assert output.count("disabled (InsufficientNodeInfo)") == 2


def test_partial_hints_and_thin_zone_are_flagged() -> None:
    """Partial hints say kube-proxy ignores them all; a thin zone's load factor is a warning."""
    assert "partial, so kube-proxy ignores every hint" in explain("partial-hints-ignored")
    thin = flat(explain("prefer-same-zone-thin-zone"))
    assert "Warnings: eu-west-1c: 1 endpoint takes all of the zone's traffic" in thin
    assert "load factor 1.67" in thin


def test_namespace_name_selects_one_service() -> None:
    """NAMESPACE/NAME explains that Service only, after the cluster header."""
    output = explain("healthy-three-zones", "shop/catalog")
    assert output.startswith("Cluster\n")
    assert "Service shop/catalog (IPv4)" in output
    assert "Service shop/cart" not in output


@pytest.mark.parametrize("service", ["shop/nope", "nope/cart", "cart", "shop/cart/x", "/cart"])
def test_unknown_or_malformed_service_exits_2_with_one_line(service: str) -> None:
    """A NAMESPACE/NAME that matches nothing, or is not one, exits 2 with one stderr line."""
    completed = run(
        "explain", "--snapshot", str(EXAMPLES_DIR / "healthy-three-zones.json"), service
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert len(completed.stderr.splitlines()) == 1
    assert "Traceback" not in completed.stderr


def test_json_output_is_the_evaluate_entries_of_the_service() -> None:
    """`--output json` prints exactly the evaluate entries of the selected Service."""
    document = evaluate_document("healthy-three-zones")
    expected = [entry for entry in document["services"] if entry["name"] == "catalog"]
    assert (
        json.loads(explain("healthy-three-zones", "shop/catalog", "--output", "json")) == expected
    )
    assert json.loads(explain("healthy-three-zones", "-o", "json")) == document["services"]


@pytest.mark.parametrize("color", [[], ["--color", "auto"], ["--color", "never"]])
def test_no_escape_codes_off_a_terminal(color: list[str]) -> None:
    """Piped output, or --color never, carries no escape code at all."""
    for example in ("healthy-three-zones", "node-without-zone", "partial-hints-ignored"):
        assert "\x1b" not in explain(example, *color)


def test_color_always_paints_verdicts() -> None:
    """--color always paints enabled green and refused red, and the text is unchanged otherwise."""
    painted = explain("healthy-three-zones", "--color", "always")
    assert "\x1b[32menabled\x1b[0m" in painted
    assert "\x1b[31mrefused\x1b[0m" in painted
    assert ANSI.sub("", painted) == explain("healthy-three-zones")


def test_color_auto_paints_on_a_terminal() -> None:
    """With the default --color auto, output to a terminal is coloured."""
    primary, secondary = pty.openpty()
    command = [*exporter_command(), "explain", "--snapshot"]
    with subprocess.Popen(
        [*command, str(EXAMPLES_DIR / "eight-replicas-refused.json")],
        stdout=secondary,
        stderr=subprocess.PIPE,
    ) as process:
        os.close(secondary)
        chunks = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=60) == 1  # the ledger's hints are refused
    os.close(primary)
    assert "\x1b[31mdisabled\x1b[0m" in b"".join(chunks).decode()


# The renderer, on evaluations built from engine objects


def node(name: str, zone: str | None, cpu: Fraction | None = Fraction(4)) -> Node:
    return Node(name=name, zone=zone, allocatable_cpu=cpu, ready=True, control_plane=False)


def auto_service(name: str = "web") -> Service:
    return Service(
        namespace="default",
        name=name,
        deprecated_hints_annotation=None,
        topology_mode_annotation="Auto",
        traffic_distribution=None,
        internal_traffic_policy=None,
        type="ClusterIP",
        cluster_ip="10.96.0.10",
    )


def endpoints_slice(service: Service, zones: list[str | None]) -> EndpointSlice:
    endpoints = tuple(
        Endpoint(
            address=f"10.1.0.{index + 1}",
            ready=True,
            zone=zone,
            node_name=f"node-{zone}",
        )
        for index, zone in enumerate(zones)
    )
    return EndpointSlice(
        namespace=service.namespace,
        name=f"{service.name}-x1",
        service_name=service.name,
        address_type="IPv4",
        managed=True,
        endpoints=endpoints,
    )


def evaluation_of(nodes: list[Node], zones: list[str | None]) -> ClusterResult:
    service = auto_service()
    return result_of(nodes, [service], [endpoints_slice(service, zones)])


def test_insufficient_node_info_lists_every_offending_node_and_fix() -> None:
    """Every offending node appears with what it lacks and its fix; no colour when off."""
    nodes = [
        node("node-a", "zone-a"),
        node("node-b", "zone-b"),
        node("bare-1", None),
        node("bare-2", ""),
        node("no-cpu", "zone-a", cpu=None),
    ]
    evaluation = evaluation_of(nodes, ["zone-a", "zone-b", "zone-a"])
    text = explain_text(evaluation, evaluation.verdicts(), ExplainOptions(color=False))
    for name in ("bare-1", "bare-2"):
        assert f"{name}: no topology.kubernetes.io/zone label" in text
        assert f"kubectl label node {name} topology.kubernetes.io/zone=<zone> --overwrite" in text
    assert "no-cpu: no allocatable CPU" in text
    assert "kubectl describe node no-cpu" in text
    assert "disabled (InsufficientNodeInfo)" in text
    assert "see Cluster: bare-1, bare-2, no-cpu" in flat(text)
    assert "\x1b" not in text


def test_colour_option_paints_the_insufficient_header() -> None:
    """With colour on, the insufficient verdict and the offending node's lack are red."""
    evaluation = evaluation_of([node("a", "zone-a"), node("b", None)], ["zone-a", "zone-a"])
    text = explain_text(evaluation, evaluation.verdicts(), ExplainOptions(color=True))
    assert "\x1b[31minsufficient\x1b[0m" in text
    assert "\x1b[31mno topology.kubernetes.io/zone label (absent or empty)\x1b[0m" in text


def test_advisor_shows_a_window_around_a_large_count() -> None:
    """For many endpoints the advisor lists a bounded window around today's count, with '(now)'."""
    nodes = [node(f"node-{zone}", zone) for zone in ZONES]
    evaluation = evaluation_of(nodes, [ZONES[index % 3] for index in range(40)])
    text = explain_text(evaluation, evaluation.verdicts(), ExplainOptions())
    advisor = flat(text.split("Replica advisor:")[1].split("Margin:")[0])
    assert advisor.startswith("..., 30 ")
    assert "40 enabled (now)" in advisor
    assert advisor.endswith("50 enabled")


def test_endpoint_without_zone_is_not_a_count_problem() -> None:
    """NoZoneSpecified names how many endpoints lack a zone and does not suggest scaling."""
    nodes = [node(f"node-{zone}", zone) for zone in ZONES]
    evaluation = evaluation_of(nodes, ["zone-a", "zone-b", "zone-c", "zone-a", "zone-b", None])
    text = flat(explain_text(evaluation, evaluation.verdicts(), ExplainOptions()))
    assert "disabled (NoZoneSpecified)" in text
    assert "1 of the 6 ready endpoints has no zone" in text
    assert "Suggestion: the endpoint count is fine" in text


def test_same_node_headless_and_no_mechanism_are_explained() -> None:
    """PreferSameNode lists its nodes, a headless Service has no mode, `none` says why."""
    nodes = [node(f"node-{zone}", zone) for zone in ZONES]
    base = auto_service()
    same_node = replace(base, name="api", topology_mode_annotation=None)
    same_node = replace(same_node, traffic_distribution="PreferSameNode")
    headless = replace(base, name="db", cluster_ip="None")
    plain = replace(base, name="old", topology_mode_annotation="Disabled")
    hinted = tuple(
        Endpoint(
            f"10.2.0.{i}",
            ready=True,
            zone=zone,
            node_name=f"node-{zone}",
            zone_hints=(zone,),
            node_hints=(f"node-{zone}",),
        )
        for i, zone in enumerate(ZONES)
    )
    slices = [
        replace(endpoints_slice(same_node, list(ZONES)), endpoints=hinted),
        endpoints_slice(headless, list(ZONES)),
        endpoints_slice(plain, list(ZONES)),
    ]
    evaluation = result_of(nodes, [same_node, headless, plain], slices)
    text = flat(explain_text(evaluation, evaluation.verdicts(), ExplainOptions()))
    assert "PreferSameNode on node-zone-a, node-zone-b, node-zone-c" in text
    assert "from spec.trafficDistribution=PreferSameNode" in text
    assert "kube-proxy: not proxied (headless" in text
    assert "none: annotation service.kubernetes.io/topology-mode=Disabled is not Auto" in text
    assert "Verdict: not applicable" in text
    empty = result_of(nodes, [], [])
    assert explain_text(empty, (), ExplainOptions()).endswith(
        "No Service with EndpointSlices in this snapshot.\n"
    )


def test_select_reports_what_did_not_match() -> None:
    """The CLI's selection: all verdicts, a namespace's, or one Service's; LookupError names it."""
    evaluation = evaluation_of([node("a", "zone-a"), node("b", "zone-b")], ["zone-a", "zone-b"])
    assert select(evaluation, None, None) == evaluation.verdicts()
    assert select(evaluation, "default", None) == evaluation.verdicts()
    assert select(evaluation, "default", "web") == evaluation.verdicts()
    assert select(evaluation, "other", None) == ()
    with pytest.raises(LookupError, match="default/api"):
        select(evaluation, "default", "api")


# The docs


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    (subparsers,) = [
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    ]
    return dict(subparsers.choices)


@pytest.mark.parametrize("command", ["evaluate", "explain", "what-if", "serve"])
def test_cli_doc_mentions_every_option(command: str) -> None:
    """docs/cli.md names every option, metavar and choice that each command accepts."""
    doc = CLI_DOC.read_text()
    section = doc.split(f"## {command}\n")[1].split("\n## ")[0]
    for action in subcommand_parsers()[command]._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names = action.option_strings or [str(action.metavar or action.dest)]
        for name in names:
            assert f"`{name}" in section, f"{command}: {name} is not in docs/cli.md"
        for choice in action.choices or ():
            assert f"{names[0]} {choice}" in section, f"{command}: {choice} is not in docs/cli.md"


def quoted_outputs(doc: Path, marker: str) -> list[tuple[list[str], str, str]]:
    """(arguments, fence language, block) for each `<!-- MARKER: ARGS -->` and its code block."""
    pattern = re.compile(rf"<!-- {marker}: (.+?) -->\n```(\w*)\n(.*?)\n```", re.DOTALL)
    return [
        (shlex.split(args), language, block)
        for args, language, block in pattern.findall(doc.read_text())
    ]


def test_cli_doc_examples_are_real_outputs() -> None:
    """The evaluate and explain examples in docs/cli.md are what the commands print today."""
    quoted = quoted_outputs(CLI_DOC, "output")
    assert {args[0] for args, _, _ in quoted} == {"evaluate", "explain", "what-if"}
    for args, language, block in quoted:
        completed = run(*args)
        assert completed.returncode in {0, 1}, completed.stderr
        if language == "json":
            assert json.loads(block) == json.loads(completed.stdout)
        else:
            assert block + "\n" == completed.stdout


def test_walkthrough_outputs_are_trimmed_real_outputs() -> None:
    """Each walkthrough block is the real output with lines left out where '...' stands."""
    quoted = quoted_outputs(WALKTHROUGH, "trimmed output")
    shown = {Path(args[2]).stem for args, _, _ in quoted}
    assert shown == {path.stem for path in EXAMPLES_DIR.glob("*.json")}
    for args, _, block in quoted:
        completed = run(*args)
        assert completed.returncode in {0, 1}, completed.stderr
        remaining = iter(completed.stdout.splitlines())
        for line in block.splitlines():
            if line.strip() == "...":
                continue
            assert line in remaining, f"{shlex.join(args)}: {line!r} not printed (in this order)"
