"""approx_window_percentile in SQL against a brute force on every output: each row's frame
(or each group's rows) comes from Spark's own collect_list over the same frame, the window
is cut from it in Python and sorted, and the answer must be the value at rank
ceil(p n) -- percentile_approx's definition -- in running, sliding, whole-partition and
descending frames and in GROUP BY over shuffled partitions; then types, NULLs and errors."""
from __future__ import annotations

import datetime
import decimal
import json
import math
import os

import numpy as np
import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from conftest import error_condition, parameter_index, stable_seed
from golden_sketches import GOLDEN, golden_percentile_values, golden_rows, micros_of_pos
from windowsketch.functions import approx_window_percentile
from windowsketch.sketch import PercentileSketch

PERCENTAGES = [0.0, 0.01, 0.5, 0.9, 0.99, 1.0]
P_SQL = "array(" + ", ".join(str(p) for p in PERCENTAGES) + ")"


def exact_percentiles(values, percentages=PERCENTAGES):
    """percentile_approx's answer over exactly these values (None for none)."""
    if not values:
        return None
    ordered = sorted(values)
    return [ordered[max(math.ceil(p * len(ordered)) - 1, 0)] for p in percentages]


def window_of(frame, window, temporal=False):
    """The non-NULL x of a frame's (ts, x) rows inside the window ending at its largest ts:
    (now - window, now] positions, [now - window, now] for timestamps."""
    times = [r["ts"] for r in frame if r["ts"] is not None]
    if not times:
        return []
    now = max(times)
    inside = ((lambda t: now - window <= t <= now) if temporal
              else (lambda t: now - window < t <= now))
    return [r["x"] for r in frame if r["ts"] is not None and r["x"] is not None and inside(r["ts"])]


def rows(rng, kind, n):
    """(id, key, ts, x) rows that stress the window edge: bursts of equal ts, gaps,
    heavy tails, ties, monotone runs, NULL values and NULL times."""
    ts = np.cumsum(np.where(rng.random(n) < 0.1, rng.integers(10, 60, n),
                            rng.integers(0, 3, n)))
    x = {
        "heavy-tailed": np.round(rng.pareto(1.2, n) * 50, 3),
        "ties": rng.integers(0, 5, n).astype(float),
        "increasing": np.arange(n, dtype=float),
        "decreasing": -np.arange(n, dtype=float),
    }[kind]
    out = []
    for i in range(n):
        value = None if rng.random() < 0.1 else float(x[i])
        time = None if rng.random() < 0.02 else int(ts[i])
        out.append((i, f"k{i % 3}", time, value))
    return out


KINDS = ["heavy-tailed", "ties", "increasing", "decreasing"]
FRAMES = {
    "running-range": "PARTITION BY key ORDER BY ts",
    "running-rows": "PARTITION BY key ORDER BY ts, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "sliding-rows": "PARTITION BY key ORDER BY ts, id ROWS BETWEEN 25 PRECEDING AND CURRENT ROW",
    "whole-partition": "PARTITION BY key",
    "descending": "PARTITION BY key ORDER BY ts DESC, id",
}


@pytest.mark.parametrize("frame", sorted(FRAMES))
@pytest.mark.parametrize("kind", KINDS)
def test_every_row_equals_the_sorted_window_in_every_frame(spark, kind, frame):
    rng = np.random.default_rng(stable_seed("percentile-frames", kind, frame))
    window = 40
    spark.createDataFrame(rows(rng, kind, 600), "id INT, key STRING, ts BIGINT, x DOUBLE") \
        .repartition(3).createOrReplaceTempView("pct_rows")
    over = FRAMES[frame]
    got = spark.sql(f"""
        SELECT approx_window_percentile(x, ts, {window}, {P_SQL}) OVER ({over}) AS ours,
               collect_list(struct(ts, x)) OVER ({over}) AS frame
        FROM pct_rows""").collect()
    checked = 0
    for r in got:
        expected = exact_percentiles(window_of(r.frame, window))
        assert r.ours == expected, (r.frame, r.ours, expected)
        checked += expected is not None
    assert checked > 500


@pytest.mark.parametrize("kind", KINDS)
def test_group_by_over_shuffled_partitions_equals_the_sorted_window(spark, kind):
    rng = np.random.default_rng(stable_seed("percentile-group-by", kind))
    data = [(i, f"g{int(rng.integers(0, 40))}", t, x) for i, _, t, x in rows(rng, kind, 3000)]
    df = spark.createDataFrame(data, "id INT, key STRING, ts BIGINT, x DOUBLE")
    got = (df.repartition(7, "id").groupBy("key")
           .agg(approx_window_percentile("x", "ts", 150, PERCENTAGES).alias("ours"),
                approx_window_percentile("x", "ts", 150, 0.5).alias("median"),
                F.collect_list(F.struct("ts", "x")).alias("frame"))
           .collect())
    assert len(got) == 40
    for r in got:
        expected = exact_percentiles(window_of(r.frame, 150))
        assert r.ours == expected, r.key
        assert r.median == (None if expected is None else expected[2]), r.key


def rank_error(values, answer, p):
    """How far the answer's rank range among `values` lies from p n."""
    ordered = sorted(values)
    below = sum(1 for v in ordered if v < answer)
    at_most = below + ordered.count(answer)
    assert at_most > below, answer  # a value of the window
    return max(0.0, below - p * len(ordered), p * len(ordered) - at_most)


# Frames whose windows pass the exact limit (512 values at eps 0.1): the sliding one holds
# 701 rows.
COMPACT_FRAMES = {**FRAMES, "sliding-rows": "PARTITION BY key ORDER BY ts, id ROWS BETWEEN "
                                            "700 PRECEDING AND CURRENT ROW"}


def frames_within_eps(spark, seed, kind, over, eps, rows_count, limit):
    """Runs approx_window_percentile over frame `over` on `rows_count` rows of `kind` and
    checks every row: each answer is a value of its window within eps n of p n (the window,
    10^6 positions, holds every row of the frame with a time: the frame's x). Returns how
    many rows' windows held more than `limit` values."""
    rng = np.random.default_rng(stable_seed(seed, kind, over))
    spark.createDataFrame(rows(rng, kind, rows_count), "id INT, key STRING, ts BIGINT, x DOUBLE") \
        .repartition(3).createOrReplaceTempView("pct_frame_rows")
    got = spark.sql(f"""
        SELECT approx_window_percentile(x, ts, 1000000, {P_SQL}, {eps}) OVER ({over}) AS ours,
               collect_list(CASE WHEN ts IS NOT NULL THEN x END) OVER ({over}) AS frame
        FROM pct_frame_rows""").collect()
    past = 0
    checked = set()
    for r in got:
        values = np.sort(np.array(r.frame, dtype=float))
        if not len(values):
            assert r.ours is None
            continue
        past += len(values) > limit
        seen = (len(values), float(values.sum()), tuple(r.ours))  # a whole partition's rows repeat
        if seen in checked:
            continue
        checked.add(seen)
        n = len(values)
        for p, answer in zip(PERCENTAGES, r.ours):
            below = np.searchsorted(values, answer, "left")
            at_most = np.searchsorted(values, answer, "right")
            assert at_most > below, (over, p)  # a value of the window
            assert max(0.0, below - p * n, p * n - at_most) <= eps * n, (over, p, n)
    return past


@pytest.mark.parametrize("frame", sorted(COMPACT_FRAMES))
@pytest.mark.parametrize("kind", KINDS)
def test_windows_past_the_exact_limit_are_within_eps_in_every_frame(spark, kind, frame):
    """Every row of every frame kind, windows of up to 700 values at eps 0.1 (exact limit
    512): each answer is a value of its window within eps n of p n, compact or not, and
    many windows are past the limit."""
    past = frames_within_eps(spark, "percentile-compact-frames", kind, COMPACT_FRAMES[frame],
                             0.1, 2100, 512)
    assert past > 300, past


@pytest.mark.parametrize("kind", KINDS)
def test_running_frames_past_their_own_limit_are_within_eps_on_every_row(spark, kind):
    """Past a running frame's exact limit (512 values at eps 0.5) its window turns compact
    and is answered from the view, compressing once 4 pending leaves a node wait: every row
    of windows of up to about 1,100 values is a value of its window within eps n of p n.
    (A ROWS frame runs the same aggregate: test_running_frames_stay_exact_to_their_own_limit.)"""
    past = frames_within_eps(spark, "percentile-running-compact", kind, FRAMES["running-range"],
                             0.5, 3600, 512)
    assert past > 1000, past


@pytest.mark.parametrize("frame", ["running-range", "running-rows"])
def test_running_frames_stay_exact_to_their_own_limit(spark, frame):
    """A running frame's window is held only in memory, so it stays exact while its heap is
    below the compact mode's: at eps 0.1 up to 2,048 values (a written sketch: 512). Every
    row of windows of up to about 1,800 values equals the sorted window; the same rows'
    GROUP BY partials travel compact."""
    eps = 0.1
    rng = np.random.default_rng(stable_seed("percentile-running-exact", frame))
    spark.createDataFrame(rows(rng, "heavy-tailed", 5400), "id INT, key STRING, ts BIGINT, x DOUBLE") \
        .repartition(3).createOrReplaceTempView("pct_running_rows")
    over = FRAMES[frame]
    got = spark.sql(f"""
        SELECT approx_window_percentile(x, ts, 1000000, {P_SQL}, {eps}) OVER ({over}) AS ours,
               collect_list(CASE WHEN ts IS NOT NULL THEN x END) OVER ({over}) AS frame
        FROM pct_running_rows""").collect()
    largest = 0
    for r in got:
        values = sorted(r.frame)
        expected = [values[max(math.ceil(p * len(values)) - 1, 0)] for p in PERCENTAGES] if values else None
        assert r.ours == expected, len(values)
        largest = max(largest, len(values))
    assert 1500 < largest <= 2048, largest
    kinds = spark.sql(f"SELECT key, window_percentile_sketch(x, ts, 1000000, {eps}) AS s "
                      "FROM pct_running_rows GROUP BY key").collect()
    assert [bytes(r.s)[2] for r in kinds] == [8, 8, 8]


@pytest.mark.parametrize("window", [20000, 10**6])
@pytest.mark.parametrize("kind", KINDS)
def test_group_by_in_compact_mode_is_within_eps_of_the_sorted_window(spark, kind, window):
    """Partial aggregates of more than the exact limit (256 values at eps 0.2) travel in
    the compact form and merge as summaries: every key's answer is a value of its window
    within eps n of p n, and the bounds bracket the exact percentile (or are NULL: no held
    value meets the rank the bracket needs)."""
    eps = 0.2
    rng = np.random.default_rng(stable_seed("percentile-compact-group-by", kind, window))
    df = spark.createDataFrame(rows(rng, kind, 18000), "id INT, key STRING, ts BIGINT, x DOUBLE")
    got = (df.repartition(2, "id").groupBy("key")
           .agg(approx_window_percentile("x", "ts", window, PERCENTAGES, eps).alias("ours"),
                F.expr(f"approx_window_percentile_bounds(x, ts, {window}, {P_SQL}, {eps})")
                .alias("bounds"),
                F.expr(f"window_percentile_sketch(x, ts, {window}, {eps})").alias("sketch"),
                F.collect_list(F.struct("ts", "x")).alias("frame"))
           .collect())
    assert len(got) == 3
    for r in got:
        assert bytes(r.sketch)[2] == 8  # the compact kind
        values = window_of(r.frame, window)
        exact = exact_percentiles(values)
        for p, answer, bounds, truth in zip(PERCENTAGES, r.ours, r.bounds, exact):
            assert rank_error(values, answer, p) <= eps * len(values), (r.key, p)
            assert bounds.estimate == answer
            assert bounds.lower is None or bounds.lower <= truth, (r.key, p)
            assert bounds.upper is None or truth <= bounds.upper, (r.key, p)
        # At eps 0.2 the summaries are small: one side of a tail percentage can be unknown.
        median = r.bounds[PERCENTAGES.index(0.5)]
        assert median.lower is not None and median.upper is not None, r.key
        assert all(b.lower is not None or b.upper is not None for b in r.bounds), r.key


def test_timestamp_windows_are_inclusive_and_types_come_back(spark):
    base = datetime.datetime(2025, 1, 1, 10, 0)
    data = [(base + datetime.timedelta(minutes=m), ms, datetime.date(2025, 1, 1 + m % 20),
             decimal.Decimal(ms) / 4, float(ms) / 8)
            for m, ms in [(0, 12), (4, 90), (5, 15), (9, 7), (10, 30), (16, 44)]]
    df = spark.createDataFrame(
        data, "ts TIMESTAMP, ms INT, d DATE, price DECIMAL(10,2), f FLOAT")
    got = df.select(
        "ts",
        approx_window_percentile("ms", "ts", "5 minutes", 0.5).over(
            Window.orderBy("ts")).alias("p50"),
        approx_window_percentile("d", "ts", datetime.timedelta(minutes=5), 1.0).over(
            Window.orderBy("ts")).alias("d_max"),
        approx_window_percentile("price", "ts", "5 minutes", 0.0).over(
            Window.orderBy("ts")).alias("price_min"),
        approx_window_percentile("f", "ts", "5 minutes", [0.5]).over(
            Window.orderBy("ts")).alias("f_p50"),
    ).collect()
    # [now - 5 min, now]: at 10:05 the row of 10:00 is still in, at 10:09 it is not.
    assert [r.p50 for r in got] == [12, 12, 15, 15, 15, 44]
    assert isinstance(got[0].p50, int) and isinstance(got[0].d_max, datetime.date)
    assert [r.d_max for r in got] == [datetime.date(2025, 1, 1), datetime.date(2025, 1, 5),
                                      datetime.date(2025, 1, 6), datetime.date(2025, 1, 10),
                                      datetime.date(2025, 1, 11), datetime.date(2025, 1, 17)]
    assert [r.price_min for r in got] == [decimal.Decimal(x) for x in
                                          ("3.00", "3.00", "3.00", "1.75", "1.75", "11.00")]
    assert [r.f_p50 for r in got] == [[1.5], [1.5], [1.875], [1.875], [1.875], [5.5]]


def test_timestamps_and_every_integer_width_come_back_as_their_type(spark):
    """TIMESTAMP, TIMESTAMP_NTZ, BIGINT, SMALLINT and TINYINT values: the window's minimum
    and maximum, in a running frame (the last 3 positions) and in GROUP BY, each as a value
    of its own type."""
    base = datetime.datetime(2025, 1, 1, 10, 0)
    rows = [(1, 40, 2**40 + 5, -300, -7), (2, 10, 2**40 - 9, 1200, 100), (3, 25, -(2**40), 5, -128),
            (4, 55, 3, -32768, 127), (5, 0, 2**40 + 5, 32767, 0)]
    values = ", ".join(
        f"({ts}, TIMESTAMP'{base + datetime.timedelta(minutes=m)}', "
        f"TIMESTAMP_NTZ'{base + datetime.timedelta(minutes=m)}', {big}L, {small}S, {tiny}Y)"
        for ts, m, big, small, tiny in rows)
    columns = ("t", "ntz", "big", "small", "tiny")
    picks = ", ".join(f"approx_window_percentile({c}, ts, 3, array(0.0, 1.0)) OVER (ORDER BY ts) "
                      f"AS {c}" for c in columns)
    got = spark.sql(f"SELECT ts, {picks} FROM VALUES {values} AS v(ts, {', '.join(columns)}) "
                    "ORDER BY ts").collect()
    minute = lambda m: base + datetime.timedelta(minutes=m)  # noqa: E731
    # Each column's field of `rows` and its Python type.
    typed = {"t": (1, minute), "ntz": (1, minute), "big": (2, int), "small": (3, int),
             "tiny": (4, int)}

    def held(column, window):
        field, kind = typed[column]
        return sorted(kind(row[field]) for row in window)

    for i, r in enumerate(got):
        window = rows[max(0, i - 2): i + 1]
        for column in columns:
            ordered = held(column, window)
            assert r[column] == [ordered[0], ordered[-1]], (column, r.ts)
            assert all(type(v) is type(ordered[0]) for v in r[column]), (column, r[column])
    extremes = ", ".join(f"approx_window_percentile({c}, ts, 100, array(0.0, 1.0)) AS {c}"
                         for c in columns)
    grouped = spark.sql(
        f"SELECT {extremes} FROM (SELECT /*+ REPARTITION(3) */ * "
        f"FROM VALUES {values} AS v(ts, {', '.join(columns)}))").collect()[0]
    for column in columns:
        ordered = held(column, rows)
        assert grouped[column] == [ordered[0], ordered[-1]], column


def test_intervals_and_an_empty_window(spark):
    got = spark.sql("""
        SELECT ts,
               approx_window_percentile(i, ts, 2, 0.5) OVER (ORDER BY ts) AS day_time,
               CAST(approx_window_percentile(m, ts, 2, 1.0) OVER (ORDER BY ts) AS STRING)
                 AS year_month,
               approx_window_percentile(CAST(NULL AS DOUBLE), ts, 2, 0.5) OVER (ORDER BY ts) AS none
        FROM VALUES (1, INTERVAL 3 DAYS, INTERVAL 1 MONTH),
                    (2, INTERVAL 1 DAY, INTERVAL 5 MONTHS),
                    (3, NULL, NULL), (4, NULL, NULL) AS t(ts, i, m)""").collect()
    assert [r.day_time for r in got] == [datetime.timedelta(days=3), datetime.timedelta(days=1),
                                         datetime.timedelta(days=1), None]
    assert [r.none for r in got] == [None] * 4
    assert [r.year_month for r in got] == ["INTERVAL '1' MONTH", "INTERVAL '5' MONTH",
                                           "INTERVAL '5' MONTH", None]


@pytest.mark.parametrize("expression, condition, parameter", [
    ("approx_window_percentile(x, ts, 3, 1.5)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`percentage`"),
    ("approx_window_percentile(x, ts, 3, array(0.5, -0.1))", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`percentage`"),
    ("approx_window_percentile(x, ts, 3, x)", "DATATYPE_MISMATCH.NON_FOLDABLE_INPUT", "`percentage`"),
    ("approx_window_percentile(x, ts, 3, CAST(NULL AS DOUBLE))", "DATATYPE_MISMATCH.UNEXPECTED_NULL", "`percentage`"),
    ("approx_window_percentile(x, ts, 3, array(0.5, NULL))", "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT", "`percentage`"),
    ("approx_window_percentile(x, ts, 3, 'median')", "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT", "`percentage`"),
    ("approx_window_percentile(x, ts, 3, 0.5, 0)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`eps`"),
    ("approx_window_percentile(x, ts, 0, 0.5)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`window`"),
    ("approx_window_percentile(x, ts, INTERVAL 1 MINUTE, 0.5)", "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT", "`window`"),
    ("approx_window_percentile('slow', ts, 3, 0.5)", "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE",
     "requires the (\"NUMERIC\""),
    ("approx_window_percentile(x, ts, 3)", "WRONG_NUM_ARGS.WITHOUT_SUGGESTION", "approx_window_percentile"),
])
def test_bad_arguments_are_named(spark, expression, condition, parameter):
    with pytest.raises(Exception) as raised:
        spark.sql(f"SELECT {expression} FROM VALUES (1.0, 1) AS t(x, ts)").collect()
    assert error_condition(raised.value) == condition
    assert parameter in str(raised.value)
    if condition.endswith("UNEXPECTED_INPUT_TYPE"):
        assert raised.value.getMessageParameters()["paramIndex"] == parameter_index(0)


def test_python_arguments_are_checked_before_spark_sees_them():
    for bad in ("p50", [], [0.5, "0.9"], True):
        with pytest.raises(TypeError, match="`percentage`"):
            approx_window_percentile("x", "ts", 3, bad)


# Golden percentile sketches (format kinds 4 and 8), read and rewritten on every line: old
# bytes keep reading. `python tests/spark/test_percentiles.py` rewrites them; the tests
# never do.
PERCENTILE_GOLDEN = os.path.join(GOLDEN, "percentile")
# Compact sketches (the same format, kind 8) written before the nodes' variance budgets
# (legacy_compact_*), and before the exact limit held in memory, when a window past it was
# replayed into the compact form as it was written (legacy_replayed_compact_*): they read
# and answer as recorded; a rewrite compacts them to today's capacities, the same bytes
# from the JVM and the Python reader.
LEGACY_PERCENTILE = ["legacy_compact_merged", "legacy_compact_time",
                     "legacy_replayed_compact_merged", "legacy_replayed_compact_time"]


def golden_percentile_bytes(spark) -> dict[str, bytes]:
    """name -> bytes, from the golden rows: values with ties, -0.0 and NaN; a time sketch,
    a positions sketch merged from two keys' partials, and an empty one (exact, kind 4);
    past the exact limit (256 values at eps 0.2), a compact time sketch and two keys'
    compact sketches read back and merged (kind 8)."""
    from windowsketch import _scala_object

    replay = _scala_object(spark, "windowsketch.core.Replay")
    fmt = _scala_object(spark, "windowsketch.core.SketchFormat")
    keys, pos, _ = golden_rows()
    values = golden_percentile_values(pos)

    def sketch(window, eps, micros, rows):
        ts = [micros_of_pos(p) for p in pos[rows]] if micros else pos[rows]
        return replay.quantileSketch(window, eps, micros, np.asarray(ts, dtype=">i8").tobytes(),
                                     np.asarray(values[rows], dtype=">f8").tobytes())

    merged = sketch(1000, 0.05, False, keys == 1)
    merged.merge(sketch(1000, 0.05, False, keys == 2))

    def read_back(rows):
        return fmt.deserializeQuantiles(fmt.serializeQuantiles(sketch(10**5, 0.2, False, rows)))

    compact_merged = read_back(keys == 1)
    compact_merged.merge(read_back(keys == 2))
    return {
        "time": bytes(fmt.serializeQuantiles(sketch(86_400_000_001, 0.01, True, keys >= 0))),
        "positions_merged": bytes(fmt.serializeQuantiles(merged)),
        "empty": bytes(fmt.serializeQuantiles(sketch(10, 0.01, False, keys < 0))),
        "compact_time": bytes(fmt.serializeQuantiles(
            sketch(86_400_000_001, 0.2, True, keys >= 0))),
        "compact_merged": bytes(fmt.serializeQuantiles(compact_merged)),
    }


def golden_percentile_answers(spark, data: bytes) -> list:
    from windowsketch import _scala_object

    replay = _scala_object(spark, "windowsketch.core.Replay")
    sketch = _scala_object(spark, "windowsketch.core.SketchFormat").deserializeQuantiles(data)
    return [None if math.isnan(x) else x for x in replay.quantilesOf(
        sketch, np.asarray(PERCENTAGES, dtype=">f8").tobytes())]


def test_golden_percentile_sketches_read_answer_and_rewrite_as_recorded(spark):
    with open(os.path.join(PERCENTILE_GOLDEN, "answers.json")) as f:
        recorded = json.load(f)
    written = golden_percentile_bytes(spark)
    assert sorted(recorded["sketches"]) == sorted([*written, *LEGACY_PERCENTILE]) == sorted(
        f[:-4] for f in os.listdir(PERCENTILE_GOLDEN) if f.endswith(".bin"))
    for name in [*written, *LEGACY_PERCENTILE]:
        with open(os.path.join(PERCENTILE_GOLDEN, f"{name}.bin"), "rb") as f:
            stored = f.read()
        assert golden_percentile_answers(spark, stored) == recorded["sketches"][name], name
        if name in written:
            assert written[name] == stored, name
        else:
            from windowsketch import _scala_object

            fmt = _scala_object(spark, "windowsketch.core.SketchFormat")
            rewritten = bytes(fmt.serializeQuantiles(fmt.deserializeQuantiles(stored)))
            assert data_kind(rewritten) == 8
            assert rewritten == PercentileSketch.from_bytes(stored).to_bytes(), name
    # The answers are the sorted window's (count, then each percentage), not just stable.
    keys, pos, _ = golden_rows()
    values = golden_percentile_values(pos)
    for name, inside in [("time", pos >= pos.max() - 86_400 // 30),
                         ("positions_merged", (keys > 0) & (pos > pos[keys > 0].max() - 1000))]:
        window = sorted(values[inside], key=lambda x: (math.isnan(x), x, math.copysign(1, x)))
        expected = [float(len(window))] + [
            None if math.isnan(v) else v
            for v in (window[max(math.ceil(p * len(window)) - 1, 0)] for p in PERCENTAGES)]
        assert recorded["sketches"][name] == expected, name
    assert recorded["sketches"]["empty"] == [0] + [None] * len(PERCENTAGES)
    # The compact ones (eps 0.2): each answer's rank within eps n of p n.
    for name, inside in [("compact_time", pos >= pos.max() - 86_400 // 30),
                         ("compact_merged", keys > 0)]:
        assert data_kind(written[name]) == 8, name
        window = sorted(values[inside], key=lambda x: (math.isnan(x), x, math.copysign(1, x)))
        keyed = [(math.isnan(x), x, math.copysign(1, x)) for x in window]
        n = len(window)
        for p, answer in zip(PERCENTAGES, recorded["sketches"][name][1:]):
            key = (True, math.nan, 1.0) if answer is None else (False, answer, math.copysign(1, answer))
            below = sum(1 for k in keyed if k < key) if answer is not None else sum(
                1 for k in keyed if not k[0])
            at_most = below + (sum(1 for k in keyed if k == key) if answer is not None else sum(
                1 for k in keyed if k[0]))
            assert max(0.0, below - p * n, p * n - at_most) <= 0.2 * n, (name, p)


def data_kind(blob: bytes) -> int:
    return blob[2]


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    import windowsketch

    session = windowsketch.configure(SparkSession.builder.master("local[1]")).getOrCreate()
    os.makedirs(PERCENTILE_GOLDEN, exist_ok=True)
    sketches = golden_percentile_bytes(session)
    for golden_name, golden_data in sketches.items():
        with open(os.path.join(PERCENTILE_GOLDEN, f"{golden_name}.bin"), "wb") as out:
            out.write(golden_data)
    with open(os.path.join(PERCENTILE_GOLDEN, "answers.json")) as f:
        legacy = {k: v for k, v in json.load(f)["sketches"].items() if k in LEGACY_PERCENTILE}
    with open(os.path.join(PERCENTILE_GOLDEN, "answers.json"), "w") as out:
        json.dump({"written_by": f"windowsketch {windowsketch.__version__} on Spark "
                                 f"{session.version}", "format_version": 1,
                   "sketches": dict(sorted({**legacy, **{
                       k: golden_percentile_answers(session, v)
                       for k, v in sketches.items()}}.items()))}, out, indent=1)
        out.write("\n")
    session.stop()
