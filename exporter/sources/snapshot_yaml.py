"""YAML snapshots loaded within bounds: PyYAML's safe loader, refusing alias bombs.

PyYAML is imported on the first YAML input, not at start: JSON snapshots and the live
path never need it. A document whose aliases, expanded, would add more than
`MAX_ALIAS_NODES` nodes is refused before anything is constructed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from exporter.sources.snapshot_input import SnapshotError

if TYPE_CHECKING:
    import yaml

# Nodes that YAML aliases may add beyond the document's own: generous for hand-written
# anchors, far below a "billion laughs" expansion.
MAX_ALIAS_NODES = 100_000


class AliasError(Exception):
    """A YAML input whose aliases would expand past MAX_ALIAS_NODES (a "billion laughs")."""


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases, expanded, add more than MAX_ALIAS_NODES nodes.

    Counted on the composed graph, where an alias is one shared node, before anything
    is constructed: expansion (by the constructor, by merge keys, or by whoever walks the
    result) is what costs time and memory, and it is bounded by this count.
    """
    import yaml  # noqa: PLC0415 - loaded with the first YAML input

    def children(node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        if isinstance(node, yaml.MappingNode):
            return [part for pair in node.value for part in pair]
        return []

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children(node))
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise AliasError("YAML aliases refer to their own ancestors")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children(node) if id(child) not in sizes)
    if sizes[id(root)] - len(sizes) > MAX_ALIAS_NODES:
        raise AliasError(f"YAML aliases expand to more than {MAX_ALIAS_NODES} extra nodes")


@functools.cache
def _bounded_yaml_loader() -> type[Any]:
    """PyYAML's safe loader (the C one when built), refusing alias bombs."""
    import yaml  # noqa: PLC0415 - loaded with the first YAML input

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class BoundedYamlLoader(base):  # type: ignore[misc]
        """PyYAML's safe loader that refuses a document whose aliases expand too far."""

        # Without a "*" in the text there is no alias, and no need to walk each document.
        may_have_aliases = True

        def construct_document(self, node: yaml.Node) -> object:
            if self.may_have_aliases:
                _check_expansion(node)
            return super().construct_document(node)

    return BoundedYamlLoader


def yaml_documents(data: bytes) -> Iterator[Any]:
    loader = _bounded_yaml_loader()(data)
    loader.may_have_aliases = b"*" in data
    try:
        while loader.check_data():
            document = loader.get_data()
            if document is not None:
                yield document
    finally:
        loader.dispose()


def yaml_error(source: str, error: Exception) -> SnapshotError:
    import yaml  # noqa: PLC0415 - loaded with the first YAML input

    if isinstance(error, AliasError):
        return SnapshotError(f"{source}: {error}")
    if isinstance(error, RecursionError):
        return SnapshotError(f"{source}: YAML nested too deeply")
    if isinstance(error, yaml.YAMLError):
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        return SnapshotError(f"{source}: not JSON or YAML{where}")
    # ValueError/OverflowError from a scalar's constructor: an integer of more than
    # 4,300 digits, a date such as 2020-13-45.
    return SnapshotError(
        f"{source}: YAML holds a value that cannot be read (an invalid date or an oversized number)"
    )
