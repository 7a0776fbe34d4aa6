"""The percentiles' compact mode (windowsketch.core.quantiles.CompactQuantiles) against a brute-force
sort of every row's window (docs/percentiles.md, "Compact mode"): on every row of streams
that stress the window edge, in time order and shuffled, and after merges of shuffled
partials, the estimate is a value of the window whose rank is within eps n of p n and
within the bound the state computes; the bounds bracket the exact percentile; the count's
range holds the window's."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import _flags, _longs, stable_seed
from test_sliding_quantiles import KINDS, PERCENTAGES, _doubles, stream

# ln(2 / delta) for the estimate's statement: each of its two fixed points is off by more
# than sqrt(2 V ln(2 / delta)) with probability at most delta = 10^-4.
LOG_TWO_OVER_DELTA = math.log(2 / 1e-4)
WIDTH = 4 + 5 * len(PERCENTAGES)
# sqrt(2 ln(2 / 10^-4) / 45): Delta over eps n_L that the variance budgets allow, under 2/3.
BUDGETED_DELTA = math.sqrt(2 * LOG_TWO_OVER_DELTA / 45)
# The bounds' slack D = ceil(sqrt(2 V ln(2 * 10^9))): each bound fails with probability at
# most 5 * 10^-10 (docs/percentiles.md, "Bounds").
LOG_TWO_BILLION = math.log(2e9)


def compact(sketches, window, eps, ts, values, present, parts, every_row, pending_per_node=1):
    packed = sketches.replay.compactQuantiles(
        window, float(eps), _longs(ts), _doubles(values), _flags(present),
        np.asarray(parts, dtype=np.uint8).tobytes(), _doubles(PERCENTAGES), every_row,
        pending_per_node)
    return np.frombuffer(bytes(packed), dtype=">f8").reshape(-1, WIDTH)


def java_keys(values) -> np.ndarray:
    """int64 keys in java.lang.Double.compare order: -0.0 before 0.0, every NaN last."""
    v = np.asarray(values, dtype=np.float64)
    bits = np.where(np.isnan(v), np.nan, v).view(np.int64)
    return np.where(bits >= 0, bits, bits ^ np.int64(0x7FFFFFFFFFFFFFFF))


PERCENTS = np.asarray(PERCENTAGES)


def check_answer(row, window_values, eps) -> float:
    """Asserts one answer, every percentage at once; returns its worst rank error over eps n."""
    inside, straddling, spread, variance = row[:4]
    n = len(window_values)
    assert inside <= n <= inside + straddling
    assert straddling <= eps / 3 * inside  # (I) at the window's start
    answers = row[4:].reshape(-1, 5)  # estimate, lower, has lower, upper, has upper
    if n == 0:
        assert np.isnan(answers[:, 0]).all()
        return 0.0
    delta = math.sqrt(2 * variance * LOG_TWO_OVER_DELTA)
    # Step 4: the nodes' variance budgets sum to at most eps^2 n_L^2 / 45 (proved).
    assert delta <= BUDGETED_DELTA * eps * inside, (delta, inside)
    keys = np.sort(java_keys(window_values))
    stated = straddling + delta + 1
    estimates = java_keys(answers[:, 0])
    below = np.searchsorted(keys, estimates, "left")
    at_most = np.searchsorted(keys, estimates, "right")
    assert (at_most > below).all(), answers[:, 0]  # values of the window
    error = np.maximum(0.0, np.maximum(below - PERCENTS * n, PERCENTS * n - at_most))
    assert (error <= eps * n).all(), (error, n)
    assert (error <= stated).all(), (error, stated)
    assert (error <= straddling + spread + 1).all(), error  # the certain bound
    exact = keys[np.maximum(np.ceil(PERCENTS * n).astype(np.int64) - 1, 0)]
    check_bounds(keys, exact, inside, straddling, variance, answers)
    return float(error.max() / (eps * n))


def check_bounds(keys, exact, inside, straddling, variance, answers):
    """The bounds of every percentage p against the sorted window `keys`: true, present
    exactly when the rule gives one, and tight. Lower is the largest held v with
    W(< v) + D + n_X < t, so the next held value has W(< next) = W(<= v) >= t - D - n_X, and
    count(<= v) >= t - 2 D - n_X; upper is the smallest held u with W(<= u) - D >= h, so
    count(< u) < h + 2 D + n_X (W within D of the count, as the bounds themselves assume)."""
    slack = math.ceil(math.sqrt(2 * variance * LOG_TWO_BILLION))
    t = np.maximum(1, np.ceil(PERCENTS * inside))
    highest = np.maximum(1, np.ceil(PERCENTS * (inside + straddling)))
    has_lower, has_upper = answers[:, 2] != 0, answers[:, 4] != 0
    assert (has_lower == (t - slack - straddling >= 1)).all(), (t, slack, straddling)
    assert (has_upper == (inside >= highest + slack)).all(), (inside, highest, slack)
    for held, column, side, rank_ok in (
            (has_lower, 1, "right", lambda rank: rank >= t - 2 * slack - straddling),
            (has_upper, 3, "left", lambda rank: rank < highest + 2 * slack + straddling)):
        bound = java_keys(answers[:, column])
        at = np.searchsorted(keys, bound, "left")
        in_window = keys[np.minimum(at, len(keys) - 1)] == bound
        assert in_window[held].all(), answers[held, column]
        assert ((bound <= exact) if column == 1 else (bound >= exact))[held].all(), column
        assert rank_ok(np.searchsorted(keys, bound, side))[held].all(), answers[held, column]


def windows_per_row(ts, values, present, window):
    now = None
    for i in range(len(ts)):
        now = ts[i] if now is None else max(now, ts[i])
        seen = slice(0, i + 1)
        inside = present[seen] & (ts[seen] > now - window) & (ts[seen] <= now)
        yield values[seen][inside]


# A running frame's sketch waits for 4 pending leaves a node (InMemoryPendingPerNode).
ORDERS = {"in-order": 1, "shuffled": 1, "in-order-running-frame": 4}


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("window", [7, 60, 500, 10**9])
@pytest.mark.parametrize("kind", KINDS)
def test_every_row_is_within_eps_of_the_sorted_window(sketches, kind, window, order):
    """eps 0.1 keeps summaries small (capacity 8 inside, 120 at a leaf), so 2,500 rows
    compact many times; windows of 7, 60 and 500 positions slide, 10^9 does not."""
    eps = 0.1
    rng = np.random.default_rng(stable_seed(kind, window, order))
    ts, values, present = stream(rng, kind, 2500)
    if order == "shuffled":
        perm = rng.permutation(len(ts))
        ts, values, present = ts[perm], values[perm], present[perm]
    out = compact(sketches, window, eps, ts, values, present, np.zeros(len(ts)), True, ORDERS[order])
    worst = max(check_answer(out[i], w, eps)
                for i, w in enumerate(windows_per_row(ts, values, present, window)))
    assert worst <= 1.0


@pytest.mark.parametrize("pending_per_node", [1, 4])
@pytest.mark.parametrize("window", [40, 3000, 10**9])
@pytest.mark.parametrize("kind", KINDS)
def test_a_running_frames_view_answers_as_a_full_sort(sketches, kind, window, pending_per_node):
    """In time order (a running frame) answers come from a sorted view of the compressed
    nodes plus the pending leaves' sorted values: on every row every field equals the answer
    a sort of every held value gives, through compresses, nodes leaving the window, bursts
    whose leaf compacts (then the sort is used) and rows behind now."""
    rng = np.random.default_rng(stable_seed("view", kind, window))
    ts, values, present = stream(rng, kind, 6000)
    late = rng.random(len(ts)) < 0.001  # a few rows behind now
    ts = np.where(late, np.maximum(ts - 5, 0), ts)
    assert sketches.replay.compactViewDisagreements(
        window, 0.05, pending_per_node, _longs(ts), _doubles(values), _flags(present), _doubles(PERCENTAGES)) == 0


@pytest.mark.parametrize("parts", [3, 16])
@pytest.mark.parametrize("window", [60, 2000])
@pytest.mark.parametrize("kind", ["heavy-tailed", "increasing", "bursts", "many-equal"])
def test_merged_partials_are_within_eps_of_the_sorted_window(sketches, kind, window, parts):
    """Shuffled rows split into partials, each fed in its order, folded as Spark merges
    partial aggregates: the answer over the merged window, at five prefixes."""
    eps = 0.05
    rng = np.random.default_rng(parts * 1000 + window)
    ts, values, present = stream(rng, kind, 6000)
    perm = rng.permutation(len(ts))
    ts, values, present = ts[perm], values[perm], present[perm]
    assignment = rng.integers(0, parts, len(ts))
    for cut in np.linspace(len(ts) // 5, len(ts), 5).astype(int):
        out = compact(sketches, window, eps, ts[:cut], values[:cut], present[:cut],
                      assignment[:cut], False)
        now = ts[:cut].max()
        inside = present[:cut] & (ts[:cut] > now - window)
        assert check_answer(out[0], values[:cut][inside], eps) <= 1.0


@pytest.mark.parametrize("kind", ["heavy-tailed", "increasing", "bursts", "signed-zeros-and-nan"])
def test_sub_windows_of_merged_partials_are_within_eps_of_their_rows(sketches, kind):
    """A sketch column's sub-windows: the window (end - length, end] for ends from now on and
    lengths up to the sketch's window (CompactQuantiles.answerAt), each answer against the
    sorted rows of exactly that window, as every other answer is checked (the proof fixes
    any query window whose rows the sketch holds)."""
    eps, window = 0.1, 2000
    rng = np.random.default_rng(stable_seed("sub-windows", kind))
    ts, values, present = stream(rng, kind, 6000)
    perm = rng.permutation(len(ts))
    ts, values, present = ts[perm], values[perm], present[perm]
    now = int(ts.max())
    pairs = [(now + after, length) for after in (0, 1, 90, 1999)
             for length in (1, 25, 300, 1200, window) if after < length or length == 1]
    packed = sketches.replay.compactSubWindows(
        window, eps, _longs(ts), _doubles(values), _flags(present),
        rng.integers(0, 3, len(ts)).astype(np.uint8).tobytes(), _doubles(PERCENTAGES),
        _longs([e for e, _ in pairs]), _longs([length for _, length in pairs]))
    out = np.frombuffer(bytes(packed), dtype=">f8").reshape(-1, WIDTH)
    straddled = 0
    for row, (end, length) in zip(out, pairs):
        inside = present & (ts > end - length) & (ts <= end)
        assert check_answer(row, values[inside], eps) <= 1.0, (end, length)
        straddled += row[1] > 0
    # Windows that cut nodes; a burst stream's few timestamps sit in leaves of their own.
    assert straddled >= 3 or kind == "bursts"


def test_the_state_stays_small_while_the_window_grows(sketches):
    """In-order rows with a window as long as the stream: the values held grow with the
    log of the window, not with it (10^6 rows hold under 55,000 values at eps 0.01), and
    the inside variance keeps the stated bound within the budgets' 0.664 eps n."""
    sizes = {}
    for rows in (10**5, 10**6):
        held, nodes, inside, straddling, variance, size = list(
            sketches.replay.compactState(rows, 0.01, rows, False))
        assert 8 * held < size < 8 * held + 16 * nodes + 64
        assert inside == rows and straddling == 0
        assert math.sqrt(2 * variance * LOG_TWO_OVER_DELTA) <= BUDGETED_DELTA * 0.01 * rows
        sizes[rows] = held
    assert sizes[10**6] < 55_000 and sizes[10**6] < 2 * sizes[10**5]


@pytest.mark.parametrize("values", ["uniform", "increasing"])
def test_a_burst_at_one_timestamp_is_within_eps(sketches, values):
    """10^5 rows at one timestamp are one leaf: its summary alone meets the bound, so its
    capacity is sized for the whole window, and its coins are fair (always keeping the
    first of each pair drifts every rank down by half the spread)."""
    eps, n = 0.01, 10**5
    rng = np.random.default_rng(stable_seed("burst", values))
    x = rng.random(n) if values == "uniform" else np.arange(n, dtype=float)
    out = compact(sketches, 10, eps, np.zeros(n, dtype=np.int64), x, np.ones(n, dtype=bool),
                  np.zeros(n), False)
    assert out[0, 0] == n and out[0, 1] == 0
    assert check_answer(out[0], x, eps) <= 0.5


def test_the_answering_view_counts_past_2_31_rows(spark):
    """The view a running frame answers from keeps its prefix sums in ints while its weight
    stays below 2^31 and in longs past it: selections over weights near and past 2^31, and
    as weight-1 rows carry the total across 2^31 one at a time, equal the weighted sort's."""
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway

    def java_array(kind, items):
        array = gateway.new_array(kind, len(items))
        for i, item in enumerate(items):
            array[i] = item
        return array

    ps = [0.0, 1e-9, 0.1, 0.5, 0.75, 0.999999, 1.0]

    def check(view, held):
        total = sum(held.values())
        assert view.total() == total
        answer = view.answer(java_array(jvm.double, ps), total, 0, 0, 0.0, False)
        ordered = sorted(held.items())
        for p, estimate in zip(ps, list(answer.estimates())):
            target, reached = max(1, math.ceil(p * total)), 0
            for value, weight in ordered:
                reached += weight
                if reached >= target:
                    break
            assert estimate == value, (p, total, estimate, value)

    values = [1.0, 2.0, 3.0, 4.0]
    for weights in ([2**31 - 6, 1, 1, 1], [2**31, 5, 2**30, 7]):
        view = jvm.windowsketch.core.quantiles.WeightedValues(
            java_array(jvm.double, values), java_array(jvm.long, weights))
        held = dict(zip(values, weights))
        check(view, held)
        for extra in [2.5, 0.5, 2.5, 5.0, 1.0, 3.5]:
            view.addExtra(extra)
            held[extra] = held.get(extra, 0) + 1
            check(view, held)
        view.subtract(1.0, 2**30)
        held[1.0] -= 2**30
        check(view, held)
