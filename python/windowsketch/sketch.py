"""Read, query, merge and write stored sketch columns in pure Python: no Spark, no JVM.

A ``window_sketch`` or ``window_distinct_sketch`` column holds bytes in the format of
``docs/format.md``. This module reads every kind the JVM writes, answers the same queries
as ``window_sketch_estimate`` / ``window_sketch_bounds`` / ``window_distinct_sketch_estimate``
with the same numbers, merges as ``window_sketch_merge`` / ``window_distinct_sketch_merge``
do and writes the bytes the JVM would write for the same state::

    from datetime import datetime, timedelta
    from windowsketch.sketch import WindowSketch

    s = WindowSketch.from_bytes(blob)
    s.estimate()                                    # the window ending at the sketch's now
    s.bounds(as_of=datetime(2025, 6, 2), sub_window=timedelta(minutes=10))

Column helpers (:func:`estimate_column`, :func:`bounds_column`, :func:`merge_column`)
answer for a whole pandas Series, pyarrow array or list of sketch bytes at once.

It needs only the standard library; pandas and pyarrow are used when given.
"""
from __future__ import annotations

import math
import struct
import zlib
import importlib
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any, Union

from windowsketch import _hllpp_tables

__all__ = ["InvalidSketchBytes", "WindowSketch", "bounds_column", "estimate_column",
           "merge_column"]

#: What ``as_of`` may be: a point in time for time sketches, a position for position ones.
AsOf = Union[datetime, date, int]
#: What ``sub_window`` may be: a duration for time sketches, a number of positions otherwise.
SubWindow = Union[timedelta, int]

_MAGIC = 0x57
_VERSION = 1
_KIND_HISTOGRAM = 1
_KIND_DYADIC = 2
_KIND_DISTINCT = 3
_FLAG_HAS_TIME = 1
_FLAG_MICROSECONDS = 2

_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_MASK64 = (1 << 64) - 1
_MICROS_PER_DAY = 86_400_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# Limits the JVM enforces (ExponentialHistogram, DyadicWindowSketch, SlidingHyperLogLog).
_MIN_EPS = 1e-4
_MAX_LEVELS = 62
_MAX_NODES = 4096
_MIN_RSD = 0.01
_MAX_RSD = 0.39

_DOUBLE = struct.Struct(">d")
_LONG = struct.Struct(">q")

_KIND_NAMES = {_KIND_HISTOGRAM: "histogram", _KIND_DYADIC: "dyadic", _KIND_DISTINCT: "distinct"}


class InvalidSketchBytes(ValueError):
    """Bytes that are not a readable sketch: truncated, corrupted, foreign or of another
    format version. The message starts with "invalid sketch bytes", as the JVM's does."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"invalid sketch bytes: {problem}")


def _signed(x: int) -> int:
    """``x`` wrapped to a signed 64-bit long, as the JVM's arithmetic wraps."""
    x &= _MASK64
    return x - (1 << 64) if x > _LONG_MAX else x


def _unsigned(x: int) -> int:
    return x & _MASK64


class _Reader:
    """Reads the bytes before the checksum, raising InvalidSketchBytes past their end."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, end: int) -> None:
        self.data = data
        self.pos = 0
        self.end = end

    def byte(self) -> int:
        """One byte as the JVM's signed byte."""
        if self.pos >= self.end:
            raise InvalidSketchBytes("truncated")
        b = self.data[self.pos]
        self.pos += 1
        return b - 256 if b > 127 else b

    def long(self) -> int:
        if self.pos + 8 > self.end:
            raise InvalidSketchBytes("truncated")
        v = int.from_bytes(self.data[self.pos:self.pos + 8], "big", signed=True)
        self.pos += 8
        return v

    def double(self) -> float:
        if self.pos + 8 > self.end:
            raise InvalidSketchBytes("truncated")
        (v,) = _DOUBLE.unpack_from(self.data, self.pos)
        self.pos += 8
        return float(v)

    def varint(self) -> int:
        """Unsigned LEB128 as the JVM reads it, returned as a signed long."""
        data = self.data
        pos = self.pos
        if pos < self.end and data[pos] < 0x80:
            self.pos = pos + 1
            return data[pos]
        v = 0
        shift = 0
        while True:
            if shift > 63:
                raise InvalidSketchBytes("varint too long")
            if pos >= self.end:
                raise InvalidSketchBytes("truncated")
            b = data[pos]
            pos += 1
            if shift == 63 and (b & 0x7E) != 0:
                raise InvalidSketchBytes("varint overflows")
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        self.pos = pos
        return _signed(v)


def _varint_at(r: _Reader, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` (signed, as the JVM reads it) and the position after it:
    up to 9 bytes here, where nothing can overflow; longer ones through the strict reader."""
    data, end = r.data, r.end
    v = 0
    shift = 0
    while shift < 63 and pos < end:
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, pos
        shift += 7
    r.pos = pos - shift // 7
    return r.varint(), r.pos


class _Writer:
    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def byte(self, b: int) -> None:
        self.out.append(b & 0xFF)

    def long(self, v: int) -> None:
        self.out += _unsigned(v).to_bytes(8, "big")

    def double(self, v: float) -> None:
        self.out += _DOUBLE.pack(v)

    def varint(self, v: int) -> None:
        rest = _unsigned(v)
        while rest > 0x7F:
            self.out.append((rest & 0x7F) | 0x80)
            rest >>= 7
        self.out.append(rest)

    def finish(self) -> bytes:
        self.out += zlib.crc32(self.out).to_bytes(4, "big")
        return bytes(self.out)


def _older_age(age: int, step: int, max_age: int) -> int:
    """The unsigned age one step further back, refused past the start of time."""
    older = age + _unsigned(step)
    if older > max_age:  # max_age < 2^64: no unsigned wrap-around either
        raise InvalidSketchBytes("timestamps out of range")
    return older


class WindowSketch:
    """One stored sketch: a count sketch (``window_sketch``, or the time-ordered histogram
    of live counts) or a distinct-count sketch (``window_distinct_sketch``).

    Build it with :meth:`from_bytes`; it is immutable (:meth:`merge` returns a new one).
    The bytes of ``SELECT window_sketch(v, pos, 5)`` over one event at position 17:

    >>> s = WindowSketch.from_bytes(bytes.fromhex(
    ...     "570102053f847ae147ae147b0100000000000000113f947ae147ae147b01000001b4a7fd40"))
    >>> s
    WindowSketch(kind='dyadic', window=5, eps=0.01, now=17, time_unit='positions')
    >>> s.bounds(), s.bounds(as_of=21), s.bounds(as_of=22)
    ((1, 1, 1), (1, 1, 1), (0, 0, 0))
    >>> s.merge(s).estimate(as_of=20, sub_window=4)
    2
    >>> WindowSketch.from_bytes(s.to_bytes()[:-1])
    Traceback (most recent call last):
    ...
    windowsketch.sketch.InvalidSketchBytes: invalid sketch bytes: checksum mismatch (truncated or corrupted bytes)
    """

    __slots__ = ("_kind", "_window", "_eps", "_has_time", "_microseconds", "_now",
                 "_sizes", "_buckets", "_invariant", "_nodes", "_pending", "_compressed",
                 "_registers")
    _kind: int
    _window: int
    _eps: float
    _has_time: bool
    _microseconds: bool
    _now: int
    # Kind 1: buckets per level, and each bucket's (newest, oldest) timestamps, newest first.
    _sizes: list[int]
    _buckets: list[tuple[int, int]]
    # Kind 2: the invariant parameter; nodes (level, lo, count) as read or compressed, and
    # nodes merged in but not compressed yet; the compressed form of both, once computed.
    _invariant: float
    _nodes: list[tuple[int, int, int]]
    _pending: list[tuple[int, int, int]]
    _compressed: tuple[list[tuple[int, int, int]], float] | None
    # Kind 3: per register, its (time, rank) pairs, oldest first.
    _registers: list[list[tuple[int, int]]]

    def __init__(self) -> None:
        raise TypeError("use WindowSketch.from_bytes(data) to read a sketch")

    # -- reading ---------------------------------------------------------------------

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> WindowSketch:
        """Reads sketch bytes of any kind, after every check the JVM makes.

        Raises
        ------
        InvalidSketchBytes
            (a ValueError) for bytes that are not a readable sketch, naming the problem.
        TypeError
            when ``data`` is not bytes.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes (a sketch column's value), got "
                            f"{type(data).__name__}")
        data = bytes(data)
        if len(data) == 0 or data[0] != _MAGIC:
            raise InvalidSketchBytes("the bytes are not a windowsketch sketch (bad magic byte)")
        if len(data) < 2 or data[1] != _VERSION:
            version = "missing" if len(data) < 2 else str(data[1] - 256 if data[1] > 127
                                                          else data[1])
            raise InvalidSketchBytes(f"format version {version} is not supported (this "
                                     f"build reads version {_VERSION})")
        end = len(data) - 4
        if end < 2:
            raise InvalidSketchBytes("truncated")
        if zlib.crc32(data[:end]) != int.from_bytes(data[end:], "big"):
            raise InvalidSketchBytes("checksum mismatch (truncated or corrupted bytes)")
        r = _Reader(data, end)
        r.pos = 2
        kind = r.byte()
        window = r.varint()
        eps = r.double()
        if window <= 0:
            raise InvalidSketchBytes(f"invalid parameters window={window}, eps={eps}")
        flags = r.byte()
        if flags & ~(_FLAG_HAS_TIME | _FLAG_MICROSECONDS):
            raise InvalidSketchBytes(f"unknown flags {flags}")
        now = r.long()
        s = object.__new__(cls)
        s._kind = kind
        s._window = window
        s._eps = eps
        s._has_time = bool(flags & _FLAG_HAS_TIME)
        s._microseconds = bool(flags & _FLAG_MICROSECONDS)
        s._now = now
        s._sizes = []
        s._buckets = []
        s._invariant = 0.0
        s._nodes = []
        s._pending = []
        s._compressed = None
        s._registers = []
        if kind == _KIND_DISTINCT:
            if not _MIN_RSD <= eps <= _MAX_RSD:
                raise InvalidSketchBytes(f"invalid parameters window={window}, rsd={eps}")
            s._read_distinct(r)
        elif kind in (_KIND_HISTOGRAM, _KIND_DYADIC):
            if not _MIN_EPS <= eps < 1.0:
                raise InvalidSketchBytes(f"invalid parameters window={window}, eps={eps}")
            if kind == _KIND_HISTOGRAM:
                s._read_histogram(r)
            else:
                s._read_dyadic(r)
        else:
            raise InvalidSketchBytes(f"unknown sketch kind {kind}")
        if r.pos != end:
            raise InvalidSketchBytes("trailing bytes after the sketch")
        return s

    def _merge_at(self) -> int:
        k = math.ceil(1.0 / self._eps)
        return (k + 1) // 2 + 2

    def _read_histogram(self, r: _Reader) -> None:
        merge_at = self._merge_at()
        levels = r.varint()
        if levels < 0 or levels > _MAX_LEVELS or (levels > 0 and not self._has_time):
            raise InvalidSketchBytes(f"invalid level count {levels}")
        sizes = []
        for level in range(levels):
            size = r.varint()
            least = 1 if level == levels - 1 else merge_at - 2
            if size < least or size >= merge_at:
                raise InvalidSketchBytes(f"invalid bucket count {size} at level {level}")
            sizes.append(size)
        now, window = self._now, self._window
        max_age = _unsigned(now - _LONG_MIN)
        first_level = sizes[0] if sizes else 0
        age = 0
        buckets = []
        for b in range(sum(sizes)):
            age = _older_age(age, r.varint(), max_age)
            if age >= window:
                raise InvalidSketchBytes("a bucket lies outside the window")
            newest = _signed(now - age)
            span = r.varint()
            if b < first_level and span != 0:
                raise InvalidSketchBytes("a single-event bucket spans more than one timestamp")
            age = _older_age(age, span, max_age)
            buckets.append((newest, _signed(now - age)))
        self._sizes = sizes
        self._buckets = buckets

    def _height(self) -> int:
        return min(62, (self._window - 1).bit_length())

    def _read_dyadic(self, r: _Reader) -> None:
        invariant = r.double()
        if not (invariant >= 2 * self._eps and invariant < math.inf):
            raise InvalidSketchBytes(f"invalid invariant parameter {invariant}")
        n = r.varint()
        if n < 0 or n > _MAX_NODES or (n > 0 and not self._has_time):
            raise InvalidSketchBytes(f"invalid node count {n}")
        height = self._height()
        now = self._now
        nodes: list[tuple[int, int, int]] = []
        total = 0
        prev_level, prev_lo = 0, 0
        # The reader's methods inlined for one-byte varints, the common case: this loop is
        # what decoding a column costs.
        data, end, pos = r.data, r.end, r.pos
        for i in range(n):
            if pos >= end:
                raise InvalidSketchBytes("truncated")
            level = data[pos]
            level = level - 256 if level > 127 else level
            pos += 1
            if pos < end and data[pos] < 0x80:
                step = data[pos]
                pos += 1
            else:
                step, pos = _varint_at(r, pos)
                step &= _MASK64
            if i == 0:
                lo = _signed(now - step)
                fits = step <= (now - _LONG_MIN) & _MASK64
            else:
                lo = _signed(prev_lo + step)
                fits = step <= (_LONG_MAX - prev_lo) & _MASK64
            if pos < end and data[pos] < 0x80:
                count = data[pos]
                pos += 1
            else:
                count, pos = _varint_at(r, pos)
            if level < 0 or level > height or not fits or lo & ((1 << level) - 1):
                raise InvalidSketchBytes(f"invalid node at position {i}")
            if i > 0 and lo == prev_lo and level >= prev_level:
                raise InvalidSketchBytes("nodes out of order")
            if count < 1 or total + count > _LONG_MAX:
                raise InvalidSketchBytes(f"invalid count at position {i}")
            nodes.append((level, lo, count))
            total += count
            prev_level, prev_lo = level, lo
        r.pos = pos
        self._invariant = invariant
        self._nodes = nodes
        problem = _Dyadic.invariant_problem(self._window, now, invariant, height, nodes)
        if problem is not None:
            raise InvalidSketchBytes(problem)

    def _read_distinct(self, r: _Reader) -> None:
        p = _precision(self._eps)
        max_rank = 65 - p
        now, window, has_time = self._now, self._window, self._has_time
        max_age = (now - _LONG_MIN) & _MASK64
        registers: list[list[tuple[int, int]]] = []
        # Inlined as in _read_dyadic. Ages stay within max_age, so now - age never wraps.
        data, end, pos = r.data, r.end, r.pos
        for j in range(1 << p):
            if pos < end and data[pos] < 0x80:
                n = data[pos]
                pos += 1
            else:
                n, pos = _varint_at(r, pos)
            if n == 0:
                registers.append([])
                continue
            if n < 0 or n > max_rank or not has_time:
                raise InvalidSketchBytes(f"invalid pair count {n} in register {j}")
            pairs: list[tuple[int, int]] = []  # newest first while reading
            age = 0
            previous_rank = 0
            for i in range(n):
                if pos < end and data[pos] < 0x80:
                    step = data[pos]
                    pos += 1
                else:
                    step, pos = _varint_at(r, pos)
                    step &= _MASK64
                if i > 0 and step == 0:
                    raise InvalidSketchBytes(f"pairs out of order in register {j}")
                age += step
                if age > max_age:
                    raise InvalidSketchBytes("timestamps out of range")
                if age >= window:
                    raise InvalidSketchBytes(f"a pair of register {j} lies outside the window")
                if pos >= end:
                    raise InvalidSketchBytes("truncated")
                rank = data[pos]
                rank = rank - 256 if rank > 127 else rank
                pos += 1
                if rank < 1 or rank > max_rank or (i > 0 and rank <= previous_rank):
                    raise InvalidSketchBytes(f"invalid rank {rank} in register {j}")
                pairs.append((now - age, rank))
                previous_rank = rank
            pairs.reverse()  # oldest first, as the JVM keeps them
            registers.append(pairs)
        r.pos = pos
        self._registers = registers

    # -- parameters ------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """``"dyadic"`` (``window_sketch``), ``"histogram"`` (the time-ordered histogram
        of live counts) or ``"distinct"`` (``window_distinct_sketch``)."""
        return _KIND_NAMES[self._kind]

    @property
    def is_distinct(self) -> bool:
        """True for a distinct-count sketch, False for a count sketch."""
        return self._kind == _KIND_DISTINCT

    @property
    def time_unit(self) -> str:
        """``"microseconds"`` for a TIMESTAMP, TIMESTAMP_NTZ or DATE ``ts``, ``"positions"``
        for an integral one."""
        return "microseconds" if self._microseconds else "positions"

    @property
    def window(self) -> timedelta | int:
        """The window as given to the aggregate: a timedelta for time sketches (the window
        is ``[now - window, now]``), a number of positions (``(now - window, now]``)."""
        if not self._microseconds:
            return self._window
        micros = self._window if self._window == _LONG_MAX else self._window - 1
        return timedelta(microseconds=micros)

    @property
    def eps(self) -> float:
        """The error parameter as stored: the relative error bound of a count sketch, the
        relative standard deviation (``rsd``) of a distinct-count sketch."""
        return self._eps

    @property
    def now(self) -> datetime | int | None:
        """The largest ``ts`` seen: a UTC datetime for time sketches, a position otherwise;
        None for a sketch that has seen no row."""
        if not self._has_time:
            return None
        return _describe(self._now, self._microseconds)

    def __repr__(self) -> str:
        window = self.window
        return (f"WindowSketch(kind={self.kind!r}, window={window!r}, eps={self._eps!r}, "
                f"now={self.now!r}, time_unit={self.time_unit!r})")

    # -- queries ---------------------------------------------------------------------

    def estimate(self, as_of: AsOf | None = None, sub_window: SubWindow | None = None) -> int:
        """The approximate number of events (distinct values, for a distinct-count sketch)
        in the window of length ``sub_window`` (default: the sketch's window) ending at
        ``as_of`` (default: the sketch's latest ``ts``).

        ``as_of`` is a ``datetime`` (naive means UTC, as Spark stores TIMESTAMP) or a
        ``date`` for time sketches, an ``int`` for position sketches; it may not be earlier
        than the sketch's latest ``ts``. ``sub_window`` is a ``timedelta`` or an ``int``
        likewise, no longer than the sketch's window.
        """
        if self._kind == _KIND_DISTINCT:
            end, length = self._query_window(as_of, sub_window, "estimate")
            return self._distinct_estimate(end, length)
        return self.bounds(as_of, sub_window)[0]

    def bounds(self, as_of: AsOf | None = None,
               sub_window: SubWindow | None = None) -> tuple[int, int, int]:
        """(estimate, lower, upper) of a count sketch in the window of :meth:`estimate`:
        ``lower <= exact <= upper`` always holds, as ``window_sketch_bounds`` gives it."""
        if self._kind == _KIND_DISTINCT:
            raise TypeError("bounds: a distinct-count sketch has no certified bounds; use "
                            "estimate()")
        end, length = self._query_window(as_of, sub_window, "bounds")
        if self._kind == _KIND_HISTOGRAM:
            if length != self._window:
                raise ValueError("sub_window: sub-window queries need a sketch made by "
                                 "window_sketch; this one is a time-ordered histogram")
            return self._histogram_bounds(end)
        nodes = self._query_nodes()
        return _Dyadic.bounds_at(nodes, end, length)

    def _query_window(self, as_of: AsOf | None, sub_window: SubWindow | None,
                      function: str) -> tuple[int, int]:
        """(end, length) on the sketch's time axis, checked as the SQL functions check."""
        end = self._now
        if as_of is not None:
            end = _time_of(as_of, self._microseconds)
            if self._has_time and end < self._now:
                raise ValueError(
                    f"as_of ({_describe(end, self._microseconds)}) is earlier than the "
                    f"sketch's latest ts ({_describe(self._now, self._microseconds)}); the "
                    "sketch cannot leave out events after as_of")
        length = self._window
        if sub_window is not None:
            length = _length_of(sub_window, self._microseconds)
            if length > self._window:
                raise ValueError(f"sub_window {sub_window!r} is longer than the sketch's "
                                 f"window {self.window!r}")
        return end, length

    def _histogram_bounds(self, end: int) -> tuple[int, int, int]:
        buckets = self._buckets
        sizes = self._sizes
        # The oldest buckets whose newest event left the window (ending at `end`) expire.
        kept = len(buckets)
        while kept > 0 and _unsigned(end - buckets[kept - 1][0]) >= self._window:
            kept -= 1
        if kept == 0:
            return 0, 0, 0
        total = 0
        level_of_oldest = 0
        remaining = kept
        for level, size in enumerate(sizes):
            take = min(size, remaining)
            total += take << level
            remaining -= take
            if take:
                level_of_oldest = level
        half = (1 << level_of_oldest) >> 1
        if _unsigned(end - buckets[kept - 1][1]) >= self._window:  # the oldest straddles
            if half:
                return total - half, total - 2 * half + 1, total - 1
            return total, total, total
        return total, total, total

    def _query_nodes(self) -> list[tuple[int, int, int]]:
        """The nodes a query reads: as stored, or as the JVM would write them after merges."""
        if not self._pending:
            return self._nodes
        return self._compress()[0]

    def _distinct_estimate(self, end: int, length: int) -> int:
        p = _precision(self._eps)
        z = 0.0
        zeros = 0
        for pairs in self._registers:
            value = 0
            for t, rank in pairs:  # oldest first: the first inside the window is the max
                if _unsigned(end - t) < length:
                    value = rank
                    break
            z += _INVERSE_POWERS[value]
            if value == 0:
                zeros += 1
        return _hllpp_estimate(p, z, zeros)

    # -- merging and writing ---------------------------------------------------------

    def merge(self, other: WindowSketch) -> WindowSketch:
        """A new sketch holding both sketches' events, as ``window_sketch_merge`` (or
        ``window_distinct_sketch_merge``) builds it: the same bytes for the same inputs
        merged in the same order.

        Raises ValueError for sketches of different kinds, window, eps or time unit, and
        for the time-ordered histogram, which cannot merge.
        """
        if not isinstance(other, WindowSketch):
            raise TypeError(f"other must be a WindowSketch, got {type(other).__name__}")
        merged = self._copy()
        merged._merge_in(other)
        return merged

    def _copy(self) -> WindowSketch:
        s = object.__new__(WindowSketch)
        for name in WindowSketch.__slots__:
            setattr(s, name, getattr(self, name))
        s._nodes = list(self._nodes)
        s._pending = list(self._pending)
        s._registers = [list(pairs) for pairs in self._registers]
        return s

    def _merge_in(self, other: WindowSketch) -> None:
        """Adds ``other`` into this sketch (a private copy): the JVM's merge, step by step."""
        if (self._kind == _KIND_DISTINCT) != (other._kind == _KIND_DISTINCT):
            distinct, count = ("a distinct-count sketch (window_distinct_sketch)",
                               "a count sketch (window_sketch)")
            first, second = (distinct, count) if other.is_distinct else (count, distinct)
            raise ValueError(f"cannot merge: {first} is not {second}")
        if _KIND_HISTOGRAM in (self._kind, other._kind):
            raise ValueError("cannot merge: a time-ordered histogram (the state of live "
                             "counts) cannot merge; sketch columns are made by window_sketch")
        if (other._window != self._window or other._eps != self._eps
                or other._microseconds != self._microseconds):
            raise ValueError(f"cannot merge sketches of different parameters: "
                             f"{self._describe_parameters()} versus "
                             f"{other._describe_parameters()}")
        self._compressed = None
        if other._has_time and (not self._has_time or other._now > self._now):
            self._now = other._now
            self._has_time = True
        if self._kind == _KIND_DISTINCT:
            self._merge_registers(other)
            return
        self._invariant = max(self._invariant, other._invariant)
        for node in other._nodes:
            self._add_pending(node)
        for node in other._pending:
            self._add_pending(node)

    def _describe_parameters(self) -> str:
        name = "rsd" if self.is_distinct else "eps"
        return f"window={self._window} {self.time_unit}, {name}={self._eps}"

    def _add_pending(self, node: tuple[int, int, int]) -> None:
        self._pending.append(node)
        self._compressed = None
        # The JVM compresses once the pending nodes outnumber the compressed ones.
        if len(self._pending) >= max(64, len(self._nodes)):
            self._nodes, self._invariant = self._compress()
            self._pending = []

    def _compress(self) -> tuple[list[tuple[int, int, int]], float]:
        """The nodes and invariant parameter the JVM's compress() makes of this state
        (computed once per state)."""
        if self._compressed is None:
            self._compressed = _Dyadic.compress(
                self._window, self._now, self._height(), self._invariant,
                self._nodes + self._pending)
        return self._compressed

    def _merge_registers(self, other: WindowSketch) -> None:
        # A register's pairs are the (time, rank) pairs no other beats on a later-or-equal
        # time and a greater-or-equal rank: the union's frontier, whatever the order.
        now, window = self._now, self._window
        merged = []
        for mine, theirs in zip(self._registers, other._registers):
            if not theirs:
                merged.append([pair for pair in mine if _unsigned(now - pair[0]) < window])
                continue
            frontier: list[tuple[int, int]] = []
            for t, rank in sorted(mine + theirs, key=lambda pair: (-pair[0], -pair[1])):
                if _unsigned(now - t) >= window:
                    break  # older pairs have left the window too
                if not frontier or rank > frontier[-1][1]:
                    frontier.append((t, rank))
            frontier.reverse()
            merged.append(frontier)
        self._registers = merged

    def to_bytes(self) -> bytes:
        """The sketch's bytes, identical to what the JVM writes for the same state."""
        w = _Writer()
        w.byte(_MAGIC)
        w.byte(_VERSION)
        w.byte(self._kind)
        w.varint(self._window)
        w.double(self._eps)
        w.byte((_FLAG_HAS_TIME if self._has_time else 0)
               | (_FLAG_MICROSECONDS if self._microseconds else 0))
        w.long(self._now)
        now = self._now
        if self._kind == _KIND_HISTOGRAM:
            w.varint(len(self._sizes))
            for size in self._sizes:
                w.varint(size)
            previous = now
            for newest, oldest in self._buckets:
                w.varint(previous - newest)
                w.varint(newest - oldest)
                previous = oldest
        elif self._kind == _KIND_DYADIC:
            nodes, invariant = self._compress()
            w.double(invariant)
            w.varint(len(nodes))
            previous = now
            for i, (level, lo, count) in enumerate(nodes):
                w.byte(level)
                w.varint(now - lo if i == 0 else lo - previous)
                w.varint(count)
                previous = lo
        else:
            for pairs in self._registers:
                inside = [pair for pair in pairs if _unsigned(now - pair[0]) < self._window]
                w.varint(len(inside))
                previous = now
                for t, rank in reversed(inside):
                    w.varint(previous - t)
                    w.byte(rank)
                    previous = t
        return w.finish()


class _Dyadic:
    """The mergeable dyadic sketch's node arithmetic (DyadicWindowSketch on the JVM), on
    nodes (level, lo, count) sorted by lo ascending, then level descending."""

    @staticmethod
    def last(level: int, lo: int) -> int:
        return _signed(lo + ((1 << level) - 1))

    @staticmethod
    def plus(a: int, b: int) -> int:
        if a + b > _LONG_MAX:
            raise OverflowError("the sum of the window's values overflows BIGINT")
        return a + b

    @staticmethod
    def bounds_at(nodes: Sequence[tuple[int, int, int]], end: int,
                  length: int) -> tuple[int, int, int]:
        inside = 0
        straddling = 0
        for level, lo, count in nodes:
            if lo <= end and _unsigned(end - lo) < length:
                inside += count
            elif lo < end:
                last = min(_Dyadic.last(level, lo), end)
                if last <= end and _unsigned(end - last) < length:
                    straddling += count
        upper = _Dyadic.plus(inside, straddling)
        return inside + straddling // 2, inside, upper

    @staticmethod
    def _first_after(los: Sequence[int], ts: int, start: int, stop: int) -> int:
        low, high = start, stop
        while low < high:
            mid = (low + high) >> 1
            if los[mid] > ts:
                high = mid
            else:
                low = mid + 1
        return low

    @staticmethod
    def compress(window: int, now: int, height: int, invariant: float,
                 nodes: list[tuple[int, int, int]]) -> tuple[list[tuple[int, int, int]], float]:
        """The JVM's compress: sort, sum duplicates, drop what left the window, then
        collapse every subtree whose count can move to its root without breaking the
        invariant, doubling it while the nodes exceed the cap."""
        def after_edge(ts: int) -> bool:
            return ts > now or _unsigned(now - ts) < window

        gathered: list[tuple[int, int, int]] = []
        for level, lo, count in sorted(nodes, key=lambda node: (node[1], -node[0])):
            if not after_edge(_Dyadic.last(level, lo)):
                continue
            if gathered and gathered[-1][0] == level and gathered[-1][1] == lo:
                gathered[-1] = (level, lo, _Dyadic.plus(gathered[-1][2], count))
            else:
                gathered.append((level, lo, count))
        collapsed = _Dyadic.collapse(height, invariant, gathered)
        while len(collapsed) > _MAX_NODES:
            invariant *= 2
            collapsed = _Dyadic.collapse(height, invariant, collapsed)
        return collapsed, invariant

    @staticmethod
    def collapse(height: int, invariant: float,
                 nodes: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        n = len(nodes)
        levels = [node[0] for node in nodes]
        los = [node[1] for node in nodes]
        prefix = [0] * (n + 1)
        for i, node in enumerate(nodes):
            prefix[i + 1] = _Dyadic.plus(prefix[i], node[2])
        out: list[tuple[int, int, int]] = []
        first_after = _Dyadic._first_after

        def visit(k: int, lo: int, a: int, b: int, above: int) -> None:
            subtree = prefix[b] - prefix[a]
            right = prefix[n] - prefix[b]
            if k == 0 or float(above + subtree + 1) <= invariant * float(right):
                out.append((k, lo, subtree))
                return
            if b - a == 1:  # a lone node stays as it is (the JVM's shortcut)
                out.append(nodes[a])
                return
            holds = levels[a] == k and los[a] == lo
            own = nodes[a][2] if holds else 0
            if holds:
                out.append((k, lo, own))
            start = a + 1 if holds else a
            mid = lo + (1 << (k - 1))
            m = first_after(los, mid - 1, start, b)
            if start < m:
                visit(k - 1, lo, start, m, above + own)
            if m < b:
                visit(k - 1, mid, m, b, above + own)

        root_mask = -1 << height
        a = 0
        while a < n:
            root_lo = los[a] & root_mask
            b = first_after(los, _Dyadic.last(height, root_lo), a, n)
            visit(height, root_lo, a, b, 0)
            a = b
        return out

    @staticmethod
    def invariant_problem(window: int, now: int, invariant: float, height: int,
                          nodes: Sequence[tuple[int, int, int]]) -> str | None:
        """What the JVM's checkInvariant finds wrong with stored nodes, or None."""
        size = len(nodes)
        los = [node[1] for node in nodes]
        last = _Dyadic.last
        # Order and window first, for every node; then (I), at internal nodes only.
        for i, (level, lo, count) in enumerate(nodes):
            if i > 0 and not (los[i - 1] < lo or (los[i - 1] == lo and nodes[i - 1][0] > level)):
                return f"nodes out of order at {i}"
            node_last = last(level, lo)
            if lo > now or not (node_last > now or _unsigned(now - node_last) < window):
                return f"node {i} lies outside the window"
        if all(level == 0 for level, _, _ in nodes):
            return None
        prefix = [0] * (size + 1)
        for i, node in enumerate(nodes):
            prefix[i + 1] = prefix[i] + node[2]
        stack: list[int] = []
        above_and_own: list[int] = []
        for i, (level, lo, count) in enumerate(nodes):
            node_last = last(level, lo)
            while stack and not (los[stack[-1]] <= lo and
                                 node_last <= last(nodes[stack[-1]][0], los[stack[-1]])):
                stack.pop()
                above_and_own.pop()
            above = above_and_own[-1] if stack else 0
            if level > 0:
                right = prefix[size] - prefix[_Dyadic._first_after(los, node_last, i + 1, size)]
                if not float(above + count + 1) <= invariant * float(right):
                    return f"invariant broken at node {i} (level {level})"
            if len(stack) > height:
                return "nodes nest deeper than the tree"
            stack.append(i)
            above_and_own.append(above + count)
        return None


# -- HyperLogLog++ (Spark's approx_count_distinct estimate) ------------------------------

_INVERSE_POWERS = [2.0 ** -r for r in range(66)]


def _precision(rsd: float) -> int:
    return math.ceil(2.0 * math.log(1.106 / rsd) / math.log(2.0))


def _alpha_m2(p: int) -> float:
    m = float(1 << p)
    if p == 4:
        return 0.673 * m * m
    if p == 5:
        return 0.697 * m * m
    if p == 6:
        return 0.709 * m * m
    return (0.7213 / (1.0 + 1.079 / m)) * m * m


def _binary_search(values: Sequence[float], key: float) -> int:
    """java.util.Arrays.binarySearch on doubles, step for step: the bias tables are not
    strictly sorted, so another search could pick other neighbours."""
    low, high = 0, len(values) - 1
    while low <= high:
        mid = (low + high) >> 1
        mid_val = values[mid]
        if mid_val < key:
            low = mid + 1
        elif mid_val > key:
            high = mid - 1
        else:
            mid_bits = _LONG.unpack(_DOUBLE.pack(mid_val))[0]
            key_bits = _LONG.unpack(_DOUBLE.pack(key))[0]
            if mid_bits == key_bits:
                return mid
            if mid_bits < key_bits:
                low = mid + 1
            else:
                high = mid - 1
    return -(low + 1)


def _estimate_bias(p: int, e: float) -> float:
    estimates = _hllpp_tables.RAW_ESTIMATE_DATA[p - 4]
    n = len(estimates)
    found = _binary_search(estimates, e)
    nearest = -(found + 1) if found < 0 else found
    k = _hllpp_tables.K
    low = max(nearest - k + 1, 0)
    high = min(low + k, n)
    while high < n and (e - estimates[high]) ** 2 < (e - estimates[low]) ** 2:
        low += 1
        high += 1
    biases = _hllpp_tables.BIAS_DATA[p - 4]
    bias_sum = 0.0
    for i in range(low, high):
        bias_sum += biases[i]
    return bias_sum / (high - low)


def _hllpp_estimate(p: int, z_inverse: float, zeros: int) -> int:
    """Spark's HyperLogLog++ estimate from the registers' sums, rounded as Math.round."""
    m = float(1 << p)
    raw = _alpha_m2(p) / z_inverse
    if zeros > 0:
        linear = m * math.log(m / zeros)
        if linear <= _hllpp_tables.THRESHOLDS[p - 4] or raw <= 2.5 * m:
            return _round(linear)
    return _round(raw - _estimate_bias(p, raw) if raw < 5.0 * m else raw)


def _round(x: float) -> int:
    """Java's Math.round: to the nearest, ties up (x - floor(x) is exact in doubles)."""
    whole = math.floor(x)
    return whole + 1 if x - whole >= 0.5 else whole


# -- time axis ---------------------------------------------------------------------------

def _time_of(as_of: Any, microseconds: bool) -> int:
    """``as_of`` on the sketch's time axis, refusing a value of the other axis."""
    if microseconds:
        if isinstance(as_of, datetime):
            aware = as_of if as_of.tzinfo is not None else as_of.replace(tzinfo=timezone.utc)
            return (aware - _EPOCH) // timedelta(microseconds=1)
        if isinstance(as_of, date):
            return (as_of - date(1970, 1, 1)).days * _MICROS_PER_DAY
        raise TypeError(f"as_of: the sketch counts time, so as_of must be a datetime or a "
                        f"date, got {type(as_of).__name__}")
    if isinstance(as_of, int) and not isinstance(as_of, bool):
        if not _LONG_MIN <= as_of <= _LONG_MAX:
            raise ValueError(f"as_of {as_of} is outside the range of BIGINT")
        return as_of
    raise TypeError(f"as_of: the sketch counts positions, so as_of must be an int, got "
                    f"{type(as_of).__name__}")


def _length_of(sub_window: Any, microseconds: bool) -> int:
    """``sub_window`` as a window length on the axis: ``w + 1`` microseconds for a time
    window ``[end - w, end]``, ``n`` positions for ``(end - n, end]``, as SQL maps them."""
    if microseconds:
        if not isinstance(sub_window, timedelta):
            raise TypeError(f"sub_window: the sketch counts time, so sub_window must be a "
                            f"timedelta, got {type(sub_window).__name__}")
        micros = sub_window // timedelta(microseconds=1)
        if micros <= 0:
            raise ValueError(f"sub_window must be a positive duration, got {sub_window!r}")
        return micros if micros >= _LONG_MAX else micros + 1
    if not isinstance(sub_window, int) or isinstance(sub_window, bool):
        raise TypeError(f"sub_window: the sketch counts positions, so sub_window must be an "
                        f"int, got {type(sub_window).__name__}")
    if sub_window <= 0:
        raise ValueError(f"sub_window must be a positive number of positions, got {sub_window}")
    return sub_window


def _describe(t: int, microseconds: bool) -> datetime | int:
    if not microseconds:
        return t
    try:
        return _EPOCH + timedelta(microseconds=t)
    except OverflowError:
        raise ValueError(f"the time {t} (microseconds since 1970) is outside the range of "
                         "Python's datetime") from None


# -- columns -----------------------------------------------------------------------------

Rebuild = Callable[[list[Any]], Any]


def _values(column: Any) -> tuple[list[Any], Rebuild]:
    """The column's values as a list, and a function making a column of the same kind
    (a pandas Series on the same index, a pyarrow int64 array, a list) from answers."""
    library = type(column).__module__.split(".")[0]
    if library == "pandas":
        pd = importlib.import_module("pandas")
        index = column.index
        values = [None if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
                  else v for v in column.tolist()]
        return values, lambda answers: pd.Series(answers, index=index, dtype="Int64")
    if library == "pyarrow":
        pa = importlib.import_module("pyarrow")
        return column.to_pylist(), lambda answers: pa.array(answers, type=pa.int64())
    return list(column), lambda answers: answers


def estimate_column(sketches: Any, as_of: AsOf | None = None,
                    sub_window: SubWindow | None = None) -> Any:
    """:meth:`WindowSketch.estimate` of every sketch of a column at one ``as_of``.

    ``sketches`` is a pandas Series, a pyarrow Array or ChunkedArray, or any iterable of
    sketch bytes; None (NULL) gives None. Returns the same kind of column: a pandas Series
    of dtype Int64 on the same index, a pyarrow int64 array, or a list.
    """
    values, rebuild = _values(sketches)
    return rebuild([None if blob is None else
                    WindowSketch.from_bytes(blob).estimate(as_of, sub_window)
                    for blob in values])


def bounds_column(sketches: Any, as_of: AsOf | None = None,
                  sub_window: SubWindow | None = None) -> Any:
    """:meth:`WindowSketch.bounds` of every count sketch of a column, as (estimate, lower,
    upper) tuples (None for NULL): a pandas Series of objects on the same index, a pyarrow
    array of structs, or a list, like ``sketches``."""
    values, _ = _values(sketches)
    answers = [None if blob is None else WindowSketch.from_bytes(blob).bounds(as_of, sub_window)
               for blob in values]
    library = type(sketches).__module__.split(".")[0]
    if library == "pandas":
        pd = importlib.import_module("pandas")
        return pd.Series(answers, index=sketches.index, dtype=object)
    if library == "pyarrow":
        pa = importlib.import_module("pyarrow")
        names = ("estimate", "lower", "upper")
        return pa.array([None if b is None else dict(zip(names, b)) for b in answers],
                        type=pa.struct([(name, pa.int64()) for name in names]))
    return answers


def merge_column(sketches: Iterable[Any]) -> WindowSketch | None:
    """The merge of every sketch of a column, in order, NULLs skipped, as
    ``window_sketch_merge`` over the column in one partition: None if all are NULL."""
    values, _ = _values(sketches)
    merged: WindowSketch | None = None
    for blob in values:
        if blob is None:
            continue
        sketch = WindowSketch.from_bytes(blob)
        if merged is None:
            merged = sketch._copy()
        else:
            merged._merge_in(sketch)
    return merged
