"""The engine stays pure: no I/O libraries, no clock, no logging, immutable data."""

from __future__ import annotations

import dataclasses
import importlib
import io
import itertools
import json
import pkgutil
import subprocess
import sys
import tokenize
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

import exporter.engine
from tests.conftest import PROJECT_ROOT
from tests.engine.builders import auto_service, endpoint_slice, equal_zones, hinted
from tests.results import result_of

ENGINE_DIR = Path(exporter.engine.__file__).parent
FORBIDDEN_MODULES = (
    "kubernetes",
    "prometheus_client",
    "structlog",
    "msgspec",
    "yaml",
    "urllib3",
    "http",
    "socket",
)


def test_engine_import_loads_no_io_library() -> None:
    """Importing exporter.engine in a fresh interpreter loads no client, metrics or I/O module."""
    probe = (
        "import json, sys\n"
        "import exporter.engine\n"
        f"forbidden = {FORBIDDEN_MODULES!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in forbidden)))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(completed.stdout) == []


def _code_tokens(path: Path) -> list[str]:
    """Names and operators of a source file, without comments and strings."""
    source = path.read_text(encoding="utf-8")
    return [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type in {tokenize.NAME, tokenize.OP}
    ]


# Subpackages (exporter/engine/whatif/) included.
ENGINE_SOURCES = sorted(ENGINE_DIR.rglob("*.py"))


@pytest.mark.parametrize(
    "path", ENGINE_SOURCES, ids=[str(path.relative_to(ENGINE_DIR)) for path in ENGINE_SOURCES]
)
def test_engine_source_has_no_io_clock_or_logging(path: Path) -> None:
    """No `open(`, `time.`, `datetime`, `logging` or `print(` in the engine's code."""
    tokens = _code_tokens(path)
    pairs = set(itertools.pairwise(tokens))
    assert ("open", "(") not in pairs
    assert ("print", "(") not in pairs
    assert ("time", ".") not in pairs
    assert "datetime" not in tokens
    assert "logging" not in tokens
    assert "time" not in tokens
    # The raw text too, outside docstrings a tokenizer may not catch (f-strings and the like).
    text = path.read_text(encoding="utf-8")
    for needle in ("open(", "print(", "datetime", "import logging", "import time"):
        assert needle not in text, needle


def _engine_dataclasses() -> list[type[Any]]:
    found: dict[str, type[Any]] = {}
    # walk_packages: the modules of subpackages (exporter/engine/whatif/) too.
    for module_info in pkgutil.walk_packages([str(ENGINE_DIR)], prefix="exporter.engine."):
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and value.__module__ == module.__name__
            ):
                found[value.__qualname__] = value
    return sorted(found.values(), key=lambda cls: cls.__qualname__)


ENGINE_DATACLASSES = _engine_dataclasses()


def test_engine_has_dataclasses() -> None:
    """The scan below sees the engine's types (guards against an empty parametrization)."""
    names = {cls.__name__ for cls in ENGINE_DATACLASSES}
    assert {"Node", "Endpoint", "EntryVerdict", "NodeContext", "ClusterCapacity"} <= names
    assert {"Cluster", "Margin", "Outcome", "ZoneLossView", "EntryForecast"} <= names


@pytest.mark.parametrize(
    "cls", ENGINE_DATACLASSES, ids=[cls.__name__ for cls in ENGINE_DATACLASSES]
)
def test_engine_dataclasses_are_frozen(cls: type[Any]) -> None:
    """Every dataclass of the engine is declared frozen."""
    assert cls.__dataclass_params__.frozen


def _real_instances() -> list[Any]:
    """Instances produced by a real evaluation, nested ones included."""
    slices = [endpoint_slice(hinted("zone-0"), hinted("zone-1"), hinted("zone-2"))]
    evaluation = result_of(equal_zones(3), [auto_service()], slices)
    service_verdict = evaluation.verdicts()[0]
    return [
        evaluation,
        evaluation.capacity,
        evaluation.nodes,
        service_verdict,
        service_verdict.zones["zone-0"],
        service_verdict.proxy,
        service_verdict.nearest_feasible,
        service_verdict.service,
        slices[0],
        slices[0].endpoints[0],
        equal_zones(1)[0],
    ]


@pytest.mark.parametrize("instance", _real_instances(), ids=lambda value: type(value).__name__)
def test_assigning_a_field_raises(instance: Any) -> None:
    """Assigning any field of an engine value raises FrozenInstanceError."""
    for field in dataclasses.fields(instance):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(instance, field.name, None)


def test_verdict_mappings_are_read_only() -> None:
    """Mappings inside an evaluation cannot be mutated either."""
    slices = [endpoint_slice(hinted("zone-0"), hinted("zone-1"), hinted("zone-2"))]
    evaluation = result_of(equal_zones(3), [auto_service()], slices)
    service_verdict = evaluation.verdicts()[0]
    for mapping in (
        evaluation.capacity.zone_ratios,
        evaluation.nodes.by_zone,
        service_verdict.zones,
        service_verdict.proxy.by_zone,
    ):
        assert isinstance(mapping, MappingProxyType)
        with pytest.raises(TypeError):
            mapping["x"] = None  # type: ignore[index]
