"""Soak: churn Services and EndpointSlices while ten clients scrape; nothing grows after it.

The real command watches the test API server. For CHURN_SECONDS Services and their
EndpointSlices are created, modified and deleted as fast as the API server takes them, while
ten clients scrape /metrics back to back; then every churned object is deleted and the
exporter is left to settle. RSS (from /proc) and the number of series are sampled every
5 s. After the churn: the series count is back to where it started (every series of a
deleted object is gone) and stays there, RSS does not grow, and no scrape ever failed.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.k8s_objects import endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI
from tests.processes import serving
from tests.scrape import http_get, wait_until

pytestmark = pytest.mark.slow

# 45 s of churn (some 13,000 changes at the pace below) and 30 s of settled scrapes: the soak
# runs beside the rest of the suite on 2 cores, so its length is the suite's time too.
CHURN_SECONDS = 45.0
SETTLE_SAMPLES = 6  # 5 s apart, after the churn
SAMPLE_INTERVAL = 5.0
SCRAPERS = 10
LIVE_SERVICES = 40  # churned Services alive at once
MAX_CHANGES = 40_000  # a bound on the churn loop, whatever the machine's speed
# About 300 changes a second: a busy cluster's rate, and the exporter's cost is what is
# measured, not how fast this process can write to the test API server.
PACE_SECONDS = 0.015
# RSS may move by allocator noise after the churn, never grow: a few MB of slack, no trend.
RSS_SLACK_BYTES = 4 << 20


@dataclass
class Sample:
    at: float
    rss: int
    series: int
    churned: int  # series of the churned namespace


@dataclass
class Scrapers:
    url: str
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    ok: int = 0
    failures: list[str] = field(default_factory=list)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:  # noqa: S310
                    response.read()
                    failed = None if response.status == 200 else f"HTTP {response.status}"
            except (urllib.error.URLError, OSError) as error:
                failed = repr(error)
            with self.lock:
                if failed is None:
                    self.ok += 1
                else:
                    self.failures.append(failed)


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _sample(pid: int, url: str) -> Sample:
    rss = _rss(pid)
    status, body = http_get(url)
    assert status == 200, body
    series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    return Sample(time.monotonic(), rss, series, body.count('namespace="churn"'))


def _churned_series(url: str) -> int:
    return http_get(url)[1].count('namespace="churn"')


@contextmanager
def _exporter(kubeconfig: Path, log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    with serving(
        "--kubeconfig", str(kubeconfig), "--context", "fake", "--log-format", "json",
        log=log, env={**os.environ, "KUBERNETES_SERVICE_HOST": ""},
    ) as exporter:  # fmt: skip
        yield exporter.process, f"{exporter.url}/metrics"


def _churn(api: FakeKubeAPI, deadline: float) -> int:
    """Create, modify and delete churned Services and slices until the deadline; changes."""
    alive: list[int] = []
    changes = 0
    for index in itertools.count():
        if time.monotonic() >= deadline or changes >= MAX_CHANGES:
            break
        name = f"svc-{index}"
        api.apply(service("churn", name, topology_mode="Auto"))
        api.apply(endpoint_slice("churn", f"{name}-1", name, zone_endpoints(3 + index % 6)))
        alive.append(index)
        changes += 2
        if len(alive) > 1:
            other = alive[index % len(alive)]
            endpoints = zone_endpoints(3 + (index * 7) % 9)
            api.apply(endpoint_slice("churn", f"svc-{other}-1", f"svc-{other}", endpoints))
            changes += 1
        if len(alive) > LIVE_SERVICES:
            gone = alive.pop(0)
            api.delete("EndpointSlice", "churn", f"svc-{gone}-1")
            api.delete("Service", "churn", f"svc-{gone}")
            changes += 2
        time.sleep(PACE_SECONDS)  # the churn's rate, not a wait for a condition
    for gone in alive:
        api.delete("EndpointSlice", "churn", f"svc-{gone}-1")
        api.delete("Service", "churn", f"svc-{gone}")
        changes += 2
    return changes


def test_churn_leaves_no_growth_and_no_failed_scrape(
    kube_api: FakeKubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    kube_api.load(
        [
            *three_zone_nodes(),
            service("shop", "web", topology_mode="Auto"),
            endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
        ]
    )
    with _exporter(kubeconfig, tmp_path / "exporter.log") as (process, url):
        baseline = _sample(process.pid, url)
        scrapers = Scrapers(url)
        threads = [threading.Thread(target=scrapers.run, daemon=True) for _ in range(SCRAPERS)]
        for thread in threads:
            thread.start()
        samples = [baseline]
        churn_result: list[int] = []
        churn_end = time.monotonic() + CHURN_SECONDS
        churner = threading.Thread(
            target=lambda: churn_result.append(_churn(kube_api, churn_end)), daemon=True
        )
        try:
            churner.start()
            while churner.is_alive():
                churner.join(timeout=SAMPLE_INTERVAL)
                samples.append(_sample(process.pid, url))
            # Every series of a deleted object goes, once the deletes are seen.
            wait_until(lambda: _churned_series(url) == 0, timeout=30, interval=0.2)
            settled = []
            for _ in range(SETTLE_SAMPLES):
                settled.append(_sample(process.pid, url))
                time.sleep(SAMPLE_INTERVAL)  # sampling period, not a wait for a condition
        finally:
            scrapers.stop.set()
            for thread in threads:
                thread.join(timeout=15)
        samples.extend(settled)
        peak = max(sample.rss for sample in samples)
        report = (
            f"changes={churn_result[0] if churn_result else 0} scrapes={scrapers.ok} "
            f"rss_start={samples[0].rss >> 20}MiB rss_peak={peak >> 20}MiB "
            f"rss_end={settled[-1].rss >> 20}MiB "
            f"series={[sample.series for sample in samples]} "
            f"churned={[sample.churned for sample in samples]}"
        )
        print(f"soak: {report}")  # noqa: T201 - the figures the soak exists to give
        assert churn_result, "the churn did not finish"
        assert not scrapers.failures, (len(scrapers.failures), scrapers.failures[:5], report)
        assert scrapers.ok > 0
        assert max(sample.churned for sample in samples) > 0, "no churned Service was exported"
        assert {sample.series for sample in settled} == {baseline.series}, report
        assert settled[-1].rss <= settled[0].rss + RSS_SLACK_BYTES, report
        assert process.poll() is None, "the exporter died during the soak"
