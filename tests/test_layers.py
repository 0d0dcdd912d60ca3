"""Imports point one way: sources -> store -> engine; renderers read results, never sources."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "exporter"

# module prefix -> project modules it must never import
_RENDERERS = ("exporter.metrics", "exporter.explain", "exporter.document")
_EDGES = ("exporter.sources", "exporter.serve", "exporter.server", "exporter.cli")
FORBIDDEN = {
    "exporter.engine": (*_EDGES, *_RENDERERS, "exporter.decode", "exporter.store",
                        "exporter.evaluator", "exporter.snapshot"),
    "exporter.store": (*_EDGES, "exporter.metrics", "exporter.evaluator"),
    "exporter.evaluator": (*_EDGES, "exporter.metrics"),
    "exporter.metrics": (*_EDGES, "exporter.decode", "exporter.snapshot"),
    "exporter.explain": (*_EDGES, "exporter.metrics", "exporter.store"),
    "exporter.document": (*_EDGES, "exporter.metrics", "exporter.store"),
    "exporter.web": (*_EDGES, "exporter.metrics", "exporter.store", "exporter.decode"),
    "exporter.sources": ("exporter.metrics", "exporter.serve", "exporter.server",
                         "exporter.evaluator"),
}  # fmt: skip
# Only these modules may import the kubernetes client.
KUBERNETES_IMPORTERS = {"exporter.sources.kubeapi"}


def _modules() -> dict[str, set[str]]:
    imports: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PROJECT_ROOT).with_suffix("").parts).removesuffix(
            ".__init__"
        )
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
        imports[module] = found
    return imports


MODULES = _modules()


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_only_downward(layer: str) -> None:
    """No module of the layer imports a layer above it."""
    offenders = {
        (module, imported)
        for module, imported_names in MODULES.items()
        if module == layer or module.startswith(layer + ".")
        for imported in imported_names
        if imported.startswith(FORBIDDEN[layer])
    }
    assert not offenders


def test_only_the_edges_import_the_kubernetes_client() -> None:
    """Configuration and auth are the only uses of the kubernetes client."""
    importers = {
        module
        for module, imported in MODULES.items()
        if any(name == "kubernetes" or name.startswith("kubernetes.") for name in imported)
    }
    assert importers == KUBERNETES_IMPORTERS
