"""Distinct-count sketches (format kinds 3 and 7, dense and sparse):
``window_distinct_sketch``'s sliding HyperLogLog, read, queried with Spark's HyperLogLog++
estimate (the same numbers as ``approx_count_distinct``), merged and written as the JVM
does (SlidingHyperLogLog, SketchFormat.serializeDistinct)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from windowsketch import _hllpp_tables
from windowsketch.sketch._base import (_DOUBLE, _LONG, _LONG_MIN, _MASK64, AsOf,
                                       InvalidSketchBytes, SubWindow, WindowSketch, _Reader,
                                       _unsigned, _varint_at, _Writer, register_family)

_KIND_DISTINCT = 3
_KIND_DISTINCT_SPARSE = 7
_MIN_RSD = 0.01
_MAX_RSD = 0.39


@register_family
class DistinctSketch(WindowSketch):
    """A distinct-count sketch (``window_distinct_sketch`` / ``_merge``): answers
    ``window_distinct_sketch_estimate`` with the same numbers. It has no certified bounds."""

    __slots__ = ("_registers",)
    # Per register, its (time, rank) pairs, oldest first.
    _registers: list[list[tuple[int, int]]]

    _family: ClassVar[str] = "a distinct-count sketch (window_distinct_sketch)"
    # One family, two encodings of the same state: the writer picks the shorter.
    _kind_names: ClassVar[dict[int, str]] = {_KIND_DISTINCT: "distinct",
                                             _KIND_DISTINCT_SPARSE: "distinct"}
    _parameter_name: ClassVar[str] = "rsd"

    @property
    def is_distinct(self) -> bool:
        """True: a distinct-count sketch."""
        return True

    def _read(self, r: _Reader) -> None:
        self._check_eps(_MIN_RSD, _MAX_RSD, high_included=True)
        self._registers = []
        self._read_distinct(r)

    def _read_distinct(self, r: _Reader) -> None:
        p = _precision(self._eps)
        m = 1 << p
        max_rank = 65 - p
        max_age = (self._now - _LONG_MIN) & _MASK64  # ages stay within it: now - age never wraps
        registers: list[list[tuple[int, int]]] = [[] for _ in range(m)]
        # Inlined as in _read_dyadic: one byte per register count in the dense kind.
        data, end, pos = r.data, r.end, r.pos
        if self._kind == _KIND_DISTINCT_SPARSE:
            held, pos = _varint_at(r, pos)
            if held < 0 or held > m:
                raise InvalidSketchBytes(f"invalid register count {held}")
            j = -1
            for _ in range(held):
                gap, pos = _varint_at(r, pos)
                j += gap + 1
                if j < 0 or j >= m:
                    raise InvalidSketchBytes(f"invalid register {j}")
                n, pos = _varint_at(r, pos)
                if n < 1:
                    raise InvalidSketchBytes(f"invalid pair count {n} in register {j}")
                registers[j], pos = self._read_pairs(r, pos, j, n, max_rank, max_age)
        else:
            for j in range(m):
                if pos < end and data[pos] < 0x80:
                    n = data[pos]
                    pos += 1
                else:
                    n, pos = _varint_at(r, pos)
                if n > 0:
                    registers[j], pos = self._read_pairs(r, pos, j, n, max_rank, max_age)
                elif n < 0:
                    raise InvalidSketchBytes(f"invalid pair count {n} in register {j}")
        r.pos = pos
        self._registers = registers

    def _read_pairs(self, r: _Reader, pos: int, j: int, n: int, max_rank: int,
                    max_age: int) -> tuple[list[tuple[int, int]], int]:
        """Register j's n (> 0) pairs from ``pos``, oldest first, and the position after."""
        if n > max_rank or not self._has_time:
            raise InvalidSketchBytes(f"invalid pair count {n} in register {j}")
        now, window = self._now, self._window
        data, end = r.data, r.end
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
        return pairs, pos

    def estimate(self, as_of: AsOf | None = None, sub_window: SubWindow | None = None) -> int:
        """The approximate number of distinct values in the window of length ``sub_window``
        (default: the sketch's window) ending at ``as_of`` (default: the sketch's latest
        ``ts``): what ``approx_count_distinct`` with the sketch's rsd gives over that
        window's rows. ``as_of`` and ``sub_window`` as for :meth:`CountSketch.estimate`.
        """
        end, length = self._query_window(as_of, sub_window, "estimate")
        return self._distinct_estimate(end, length)

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

    def _own_state(self) -> None:
        self._registers = [list(pairs) for pairs in self._registers]

    def _merge_state(self, other: WindowSketch) -> None:
        assert isinstance(other, DistinctSketch)
        self._merge_registers(other)

    def _merge_registers(self, other: DistinctSketch) -> None:
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

    def _written_kind(self) -> int:
        return _KIND_DISTINCT_SPARSE if _sparse_is_shorter(self._inside()) else _KIND_DISTINCT

    def _inside(self) -> list[list[tuple[int, int]]]:
        """Per register, its pairs inside the window ending at now."""
        now, window = self._now, self._window
        return [[pair for pair in pairs if _unsigned(now - pair[0]) < window]
                for pairs in self._registers]

    def _write(self, w: _Writer) -> None:
        inside = self._inside()
        sparse = _sparse_is_shorter(inside)
        if sparse:
            w.varint(sum(1 for pairs in inside if pairs))
        previous_register = -1
        for j, pairs in enumerate(inside):
            if sparse:
                if not pairs:
                    continue
                w.varint(j - previous_register - 1)
                previous_register = j
            w.varint(len(pairs))
            previous = self._now
            for t, rank in reversed(pairs):
                w.varint(previous - t)
                w.byte(rank)
                previous = t


def _sparse_is_shorter(inside: list[list[tuple[int, int]]]) -> bool:
    """Kind 7's register gaps and counts against kind 3's byte a register (counts are below
    128, one byte each; the pairs are the same in both): the shorter wins, kind 3 on a tie."""
    sparse_bytes = _varint_length(sum(1 for pairs in inside if pairs))
    previous = -1
    for j, pairs in enumerate(inside):
        if pairs:
            sparse_bytes += _varint_length(j - previous - 1) + 1
            previous = j
    return sparse_bytes < len(inside)


def _varint_length(v: int) -> int:
    return max(1, (v.bit_length() + 6) // 7)


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
