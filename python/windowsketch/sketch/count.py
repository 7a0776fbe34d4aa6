"""Count sketches (format kinds 1 and 2): ``window_sketch``'s mergeable dyadic sketch and
the time-ordered exponential histogram of live counts, read, queried, merged and written
as the JVM does (DyadicWindowSketch, ExponentialHistogram)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from windowsketch.sketch._base import (_LONG_MAX, _LONG_MIN, _MASK64, _MIN_EPS, AsOf,
                                       InvalidSketchBytes, SubWindow, WindowSketch, _older_age,
                                       _Reader, _signed, _unsigned, _varint_at, _Writer,
                                       register_family)

_KIND_HISTOGRAM = 1
_KIND_DYADIC = 2
_MAX_LEVELS = 62
_MAX_NODES = 4096


@register_family
class CountSketch(WindowSketch):
    """A count sketch: ``window_sketch`` / ``window_sketch_merge`` (kind ``"dyadic"``), or
    the time-ordered histogram a live count keeps (kind ``"histogram"``, which cannot merge).
    Answers ``window_sketch_estimate`` / ``window_sketch_bounds`` with the same numbers."""

    __slots__ = ("_sizes", "_buckets", "_invariant", "_nodes", "_pending", "_compressed")
    # Kind 1: buckets per level, and each bucket's (newest, oldest) timestamps, newest first.
    _sizes: list[int]
    _buckets: list[tuple[int, int]]
    # Kind 2: the invariant parameter; nodes (level, lo, count) as read or compressed, and
    # nodes merged in but not compressed yet; the compressed form of both, once computed.
    _invariant: float
    _nodes: list[tuple[int, int, int]]
    _pending: list[tuple[int, int, int]]
    _compressed: tuple[list[tuple[int, int, int]], float] | None

    _family: ClassVar[str] = "a count sketch (window_sketch)"
    _kind_names: ClassVar[dict[int, str]] = {_KIND_HISTOGRAM: "histogram", _KIND_DYADIC: "dyadic"}

    def _read(self, r: _Reader) -> None:
        self._check_eps(_MIN_EPS, 1.0)
        self._sizes = []
        self._buckets = []
        self._invariant = 0.0
        self._nodes = []
        self._pending = []
        self._compressed = None
        if self._kind == _KIND_HISTOGRAM:
            self._read_histogram(r)
        else:
            self._read_dyadic(r)

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

    # -- queries ---------------------------------------------------------------------

    def estimate(self, as_of: AsOf | None = None, sub_window: SubWindow | None = None) -> int:
        """The approximate number of events in the window of length ``sub_window``
        (default: the sketch's window) ending at ``as_of`` (default: the sketch's latest
        ``ts``), within the sketch's eps of the exact count.

        ``as_of`` is a ``datetime`` (naive means UTC, as Spark stores TIMESTAMP) or a
        ``date`` for time sketches, an ``int`` for position sketches; it may not be earlier
        than the sketch's latest ``ts``. ``sub_window`` is a ``timedelta`` or an ``int``
        likewise, no longer than the sketch's window.
        """
        return self.bounds(as_of, sub_window)[0]

    def bounds(self, as_of: AsOf | None = None,
               sub_window: SubWindow | None = None) -> tuple[int, int, int]:
        """(estimate, lower, upper) in the window of :meth:`estimate`:
        ``lower <= exact <= upper`` always holds, as ``window_sketch_bounds`` gives it."""
        end, length = self._query_window(as_of, sub_window, "bounds")
        if self._kind == _KIND_HISTOGRAM:
            if length != self._window:
                raise ValueError("sub_window: sub-window queries need a sketch made by "
                                 "window_sketch; this one is a time-ordered histogram")
            return self._histogram_bounds(end)
        nodes = self._query_nodes()
        return _Dyadic.bounds_at(nodes, end, length)

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

    # -- merging and writing ---------------------------------------------------------

    def _own_state(self) -> None:
        self._nodes = list(self._nodes)
        self._pending = list(self._pending)

    def _check_mergeable(self, other: WindowSketch) -> None:
        if _KIND_HISTOGRAM in (self._kind, other._kind):
            raise ValueError("cannot merge: a time-ordered histogram (the state of live "
                             "counts) cannot merge; sketch columns are made by window_sketch")

    def _merge_state(self, other: WindowSketch) -> None:
        assert isinstance(other, CountSketch)
        self._compressed = None
        self._invariant = max(self._invariant, other._invariant)
        for node in other._nodes:
            self._add_pending(node)
        for node in other._pending:
            self._add_pending(node)

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

    def _write(self, w: _Writer) -> None:
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
            return
        nodes, invariant = self._compress()
        w.double(invariant)
        w.varint(len(nodes))
        previous = now
        for i, (level, lo, count) in enumerate(nodes):
            w.byte(level)
            w.varint(now - lo if i == 0 else lo - previous)
            w.varint(count)
            previous = lo


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
