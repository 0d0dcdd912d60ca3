"""The container image: built from the repository's Dockerfile and run locked down.

No Docker engine and no registry: a Debian base with Python is made with mmdebstrap (its
tarball is cached between runs), imported with podman, the Dockerfile is built on it with
buildah, and the image is run with podman and runc. Everything lives in a private container
storage under a temporary directory, removed when the module ends, so no container, image,
layer mount or network outlives the tests.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from exporter import __version__
from tests.conftest import EXAMPLES_DIR, IN_CI, PROJECT_ROOT, require_binary
from tests.processes import free_port
from tests.scrape import http_get, wait_until

pytestmark = [
    pytest.mark.image,
    # One worker builds the image once for the module (each worker would build its own).
    pytest.mark.xdist_group("image"),
    # A cold run makes the base (a few minutes of downloads) before the first test.
    pytest.mark.timeout(1800),
]

TOOLS = ("mmdebstrap", "podman", "buildah", "runc", "promtool")
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / (
    "topology-hints-exporter"
)
# A stand-in for the Dockerfile's default base: Debian's own Python, no pip or apt at run
# time, no documentation. The essential variant is what dpkg needs; python3-venv brings the
# ensurepip wheels the builder stage uses.
MMDEBSTRAP_ARGS = (
    "--variant=essential",
    "--include=python3,python3-venv",
    *(
        f"--dpkgopt=path-exclude=/usr/share/{folder}/*"
        for folder in ("doc", "man", "info", "locale")
    ),
    # Debian images have /etc/mtab; without it podman adds one to the container, and the
    # root filesystem would seem to change under the exporter.
    '--customize-hook=ln -sf ../proc/self/mounts "$1/etc/mtab"',
    "--format=tar",
    "bookworm",
)
# An imported tarball has no configuration; a real Python base image sets at least PATH.
BASE_CHANGES = ("ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
SNAPSHOT = EXAMPLES_DIR / "demo-cluster.json"
# The examples are mounted on a folder every Debian-based image has: a mount point podman had
# to create would itself show up as a change to the root filesystem.
EXAMPLES_IN_CONTAINER = "/mnt"
NOBODY = 65534
# This sandbox cannot grant podman's default limits (nofile 1048576); the exporter needs few.
ULIMITS = ("--ulimit=nofile=1024:1024", "--ulimit=nproc=1024:1024")
STOP_DEADLINE = 5.0


@dataclass(frozen=True)
class Engine:
    """podman and buildah on one private storage, with the machine's pip configuration."""

    root: Path

    def global_options(self) -> list[str]:
        return [
            f"--root={self.root / 'storage'}",
            f"--runroot={self.root / 'run'}",
        ]

    def podman(
        self, *args: str, timeout: float = 120.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        command = [
            "podman",
            *self.global_options(),
            f"--tmpdir={self.root / 'libpod'}",
            # Private network definitions too: `system reset` removes every network it sees.
            f"--network-config-dir={self.root / 'networks'}",
            "--runtime=runc",
            "--events-backend=file",
            *args,
        ]
        return run(command, timeout=timeout, check=check)

    def buildah(
        self, *args: str, timeout: float = 900.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return run(["buildah", *self.global_options(), *args], timeout=timeout, check=check)


def run(
    command: list[str], *, timeout: float, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run COMMAND; a failure shows its output (a build log is the only clue there is)."""
    completed = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=timeout
    )
    if check and completed.returncode != 0:
        pytest.fail(
            f"{' '.join(command[:4])} ... exited {completed.returncode}\n"
            f"{completed.stdout[-4000:]}\n{completed.stderr[-4000:]}"
        )
    return completed


def require_tools() -> None:
    """Missing tools fail in CI (.ci/run installs them) and skip elsewhere."""
    for tool in TOOLS:
        require_binary(tool)
    if os.geteuid() != 0 and not IN_CI:
        pytest.skip("building images needs root here (rootless podman needs /etc/subuid ranges)")


def base_tarball() -> Path:
    """The Debian base as a tarball, made once and cached under ~/.cache."""
    key = hashlib.sha256("\0".join(MMDEBSTRAP_ARGS).encode()).hexdigest()[:12]
    tarball = CACHE_DIR / f"debian-python3-base-{key}.tar"
    if tarball.exists():
        return tarball
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    partial = tarball.with_suffix(f".{os.getpid()}.partial")
    try:
        run(["mmdebstrap", "--quiet", *MMDEBSTRAP_ARGS, str(partial)], timeout=1500)
        # Renamed only when complete, so an interrupted run never leaves a broken cache.
        partial.replace(tarball)
    finally:
        partial.unlink(missing_ok=True)
    for stale in CACHE_DIR.glob("debian-python3-base-*.tar"):
        if stale != tarball:
            stale.unlink(missing_ok=True)  # made with other options: never used again
    return tarball


def pip_configuration() -> dict[str, str]:
    """The pip options in force on this machine (files and PIP_* variables, merged)."""
    listed = run([sys.executable, "-m", "pip", "config", "list"], timeout=60).stdout
    options: dict[str, str] = {}
    # Files first, then the environment, which pip lets override them.
    for line in sorted(listed.splitlines(), key=lambda line: line.startswith(":env:")):
        match = re.fullmatch(r"(?::env:|global|install)\.([\w-]+)='(.*)'", line)
        if match:
            options[match[1]] = match[2]
    return options


def local_paths(options: dict[str, str]) -> list[Path]:
    """Files and folders the options name (cert, constraint, find-links, file:// indexes)."""
    paths = set()
    for value in options.values():
        for word in value.split():
            path = Path(word.removeprefix("file://"))
            if word.startswith("file://"):
                # A local index links its files relative to itself, often beside it
                # (/opt/pypi/simple/NAME/ -> ../../files/): mount the folder holding it.
                path = path.parent
            if path.is_absolute() and path.exists():
                paths.add(path)
    return sorted(paths)


def pip_volumes(options: dict[str, str], folder: Path) -> list[str]:
    """buildah --volume options giving pip inside the build what it has outside.

    The configuration becomes the build's /etc/pip.conf (pip reads it in every venv), and
    every local path it names is mounted read-only at the same path: the Dockerfile itself
    knows nothing of this machine and installs from public PyPI by default.
    """
    config = folder / "pip.conf"
    config.write_text(
        "[global]\n" + "".join(f"{name} = {value}\n" for name, value in options.items())
    )
    mounts = [(config, Path("/etc/pip.conf")), *((path, path) for path in local_paths(options))]
    return [f"--volume={source}:{target}:ro" for source, target in mounts]


def mounts_under(folder: Path) -> list[str]:
    mount_points = (
        line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )
    return [point for point in mount_points if point.startswith(str(folder))]


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    require_tools()
    # podman refuses a --runroot over 50 characters, which pytest's base temp folder can
    # pass (under pytest-xdist: /tmp/pytest-of-USER/pytest-N/popen-gwN/...): a short one.
    engine = Engine(Path(tempfile.mkdtemp(prefix="thx-img-")))
    try:
        yield engine
    finally:
        # Containers (running or not), build containers, images and their layer mounts; each
        # step runs even if one before it failed, and the check below says what remained.
        engine.podman("rm", "--all", "--force", "--time=0", check=False)
        engine.buildah("rm", "--all", check=False)
        engine.podman("system", "reset", "--force", check=False)
        assert mounts_under(engine.root) == [], "a mount outlived the image tests"
        shutil.rmtree(engine.root, ignore_errors=True)


@pytest.fixture(scope="module")
def image(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The image built from the repository's Dockerfile on the local Debian base."""
    base = f"localhost/topology-hints-exporter-test-base:{uuid.uuid4().hex[:12]}"
    changes = [f"--change={change}" for change in BASE_CHANGES]
    engine.podman("import", "--quiet", *changes, str(base_tarball()), base, timeout=600)
    tag = f"localhost/topology-hints-exporter:{__version__}-test"
    engine.buildah(
        "bud",
        "--isolation=chroot",
        "--network=host",
        # buildah takes a lock in the machine's CNI folder even for the host network.
        f"--cni-config-dir={engine.root / 'networks'}",
        "--pull=never",
        "--layers=false",
        f"--build-arg=PYTHON_IMAGE={base}",
        *pip_volumes(pip_configuration(), tmp_path_factory.mktemp("pip")),
        f"--tag={tag}",
        str(PROJECT_ROOT),
    )
    return tag


def locked_down(
    engine: Engine, image: str, name: str, *args: str, detach: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run IMAGE the way the Kubernetes manifests do: read-only, no capabilities, nobody."""
    return engine.podman(
        "run",
        f"--name={name}",
        *(["--detach"] if detach else []),
        "--read-only",
        # No writable /tmp, /run or /var/tmp either: the exporter needs no scratch space.
        "--read-only-tmpfs=false",
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        f"--user={NOBODY}:{NOBODY}",
        # The host's network, with the exporter told to listen on 127.0.0.1 only. It resolves
        # no names, and podman's /etc/hosts and resolv.conf would be files added to /etc.
        "--network=host",
        "--no-hosts",
        "--dns=none",
        *ULIMITS,
        f"--volume={EXAMPLES_DIR}:{EXAMPLES_IN_CONTAINER}:ro",
        image,
        *args,
    )


def container_name() -> str:
    return f"topology-hints-exporter-test-{uuid.uuid4().hex[:12]}"


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def test_version_runs_in_the_locked_down_image(engine: Engine, image: str) -> None:
    """`--version` prints the package version from a read-only, unprivileged container."""
    name = container_name()
    try:
        printed = locked_down(engine, image, name, "--version")
        assert printed.stdout.strip() == f"topology-hints-exporter {__version__}"
    finally:
        engine.podman("rm", "--force", name)


def test_serve_snapshot_runs_unprivileged_and_stops_cleanly(engine: Engine, image: str) -> None:
    """serve answers /readyz and valid /metrics as nobody, stops on SIGTERM, writes nothing."""
    promtool = require_binary("promtool")
    address = f"127.0.0.1:{free_port()}"
    name = container_name()
    try:
        locked_down(
            engine,
            image,
            name,
            "serve",
            f"--snapshot={EXAMPLES_IN_CONTAINER}/{SNAPSHOT.name}",
            f"--listen-address={address}",
            detach=True,
        )
        wait_until(lambda: http_get(f"http://{address}/readyz")[0] == 200, timeout=60)
        status, metrics = http_get(f"http://{address}/metrics")
        assert status == 200
        checked = subprocess.run(
            [promtool, "check", "metrics"],
            input=metrics,
            capture_output=True,
            text=True,
            check=False,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "topology_hints_service_expected_enabled{" in metrics

        pid = int(engine.podman("inspect", "--format={{.State.Pid}}", name).stdout)
        status_lines = proc_status(pid)
        assert status_lines["Uid"].split() == [str(NOBODY)] * 4
        assert status_lines["Gid"].split() == [str(NOBODY)] * 4
        assert int(status_lines["CapEff"], 16) == 0
        assert int(status_lines["CapBnd"], 16) == 0
        assert status_lines["NoNewPrivs"] == "1"

        started = time.monotonic()
        engine.podman("kill", "--signal=TERM", name)
        exit_code = engine.podman("wait", name, timeout=STOP_DEADLINE + 5).stdout.strip()
        stopped_in = time.monotonic() - started
        assert exit_code == "0"
        assert stopped_in < STOP_DEADLINE

        assert engine.podman("diff", name).stdout.strip() == "", "the root filesystem changed"
    finally:
        engine.podman("rm", "--force", "--time=0", name)
