"""Percentile sketches: ``window_percentile_sketch``'s window, read, queried (the same numbers
as ``window_percentile_sketch_estimate``), merged and written byte for byte as the JVM does
(SlidingQuantiles). Kind 4 holds the window's values with their times (exact mode); kind 8
holds dyadic time nodes of compacted values (compact mode, CompactQuantiles), for windows
of more values than the exact form writes. docs/percentiles.md has both guarantees."""
from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import ClassVar, Union

from windowsketch.sketch import _dyadic
from windowsketch.sketch._base import (_DOUBLE, _LONG, _LONG_MAX, _LONG_MIN, _MASK64, _MIN_EPS,
                                       AsOf, InvalidSketchBytes, SubWindow, WindowSketch,
                                       _older_age, _Reader, _unsigned, _varint_at, _Writer,
                                       register_family)

_KIND_PERCENTILE = 4
_KIND_PERCENTILE_COMPACT = 8
# The most rows an exact form's bytes may hold (SlidingQuantiles.MaxValues): what the
# exact limit once allowed.
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


# -- compact mode (CompactQuantiles) -------------------------------------------------------

_GOLDEN = 0x9E3779B97F4A7C15
_MIN_PENDING = 64
_MIN_CAPACITY = 8


def _mix(z: int) -> int:
    """SplitMix64's finalizer on 64-bit patterns."""
    z &= _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _coin(salt: int, h: int, done: int) -> int:
    return int(_mix(salt ^ _mix(done + h * _GOLDEN)) >> 63)


def _salt(level: int, lo: int) -> int:
    return _mix(lo * _GOLDEN + level)


def _level_capacity(k: int, depth: int) -> int:
    """max(2, ceil(k (2/3)^depth)), in integers as the JVM computes it."""
    if depth >= 30:
        return 2
    den: int = 3 ** depth
    return max(2, ((k << depth) + den - 1) // den)


def _top_capacity(eps: float) -> int:
    return max(_MIN_CAPACITY, min(1 << 16, math.ceil(0.25 / eps)))


def _leaf_capacity(eps: float) -> int:
    return max(_MIN_CAPACITY, min(1 << 16, math.ceil(12.0 / eps)))


def _node_capacity(top: int, check: float, rows: int, rows_after: int) -> int:
    """A collapsed node's capacity: top / 2^floor(2/3 log2(c n_R / n_w)), at least 8."""
    ratio = max(1, int(check * float(rows_after)) // max(rows, 1))
    return max(_MIN_CAPACITY, top >> min(30, 2 * (ratio.bit_length() - 1) // 3))


def _budget(eps: float, rows: int, rows_after: int) -> float:
    """The most variance a node may carry (CompactQuantiles.budget): eps^2 m (m + 2 r) / 45,
    in the JVM's order of operations."""
    return 1.0 / 45 * eps * eps * float(rows) * (float(rows) + 2.0 * float(rows_after))


def _exact_limit(eps: float) -> int:
    """The most values a window holds exactly (CompactQuantiles.exactLimit): the largest
    power of two at most 64 / eps."""
    target = 64.0 / eps
    limit = 1
    while 2.0 * limit <= target and limit < _MAX_VALUES:
        limit <<= 1
    return limit


class _Values:
    """A node's values (CompactQuantiles' QuantileSummary): per level h the raw bits of
    values weighing 2^h each, and the compactions done at each level."""

    __slots__ = ("levels", "compactions")

    def __init__(self, levels: list[list[int]], compactions: list[int]) -> None:
        self.levels = levels
        self.compactions = compactions

    def copy(self) -> _Values:
        return _Values([list(level) for level in self.levels], list(self.compactions))

    def weight(self) -> int:
        return sum(len(level) << h for h, level in enumerate(self.levels))

    def variance(self) -> float:
        v = 0.0
        for h, done in enumerate(self.compactions):
            v += float(done) * math.ldexp(1.0, 2 * h)
        return v

    def insert(self, bits: int, k: int, salt: int, budget: float) -> None:
        self.levels[0].append(bits)
        if len(self.levels[0]) > _level_capacity(k, len(self.levels) - 1):
            self.compress(k, salt, budget)

    def add_all(self, other: _Values) -> None:
        while len(self.levels) < len(other.levels):
            self.levels.append([])
            self.compactions.append(0)
        for h, level in enumerate(other.levels):
            self.levels[h].extend(level)
            self.compactions[h] += other.compactions[h]

    def compress(self, k: int, salt: int, budget: float) -> None:
        """Compacts levels past capacity, lowest first; a pass stops where a compaction
        would take the variance past ``budget``, and passes repeat until one compacts
        nothing (QuantileSummary.compress)."""
        compacted = True
        while compacted:
            compacted = False
            h = 0
            while h < len(self.levels):
                if len(self.levels[h]) > _level_capacity(k, len(self.levels) - 1 - h):
                    if self.variance() + math.ldexp(1.0, 2 * h) > budget:
                        break
                    self._compact(h, salt)
                    compacted = True
                h += 1

    def _compact(self, h: int, salt: int) -> None:
        level = sorted(self.levels[h], key=_java_order)
        start = len(level) & 1
        if h + 1 == len(self.levels):
            self.levels.append([])
            self.compactions.append(0)
        self.levels[h + 1].extend(level[start + _coin(salt, h, self.compactions[h])::2])
        self.levels[h] = level[:start]
        self.compactions[h] += 1


#: A compact node: (level, lo, rows, values).
_CompactNode = tuple[int, int, int, _Values]


class _Compact:
    """The JVM's CompactQuantiles without its own now: the sketch's is used."""

    __slots__ = ("window", "eps", "check", "height", "nodes", "pending")

    def __init__(self, window: int, eps: float, nodes: list[_CompactNode]) -> None:
        self.window = window
        self.eps = eps
        self.check = eps / 3
        self.height = _dyadic.height_for(window)
        self.nodes = nodes
        self.pending: list[_CompactNode] = []

    def copy(self) -> _Compact:
        c = _Compact(self.window, self.eps, [(lv, lo, n, v.copy()) for lv, lo, n, v in self.nodes])
        c.pending = [(lv, lo, n, v.copy()) for lv, lo, n, v in self.pending]
        return c

    def add(self, now: int, t: int, bits: int) -> None:
        """A row already inside the window of ``now`` (NaN canonical)."""
        last = self.pending[-1] if self.pending else None
        if last is not None and last[0] == 0 and last[1] == t:
            last[3].insert(bits, _leaf_capacity(self.eps), _salt(0, t),
                           _budget(self.eps, last[2] + 1, 0))
            self.pending[-1] = (0, t, last[2] + 1, last[3])
        else:
            values = _Values([[]], [0])
            values.insert(bits, _leaf_capacity(self.eps), _salt(0, t), _budget(self.eps, 1, 0))
            self.add_pending(now, (0, t, 1, values))

    def add_pending(self, now: int, node: _CompactNode) -> None:
        self.pending.append(node)
        if len(self.pending) >= max(_MIN_PENDING, len(self.nodes)):
            self.compress(now)

    def merge(self, now: int, other: _Compact) -> None:
        for level, lo, rows, values in other.nodes + other.pending:
            self.add_pending(now, (level, lo, rows, values.copy()))

    def compress(self, now: int) -> None:
        """The JVM's compress: gather, collapse, then compact every node as far as its
        capacity and its variance budget allow."""

        def combine(level: int, lo: int, first: _Values, second: _Values) -> _Values:
            values = first.copy()
            values.add_all(second)
            return values

        def fold(k: int, lo: int, nodes: Sequence[_dyadic.Node], a: int, b: int, rows: int,
                 rows_after: int) -> _dyadic.Node:
            if k == 0 or (b - a == 1 and nodes[a][0] == k):
                return nodes[a]
            values = _Values([[]], [0])
            for i in range(a, b):
                values.add_all(nodes[i][3])
            return (k, lo, rows, values)

        gathered = _dyadic.gather(self.window, now, self.nodes, self.pending, combine)
        self.nodes = _dyadic.collapse(self.height, self.check, gathered, fold)
        self.pending = []
        self.compact_nodes()

    def compact_nodes(self) -> None:
        """CompactQuantiles.compactNodes: each node to its capacity within its budget."""
        top, leaf = _top_capacity(self.eps), _leaf_capacity(self.eps)
        los = [lo for _, lo, _, _ in self.nodes]
        after = [0] * (len(self.nodes) + 1)
        for i in range(len(self.nodes) - 1, -1, -1):
            after[i] = after[i + 1] + self.nodes[i][2]
        for i, (level, lo, rows, values) in enumerate(self.nodes):
            rows_after = after[_dyadic.first_after(los, _dyadic.last(level, lo), i + 1,
                                                   len(self.nodes))]
            capacity = leaf if level == 0 else _node_capacity(top, self.check, rows, rows_after)
            values.compress(capacity, _salt(level, lo), _budget(self.eps, rows, rows_after))

    def answer(self, ps: list[float], end: int, length: int) -> list[float] | None:
        """The estimates (CompactQuantiles.answerAt) for ``(end - length, end]``."""
        held: list[tuple[int, int]] = []  # (value bits, weight)
        inside = 0
        for level, lo, rows, values in self.nodes + self.pending:
            if lo <= end and _unsigned(end - lo) < length:
                inside += rows
                for h, level_values in enumerate(values.levels):
                    held.extend((bits, 1 << h) for bits in level_values)
        if not held:
            return None
        held.sort(key=lambda pair: _java_order(pair[0]))
        cumulative = []
        total = 0
        for _, weight in held:
            total += weight
            cumulative.append(total)
        answers = []
        for p in ps:
            t = max(1, math.ceil(p * inside))
            answers.append(_double_of(held[min(bisect.bisect_left(cumulative, t),
                                              len(held) - 1)][0]))
        return answers

    def count(self, end: int, length: int) -> int:
        inside = straddling = 0
        for level, lo, rows, _ in self.nodes + self.pending:
            if lo <= end and _unsigned(end - lo) < length:
                inside += rows
            elif lo < end:
                edge = min(_dyadic.last(level, lo), end)
                if edge <= end and _unsigned(end - edge) < length:
                    straddling += rows
        return inside + straddling // 2

    def problem(self, now: int) -> str | None:
        """What the JVM's checkInvariant finds wrong with read nodes, or None."""
        total = 0
        for i, (_, _, rows, values) in enumerate(self.nodes):
            if rows < 1 or total + rows > _LONG_MAX or values.weight() != rows:
                return f"invalid values at node {i}"
            total += rows
        return _dyadic.structure_problem(self.window, now, self.check, self.height, self.nodes)


@register_family
class PercentileSketch(WindowSketch):
    """A percentile sketch (``window_percentile_sketch`` / ``_merge``): answers
    ``window_percentile_sketch_estimate`` with the same numbers. Kind 4 holds every value of
    its window with its time, so its percentiles are exact; kind 8 (past the exact limit,
    :attr:`is_compact`) holds a summary whose percentiles are within eps·n in rank, as the
    JVM's, and merges and writes the JVM's bytes.

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

    __slots__ = ("_rows", "_compact")
    # Exact mode: the rows of the window, (time, raw bits of the value), in any order.
    _rows: list[tuple[int, int]]
    # Compact mode (then _rows is empty): the dyadic nodes of compacted values.
    _compact: _Compact | None

    _family: ClassVar[str] = "a percentile sketch (window_percentile_sketch)"
    _kind_names: ClassVar[dict[int, str]] = {_KIND_PERCENTILE: "percentile",
                                             _KIND_PERCENTILE_COMPACT: "percentile_compact"}

    def _read(self, r: _Reader) -> None:
        self._check_eps(_MIN_EPS, 1.0)
        self._compact = None
        if self._kind == _KIND_PERCENTILE_COMPACT:
            self._rows = []
            self._compact = self._read_compact(r)
            return
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

    def _read_compact(self, r: _Reader) -> _Compact:
        limit = len(r.data)
        n = r.varint()
        if n < 0 or n > limit // 4 or (n > 0 and not self._has_time):
            raise InvalidSketchBytes(f"invalid node count {n}")
        now = self._now
        nodes: list[_CompactNode] = []
        previous = 0
        for i in range(n):
            level = r.byte()
            lo = _dyadic.read_lo(r, i, now, previous)
            rows = r.varint()
            level_count = r.varint()
            if level_count < 1 or level_count > 63:
                raise InvalidSketchBytes(f"invalid values at node {i}")
            levels: list[list[int]] = []
            compactions: list[int] = []
            for _ in range(level_count):
                done = r.varint()
                size = r.varint()
                if done < 0 or size < 0 or size > limit // 8:
                    raise InvalidSketchBytes(f"invalid values at node {i}")
                values = []
                previous_key = None
                for _ in range(size):
                    bits = r.long()
                    key = _java_order(bits)
                    if (previous_key is not None and key < previous_key) or (
                            key == _CANONICAL_NAN and bits != _CANONICAL_NAN):
                        raise InvalidSketchBytes(f"values out of order at node {i}")
                    values.append(bits)
                    previous_key = key
                levels.append(values)
                compactions.append(done)
            nodes.append((level, lo, rows, _Values(levels, compactions)))
            previous = lo
        return _Compact(self._window, self._eps, nodes)

    def _validate(self) -> None:
        if self._compact is not None:
            problem = self._compact.problem(self._now)
            if problem is not None:
                raise InvalidSketchBytes(problem)

    @property
    def is_compact(self) -> bool:
        """True for the compact mode (kind 8): the window is a summary, its percentiles
        approximate within the sketch's eps (docs/percentiles.md)."""
        return self._compact is not None

    # -- queries ---------------------------------------------------------------------

    def count(self, as_of: AsOf | None = None, sub_window: SubWindow | None = None) -> int:
        """The number of values in the window of :meth:`estimate`; in compact mode the
        middle of the range the summary certifies."""
        end, length = self._query_window(as_of, sub_window, "count")
        compact = self._as_written()
        if compact is not None:
            return compact.count(end, length) if self._has_time else 0
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
        compact_state = self._as_written()
        if compact_state is not None:
            compact = compact_state.answer(percentages, end, length) if self._has_time else None
            return compact if compact is None or several else compact[0]
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
        if self._compact is not None:
            self._compact = self._compact.copy()

    def _as_written(self) -> _Compact | None:
        """The compact state the sketch's bytes hold, as the JVM reads them back (None for
        the exact form): a merge of exact sketches past the exact limit is written, and so
        answers, in the compact form."""
        if self._compact is not None:
            if self._compact.pending:
                self._compact.compress(self._now)
            return self._compact
        if self._written_kind() == _KIND_PERCENTILE:
            return None
        copy = self._copy()
        assert isinstance(copy, PercentileSketch)
        compact = copy._to_compact()
        compact.compress(self._now)
        return compact

    def _to_compact(self) -> _Compact:
        """SlidingQuantiles.toCompact: the window's rows into a compact state, in time order
        (equal times by value), so the state depends on the rows only."""
        if self._compact is None:
            self._compact = _Compact(self._window, self._eps, [])
            self._replay(self._rows)
            self._rows = []
        return self._compact

    def _replay(self, rows: list[tuple[int, int]]) -> None:
        assert self._compact is not None
        for t, bits in sorted((row for row in rows if self._in_window(row[0])),
                              key=lambda row: (row[0], _java_order(row[1]))):
            self._compact.add(self._now, t, _CANONICAL_NAN if _java_order(bits) ==
                              _CANONICAL_NAN else bits)

    def _merge_state(self, other: WindowSketch) -> None:
        assert isinstance(other, PercentileSketch)
        if self._compact is None and other._compact is None:
            # As SlidingQuantiles.merge: the union's rows in the merged window decide.
            rows = [row for row in self._rows + other._rows if self._in_window(row[0])]
            if len(rows) <= _exact_limit(self._eps):
                self._rows = rows
                return
            self._rows = [row for row in self._rows if self._in_window(row[0])]
        compact = self._to_compact()
        if other._compact is not None:
            compact.merge(self._now, other._compact)
        else:
            self._replay(other._rows)

    def _written_kind(self) -> int:
        if self._compact is not None or (
                sum(1 for row in self._rows if self._in_window(row[0]))
                > _exact_limit(self._eps)):
            return _KIND_PERCENTILE_COMPACT
        return _KIND_PERCENTILE

    def _write(self, w: _Writer) -> None:
        if self._written_kind() == _KIND_PERCENTILE_COMPACT:
            self._write_compact(w)
            return
        rows = sorted((row for row in self._rows if self._in_window(row[0])),
                      key=lambda row: (-row[0], _java_order(row[1])))
        w.varint(len(rows))
        previous = self._now
        for t, bits in rows:
            w.varint(previous - t)
            w.long(bits)
            previous = t

    def _write_compact(self, w: _Writer) -> None:
        copy = self if self._compact is not None else self._copy()
        assert isinstance(copy, PercentileSketch)
        compact = copy._to_compact()
        compact.compress(self._now)
        w.varint(len(compact.nodes))
        previous = self._now
        for i, (level, lo, rows, values) in enumerate(compact.nodes):
            w.byte(level)
            w.varint(self._now - lo if i == 0 else lo - previous)
            w.varint(rows)
            w.varint(len(values.levels))
            for h, level_values in enumerate(values.levels):
                w.varint(values.compactions[h])
                w.varint(len(level_values))
                for bits in sorted(level_values, key=_java_order):
                    w.long(bits)
            previous = lo
