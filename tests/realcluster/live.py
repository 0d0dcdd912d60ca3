"""The exporter in-process against the real API server, as tests/live runs it against the
test API server: the same ServeOptions, with the short timeouts and backoffs of
tests/live/conftest.py (FAST), so that recovery is quick without waiting on a clock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from exporter.run.serve import Exporter, ServeOptions
from tests.live.conftest import FAST
from tests.realcluster.installed import Credentials
from tests.scrape import running_exporter, wait_until

READY_TIMEOUT = 60.0


@contextmanager
def exporter_as(
    creds: Credentials, *, wait_ready: bool = True, **options: Any
) -> Iterator[Exporter]:
    """An in-process exporter reading the real API server as `creds`' ServiceAccount."""
    serve_options = ServeOptions(
        listen_address="127.0.0.1:0",
        kubeconfig=str(creds.kubeconfig),
        **{"informer": FAST, **options},
    )
    with running_exporter(serve_options) as exporter:
        if wait_ready:
            wait_until(lambda: exporter.readiness()[0], timeout=READY_TIMEOUT)
        yield exporter
