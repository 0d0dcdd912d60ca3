from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from exporter.run.serve import Exporter, ServeOptions
from exporter.sources.informer import InformerSettings
from exporter.sources.kubeapi import Timeouts
from tests.k8s_objects import endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI
from tests.scrape import Scrape, base_url, running_exporter, scrape, wait_until

# Short timeouts and backoffs: the scenarios exercise recovery, they should not wait for it.
FAST = InformerSettings(
    page_size=50,
    watch_timeout_seconds=30,
    timeouts=Timeouts(connect=1.0, read=3.0),
    backoff_initial=0.05,
    backoff_max=0.3,
    forbidden_retry=0.3,
    relist_backoff_initial=0.05,
    # These scenarios exercise LIST then WATCH (what a server without WatchList gets);
    # streaming lists have their own tests (tests/live/test_api_cost.py).
    streaming_list=False,
)

StartExporter = Callable[..., AbstractContextManager[Exporter]]


@pytest.fixture
def start_exporter(kube_api: FakeKubeAPI, kubeconfig: Path) -> StartExporter:
    """An in-process exporter watching `kube_api` through the real kubernetes client."""

    @contextmanager
    def start(*, wait_ready: bool = True, **options: object) -> Iterator[Exporter]:
        serve_options = ServeOptions(
            listen_address="127.0.0.1:0",
            kubeconfig=str(kubeconfig),
            context="fake",
            **{"informer": FAST, **options},  # type: ignore[arg-type]
        )
        with running_exporter(serve_options) as exporter:
            if wait_ready:
                wait_until(lambda: exporter.readiness()[0])
            yield exporter

    return start


def eventually(
    exporter: Exporter, check: Callable[[Scrape], bool], timeout: float = 15.0
) -> Scrape:
    """Scrape until `check` holds; return that scrape (fails with the last one's text)."""
    last: list[Scrape] = []

    def holds() -> bool:
        last[:] = [scrape(base_url(exporter))]
        return check(last[0])

    try:
        wait_until(holds, timeout=timeout, interval=0.05)
    except AssertionError:
        text = last[0].text if last else "<no scrape>"
        relevant = "\n".join(line for line in text.splitlines() if "topology_hints_" in line)
        raise AssertionError(f"condition not reached; last scrape:\n{relevant}") from None
    return last[0]


# -- a small cluster and what tests read of its scrapes (shared by the fault tests) --------------


def web_cluster() -> list[dict[str, object]]:
    """Three zones and one `auto` Service, shop/web, with nine endpoints."""
    return [
        *three_zone_nodes(),
        service("shop", "web", topology_mode="Auto"),
        endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
    ]


def restarts(result: Scrape, resource: str, cause: str) -> float:
    return result.value("topology_hints_watch_restarts_total", resource=resource, cause=cause) or 0


def exported(result: Scrape, name: str) -> bool:
    return bool(result.labelled("topology_hints_service_info", namespace="shop", service=name))


def add_late_service(api: FakeKubeAPI) -> None:
    """A Service (with its slice: exported Services have endpoints) added while watched."""
    api.apply(endpoint_slice("shop", "late-1", "late", zone_endpoints(3, prefix="10.0.9")))
    api.apply(service("shop", "late", topology_mode="Auto"))
