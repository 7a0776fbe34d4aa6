"""Windowed sums of integers and sub-window queries of the mergeable sketch, against brute
force on every output."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import exact_sum, stable_seed


def heavy_tailed(rng, n):
    """Pareto-like values with zeros and rare huge ones."""
    values = np.floor(rng.pareto(1.2, n) * 10).astype(np.int64)
    values[rng.random(n) < 0.2] = 0
    return values


def edge_bursts(rng, n, window):
    """Huge values right at the window's edge as it slides past them."""
    ts = np.arange(n, dtype=np.int64)
    values = rng.integers(0, 5, n)
    for start in range(window // 2, n, window):
        values[start:start + 3] = 10**12
    return ts, values


@pytest.mark.parametrize("window", [5, 300, 5000])
@pytest.mark.parametrize("eps", [0.2, 0.05, 0.01])
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
@pytest.mark.parametrize("stream", ["heavy-tailed", "edge-bursts", "sparse"])
def test_sum_bound_on_every_row(sketches, window, eps, order, stream):
    rng = np.random.default_rng(stable_seed(window, eps, order, stream))
    n = 3000
    if stream == "edge-bursts":
        ts, values = edge_bursts(rng, n, window)
    else:
        ts = np.sort(rng.integers(0, 2 * n, n)).astype(np.int64)
        values = heavy_tailed(rng, n)
        if stream == "sparse":  # windows of zeros alternate with windows of positive values
            values = np.where((ts.max() - ts) // window % 2 == 0, values + 1, 0)
    if order == "shuffled":
        perm = rng.permutation(n)
        ts, values = ts[perm], values[perm]
    out = sketches.run_any_order(window, eps, ts, values)
    peak = 0
    for i in range(n):
        exact = exact_sum(ts[: i + 1], values[: i + 1], window)
        estimate, lower, upper = (int(x) for x in out[i, :3])
        assert lower <= exact <= upper, (i, lower, exact, upper)
        assert abs(estimate - exact) <= eps * exact, (i, estimate, exact)
        peak = max(peak, exact)
    assert peak > 0


@pytest.mark.parametrize("eps", [0.1, 0.01])
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_every_sub_window_from_1_to_n(sketches, eps, order):
    rng = np.random.default_rng(77)
    n, window = 4000, 1500
    ts = np.sort(rng.integers(0, 3000, n)).astype(np.int64)
    events = rng.random(n) < 0.4
    events[1000:1400] = True
    if order == "shuffled":
        perm = rng.permutation(n)
        ts, events = ts[perm], events[perm]
    sketch = sketches.dyadic(window, eps, ts, events)
    now = int(ts.max())
    for end in (now, now + 100):
        lengths = np.arange(1, window + 1)
        got = sketches.sub_windows(sketch, end, lengths)
        hits = np.sort(ts[events])
        exact = len(hits) - np.searchsorted(hits, end - lengths, side="right")
        estimate, lower, upper = got[:, 0], got[:, 1], got[:, 2]
        assert np.all(lower <= exact) and np.all(exact <= upper)
        assert np.all(np.abs(estimate - exact) <= eps * exact)
        assert np.count_nonzero(exact) > window // 2


def test_sub_window_longer_than_the_window_is_refused(sketches):
    sketch = sketches.dyadic(100, 0.1, [5], [True])
    with pytest.raises(Exception, match="sub-window 101 must be in"):
        sketches.sub_windows(sketch, 5, [101])
    with pytest.raises(Exception, match="must end at or after now"):
        sketches.sub_windows(sketch, 4, [10])


def test_sum_overflow_is_an_error_not_a_wrap(sketches):
    with pytest.raises(Exception, match="overflows BIGINT"):
        sketches.run_any_order(10, 0.1, [1, 2, 3] * 30, [2**62] * 90)


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_a_window_sum_past_a_long_is_an_error_never_a_wrap(sketches, order):
    ts = np.array([1, 2] if order == "sorted" else [2, 1], np.int64)
    with pytest.raises(Exception, match="the sum of the window's values overflows BIGINT"):
        sketches.run_any_order(10, 0.01, ts, np.array([5 * 10**18, 5 * 10**18], np.int64))
