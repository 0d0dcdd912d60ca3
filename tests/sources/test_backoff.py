"""The informer's waits: bounded backoff, Retry-After as the API server sends it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from exporter.sources.kubeapi import api_client, retry_after_seconds
from exporter.sources.retry import Backoff


def test_backoff_grows_to_its_cap_and_stays_there_for_ever() -> None:
    """Thousands of failures in a row (hours of outage) neither overflow nor exceed the cap."""
    backoff = Backoff(0.5, 30.0, random.Random(7))  # noqa: S311 - jitter
    delays = [backoff.next_delay() for _ in range(5000)]
    assert delays[0] <= 0.5
    assert all(15.0 <= delay <= 30.0 for delay in delays[10:])
    backoff.reset()
    assert backoff.next_delay() <= 0.5


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("7", 7.0), (" 120 ", 120.0), ("0", 0.0), (None, None), ("", None), ("-1", None),
     ("1.5", None), ("Wed, 21 Oct 2015 07:28:00 GMT", None), ("9" * 40, None), ("١٢", None)],
)  # fmt: skip
def test_retry_after_header_is_read_as_seconds(header: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(header) == seconds


def test_the_client_leaves_retry_after_to_the_informer(tmp_path: Path) -> None:
    """urllib3 must not sleep on Retry-After itself: stop() could not cut that wait."""
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: c, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: c}}]\n",
        encoding="utf-8",
    )
    client = api_client(str(config), "c")
    try:
        retries = client.configuration.retries
        assert retries.respect_retry_after_header is False
        assert retries.status == 0
    finally:
        client.close()  # type: ignore[no-untyped-call]
