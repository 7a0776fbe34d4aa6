"""Moments sketches (format kind 5): ``window_moments_sketch``'s dyadic time nodes, each
with the exact count, mean and M2 of its values, read, queried (the same numbers as
``window_moments_sketch_estimate`` / ``_bounds``), merged and written byte for byte as the
JVM does (SlidingMoments). docs/moments.md has the guarantees and their proof."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from windowsketch.sketch import _dyadic
from windowsketch.sketch._base import (_LONG_MAX, _MIN_EPS, AsOf, InvalidSketchBytes,
                                       SubWindow, WindowSketch, _Reader, _signed, _unsigned,
                                       _Writer, register_family)

_KIND_MOMENTS = 5
_MAX_NODES = 4096
_MIN_PENDING = 64
_MAX_CHECK = float(1 << 20)

#: A node: (level, lo, n, mean, M2).
_Node = tuple[int, int, int, float, float]

#: The statistics, by Spark's names and aliases, as ``window_moments_sketch_estimate``
#: takes them.
STATISTICS = {"avg": "avg", "mean": "avg", "var_samp": "var_samp", "variance": "var_samp",
              "var_pop": "var_pop", "stddev_samp": "stddev_samp", "stddev": "stddev_samp",
              "std": "stddev_samp", "stddev_pop": "stddev_pop"}


class _Moments:
    """A group's exact (n, mean, M2), combined pairwise in the JVM's order of operations
    (Chan, Golub and LeVeque), so every double comes out the same."""

    __slots__ = ("n", "mean", "m2")

    def __init__(self, n: int = 0, mean: float = 0.0, m2: float = 0.0) -> None:
        self.n, self.mean, self.m2 = n, mean, m2

    def add(self, n: int, mean: float, m2: float) -> None:
        if n <= 0:
            return
        if self.n == 0:
            self.n, self.mean, self.m2 = n, mean, m2
            return
        total = self.n + n
        if total > _LONG_MAX:
            raise OverflowError("the window's count overflows BIGINT")
        delta = mean - self.mean
        share = float(n) / float(total)
        self.mean += delta * share
        self.m2 += m2 + delta * delta * float(self.n) * share
        self.n = total

    def copy(self) -> _Moments:
        return _Moments(self.n, self.mean, self.m2) if self.n else _Moments()

    def squares_around(self, center: float) -> float:
        d = self.mean - center
        return self.m2 + float(self.n) * d * d


def _answers(inside: _Moments, straddling: _Moments) -> dict[str, tuple[float, float, float] | None]:
    """Every statistic's (estimate, lower, upper), or None where Spark's function gives
    NULL: the JVM's WindowMoments."""
    spread = 0.0 if inside.n == 0 else straddling.squares_around(inside.mean)
    out: dict[str, tuple[float, float, float] | None] = {}
    if inside.n == 0:
        out["avg"] = None
    else:
        k = float(min(straddling.n, inside.n))
        shift = math.sqrt(k * spread) / (float(inside.n) + k)
        out["avg"] = (inside.mean, inside.mean - shift, inside.mean + shift)
    upper_count = inside.n + straddling.n
    for name, d in (("var_pop", 0), ("var_samp", 1)):
        if inside.n <= d:
            out[name] = None
            continue
        lower = inside.m2 / float(upper_count - d)
        upper = (inside.m2 + spread) / float(inside.n - d)
        out[name] = (lower + (upper - lower) / 2, lower, upper)
        root_lower, root_upper = math.sqrt(lower), math.sqrt(upper)
        out["stddev" + name[3:]] = (root_lower + (root_upper - root_lower) / 2, root_lower,
                                    root_upper)
    out.setdefault("stddev_pop", None)
    out.setdefault("stddev_samp", None)
    return out


@register_family
class MomentsSketch(WindowSketch):
    """A moments sketch (``window_moments_sketch`` / ``_merge``): answers
    ``window_moments_sketch_estimate`` and ``window_moments_sketch_bounds`` with the same
    numbers. The average is within eps times the window's standard deviation, the
    variances within eps relative error, the standard deviations within eps / 2, and
    every bracket is certified.

    The bytes of ``SELECT window_moments_sketch(x, ts, 3)`` over
    ``(1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0)``:

    >>> s = MomentsSketch.from_bytes(bytes.fromhex(
    ...     "570105033f847ae147ae147b0100000000000000043f747ae147ae147b0300"
    ...     "020140340000000000000000000000000000000101404e0000000000000000"
    ...     "00000000000000010140440000000000000000000000000000214203ce"))
    >>> s
    MomentsSketch(kind='moments', window=3, eps=0.01, now=4, time_unit='positions')
    >>> s.estimate("avg"), s.estimate("stddev", as_of=4, sub_window=2), s.estimate("var_pop", as_of=5)
    (40.0, 14.142135623730951, 100.0)
    >>> s.bounds("stddev_pop")
    (16.32993161855452, 16.32993161855452, 16.32993161855452)
    >>> s.estimate("avg", as_of=9) is None
    True
    """

    __slots__ = ("_check", "_nodes", "_pending", "_compressed", "_merged")
    # The collapse parameter c; nodes as read or compressed, in pre-order; nodes merged in
    # but not compressed yet; the compressed form of both, once computed; whether anything
    # was merged in (then queries read the nodes the JVM would write, as SQL does).
    _check: float
    _nodes: list[_Node]
    _pending: list[_Node]
    _compressed: tuple[list[_Node], float] | None
    _merged: bool

    _family: ClassVar[str] = "a moments sketch (window_moments_sketch)"
    _kind_names: ClassVar[dict[int, str]] = {_KIND_MOMENTS: "moments"}

    def _height(self) -> int:
        return min(62, (self._window - 1).bit_length())

    def _read(self, r: _Reader) -> None:
        self._check_eps(_MIN_EPS, 1.0)
        check = r.double()
        if not (self._eps / 2 <= check <= _MAX_CHECK):
            raise InvalidSketchBytes(f"invalid collapse parameter {check}")
        n = r.varint()
        # A node takes at least 19 bytes: a count beyond that is damage, not a big sketch.
        if n < 0 or n > len(r.data) // 19 or (n > 0 and not self._has_time):
            raise InvalidSketchBytes(f"invalid node count {n}")
        now = self._now
        nodes: list[_Node] = []
        previous = 0
        for i in range(n):
            level = r.byte()
            lo = _dyadic.read_lo(r, i, now, previous)
            count = r.varint()
            nodes.append((level, lo, count, r.double(), r.double()))
            previous = lo
        self._check = check
        self._nodes = nodes
        self._pending = []
        self._compressed = None
        self._merged = False

    def _validate(self) -> None:
        problem = _Dyadic.invariant_problem(self._window, self._now, self._check,
                                            self._height(), self._nodes)
        if problem is not None:
            raise InvalidSketchBytes(problem)

    # -- queries ---------------------------------------------------------------------

    def estimate(self, statistic: str, as_of: AsOf | None = None,
                 sub_window: SubWindow | None = None) -> float | None:
        """One statistic of the values in the window of length ``sub_window`` (default: the
        sketch's window) ending at ``as_of`` (default: the sketch's latest ``ts``):
        ``"avg"`` (or ``"mean"``), ``"var_samp"`` (or ``"variance"``), ``"var_pop"``,
        ``"stddev_samp"`` (or ``"stddev"``, ``"std"``) or ``"stddev_pop"``. None where the
        SQL function gives NULL: an empty window, or fewer than two values for the sample
        forms.

        ``as_of`` and ``sub_window`` as for :meth:`CountSketch.estimate`.
        """
        answer = self.bounds(statistic, as_of, sub_window)
        return None if answer is None else answer[0]

    def bounds(self, statistic: str, as_of: AsOf | None = None,  # type: ignore[override]
               sub_window: SubWindow | None = None) -> tuple[float, float, float] | None:
        """(estimate, lower, upper) of :meth:`estimate`'s statistic, with
        ``lower <= exact <= upper``, as ``window_moments_sketch_bounds`` gives it."""
        if not isinstance(statistic, str) or statistic.lower() not in STATISTICS:
            raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got "
                             f"{statistic!r}")
        end, length = self._query_window(as_of, sub_window, "bounds")
        nodes = self._query_nodes()
        inside, straddling = _Moments(), _Moments()
        if self._has_time:
            for level, lo, n, mean, m2 in nodes:
                if lo <= end and _unsigned(end - lo) < length:
                    inside.add(n, mean, m2)
                elif lo < end:
                    last = min(_Dyadic.last(level, lo), end)
                    if _unsigned(end - last) < length:
                        straddling.add(n, mean, m2)
        return _answers(inside, straddling)[STATISTICS[statistic.lower()]]

    def _query_nodes(self) -> list[_Node]:
        """The nodes a query reads: as stored, or as the JVM would write them after merges."""
        return self._compress()[0] if self._merged else self._nodes

    # -- merging and writing ---------------------------------------------------------

    def _own_state(self) -> None:
        self._nodes = list(self._nodes)
        self._pending = list(self._pending)

    def _merge_state(self, other: WindowSketch) -> None:
        assert isinstance(other, MomentsSketch)
        self._compressed = None
        self._merged = True
        self._check = max(self._check, other._check)
        if not self._nodes and not self._pending:
            # As the JVM: nothing here to order them against, so the other's nodes as they are.
            self._nodes = list(other._nodes)
            self._pending = list(other._pending)
            self._compress_if_due()
        else:
            for node in other._nodes + other._pending:
                self._pending.append(node)
                self._compress_if_due()

    def _compress_if_due(self) -> None:
        # The JVM compresses once the pending nodes outnumber the compressed ones.
        if len(self._pending) >= max(_MIN_PENDING, len(self._nodes)):
            self._nodes, self._check = self._compress()
            self._pending = []
            self._compressed = None

    def _compress(self) -> tuple[list[_Node], float]:
        """The nodes and collapse parameter the JVM's compress() makes of this state."""
        if self._compressed is None:
            self._compressed = _Dyadic.compress(self._window, self._now, self._height(),
                                                self._check, self._nodes, self._pending)
        return self._compressed

    def _write(self, w: _Writer) -> None:
        nodes, check = self._compress()
        w.double(check)
        w.varint(len(nodes))
        previous = self._now
        for i, (level, lo, n, mean, m2) in enumerate(nodes):
            w.byte(level)
            w.varint(self._now - lo if i == 0 else lo - previous)
            w.varint(n)
            w.double(mean)
            w.double(m2)
            previous = lo


class _Dyadic:
    """SlidingMoments' node arithmetic, on nodes (level, lo, n, mean, M2) sorted by lo
    ascending, then level descending (pre-order)."""

    @staticmethod
    def last(level: int, lo: int) -> int:
        return _signed(lo + ((1 << level) - 1))

    @staticmethod
    def first_after(los: Sequence[int], ts: int, start: int, stop: int) -> int:
        low, high = start, stop
        while low < high:
            mid = (low + high) >> 1
            if los[mid] > ts:
                high = mid
            else:
                low = mid + 1
        return low

    @staticmethod
    def suffixes(nodes: Sequence[_Node]) -> list[_Moments]:
        """The moments of nodes [i, len) for every i in [0, len]."""
        out = [_Moments() for _ in range(len(nodes) + 1)]
        m = _Moments()
        for i in range(len(nodes) - 1, -1, -1):
            m.add(nodes[i][2], nodes[i][3], nodes[i][4])
            out[i] = m.copy()
        return out

    @staticmethod
    def compress(window: int, now: int, height: int, check: float, nodes: list[_Node],
                 pending: list[_Node]) -> tuple[list[_Node], float]:
        """The JVM's compress: pending nodes sorted into the compressed ones (a node before
        an equal pending one), equal nodes combined, expired ones dropped; then every
        subtree collapsed that the certificate allows, c doubled while past the cap."""
        def after_edge(ts: int) -> bool:
            return ts > now or _unsigned(now - ts) < window

        ordered = sorted(pending, key=lambda node: (node[1], -node[0]))
        gathered: list[_Node] = []
        a = b = 0
        while a < len(nodes) or b < len(ordered):
            from_pending = a == len(nodes) or (
                b < len(ordered) and (ordered[b][1], -ordered[b][0]) < (nodes[a][1], -nodes[a][0]))
            if from_pending:
                node = ordered[b]
                b += 1
            else:
                node = nodes[a]
                a += 1
            level, lo = node[0], node[1]
            if not after_edge(_Dyadic.last(level, lo)):
                continue
            if gathered and gathered[-1][0] == level and gathered[-1][1] == lo:
                m = _Moments(*gathered[-1][2:])
                m.add(*node[2:])
                gathered[-1] = (level, lo, m.n, m.mean, m.m2)
            else:
                gathered.append(node)
        collapsed = _Dyadic.collapse(height, check, gathered)
        while len(collapsed) > _MAX_NODES and check < _MAX_CHECK:
            check *= 2
            collapsed = _Dyadic.collapse(height, check, collapsed)
        return collapsed, check

    @staticmethod
    def collapse(height: int, check: float, nodes: list[_Node]) -> list[_Node]:
        n = len(nodes)
        los = [node[1] for node in nodes]
        after = _Dyadic.suffixes(nodes)
        out: list[_Node] = []
        first_after = _Dyadic.first_after

        def visit(k: int, lo: int, a: int, b: int, above: _Moments) -> None:
            subtree = _Moments()
            for i in range(a, b):
                subtree.add(*nodes[i][2:])
            if k == 0 or _Dyadic.collapsible(subtree, above, after[b], check):
                out.append((k, lo, subtree.n, subtree.mean, subtree.m2))
                return
            if b - a == 1:  # a lone node stays where it is: (I) and (M) fail down to it
                out.append(nodes[a])
                return
            holds = nodes[a][0] == k and nodes[a][1] == lo
            below = above.copy()
            if holds:
                out.append(nodes[a])
                below.add(*nodes[a][2:])
            start = a + 1 if holds else a
            mid = lo + (1 << (k - 1))
            m = first_after(los, mid - 1, start, b)
            if start < m:
                visit(k - 1, lo, start, m, below)
            if m < b:
                visit(k - 1, mid, m, b, below)

        root_mask = -1 << height
        a = 0
        while a < n:
            root_lo = los[a] & root_mask
            b = first_after(los, _Dyadic.last(height, root_lo), a, n)
            visit(height, root_lo, a, b, _Moments())
            a = b
        return out

    @staticmethod
    def collapsible(subtree: _Moments, above: _Moments, after: _Moments, check: float) -> bool:
        """(I) and (M) for T = the subtree and the values above it, R = the nodes after."""
        t = subtree.copy()
        t.add(above.n, above.mean, above.m2)
        return (float(t.n + 1) <= check * float(after.n)
                and t.squares_around(after.mean) <= check * after.m2)

    @staticmethod
    def invariant_problem(window: int, now: int, check: float, height: int,
                          nodes: Sequence[_Node]) -> str | None:
        """What the JVM's checkInvariant finds wrong with stored nodes, or None."""
        total = 0
        for i, (_, _, n, mean, m2) in enumerate(nodes):
            if n < 1 or total + n > _LONG_MAX or not math.isfinite(mean) or \
                    not (0 <= m2 < math.inf):
                return f"invalid moments at node {i}"
            total += n
        after = _Dyadic.suffixes(nodes)
        los = [node[1] for node in nodes]
        last = _Dyadic.last
        stack: list[int] = []
        with_above: list[_Moments] = []
        for i, (level, lo, n, mean, m2) in enumerate(nodes):
            if i > 0 and not (los[i - 1] < lo or (los[i - 1] == lo and nodes[i - 1][0] > level)):
                return f"nodes out of order at {i}"
            if level < 0 or level > height or lo & ((1 << level) - 1):
                return f"invalid node at {i}"
            node_last = last(level, lo)
            if lo > now or not (node_last > now or _unsigned(now - node_last) < window):
                return f"node {i} lies outside the window"
            while stack and not node_last <= last(nodes[stack[-1]][0], los[stack[-1]]):
                stack.pop()
                with_above.pop()
            if len(stack) > height:
                return "nodes nest deeper than the tree"
            t = with_above[-1].copy() if stack else _Moments()
            t.add(n, mean, m2)
            if level > 0:
                r = after[_Dyadic.first_after(los, node_last, i + 1, len(nodes))]
                if not (float(t.n + 1) <= check * float(r.n)
                        and t.squares_around(r.mean) <= 2 * check * r.m2):
                    return f"invariant broken at node {i} (level {level})"
            stack.append(i)
            with_above.append(t)
        return None
