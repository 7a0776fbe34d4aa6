"""The dyadic time nodes the mergeable families share (the JVM's NodeOrder and the
collapse of SlidingTopK and CompactQuantiles): nodes are tuples (level, lo, rows, summary)
in pre-order, node (k, lo) covering ``[lo, lo + 2^k - 1]``. A subtree collapses into its
root w when (I) ``n_T + 1 <= check n_R`` (T: w's subtree and ancestors, R: the nodes wholly
after w); each family says how summaries combine."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from windowsketch.sketch._base import (_LONG_MAX, _LONG_MIN, _MASK64, InvalidSketchBytes,
                                       _Reader, _signed, _unsigned)

#: A node: (level, lo, rows, the family's summary).
Node = tuple[int, int, int, Any]
#: Two equal nodes' summaries as one: (level, lo, first, second) -> summary.
Combine = Callable[[int, int, Any, Any], Any]
#: The node a subtree collapses into: (level, lo, nodes, a, b, rows, rows after) -> node.
Fold = Callable[[int, int, Sequence[Node], int, int, int, int], Node]


def last(level: int, lo: int) -> int:
    return _signed(lo + ((1 << level) - 1))


def height_for(window: int) -> int:
    """Levels 0..height; the root level spans at least the window."""
    return min(62, (window - 1).bit_length())


def read_lo(r: _Reader, i: int, now: int, previous: int) -> int:
    """Node i's lo as the JVM reads it: a varint step back from now for the first node,
    forward from the previous node's lo after; a step that would wrap is damage."""
    step = r.varint() & _MASK64
    if i == 0:
        fits = step <= (now - _LONG_MIN) & _MASK64
        lo = _signed(now - step)
    else:
        fits = step <= (_LONG_MAX - previous) & _MASK64
        lo = _signed(previous + step)
    if not fits:
        raise InvalidSketchBytes(f"invalid node at position {i}")
    return lo


def first_after(los: Sequence[int], ts: int, start: int, stop: int) -> int:
    low, high = start, stop
    while low < high:
        mid = (low + high) >> 1
        if los[mid] > ts:
            high = mid
        else:
            low = mid + 1
    return low


def gather(window: int, now: int, nodes: list[Node], pending: list[Node],
           combine: Combine) -> list[Node]:
    """The JVM's gatherSorted: pending nodes sorted in, equal nodes combined, nodes that
    left the window dropped."""
    def after_edge(ts: int) -> bool:
        return ts > now or _unsigned(now - ts) < window

    ordered = sorted(pending, key=lambda node: (node[1], -node[0]))
    gathered: list[Node] = []
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
        level, lo, total, summary = node
        if not after_edge(last(level, lo)):
            continue
        if gathered and gathered[-1][0] == level and gathered[-1][1] == lo:
            previous = gathered[-1]
            gathered[-1] = (level, lo, previous[2] + total,
                            combine(level, lo, previous[3], summary))
        else:
            gathered.append(node)
    return gathered


def collapse(height: int, check: float, nodes: list[Node], fold: Fold) -> list[Node]:
    """One top-down pass: each maximal subtree (I) allows becomes ``fold``'s node."""
    n = len(nodes)
    after = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        after[i] = after[i + 1] + nodes[i][2]
    los = [node[1] for node in nodes]
    out: list[Node] = []

    def visit(k: int, lo: int, a: int, b: int, above: int) -> None:
        subtree = after[a] - after[b]
        if k == 0 or float(subtree + above + 1) <= check * float(after[b]):
            out.append(fold(k, lo, nodes, a, b, subtree, after[b]))
            return
        if b - a == 1:
            out.append(nodes[a])
            return
        holds = nodes[a][0] == k and nodes[a][1] == lo
        if holds:
            out.append(nodes[a])
        start = a + 1 if holds else a
        below = above + nodes[a][2] if holds else above
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
        b = first_after(los, last(height, root_lo), a, n)
        visit(height, root_lo, a, b, 0)
        a = b
    return out


def structure_problem(window: int, now: int, check: float, height: int,
                      nodes: Sequence[Node]) -> str | None:
    """What the JVM's NodeOrder.structureProblem finds wrong with stored nodes, or None."""
    after = [0] * (len(nodes) + 1)
    for i in range(len(nodes) - 1, -1, -1):
        after[i] = after[i + 1] + nodes[i][2]
    los = [node[1] for node in nodes]
    stack: list[int] = []
    with_above: list[int] = []
    for i, (level, lo, rows, _) in enumerate(nodes):
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
        t = (with_above[-1] if stack else 0) + rows
        if level > 0 and not float(t + 1) <= check * float(
                after[first_after(los, node_last, i + 1, len(nodes))]):
            return f"invariant broken at node {i} (level {level})"
        stack.append(i)
        with_above.append(t)
    return None
