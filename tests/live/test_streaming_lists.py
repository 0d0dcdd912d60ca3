"""Streaming lists that do not end as they should, and lists that cannot complete (issue 30:
5, 6, 9), and a resumed watch on a server without bookmarks.

The test API server (tests/kubeapi) sends a streaming list's end bookmark never or before the
objects (`misorder_initial_events`), answers 410 to every LIST (`fail`), or sends no
periodic bookmark (`bookmark_interval` of an hour, as kube-apiserver --watch-cache=false).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from structlog.testing import capture_logs

from exporter.run.serve import Exporter
from tests.k8s_objects import node
from tests.kubeapi import FakeKubeAPI
from tests.live.conftest import FAST, StartExporter, eventually, restarts, web_cluster
from tests.scrape import Scrape, base_url, http_get, wait_until

STREAMING = dataclasses.replace(FAST, streaming_list=True)


def _informer(exporter: Exporter, resource: str) -> Any:
    wait_until(lambda: any(i.spec.resource == resource for i in exporter.informers))
    return next(i for i in exporter.informers if i.spec.resource == resource)


@contextmanager
def _modified_without_end(api: FakeKubeAPI) -> Iterator[None]:
    """node-a-0 modified again and again (its labels change), until the block ends."""
    done = threading.Event()

    def churn() -> None:
        count = 0
        while not done.is_set():
            count += 1
            changed = node("node-a-0", "zone-a")
            changed["metadata"]["labels"]["example.com/churn"] = str(count)
            api.apply(changed)
            done.wait(0.002)

    thread = threading.Thread(target=churn, name="churn", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)


def _warnings(
    logs: list[MutableMapping[str, Any]], resource: str
) -> list[MutableMapping[str, Any]]:
    return [
        line for line in logs if line["log_level"] == "warning" and line.get("resource") == resource
    ]


# -- 5: an initial list that never ends ----------------------------------------------------------


def test_a_never_ending_initial_list_holds_its_objects_not_its_events_and_is_named(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """No end bookmark while a Node changes without end: the list holds 3 Nodes however many
    events come; after the bound, /readyz names it and one warning says so; once the server
    ends its lists again the exporter is ready."""
    kube_api.load(web_cluster())
    kube_api.misorder_initial_events("nodes", "never")
    settings = dataclasses.replace(STREAMING, watch_silence_seconds=1.0)
    with (
        capture_logs() as logs,
        _modified_without_end(kube_api),
        start_exporter(informer=settings, wait_ready=False) as exporter,
    ):
        informer = _informer(exporter, "nodes")
        wait_until(lambda: informer.problem is not None, timeout=15)
        listing = informer._initial
        assert listing is not None
        assert listing.events > 100
        assert len(listing.objects) == 3
        ready, text = exporter.readiness()
        assert not ready
        assert (
            "- nodes: its streaming list has not ended: no end-of-list bookmark after 1 s" in text
        )
        wait_until(lambda: informer._initial is not None and informer._initial.events > 500)
        assert len(informer._initial.objects) == 3
        stalled = [w for w in _warnings(logs, "nodes") if w.get("cause") == "stalled"]
        assert len(stalled) == 1, stalled
        assert "events for 3 objects" in stalled[0]["error"]
        kube_api.clear_faults()
        kube_api.drop_watches("nodes")
        wait_until(lambda: exporter.readiness()[0], timeout=15)
    assert informer.problem is None


# -- 6: an end bookmark before the objects -------------------------------------------------------


def test_an_end_bookmark_before_the_objects_is_not_the_end_of_the_list(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """The bookmark first, the Nodes after it at older resourceVersions: ready with the
    3 Nodes, not with none (every Service refused), no flip counted, and the log says so."""
    kube_api.load(web_cluster())
    kube_api.misorder_initial_events("nodes", "first")
    with capture_logs() as logs, start_exporter(informer=STREAMING) as exporter:
        result = eventually(exporter, lambda r: bool(r.labelled("topology_hints_service_info")))
    (ready,) = [line for line in logs if line["event"] == "ready"]
    assert ready["nodes"] == 3
    assert _changes(result) == 0
    assert any(
        "end bookmark came before its objects" in w["event"] for w in _warnings(logs, "nodes")
    )


def _changes(result: Scrape) -> float:
    return (
        result.value("topology_hints_service_state_changes_total", namespace="shop", service="web")
        or 0
    )


# -- 9: a list refused, then 410 on every LIST ---------------------------------------------------


def test_lists_answered_410_again_and_again_are_named_with_their_cause(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """422 to the streaming list, then 410 Gone to every LIST: not ready, and /readyz and
    one warning say why (it used to say "reading the first complete list", logs info only)."""
    kube_api.load(web_cluster())
    kube_api.watch_list = False
    kube_api.fail("nodes", 410, times=None, verbs=("list",))
    with capture_logs() as logs, start_exporter(informer=STREAMING, wait_ready=False) as exporter:
        wait_until(lambda: "410 Gone" in exporter.readiness()[1], timeout=15)
        ready, text = exporter.readiness()
        assert not ready
        assert (
            "- nodes: its list cannot complete: LIST answered 410 Gone 3 times "
            "(the streaming list was refused with HTTP 422)"
        ) in text
        assert "reading the first complete list" not in text.split("- nodes")[1].split("\n")[0]
        expired = [w for w in _warnings(logs, "nodes") if w.get("cause") == "expired"]
        assert len(expired) == 1, expired
        wait_until(lambda: "410 Gone 5 times" in exporter.readiness()[1], timeout=15)
        assert len([w for w in _warnings(logs, "nodes") if w.get("cause") == "expired"]) == 1
        kube_api.clear_faults()
        wait_until(lambda: exporter.readiness()[0], timeout=15)


# -- b: a resumed watch on a server without bookmarks --------------------------------------------


def test_a_resumed_watch_is_up_without_waiting_for_an_event_when_no_bookmark_comes(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """kube-apiserver --watch-cache=false sends no bookmark: a watch resumed after an outage
    in a quiet cluster is up once the server accepts it (it stayed 0 until the next event:
    TopologyHintsExporterWatchDown after 5 quiet minutes)."""
    kube_api.load(web_cluster())
    kube_api.bookmark_interval = 3600
    with start_exporter() as exporter:
        kube_api.wait_for_watches("services")
        kube_api.down()
        down = eventually(
            exporter, lambda r: r.value("topology_hints_watch_up", resource="services") == 0
        )
        events = down.value("topology_hints_watch_events_total", resource="services") or 0
        kube_api.up()
        up = eventually(
            exporter, lambda r: r.value("topology_hints_watch_up", resource="services") == 1
        )
        assert (up.value("topology_hints_watch_events_total", resource="services") or 0) == events
        assert http_get(base_url(exporter) + "/readyz")[1].strip() == "ready"


def test_a_watch_resumed_after_an_error_is_up_once_it_stayed_open_without_bookmarks(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """An error the server answered for the resourceVersion: the next watch it accepts is up
    once it has stayed open for the silence bound (not at once: a server that answers every
    resume with an error would make watch_up flap, and log each time)."""
    kube_api.load(web_cluster())
    kube_api.bookmark_interval = 3600
    settings = dataclasses.replace(FAST, watch_silence_seconds=1.0)
    with start_exporter(informer=settings) as exporter:
        kube_api.wait_for_watches("services")
        kube_api.fail("services", 500, times=1, verbs=("watch",))
        kube_api.drop_watches("services")
        failed = eventually(exporter, lambda r: restarts(r, "services", "error") >= 1)
        events = failed.value("topology_hints_watch_events_total", resource="services") or 0
        up = eventually(
            exporter, lambda r: r.value("topology_hints_watch_up", resource="services") == 1
        )
        assert (up.value("topology_hints_watch_events_total", resource="services") or 0) == events


def test_a_streaming_list_s_end_bookmark_does_not_make_a_quiet_watch_a_stalled_one(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """The end bookmark is no sign of periodic ones: without them a quiet watch is reopened
    as closed, never reported stalled."""
    kube_api.load(web_cluster())
    kube_api.bookmark_interval = 3600
    settings = dataclasses.replace(STREAMING, watch_silence_seconds=0.5)
    with start_exporter(informer=settings) as exporter:
        result = eventually(exporter, lambda r: restarts(r, "services", "closed") >= 2)
        assert restarts(result, "services", "stalled") == 0
        assert result.value("topology_hints_watch_up", resource="services") == 1


def test_an_empty_streaming_list_ends_without_periodic_bookmarks(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """No Event, and no bookmark after the end bookmark: the Events list is complete once the
    watch has been silent for the bound (it waits for a line past its end bookmark)."""
    kube_api.load(web_cluster())
    kube_api.bookmark_interval = 3600
    settings = dataclasses.replace(STREAMING, watch_silence_seconds=1.0)
    with start_exporter(informer=settings) as exporter:
        informer = _informer(exporter, "events")
        wait_until(informer.synced.is_set, timeout=15)
        assert informer.problem is None
        # Resumed from the end bookmark, not listed again.
        wait_until(lambda: sum(1 for r in kube_api.requests if r.resource == "events") >= 2)
        assert sum(1 for r in kube_api.requests if r.resource == "events" and r.streaming_list) == 1
