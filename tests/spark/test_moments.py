"""The moments family in SQL (approx_window_avg, _variance, _var_samp, _var_pop, _stddev,
_stddev_samp, _stddev_pop, the _bounds forms and the moments sketch columns) against exact
rational arithmetic on every output: each row's frame (or each group's rows) comes from
Spark's own collect_list over the same frame, the window is cut from it in Python, and every
answer must lie within its guarantee and its certified bracket (docs/moments.md), in
running, sliding, whole-partition and descending frames and in GROUP BY over shuffled
partitions; then stored sketches merged in any shape, types, NULLs and errors."""
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

from conftest import _flags, _longs, error_condition, parameter_index, stable_seed
from golden_sketches import GOLDEN, golden_moments_values, golden_rows, micros_of_pos
from moments_reference import STATS, Exact, check_statistic
from test_percentiles import FRAMES
from windowsketch.functions import (approx_window_avg, approx_window_avg_bounds,
                                    approx_window_stddev, approx_window_stddev_bounds,
                                    approx_window_stddev_pop, approx_window_var_pop,
                                    approx_window_variance, window_moments_sketch,
                                    window_moments_sketch_bounds, window_moments_sketch_estimate,
                                    window_moments_sketch_merge)

# eps 0.3 over windows of 1,500 positions (about 150 rows of a key): groups straddle the window's edge on most rows, so
# the bounds are at work (at eps 0.01 windows this short are held exactly).
EPS = 0.3
WINDOW = 1500


def rows(rng, kind, n):
    """(id, key, ts, x) rows that stress the window edge and the arithmetic: bursts of equal
    ts, gaps, level shifts, constant runs (variance 0), a mean of 10^9, negative heavy tails,
    NULL values and NULL times."""
    ts = np.cumsum(np.where(rng.random(n) < 0.1, rng.integers(10, 60, n), rng.integers(0, 3, n)))
    blocks = np.repeat(rng.choice([-500.0, 0.0, 1000.0], n // 40 + 1), 40)[:n]
    x = {
        "bursts": np.round(rng.normal(0, 1, n), 3),
        "level-shifts": blocks + np.round(rng.normal(0, 0.01, n), 4),
        "constant-runs": np.where(rng.random(n) < 0.97, blocks, np.round(rng.normal(0, 50, n), 2)),
        "huge-mean": 1e9 + np.round(rng.normal(0, 1, n), 3),
        "negative-heavy-tailed": np.round(-rng.pareto(1.2, n) * 1e4 + 10, 2),
    }[kind]
    return [(i, f"k{i % 3}", None if rng.random() < 0.02 else int(ts[i]),
             None if rng.random() < 0.1 else float(x[i])) for i in range(n)]


KINDS = ["bursts", "level-shifts", "constant-runs", "huge-mean", "negative-heavy-tailed"]


def window_mask(frame, window, temporal=False):
    """The values of a frame's (ts, x) rows and which are inside the window ending at its
    largest ts: (now - window, now] positions, [now - window, now] for timestamps."""
    times = [r["ts"] for r in frame if r["ts"] is not None]
    values = [r["x"] for r in frame]
    if not times:
        return values, np.zeros(len(frame), dtype=bool)
    now = max(times)
    inside = [r["ts"] is not None and r["x"] is not None and
              (now - window <= r["ts"] if temporal else now - window < r["ts"]) and r["ts"] <= now
              for r in frame]
    return values, np.array(inside, dtype=bool)


def answers(prefix: str) -> str:
    """Every statistic of the family, in SQL, as columns named after it."""
    call = f"(x, ts, {WINDOW}, {EPS})"
    return (f"approx_window_avg_bounds{call} {prefix} AS avg, "
            f"approx_window_var_pop{call} {prefix} AS var_pop, "
            f"approx_window_variance{call} {prefix} AS var_samp, "
            f"approx_window_stddev_pop{call} {prefix} AS stddev_pop, "
            f"approx_window_stddev_bounds{call} {prefix} AS stddev_samp, "
            f"approx_window_avg{call} {prefix} AS avg_alone")


def check_row(r, values, inside, where):
    """Every statistic of one output against the exact window."""
    n, mean, m2 = Exact(values).of(inside)
    for stat in STATS:
        got = r[stat]
        if got is None or isinstance(got, float):
            check_statistic(stat, got, None, None, n, mean, m2, EPS, where)
        else:
            check_statistic(stat, got.estimate, got.lower, got.upper, n, mean, m2, EPS, where)
    assert r.avg_alone == (None if r.avg is None else r.avg.estimate), where
    return n


@pytest.mark.parametrize("frame", sorted(FRAMES))
@pytest.mark.parametrize("kind", KINDS)
def test_every_row_within_the_guarantee_in_every_frame(spark, kind, frame):
    rng = np.random.default_rng(stable_seed("moments-frames", kind, frame))
    spark.createDataFrame(rows(rng, kind, 900), "id INT, key STRING, ts BIGINT, x DOUBLE") \
        .repartition(3).createOrReplaceTempView("moment_rows")
    over = f"OVER ({FRAMES[frame]})"
    got = spark.sql(f"""
        SELECT {answers(over)}, collect_list(struct(ts, x)) {over} AS frame
        FROM moment_rows""").collect()
    checked = straddled = 0
    for r in got:
        values, inside = window_mask(r.frame, WINDOW)
        n = check_row(r, values, inside, (kind, frame, r.frame[-3:]))
        checked += n > 1
        straddled += r.avg is not None and r.avg.lower < r.avg.upper
    assert checked > 750
    if frame.startswith("running"):  # the time-ordered buckets straddle the edge
        assert straddled > 100, straddled


def test_running_frames_answer_as_the_time_ordered_buckets_bit_for_bit(spark, sketches):
    """A running frame reads rows in time order, so the planner gives it OrderedMoments:
    its answers on every row equal that structure's, fed the same rows (Replay), bit for
    bit, with over a thousand rows in the window (past the exact regime); the any-order sketch
    answers differently, so a frame that quietly fell back to it fails here."""
    rng = np.random.default_rng(stable_seed("moments-ordered-path"))
    n, window, eps = 3000, 2000, 0.05
    ts = np.cumsum(rng.integers(1, 3, n))
    x = np.round(rng.gamma(2.0, 40.0, n), 2)
    present = rng.random(n) > 0.1
    df = spark.createDataFrame([(int(t), float(v) if p else None) for t, v, p in zip(ts, x, present)],
                               "ts BIGINT, x DOUBLE").coalesce(1)
    call = f"(x, ts, {window}, {eps}) OVER (ORDER BY ts)"
    got = df.selectExpr(f"approx_window_avg_bounds{call} AS avg",
                        f"approx_window_stddev_bounds{call} AS stddev").collect()
    packed = sketches.replay.momentsPerRow(window, eps, True, _longs(ts),
                                           x.astype(">f8").tobytes(), _flags(present))
    want = np.frombuffer(bytes(packed), dtype=">f8").reshape(n, -1)
    for i, r in enumerate(got):
        for stat, at in (("avg", 2), ("stddev", 14)):
            expected = tuple(want[i, at:at + 3])
            answer = r[stat]
            if math.isnan(expected[0]):
                assert answer is None, (i, stat)
            else:
                assert (answer.estimate, answer.lower, answer.upper) == expected, (i, stat)
    assert sum(r.avg is not None and r.avg.lower < r.avg.upper for r in got) > 1000


@pytest.mark.parametrize("kind", KINDS)
def test_group_by_over_shuffled_partitions_within_the_guarantee(spark, kind):
    rng = np.random.default_rng(stable_seed("moments-group-by", kind))
    data = [(i, f"g{int(rng.integers(0, 30))}", t, x) for i, _, t, x in rows(rng, kind, 6000)]
    df = spark.createDataFrame(data, "id INT, key STRING, ts BIGINT, x DOUBLE")
    window = 12000
    got = (df.repartition(7, "id").groupBy("key")
           .agg(approx_window_avg_bounds("x", "ts", window, EPS).alias("avg"),
                approx_window_var_pop("x", "ts", window, EPS).alias("var_pop"),
                approx_window_variance("x", "ts", window, EPS).alias("var_samp"),
                approx_window_stddev_pop("x", "ts", window, EPS).alias("stddev_pop"),
                approx_window_stddev_bounds("x", "ts", window, EPS).alias("stddev_samp"),
                approx_window_avg("x", "ts", window, EPS).alias("avg_alone"),
                F.collect_list(F.struct("ts", "x")).alias("frame"))
           .collect())
    assert len(got) == 30
    widths = 0
    for r in got:
        values, inside = window_mask(r.frame, window)
        assert check_row(r, values, inside, (kind, r.key)) > 50
        widths += r.stddev_samp.lower < r.stddev_samp.upper
    assert kind == "constant-runs" or widths > 0  # merged partials straddle too


def test_timestamp_windows_are_inclusive_and_any_numeric_type_is_read(spark):
    base = datetime.datetime(2025, 1, 1, 10, 0)
    data = [(base + datetime.timedelta(minutes=m), ms, decimal.Decimal(ms) / 4, float(ms) / 8)
            for m, ms in [(0, 12), (4, 90), (5, 15), (9, 7), (10, 30), (16, 44)]]
    df = spark.createDataFrame(data, "ts TIMESTAMP, ms INT, price DECIMAL(10,2), f FLOAT")
    w = Window.orderBy("ts")
    got = df.select(approx_window_avg("ms", "ts", "5 minutes").over(w).alias("avg"),
                    approx_window_stddev("price", "ts", datetime.timedelta(minutes=5))
                    .over(w).alias("sd"),
                    approx_window_var_pop("f", "ts", "5 minutes").over(w).alias("var")).collect()
    # [now - 5 min, now]: at 10:05 the row of 10:00 is still in, at 10:09 it is not.
    windows = [[12], [12, 90], [12, 90, 15], [90, 15, 7], [15, 7, 30], [44]]
    for r, w_values in zip(got, windows):
        mean = sum(w_values) / len(w_values)
        m2 = sum((v - mean) ** 2 for v in w_values)
        assert r.avg == pytest.approx(mean, rel=1e-12)
        assert r.var == pytest.approx(m2 / len(w_values) / 64, rel=1e-12)
        assert (r.sd is None) == (len(w_values) == 1)
        if r.sd is not None:
            assert r.sd == pytest.approx((m2 / (len(w_values) - 1)) ** 0.5 / 4, rel=1e-12)


def test_equal_values_give_zero_exactly_and_nulls_as_spark(spark):
    df = spark.createDataFrame([(i, 0.1 if i % 4 else None) for i in range(1, 400)],
                               "ts INT, x DOUBLE")
    w = Window.orderBy("ts")
    got = df.select("ts", approx_window_stddev("x", "ts", 150, 0.5).over(w).alias("sd"),
                    approx_window_var_pop("x", "ts", 150, 0.5).over(w).alias("var"),
                    approx_window_avg("x", "ts", 150, 0.5).over(w).alias("avg")).collect()
    assert [r.sd for r in got[:3]] == [None, 0.0, 0.0]
    assert all(r.var == 0.0 and r.avg == 0.1 for r in got[1:])
    assert all(r.sd == 0.0 for r in got[2:])
    nothing = spark.sql("SELECT approx_window_avg(x, ts, 5), approx_window_stddev(x, ts, 5), "
                        "approx_window_var_pop(x, ts, 5) FROM VALUES (1, CAST(NULL AS DOUBLE)) "
                        "AS t(ts, x)").collect()[0]
    assert list(nothing) == [None, None, None]


WINDOW_HOURS = 6
BASE = datetime.datetime(2024, 5, 1)


@pytest.fixture(scope="module")
def hourly_moments(spark):
    """Two days of latencies for four endpoints (a level shift, equal values, NULLs, rows
    sharing a second), kept as moments sketches per endpoint per hour over shuffled
    partitions, on time and on positions."""
    rng = np.random.default_rng(48)
    n = 6000
    seconds = np.sort(rng.integers(0, 2 * 86400, n))
    ms = np.round(rng.gamma(2.0, 20.0, n), 1)
    ms[2000:2600] += 500.0
    ms[4000:4400] = 7.0
    data = [(f"e{int(rng.integers(0, 4))}", BASE + datetime.timedelta(seconds=int(seconds[i])), i,
             None if rng.random() < 0.05 else float(ms[i])) for i in range(n)]
    spark.createDataFrame(data, "endpoint STRING, ts TIMESTAMP, pos BIGINT, ms DOUBLE") \
        .createOrReplaceTempView("moment_latencies")
    spark.sql(f"""
        SELECT endpoint, date_trunc('HOUR', ts) AS hour,
               window_moments_sketch(ms, ts, INTERVAL {WINDOW_HOURS} HOURS, {EPS}) AS s,
               window_moments_sketch(ms, pos, 1500, {EPS}) AS p
        FROM (SELECT /*+ REPARTITION(5) */ * FROM moment_latencies) GROUP BY 1, 2""") \
        .createOrReplaceTempView("hourly_moments")
    return data


@pytest.mark.parametrize("as_of, hours", [
    (None, None),
    ("2024-05-02 23:59:59", WINDOW_HOURS),
    ("2024-05-03 02:00:00", WINDOW_HOURS),  # later: the oldest rows have left
    ("2024-05-03 00:30:00", 1),             # a sub-window of the last half hour
    ("2024-05-03 05:00:00", 1),             # past the data: an empty window, NULL
])
def test_merged_hourly_sketches_within_the_guarantee(spark, hourly_moments, as_of, hours):
    where = "" if as_of is None else f", TIMESTAMP'{as_of}', INTERVAL {hours} HOURS"
    got = spark.sql(f"""
        SELECT endpoint, {', '.join(
            f"window_moments_sketch_bounds(m, '{stat}'{where}) AS {stat}" for stat in STATS)},
               window_moments_sketch_estimate(m, 'stddev'{where}) AS stddev, max_ts
        FROM (SELECT endpoint, window_moments_sketch_merge(s) AS m FROM hourly_moments
              GROUP BY endpoint) JOIN (SELECT endpoint, max(ts) AS max_ts FROM moment_latencies
              GROUP BY endpoint) USING (endpoint)""").collect()
    assert len(got) == 4
    for r in got:
        end = r.max_ts if as_of is None else datetime.datetime.fromisoformat(as_of)
        length = datetime.timedelta(hours=WINDOW_HOURS if hours is None else hours)
        rows = [(ts, ms) for e, ts, _, ms in hourly_moments if e == r.endpoint]
        values = [ms for _, ms in rows]
        inside = np.array([ms is not None and end - length <= ts <= end for ts, ms in rows])
        n, mean, m2 = Exact(values).of(inside)
        for stat in STATS:
            b = r[stat]
            check_statistic(stat, *((None,) * 3 if b is None else b), n, mean, m2, EPS, (as_of, stat))
        assert r.stddev == (None if r.stddev_samp is None else r.stddev_samp.estimate)


def test_position_sketches_merge_in_any_shape(spark, hourly_moments):
    """The same rows as one sketch, as hourly sketches merged, and as those merged in two
    halves then together: every (as_of, sub_window) within the guarantee for each."""
    one = spark.sql(f"""SELECT endpoint, window_moments_sketch(ms, pos, 1500, {EPS}) AS m
                        FROM moment_latencies GROUP BY endpoint""")
    merged = spark.sql("SELECT endpoint, window_moments_sketch_merge(p) AS m FROM hourly_moments "
                       "GROUP BY endpoint")
    halves = spark.sql("""
        SELECT endpoint, window_moments_sketch_merge(m) AS m FROM (
          SELECT endpoint, hour < TIMESTAMP'2024-05-02' AS early, window_moments_sketch_merge(p) AS m
          FROM hourly_moments GROUP BY 1, 2) GROUP BY endpoint""")
    last = len(hourly_moments) - 1
    for df in (one, merged, halves):
        for as_of, sub in ((last, 1500), (last + 400, 1500), (last, 200), (last + 1300, 300)):
            got = df.select("endpoint", window_moments_sketch_bounds("m", "var_samp", as_of, sub)
                            .alias("b")).collect()
            for r in got:
                values = [ms for e, _, _, ms in hourly_moments if e == r.endpoint]
                positions = np.array([pos for e, _, pos, _ in hourly_moments if e == r.endpoint])
                inside = np.array([v is not None for v in values]) & \
                    (positions > as_of - sub) & (positions <= as_of)
                n, mean, m2 = Exact(values).of(inside)
                check_statistic("var_samp", *((None,) * 3 if r.b is None else r.b), n, mean, m2,
                                EPS, (as_of, sub))


def test_python_sketch_functions_take_every_argument_form(spark):
    df = spark.createDataFrame([(1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0)], "ts INT, x DOUBLE")
    s = df.agg(window_moments_sketch("x", "ts", 3).alias("s"))
    row = s.select(window_moments_sketch_estimate("s", "avg").alias("avg"),
                   window_moments_sketch_estimate(F.col("s"), "MEAN", 5).alias("later"),
                   window_moments_sketch_bounds("s", "var_pop", 4, 2).alias("b")).collect()[0]
    assert (row.avg, row.later, tuple(row.b)) == (40.0, 50.0, (100.0, 100.0, 100.0))
    with pytest.raises(ValueError, match="`statistic` must be one of"):
        window_moments_sketch_estimate("s", "median")
    with pytest.raises(TypeError, match="`sub_window` needs `as_of`"):
        window_moments_sketch_estimate("s", "avg", sub_window=2)


@pytest.mark.parametrize("expression, condition, parameter", [
    ("approx_window_avg(x, ts, 3, 0)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`eps`"),
    ("approx_window_stddev(x, ts, 3, x)", "DATATYPE_MISMATCH.NON_FOLDABLE_INPUT", "`eps`"),
    ("approx_window_variance(x, ts, 0)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`window`"),
    ("approx_window_var_pop(x, ts, INTERVAL 1 MINUTE)", "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT", "`window`"),
    ("approx_window_stddev_pop('slow', ts, 3)", "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE", "\"NUMERIC\""),
    ("approx_window_avg_bounds(x, 'a', 3)", "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE", "\"TIMESTAMP\""),
    ("approx_window_avg(x)", "WRONG_NUM_ARGS.WITHOUT_SUGGESTION", "approx_window_avg"),
    ("window_moments_sketch_estimate(window_moments_sketch(x, ts, 3), 'median')",
     "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`statistic`"),
    ("window_moments_sketch_estimate(window_moments_sketch(x, ts, 3), 2)",
     "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT", "`statistic`"),
    ("window_moments_sketch_estimate(window_moments_sketch(x, ts, 3), CAST(NULL AS STRING))",
     "DATATYPE_MISMATCH.UNEXPECTED_NULL", "`statistic`"),
    ("window_moments_sketch_bounds(x, 'avg')", "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE",
     "window_moments_sketch"),
])
def test_bad_arguments_are_named(spark, expression, condition, parameter):
    with pytest.raises(Exception) as raised:
        spark.sql(f"SELECT {expression} FROM VALUES (1.0, 1) AS t(x, ts)").collect()
    assert error_condition(raised.value) == condition
    assert parameter in str(raised.value)
    if "'slow'" in expression:
        assert raised.value.getMessageParameters()["paramIndex"] == parameter_index(0)


@pytest.mark.parametrize("query, message", [
    ("SELECT approx_window_avg(x, ts, 3) FROM VALUES (1, 1.0), (2, double('NaN')) AS t(ts, x)",
     "approx_window_avg: argument `x` must be finite, got NaN"),
    ("SELECT approx_window_stddev(x, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, double('inf')) "
     "AS t(ts, x)", "approx_window_stddev_samp: argument `x` must be finite, got Infinity"),
    ("SELECT window_moments_sketch_estimate(window_sketch(true, 1, 3), 'avg')",
     "window_moments_sketch_estimate: invalid sketch bytes: a count sketch (window_sketch) is "
     "not a moments sketch"),
    ("SELECT window_moments_sketch_merge(s) FROM (SELECT window_moments_sketch(1.0, 1, 3) AS s "
     "UNION ALL SELECT window_moments_sketch(1.0, 1, 4))", "cannot merge moments sketches"),
    ("SELECT window_moments_sketch_merge(s) FROM (SELECT window_moments_sketch(1.0, 1, 3, 0.01) "
     "AS s UNION ALL SELECT window_moments_sketch(1.0, 1, 3, 0.02))",
     "cannot merge moments sketches of (window, eps) (3, 0.01) and (3, 0.02)"),
    ("SELECT window_moments_sketch_merge(s) FROM (SELECT window_moments_sketch(1.0, 1, 1001) "
     "AS s UNION ALL SELECT window_moments_sketch(1.0, TIMESTAMP'2025-01-01 00:00:00', "
     "INTERVAL 1 MILLISECOND))", "cannot merge moments sketches of (window, eps) (1001, 0.01) "
     "and (1001, 0.01) on different time axes"),
    ("SELECT window_moments_sketch_estimate(window_moments_sketch(1.0, 5, 3), 'avg', 4)",
     "as_of (4) is earlier than the sketch's latest ts (5)"),
])
def test_runtime_errors_name_the_function(spark, query, message):
    with pytest.raises(Exception, match=None) as raised:
        spark.sql(query).collect()
    assert message in str(raised.value), str(raised.value)[:2000]


# Golden moments sketches (format kind 5), read and rewritten on every line: old bytes keep
# reading. `python tests/spark/test_moments.py` rewrites them; the tests never do.
MOMENTS_GOLDEN = os.path.join(GOLDEN, "moments")


def golden_moments_bytes(spark) -> dict[str, bytes]:
    """name -> bytes, from the golden rows: a time sketch, a positions sketch merged from two
    keys' partials, and an empty one."""
    from windowsketch import _scala_object

    replay = _scala_object(spark, "windowsketch.core.Replay")
    fmt = _scala_object(spark, "windowsketch.core.SketchFormat")
    keys, pos, _ = golden_rows()
    values = golden_moments_values(pos)

    def sketch(window, eps, micros, rows):
        ts = [micros_of_pos(p) for p in pos[rows]] if micros else pos[rows]
        return replay.momentsSketch(window, eps, micros, np.asarray(ts, dtype=">i8").tobytes(),
                                    np.asarray(values[rows], dtype=">f8").tobytes())

    merged = sketch(1000, 0.3, False, keys == 1)
    merged.merge(sketch(1000, 0.3, False, keys == 2))
    return {
        "time": bytes(fmt.serializeMoments(sketch(86_400_000_001, 0.1, True, keys >= 0))),
        "positions_merged": bytes(fmt.serializeMoments(merged)),
        "empty": bytes(fmt.serializeMoments(sketch(10, 0.01, False, keys < 0))),
    }


def golden_moments_answers(spark, data: bytes) -> list:
    """The sketch's own window: the count's bounds, then (estimate, lower, upper) of every
    statistic (None for NULL)."""
    from windowsketch import _scala_object

    replay = _scala_object(spark, "windowsketch.core.Replay")
    sketch = _scala_object(spark, "windowsketch.core.SketchFormat").deserializeMoments(data)
    packed = replay.momentsAnswers(sketch, sketch.now(), np.asarray([sketch.window()], dtype=">i8")
                                   .tobytes())
    return [None if np.isnan(x) else float(x) for x in np.frombuffer(bytes(packed), dtype=">f8")]


def test_golden_moments_sketches_read_answer_and_rewrite_as_recorded(spark):
    with open(os.path.join(MOMENTS_GOLDEN, "answers.json")) as f:
        recorded = json.load(f)
    written = golden_moments_bytes(spark)
    assert sorted(recorded["sketches"]) == sorted(written) == sorted(
        f[:-4] for f in os.listdir(MOMENTS_GOLDEN) if f.endswith(".bin"))
    for name, data in written.items():
        with open(os.path.join(MOMENTS_GOLDEN, f"{name}.bin"), "rb") as f:
            stored = f.read()
        assert golden_moments_answers(spark, stored) == recorded["sketches"][name], name
        assert data == stored, name
    # The answers hold the guarantee against the exact window, not just stay stable.
    keys, pos, _ = golden_rows()
    values = golden_moments_values(pos)
    for name, inside, eps in [("time", pos >= pos.max() - 86_400 // 30, 0.1),
                              ("positions_merged", (keys > 0) & (pos > pos[keys > 0].max() - 1000),
                               0.3)]:
        n, mean, m2 = Exact(values).of(inside)
        answers = recorded["sketches"][name]
        assert answers[0] <= n <= answers[1], name
        for k, stat in enumerate(STATS):
            check_statistic(stat, *answers[2 + 3 * k: 5 + 3 * k], n, mean, m2, eps, name)
        assert answers[0] < answers[1] or name == "time"  # the merged one straddles
    assert recorded["sketches"]["empty"] == [0, 0] + [None] * 3 * len(STATS)


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    import windowsketch

    session = windowsketch.configure(SparkSession.builder.master("local[1]")).getOrCreate()
    os.makedirs(MOMENTS_GOLDEN, exist_ok=True)
    written_now = golden_moments_bytes(session)
    for golden_name, golden_data in written_now.items():
        with open(os.path.join(MOMENTS_GOLDEN, f"{golden_name}.bin"), "wb") as out:
            out.write(golden_data)
    with open(os.path.join(MOMENTS_GOLDEN, "answers.json"), "w") as out:
        json.dump({"written_by": f"windowsketch {windowsketch.__version__} on Spark "
                                 f"{session.version}", "format_version": 1,
                   "sketches": {name: golden_moments_answers(session, data)
                                for name, data in written_now.items()}}, out, indent=1)
        out.write("\n")
