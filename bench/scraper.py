"""Watching /metrics: a scraper that fetches it back to back and times when a change shows,
and the readers of the samples a change is looked for in."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Self

from procstat import get

READY_ENDPOINTS = b"topology_hints_service_ready_endpoints{"
# Families a node resize that moves CPU shares changes: the zones' ratios, and each `auto`
# Service's per-zone allocation.
SHARE_FAMILIES = (b"topology_hints_zone_cpu_ratio", b"topology_hints_zone_allocation_desired")


class Scraper:
    """Fetches /metrics back to back and reports when a response first satisfies a check."""

    def __init__(self, url: str, timeout: float) -> None:
        self._url = url
        self._timeout = timeout
        self._lock = threading.Lock()
        self._check: Callable[[bytes], bool] | None = None
        self._since = 0.0
        self._latency = 0.0
        self._found = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.scrapes = 0
        self._thread = threading.Thread(target=self._loop, name="scraper", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(600)

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                body = get(self._url)
                ended = time.perf_counter()
                self.scrapes += 1
                with self._lock:
                    check, since = self._check, self._since
                if check is not None and check(body):
                    with self._lock:
                        self._check = None
                    self._latency = ended - since
                    self._found.set()
        except BaseException as error:  # noqa: BLE001 - reported to the waiting thread
            self._error = error
            self._found.set()

    def latency(self, check: Callable[[bytes], bool], change: Callable[[], None]) -> float:
        """Seconds from just before `change()` to the end of the first response passing `check`.

        The check is armed before the change is made: no response can pass it earlier,
        because the value it looks for differs from the current one.
        """
        self._found.clear()
        with self._lock:
            self._check, self._since = check, time.perf_counter()
        change()
        if not self._found.wait(self._timeout):
            raise TimeoutError(f"the change did not reach /metrics in {self._timeout:g} s")
        if self._error is not None:
            raise RuntimeError(f"the scraper failed: {self._error}") from self._error
        return self._latency


SERVICE_LABELS = re.compile(rb'(namespace|service)="([^"]*)"')


def ready_series(body: bytes) -> dict[tuple[str, str], bytes]:
    """(namespace, Service) -> its ready-endpoints sample line up to the value, with the space."""
    series = {}
    for line in body.splitlines():
        if line.startswith(READY_ENDPOINTS):
            prefix = line[: line.rindex(b" ") + 1]
            labels = {key.decode(): value.decode() for key, value in SERVICE_LABELS.findall(prefix)}
            series[labels["namespace"], labels["service"]] = prefix
    return series


def sample_value(body: bytes, prefix: bytes) -> float | None:
    start = body.find(prefix)
    if start < 0:
        return None
    start += len(prefix)
    end = body.find(b"\n", start)
    return float(body[start : end if end >= 0 else len(body)].split(b" ", 1)[0])


def share_samples(body: bytes) -> dict[bytes, bytes]:
    """Every sample of the families a CPU-share move changes: series -> value text."""
    samples = {}
    for family in SHARE_FAMILIES:
        start = body.find(b"\n" + family + b"{")
        if start < 0:
            continue
        end = body.find(b"\n#", start + 1)
        for line in body[start + 1 : end if end >= 0 else len(body)].splitlines():
            if line.startswith(family + b"{"):
                series, _, value = line.rpartition(b" ")
                samples[series] = value
    return samples
