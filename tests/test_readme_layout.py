"""The README's "How it works" names every module of each package, so the map and the code
cannot drift apart unnoticed."""

from __future__ import annotations

import re

import pytest

from tests.conftest import PROJECT_ROOT

README = (PROJECT_ROOT / "README.md").read_text()
# Every package under exporter/, found on disk: a new package needs its row.
PACKAGES = tuple(
    sorted(path.parent.name for path in (PROJECT_ROOT / "exporter").glob("*/__init__.py"))
)


def _row(package: str) -> str:
    match = re.search(rf"^\| `exporter/{package}/` \|(.*)$", README, re.MULTILINE)
    assert match is not None, f"README has no row for exporter/{package}/"
    return match.group(1)


@pytest.mark.parametrize("package", PACKAGES)
def test_the_readme_names_every_module_of_the_package(package: str) -> None:
    row = _row(package)
    folder = PROJECT_ROOT / "exporter" / package
    modules = {
        path.relative_to(folder).with_suffix("").parts[-1]
        for path in folder.rglob("*.py")
        if path.name != "__init__.py"
    }
    missing = sorted(module for module in modules if f"`{module}" not in row)
    assert missing == [], f"README's exporter/{package}/ row does not name {missing}"
