"""The built wheel: its entry points run from a fresh virtualenv, and kubectl finds the plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES_DIR, PROJECT_ROOT, require_binary
from tests.kubeapi import FakeKubeAPI

# Each test builds the package in the source tree's build/ folder: two xdist workers doing
# it at once collide there ("File exists"), so the module keeps to one worker.
pytestmark = pytest.mark.xdist_group("packaging")

DEMO = str(EXAMPLES_DIR / "demo-cluster.json")
PLUGIN = "kubectl-topology_hints"


def run(
    command: list[str], env: dict[str, str] | None = None, cwd: Path = PROJECT_ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=300, cwd=cwd, env=env
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a new virtualenv holding only the wheel built from this tree.

    Its dependencies come from the test environment through a .pth line (no index needed);
    that folder's own .pth files, among them the editable install of this tree, are not
    read from there, so `exporter` is imported from the wheel.
    """
    root = tmp_path_factory.mktemp("wheel")
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(root), "."]
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = root.glob("topology_hints_exporter-*.whl")
    target = root / "venv"
    venv.create(target, with_pip=False)
    bin_dir = target / "bin"
    python = bin_dir / "python"
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    (Path(purelib.stdout.strip()) / "test-dependencies.pth").write_text(
        sysconfig.get_path("purelib") + "\n"
    )
    install = run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", str(wheel)]
    )
    assert install.returncode == 0, install.stderr
    return bin_dir


def test_wheel_entry_points_run(installed: Path, tmp_path: Path) -> None:
    """Both console scripts run from the wheel, outside the source tree."""
    origin = run(
        [str(installed / "python"), "-c", "import exporter; print(exporter.__file__)"],
        cwd=tmp_path,
    )
    assert str(installed.parent) in origin.stdout, origin.stdout
    for script in ("topology-hints-exporter", PLUGIN):
        completed = run([str(installed / script), "explain", "--snapshot", DEMO, "--summary"])
        assert completed.returncode == 1, completed.stderr
        assert "payments    ledger" in completed.stdout
    usage = run([str(installed / PLUGIN), "explain", "--nope"])
    assert usage.returncode == 2
    assert usage.stderr.startswith("usage: kubectl topology-hints ")


def plugin_env(bin_dir: Path, kubeconfig: Path) -> dict[str, str]:
    return {
        "PATH": f"{bin_dir}{os.pathsep}{Path(require_binary('kubectl')).parent}",
        "KUBECONFIG": str(kubeconfig),
        "HOME": str(kubeconfig.parent),
    }


def test_kubectl_finds_the_plugin(installed: Path, tmp_path: Path) -> None:
    """`kubectl plugin list` finds kubectl-topology_hints when its folder is on PATH."""
    listed = run(["kubectl", "plugin", "list"], env=plugin_env(installed, tmp_path / "none"))
    assert str(installed / PLUGIN) in listed.stdout, listed.stdout + listed.stderr


def test_kubectl_plugin_explains_the_live_cluster(
    installed: Path, kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    """`kubectl topology-hints explain --summary` on the test API server = explain of its dump."""
    kube_api.load(json.loads(Path(DEMO).read_text())["items"])
    env = plugin_env(installed, kubeconfig)
    live = run(["kubectl", "topology-hints", "explain", "--summary"], env=env)
    dumped = run([str(installed / PLUGIN), "explain", "--snapshot", DEMO, "--summary"], env=env)
    assert live.returncode == dumped.returncode == 1, live.stderr
    assert live.stdout == dumped.stdout
    one = run(["kubectl", "topology-hints", "explain", "-n", "shop", "cart"], env=env)
    assert one.returncode == 0, one.stderr
    assert "Service shop/cart (IPv4)" in one.stdout


def test_wheel_and_sdist_build_and_pass_twine_check(tmp_path: Path) -> None:
    """`python -m build` makes the sdist, then the wheel from it; `twine check --strict`
    passes both, and the wheel holds the package only (the Helm chart, manifests, alerts and
    dashboards ship from the repository, not inside the wheel)."""
    built = run([sys.executable, "-m", "build", "--outdir", str(tmp_path), "."])
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (sdist,) = tmp_path.glob("topology_hints_exporter-*.tar.gz")
    (wheel,) = tmp_path.glob("topology_hints_exporter-*.whl")
    checked = run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/", 1)[0] for name in archive.namelist()}
    assert tops == {"exporter", wheel.name.split("-py3")[0] + ".dist-info"}, tops
