"""What the test API server serves and stores: its resources, an object's stored version, and
the field and label selectors a LIST or watch filters them by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from exporter.vocabulary import ObjectKey
from tests.kubeapi.selectors import (
    field_value,
    label_matches,
    parse_field_selector,
    parse_label_selector,
)


@dataclass(frozen=True)
class Resource:
    """One served resource type: its plural name, kind and API group/version."""

    name: str
    kind: str
    api_version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def prefix(self) -> bytes:
        """The opening of a full object's JSON, to splice in front of an item's fields."""
        return b'{"kind":"%s","apiVersion":"%s",' % (self.kind.encode(), self.api_version.encode())


RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource("nodes", "Node", "v1", namespaced=False, short_names=("no",)),
        Resource("services", "Service", "v1", namespaced=True, short_names=("svc",)),
        Resource("events", "Event", "v1", namespaced=True, short_names=("ev",)),
        Resource("configmaps", "ConfigMap", "v1", namespaced=True, short_names=("cm",)),
        Resource("endpointslices", "EndpointSlice", "discovery.k8s.io/v1", namespaced=True),
        Resource("daemonsets", "DaemonSet", "apps/v1", namespaced=True, short_names=("ds",)),
    )
}
API_VERSIONS = tuple(dict.fromkeys(r.api_version for r in RESOURCES.values()))
_BY_KIND = {r.kind: r for r in RESOURCES.values()}


def resource(kind_or_name: str) -> Resource:
    """A Resource from its kind (`Node`) or plural name (`nodes`)."""
    found = RESOURCES.get(kind_or_name) or _BY_KIND.get(kind_or_name)
    if found is None:
        raise ValueError(f"unknown resource or kind {kind_or_name!r}; known: {sorted(RESOURCES)}")
    return found


class Entry:
    """One stored object version: key, resourceVersion, JSON bytes without kind/apiVersion."""

    __slots__ = ("_full", "item", "key", "rv")

    def __init__(self, key: ObjectKey, rv: int, item: bytes) -> None:
        self.key = key
        self.rv = rv
        self.item = item
        self._full: bytes | None = None

    def full(self, resource: Resource) -> bytes:
        """The object's JSON with kind and apiVersion, as a watch event or a GET carries it."""
        if self._full is None:
            self._full = resource.prefix + self.item[1:]
        return self._full

    def obj(self) -> dict[str, Any]:
        decoded: dict[str, Any] = orjson.loads(self.item)
        return decoded


class Selector:
    """A parsed fieldSelector plus labelSelector, refused as the API server refuses them."""

    def __init__(self, resource: str, field_selector: str = "", label_selector: str = "") -> None:
        self.fields = tuple(parse_field_selector(resource, field_selector))
        self.labels = tuple(parse_label_selector(label_selector))

    @classmethod
    def from_query(cls, served: Resource, query: dict[str, str]) -> Selector:
        return cls(served.name, query.get("fieldSelector", ""), query.get("labelSelector", ""))

    def __bool__(self) -> bool:
        return bool(self.fields or self.labels)

    def matches(self, entry: Entry | None) -> bool:
        if entry is None:
            return False
        if not self:
            return True
        obj = entry.obj()
        for term in self.fields:
            if (field_value(obj, term) == term.values[0]) == (term.operator == "!="):
                return False
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(label_matches(labels, term) for term in self.labels)
