"""Filter sketches (format kind 11): ``window_filter_sketch``'s fingerprints, each with the
latest time its value occurred, read, asked (``window_filter_contains``), merged and
written byte for byte as the JVM does (SlidingFilter). docs/filtering.md has the
guarantee."""
from __future__ import annotations

import datetime
import math
import struct
from typing import Any, ClassVar

from windowsketch.sketch._base import (_EPOCH, AsOf, InvalidSketchBytes, SubWindow,
                                       WindowSketch, _mix64, _read_bytes, _Reader, _signed,
                                       _unsigned, _write_bytes, _Writer, register_family,
                                       value_hash)

_KIND_FILTER = 11
_MIN_FPP = 1e-9
_MAX_FPP = 0.5
_SEED = 0x7365656E66696C74  # "seenfilt"

_INTEGERS = {"tinyint": (1, 1 << 7), "smallint": (2, 1 << 15), "int": (4, 1 << 31),
             "bigint": (8, 1 << 63)}


def fingerprint_bits(fpp: float) -> int:
    """32 + ceil(log2(1 / fpp)): d distinct values give a false positive with probability at
    most d / 2^bits, at most ``fpp`` while d <= 2^32."""
    extra = 0
    while math.ldexp(1.0, -extra) > fpp:
        extra += 1
    return 32 + extra


def fingerprint(row: bytes, bits: int) -> int:
    """The fingerprint of a value's binary row: the top ``bits`` bits of its hash."""
    return value_hash(_mix64(_SEED), row) >> (64 - bits)


def row_bytes(value: Any, value_type: str) -> bytes:
    """``value`` as Spark's binary row of one field of ``value_type`` (a scalar type), the
    bytes ``window_filter_contains`` hashes: -0.0 as 0.0 and one NaN, as Spark's are."""
    if value_type in _INTEGERS:
        width, limit = _INTEGERS[value_type]
        if isinstance(value, bool) or not isinstance(value, int) or not -limit <= value < limit:
            raise TypeError(f"a {value_type} value must be an int in [{-limit}, {limit}), "
                            f"got {value!r}")
        return bytes(8) + value.to_bytes(8, "little", signed=True)
    if value_type == "boolean":
        if not isinstance(value, bool):
            raise TypeError(f"a boolean value must be a bool, got {value!r}")
        return bytes(8) + bytes([int(value)]) + bytes(7)
    if value_type in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"a {value_type} value must be a number, got {value!r}")
        x = float(value)
        x = math.nan if math.isnan(x) else x + 0.0  # -0.0 + 0.0 is 0.0
        if value_type == "float":
            packed = (struct.pack("<I", 0x7FC00000) if math.isnan(x)
                      else struct.pack("<f", x)) + bytes(4)
        else:
            packed = (struct.pack("<Q", 0x7FF8000000000000) if math.isnan(x)
                      else struct.pack("<d", x))
        return bytes(8) + packed
    if value_type == "date":
        if not isinstance(value, datetime.date) or isinstance(value, datetime.datetime):
            raise TypeError(f"a date value must be a datetime.date, got {value!r}")
        days = (value - datetime.date(1970, 1, 1)).days
        return bytes(8) + days.to_bytes(8, "little", signed=True)
    if value_type in ("timestamp", "timestamp_ntz"):
        if not isinstance(value, datetime.datetime):
            raise TypeError(f"a {value_type} value must be a datetime, got {value!r}")
        if value_type == "timestamp":
            aware = value if value.tzinfo is not None else value.replace(
                tzinfo=datetime.timezone.utc)
            micros = (aware - _EPOCH) // datetime.timedelta(microseconds=1)
        else:
            micros = (value.replace(tzinfo=None) - datetime.datetime(1970, 1, 1)) \
                // datetime.timedelta(microseconds=1)
        return bytes(8) + micros.to_bytes(8, "little", signed=True)
    if value_type in ("string", "binary"):
        if value_type == "string" and not isinstance(value, str):
            raise TypeError(f"a string value must be a str, got {value!r}")
        if value_type == "binary" and not isinstance(value, (bytes, bytearray)):
            raise TypeError(f"a binary value must be bytes, got {value!r}")
        data = value.encode() if isinstance(value, str) else bytes(value)
        slot = (16 << 32) | len(data)
        return bytes(8) + slot.to_bytes(8, "little") + data + bytes(-len(data) % 8)
    raise ValueError(f"values of type {value_type} are not encoded here; contains_bytes() "
                     "takes their binary rows")


class FilterSketch(WindowSketch):
    """A ``window_filter_sketch``: a fingerprint and the latest time of each distinct value
    of its window, so whether a value occurred in any window ending at or after ``now`` (any
    sub-window) is answered as ``window_filter_contains`` answers it.

    The bytes of ``SELECT window_filter_sketch(user, ts, 3)`` over ``a`` at 1 and ``b`` at 2:

    >>> s = WindowSketch.from_bytes(bytes.fromhex(
    ...     "57010b033f847ae147ae147b01000000000000000206737472696e6702b9bde0fa9a03"
    ...     "00b783dcabcb0601c9963ace"))
    >>> s
    FilterSketch(window=3, fpp=0.01, value_type='string', now=2, time_unit='positions')
    >>> s.contains("a"), s.contains("b"), s.contains("c")
    (True, True, False)
    >>> s.contains("a", as_of=4), s.contains("b", as_of=2, sub_window=1)
    (False, True)
    """

    __slots__ = ("_item_type", "_bits", "_entries", "_read_entries")
    _item_type: str
    _bits: int
    _entries: dict[int, int]
    _read_entries: list[tuple[int, int]]  # while reading: (fingerprint, time) as written

    _family: ClassVar[str] = "a filter sketch (window_filter_sketch)"
    _kind_names: ClassVar[dict[int, str]] = {_KIND_FILTER: "filter"}
    _parameter_name: ClassVar[str] = "fpp"

    def _read(self, r: _Reader) -> None:
        if not _MIN_FPP <= self._eps <= _MAX_FPP:
            raise InvalidSketchBytes(f"invalid parameters window={self._window}, "
                                     f"fpp={self._eps}")
        self._bits = fingerprint_bits(self._eps)
        self._item_type = _read_bytes(r).decode("utf-8", "replace")
        n = r.varint()
        if n < 0 or n > (r.end + 4) // 2:
            raise InvalidSketchBytes(f"invalid value count {n}")
        # Read as the JVM reads them (64-bit sums), checked after the trailing bytes.
        self._read_entries = []
        previous = 0
        for i in range(n):
            step = r.varint()
            back = r.varint()
            if step < 0 or (i > 0 and step == 0) or step > (1 << 61) - 1:
                raise InvalidSketchBytes(f"fingerprint {i + 1} is out of order")
            if back < 0:
                raise InvalidSketchBytes(f"value {i + 1} lies outside the window")
            fp = _signed(previous + step)
            self._read_entries.append((fp, _signed(self._now - back)))
            previous = fp

    def _validate(self) -> None:
        entries, self._read_entries = self._read_entries, []
        if not self._has_time and entries:
            raise InvalidSketchBytes("values without a time")
        held: dict[int, int] = {}
        for i, (fp, ts) in enumerate(entries):
            if fp < 0 or fp >> self._bits:
                raise InvalidSketchBytes(f"fingerprint {i + 1} is out of range")
            if i > 0 and fp <= entries[i - 1][0]:
                raise InvalidSketchBytes("fingerprints out of order")
            if ts > self._now or not self._in_window(ts):
                raise InvalidSketchBytes(f"value {i + 1} lies outside the window")
            held[fp] = ts
        self._entries = held

    @property
    def fpp(self) -> float:
        """The most probability that a value absent from the window is reported present."""
        return self._eps

    @property
    def value_type(self) -> str:
        """The type of the filtered ``x``, as Spark names it."""
        return self._item_type

    def __len__(self) -> int:
        """The distinct values (fingerprints) of the window ending at ``now``."""
        return len(self._entries)

    def __repr__(self) -> str:
        return (f"FilterSketch(window={self.window!r}, fpp={self._eps}, "
                f"value_type={self._item_type!r}, now={self.now!r}, "
                f"time_unit={self.time_unit!r})")

    def _describe_parameters(self) -> str:
        return f"window={self._window} {self.time_unit}, fpp={self._eps}, values {self._item_type}"

    def estimate(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a filter sketch has no estimate; use contains()")

    def contains(self, value: Any, as_of: AsOf | None = None,
                 sub_window: SubWindow | None = None) -> bool:
        """Whether ``value`` (of the sketch's value type: an int, float, bool, str, bytes,
        date or datetime) occurred in the window of length ``sub_window`` ending at
        ``as_of``, as ``window_filter_contains`` answers: always for a value of the window,
        with probability at most ``fpp`` for one that is not there."""
        return self.contains_bytes(row_bytes(value, self._item_type), as_of, sub_window)

    def contains_bytes(self, row: bytes, as_of: AsOf | None = None,
                       sub_window: SubWindow | None = None) -> bool:
        """:meth:`contains` for a value given as Spark's binary row of one field."""
        end, length = self._query_window(as_of, sub_window, "contains")
        ts = self._entries.get(fingerprint(bytes(row), self._bits))
        return ts is not None and _unsigned(end - ts) < length

    def _own_state(self) -> None:
        self._entries = dict(self._entries)

    def _check_mergeable(self, other: WindowSketch) -> None:
        assert isinstance(other, FilterSketch)
        if other._item_type != self._item_type:
            raise ValueError(f"cannot merge sketches of different parameters: "
                             f"{self._describe_parameters()} versus "
                             f"{other._describe_parameters()}")

    def _merge_state(self, other: WindowSketch) -> None:
        assert isinstance(other, FilterSketch)
        merged = {fp: ts for fp, ts in self._entries.items() if self._in_window(ts)}
        for fp, ts in other._entries.items():
            if self._in_window(ts) and ts > merged.get(fp, ts - 1):
                merged[fp] = ts
        self._entries = merged

    def _write(self, w: _Writer) -> None:
        _write_bytes(w, self._item_type.encode())
        w.varint(len(self._entries))
        previous = 0
        for fp in sorted(self._entries):
            w.varint(fp - previous)
            w.varint(self._now - self._entries[fp])
            previous = fp


register_family(FilterSketch)
