"""The phrasebook and the layout are read through their public names only.

exporter.report's words (phrases, advice, traffic) and explain's layout are imported by the
web pages, the what-if report and the CLI: what crosses that boundary is public on purpose,
so no module, test or page takes a private (leading-underscore) name from exporter.report.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import PROJECT_ROOT


def private_report_imports(path: Path) -> list[str]:
    """`file:line: name` for each private name `path` takes from an exporter.report module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or node.level != 0:
            continue
        if node.module != "exporter.report" and not (node.module or "").startswith(
            "exporter.report."
        ):
            continue
        found += [
            f"{path.name}:{node.lineno}: {alias.name}"
            for alias in node.names
            if alias.name.startswith("_") and not alias.name.startswith("__")
        ]
    return found


def test_nothing_imports_a_private_name_from_the_reports() -> None:
    paths = sorted(
        [*(PROJECT_ROOT / "exporter").rglob("*.py"), *(PROJECT_ROOT / "tests").rglob("*.py")]
    )
    assert len(paths) > 50
    assert [found for path in paths for found in private_report_imports(path)] == []


def test_the_check_sees_a_private_name_and_only_from_the_reports(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        "from __future__ import annotations\n"
        "from exporter.report.phrases import MODE_TEXT as _MODE_TEXT, _zone_list\n"
        "from exporter.reporting import _other\n"
        "from exporter.cli import _serve_options\n",
        encoding="utf-8",
    )
    assert private_report_imports(module) == ["module.py:2: _zone_list"]
