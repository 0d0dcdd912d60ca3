"""Rows kept in key order in blocks, each block caching its rows joined, per column.

The /metrics body is, per family, every exported Service's lines in key order. Rebuilding
that order and joining 10,000 fragments per family on every change costs as much as the
change is small. Here the rows (a Service's fragment: its lines per family) sit in sorted
blocks of a few hundred; a block keeps each column joined, and a change re-joins only the
columns of its own block whose bytes changed. A family's body is then a list of one chunk
per block, written to the socket as it is.

`sortedcontainers.SortedList` keeps the same shape (a list of sorted sublists), but its
sublists are private: the per-block joined bytes need the blocks themselves.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Iterator

from exporter.vocabulary import ServiceKey

Row = tuple[bytes, ...]
# A row in which None stands for a column's chunk as it already is (kept from the row it
# replaces): a change re-renders some families of a Service and keeps the others.
Update = tuple[bytes | None, ...]


class Block:
    """Consecutive rows in key order, and their columns joined (stale ones set aside).

    The body is held once: after a join, a row's chunks are not kept as bytes of their own
    but found in the joined columns by their end offsets (`row()` copies them out when a
    change needs them). A row set since the last join keeps its new chunks until the next.
    """

    __slots__ = ("ends", "joined", "keys", "rows", "shifted", "stale")

    def __init__(self, keys: list[ServiceKey], rows: list[Update | None], columns: int) -> None:
        self.keys = keys
        # Per row, its chunks set since the last join (None: as in `joined`), or None.
        self.rows = rows
        # Each column's bytes over the rows; a stale column's are out of date.
        self.joined: list[bytes] = [b""] * columns
        # Per column, where each row's chunk ends in `joined` (while the rows stay put).
        self.ends: list[array[int]] = [array("Q") for _ in range(columns)]
        # Columns to join again before they are read.
        self.stale: set[int] = set(range(columns))
        # Rows were inserted or removed: every row is whole, and every column's offsets are
        # recomputed at the join.
        self.shifted = True

    def _joined_chunk(self, position: int, column: int) -> bytes:
        """The row's chunk in a column as last joined (the rows have not moved since)."""
        ends = self.ends[column]
        return self.joined[column][ends[position - 1] if position else 0 : ends[position]]

    def chunk(self, position: int, column: int) -> bytes:
        row = self.rows[position]
        if row is not None:
            chunk = row[column]
            if chunk is not None:
                return chunk
        return self._joined_chunk(position, column)

    def row(self, position: int) -> Row:
        """The row's chunks (copied out of the joined columns where they are held there)."""
        return tuple([self.chunk(position, column) for column in range(len(self.joined))])

    def expand(self) -> None:
        """Every row whole, before rows move (an insert, a removal, a split or a merge)."""
        if self.shifted:
            return
        rows = self.rows
        for position in range(len(rows)):
            rows[position] = self.row(position)
        self.shifted = True

    def rejoin(self) -> int:
        """Join the stale columns again, then hold every row in them; returns how many
        columns were joined."""
        rows = self.rows
        joined = self.joined
        count = len(rows)
        for column in self.stale:
            parts = [self.chunk(position, column) for position in range(count)]
            ends: array[int] = array("Q")
            end = 0
            for chunk in parts:
                end += len(chunk)
                ends.append(end)
            joined[column] = b"".join(parts)
            self.ends[column] = ends
        if self.shifted:
            # Every row is whole: the offsets of the columns not joined come from them.
            for column in range(len(joined)):
                if column in self.stale:
                    continue
                ends = array("Q")
                end = 0
                for row in rows:
                    whole = row[column] if row is not None else None
                    assert whole is not None  # noqa: S101 - expand() made every row whole
                    end += len(whole)
                    ends.append(end)
                self.ends[column] = ends
            self.shifted = False
        joins = len(self.stale)
        self.stale.clear()
        self.rows = [None] * count
        return joins


class SortedBlocks:
    """Rows by key in sorted blocks of `load` to 2 x `load` rows (fewer for the last)."""

    def __init__(self, columns: int, load: int = 256) -> None:
        if load < 4:
            raise ValueError("load must be at least 4")
        self._columns = columns
        self._load = load
        self._blocks: list[Block] = []
        # The last key of each block, for bisect.
        self._maxes: list[ServiceKey] = []

    def __len__(self) -> int:
        return sum(len(block.keys) for block in self._blocks)

    @property
    def blocks(self) -> list[Block]:
        return self._blocks

    def load(self, items: Iterable[tuple[ServiceKey, Row]]) -> int:
        """Replace every row by `items`, which must be in key order (the first render).

        Each block is joined as soon as it is full, so only one block's rows are held
        whole at a time; returns how many columns were joined.
        """
        size = self._load
        self._blocks = []
        joins = 0
        keys: list[ServiceKey] = []
        rows: list[Update | None] = []
        for key, row in items:
            keys.append(key)
            rows.append(row)
            if len(keys) == size:
                block = Block(keys, rows, self._columns)
                joins += block.rejoin()
                self._blocks.append(block)
                keys, rows = [], []
        if keys:
            block = Block(keys, rows, self._columns)
            joins += block.rejoin()
            self._blocks.append(block)
        self._maxes = [block.keys[-1] for block in self._blocks]
        return joins

    def _find(self, key: ServiceKey) -> int:
        index = bisect.bisect_left(self._maxes, key)
        return min(index, len(self._blocks) - 1)

    def row(self, key: ServiceKey) -> Row | None:
        """The key's row, None if absent."""
        if not self._blocks:
            return None
        block = self._blocks[self._find(key)]
        position = bisect.bisect_left(block.keys, key)
        if position < len(block.keys) and block.keys[position] == key:
            return block.row(position)
        return None

    def set(self, key: ServiceKey, row: Update) -> list[int]:
        """Insert the row (whole) or replace the key's row (None: that column's chunk is
        kept, and so is a chunk of the same bytes); marks the columns whose bytes changed
        and returns them (every column with lines, for a new key)."""
        if not self._blocks:
            self._blocks = [Block([key], [_whole(row)], self._columns)]
            self._maxes = [key]
            return [column for column, chunk in enumerate(row) if chunk]
        index = self._find(key)
        block = self._blocks[index]
        position = bisect.bisect_left(block.keys, key)
        if position < len(block.keys) and block.keys[position] == key:
            pending = block.rows[position]
            merged: list[bytes | None] = (
                list(pending) if pending is not None else [None] * self._columns
            )
            replaced: list[int] = []
            for column, chunk in enumerate(row):
                if chunk is None or chunk == block.chunk(position, column):
                    # The bytes held already stand (not a copy of them held besides).
                    continue
                block.stale.add(column)
                merged[column] = chunk
                replaced.append(column)
            if replaced:
                block.rows[position] = tuple(merged)
            return replaced
        block.expand()
        block.keys.insert(position, key)
        block.rows.insert(position, _whole(row))
        replaced = [column for column in range(self._columns) if row[column]]
        block.stale.update(replaced)
        self._maxes[index] = block.keys[-1]
        if len(block.keys) > 2 * self._load:
            self._split(index)
        return replaced

    def remove(self, key: ServiceKey) -> None:
        """Remove the key's row, if present; marks the columns it had lines in."""
        if not self._blocks:
            return
        index = self._find(key)
        block = self._blocks[index]
        position = bisect.bisect_left(block.keys, key)
        if position == len(block.keys) or block.keys[position] != key:
            return
        old = block.row(position)
        block.expand()
        del block.keys[position]
        del block.rows[position]
        block.stale.update(column for column in range(self._columns) if old[column])
        if not block.keys:
            del self._blocks[index]
            del self._maxes[index]
            return
        self._maxes[index] = block.keys[-1]
        if len(block.keys) < self._load // 4 and len(self._blocks) > 1:
            self._merge(index)

    def _split(self, index: int) -> None:
        block = self._blocks[index]
        block.expand()
        half = len(block.keys) // 2
        right = Block(block.keys[half:], block.rows[half:], self._columns)
        del block.keys[half:]
        del block.rows[half:]
        block.stale.update(range(self._columns))
        self._blocks.insert(index + 1, right)
        self._maxes[index] = block.keys[-1]
        self._maxes.insert(index + 1, right.keys[-1])

    def _merge(self, index: int) -> None:
        """Fold a block that shrank into its neighbour (split again if that overflows)."""
        left = index - 1 if index > 0 else index
        first, second = self._blocks[left], self._blocks[left + 1]
        first.expand()
        second.expand()
        first.keys.extend(second.keys)
        first.rows.extend(second.rows)
        first.stale.update(range(self._columns))
        del self._blocks[left + 1]
        del self._maxes[left + 1]
        self._maxes[left] = first.keys[-1]
        if len(first.keys) > 2 * self._load:
            self._split(left)

    def __iter__(self) -> Iterator[ServiceKey]:
        """The keys in order."""
        for block in self._blocks:
            yield from block.keys


def _whole(row: Update) -> Row:
    """A new key's row: every chunk given (there is no old one to keep)."""
    if any(chunk is None for chunk in row):
        raise ValueError("a new row must give every column's chunk")
    return tuple([chunk or b"" for chunk in row])
