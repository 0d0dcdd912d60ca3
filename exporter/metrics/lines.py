"""Sample lines exactly as prometheus_client writes them, formatted with little work per line.

prometheus_client builds each line from a dict of labels it sorts, escapes every value with
three replaces and formats every value with `floatToGoString`. Here each family gets one
`str.format` template with its labels already in sorted order, so a line is one call;
values repeat (0.0, 1.0, small counts, zone and mode names), so their text is cached.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import cast

from prometheus_client.utils import floatToGoString

from exporter.metrics.family import Family, Sample

_go_float = cast("Callable[[float], str]", floatToGoString)

# Bounds on the caches: values past them are formatted each time, never evicted.
_CACHE_LIMIT = 65_536
# Read directly by hot loops; zero is never in it (its sign shows), so check for it.
VALUE_TEXT: dict[float, str] = {}
_ESCAPED: dict[str, str] = {}
# 0.0 and -0.0 are one dict key but two texts.
_ZERO_TEXT = {1.0: _go_float(0.0), -1.0: _go_float(-0.0)}


def value_text(value: float) -> str:
    """`floatToGoString(value)`, from a cache for values seen before."""
    if not value:
        return _ZERO_TEXT[math.copysign(1.0, value)]
    text = VALUE_TEXT.get(value)
    if text is None:
        text = _go_float(value)
        if len(VALUE_TEXT) < _CACHE_LIMIT:
            VALUE_TEXT[value] = text
    return text


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


def escaped(value: str) -> str:
    """A label value escaped as prometheus_client does, from a cache for repeated values."""
    text = _ESCAPED.get(value)
    if text is None:
        text = _escape(value)
        if len(_ESCAPED) < _CACHE_LIMIT:
            _ESCAPED[value] = text
    return text


ESCAPED_LABELS: dict[tuple[str, ...], tuple[str, ...]] = {}


def escaped_labels(labels: tuple[str, ...]) -> tuple[str, ...]:
    """Label values escaped, from a cache: a family's own labels repeat (zones, modes)."""
    text = ESCAPED_LABELS.get(labels)
    if text is None:
        text = tuple([escaped(label) for label in labels])
        if len(ESCAPED_LABELS) < _CACHE_LIMIT:
            ESCAPED_LABELS[labels] = text
    return text


def escaped_once(value: str) -> str:
    """A label value seen once per render (a Service's name): escaped, not cached."""
    return _escape(value)


def line_format(family: Family) -> Callable[..., str]:
    """`format(*escaped label values in the family's label order, value text)` -> one line.

    prometheus_client writes labels sorted by name; the template puts each value where its
    label sorts, so callers pass them in declaration order.
    """
    labels = family.labels
    value_field = "{" + str(len(labels)) + "}"
    if not labels:
        return (family.name + " " + value_field + "\n").format
    order = sorted(range(len(labels)), key=labels.__getitem__)
    pairs = ",".join(f'{labels[index]}="{{{index}}}"' for index in order)
    # "{{" and "}}" are the label set's literal braces.
    return (family.name + "{{" + pairs + "}} " + value_field + "\n").format


class SplitLine:
    """Lines of a family whose own labels all sort after its identity labels (per zone, or
    none): `open + identity text + tail`, the identity text written once per Service entry
    and shared by every such family, the tail cached per sample.

    Zone families are most of a large exposition's lines and their tails repeat (a few
    zones, small counts), so most lines cost a dict lookup and no formatting at all.
    """

    def __init__(self, family: Family, identity: int) -> None:
        own = family.labels[identity:]
        self.open = family.name + "{"
        value_field = "{" + str(len(own)) + "}"
        if own:
            order = sorted(range(len(own)), key=own.__getitem__)
            pairs = ",".join(f'{own[index]}="{{{index}}}"' for index in order)
            template = "," + pairs + "}} " + value_field + "\n"
        else:
            template = "}} " + value_field + "\n"
        self._format = template.format
        self._tails: dict[Sample, str] = {}
        # Read directly by the hot loop; a zero value is never served from it (0.0 and
        # -0.0 are one key but two texts).
        self.cached = self._tails.get

    @staticmethod
    def applies(family: Family, identity: int) -> bool:
        labels = family.labels
        own = labels[identity:]
        return not own or max(labels[:identity], default="") < min(own)

    def tail(self, sample: Sample) -> str:
        labels, value = sample
        text = self._format(*escaped_labels(labels), value_text(value))
        if value and len(self._tails) < _CACHE_LIMIT:
            self._tails[sample] = text
        return text


def identity_text(labels: tuple[str, ...], values: tuple[str, ...]) -> str:
    """`label="value",...` sorted by label, the values already escaped."""
    return ",".join([f'{labels[index]}="{values[index]}"' for index in _sorted_order(labels)])


@functools.cache
def _sorted_order(labels: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(sorted(range(len(labels)), key=labels.__getitem__))


def format_lines(line: Callable[..., str], samples: Iterable[Sample]) -> bytes:
    return "".join(
        [
            line(*[escaped(label) for label in labels], value_text(value))
            for labels, value in samples
        ]
    ).encode()
