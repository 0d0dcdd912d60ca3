"""What bench.py measures (each figure, its reference and its target) and the tables and JSON
that report a scale's runs and the growth between scales."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

import ksm
from cluster import (
    ClusterSize,
)

# A figure growing this much faster than the cluster is flagged as worse than linear (the
# machine is noisy; smaller deviations are not findings).
GROWTH_TOLERANCE = 1.25


# -- what is measured ----------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One figure bench.py measures: its title, unit and definition, its reference and targets."""

    key: str
    title: str
    unit: str
    definition: str
    reference: str = ""  # key of the reference figure
    # "over": ratio = figure / reference; "faster": ratio = reference / figure.
    ratio_kind: str = "over"
    ratio_limit: float | None = None  # the ratio's target (<= for "over", >= for "faster")
    absolute_limit: float | None = None  # the figure's own target (<=), checked at 1x only
    stops_short: bool = False  # ends before a scrape has the bytes

    @property
    def is_reference(self) -> bool:
        return self.title.startswith("  ref:")

    @property
    def target(self) -> str:
        parts = []
        if self.absolute_limit is not None:
            parts.append(f"<= {self.absolute_limit:g} {self.unit} at 1x")
        if self.ratio_limit is not None:
            relation = "<=" if self.ratio_kind == "over" else ">="
            parts.append(f"ratio {relation} {self.ratio_limit:g}")
        return ", ".join(parts)


FIGURES = (
    Figure("change_p50", "change -> /metrics, p50", "ms",
           "EndpointSlice update sent to the API server (one endpoint toggles ready) -> end of "
           "the first complete /metrics response whose ready-endpoints sample for that Service "
           "has the new value, while a scraper fetches /metrics back to back; median over the "
           "changes of a run", "swap_p50", ratio_limit=1.5),
    Figure("swap_p50", "  ref: swap-at-once static server, p50", "ms",
           "the same measure against a minimal static server (its own process) holding the "
           "first scrape's bytes and a copy with one sample changed, that swaps the whole "
           "body at once when told (what an exporter costing nothing would score): told to "
           "swap -> end of the first response with the new value, the same scraper fetching "
           "back to back; median over as many swaps as changes"),
    Figure("change_p99", "change -> /metrics, p99", "ms",
           "as above, 99th percentile over the changes of a run", "swap_p99", ratio_limit=2),
    Figure("swap_p99", "  ref: swap-at-once static server, p99", "ms",
           "as above, 99th percentile over the swaps"),
    Figure("static_fetch", "  ref: static fetch of the same bytes", "ms",
           "GET of the same bytes as the first scrape from a minimal static server "
           "(http.server, sending them from memory, in its own process), same client, median "
           "of 10"),
    Figure("node_change", "node resize -> every affected series", "ms",
           "a Node's allocatable CPU changed at the API server (moves the zones' CPU shares) -> "
           "end of the first complete /metrics response in which every zone_cpu_ratio and "
           "every Service's zone_allocation_desired sample that the resize changes has its "
           "new value, while a scraper polls; median over the resizes of a run",
           "node_change_evaluator", absolute_limit=1000, ratio_limit=2),
    Figure("node_change_evaluator", "  ref: evaluator alone", "ms",
           "in-process, a fresh store and evaluator over the same cluster built after the "
           "exporter stopped, same GC settings (tuned, initial state frozen): decode the "
           "resized Node, "
           "ClusterStore.upsert_node, Evaluator.step() returns the published state; median "
           "over the resizes of a run (stops at the published state, before any rendering)",
           stops_short=True),
    Figure("node_change_cpu", "node resize, exporter CPU per resize", "ms",
           "CPU time of the exporter process (all threads) over the timed resizes above, "
           "divided by their number: the evaluation, the rendering and the scrapes served "
           "until every affected series is visible", "node_change_evaluator_cpu",
           ratio_limit=2),
    Figure("node_change_evaluator_cpu", "  ref: evaluator alone, CPU", "ms",
           "CPU time (process_time) of the evaluator-alone resizes above, median",
           stops_short=True),
    Figure("first_scrape", "first scrape after start", "ms",
           "GET /metrics right after the start is timed (its ready line, then one 200 from "
           "/readyz; nothing rendered for a scrape yet) -> end of the response",
           "generate_latest", ratio_kind="faster", ratio_limit=5),
    Figure("generate_latest", "  ref: generate_latest", "ms",
           "prometheus_client.generate_latest over a registry holding the same samples "
           "(parsed from the scraped text), in-process, median of 3 (no HTTP: stops short "
           "of a scrape)", stops_short=True),
    Figure("first_scrape_cpu", "first scrape after start, CPU", "ms",
           "CPU time of the exporter process (all threads: HTTP and rendering) from sending "
           "the GET above to the end of its response; on a shared machine CPU time does not "
           "grow with the neighbours' load as wall time does", "generate_latest_cpu",
           ratio_kind="faster", ratio_limit=5),
    Figure("generate_latest_cpu", "  ref: generate_latest CPU", "ms",
           "CPU time (process_time) of the generate_latest above, median of 3",
           stops_short=True),
    Figure("steady_scrape", "steady scrape", "ms",
           "GET /metrics with nothing changed since the previous scrape -> end of the "
           "response; median of 9 after the first", "static_fetch", ratio_limit=2),
    Figure("steady_gzip", "steady gzip scrape", "ms",
           "GET /metrics with Accept-Encoding: gzip, nothing changed since the previous "
           "scrape -> end of the (still compressed) response; median of 9 after a first",
           "static_gzip_fetch", ratio_limit=2),
    Figure("static_gzip_fetch", "  ref: static fetch of the same gzip bytes", "ms",
           "GET of the steady gzip scrape's bytes from the minimal static server "
           "(Content-Encoding: gzip, not decoded by the client), median of 10"),
    Figure("sync_cpu", "initial sync CPU", "s",
           "CPU seconds (user + system, /proc) of the exporter process from its start to "
           "its `ready` log line, written just before /readyz first answers 200 (every "
           "Service evaluated; read from its log, not by polling /readyz)", "sync_reference",
           ratio_limit=2, stops_short=True),
    Figure("sync_reference", "  ref: fetch + orjson.loads", "s",
           "CPU seconds of a process (GC tuned as exporter/runtime.py tunes it) fetching the "
           "same LIST pages (page size 500) and orjson.loads-ing each", stops_short=True),
    Figure("sync_wall", "initial sync wall", "s",
           "wall time from starting the exporter process to the bench reading that line",
           "sync_reference_wall", stops_short=True),
    Figure("sync_reference_wall", "  ref: fetch + orjson.loads wall", "s",
           "wall time of the reference above", stops_short=True),
    Figure("snapshot_ready_cpu", "serve --snapshot, start -> /readyz CPU", "s",
           "CPU seconds (/proc) of `serve --snapshot FILE` from its start to its `ready` log "
           "line (the file decoded, every Service evaluated), as for the live sync",
           "orjson_file_cpu", ratio_limit=1.5, stops_short=True),
    Figure("orjson_file_cpu", "  ref: orjson.loads of the file, CPU", "s",
           "CPU seconds (wait4) of a Python process, GC tuned as exporter/runtime.py tunes "
           "it, that reads the same file and orjson.loads it, interpreter start included",
           stops_short=True),
    Figure("snapshot_ready_wall", "serve --snapshot, start -> /readyz", "s",
           "wall time of the same", "orjson_file_wall", ratio_limit=1.5, stops_short=True),
    Figure("orjson_file_wall", "  ref: orjson.loads of the file", "s",
           "wall time of the same reference process, start to exit", stops_short=True),
    Figure("rss_ready", "RSS at /readyz", "MiB",
           "resident memory of the exporter (VmRSS) once /readyz has answered 200",
           absolute_limit=150),
    Figure("rss_after", "RSS after scrapes and changes", "MiB",
           "VmRSS after the first, 9 steady and 10 gzip scrapes and the EndpointSlice changes "
           "(scraped back to back throughout), before the node resizes", "rss_ready",
           ratio_limit=1.3),
    Figure("live_peak", "  ref: live peak RSS at /readyz", "MiB",
           "peak resident memory (VmHWM) of the live exporter once /readyz has answered 200"),
    Figure("evaluate_peak", "evaluate --snapshot peak RSS", "MiB",
           "peak RSS (wait4 ru_maxrss, the command started by a small process) of "
           "`evaluate --snapshot FILE`, the same cluster as a `kubectl get -o json` List",
           "live_peak", ratio_limit=1.5),
    Figure("serve_snapshot_peak", "serve --snapshot peak RSS", "MiB",
           "peak RSS (VmHWM) of `serve --snapshot FILE` once /readyz has answered 200",
           "live_peak", ratio_limit=1.5),
)  # fmt: skip
FIGURE = {figure.key: figure for figure in FIGURES}


@dataclass
class Run:
    """One run's figures (ms, s or MiB as declared) and CPU seconds per measure."""

    values: dict[str, float] = field(default_factory=dict)
    # measure key -> (exporter CPU s, API server CPU s)
    cpu: dict[str, tuple[float, float]] = field(default_factory=dict)
    info: dict[str, float] = field(default_factory=dict)


# -- reporting -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """A figure over a scale's runs: the median and the min-max."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Summary:
        return cls(statistics.median(values), min(values), max(values))

    def text(self, unit: str) -> str:
        digits = 2 if unit == "s" or self.median < 10 else 1 if self.median < 100 else 0
        return f"{self.median:.{digits}f} [{self.low:.{digits}f}-{self.high:.{digits}f}] {unit}"


def ratio_of(figure: Figure, run: Run) -> float | None:
    if not figure.reference:
        return None
    value, reference = run.values[figure.key], run.values[figure.reference]
    if figure.ratio_kind == "faster":
        return reference / value if value else None
    return value / reference if reference else None


def met(figure: Figure, scale: float, value: Summary, ratio: Summary | None) -> str:
    checks = []
    if figure.absolute_limit is not None and scale == 1:
        checks.append(value.median <= figure.absolute_limit)
    if figure.ratio_limit is not None and ratio is not None:
        checks.append(
            ratio.median <= figure.ratio_limit
            if figure.ratio_kind == "over"
            else ratio.median >= figure.ratio_limit
        )
    if not checks:
        return ""
    return "yes" if all(checks) else "NO"


def scale_report(scale: float, runs: list[Run]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for figure in FIGURES:
        value = Summary.of([run.values[figure.key] for run in runs])
        ratios = [r for r in (ratio_of(figure, run) for run in runs) if r is not None]
        ratio = Summary.of(ratios) if ratios else None
        cpu = [run.cpu[figure.key] for run in runs if figure.key in run.cpu]
        figures[figure.key] = {
            "runs": [run.values[figure.key] for run in runs],
            "median": value.median,
            "min": value.low,
            "max": value.high,
            "unit": figure.unit,
            "ratio": asdict(ratio) if ratio else None,
            "met": met(figure, scale, value, ratio) or None,
            "cpu_exporter_s": statistics.median(c[0] for c in cpu) if cpu else None,
            "cpu_api_server_s": statistics.median(c[1] for c in cpu) if cpu else None,
        }
    info = {key: statistics.median(run.info[key] for run in runs) for key in runs[0].info}
    objects = int(runs[0].info.get("objects", 0))
    report = {"scale": scale, "size": asdict(ClusterSize().scaled(scale)), "info": info,
              "figures": figures, "objects": objects}  # fmt: skip
    if objects and all("ksm_steady_scrape" in run.values for run in runs):
        report["ksm"] = ksm.side_by_side(runs, objects)
    return report


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for number, row in enumerate(rows):
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if number == 0:
            print("  ".join("-" * width for width in widths))


def print_scale(report: dict[str, Any]) -> None:
    size, info = report["size"], report["info"]
    print(
        f"\n## scale {report['scale']:g}: {size['nodes']} nodes, {size['services']} Services, "
        f"{size['endpoints']} endpoints; LIST {info['list_bytes'] / 1e6:.1f} MB in "
        f"{info['list_pages']:.0f} pages; /metrics {info['scrape_bytes'] / 1e6:.2f} MB, "
        f"{info['samples']:.0f} samples; {info['changes']:.0f} changes, "
        f"{info['affected_services']:.0f} Services moved by a resize; snapshot "
        f"{info['snapshot_bytes'] / 1e6:.1f} MB\n"
    )
    rows = [["measure", "median [min-max]", "reference median [min-max]", "ratio", "target",
             "met?", "CPU s exporter / API server"]]  # fmt: skip
    figures = report["figures"]
    for figure in FIGURES:
        if figure.is_reference:
            continue  # printed beside the measures that use it
        data = figures[figure.key]
        value = Summary(data["median"], data["min"], data["max"]).text(figure.unit)
        reference = ratio = ""
        if figure.reference:
            ref = figures[figure.reference]
            reference_figure = FIGURE[figure.reference]
            reference = f"{reference_figure.title.strip().removeprefix('ref: ')}: " + Summary(
                ref["median"], ref["min"], ref["max"]
            ).text(reference_figure.unit)
            if data["ratio"]:
                r = data["ratio"]
                faster = " faster" if figure.ratio_kind == "faster" else ""
                ratio = f"{r['median']:.2f}x{faster} [{r['low']:.2f}-{r['high']:.2f}]"
        cpu = ""
        if data["cpu_exporter_s"] is not None:
            cpu = f"{data['cpu_exporter_s']:.2f} / {data['cpu_api_server_s']:.2f}"
        title = figure.title + (" *" if figure.stops_short else "")
        rows.append([title, value, reference, ratio, figure.target, data["met"] or "", cpu])
    print_table(rows)
    if "ksm" in report:
        print(
            f"\n### beside kube-state-metrics (--resources={ksm.RESOURCES}, same API server, "
            f"same run; {report['objects']:,} objects)\n"
        )
        print_table(ksm.table_rows(report["ksm"]))


def growth_report(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's growth from the smallest scale, against the cluster's growth."""
    base = reports[0]
    growth: dict[str, Any] = {}
    for figure in FIGURES:
        first = base["figures"][figure.key]["median"]
        entries = []
        for report in reports:
            cluster = report["scale"] / base["scale"]
            value = report["figures"][figure.key]["median"]
            # A figure of 0 at the smallest scale (CPU time below the clock's tick at a tiny
            # scale) has no growth factor: None, shown as "-".
            factor = value / first if first and value is not None else None
            worse = factor is not None and factor > cluster * GROWTH_TOLERANCE
            entries.append({"scale": report["scale"], "growth": factor, "cluster_growth": cluster,
                            "worse_than_linear": worse})  # fmt: skip
        growth[figure.key] = entries
    return growth


def print_growth(reports: list[dict[str, Any]], growth: dict[str, Any]) -> None:
    scales = [report["scale"] for report in reports]
    print(
        f"\n## growth from scale {scales[0]:g} (figure's median / its median at {scales[0]:g}; "
        f"cluster grows {', '.join(f'{s / scales[0]:g}x' for s in scales)}; ! = worse than "
        f"linear by more than {GROWTH_TOLERANCE:g}x)\n"
    )
    rows = [["figure", *(f"{scale:g}x" for scale in scales), "linear or better?"]]
    for figure in FIGURES:
        entries = growth[figure.key]
        cells = [
            "-"
            if entry["growth"] is None
            else f"{entry['growth']:.2f}" + ("!" if entry["worse_than_linear"] else "")
            for entry in entries
        ]
        worse = [f"{e['scale']:g}x" for e in entries if e["worse_than_linear"]]
        rows.append([figure.title.strip(), *cells, f"NO at {', '.join(worse)}" if worse else "yes"])
    print_table(rows)


def print_definitions() -> None:
    print("## what each figure measures (* = stops short of a scrape)\n")
    for figure in FIGURES:
        star = " *" if figure.stops_short else ""
        print(f"- {figure.title.strip()}{star}: {figure.definition}.")
