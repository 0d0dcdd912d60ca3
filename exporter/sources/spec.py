"""What the sources know of one resource: its path, kind, raw shape and conversion.

A `ResourceSpec` is shared by the live informers (`exporter.sources.informer`), the LIST
reader both use (`exporter.sources.lists`) and the one-shot listing
(`exporter.sources.listing`); `exporter.sources.cluster` declares the four the exporter reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import msgspec

from exporter.vocabulary import Resource


class _Metadata(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def resourceVersion(self) -> str: ...  # noqa: N802 - the API's spelling


class RawObject(Protocol):
    """What the sources read of every decoded object: its kind, namespace/name and
    resourceVersion."""

    @property
    def metadata(self) -> _Metadata: ...
    @property
    def kind(self) -> str: ...


_Raw = TypeVar("_Raw", bound=RawObject)
_Slim = TypeVar("_Slim")


@dataclass(frozen=True, slots=True)
class ResourceSpec(Generic[_Raw, _Slim]):
    """What an informer needs to know of one resource: its path and kind, how to decode and slim
    its objects, and whether readiness waits for it."""

    resource: Resource
    kind: str  # the only kind accepted on this resource's watch (LIST items carry none)
    path: str
    raw_type: type[_Raw]
    # raw -> slim object, or None to ignore it (events of other reasons); may raise
    # InvalidObjectError.
    convert: Callable[[_Raw], _Slim | None]
    field_selector: str | None = None
    # Hint metrics wait for required resources; Events are optional (RBAC often lacks them).
    required: bool = True
    # For an object that fails to decode: whether it is one the exporter reads (None: all
    # are). One that is not is skipped silently, neither counted nor logged as invalid.
    relevant: Callable[[bytes | msgspec.Raw], bool] | None = None
