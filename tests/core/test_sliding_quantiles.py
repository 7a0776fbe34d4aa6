"""The percentile family's core (windowsketch.core.quantiles.SlidingQuantiles, exact mode) against a
brute-force sort of every row's window: the count and every percentage's answer on every
row, in time order and in any order, and after merges of shuffled partials
(docs/percentiles.md)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import _flags, _longs, stable_seed

PERCENTAGES = [0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 1.0]


def _doubles(values) -> bytes:
    return np.asarray(values, dtype=">f8").tobytes()


def spark_percentile(window_values, p):
    """Spark's percentile of exact values: the value at 1-based rank ceil(p n), the
    smallest for p = 0 (what percentile_approx answers while its summary holds every value),
    in Java's total order of doubles: -0.0 before 0.0, NaN last."""
    ordered = sorted(window_values, key=lambda x: (math.isnan(x), x, math.copysign(1, x)))
    return ordered[max(math.ceil(p * len(ordered)) - 1, 0)]


def exact_rows(ts, values, present, window):
    """Per row i: the non-NULL values of rows 0..i with ts in (now - window, now]."""
    out = []
    now = None
    for i in range(len(ts)):
        now = ts[i] if now is None else max(now, ts[i])
        out.append([values[j] for j in range(i + 1)
                    if present[j] and now - window < ts[j] <= now])
    return out


def stream(rng, kind, n):
    """Values and times that stress the window edge; `present` marks non-NULL values."""
    gaps = rng.integers(0, 3, n)
    if kind == "bursts":
        gaps = np.where(rng.random(n) < 0.1, rng.integers(20, 200, n), 0)
    ts = np.cumsum(gaps).astype(np.int64)
    values = {
        "heavy-tailed": rng.pareto(1.1, n) * 100,
        "many-equal": rng.integers(0, 4, n).astype(float),
        "increasing": np.arange(n, dtype=float),
        "decreasing": -np.arange(n, dtype=float),
        "bursts": rng.normal(0, 1, n),
        "signed-zeros-and-nan": rng.choice([-0.0, 0.0, 1.5, -2.0, float("nan")], n),
    }[kind]
    present = rng.random(n) >= 0.15  # NULLs
    return ts, values, present


KINDS = ["heavy-tailed", "many-equal", "increasing", "decreasing", "bursts",
         "signed-zeros-and-nan"]


def same(got, expected):
    return (math.isnan(got) and math.isnan(expected)) or (
        got == expected and math.copysign(1, got) == math.copysign(1, expected))


def check_rows(out, exact):
    for i, window_values in enumerate(exact):
        assert out[i, 0] == len(window_values), i
        for k, p in enumerate(PERCENTAGES):
            if window_values:
                assert same(out[i, 1 + k], spark_percentile(window_values, p)), (i, p)
            else:
                assert math.isnan(out[i, 1 + k]), (i, p)


def per_row(sketches, window, ts, values, present):
    packed = sketches.replay.quantilesPerRow(window, _longs(ts), _doubles(values),
                                             _flags(present), _doubles(PERCENTAGES))
    return np.frombuffer(bytes(packed), dtype=">f8").reshape(len(ts), 1 + len(PERCENTAGES))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("window", [1, 7, 60, 10**12])
def test_every_row_in_time_order_equals_the_sorted_window(sketches, kind, window):
    rng = np.random.default_rng(stable_seed("quantiles-in-order", kind, window))
    ts, values, present = stream(rng, kind, 400)
    check_rows(per_row(sketches, window, ts, values, present),
               exact_rows(ts, values, present, window))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("window", [7, 60])
def test_every_row_in_any_order_equals_the_sorted_window(sketches, kind, window):
    """Rows shuffled (an ORDER BY ts DESC frame, or rows late within a stream): every
    row's window is still exact, whether the row moves now forward, back or not at all."""
    rng = np.random.default_rng(stable_seed("quantiles-any-order", kind, window))
    ts, values, present = stream(rng, kind, 300)
    order = rng.permutation(len(ts))
    # Half the stream shuffled, then in order again: the sketch leaves and re-enters the
    # in-order path.
    order[len(order) // 2:] = np.sort(order[len(order) // 2:])
    ts, values, present = ts[order], values[order], present[order]
    check_rows(per_row(sketches, window, ts, values, present),
               exact_rows(ts, values, present, window))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("partials", [1, 3, 16])
def test_merged_partials_equal_the_sorted_window(sketches, kind, partials):
    """GROUP BY: rows shuffled into partials, each fed in its own order, folded linearly."""
    rng = np.random.default_rng(stable_seed("quantiles-merged", kind, partials))
    ts, values, present = stream(rng, kind, 500)
    parts = rng.integers(0, partials, len(ts)).astype(np.uint8)
    order = rng.permutation(len(ts))
    for window in (5, 80, 10**12):
        packed = sketches.replay.quantilesMerged(
            window, _longs(ts[order]), _doubles(values[order]), _flags(present[order]),
            bytes(parts[order]), _doubles(PERCENTAGES))
        out = np.frombuffer(bytes(packed), dtype=">f8").reshape(1, 1 + len(PERCENTAGES))
        check_rows(out, exact_rows(ts, values, present, window)[-1:])


def test_an_empty_window_answers_nan_and_counts_zero(sketches):
    out = per_row(sketches, 5, [1, 2, 100], [1.0, 2.0, 3.0], [True, True, False])
    assert out[2, 0] == 0 and all(math.isnan(x) for x in out[2, 1:])


def _sketch(sketches, ts, values, window=50, eps=0.02, microseconds=False):
    return sketches.replay.quantileSketch(window, eps, microseconds, _longs(ts), _doubles(values))


def _answers(sketches, sketch):
    return list(sketches.replay.quantilesOf(sketch, _doubles(PERCENTAGES)))


@pytest.mark.parametrize("shuffled", [False, True])
def test_bytes_round_trip_to_the_same_answers_and_bytes(sketches, shuffled):
    """Kind 4 holds the window's rows, canonically ordered: a state read back answers as
    before, writes the same bytes, and rows fed in another order write the same bytes."""
    rng = np.random.default_rng(stable_seed("quantile-bytes", shuffled))
    ts = np.sort(rng.integers(0, 400, 300))
    values = rng.choice([1.5, -0.0, 0.0, 7.25, float("nan"), 1e300], 300)
    order = rng.permutation(300) if shuffled else np.arange(300)
    sketch = _sketch(sketches, ts[order], values[order])
    data = bytes(sketches.format.serializeQuantiles(sketch))
    back = sketches.format.deserializeQuantiles(data)
    assert _answers(sketches, back) == pytest.approx(_answers(sketches, sketch), nan_ok=True)
    assert bytes(sketches.format.serializeQuantiles(back)) == data
    assert data == bytes(sketches.format.serializeQuantiles(_sketch(sketches, ts, values)))
    assert back.microsecondTime() is False and back.window() == 50 and back.eps() == 0.02
    # A state read back keeps taking rows in time order.
    back.add(int(ts[-1]) + 30, 2.0)
    sketch.add(int(ts[-1]) + 30, 2.0)
    assert _answers(sketches, back) == pytest.approx(_answers(sketches, sketch), nan_ok=True)


def _crc(body: bytes) -> bytes:
    import zlib
    return body + zlib.crc32(body).to_bytes(4, "big")


def test_damaged_or_foreign_bytes_are_refused_by_name(sketches):
    sketch = _sketch(sketches, [10, 11, 11, 40], [3.0, 1.0, 2.0, 9.0], window=50)
    data = bytes(sketches.format.serializeQuantiles(sketch))
    body = data[:-4]
    damaged = {
        "checksum mismatch": data[:-1] + bytes([data[-1] ^ 1]),
        "truncated": data[:3],
        # the row count is the byte after the 25-byte header (magic, version, kind, window
        # varint, eps, flags, now)
        "invalid row count": _crc(body[:21] + b"\xff\xff\xff\xff\x7f" + body[22:]),
        "rows out of order": _crc(_swap_equal_time_rows(body)),
        "a row lies outside the window": _crc(body[:22] + b"\x33" + body[23:]),
        "trailing bytes after the sketch": _crc(body + b"\x00"),
        r"a count sketch \(window_sketch\) is not a percentile sketch": bytes(sketches.format.serialize(sketches.dyadic(50, 0.02))),
    }
    for message, bad in damaged.items():
        with pytest.raises(Exception, match=f"invalid sketch bytes: {message}"):
            sketches.format.deserializeQuantiles(bad)
    with pytest.raises(Exception, match=r"a percentile sketch \(window_percentile_sketch\) is not a count sketch"):
        sketches.format.deserialize(data)


def _swap_equal_time_rows(body: bytes) -> bytes:
    """The rows at time 11 (values 1.0 then 2.0, newest-first order, ties by value) swapped."""
    import struct
    one, two = struct.pack(">d", 1.0), struct.pack(">d", 2.0)
    at = body.index(one)
    assert body[at + 9:at + 17] == two and body[at + 8] == 0  # step 0: the same time
    return body[:at] + two + body[at + 8:at + 9] + one + body[at + 17:]


def test_a_merge_holds_none_of_the_rows_that_left_the_window(sketches):
    """Merged-in rows outside the window are dropped at once, not kept until a query."""
    old = _sketch(sketches, list(range(100)), [float(i) for i in range(100)], window=10)
    new = _sketch(sketches, [1000, 1001], [5.0, 6.0], window=10)
    new.merge(old)
    assert new.heldCount() == 2 and _answers(sketches, new)[:2] == [2.0, 5.0]


@pytest.mark.parametrize("kind", ["uniform", "ties", "increasing", "decreasing"])
@pytest.mark.parametrize("window", [3000, 10**12])
def test_long_windows_in_time_order_through_many_blocks(sketches, kind, window):
    """Thousands of values in the window: the sorted view splits blocks, drops emptied ones
    and selects across them; every row's answers against a brute-force sorted window."""
    import bisect

    rng = np.random.default_rng(stable_seed("quantiles-blocks", kind, window))
    n = 6000
    ts = np.arange(n, dtype=np.int64)
    values = {
        "uniform": rng.random(n) * 1000,
        "ties": rng.integers(0, 7, n).astype(float),
        "increasing": np.arange(n, dtype=float),
        "decreasing": -np.arange(n, dtype=float),
    }[kind]
    out = per_row(sketches, window, ts, values, np.ones(n, dtype=bool))
    ordered: list = []
    for i in range(n):
        bisect.insort(ordered, values[i])
        if i >= window:
            ordered.pop(bisect.bisect_left(ordered, values[i - window]))
        assert out[i, 0] == len(ordered), i
        for k, p in enumerate(PERCENTAGES):
            assert out[i, 1 + k] == ordered[max(math.ceil(p * len(ordered)) - 1, 0)], (i, p)
