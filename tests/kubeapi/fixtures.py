"""Pytest fixtures for the fake API server; a conftest loads them with
`pytest_plugins = ["tests.kubeapi.fixtures"]`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubeapi.server import FakeKubeAPI


@pytest.fixture
def kube_api() -> Iterator[FakeKubeAPI]:
    """A started FakeKubeAPI on a free 127.0.0.1 port, stopped (and checked bug-free) after."""
    with FakeKubeAPI(bookmark_interval=0.2) as api:
        yield api
    assert not api.errors, f"the fake API server failed: {api.errors!r}"


@pytest.fixture
def kubeconfig(kube_api: FakeKubeAPI, tmp_path: Path) -> Path:
    """A kubeconfig file whose context `fake` points at `kube_api`."""
    return kube_api.write_kubeconfig(tmp_path / "kubeconfig", context="fake")
