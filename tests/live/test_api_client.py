"""The informers against a misbehaving API server: throttling, wedged resumes, odd events.

Each test drives the real `kubernetes` client of an in-process exporter through the test API
server (tests/kubeapi), which injects the fault.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.k8s_objects import endpoint_slice, zone_endpoints
from tests.kubeapi import FakeKubeAPI, Request
from tests.live.conftest import (
    FAST,
    StartExporter,
    add_late_service,
    eventually,
    exported,
    restarts,
    web_cluster,
)
from tests.processes import serving
from tests.scrape import http_get, wait_until


def _service_requests(api: FakeKubeAPI) -> list[Request]:
    return [request for request in api.requests if request.resource == "services"]


def _lists(requests: list[Request]) -> list[Request]:
    return [request for request in requests if not request.watch]


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_waited_as_told(
    kube_api: FakeKubeAPI, start_exporter: StartExporter, status: int
) -> None:
    """A 429/503 with Retry-After: 2 is retried after 2 s, not after the 0.3 s backoff."""
    kube_api.load(web_cluster())
    kube_api.throttle("services", retry_after=2, status=status, times=1)
    with start_exporter() as exporter:
        result = eventually(exporter, lambda r: restarts(r, "services", "throttled") == 1)
        assert restarts(result, "services", "error") == 0
    first, second = _lists(_service_requests(kube_api))[:2]
    waited = second.received - first.received
    assert 2.0 <= waited < 2.0 + FAST.backoff_max + 1.0, waited
    assert kube_api.throttled == 1


def test_repeated_throttling_backs_off_and_recovers(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Three 429s in a row on a watch: each counted as throttled, each waited, then healthy."""
    kube_api.load(web_cluster())
    with start_exporter() as exporter:
        kube_api.wait_for_watches("endpointslices")
        kube_api.throttle("endpointslices", retry_after=1, times=3)
        kube_api.drop_watches("endpointslices")
        kube_api.apply(endpoint_slice("shop", "web-1", "web", zone_endpoints(6)))
        result = eventually(
            exporter,
            lambda r: (
                r.value("topology_hints_service_ready_endpoints", namespace="shop", service="web",
                        address_type="IPv4") == 6
            ),
        )  # fmt: skip
        assert restarts(result, "endpointslices", "throttled") == 3
    watches = [
        request
        for request in kube_api.requests
        if request.resource == "endpointslices" and request.watch
    ]
    gaps = [later.received - earlier.received for earlier, later in itertools.pairwise(watches[1:])]
    assert all(gap >= 1.0 for gap in gaps[:3]), gaps


def test_malformed_bookmark_version_relists_instead_of_wedging(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """A bookmark with resourceVersion "abc": resumes get 400; after three, a relist heals it."""
    kube_api.load(web_cluster())
    # Only the injected bookmark, so that counting BOOKMARK events tells when it arrived.
    kube_api.bookmark_interval = 3600
    with start_exporter() as exporter:
        kube_api.wait_for_watches("services")
        bookmark = {"kind": "Service", "apiVersion": "v1", "metadata": {"resourceVersion": "abc"}}
        kube_api.inject_event("services", "BOOKMARK", bookmark)
        eventually(
            exporter,
            lambda r: (
                (
                    r.value(
                        "topology_hints_watch_events_total", resource="services", type="BOOKMARK"
                    )
                    or 0
                )
                >= 1
            ),
        )
        kube_api.drop_watches("services")
        add_late_service(kube_api)
        result = eventually(exporter, lambda r: exported(r, "late"))
        assert restarts(result, "services", "error") >= FAST.resume_attempts
    resumes = [r for r in _service_requests(kube_api) if r.query.get("resourceVersion") == "abc"]
    assert len(resumes) == FAST.resume_attempts
    assert len(_lists(_service_requests(kube_api))) == 2


def test_undecodable_event_replayed_on_every_resume_relists(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """A DELETED event whose object cannot be decoded comes back on each resume: relist."""
    kube_api.load(web_cluster())
    with start_exporter() as exporter:
        kube_api.wait_for_watches("services")
        kube_api.inject_event("services", "DELETED", b'{"metadata": 17}')
        add_late_service(kube_api)
        result = eventually(exporter, lambda r: exported(r, "late"))
        assert restarts(result, "services", "error") >= FAST.resume_attempts
        assert exported(result, "web")
    assert len(_lists(_service_requests(kube_api))) == 2


def test_objects_of_another_kind_are_counted_invalid_and_skipped(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """A Pod on the Services watch is neither stored as a Service nor deletes one."""
    kube_api.load(web_cluster())

    def pod(name: str) -> dict[str, object]:
        return {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "shop", "resourceVersion": "1"},
            "spec": {"containers": [{"name": "app", "image": "app:1"}]},
        }

    with start_exporter() as exporter:
        kube_api.wait_for_watches("services")
        kube_api.inject_event("services", "ADDED", pod("intruder"))
        kube_api.inject_event("services", "DELETED", pod("web"))
        add_late_service(kube_api)
        result = eventually(exporter, lambda r: exported(r, "late"))
        assert not exported(result, "intruder")
        assert exported(result, "web")
        assert result.value("topology_hints_invalid_objects_total", resource="services") == 2
        assert restarts(result, "services", "error") == 0


def test_unknown_event_types_share_one_series(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """300 unknown event types are counted under type="other": no new series."""
    kube_api.load(web_cluster())
    with start_exporter() as exporter:
        kube_api.wait_for_watches("services")
        for index in range(300):
            kube_api.inject_event("services", f"WEIRD-{index}", {"metadata": {"name": "x"}})
        result = eventually(
            exporter,
            lambda r: (
                r.value("topology_hints_watch_events_total", resource="services", type="other")
                == 300
            ),
        )
        types = {
            dict(labels)["type"]
            for labels in result.series("topology_hints_watch_events_total")
            if dict(labels)["resource"] == "services"
        }
        assert types == {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "other"}
        assert restarts(result, "services", "error") == 0


@pytest.mark.parametrize("fault", ["throttled", "stalled"])
def test_sigterm_is_honoured_while_waiting_on_the_api(
    kube_api: FakeKubeAPI, kubeconfig: Path, tmp_path: Path, fault: str
) -> None:
    """SIGTERM during a 10-minute Retry-After, or a response that never comes: exit in 5 s."""
    kube_api.load(web_cluster())
    if fault == "throttled":
        kube_api.throttle("services", retry_after=600, times=None)
    else:
        kube_api.stall("services", 600)
    try:
        # Never ready (a resource waits on the API): /healthz tells it is up.
        with serving(
            "--kubeconfig", str(kubeconfig), "--context", "fake", "--log-format", "json",
            ready="/healthz", log=tmp_path / "exporter.log",
            env={**os.environ, "KUBERNETES_SERVICE_HOST": "", "PYTHONFAULTHANDLER": "1"},
        ) as exporter:  # fmt: skip
            process = exporter.process
            assert http_get(f"{exporter.url}/healthz", timeout=2)[0] == 200
            wait_until(lambda: bool(_service_requests(kube_api)), timeout=10)
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                # Still running: its threads' stacks (PYTHONFAULTHANDLER) say where it hangs.
                process.send_signal(signal.SIGABRT)
                process.wait(timeout=10)
                pytest.fail(f"no exit 10 s after SIGTERM:\n{exporter.output()}")
            elapsed = time.monotonic() - started
            output = exporter.output()
            assert process.returncode == 0, output
            assert elapsed < 5, output
            assert "Traceback" not in output
    finally:
        kube_api.clear_faults()
