"""The store publishes whole states: a relist is never seen half applied."""

from __future__ import annotations

import threading
from collections.abc import Callable

from exporter.engine import EndpointSlice
from exporter.state.store import ClusterStore
from exporter.vocabulary import ControllerEvent, Resource
from tests.engine.builders import endpoint, endpoint_slice

SERVICES = [f"svc-{index}" for index in range(10)]
SLICES_PER_SERVICE = 3
RELISTS = 300


def _generation(number: int) -> list[EndpointSlice]:
    """Every slice of every Service, named after the relist that produced it."""
    return [
        endpoint_slice(endpoint("zone-a"), service=name, name=f"{name}-g{number}-{index}")
        for name in SERVICES
        for index in range(SLICES_PER_SERVICE)
    ]


def _events(number: int) -> list[ControllerEvent]:
    return [
        ControllerEvent(f"uid-{name}", "default", name, "TopologyAwareHintsDisabled", number, None)
        for name in SERVICES
    ]


def _watch_states(
    store: ClusterStore, check: Callable[[], None], done: threading.Event
) -> tuple[threading.Thread, list[BaseException], list[int]]:
    """A listener that checks every state the store publishes until `done`."""
    failures: list[BaseException] = []
    seen = [0]

    def listen() -> None:
        while not done.is_set() or store.wait_for_changes(0):
            if store.wait_for_changes(0.01):
                seen[0] += 1
                try:
                    check()
                except AssertionError as error:
                    failures.append(error)
                    return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    return thread, failures, seen


def test_endpoint_slice_relists_are_published_whole() -> None:
    """Every published state holds each Service's slices of exactly one relist, all three."""
    store = ClusterStore()
    store.replace_endpoint_slices(_generation(0))

    def check() -> None:
        for key, (_, slices) in store.take_changes().services.items():
            generations = {endpoint_slice.name.split("-")[2] for endpoint_slice in slices}
            assert len(slices) == SLICES_PER_SERVICE, (key, [s.name for s in slices])
            assert len(generations) == 1, (key, [s.name for s in slices])

    done = threading.Event()
    listener, failures, seen = _watch_states(store, check, done)
    for number in range(1, RELISTS + 1):
        store.replace_endpoint_slices(_generation(number))
    done.set()
    listener.join(timeout=30)
    assert not failures, failures[0]
    assert seen[0] > 0
    assert store.counts()[Resource.ENDPOINT_SLICES] == len(SERVICES) * SLICES_PER_SERVICE


def test_event_replaces_are_published_whole() -> None:
    """Readers never see the events of two relists mixed."""
    store = ClusterStore()
    store.replace_events(_events(0))

    def check() -> None:
        store.take_changes()
        counts = {event.count for event in store.events()}
        assert len(counts) == 1, counts

    done = threading.Event()
    listener, failures, seen = _watch_states(store, check, done)
    for number in range(1, RELISTS + 1):
        store.replace_events(_events(number))
    done.set()
    listener.join(timeout=30)
    assert not failures, failures[0]
    assert seen[0] > 0
    assert {event.count for event in store.events()} == {RELISTS}
