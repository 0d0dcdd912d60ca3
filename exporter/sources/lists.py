"""LIST one resource and decode it with the bounded decoders: the one implementation.

Both the live informers (`exporter.sources.informer`) and the one-shot commands
(`exporter.sources.listing`) read lists here, so every LIST body goes through
`exporter.sources.decode`'s bounded decoders (one malformed object is skipped and named, never a
traceback) whichever command asked.

Two ways to ask, as client-go's reflector and kube-state-metrics' --use-apiserver-cache:

- from the watch cache (`cached=True`): `resourceVersion=0&resourceVersionMatch=NotOlderThan`
  and no `limit`, which the cache ignores; the API server answers from memory, without
  reading etcd. A server without a watch cache reads etcd and may page anyway: continue
  tokens are followed.
- consistent (`cached=False`): `limit=page_size` pages without a resourceVersion, each a
  quorum read of etcd: the newest state, at the API server's highest cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from exporter.sources.decode import (
    InvalidObjectError,
    JsonDecoder,
    ListMeta,
    ListPage,
    ObjectDecoder,
)
from exporter.sources.spec import RawObject, ResourceSpec

_Raw = TypeVar("_Raw", bound=RawObject)
_Slim = TypeVar("_Slim")

NOT_OLDER_THAN = "NotOlderThan"

# query -> the response body (raises on a non-2xx answer).
Fetch = Callable[[list[tuple[str, str]]], bytes]


class ResourceReader(Generic[_Raw, _Slim]):
    """One resource's LIST pages and watch objects, decoded within bounds.

    `invalid` is told about each object skipped because it does not decode or convert
    (objects `spec.relevant` rejects are skipped silently).
    """

    def __init__(
        self, spec: ResourceSpec[_Raw, _Slim], invalid: Callable[[InvalidObjectError], None]
    ) -> None:
        self.spec = spec
        self._invalid = invalid
        self._page_decoder: JsonDecoder[Any] = JsonDecoder(
            ListPage[spec.raw_type]  # type: ignore[name-defined]
        )
        self._loose_page_decoder = JsonDecoder(ListPage[msgspec.Raw])
        self._object_decoder: ObjectDecoder[Any] = ObjectDecoder(spec.raw_type)

    def query(self, *, cached: bool, page_size: int, token: str = "") -> list[tuple[str, str]]:
        """The query of one LIST request (the first page when `token` is empty)."""
        if token:
            # A continue token carries its own snapshot: no resourceVersion with it.
            query = [("limit", str(page_size)), ("continue", token)]
        elif cached:
            query = [("resourceVersion", "0"), ("resourceVersionMatch", NOT_OLDER_THAN)]
        else:
            query = [("limit", str(page_size))]
        if self.spec.field_selector:
            query.append(("fieldSelector", self.spec.field_selector))
        return query

    def list_all(self, fetch: Fetch, *, cached: bool, page_size: int) -> tuple[str, list[_Slim]]:
        """Every object, page after page: (the list's resourceVersion, the objects).

        A 410 on a continue token is raised as the fetch raises it (the caller lists again).
        """
        objects: list[_Slim] = []
        token = ""
        while True:
            body = fetch(self.query(cached=cached, page_size=page_size, token=token))
            meta, items = self.decode_page(body)
            objects.extend(items)
            token = meta.continue_ or ""
            if not token:
                return meta.resourceVersion, objects

    def decode_page(self, body: bytes) -> tuple[ListMeta, list[_Slim]]:
        try:
            page = self._page_decoder.decode(body)
            raws = page.items or []
        except msgspec.ValidationError:
            # One malformed object must not cost the whole list: decode item by item.
            page = self._loose_page_decoder.decode(body)
            raws = [
                raw for item in page.items or [] if (raw := self.decode_object(item)) is not None
            ]
        return page.metadata, [slim for raw in raws if (slim := self.convert(raw)) is not None]

    def decode_object(self, data: msgspec.Raw | bytes) -> _Raw | None:
        """The raw object, or None when it does not decode (reported if relevant)."""
        try:
            raw: _Raw = self._object_decoder.decode(data)
        except InvalidObjectError as error:
            if self.spec.relevant is None or self.spec.relevant(data):
                self._invalid(error)
            return None
        return raw

    def convert(self, raw: _Raw) -> _Slim | None:
        try:
            return self.spec.convert(raw)
        except InvalidObjectError as error:
            self._invalid(error)
            return None
