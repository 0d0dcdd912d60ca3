"""Grafana dashboards for topology-hints-exporter, generated with grafana-foundation-sdk.

Run ``python -m dashboards.generate [OUTDIR]`` (default: this folder) to write the three
dashboards as JSON. The output is deterministic (sorted keys, two-space indent, trailing
newline) and committed; a test regenerates it and compares byte for byte. Shared settings
and panel helpers are in ``panels.py``, each dashboard in its own module.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from dashboards.nodes import nodes
from dashboards.overview import overview
from dashboards.service import service
from exporter.metrics.monitoring import MonitoringConfig

DASHBOARDS: dict[str, Callable[[MonitoringConfig], dashboard_builders.Dashboard]] = {
    "topology-hints-overview.json": overview,
    "topology-hints-service.json": service,
    "topology-hints-nodes.json": nodes,
}


def render(builder: dashboard_builders.Dashboard) -> str:
    """The dashboard as deterministic JSON, with panel ids numbered in layout order."""
    model = builder.build()
    for number, panel in enumerate(model.panels or [], start=1):
        panel.id_val = number
    return json.dumps(model, cls=JSONEncoder, sort_keys=True, indent=2) + "\n"


def panel_queries(dashboard_json: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every (panel title, PromQL expression) of a dashboard, rows' nested panels included."""
    queries: list[tuple[str, str]] = []
    pending = list(dashboard_json.get("panels", []))
    while pending:
        panel = pending.pop(0)
        pending[0:0] = panel.get("panels", [])
        queries.extend(
            (panel["title"], target["expr"])
            for target in panel.get("targets", [])
            if target.get("expr")
        )
    return queries


def write_all(outdir: Path, config: MonitoringConfig | None = None) -> list[Path]:
    """Write every dashboard into outdir; returns the written paths."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, build in DASHBOARDS.items():
        path = outdir / filename
        path.write_text(render(build(config or MonitoringConfig())), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    """Entry point: `python -m dashboards.generate [OUTDIR]`."""
    if len(argv) > 1:
        sys.stderr.write("usage: python -m dashboards.generate [OUTDIR]\n")
        return 2
    outdir = Path(argv[0]) if argv else Path(__file__).resolve().parent
    for path in write_all(outdir):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
