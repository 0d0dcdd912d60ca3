"""The Results section of docs/performance.md from `bench.py --json FILE`.

    python bench/report.py bench.json > results.md

One table per scale (measure, median [min-max], reference, ratio, target, met, CPU of the
exporter and of the API server) and one table of growth from the smallest scale, so the
page shows exactly what a run printed and can be regenerated from its JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

_UNITS = {"ms": "ms", "s": "s", "MiB": "MiB"}


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _spread(figure: dict[str, Any]) -> str:
    unit = _UNITS.get(figure["unit"], figure["unit"])
    return f"{_number(figure['median'])} {unit} [{_number(figure['min'])}-{_number(figure['max'])}]"


def _ratio(definition: dict[str, Any], figure: dict[str, Any]) -> str:
    ratio = figure.get("ratio")
    if not ratio:
        return ""
    faster = " faster" if definition["ratio_kind"] == "faster" else ""
    return f"{ratio['median']:.2f}x{faster} [{ratio['low']:.2f}-{ratio['high']:.2f}]"


def _target(definition: dict[str, Any]) -> str:
    parts = []
    if definition.get("absolute_limit") is not None:
        parts.append(f"<= {definition['absolute_limit']:g} {definition['unit']} at 1x")
    if definition.get("ratio_limit") is not None:
        sign = ">=" if definition["ratio_kind"] == "faster" else "<="
        parts.append(f"ratio {sign} {definition['ratio_limit']:g}")
    return ", ".join(parts)


def _title(definition: dict[str, Any]) -> str:
    return str(definition["title"]).strip().removeprefix("ref: ")


def _cpu(figure: dict[str, Any]) -> str:
    exporter, api = figure.get("cpu_exporter_s"), figure.get("cpu_api_server_s")
    if exporter is None:
        return ""
    return f"{exporter:.2f} / {api:.2f}" if api is not None else f"{exporter:.2f}"


def scale_table(result: dict[str, Any], definitions: dict[str, Any]) -> str:
    size, info = result["size"], result["info"]
    lines = [
        (
            f"### Scale {result['scale']:g}: {size['nodes']:,} nodes, {size['services']:,} "
            f"Services, {size['endpoints']:,} endpoints"
        ),
        "",
        (
            f"LIST {info['list_bytes'] / 1e6:.1f} MB in {info['list_pages']} pages; `/metrics` "
            f"{info['scrape_bytes'] / 1e6:.2f} MB, {info['samples']:,} samples; "
            f"{info['changes']} changes a run; {info['affected_services']:,} Services moved by a "
            f"resize; snapshot file {info['snapshot_bytes'] / 1e6:.1f} MB."
        ),
        "",
        (
            "| measure | median [min-max] | reference (same run) | ratio | target | met | "
            "CPU s exporter / API server |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    figures = result["figures"]
    references = {d["reference"] for d in definitions.values() if d.get("reference")}
    for key, definition in definitions.items():
        # A reference appears beside its measure, unless it has a target of its own.
        if key not in figures or (key in references and definition.get("absolute_limit") is None):
            continue
        figure = figures[key]
        reference = ""
        if definition.get("reference") in figures:
            ref_definition = definitions[definition["reference"]]
            reference = f"{_title(ref_definition)}: {_spread(figures[definition['reference']])}"
        title = _title(definition) + (" *" if definition.get("stops_short") else "")
        met = {"yes": "yes", "NO": "**no**"}.get(figure.get("met") or "", "")
        lines.append(
            f"| {title} | {_spread(figure)} | {reference} | {_ratio(definition, figure)} | "
            f"{_target(definition)} | {met} | {_cpu(figure)} |"
        )
    return "\n".join(lines)


def ksm_table(result: dict[str, Any]) -> str:
    """The exporter beside kube-state-metrics at one scale (bench/ksm.py's rows)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ksm import RESOURCES, table_rows  # noqa: PLC0415 - bench/ is not a package

    cells = table_rows(result["ksm"])
    lines = [
        (
            f"Beside kube-state-metrics (`--resources={RESOURCES}`, the same API server in the "
            f"same run; {result['objects']:,} objects):"
        ),
        "",
        "| " + " | ".join(cells[0]) + " |",
        "|" + "---|" * len(cells[0]),
    ]
    for row in cells[1:]:
        row[5] = {"yes": "yes", "NO": "**no**"}.get(row[5], row[5])
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def growth_table(report: dict[str, Any]) -> str:
    definitions = report["definitions"]
    scales = [result["scale"] for result in report["scales"]]
    header = " | ".join(f"{scale:g}x" for scale in scales)
    lines = [
        "### Growth from the smallest scale",
        "",
        (
            "Each figure's median divided by its median at the smallest scale; the cluster grows "
            "by the scale's ratio. **Bold**: worse than linear."
        ),
        "",
        f"| measure | {header} |",
        "|---|" + "---|" * len(scales),
    ]
    for key, rows in report["growth"].items():
        by_scale = {row["scale"]: row for row in rows}
        cells = []
        for scale in scales:
            row = by_scale.get(scale)
            if row is None:
                cells.append("")
                continue
            if row["growth"] is None:  # 0 at the smallest scale: no factor
                cells.append("-")
                continue
            cell = f"{row['growth']:.2f}x (cluster {row['cluster_growth']:g}x)"
            cells.append(f"**{cell}**" if row["worse_than_linear"] else cell)
        lines.append(f"| {_title(definitions[key])} | {' | '.join(cells)} |")
    return "\n".join(lines)


def markdown(report: dict[str, Any]) -> str:
    machine = f"{report['cores']} cores"
    if "cpu" in report:
        machine = f"{report['cpu']}, {machine}"
    if "load" in report:
        start, end = report["load"]
        machine += f", load average {start:.1f} at the start, {end:.1f} at the end"
    parts = [
        (
            f"{report['runs']} runs a scale; {machine}; Python {report['python']}; "
            "`*` marks a figure that stops short of a scrape."
        ),
    ]
    for result in report["scales"]:
        parts.append(scale_table(result, report["definitions"]))
        if result.get("ksm"):
            parts.append(ksm_table(result))
    if len(report["scales"]) > 1:
        parts.append(growth_table(report))
    if report.get("api_cost"):
        cost = report["api_cost"]
        parts.append(f"### What the real kube-apiserver pays\n\n{cost['header']}")
        parts.append(cost["table"])
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("json_file", type=Path, help="the file `bench.py --json` wrote")
    args = parser.parse_args(argv)
    try:
        report = json.loads(args.json_file.read_text())
    except (OSError, ValueError) as error:
        sys.stderr.write(f"bench/report.py: {args.json_file}: {error}\n")
        return 2
    sys.stdout.write(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
