"""LIST pages and their continue tokens: a snapshot of one resource's sorted objects, a page
cut from it, and the opaque token that names where the next page starts."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import orjson

from tests.kubeapi.objects import Entry, Resource, Selector
from tests.kubeapi.status import bad_request


@dataclass(frozen=True)
class ListSnapshot:
    """The sorted state of one resource at one resourceVersion, kept for a continue token."""

    resource: Resource
    namespace: str | None
    rv: int
    entries: tuple[Entry, ...]
    id: int = 0  # 0: not yet kept for a continue token


def page(
    snap: ListSnapshot, start: int, limit: int, selector: Selector
) -> tuple[list[bytes], int | None]:
    """Items of one page from a snapshot, and the index to continue at (None: the last page)."""
    items: list[bytes] = []
    entries = snap.entries
    namespace = snap.namespace
    for index in range(start, len(entries)):
        entry = entries[index]
        if namespace is not None and entry.key[0] != namespace:
            if entry.key[0] > namespace:
                return items, None
            continue
        if selector and not selector.matches(entry):
            continue
        if limit and len(items) == limit:
            return items, index
        items.append(entry.item)
    return items, None


def encode_token(rv: int, snap_id: int, start: int) -> bytes:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "snap": snap_id, "start": start})
    return base64.urlsafe_b64encode(raw).rstrip(b"=")


def decode_token(token: str) -> tuple[int, int, int]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = orjson.loads(raw)
        return int(data["rv"]), int(data["snap"]), int(data["start"])
    except (binascii.Error, ValueError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
        raise bad_request(f"continue key is not valid: {exc}") from exc
