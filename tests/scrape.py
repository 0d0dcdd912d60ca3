"""Scraping a running exporter over HTTP and reading the exposition like Prometheus does."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from exporter.run.serve import Exporter, ServeOptions

SeriesKey = tuple[str, frozenset[tuple[str, str]]]


@dataclass(frozen=True)
class Scrape:
    text: str
    samples: dict[SeriesKey, float]
    families: frozenset[str]

    def value(self, name: str, /, **labels: str) -> float | None:
        return self.samples.get((name, frozenset(labels.items())))

    def series(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        return {labels: value for (sample, labels), value in self.samples.items() if sample == name}

    def labelled(self, name: str, /, **match: str) -> list[dict[str, str]]:
        """Label sets of `name`'s series whose labels include `match`."""
        return [dict(labels) for labels in self.series(name) if set(match.items()) <= set(labels)]


def parse(text: str) -> Scrape:
    samples: dict[SeriesKey, float] = {}
    families = set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return Scrape(text, samples, frozenset(families))


def http_get(url: str, timeout: float = 10.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback test server
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except (urllib.error.URLError, ConnectionError) as error:
        # Not listening (yet, or any more): status 0, as curl reports it.
        return 0, str(error)


def scrape(base_url: str) -> Scrape:
    status, body = http_get(base_url.rstrip("/") + "/metrics")
    assert status == 200, body
    return parse(body)


def wait_until(
    predicate: Callable[[], bool], timeout: float = 15.0, interval: float = 0.02
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached within the deadline")
        time.sleep(interval)


@contextmanager
def running_exporter(options: ServeOptions) -> Iterator[Exporter]:
    """An in-process exporter on a free loopback port, stopped when the block ends."""
    exporter = Exporter(options)
    exporter.start()
    try:
        yield exporter
    finally:
        exporter.stop()


def base_url(exporter: Exporter) -> str:
    return f"http://127.0.0.1:{exporter.server.port}"
