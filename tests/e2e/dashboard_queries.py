"""Every PromQL query of the committed Grafana dashboards, ready to run against Prometheus.

Grafana variables are replaced by concrete values, as Grafana would interpolate them for one
namespace, one Service and one cluster. An end-to-end test sends each expression to a real
Prometheus that scrapes the exporter; `tests/test_dashboards.py` checks each with promtool.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dashboards.generate import panel_queries
from tests.conftest import PROJECT_ROOT

DASHBOARDS_DIR = PROJECT_ROOT / "dashboards"

_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")
_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")


def load_dashboards(dashboards_dir: Path = DASHBOARDS_DIR) -> list[dict[str, Any]]:
    """The committed dashboard JSON documents, sorted by file name."""
    return [
        json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(dashboards_dir.glob("*.json"))
    ]


def substitute(
    expr: str,
    *,
    namespace: str,
    service: str,
    cluster: str = "",
    rate_interval: str = "1m",
    interval: str = "1m",
    range_: str = "1h",
) -> str:
    """The expression with every Grafana variable replaced; an unknown variable is an error."""
    values = {
        "namespace": namespace,
        "service": service,
        "cluster": cluster,
        "__rate_interval": rate_interval,
        "__interval": interval,
        "__range": range_,
    }

    def replace(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        if name not in values:
            raise ValueError(f"unknown Grafana variable ${name} in {expr!r}")
        return values[name]

    return _VARIABLE.sub(replace, expr)


def dashboard_queries(
    namespace: str,
    service: str,
    cluster: str = "",
    *,
    rate_interval: str = "1m",
    interval: str = "1m",
    dashboards_dir: Path = DASHBOARDS_DIR,
) -> list[tuple[str, str, str]]:
    """Every (dashboard uid, panel title, expression) with the variables substituted.

    `cluster=""` is what a single-cluster setup sends (the variable, shown, has no value), and
    selects series without a cluster label.
    """
    return [
        (
            str(dashboard["uid"]),
            title,
            substitute(
                expr,
                namespace=namespace,
                service=service,
                cluster=cluster,
                rate_interval=rate_interval,
                interval=interval,
            ),
        )
        for dashboard in load_dashboards(dashboards_dir)
        for title, expr in panel_queries(dashboard)
    ]


def variable_selectors(
    namespace: str,
    service: str,
    cluster: str = "",
    *,
    dashboards_dir: Path = DASHBOARDS_DIR,
) -> list[tuple[str, str, str, str]]:
    """Every query variable as (dashboard uid, variable, series selector, label).

    Grafana runs `label_values(SELECTOR, LABEL)` as a series query; the selector is PromQL
    and can be run as an instant query to see which label values the variable would offer.
    """
    selectors = []
    for dashboard in load_dashboards(dashboards_dir):
        for variable in dashboard["templating"]["list"]:
            if variable["type"] != "query":
                continue
            match = _LABEL_VALUES.match(variable["query"])
            if match is None:
                raise ValueError(f"not a label_values query: {variable['query']!r}")
            selector = substitute(
                match["selector"], namespace=namespace, service=service, cluster=cluster
            )
            selectors.append((str(dashboard["uid"]), variable["name"], selector, match["label"]))
    return selectors
