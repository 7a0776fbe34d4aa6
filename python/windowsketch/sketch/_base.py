"""What every kind of stored sketch shares: the format's primitives (docs/format.md), the
header, the time axis of ``as_of`` and ``sub_window``, and the :class:`WindowSketch` base
class that reads any kind and hands the body to the family registered for it."""
from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import Any, ClassVar, TypeVar, Union

#: What ``as_of`` may be: a point in time for time sketches, a position for position ones.
AsOf = Union[datetime, date, int]
#: What ``sub_window`` may be: a duration for time sketches, a number of positions otherwise.
SubWindow = Union[timedelta, int]

_Sketch = TypeVar("_Sketch", bound="WindowSketch")

_MAGIC = 0x57
_VERSION = 1
_FLAG_HAS_TIME = 1
_FLAG_MICROSECONDS = 2

_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_MASK64 = (1 << 64) - 1
_MICROS_PER_DAY = 86_400_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# The smallest eps of the count and percentile families.
_MIN_EPS = 1e-4

_DOUBLE = struct.Struct(">d")
_LONG = struct.Struct(">q")


class InvalidSketchBytes(ValueError):
    """Bytes that are not a readable sketch: truncated, corrupted, foreign or of another
    format version. The message starts with "invalid sketch bytes", as the JVM's does."""

    # Its public home, for tracebacks and pickling.
    __module__ = "windowsketch.sketch"

    def __init__(self, problem: str) -> None:
        super().__init__(f"invalid sketch bytes: {problem}")


def _signed(x: int) -> int:
    """``x`` wrapped to a signed 64-bit long, as the JVM's arithmetic wraps."""
    x &= _MASK64
    return x - (1 << 64) if x > _LONG_MAX else x


def _unsigned(x: int) -> int:
    return x & _MASK64


def _mix64(x: int) -> int:
    """SplitMix64's step: the golden-ratio increment, then its finalizer (unsigned)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def value_hash(start: int, value: bytes) -> int:
    """The JVM's ``ValueHash.chain``: ``value``'s bytes as little-endian 8-byte words (the
    last zero-padded), then their length, chained onto ``start`` by :func:`_mix64`; the
    sample's priorities and the filter's fingerprints hash values with it."""
    h = start & _MASK64
    for i in range(0, len(value), 8):
        h = _mix64(h ^ int.from_bytes(value[i:i + 8], "little"))
    return _mix64(h ^ len(value))


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


def _read_bytes(r: _Reader) -> bytes:
    """A varint length, at most the sketch's size, and that many bytes (the JVM's readBytes)."""
    n = r.varint()
    if n < 0 or n > len(r.data):
        raise InvalidSketchBytes(f"invalid length {n}")
    if r.pos + n > r.end:
        raise InvalidSketchBytes("truncated")
    r.pos += n
    return bytes(r.data[r.pos - n:r.pos])


def _write_bytes(w: _Writer, data: bytes) -> None:
    w.varint(len(data))
    w.out += data


def _older_age(age: int, step: int, max_age: int) -> int:
    """The unsigned age one step further back, refused past the start of time."""
    older = age + _unsigned(step)
    if older > max_age:  # max_age < 2^64: no unsigned wrap-around either
        raise InvalidSketchBytes("timestamps out of range")
    return older

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


class WindowSketch:
    """One stored sketch, of any kind: read it with :meth:`from_bytes`, which returns the
    family's class (:class:`~windowsketch.sketch.CountSketch`,
    :class:`~windowsketch.sketch.DistinctSketch` or
    :class:`~windowsketch.sketch.PercentileSketch`, each a ``WindowSketch``). Sketches are
    immutable: :meth:`merge` returns a new one.

    The bytes of ``SELECT window_sketch(v, pos, 5)`` over one event at position 17:

    >>> s = WindowSketch.from_bytes(bytes.fromhex(
    ...     "570102053f847ae147ae147b0100000000000000113f947ae147ae147b01000001b4a7fd40"))
    >>> s
    CountSketch(kind='dyadic', window=5, eps=0.01, now=17, time_unit='positions')
    >>> s.bounds(), s.bounds(as_of=21), s.bounds(as_of=22)
    ((1, 1, 1), (1, 1, 1), (0, 0, 0))
    >>> s.merge(s).estimate(as_of=20, sub_window=4)
    2
    >>> WindowSketch.from_bytes(s.to_bytes()[:-1])
    Traceback (most recent call last):
    ...
    windowsketch.sketch.InvalidSketchBytes: invalid sketch bytes: checksum mismatch (truncated or corrupted bytes)
    """

    __slots__ = ("_kind", "_window", "_eps", "_has_time", "_microseconds", "_now")
    _kind: int
    _window: int
    _eps: float
    _has_time: bool
    _microseconds: bool
    _now: int

    # Each family's class, by kind byte: filled by register_family.
    _families: ClassVar[dict[int, type[WindowSketch]]] = {}
    # What the family is, as users know it, and its kinds' names: set by each family.
    _family: ClassVar[str] = "a sketch"
    _kind_names: ClassVar[dict[int, str]] = {}
    # The name of the error parameter in messages (eps, or rsd for distinct counts).
    _parameter_name: ClassVar[str] = "eps"

    def __init__(self) -> None:
        raise TypeError("use WindowSketch.from_bytes(data) to read a sketch")

    # -- reading ---------------------------------------------------------------------

    @classmethod
    def from_bytes(cls: type[_Sketch], data: bytes | bytearray | memoryview) -> _Sketch:
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
        family = WindowSketch._families.get(kind)
        if family is None:
            raise InvalidSketchBytes(f"unknown sketch kind {kind}")
        if not issubclass(family, cls):
            raise InvalidSketchBytes(f"{family._family} is not {cls._family}")
        s = object.__new__(family)
        s._kind = kind
        s._window = window
        s._eps = eps
        s._has_time = bool(flags & _FLAG_HAS_TIME)
        s._microseconds = bool(flags & _FLAG_MICROSECONDS)
        s._now = now
        s._read(r)
        if r.pos != end:
            raise InvalidSketchBytes("trailing bytes after the sketch")
        s._validate()
        return s

    def _read(self, r: _Reader) -> None:
        """Checks the parameters and reads the body after the header (the family's part)."""
        raise NotImplementedError

    def _validate(self) -> None:
        """Checks what the body read must satisfy as a whole, once no bytes trail (the
        family's part, where the JVM checks it after the trailing bytes too)."""

    def _check_eps(self, low: float, high: float, high_included: bool = False) -> None:
        if not (low <= self._eps <= high if high_included else low <= self._eps < high):
            raise InvalidSketchBytes(f"invalid parameters window={self._window}, "
                                     f"{self._parameter_name}={self._eps}")

    # -- parameters ------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """``"dyadic"`` (``window_sketch``), ``"histogram"`` (the time-ordered histogram
        of live counts), ``"distinct"`` (``window_distinct_sketch``) or ``"percentile"``
        (``window_percentile_sketch``)."""
        return self._kind_names[self._kind]

    @property
    def is_distinct(self) -> bool:
        """True for a distinct-count sketch."""
        return False

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
        rank error of a percentile sketch, the relative standard deviation (``rsd``) of a
        distinct-count sketch."""
        return self._eps

    @property
    def now(self) -> datetime | int | None:
        """The largest ``ts`` seen: a UTC datetime for time sketches, a position otherwise;
        None for a sketch that has seen no row."""
        if not self._has_time:
            return None
        return _describe(self._now, self._microseconds)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(kind={self.kind!r}, window={self.window!r}, "
                f"eps={self._eps!r}, now={self.now!r}, time_unit={self.time_unit!r})")

    # -- queries ---------------------------------------------------------------------

    def bounds(self, as_of: AsOf | None = None,
               sub_window: SubWindow | None = None) -> tuple[int, int, int]:
        """(estimate, lower, upper) with ``lower <= exact <= upper``: count sketches only."""
        raise TypeError(f"bounds: {self._family} has no certified bounds; use estimate()")

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

    def _in_window(self, t: int) -> bool:
        """True if ``t`` lies in the window ending at the sketch's now."""
        return _unsigned(self._now - t) < self._window

    # -- merging and writing ---------------------------------------------------------

    def merge(self, other: WindowSketch) -> WindowSketch:
        """A new sketch holding both sketches' rows, as the family's ``_merge`` SQL
        function builds it: the same bytes for the same inputs merged in the same order.

        Raises ValueError for sketches of different families, window, eps or time unit,
        and for the time-ordered histogram, which cannot merge.
        """
        if not isinstance(other, WindowSketch):
            raise TypeError(f"other must be a WindowSketch, got {type(other).__name__}")
        merged = self._copy()
        merged._merge_in(other)
        return merged

    def _copy(self) -> WindowSketch:
        s = object.__new__(type(self))
        for klass in type(self).__mro__:
            for name in getattr(klass, "__slots__", ()):
                setattr(s, name, getattr(self, name))
        s._own_state()
        return s

    def _own_state(self) -> None:
        """Copies the mutable state a fresh copy shares with its original (the family's)."""

    def _merge_in(self, other: WindowSketch) -> None:
        """Adds ``other`` into this sketch (a private copy): the JVM's merge, step by step."""
        if type(other) is not type(self):
            raise ValueError(f"cannot merge: {other._family} is not {self._family}")
        self._check_mergeable(other)
        if (other._window != self._window or other._eps != self._eps
                or other._microseconds != self._microseconds):
            raise ValueError(f"cannot merge sketches of different parameters: "
                             f"{self._describe_parameters()} versus "
                             f"{other._describe_parameters()}")
        if other._has_time and (not self._has_time or other._now > self._now):
            self._now = other._now
            self._has_time = True
        self._merge_state(other)

    def _check_mergeable(self, other: WindowSketch) -> None:
        """Raises ValueError if a kind of the family cannot merge (the family's)."""

    def _merge_state(self, other: WindowSketch) -> None:
        """Adds ``other``'s rows, ``now`` already moved (the family's part)."""
        raise NotImplementedError

    def _describe_parameters(self) -> str:
        return f"window={self._window} {self.time_unit}, {self._parameter_name}={self._eps}"

    def to_bytes(self) -> bytes:
        """The sketch's bytes, identical to what the JVM writes for the same state."""
        w = _Writer()
        w.byte(_MAGIC)
        w.byte(_VERSION)
        w.byte(self._written_kind())
        w.varint(self._window)
        w.double(self._eps)
        w.byte((_FLAG_HAS_TIME if self._has_time else 0)
               | (_FLAG_MICROSECONDS if self._microseconds else 0))
        w.long(self._now)
        self._write(w)
        return w.finish()

    def _written_kind(self) -> int:
        """The kind byte the body is written in: the kind read, unless a family has
        several encodings of one state and picks by content (distinct counts)."""
        return self._kind

    def _write(self, w: _Writer) -> None:
        """Writes the body after the header (the family's part)."""
        raise NotImplementedError


def register_family(family: type[WindowSketch]) -> type[WindowSketch]:
    """Makes :meth:`WindowSketch.from_bytes` read the family's kinds with its class."""
    for kind in family._kind_names:
        WindowSketch._families[kind] = family
    return family


# -- columns -----------------------------------------------------------------------------

Rebuild = Callable[[list[Any]], Any]
