"""The time-ordered sum histogram (docs/ordered-sums.md): every row's estimate and bounds
against brute-force sums on streams that stress the window edge, the merge rule (D) on
every bucket, and a state logarithmic in the window's sum."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import stable_seed
from test_sums_and_subwindows import edge_bursts, heavy_tailed

STREAMS = ["heavy-tailed", "edge-bursts", "sparse", "duplicates", "ones-then-zeros",
           "decaying"]


def longs(values) -> bytes:
    return np.asarray(values, dtype=">i8").tobytes()


def stream(rng, kind: str, n: int, window: int):
    """Rows (ts, value) in time order."""
    if kind == "edge-bursts":
        return edge_bursts(rng, n, window)
    ts = np.sort(rng.integers(0, 2 * n, n)).astype(np.int64)
    values = heavy_tailed(rng, n)
    if kind == "sparse":  # windows of zeros alternate with windows of positive values
        values = np.where((ts.max() - ts) // window % 2 == 0, values + 1, 0)
    elif kind == "duplicates":
        ts = np.repeat(ts[: n // 8], 8)
    elif kind == "ones-then-zeros":  # a full window, then it drains past the edge
        values = np.where(np.arange(n) < n // 2, 1, 0)
    elif kind == "decaying":  # old values dwarf new ones: big buckets reach the edge
        values = (10**15 * 0.998 ** np.arange(n)).astype(np.int64) + rng.integers(0, 2, n)
    return ts, values.astype(np.int64)


def exact_sums(ts, values, window):
    """Per row i: the sum of the values of rows up to i with ts in (ts_i - window, ts_i],
    rows sorted by ts (rows at ts_i after row i are not in yet)."""
    prefix = np.concatenate([[0], np.cumsum(values)])
    lo = np.searchsorted(ts, ts - window, side="right")
    return prefix[1:] - prefix[lo]


def state_bound(window_sum: int, eps: float) -> int:
    """Buckets after a merge pass (docs/ordered-sums.md): a bucket refused by a group makes
    the sum of the groups newer than the next one grow by a factor 1 + 2 eps."""
    return 3 + math.floor(2 * math.log(max(window_sum, 1)) / math.log1p(2 * eps))


def buckets_of(flat) -> list[tuple[int, int, int]]:
    flat = list(flat)
    return [tuple(flat[i:i + 3]) for i in range(0, len(flat), 3)]


def rule_problem(buckets, eps) -> str | None:
    """What breaks the histogram's invariants in buckets listed newest first, or None."""
    newer_sum = 0
    for i, (newest, oldest, total) in enumerate(buckets):
        if total < 1 or oldest > newest:
            return f"bucket {i} is {newest, oldest, total}"
        if i and newest >= buckets[i - 1][1]:
            return f"bucket {i} overlaps the newer one"
        if oldest < newest and total > 2 * eps * newer_sum:
            return f"bucket {i} holds {total} > 2 eps * {newer_sum}"
        newer_sum += total
    return None


@pytest.mark.parametrize("window", [5, 300, 5000])
@pytest.mark.parametrize("eps", [0.2, 0.05, 0.01])
@pytest.mark.parametrize("kind", STREAMS)
def test_sum_bound_on_every_row(sketches, window, eps, kind):
    rng = np.random.default_rng(stable_seed("ordered", window, eps, kind))
    n = 4000
    ts, values = stream(rng, kind, n, window)
    packed = sketches.replay.runOrderedSums(window, float(eps), longs(ts), longs(values))
    out = np.frombuffer(bytes(packed), dtype=">i8").astype(np.int64).reshape(n, 4)
    exact = exact_sums(ts, values, window)
    estimate, lower, upper, buckets = out.T
    assert np.all(lower <= exact) and np.all(exact <= upper)
    error = np.abs(estimate - exact) - eps * exact
    assert np.all(error <= 0), (int(np.argmax(error)), float(error.max()))
    if window == 300:  # 5 rows are too few to merge; 5000 hardly slides over these rows
        assert np.any(lower < upper), "some row had a straddling bucket"
    assert buckets.max() <= max(16, 4 * state_bound(int(exact.max()), eps))
    assert exact.max() > 0


@pytest.mark.parametrize("eps", [0.3, 0.05, 0.01])
@pytest.mark.parametrize("kind", STREAMS)
def test_every_bucket_keeps_the_merge_rule(sketches, eps, kind):
    """(D) on every bucket of more than one timestamp, before and after a merge pass, and
    the buckets hold the window's values: time-disjoint, summing to the histogram's total."""
    rng = np.random.default_rng(stable_seed("rule", eps, kind))
    window = 700
    ts, values = stream(rng, kind, 3000, window)
    for cut in (37, 1001, 3000):
        h = sketches.replay.orderedSums(window, float(eps), longs(ts[:cut]),
                                        longs(values[:cut]))
        held = buckets_of(sketches.replay.sumBuckets(h))
        assert rule_problem(held, eps) is None, (cut, rule_problem(held, eps))
        assert sum(b[2] for b in held) == h.total()
        in_window = ts[:cut] > ts[cut - 1] - window
        assert h.total() >= int(values[:cut][in_window].sum())
        merged = buckets_of(sketches.replay.compressedSums(h))
        assert rule_problem(merged, eps) is None, (cut, rule_problem(merged, eps))
        assert sum(b[2] for b in merged) == h.total()
        assert len(merged) <= state_bound(h.total(), eps)


@pytest.mark.parametrize("eps", [0.1, 0.01])
def test_state_is_logarithmic_in_the_window_sum(sketches, eps):
    """10^5 values all in the window: the state is bounded by the log of their sum, not by
    their number, and a merge pass brings it within the bound."""
    rng = np.random.default_rng(11)
    n = 100_000
    ts = np.arange(n, dtype=np.int64)
    values = rng.integers(1, 1000, n)
    packed = sketches.replay.runOrderedSums(10**9, eps, longs(ts), longs(values))
    estimate, lower, upper, buckets = np.frombuffer(bytes(packed), dtype=">i8").reshape(n, 4).T
    total = int(values.sum())
    assert estimate[-1] == lower[-1] == upper[-1] == total  # nothing has left: exact
    assert buckets.max() <= 4 * state_bound(total, eps) < n // 10
    h = sketches.replay.orderedSums(10**9, eps, longs(ts), longs(values))
    assert len(buckets_of(sketches.replay.compressedSums(h))) <= state_bound(total, eps)


def test_huge_values_and_duplicate_timestamps(sketches):
    """Values up to 2^55 and many rows at one timestamp, sliding past the edge."""
    rng = np.random.default_rng(5)
    ts = np.repeat(np.arange(100, dtype=np.int64), 3)
    values = (rng.integers(0, 2**20, 300) * rng.integers(1, 2**20, 300)) // 3
    values[::50] = 2**55
    packed = sketches.replay.runOrderedSums(20, 0.01, longs(ts), longs(values))
    estimate, lower, upper, _ = np.frombuffer(bytes(packed), dtype=">i8").reshape(300, 4).T
    exact = np.array([values[: i + 1][ts[: i + 1] > ts[i] - 20].sum() for i in range(300)])
    assert np.all(lower <= exact) and np.all(exact <= upper)
    assert np.all(np.abs(estimate - exact) <= 0.01 * exact)


def test_bad_weights_order_and_formats_are_refused(sketches):
    h = sketches.replay.orderedSums(100, 0.1, b"", b"")
    h.add(1, 2**62)
    # py4j's error, or pyspark's conversion of it: either way the JVM's message.
    with pytest.raises(Exception, match="the sum of the window's values overflows BIGINT"):
        h.add(2, 2**62)
    with pytest.raises(Exception, match="negative weight -3"):
        h.add(3, -3)
    h.add(200, 5)
    with pytest.raises(Exception, match="an event at ts=150 arrived after an event at ts=200"):
        h.add(150, 1)
    h.add(90, 7)  # older than the window: dropped, as in the count
    assert (h.estimate(), h.now()) == (5, 200)
    with pytest.raises(Exception, match="has no binary format"):
        sketches.format.serialize(h)
    with pytest.raises(Exception, match="counts events of weight 1, got weight 2"):
        sketches.new(100, 0.1).add(1, 2)
