"""Fixtures of the real control plane: one per test session (and one per emulated version
a test asks for), started on 127.0.0.1 free ports and always stopped."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI, require_binary
from tests.realcluster.binaries import KubeBinaries, kube_binaries
from tests.realcluster.cluster import RealCluster
from tests.realcluster.controlplane import ControlPlane, ControlPlaneSettings, started


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`), a real-cluster module runs on one worker:
    its tests share that worker's control planes (Nodes are cluster-scoped, so one node
    set at a time), and no other worker starts planes for it."""
    here = Path(__file__).parent
    for item in items:
        if item.path.parent == here:
            item.add_marker(pytest.mark.xdist_group(f"real-{item.path.stem}"))


@pytest.fixture(scope="session")
def binaries() -> KubeBinaries:
    """The pinned upstream binaries: missing fails in CI (make test builds them), else skips."""
    found = kube_binaries()
    missing = found.missing()
    if missing:
        message = f"{', '.join(missing)} not built in {found.folder}: run `make kube-binaries`"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    require_binary("openssl")
    return found


@pytest.fixture(scope="session")
def control_plane_factory(
    binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[ControlPlaneSettings], ControlPlane]]:
    """Control planes by settings, each started once per session on first use."""
    planes: dict[ControlPlaneSettings, ControlPlane] = {}
    with contextlib.ExitStack() as stack:

        def plane(settings: ControlPlaneSettings) -> ControlPlane:
            if settings not in planes:
                folder = tmp_path_factory.mktemp("control-plane")
                planes[settings] = stack.enter_context(started(binaries, settings, folder))
            return planes[settings]

        yield plane


@pytest.fixture(scope="session")
def control_plane(
    control_plane_factory: Callable[[ControlPlaneSettings], ControlPlane],
) -> ControlPlane:
    """The session's control plane at the pinned release, no emulation, default gates."""
    return control_plane_factory(ControlPlaneSettings())


@pytest.fixture
def real_cluster(control_plane: ControlPlane) -> Iterator[RealCluster]:
    """The suite's admin client on the session's control plane."""
    cluster = RealCluster(control_plane)
    try:
        yield cluster
    finally:
        cluster.close()
