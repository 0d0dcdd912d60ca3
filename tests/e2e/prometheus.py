"""A real Prometheus and Alertmanager, wired together, for end-to-end alerting tests.

Not a test module: tests start a stack with `prometheus_stack(...)` around a scrape target they
run themselves (the exporter) and poll it. Both servers bind 127.0.0.1 on free ports, keep all
state in a temporary directory, and are stopped when the context exits.

    with prometheus_stack("127.0.0.1:9808", RULE_FILE, tmp_path, rule_for="0s") as stack:
        alerts = stack.wait_for(lambda: stack.alerts_in_alertmanager(), timeout=60)
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.conftest import require_binary
from tests.processes import free_port, stop

T = TypeVar("T")

DEFAULT_JOB = "topology-hints-exporter"
STARTUP_TIMEOUT = 30.0
SHUTDOWN_TIMEOUT = 10.0
POLL_INTERVAL = 0.2


def http_get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - http URLs we build
        return json.load(response)


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float,
    *,
    what: str = "condition",
    interval: float = POLL_INTERVAL,
) -> T:
    """Poll `predicate` until it returns a truthy value (returned) or `timeout` seconds pass.

    Connection errors count as "not yet", so a server that is still starting can be polled.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = predicate()
        except (OSError, urllib.error.URLError) as error:
            last = error
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} not met within {timeout}s (last result: {last!r})")
        time.sleep(interval)


@dataclass
class Server:
    """A started server process with its log file."""

    name: str
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.process.returncode}:\n{self.log_text()}"
                )
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:  # noqa: S310 - our URL
                return bool(response.status == 200)

        wait_for(ready, timeout, what=f"{self.name} ready")

    def stop(self) -> None:
        stop(self.process, SHUTDOWN_TIMEOUT)


def start_server(name: str, argv: list[str], url: str, log: Path) -> Server:
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    return Server(name=name, process=process, url=url, log=log)


@dataclass
class PrometheusStack:
    """A running Prometheus scraping one target, evaluating rules, and notifying an Alertmanager."""

    prometheus: Server
    alertmanager: Server

    @property
    def prometheus_url(self) -> str:
        return self.prometheus.url

    @property
    def alertmanager_url(self) -> str:
        return self.alertmanager.url

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The result vector of an instant query (`[{"metric": {...}, "value": [t, "v"]}, ...]`)."""
        url = f"{self.prometheus.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        body = http_get_json(url)
        if body.get("status") != "success":
            raise RuntimeError(f"query {expr!r} failed: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def alerts_in_prometheus(self) -> list[dict[str, Any]]:
        """Prometheus's pending and firing alerts (`/api/v1/alerts`)."""
        alerts: list[dict[str, Any]] = http_get_json(f"{self.prometheus.url}/api/v1/alerts")[
            "data"
        ]["alerts"]
        return alerts

    def alerts_in_alertmanager(self) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds (API v2 `/api/v2/alerts`), each with `labels`,
        `annotations` and `status`."""
        alerts: list[dict[str, Any]] = http_get_json(f"{self.alertmanager.url}/api/v2/alerts")
        return alerts

    def wait_for(
        self, predicate: Callable[[], T | None], timeout: float, *, what: str = "condition"
    ) -> T:
        """Poll `predicate` with a deadline; the servers' logs are attached to a timeout."""
        try:
            return wait_for(predicate, timeout, what=what)
        except TimeoutError as error:
            raise TimeoutError(
                f"{error}\n--- prometheus log ---\n{self.prometheus.log_text()[-4000:]}"
                f"\n--- alertmanager log ---\n{self.alertmanager.log_text()[-4000:]}"
            ) from None


def shortened_rules(rule_file: Path, rule_for: str | None) -> dict[str, Any]:
    """The rule file's groups, with every alert's `for` replaced by `rule_for` when given."""
    document: dict[str, Any] = yaml.safe_load(rule_file.read_text(encoding="utf-8"))
    if rule_for is not None:
        for group in document["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    rule["for"] = rule_for
    return document


@contextmanager
def prometheus_stack(
    target: str,
    rule_file: Path,
    directory: Path,
    *,
    rule_for: str | None = None,
    scrape_interval: str = "1s",
    evaluation_interval: str = "1s",
    job: str = DEFAULT_JOB,
    other_jobs: Mapping[str, Sequence[str]] | None = None,
    extra_targets: Sequence[str] = (),
    extra_scrape_configs: Sequence[Mapping[str, Any]] = (),
) -> Iterator[PrometheusStack]:
    """Start Alertmanager, then Prometheus scraping `target` (host:port) as `job` with the rules
    of `rule_file` (every alert's `for` replaced by `rule_for` when given); stop both on exit.
    `extra_targets` are scraped as `job` too; `other_jobs` adds scrape jobs: job name -> targets;
    `extra_scrape_configs` are added as they are (HTTPS targets, say).

    All configuration, data and logs go under `directory`.
    """
    prometheus_binary = require_binary("prometheus")
    alertmanager_binary = require_binary("prometheus-alertmanager")
    directory.mkdir(parents=True, exist_ok=True)

    alertmanager_config = directory / "alertmanager.yml"
    alertmanager_config.write_text(
        yaml.safe_dump(
            {
                "route": {
                    "receiver": "null",
                    "group_wait": "0s",
                    "group_interval": "1s",
                    "repeat_interval": "1h",
                },
                "receivers": [{"name": "null"}],
            }
        ),
        encoding="utf-8",
    )
    rules = directory / "rules.yml"
    rules.write_text(yaml.safe_dump(shortened_rules(rule_file, rule_for)), encoding="utf-8")

    with ExitStack() as cleanup:
        alertmanager_address = f"127.0.0.1:{free_port()}"
        alertmanager = start_server(
            "alertmanager",
            [
                alertmanager_binary,
                f"--config.file={alertmanager_config}",
                f"--web.listen-address={alertmanager_address}",
                "--cluster.listen-address=",
                f"--storage.path={directory / 'alertmanager-data'}",
            ],
            f"http://{alertmanager_address}",
            directory / "alertmanager.log",
        )
        cleanup.callback(alertmanager.stop)
        alertmanager.wait_ready()

        prometheus_config = directory / "prometheus.yml"
        prometheus_config.write_text(
            yaml.safe_dump(
                {
                    "global": {
                        "scrape_interval": scrape_interval,
                        "evaluation_interval": evaluation_interval,
                    },
                    "rule_files": [str(rules)],
                    "alerting": {
                        "alertmanagers": [
                            {
                                "api_version": "v2",
                                "static_configs": [{"targets": [alertmanager_address]}],
                            }
                        ]
                    },
                    "scrape_configs": [
                        {
                            "job_name": name,
                            "honor_labels": True,
                            "static_configs": [{"targets": list(targets)}],
                        }
                        for name, targets in {
                            job: [target, *extra_targets],
                            **(other_jobs or {}),
                        }.items()
                    ]
                    + [dict(config) for config in extra_scrape_configs],
                }
            ),
            encoding="utf-8",
        )
        prometheus_address = f"127.0.0.1:{free_port()}"
        prometheus = start_server(
            "prometheus",
            [
                prometheus_binary,
                f"--config.file={prometheus_config}",
                f"--web.listen-address={prometheus_address}",
                f"--storage.tsdb.path={directory / 'prometheus-data'}",
                "--rules.alert.resend-delay=1s",
                "--log.level=info",
            ],
            f"http://{prometheus_address}",
            directory / "prometheus.log",
        )
        cleanup.callback(prometheus.stop)
        prometheus.wait_ready()
        yield PrometheusStack(prometheus=prometheus, alertmanager=alertmanager)
