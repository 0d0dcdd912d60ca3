"""Watches that wedge, stall or carry what the exporter does not read (issue 22: 5, 10, 12, 14).

Each test drives the real `kubernetes` client of an in-process exporter through the test API
server (tests/kubeapi), which injects the fault.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
import urllib3
from structlog.testing import capture_logs

from exporter.sources.kubeapi import KubeTransport, Timeouts, api_client
from exporter.sources.listing import ClusterReadError, read_cluster
from tests.k8s_objects import endpoint_slice, event, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI, Request
from tests.kubeapi.status import status_body
from tests.live.conftest import (
    FAST,
    StartExporter,
    add_late_service,
    eventually,
    exported,
    restarts,
    web_cluster,
)
from tests.scrape import base_url, http_get


def _lists(api: FakeKubeAPI, resource: str) -> list[Request]:
    return [r for r in api.requests if r.resource == resource and not r.watch]


def _watches(api: FakeKubeAPI, resource: str) -> list[Request]:
    return [r for r in api.requests if r.resource == resource and r.watch]


# -- 5: an error answered on every resume -------------------------------------------------------


def test_error_event_answered_on_every_resume_relists(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """A watch ERROR 500 replayed on each resume: after three resumes, a LIST moves past it.

    As kube-apiserver answers a watch whose history holds an object it cannot decode
    (an encryption key lost: "Internal error occurred: unable to transform key").
    """
    kube_api.load(web_cluster())
    with start_exporter() as exporter:
        kube_api.wait_for_watches("services")
        message = "Internal error occurred: unable to transform key"
        kube_api.inject_event("services", "ERROR", status_body(500, "InternalError", message))
        add_late_service(kube_api)
        result = eventually(exporter, lambda r: exported(r, "late"))
        assert restarts(result, "services", "error") == FAST.resume_attempts
        assert result.value("topology_hints_watch_up", resource="services") == 1
    assert len(_lists(kube_api, "services")) == 2
    resumed_from = [r.query["resourceVersion"] for r in _watches(kube_api, "services")]
    assert len(resumed_from) == 1 + FAST.resume_attempts, resumed_from


# -- 10: staleness ------------------------------------------------------------------------------


def test_a_watch_stalled_mid_event_is_reported_and_restarted(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Half an event, then silence on an open connection: watch_up 0 and /readyz name the
    stall within the silence bound; the watch is reopened from where it was (no LIST)."""
    kube_api.load(web_cluster())
    # The reopened watch waits 1-2 s (backoff), long enough to see the report.
    settings = dataclasses.replace(
        FAST, watch_silence_seconds=1.0, backoff_initial=2.0, backoff_max=2.0
    )
    with start_exporter(informer=settings) as exporter:
        url = base_url(exporter)
        kube_api.wait_for_watches("services")
        eventually(
            exporter,
            lambda r: (r.value("topology_hints_watch_events_total", resource="services",
                               type="BOOKMARK") or 0) >= 1,
        )  # fmt: skip
        assert kube_api.stall_watches("services", b'{"type":"MODIFIED","object":{"kind":"Se') == 1
        add_late_service(kube_api)
        stalled = eventually(
            exporter, lambda r: r.value("topology_hints_watch_up", resource="services") == 0
        )
        assert restarts(stalled, "services", "stalled") == 1
        status, body = http_get(url + "/readyz")
        assert status == 200, body
        assert "- services: its watch went silent" in body
        healed = eventually(
            exporter,
            lambda r: (
                exported(r, "late") and r.value("topology_hints_watch_up", resource="services") == 1
            ),
        )
        assert restarts(healed, "services", "error") == 0
        assert http_get(url + "/readyz")[1].strip() == "ready"
    assert len(_lists(kube_api, "services")) == 1


def test_a_quiet_watch_without_bookmarks_is_reopened_silently(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """A server that sends no bookmarks is silent while nothing changes: that is no stall."""
    kube_api.load(web_cluster())
    kube_api.bookmark_interval = 3600
    settings = dataclasses.replace(FAST, watch_silence_seconds=0.5)
    with start_exporter(informer=settings) as exporter:
        result = eventually(exporter, lambda r: restarts(r, "services", "closed") >= 2)
        assert result.value("topology_hints_watch_up", resource="services") == 1
        assert restarts(result, "services", "stalled") == 0
        add_late_service(kube_api)
        eventually(exporter, lambda r: exported(r, "late"))
    assert len(_lists(kube_api, "services")) == 1


def test_a_list_the_server_never_answers_is_tried_once(
    kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    """A read timeout is not retried by urllib3: one request, one timeout, reported at once.

    (urllib3's default retried it three times: 4 x 60 s before /readyz named the resource.)
    """
    kube_api.load(web_cluster())
    kube_api.stall("nodes", 600)
    transport = KubeTransport(api_client(str(kubeconfig), "fake"))
    try:
        with pytest.raises(urllib3.exceptions.ReadTimeoutError):
            transport.get("/api/v1/nodes", [("limit", "500")], Timeouts(connect=1.0, read=0.3))
    finally:
        transport.close()
        kube_api.clear_faults()
    assert len(_lists(kube_api, "nodes")) == 1


def test_a_list_that_trickles_in_is_bounded(kube_api: FakeKubeAPI, kubeconfig: Path) -> None:
    """A LIST page whose bytes each come within the read timeout still ends at Timeouts.body."""
    kube_api.load(web_cluster())
    kube_api.trickle("nodes", 0.05)  # 16 bytes per 50 ms: the page would take ~10 s
    started = time.monotonic()
    with pytest.raises(ClusterReadError, match="took longer than 1 s"):
        read_cluster(str(kubeconfig), "fake", timeouts=Timeouts(connect=1.0, read=1.0, body=1.0))
    # The bound is what this test is about: 1 s of body, plus a margin for a loaded machine.
    assert time.monotonic() - started < 5


def test_a_stalled_relist_is_named_by_readyz(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Ready, then a relist the server never answers: /readyz names it after one read timeout
    (3 s here), after one try (urllib3 retried it three times: four read timeouts)."""
    kube_api.load(web_cluster())
    # The next try waits 2.5-5 s: the LISTs counted below are those before the report.
    settings = dataclasses.replace(FAST, backoff_initial=5.0, backoff_max=5.0)
    with start_exporter(informer=settings) as exporter:
        url = base_url(exporter)
        kube_api.wait_for_watches("nodes")
        kube_api.stall("nodes", 600, verbs=("list",))
        kube_api.load(three_zone_nodes())  # the nodes watch ends with 410: list again
        result = eventually(
            exporter, lambda r: r.value("topology_hints_watch_up", resource="nodes") == 0
        )
        assert restarts(result, "nodes", "expired") == 1
        assert restarts(result, "nodes", "error") == 1
        assert len(_lists(kube_api, "nodes")) == 2  # the first list, and one stalled try
        status, body = http_get(url + "/readyz")
        assert status == 200
        assert "- nodes: the API server cannot be reached, or its answer cannot be read" in body
        kube_api.clear_faults()
        eventually(exporter, lambda r: r.value("topology_hints_watch_up", resource="nodes") == 1)


# -- 12: long watch lines -----------------------------------------------------------------------


def _annotated_service(name: str, annotation_bytes: int) -> dict[str, Any]:
    obj = service("shop", name, topology_mode="Auto")
    obj["metadata"]["annotations"]["example.com/blob"] = "x" * annotation_bytes
    return obj


def test_an_event_over_the_line_limit_is_skipped_counted_and_logged_once(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Two watch events longer than max_line_bytes: each skipped and counted as an invalid
    object, one warning for both; the watch goes on (no restart) and later changes arrive."""
    kube_api.load(web_cluster())
    settings = dataclasses.replace(FAST, max_line_bytes=64 * 1024)
    with capture_logs() as logs, start_exporter(informer=settings) as exporter:
        kube_api.wait_for_watches("services")
        kube_api.apply(endpoint_slice("shop", "huge-1", "huge", zone_endpoints(3)))
        kube_api.apply(_annotated_service("huge", 100 * 1024))
        kube_api.apply(_annotated_service("huge", 200 * 1024))
        add_late_service(kube_api)
        result = eventually(exporter, lambda r: exported(r, "late"))
        assert not exported(result, "huge")
        assert result.value("topology_hints_invalid_objects_total", resource="services") == 2
        for cause in ("error", "stalled", "expired"):
            assert restarts(result, "services", cause) == 0
    warnings = [
        entry for entry in logs if entry["event"] == "skipping watch events longer than the limit"
    ]
    assert len(warnings) == 1, warnings
    assert warnings[0]["resource"] == "services"
    assert warnings[0]["limit"] == 64 * 1024
    assert warnings[0]["bytes"] > 100 * 1024
    assert len(_lists(kube_api, "services")) == 1


# -- 14: Events the exporter does not read -----------------------------------------------------


def _event(name: str, reason: str, message: str) -> dict[str, Any]:
    obj = event("shop", name, "web", reason)
    obj["message"] = message
    return obj


def test_events_of_other_reasons_are_ignored_silently_whatever_their_size(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Service Events with 100 KiB messages or 300-character reasons, listed or watched: not
    invalid, not logged; a hint event with a long message is still read."""
    kube_api.load(
        [
            *web_cluster(),
            _event("web.listed-backoff", "FailedToUpdateEndpoint", "m" * 100 * 1024),
            _event("web.listed-hint", "TopologyAwareHintsDisabled", "h" * 100 * 1024),
        ]
    )
    with capture_logs() as logs, start_exporter() as exporter:
        eventually(
            exporter,
            lambda r: (
                r.value("topology_hints_controller_events_total",
                        reason="TopologyAwareHintsDisabled") == 1
            ),
        )  # fmt: skip
        kube_api.wait_for_watches("events")
        kube_api.apply(_event("web.watched-long", "SyncLoadBalancerFailed", "w" * 100 * 1024))
        kube_api.apply(_event("web.watched-reason", "R" * 300, "short"))
        kube_api.apply(_event("web.watched-hint", "TopologyAwareHintsEnabled", "e" * 100 * 1024))
        result = eventually(
            exporter,
            lambda r: (
                r.value("topology_hints_controller_events_total",
                        reason="TopologyAwareHintsEnabled") == 1
            ),
        )  # fmt: skip
        assert (result.value("topology_hints_invalid_objects_total", resource="events") or 0) == 0
    assert [entry for entry in logs if entry["event"] == "skipping invalid object"] == []
