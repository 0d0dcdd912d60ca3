"""Imports point one way: the import-linter contracts in pyproject.toml hold, and still bite."""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import exporter
from tests.conftest import PROJECT_ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    # lint-imports puts its working directory first on sys.path, so it analyses the
    # `exporter` package found there rather than the installed one.
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_import_contracts_are_kept() -> None:
    """Every contract in [tool.importlinter] holds for the exporter as it is."""
    result = _lint_imports(PROJECT_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module_path", "import_line", "broken_contract", "reported_import"),
    [
        (
            "engine/model.py",
            "import exporter.metrics.families",
            "The engine imports no other exporter module",
            "exporter.engine.model -> exporter.metrics.families",
        ),
        (
            "state/store.py",
            "import kubernetes",
            "Only exporter.sources.kubeapi imports the kubernetes client",
            "exporter.state.store -> kubernetes",
        ),
        (
            "web/app.py",
            "import exporter.run.serve",
            "Only the CLI wires the server, sources and metrics together",
            "exporter.web.app -> exporter.run.serve",
        ),
        (
            "state/store.py",
            "import exporter.report.explain",
            "The layers point one way",
            "exporter.state.store -> exporter.report.explain",
        ),
        (
            "pipeline/evaluator.py",
            "import exporter.sources.listing",
            "The layers point one way",
            "exporter.pipeline is not allowed to import exporter.sources",
        ),
        (
            "sources/snapshot.py",
            "import exporter.pipeline.evaluator",
            "The layers point one way",
            "exporter.sources is not allowed to import exporter.pipeline",
        ),
        (
            "report/phrases.py",
            "import exporter.report.explain",
            "The phrasebook (report.phrases, advice, traffic) sits below the layouts",
            "exporter.report.phrases -> exporter.report.explain",
        ),
        (
            "vocabulary.py",
            "import exporter.engine.model",
            "The vocabulary imports no other exporter module",
            "exporter.vocabulary -> exporter.engine.model",
        ),
        (
            "metrics/families/zone.py",
            "import exporter.metrics.families.service",
            "Each module of family declarations stands alone",
            "exporter.metrics.families.zone -> exporter.metrics.families.service",
        ),
    ],
)
def test_the_contracts_catch_a_forbidden_import(
    tmp_path: Path, module_path: str, import_line: str, broken_contract: str, reported_import: str
) -> None:
    """A copy of the exporter with one forbidden import added breaks the contract against it."""
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(
        PROJECT_ROOT / "exporter",
        tmp_path / "exporter",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    module = tmp_path / "exporter" / module_path
    module.write_text(module.read_text() + f"\n{import_line}\n")

    result = _lint_imports(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    assert broken_contract in result.stdout
    assert reported_import in result.stdout


def test_the_engine_contract_names_every_other_top_level_module() -> None:
    """A new exporter module is forbidden to the engine until someone decides otherwise."""
    contracts = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"][
        "importlinter"
    ]["contracts"]
    engine = next(contract for contract in contracts if contract["id"] == "engine-pure")
    top_level = {
        f"exporter.{module.name}"
        for module in pkgutil.iter_modules(exporter.__path__)
        if module.name not in {"engine", "vocabulary", "__main__"}
    }
    assert top_level <= set(engine["forbidden_modules"])


def test_a_new_package_must_be_placed_on_a_layer(tmp_path: Path) -> None:
    """The layers contract is exhaustive: a package nobody placed breaks it."""
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(
        PROJECT_ROOT / "exporter",
        tmp_path / "exporter",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (tmp_path / "exporter" / "unplaced").mkdir()
    (tmp_path / "exporter" / "unplaced" / "__init__.py").write_text('"""Nobody placed me."""\n')

    result = _lint_imports(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "exporter.unplaced" in result.stdout
    assert "not listed as layers" in result.stdout
