"""The time-ordered histogram's sums (docs/ordered-sums.md): a weight w at ts leaves exactly
the state of w single events at ts, so the count's guarantee holds for sums; checked
bucket for bucket against unit events, and on every row against brute-force sums on
heavy-tailed values, zeros, duplicates, gaps and huge values at the window edge."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import stable_seed
from test_sums_and_subwindows import edge_bursts, heavy_tailed


def longs(values) -> bytes:
    return np.asarray(values, dtype=">i8").tobytes()


def histogram_of_weights(sketches, window, eps, ts, weights):
    h = sketches.new(window, eps)
    sketches.replay.insertWeighted(h, longs(ts), longs(weights))
    return h


def histogram_of_units(sketches, window, eps, ts, weights):
    """The same stream as single events: each weight w as w rows of one event at its ts,
    after a row of no event (so zero weights still move now)."""
    ts = np.asarray(ts)
    weights = np.asarray(weights)
    unit_ts = np.concatenate([[t] * (1 + int(w)) for t, w in zip(ts, weights)])
    unit_events = np.concatenate([[0] + [1] * int(w) for w in weights]).astype(np.uint8)
    h = sketches.new(window, eps)
    sketches.replay.insertAll(h, longs(unit_ts), unit_events.tobytes())
    return h


@pytest.mark.parametrize("eps", [0.5, 0.1, 0.03])
@pytest.mark.parametrize("window", [3, 50, 10**6])
@pytest.mark.parametrize("shape", ["small", "bursty", "duplicates"])
def test_a_weight_leaves_the_state_of_as_many_single_events(sketches, eps, window, shape):
    rng = np.random.default_rng(stable_seed(eps, window, shape))
    n = 600
    ts = np.sort(rng.integers(0, 3 * n, n))
    if shape == "small":
        weights = rng.integers(0, 4, n)
    elif shape == "bursty":
        weights = np.where(rng.random(n) < 0.1, rng.integers(50, 400, n), rng.integers(0, 3, n))
    else:  # runs of rows at one ts
        ts = np.repeat(ts[: n // 6], 6)
        weights = rng.integers(0, 60, n)
    for cut in (n // 7, n // 2, n):
        a = histogram_of_weights(sketches, window, eps, ts[:cut], weights[:cut])
        b = histogram_of_units(sketches, window, eps, ts[:cut], weights[:cut])
        assert sketches.buckets(a) == sketches.buckets(b), cut
        assert (a.estimate(), a.lowerBound(), a.upperBound(), a.now()) == \
            (b.estimate(), b.lowerBound(), b.upperBound(), b.now())


def exact_sums(ts, values, window):
    """Per row i: the sum of the values of rows up to i with ts in (ts_i - window, ts_i],
    rows sorted by ts (rows at ts_i after row i are not in yet)."""
    prefix = np.concatenate([[0], np.cumsum(values)])
    lo = np.searchsorted(ts, ts - window, side="right")
    return prefix[1:] - prefix[lo]


@pytest.mark.parametrize("window", [5, 300, 5000])
@pytest.mark.parametrize("eps", [0.2, 0.05, 0.01])
@pytest.mark.parametrize("stream", ["heavy-tailed", "edge-bursts", "sparse", "duplicates"])
def test_sum_bound_on_every_row(sketches, window, eps, stream):
    rng = np.random.default_rng(stable_seed("ordered", window, eps, stream))
    n = 4000
    if stream == "edge-bursts":
        ts, values = edge_bursts(rng, n, window)
    else:
        ts = np.sort(rng.integers(0, 2 * n, n)).astype(np.int64)
        values = heavy_tailed(rng, n)
        if stream == "sparse":  # windows of zeros alternate with windows of positive values
            values = np.where((ts.max() - ts) // window % 2 == 0, values + 1, 0)
        elif stream == "duplicates":
            ts = np.repeat(ts[: n // 8], 8)
    packed = sketches.replay.runOrderedSums(window, float(eps), longs(ts), longs(values))
    out = np.frombuffer(bytes(packed), dtype=">i8").astype(np.int64).reshape(n, 4)
    exact = exact_sums(ts, values, window)
    estimate, lower, upper, buckets = out.T
    assert np.all(lower <= exact) and np.all(exact <= upper)
    assert np.all(np.abs(estimate - exact) <= eps * exact), np.max(np.abs(estimate - exact) - eps * exact)
    k = int(np.ceil(1 / eps))
    assert buckets.max() <= (k // 2 + 2) * 64, "at most mergeAt buckets a level"
    assert exact.max() > 0


def test_huge_weights_keep_a_valid_readable_state(sketches):
    """Values up to 2^61: every level's bucket count stays in the range the format checks
    (at least ceil(k/2) below the top), so the state writes and reads back."""
    rng = np.random.default_rng(5)
    ts = np.arange(300)
    weights = (rng.integers(0, 2**20, 300) * rng.integers(1, 2**20, 300)) // 3
    weights[::50] = 2**55
    h = histogram_of_weights(sketches, 10**9, 0.01, ts, weights)
    back = sketches.format.deserialize(sketches.format.serialize(h))
    assert sketches.buckets(back) == sketches.buckets(h)
    assert h.lowerBound() <= int(weights.sum()) <= h.upperBound()
    assert h.estimate() == int(weights.sum())  # nothing has left the window: exact


def test_overflow_and_negative_weights_are_refused(sketches):
    h = sketches.new(100, 0.1)
    h.add(1, 2**62)
    # py4j's error, or pyspark's conversion of it: either way the JVM's message.
    with pytest.raises(Exception, match="the sum of the window's values overflows BIGINT"):
        h.add(2, 2**62)
    with pytest.raises(Exception, match="negative weight -3"):
        h.add(3, -3)
