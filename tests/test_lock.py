"""requirements.lock, the image's dependencies pinned with their hashes, matches pyproject.toml.

The Dockerfile installs the lock with `pip install --require-hashes --no-deps` and then the
package alone; `pip check` in the build fails if the lock misses a dependency of a locked
package, and tests/image runs that build. Here, without an index: every dependency of
pyproject.toml is locked within its range, every locked package is pinned with hashes, and
nothing is locked that no dependency asks for.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import PROJECT_ROOT

LOCK = PROJECT_ROOT / "requirements.lock"
PROJECT = "topology-hints-exporter"
# pip-compile's names for the two roots: the runtime dependencies and the build backend.
RUNTIME_ROOT = f"{PROJECT} (pyproject.toml)"
BUILD_ROOT = f"{PROJECT} (pyproject.toml::build-system.requires)"


@dataclass(frozen=True)
class Locked:
    name: str
    version: str
    hashes: tuple[str, ...]
    wanted_by: frozenset[str]


def parse_lock(text: str) -> dict[str, Locked]:
    """The entries of a pip-compile --generate-hashes file, with their `# via` annotations."""
    entries: dict[str, Locked] = {}
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text)
    for block in blocks:
        head = block.split(maxsplit=1)[0] if block.strip() else ""
        if not head or head.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;\\]+)", head)
        assert match, f"not pinned with ==: {head!r}"
        hashes = tuple(re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
        via_lines = [
            line.strip().removeprefix("#").strip()
            for line in block.split("# via", 1)[1].splitlines()
            if line.strip()
        ] if "# via" in block else []  # fmt: skip
        wanted_by = frozenset(
            line if "(" in line else str(canonicalize_name(line))
            for line in via_lines
            if line and not line.startswith("The following")
        )
        name = str(canonicalize_name(match[1]))
        assert name not in entries, f"{name} is locked twice"
        entries[name] = Locked(name, match[2], hashes, wanted_by)
    return entries


def locked() -> dict[str, Locked]:
    return parse_lock(LOCK.read_text())


def pyproject() -> dict[str, object]:
    return tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())


def requirements(names: list[str]) -> list[Requirement]:
    return [Requirement(name) for name in names]


def test_every_runtime_dependency_is_locked_within_its_range() -> None:
    """Each pyproject dependency is pinned at a version its specifier accepts, and says so."""
    lock = locked()
    project = pyproject()["project"]
    assert isinstance(project, dict)
    for requirement in requirements(project["dependencies"]):
        name = str(canonicalize_name(requirement.name))
        assert name in lock, f"{requirement} is not in requirements.lock: run `make lock`"
        assert requirement.specifier.contains(lock[name].version), (
            f"{name}=={lock[name].version} is outside {requirement}: run `make lock`"
        )
        assert RUNTIME_ROOT in lock[name].wanted_by, name


def test_the_build_backend_is_locked_too() -> None:
    """setuptools, which builds the package in the image, is locked within build-system.requires."""
    lock = locked()
    build_system = pyproject()["build-system"]
    assert isinstance(build_system, dict)
    for requirement in requirements(build_system["requires"]):
        name = str(canonicalize_name(requirement.name))
        assert requirement.specifier.contains(lock[name].version), requirement
        assert BUILD_ROOT in lock[name].wanted_by, name


def test_every_locked_package_is_pinned_with_hashes_and_wanted() -> None:
    """No entry without a hash, and each one is wanted by the project or by a locked package
    that is itself wanted: nothing stale stays in the lock after a dependency is dropped."""
    lock = locked()
    assert len(lock) > 10
    for entry in lock.values():
        assert entry.hashes, f"{entry.name} has no --hash"
        assert entry.wanted_by, f"{entry.name} says nothing wants it"
    wanted = {RUNTIME_ROOT, BUILD_ROOT}
    reached: set[str] = set()
    while True:
        newly = {name for name, e in lock.items() if e.wanted_by & (wanted | reached)} - reached
        if not newly:
            break
        reached |= newly
    assert reached == set(lock), f"wanted by nothing the project needs: {set(lock) - reached}"
    for entry in lock.values():
        assert entry.wanted_by <= wanted | set(lock), entry


def test_parse_lock_reads_what_pip_compile_writes() -> None:
    """The parser above on a small sample, so a silent misparse cannot pass the tests."""
    sample = (
        "#\n# header\n#\n"
        "alpha==1.0 \\\n    --hash=sha256:" + "a" * 64 + "\n"
        "    # via topology-hints-exporter (pyproject.toml)\n"
        "beta-gamma==2.0 \\\n    --hash=sha256:" + "b" * 64 + " \\\n"
        "    --hash=sha256:" + "c" * 64 + "\n"
        "    # via\n    #   alpha\n    #   Delta_Epsilon\n\n"
        "# The following packages are considered to be unsafe in a requirements file:\n"
        "setuptools==80.0 \\\n    --hash=sha256:" + "d" * 64 + "\n"
        "    # via topology-hints-exporter (pyproject.toml::build-system.requires)\n"
    )
    parsed = parse_lock(sample)
    assert parsed == {
        "alpha": Locked("alpha", "1.0", ("a" * 64,), frozenset({RUNTIME_ROOT})),
        "beta-gamma": Locked(
            "beta-gamma", "2.0", ("b" * 64, "c" * 64), frozenset({"alpha", "delta-epsilon"})
        ),
        "setuptools": Locked("setuptools", "80.0", ("d" * 64,), frozenset({BUILD_ROOT})),
    }


def test_dockerfile_installs_the_lock_with_hashes_and_nothing_else() -> None:
    """The image takes its dependencies from the lock only: hashes required, no resolution."""
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    runs = re.sub(r"\\\n\s*", " ", dockerfile)
    installs = re.findall(r"pip install ([^&\n]*)", runs)
    assert len(installs) == 2, installs
    lock_install, package_install = installs
    assert "--require-hashes" in lock_install
    assert "--no-deps" in lock_install
    assert "-r requirements.lock" in lock_install
    assert "--no-deps" in package_install
    assert "--no-build-isolation" in package_install, "isolation fetches an unlocked setuptools"
    assert "pip check" in runs
