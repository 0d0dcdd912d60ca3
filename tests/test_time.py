"""Code that reads the clock or chance, pinned with freezegun and seeded randomness."""

from __future__ import annotations

import random

from freezegun import freeze_time

from exporter.metrics.instruments import StatusCollector
from exporter.pipeline.evaluator import Evaluator
from exporter.sources.controller_events import controller_event_from_raw
from exporter.sources.decode import RawEvent
from exporter.sources.retry import Backoff
from exporter.state.store import ClusterStore
from tests.k8s_objects import event


@freeze_time("2026-11-29 12:00:00", tz_offset=0)
def test_last_evaluation_timestamp_is_the_clock_at_evaluation() -> None:
    """The state records when it was evaluated, and the status collector exports that time."""
    evaluator = Evaluator(ClusterStore())
    state = evaluator.step()
    assert state.evaluated_at == 1795953600.0
    collector = StatusCollector(dict, lambda: evaluator.state, lambda: True)
    (timestamp,) = [
        m for m in collector.collect() if m.name.endswith("evaluation_timestamp_seconds")
    ]
    assert timestamp.samples[0].value == 1795953600.0


def test_event_timestamps_prefer_the_latest_occurrence() -> None:
    """lastTimestamp wins over eventTime and firstTimestamp; all are RFC 3339 in UTC."""
    raw = event("shop", "web.1", "web", "TopologyAwareHintsDisabled", count=4,
                last_timestamp="2026-11-29T12:00:00Z")  # fmt: skip
    raw["firstTimestamp"] = "2026-11-29T08:00:00Z"
    import msgspec  # noqa: PLC0415

    converted = controller_event_from_raw(msgspec.convert(raw, RawEvent))
    assert converted is not None
    assert converted.timestamp == 1795953600.0
    assert converted.count == 4
    raw["lastTimestamp"] = None
    raw["eventTime"] = "2026-11-29T09:30:00.000000Z"
    assert controller_event_from_raw(msgspec.convert(raw, RawEvent)).timestamp == 1795944600.0  # type: ignore[union-attr]


def test_backoff_doubles_with_jitter_up_to_the_cap_and_resets() -> None:
    """Each delay lies in [ceiling/2, ceiling], the ceiling doubles to the cap, reset restarts."""
    backoff = Backoff(0.5, 8.0, random.Random(1))  # noqa: S311 - a seeded test RNG
    ceilings = [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    delays = [backoff.next_delay() for _ in ceilings]
    for delay, ceiling in zip(delays, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling
    assert len(set(delays)) == len(delays), "no jitter"
    backoff.reset()
    assert 0.25 <= backoff.next_delay() <= 0.5
