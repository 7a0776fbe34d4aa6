"""Top-k sketches (format kinds 6 and 9): ``window_top_k_sketch``'s dyadic time nodes, each
with its row count and a Misra–Gries summary of item counts, read, queried (the same lists
as ``window_top_k_sketch_estimate``, with items of their own Python type), merged and written
byte for byte as the JVM does (SlidingTopK): kind 9, each item once in a dictionary (kind 6,
items written in every node, still reads). docs/top-k.md has the guarantee."""
from __future__ import annotations

import datetime
import decimal
import math
import re
import struct
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple

from windowsketch.sketch import _dyadic
from windowsketch.sketch._base import (_EPOCH, _LONG_MAX, _MASK64, _MIN_EPS, AsOf,
                                       InvalidSketchBytes, SubWindow, WindowSketch, _read_bytes,
                                       _Reader, _signed, _unsigned, _write_bytes, _Writer,
                                       register_family)

_KIND_TOP_K = 6
_KIND_TOP_K_DICTIONARY = 9
_MAX_NODES = 4096
_MIN_PENDING = 64
_MAX_CHECK = 1.0


class ItemCount(NamedTuple):
    """One listed item: ``lower <= exact <= upper``, ``count`` their middle."""

    item: Any
    count: int  # type: ignore[assignment]  # Spark's field name; it hides tuple.count
    lower: int
    upper: int


class _Summary(NamedTuple):
    """Item counts of a group of rows: items (bytes, sorted) and counts; every item's true
    count lies in [counted, counted + error]."""

    items: tuple[bytes, ...]
    counts: tuple[int, ...]
    error: int

    def count_of(self, item: bytes) -> int:
        low, high = 0, len(self.items) - 1
        while low <= high:
            mid = (low + high) >> 1
            if self.items[mid] == item:
                return self.counts[mid]
            if self.items[mid] < item:
                low = mid + 1
            else:
                high = mid - 1
        return 0


#: A node: (level, lo, rows, summary).
_Node = _dyadic.Node


def _capacity(eps: float) -> int:
    return math.ceil(2 / eps) - 1


def _sum(parts: Sequence[_Summary], capacity: int) -> _Summary:
    """The JVM's ItemCounts.sum: counts added item by item, errors added, pruned once."""
    if len(parts) == 1 and len(parts[0].items) <= capacity:
        return parts[0]
    pairs = sorted(((item, count) for p in parts for item, count in zip(p.items, p.counts)),
                   key=lambda pair: pair[0])
    items: list[bytes] = []
    counts: list[int] = []
    for item, count in pairs:
        if items and items[-1] == item:
            counts[-1] += count
        else:
            items.append(item)
            counts.append(count)
    error = sum(p.error for p in parts)
    if len(items) <= capacity:
        return _Summary(tuple(items), tuple(counts), error)
    cut = sorted(counts)[len(counts) - 1 - capacity]  # the (capacity + 1)-th largest
    kept = [i for i, c in enumerate(counts) if c > cut]
    return _Summary(tuple(items[i] for i in kept), tuple(counts[i] - cut for i in kept),
                    error + cut)


_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def _value_order(type_name: str) -> Callable[[bytes], Any]:
    """The sort key that orders items by value, as answers break ties: the bytes
    themselves for every encoding but DECIMAL's two's-complement unscaled value."""
    if type_name.startswith("decimal"):
        return lambda item: int.from_bytes(item, "big", signed=True)
    return lambda item: item


def _decode(item: bytes, type_name: str) -> Any:
    """An item's bytes as the Python value of its Spark type (timestamps in UTC)."""
    def ordered() -> int:
        if len(item) != 8:
            raise InvalidSketchBytes(f"an item does not fit its type {type_name}")
        return int.from_bytes(item, "big") ^ (1 << 63)

    if type_name == "string":
        return item.decode("utf-8", errors="replace")
    if type_name == "boolean":
        if len(item) != 1:
            raise InvalidSketchBytes(f"an item does not fit its type {type_name}")
        return item != b"\x00"
    if type_name in ("tinyint", "smallint", "int", "bigint"):
        return _signed(ordered())
    if type_name == "date":
        return datetime.date(1970, 1, 1) + datetime.timedelta(days=_signed(ordered()))
    if type_name == "timestamp":
        return _EPOCH + datetime.timedelta(microseconds=_signed(ordered()))
    if type_name == "timestamp_ntz":
        return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=_signed(ordered()))
    if type_name in ("float", "double"):
        key = _signed(ordered())
        bits = ~key & _MASK64 ^ (1 << 63) if key < 0 else key
        (value,) = struct.unpack(">d", (bits & _MASK64).to_bytes(8, "big"))
        return struct.unpack(">f", struct.pack(">f", value))[0] if type_name == "float" else value
    scaled = _DECIMAL.fullmatch(type_name)
    if scaled:
        if not item:
            raise InvalidSketchBytes(f"an item does not fit its type {type_name}")
        return decimal.Decimal(int.from_bytes(item, "big", signed=True)).scaleb(-int(scaled.group(2)))
    raise InvalidSketchBytes(f"unknown item type {type_name}")


@register_family
class TopKSketch(WindowSketch):
    """A top-k sketch (``window_top_k_sketch`` / ``_merge``): :meth:`top` lists what
    ``window_top_k_sketch_estimate`` lists, with each item of its own Python type (str,
    int, float, bool, Decimal, date, UTC datetime) where SQL gives its text.

    The bytes of ``SELECT window_top_k_sketch(code, ts, 3)`` over
    ``(1, 404), (2, 200), (3, 404), (4, 500)``:

    >>> s = TopKSketch.from_bytes(bytes.fromhex(
    ...     "570106033f847ae147ae147b0100000000000000043f747ae147ae147b0369"
    ...     "6e740300020100010880000000000000c80100010100010880000000000001"
    ...     "940100010100010880000000000001f401b3ff4397"))
    >>> s
    TopKSketch(kind='top_k', window=3, eps=0.01, now=4, time_unit='positions')
    >>> s.top(2)
    [ItemCount(item=200, count=1, lower=1, upper=1), ItemCount(item=404, count=1, lower=1, upper=1)]
    >>> s.top(1, as_of=4, sub_window=1), s.top(1, as_of=9)
    ([ItemCount(item=500, count=1, lower=1, upper=1)], [])
    """

    __slots__ = ("_check", "_item_type", "_nodes", "_pending", "_compressed", "_merged")
    _check: float
    _item_type: str
    _nodes: list[_Node]
    _pending: list[_Node]
    _compressed: tuple[list[_Node], float] | None
    _merged: bool

    _family: ClassVar[str] = "a top-k sketch (window_top_k_sketch)"
    _kind_names: ClassVar[dict[int, str]] = {_KIND_TOP_K: "top_k",
                                             _KIND_TOP_K_DICTIONARY: "top_k_dictionary"}

    def _height(self) -> int:
        return _dyadic.height_for(self._window)

    @property
    def item_type(self) -> str:
        """The items' Spark type, as the aggregate recorded it (``"string"``, ``"bigint"``)."""
        return self._item_type

    def _read(self, r: _Reader) -> None:
        self._check_eps(_MIN_EPS, 1.0)
        check = r.double()
        if not (self._eps / 2 <= check <= _MAX_CHECK):
            raise InvalidSketchBytes(f"invalid collapse parameter {check}")
        limit = len(r.data)
        self._item_type = _read_bytes(r).decode("utf-8", errors="replace")
        dictionary: list[bytes] | None = None
        if self._kind == _KIND_TOP_K_DICTIONARY:
            d = r.varint()
            if d < 0 or d > limit:
                raise InvalidSketchBytes(f"invalid item count {d}")
            dictionary = []
            for _ in range(d):
                item = _read_bytes(r)
                if dictionary and dictionary[-1] >= item:
                    raise InvalidSketchBytes("items out of order")
                dictionary.append(item)
        used = [False] * len(dictionary) if dictionary is not None else []
        n = r.varint()
        if n < 0 or n > limit // 5 or (n > 0 and not self._has_time):
            raise InvalidSketchBytes(f"invalid node count {n}")
        capacity = _capacity(self._eps)
        now = self._now
        nodes: list[_Node] = []
        previous = 0
        for i in range(n):
            level = r.byte()
            lo = _dyadic.read_lo(r, i, now, previous)
            total = r.varint()
            error = r.varint()
            size = r.varint()
            if size < 0 or size > capacity:
                raise InvalidSketchBytes(f"invalid item count at node {i}")
            items, counts = [], []
            index = -1
            for _ in range(size):
                if dictionary is None:
                    items.append(_read_bytes(r))
                else:
                    step = r.varint()
                    if step < 0 or step >= len(dictionary) - index - 1:
                        raise InvalidSketchBytes(f"invalid item at node {i}")
                    index += step + 1
                    items.append(dictionary[index])
                    used[index] = True
                counts.append(r.varint())
            nodes.append((level, lo, total, _Summary(tuple(items), tuple(counts), error)))
            previous = lo
        if not all(used):
            raise InvalidSketchBytes("an unused item")
        self._check = check
        self._nodes = nodes
        self._pending = []
        self._compressed = None
        self._merged = False

    def _validate(self) -> None:
        problem = _invariant_problem(self._window, self._now, self._check, self._height(),
                                     _capacity(self._eps), self._nodes)
        if problem is not None:
            raise InvalidSketchBytes(problem)

    # -- queries ---------------------------------------------------------------------

    def top(self, k: int, as_of: AsOf | None = None,
            sub_window: SubWindow | None = None) -> list[ItemCount]:
        """The ``k`` items with the largest estimates in the window of length ``sub_window``
        (default: the sketch's window) ending at ``as_of`` (default: the sketch's latest
        ``ts``), as ``window_top_k_sketch_estimate`` lists them: ``lower <= exact <= upper``
        for each, ``upper - lower <= eps * n``; ties go to the larger lower bound, then to
        the item. ``as_of`` and ``sub_window`` as for :meth:`CountSketch.estimate`.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        end, length = self._query_window(as_of, sub_window, "top")
        if not self._has_time:
            return []
        inside: list[_Summary] = []
        straddling: list[_Summary] = []
        for level, lo, _, summary in self._query_nodes():
            if lo <= end and _unsigned(end - lo) < length:
                inside.append(summary)
            elif lo < end:
                last = min(_dyadic.last(level, lo), end)
                if _unsigned(end - last) < length:
                    straddling.append(summary)
        lower = _sum(inside, _LONG_MAX)
        over = _sum(straddling, _LONG_MAX)
        slack = lower.error + over.error
        ranked = []
        for item, low in zip(lower.items, lower.counts):
            high = low + slack + over.count_of(item)
            ranked.append((item, low + (high - low) // 2, low, high))
        value_order = _value_order(self._item_type)
        ranked.sort(key=lambda c: (-c[1], -c[2], value_order(c[0])))
        return [ItemCount(_decode(item, self._item_type), estimate, low, high)
                for item, estimate, low, high in ranked[:k]]

    def estimate(self, k: int, as_of: AsOf | None = None,
                 sub_window: SubWindow | None = None) -> list[ItemCount]:
        """The same as :meth:`top`."""
        return self.top(k, as_of, sub_window)

    def _query_nodes(self) -> list[_Node]:
        return self._compress()[0] if self._merged else self._nodes

    # -- merging and writing ---------------------------------------------------------

    def _own_state(self) -> None:
        self._nodes = list(self._nodes)
        self._pending = list(self._pending)

    def _check_mergeable(self, other: WindowSketch) -> None:
        assert isinstance(other, TopKSketch)
        if other._item_type != self._item_type and other._has_time and self._has_time:
            raise ValueError(f"cannot merge top-k sketches of items {self._item_type} and "
                             f"{other._item_type}")

    def _merge_state(self, other: WindowSketch) -> None:
        assert isinstance(other, TopKSketch)
        if not self._item_type:
            self._item_type = other._item_type
        self._compressed = None
        self._merged = True
        self._check = max(self._check, other._check)
        for node in other._nodes + other._pending:
            self._pending.append(node)
            # The JVM compresses once the pending nodes outnumber the compressed ones.
            if len(self._pending) >= max(_MIN_PENDING, len(self._nodes)):
                self._nodes, self._check = self._compress()
                self._pending = []
                self._compressed = None

    def _compress(self) -> tuple[list[_Node], float]:
        if self._compressed is None:
            self._compressed = _compress(self._window, self._now, self._height(), self._check,
                                         _capacity(self._eps), self._nodes, self._pending)
        return self._compressed

    def _written_kind(self) -> int:
        return _KIND_TOP_K_DICTIONARY  # as the JVM writes every top-k sketch

    def _write(self, w: _Writer) -> None:
        nodes, check = self._compress()
        w.double(check)
        _write_bytes(w, self._item_type.encode("utf-8"))
        dictionary = sorted({item for _, _, _, summary in nodes for item in summary.items})
        w.varint(len(dictionary))
        for item in dictionary:
            _write_bytes(w, item)
        index_of = {item: i for i, item in enumerate(dictionary)}
        w.varint(len(nodes))
        previous = self._now
        for i, (level, lo, total, summary) in enumerate(nodes):
            w.byte(level)
            w.varint(self._now - lo if i == 0 else lo - previous)
            w.varint(total)
            w.varint(summary.error)
            w.varint(len(summary.items))
            index = -1
            for item, count in zip(summary.items, summary.counts):
                w.varint(index_of[item] - index - 1)
                index = index_of[item]
                w.varint(count)
            previous = lo


def _compress(window: int, now: int, height: int, check: float, capacity: int,
              nodes: list[_Node], pending: list[_Node]) -> tuple[list[_Node], float]:
    """SlidingTopK.compress: gather, collapse, and past the node cap double c and collapse
    again."""
    def fold(k: int, lo: int, nodes: Sequence[_Node], a: int, b: int, rows: int,
             _after: int) -> _Node:
        return (k, lo, rows, _sum([nodes[i][3] for i in range(a, b)], capacity))

    gathered = _dyadic.gather(window, now, nodes, pending,
                              lambda _level, _lo, x, y: _sum([x, y], capacity))
    collapsed = _dyadic.collapse(height, check, gathered, fold)
    while len(collapsed) > _MAX_NODES and check < _MAX_CHECK:
        check *= 2
        collapsed = _dyadic.collapse(height, check, collapsed, fold)
    return collapsed, check


def _invariant_problem(window: int, now: int, check: float, height: int, capacity: int,
                       nodes: Sequence[_Node]) -> str | None:
    """What the JVM's SlidingTopK.checkInvariant finds wrong with stored nodes, or None."""
    total = 0
    for i, (_, _, rows, s) in enumerate(nodes):
        if (rows < 1 or total + rows > _LONG_MAX or len(s.items) > capacity or s.error < 0
                or any(c < 1 for c in s.counts)
                or any(s.items[j - 1] >= s.items[j] for j in range(1, len(s.items)))
                or sum(s.counts) + (capacity + 1) * s.error > rows):
            return f"invalid item counts at node {i}"
        total += rows
    return _dyadic.structure_problem(window, now, check, height, nodes)
