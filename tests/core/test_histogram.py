"""The core exponential histogram against brute-force exact counts, on every output."""
from __future__ import annotations

import csv
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT, exact_counts, stable_seed

FIGURE3 = os.path.join(os.path.dirname(ROOT), "shared", "reference", "figure3.tsv")
EPSILONS = [0.5, 0.2, 0.1, 0.05, 0.01, 0.001]


def check_every_row(sketches, window, eps, ts, events):
    """Asserts the contract on each row; returns the worst |error| / exact seen."""
    out = sketches.run(window, eps, ts, events)
    exact = exact_counts(ts, events, window)
    estimate, lower, upper, seed = out[:, 0], out[:, 1], out[:, 2], out[:, 3]
    error = np.abs(estimate - exact)
    bad = np.nonzero(error > eps * exact)[0]
    assert bad.size == 0, (
        f"bound broken at row {bad[0]}: ts={ts[bad[0]]} estimate={estimate[bad[0]]} "
        f"exact={exact[bad[0]]} window={window} eps={eps}")
    assert np.all(lower <= exact) and np.all(exact <= upper), "certified bounds violated"
    assert np.all((lower <= estimate) & (estimate <= upper))
    # Never worse than the seed's ceil(total - last/2) on any row.
    assert np.all(error <= np.abs(seed - exact))
    return float(np.max(np.where(exact > 0, error / np.maximum(exact, 1), 0.0)))


def bernoulli(rng, n, p, step=1):
    return np.arange(n, dtype=np.int64) * step, rng.random(n) < p


def bursts(rng, n):
    """Dense bursts of events separated by quiet stretches, so buckets sit on the edge."""
    events = np.zeros(n, dtype=bool)
    i = 0
    while i < n:
        length = int(rng.integers(1, 400))
        events[i:i + length] = True
        i += length + int(rng.integers(1, 2000))
    return np.arange(n, dtype=np.int64), events


def ones_then_zeros(n):
    events = np.zeros(n, dtype=bool)
    events[: n // 2] = True
    return np.arange(n, dtype=np.int64), events


def gaps(rng, n, window):
    """Time jumps of up to three windows: whole sketches expire at once."""
    steps = np.where(rng.random(n) < 0.01, rng.integers(1, 3 * window + 2, n), 1)
    return np.cumsum(steps).astype(np.int64), rng.random(n) < 0.6


def duplicates(rng, n):
    """Many rows share a timestamp (as NASA's log does within a second)."""
    return np.sort(rng.integers(0, n // 8, n)).astype(np.int64), rng.random(n) < 0.7


STREAMS = {
    "p=0.01": lambda rng, n, w: bernoulli(rng, n, 0.01),
    "p=0.5": lambda rng, n, w: bernoulli(rng, n, 0.5),
    "p=1": lambda rng, n, w: bernoulli(rng, n, 1.0),
    "sparse-time": lambda rng, n, w: bernoulli(rng, n, 0.5, step=7),
    "bursts": lambda rng, n, w: bursts(rng, n),
    "ones-then-zeros": lambda rng, n, w: ones_then_zeros(n),
    "gaps": lambda rng, n, w: gaps(rng, n, w),
    "duplicates": lambda rng, n, w: duplicates(rng, n),
}


@pytest.mark.parametrize("stream", sorted(STREAMS))
@pytest.mark.parametrize("window", [1, 7, 100, 5000, 10**6])
@pytest.mark.parametrize("eps", EPSILONS)
def test_bound_on_every_row(sketches, stream, window, eps):
    rng = np.random.default_rng(stable_seed(stream, window, eps))
    ts, events = STREAMS[stream](rng, 20_000, window)
    span = int(ts[-1] - ts[0]) + 1
    if span < 3 * window:  # stretch time so that the window slides past events
        ts = ts * (3 * window // span + 1)
    check_every_row(sketches, window, eps, ts, events)
    assert np.any(exact_counts(ts, events, window) < np.cumsum(events)), "nothing expired"


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    steps=st.lists(st.integers(0, 12), min_size=1, max_size=300),
    flags=st.lists(st.booleans(), min_size=300, max_size=300),
    window=st.integers(1, 60),
    eps=st.sampled_from(EPSILONS),
)
def test_bound_on_generated_streams(sketches, steps, flags, window, eps):
    ts = np.cumsum(steps).astype(np.int64)
    check_every_row(sketches, window, eps, ts, np.array(flags[: len(ts)]))


def test_window_edge_is_half_open(sketches):
    # Window (now - 10, now]: at now = 10 the event at 0 is out, the one at 1 is in.
    out = sketches.run(10, 0.5, [0, 1, 10, 11], [1, 1, 0, 0])
    assert list(out[:, 0]) == [1, 2, 1, 0]


def test_extreme_timestamps_do_not_overflow(sketches):
    low, high = -(2**63), 2**63 - 1
    ts = [low, low, low + 5, 0, high - 1, high]
    check_every_row(sketches, 2**63 - 1, 0.1, np.array(ts), np.ones(6, dtype=bool))
    check_every_row(sketches, 3, 0.1, np.array(ts), np.ones(6, dtype=bool))


def test_semantics_case_where_the_seed_breaks_its_bound(sketches):
    # eps = 0.1: k = 10, merges at 7 equal buckets. After 7 events the oldest bucket holds
    # 2 events, both inside the window, behind 5 single events.
    out = sketches.run(100, 0.1, list(range(1, 8)), [1] * 7)
    estimate, seed = out[-1, 0], out[-1, 3]
    assert seed == 6 and abs(seed - 7) / 7 > 0.1  # the seed: 14% off with eps = 10%
    assert estimate == 7


def read_figure3():
    with open(FIGURE3) as f:
        rows = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(rows, delimiter="\t"))


def test_figure3_bucket_for_bucket(sketches):
    h = sketches.new(7, 0.5)
    for row in read_figure3():
        h.update(int(row["timestamp"]), row["event"] == "1")
        expected = [] if row["buckets"] == "-" else [
            tuple(int(x) for x in b.split(":")) for b in row["buckets"].split()]
        got = [(newest, count) for newest, _, count in sketches.buckets(h)]
        assert got == expected, f"at ts={row['timestamp']}"
        assert h.total() == int(row["total"])
        assert h.seedEstimate() == int(row["seed_query"])
        exact = int(row["exact"])
        assert h.lowerBound() <= exact <= h.upperBound()
        assert abs(h.estimate() - exact) <= 0.5 * exact


def test_memory_is_logarithmic(sketches):
    # All ones over a window of a million: buckets <= (ceil(k/2) + 1) * (log2(N/k) + 2).
    n, window, eps = 300_000, 10**6, 0.01
    out = sketches.run(window, eps, np.arange(n), np.ones(n, dtype=bool), with_sizes=True)
    k = math.ceil(1 / eps)
    assert out[:, 4].max() <= (k // 2 + 2) * (math.log2(n / k) + 2)
    assert out[-1, 5] < 4096  # serialized bytes


def test_out_of_order_event_is_an_error(sketches):
    h = sketches.new(100, 0.1)
    h.update(10, True)
    h.update(5, False)  # a late non-event changes nothing
    h.update(95, True)
    h.update(-5, True)  # a late event already outside the window is dropped
    with pytest.raises(Exception, match="arrived after an event at ts=95"):
        h.update(90, True)
    assert h.estimate() == 2
