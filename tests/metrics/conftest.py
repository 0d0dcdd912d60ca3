from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from exporter.run.serve import Exporter, ServeOptions
from tests.k8s_objects import Obj
from tests.scrape import running_exporter, wait_until

ServeSnapshot = Callable[..., AbstractContextManager[Exporter]]


@pytest.fixture
def serve_snapshot(tmp_path: Path) -> ServeSnapshot:
    """Serve a snapshot (a List dict) from an in-process exporter on a free loopback port,
    once it is ready."""

    @contextmanager
    def serve(snapshot: Obj, **options: object) -> Iterator[Exporter]:
        path = tmp_path / "snapshot.json"
        path.write_text(json.dumps(snapshot))
        serve_options = ServeOptions(
            listen_address="127.0.0.1:0",
            snapshot=str(path),
            **options,  # type: ignore[arg-type]
        )
        with running_exporter(serve_options) as exporter:
            # Hint families are exported once the first evaluation is done; a scrape before
            # that (the evaluator thread is slow under load) would find none of them.
            wait_until(lambda: exporter.readiness()[0])
            yield exporter

    return serve
