"""Percentile sketches (format kind 4): ``window_percentile_sketch``'s window of values with
their times, read, queried (the same numbers as ``window_percentile_sketch_estimate``),
merged and written byte for byte as the JVM does (SlidingQuantiles, exact mode)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, Union

from windowsketch.sketch._base import (_DOUBLE, _LONG, _LONG_MAX, _LONG_MIN, _MIN_EPS, AsOf,
                                       InvalidSketchBytes, SubWindow, WindowSketch, _older_age,
                                       _Reader, _unsigned, _varint_at, _Writer, register_family)

_KIND_PERCENTILE = 4
# The most values the exact mode holds (SlidingQuantiles.MaxValues).
_MAX_VALUES = 1 << 24
_CANONICAL_NAN = 0x7FF8000000000000

#: What ``percentage`` may be: one in [0, 1], or several (then the answer is a list).
Percentage = Union[float, Sequence[float]]


def _double_of(bits: int) -> float:
    return float(_DOUBLE.unpack(_LONG.pack(bits))[0])


def _java_order(bits: int) -> int:
    """A key that sorts doubles, given as their signed raw bits, in
    ``java.lang.Double.compare`` order: -0.0 before 0.0, every NaN after +inf and equal."""
    if bits & 0x7FF0000000000000 == 0x7FF0000000000000 and bits & 0x000FFFFFFFFFFFFF:
        bits = _CANONICAL_NAN
    return bits if bits >= 0 else bits ^ _LONG_MAX


@register_family
class PercentileSketch(WindowSketch):
    """A percentile sketch (``window_percentile_sketch`` / ``_merge``): answers
    ``window_percentile_sketch_estimate`` with the same numbers. This version holds every
    value of its window with its time, so its percentiles are exact.

    The bytes of ``SELECT window_percentile_sketch(ms, ts, 3)`` over
    ``(1, 30), (2, 10), (3, 20), (4, 50)``:

    >>> s = PercentileSketch.from_bytes(bytes.fromhex(
    ...     "570104033f847ae147ae147b010000000000000004030040490000000000"
    ...     "000140340000000000000140240000000000002c4bba53"))
    >>> s
    PercentileSketch(kind='percentile', window=3, eps=0.01, now=4, time_unit='positions')
    >>> s.estimate(0.5), s.estimate([0.0, 1.0], as_of=5), s.estimate(0.5, as_of=4, sub_window=1)
    (20.0, [20.0, 50.0], 50.0)
    >>> s.count(), s.estimate(0.5, as_of=9) is None
    (3, True)
    """

    __slots__ = ("_rows",)
    # The rows of the window: (time, raw bits of the value), in any order.
    _rows: list[tuple[int, int]]

    _family: ClassVar[str] = "a percentile sketch (window_percentile_sketch)"
    _kind_names: ClassVar[dict[int, str]] = {_KIND_PERCENTILE: "percentile"}

    def _read(self, r: _Reader) -> None:
        self._check_eps(_MIN_EPS, 1.0)
        n = r.varint()
        if n < 0 or n > _MAX_VALUES or (n > 0 and not self._has_time):
            raise InvalidSketchBytes(f"invalid row count {n}")
        now, window = self._now, self._window
        max_age = _unsigned(now - _LONG_MIN)
        rows = []
        age = 0
        previous_time, previous_key = 0, 0
        data, end, pos = r.data, r.end, r.pos
        for i in range(n):
            if pos < end and data[pos] < 0x80:
                step = data[pos]
                pos += 1
            else:
                step, pos = _varint_at(r, pos)
            age = _older_age(age, step, max_age)
            if age >= window:
                raise InvalidSketchBytes("a row lies outside the window")
            if pos + 8 > end:
                raise InvalidSketchBytes("truncated")
            (bits,) = _LONG.unpack_from(data, pos)
            pos += 8
            t = now - age
            key = _java_order(bits)
            # Newest first; rows of one time ascending, so equal states have equal bytes.
            if i > 0 and t == previous_time and key < previous_key:
                raise InvalidSketchBytes("rows out of order")
            rows.append((t, bits))
            previous_time, previous_key = t, key
        r.pos = pos
        self._rows = rows

    # -- queries ---------------------------------------------------------------------

    def count(self, as_of: AsOf | None = None, sub_window: SubWindow | None = None) -> int:
        """The number of values in the window of :meth:`estimate`."""
        end, length = self._query_window(as_of, sub_window, "count")
        return len(self._values_in(end, length))

    def estimate(self, percentage: Percentage, as_of: AsOf | None = None,
                 sub_window: SubWindow | None = None) -> float | list[float] | None:
        """The percentile of the values in the window of length ``sub_window`` (default:
        the sketch's window) ending at ``as_of`` (default: the sketch's latest ``ts``), as
        ``approx_window_percentile`` defines it: the value at rank ``ceil(p n)`` of the
        window's ``n`` values in ascending order (the smallest for ``p = 0``). A list of
        percentages gives a list. None when that window holds no value.

        ``as_of`` and ``sub_window`` as for :meth:`CountSketch.estimate`; values come back
        as the doubles they are ranked by, as the SQL function returns them.
        """
        several = isinstance(percentage, (list, tuple))
        given: list[object] = list(percentage) if isinstance(percentage, (list, tuple)) \
            else [percentage]
        percentages = [float(p) for p in given
                       if isinstance(p, (int, float)) and not isinstance(p, bool)]
        if not percentages or len(percentages) != len(given):
            raise TypeError(f"percentage must be a number in [0, 1] or a list of them, got "
                            f"{percentage!r}")
        bad = [p for p in percentages if not 0.0 <= p <= 1.0]
        if bad:
            raise ValueError(f"percentage must be in [0, 1], got {bad[0]!r}")
        end, length = self._query_window(as_of, sub_window, "estimate")
        values = self._values_in(end, length) if self._has_time else []
        if not values:
            return None
        values.sort(key=_java_order)
        n = len(values)
        answers = [_double_of(values[max(math.ceil(p * n) - 1, 0)])
                   for p in percentages]
        return answers if several else answers[0]

    def _values_in(self, end: int, length: int) -> list[int]:
        """The raw bits of the values with times in ``(end - length, end]``."""
        return [bits for t, bits in self._rows if _unsigned(end - t) < length]

    # -- merging and writing ---------------------------------------------------------

    def _own_state(self) -> None:
        self._rows = list(self._rows)

    def _merge_state(self, other: WindowSketch) -> None:
        assert isinstance(other, PercentileSketch)
        rows = [row for row in self._rows + other._rows if self._in_window(row[0])]
        if len(rows) > _MAX_VALUES:
            raise ValueError(f"the window holds more than {_MAX_VALUES} values, the most "
                             "the exact mode keeps")
        self._rows = rows

    def _write(self, w: _Writer) -> None:
        rows = sorted((row for row in self._rows if self._in_window(row[0])),
                      key=lambda row: (-row[0], _java_order(row[1])))
        w.varint(len(rows))
        previous = self._now
        for t, bits in rows:
            w.varint(previous - t)
            w.long(bits)
            previous = t
