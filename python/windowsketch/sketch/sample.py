"""Sample sketches (format kind 10): ``window_sample_sketch``'s rows, each with its time,
its copies and its value as Spark's binary row, read, queried (the samples of
``window_sample_sketch_get``, with values of their own Python type), merged and written byte
for byte as the JVM does (SlidingSample). docs/sampling.md has the guarantee."""
from __future__ import annotations

import datetime
import decimal
import heapq
import re
import struct
from typing import Any, ClassVar, NamedTuple

from windowsketch.sketch._base import (_EPOCH, _LONG_MAX, _MASK64, AsOf, InvalidSketchBytes,
                                       SubWindow, WindowSketch, _read_bytes, _Reader,
                                       _mix64, _unsigned, _write_bytes, _Writer,
                                       register_family, value_hash)

_KIND_SAMPLE = 10
_MAX_K = 10000


def priority(seed: int, ts: int, value: bytes) -> int:
    """A row's priority (unsigned 64 bits): SplitMix64's finalizer chained over the seed,
    the time, the value's bytes as little-endian 8-byte words (the last zero-padded) and
    their length, as the JVM computes it."""
    return value_hash(_mix64(_mix64(seed & _MASK64) ^ (ts & _MASK64)), value)


class _Row(NamedTuple):
    """A distinct (time, value) of the window with its copies; ``rank`` orders rows."""

    ts: int
    value: bytes
    copies: int
    priority: int

    @property
    def rank(self) -> tuple[int, int, bytes]:
        return (self.priority, self.ts, self.value)


def _prune(rows: list[_Row], inside: Any, k: int) -> list[_Row]:
    """The JVM's prune: the rows ``inside`` accepts, equal ones joined, less those that k
    rows at their time or later outrank; oldest first, then by rank."""
    ordered = sorted((r for r in rows if inside(r.ts)), key=lambda r: (r.ts, r.rank),
                     reverse=True)
    best: list[tuple[tuple[int, int, bytes], int]] = []  # min-heap of (rank, copies)
    held = 0
    kept: list[_Row] = []
    i = 0
    while i < len(ordered):
        r = ordered[i]
        j = i + 1
        while j < len(ordered) and ordered[j].ts == r.ts and ordered[j].value == r.value:
            r = r._replace(copies=r.copies + ordered[j].copies)
            j += 1
        if held < k or r.rank > best[0][0]:
            kept.append(r)
            heapq.heappush(best, (r.rank, r.copies))
            held += r.copies
            while held - best[0][1] >= k:
                held -= heapq.heappop(best)[1]
        i = j
    kept.reverse()
    return kept


def _top(rows: list[_Row], k: int) -> list[_Row]:
    """The k highest-ranked rows (the lowest may give part of its copies), oldest first,
    equal times by bytes."""
    chosen = []
    left = k
    for r in sorted(rows, key=lambda r: r.rank, reverse=True):
        if left == 0:
            break
        take = min(left, r.copies)
        chosen.append(r._replace(copies=take))
        left -= take
    return sorted(chosen, key=lambda r: (r.ts, r.value))


# -- values: Spark's binary row of one field ----------------------------------------------

_FIXED = {"boolean": 1, "tinyint": 1, "smallint": 2, "int": 4, "bigint": 8, "float": 4,
          "double": 8, "date": 4, "timestamp": 8, "timestamp_ntz": 8}
_TYPE_TOKEN = re.compile(r"\s*([A-Za-z0-9_]+|`(?:[^`]|``)*`|[<>(),:])")


def _parse_type(text: str) -> Any:
    """A catalog type string as a tree: a name, ("decimal", p, s), ("array", element) or
    ("struct", [(name, type), ...]). Raises ValueError for what it does not know."""
    tokens = _TYPE_TOKEN.findall(text)
    if "".join(tokens).replace(" ", "") != text.replace(" ", ""):
        raise ValueError(text)
    pos = 0

    def take(expected: str | None = None) -> str:
        nonlocal pos
        if pos >= len(tokens) or (expected is not None and tokens[pos] != expected):
            raise ValueError(text)
        pos += 1
        return str(tokens[pos - 1])

    def parse() -> Any:
        name = take().lower()
        if name == "decimal":
            take("(")
            precision = int(take())
            take(",")
            scale = int(take())
            take(")")
            return ("decimal", precision, scale)
        if name == "array":
            take("<")
            element = parse()
            take(">")
            return ("array", element)
        if name == "struct":
            take("<")
            fields: list[tuple[str, Any]] = []
            while tokens[pos] != ">":
                if fields:
                    take(",")
                field = take().strip("`").replace("``", "`")
                take(":")
                fields.append((field, parse()))
            take(">")
            return ("struct", fields)
        if name in _FIXED or name in ("string", "binary"):
            return name
        raise ValueError(text)

    tree = parse()
    if pos != len(tokens):
        raise ValueError(text)
    return tree


def _fixed_size(t: Any) -> int | None:
    """The bytes of a fixed-width value, None for a variable-length one."""
    if isinstance(t, str):
        return _FIXED.get(t)
    if t[0] == "decimal" and t[1] <= 18:
        return 8
    return None


def _scalar(data: bytes, at: int, t: Any) -> Any:
    """A fixed-width value at ``at``."""
    if t == "boolean":
        return data[at] != 0
    if t in ("tinyint", "smallint", "int", "bigint"):
        return int.from_bytes(data[at:at + _FIXED[t]], "little", signed=True)
    if t == "float":
        return struct.unpack_from("<f", data, at)[0]
    if t == "double":
        return struct.unpack_from("<d", data, at)[0]
    if t == "date":
        return datetime.date(1970, 1, 1) + datetime.timedelta(
            days=int.from_bytes(data[at:at + 4], "little", signed=True))
    micros = int.from_bytes(data[at:at + 8], "little", signed=True)
    if t == "timestamp":
        return _EPOCH + datetime.timedelta(microseconds=micros)
    if t == "timestamp_ntz":
        return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=micros)
    return decimal.Decimal(micros).scaleb(-t[2])  # a short decimal's unscaled long


def _variable(data: bytes, base: int, size: int, slot: int, start: int, t: Any) -> Any:
    """A variable-length value whose ``offset << 32 | size`` is ``slot``, from ``base``;
    checked to lie in the ``size`` bytes after ``start``."""
    offset, length = slot >> 32, slot & 0xFFFFFFFF
    if offset < start or offset + length > size:
        raise InvalidSketchBytes("a value is not a binary row of its type")
    at = base + offset
    if t in ("string", "binary"):
        raw = data[at:at + length]
        if t == "binary":
            return raw
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise InvalidSketchBytes("a value is not a binary row of its type") from None
    if t[0] == "decimal":
        if length > 16:
            raise InvalidSketchBytes("a value is not a binary row of its type")
        unscaled = int.from_bytes(data[at:at + length], "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-t[2])
    if t[0] == "struct":
        return _row(data, at, length, t[1])
    return _array(data, at, length, t[1])


def _row(data: bytes, base: int, size: int, fields: list[tuple[str, Any]]) -> dict[str, Any]:
    bitset = (len(fields) + 63) // 64 * 8
    fixed = bitset + 8 * len(fields)
    if size < fixed or size % 8:
        raise InvalidSketchBytes("a value is not a binary row of its type")
    out: dict[str, Any] = {}
    for i, (name, t) in enumerate(fields):
        slot_at = base + bitset + 8 * i
        if data[base + i // 8] >> (i % 8) & 1:
            out[name] = None
        elif _fixed_size(t) is not None:
            out[name] = _scalar(data, slot_at, t)
        else:
            slot = int.from_bytes(data[slot_at:slot_at + 8], "little")
            out[name] = _variable(data, base, size, slot, fixed, t)
    return out


def _array(data: bytes, base: int, size: int, element: Any) -> list[Any]:
    if size < 8:
        raise InvalidSketchBytes("a value is not a binary row of its type")
    n = int.from_bytes(data[base:base + 8], "little", signed=True)
    if n < 0 or n > size:
        raise InvalidSketchBytes("a value is not a binary row of its type")
    header = 8 + (n + 63) // 64 * 8
    width = _fixed_size(element) or 8
    end = header + (n * width + 7) // 8 * 8
    if end > size:
        raise InvalidSketchBytes("a value is not a binary row of its type")
    out: list[Any] = []
    for i in range(n):
        at = base + header + width * i
        if data[base + 8 + i // 8] >> (i % 8) & 1:
            out.append(None)
        elif _fixed_size(element) is not None:
            out.append(_scalar(data, at, element))
        else:
            slot = int.from_bytes(data[at:at + 8], "little")
            out.append(_variable(data, base, size, slot, end, element))
    return out


def _value(data: bytes, t: Any) -> Any:
    """The value a one-field binary row holds."""
    return _row(data, 0, len(data), [("x", t)])["x"]


@register_family
class SampleSketch(WindowSketch):
    """A ``window_sample_sketch``: the rows of its window that fewer than ``k`` rows at
    their time or later outrank, so the sample of any window ending at or after ``now``
    (any sub-window) is the one ``approx_window_sample`` draws from exactly its rows.

    The bytes of ``SELECT window_sample_sketch(url, ts, 3, 2)`` over ``/a`` … ``/d`` at
    positions 1 … 4 (the sketch keeps the three rows of its window):

    >>> s = WindowSketch.from_bytes(bytes.fromhex(
    ...     "57010a03000000000000000001000000000000000402000000000000000006737472696e67030001"
    ...     "18000000000000000002000000100000002f6400000000000001011800000000000000000200000010"
    ...     "0000002f63000000000000010118000000000000000002000000100000002f620000000000003b31e126"))
    >>> s
    SampleSketch(window=3, k=2, seed=0, value_type='string', now=4, time_unit='positions')
    >>> s.sample(), s.sample(1)
    (['/b', '/c'], ['/b'])
    >>> s.sample(2, as_of=5), s.sample(2, as_of=4, sub_window=1)
    (['/c', '/d'], ['/d'])
    >>> s.merge(s).sample()  # each row twice: a row's copies are drawn together
    ['/b', '/b']
    """

    __slots__ = ("_k", "_seed", "_item_type", "_rows")
    _k: int
    _seed: int
    _item_type: str
    _rows: list[_Row]

    _family: ClassVar[str] = "a sample sketch (window_sample_sketch)"
    _kind_names: ClassVar[dict[int, str]] = {_KIND_SAMPLE: "sample"}
    _parameter_name: ClassVar[str] = "k"

    def _read(self, r: _Reader) -> None:
        k = r.varint()
        if self._eps != 0.0 or not 1 <= k <= _MAX_K:
            raise InvalidSketchBytes(f"invalid parameters window={self._window}, k={k}")
        self._k = k
        self._seed = r.long()
        self._item_type = _read_bytes(r).decode("utf-8", "replace")
        n = r.varint()
        if n < 0 or n > r.end or (n > 0 and not self._has_time):
            raise InvalidSketchBytes(f"invalid row count {n}")
        rows: list[_Row] = []
        previous = self._now
        total = 0
        for i in range(n):
            step = r.varint()
            ts = previous - step
            if step < 0 or ts > self._now or not self._in_window(ts):
                raise InvalidSketchBytes(f"row {i + 1} lies outside the window")
            copies = r.varint()
            if copies < 1 or copies > _LONG_MAX - total:
                raise InvalidSketchBytes(f"invalid copies {copies}")
            total += copies
            value = _read_bytes(r)
            if i > 0 and step == 0 and rows[-1].value >= value:
                raise InvalidSketchBytes("rows of one time out of order")
            rows.append(_Row(ts, value, copies, priority(self._seed, ts, value)))
            previous = ts
        self._rows = rows

    def _validate(self) -> None:
        kept = _prune(self._rows, self._in_window, self._k)
        if len(kept) != len(self._rows):
            raise InvalidSketchBytes(
                f"{len(self._rows) - len(kept)} rows are expired, dominated or repeated")

    @property
    def k(self) -> int:
        """The largest sample the sketch gives."""
        return self._k

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def value_type(self) -> str:
        """The type of the sampled ``x``, as Spark names it (``struct<url:string,...>``)."""
        return self._item_type

    def __repr__(self) -> str:
        return (f"SampleSketch(window={self.window!r}, k={self._k}, seed={self._seed}, "
                f"value_type={self._item_type!r}, now={self.now!r}, "
                f"time_unit={self.time_unit!r})")

    def _describe_parameters(self) -> str:
        return (f"window={self._window} {self.time_unit}, k={self._k}, seed={self._seed}, "
                f"values {self._item_type}")

    def estimate(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a sample sketch has no estimate; use sample()")

    def sample(self, k: int | None = None, as_of: AsOf | None = None,
               sub_window: SubWindow | None = None) -> list[Any]:
        """The sample of ``k`` values (default: the sketch's k) of the window of length
        ``sub_window`` ending at ``as_of``, oldest first, as ``window_sample_sketch_get``
        draws it, each value of its Python type (a dict for a struct, a list for an array,
        a UTC datetime for a TIMESTAMP)."""
        count = self._k if k is None else k
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= self._k:
            raise ValueError(f"k must be an int in [1, {self._k}], got {k!r}")
        end, length = self._query_window(as_of, sub_window, "sample")
        inside = [r for r in self._rows if r.ts <= end and _unsigned(end - r.ts) < length]
        try:
            t = _parse_type(self._item_type)
        except (ValueError, IndexError):
            raise ValueError(f"values of type {self._item_type} are not decoded here; "
                             "sample_bytes() gives their binary rows") from None
        return [_value(r.value, t) for r in _top(inside, count) for _ in range(r.copies)]

    def sample_bytes(self, k: int | None = None, as_of: AsOf | None = None,
                     sub_window: SubWindow | None = None) -> list[tuple[int, bytes]]:
        """:meth:`sample` as (time on the sketch's axis, the value's binary row) pairs."""
        count = self._k if k is None else k
        end, length = self._query_window(as_of, sub_window, "sample")
        inside = [r for r in self._rows if r.ts <= end and _unsigned(end - r.ts) < length]
        return [(r.ts, r.value) for r in _top(inside, count) for _ in range(r.copies)]

    def _own_state(self) -> None:
        self._rows = list(self._rows)

    def _check_mergeable(self, other: WindowSketch) -> None:
        assert isinstance(other, SampleSketch)
        if (other._k, other._seed, other._item_type) != (self._k, self._seed, self._item_type):
            raise ValueError(f"cannot merge sketches of different parameters: "
                             f"{self._describe_parameters()} versus "
                             f"{other._describe_parameters()}")

    def _merge_state(self, other: WindowSketch) -> None:
        assert isinstance(other, SampleSketch)
        self._rows = _prune(self._rows + other._rows, self._in_window, self._k)

    def _write(self, w: _Writer) -> None:
        w.varint(self._k)
        w.long(self._seed)
        _write_bytes(w, self._item_type.encode())
        rows = sorted(self._rows, key=lambda r: (-r.ts, r.value))
        w.varint(len(rows))
        previous = self._now
        for r in rows:
            w.varint(previous - r.ts)
            w.varint(r.copies)
            _write_bytes(w, r.value)
            previous = r.ts

