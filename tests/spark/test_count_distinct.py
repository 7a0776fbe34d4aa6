"""approx_window_count_distinct in SQL: the answer of approx_count_distinct wherever the
window holds every row, HyperLogLog's error distribution against brute-force exact distinct
counts on every row of running frames, any order and GROUP BY, and the argument errors."""
from __future__ import annotations

import numpy as np
import pytest
from pyspark.errors import AnalysisException

from conftest import error_condition, stable_seed

EVERYTHING = 10**12  # a window that holds every row


@pytest.mark.parametrize("expr", ["id % {n}", "CAST(id % {n} AS STRING)",
                                  "CAST(id % {n} AS DOUBLE) / 3", "date_add(DATE'2000-01-01', "
                                  "CAST(id % {n} AS INT))", "named_struct('a', id % {n}, 'b', 1)"])
@pytest.mark.parametrize("n", [1, 7, 300, 700, 5000, 60000])
def test_a_window_holding_every_row_answers_as_approx_count_distinct(spark, expr, n):
    x = expr.format(n=n)
    row = spark.sql(f"""
        SELECT approx_window_count_distinct({x}, id, {EVERYTHING}) AS ours,
               approx_window_count_distinct({x}, id, {EVERYTHING}, 0.02) AS ours_02,
               approx_count_distinct({x}) AS spark, approx_count_distinct({x}, 0.02) AS spark_02
        FROM range(0, {2 * n + 10}, 1, 3)""").collect()[0]
    assert (row.ours, row.ours_02) == (row.spark, row.spark_02)


@pytest.mark.parametrize("ts", ["id", "7"])
@pytest.mark.parametrize("key, keys", [("id % 11", 11), ("id DIV 10000", 20)])
def test_group_by_answers_as_approx_count_distinct(spark, key, keys, ts):
    """Keys spread over every partition, and keys each in one partition, whose final side
    merges one partial sketch into a fresh one; rows in time order, and every row at one
    time (a merge into a fresh sketch once kept its running sums from before the merge)."""
    rows = spark.sql(f"""
        SELECT k, approx_window_count_distinct(u, ts, {EVERYTHING}, 0.03) AS ours,
               approx_count_distinct(u, 0.03) AS spark
        FROM (SELECT {key} AS k, {ts} AS ts, CAST(rand(4) * pow(10, id % 11 / 2) AS INT) AS u
              FROM range(0, 200000, 1, 4))
        GROUP BY k""").collect()
    assert len(rows) == keys
    assert all(r.ours == r.spark for r in rows)


def exact_distinct(ts, values, window):
    """Per row, distinct values in (ts - window, ts] over the rows so far (time order)."""
    out = np.empty(len(ts), dtype=np.int64)
    for i in range(len(ts)):
        lo = np.searchsorted(ts, ts[i] - window, side="right")
        out[i] = len(np.unique(values[lo:i + 1]))
    return out


STREAMS = {
    "all-distinct runs": lambda rng, n: np.where((np.arange(n) // 500) % 2 == 0,
                                                 np.arange(n), rng.integers(0, 20, n)),
    "bursts of repeats": lambda rng, n: np.repeat(rng.integers(0, 10**6, n // 25), 25),
    "heavy hitters": lambda rng, n: np.where(rng.random(n) < 0.6, rng.integers(0, 3, n),
                                             rng.integers(0, 10**6, n)),
}


@pytest.mark.parametrize("window", [1, 50, 1000, 10**6])
@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_running_frame_is_hyperloglog_of_each_window(spark, stream, window):
    """On every row: exactly what approx_count_distinct gives over the same window's rows
    (Spark's sliding RANGE frame, which re-aggregates it), and HyperLogLog's error against
    the exact distinct count: a distribution, most rows within 2 rsd."""
    rng = np.random.default_rng(stable_seed(stream, window))
    n, rsd = 6000, 0.05
    ts = np.sort(rng.integers(0, 3 * n, n)).astype(np.int64)
    values = STREAMS[stream](rng, n).astype(np.int64)
    df = spark.createDataFrame(list(zip(ts.tolist(), values.tolist(), range(n))),
                               "ts BIGINT, u BIGINT, id INT")
    rows = df.selectExpr(
        "id", f"approx_window_count_distinct(u, ts, {window}, {rsd}) OVER (ORDER BY ts) AS d",
        f"approx_count_distinct(u, {rsd}) OVER (ORDER BY ts RANGE BETWEEN {window - 1} "
        "PRECEDING AND CURRENT ROW) AS spark").orderBy("id").collect()
    got = np.array([r.d for r in rows])
    assert np.array_equal(got, [r.spark for r in rows])
    # A RANGE frame: peers (equal ts) all answer as of the last of them.
    exact = exact_distinct(ts, values, window)[np.searchsorted(ts, ts, side="right") - 1]
    error = np.abs(got - exact) / exact
    print(f"\n{stream}, window {window}: median {np.median(error):.4f}, p99 "
          f"{np.quantile(error, 0.99):.4f}, worst {error.max():.4f}, within 2 rsd "
          f"{np.mean(error <= 2 * rsd):.3f}")
    assert np.mean(error <= 2 * rsd) >= 0.9


def test_any_order_and_partitions_give_the_window_of_the_newest_row(spark):
    """GROUP BY over shuffled rows in many partitions (merged partial sketches) answers as
    the running frame does at each key's newest row: the same registers."""
    spark.sql("""SELECT id % 5 AS k, id AS ts, CAST(rand(9) * 3000 AS INT) AS u
                 FROM range(0, 60000, 1, 6)""").createOrReplaceTempView("distinct_events")
    any_order = dict(spark.sql("""
        SELECT k, approx_window_count_distinct(u, ts, 2000)
        FROM (SELECT * FROM distinct_events DISTRIBUTE BY rand(2)) GROUP BY k""").collect())
    running = dict(spark.sql("""
        SELECT k, max_by(d, ts) FROM (
          SELECT k, ts, approx_window_count_distinct(u, ts, 2000)
                          OVER (PARTITION BY k ORDER BY ts) AS d
          FROM distinct_events) GROUP BY k""").collect())
    assert len(any_order) == 5 and any_order == running


@pytest.mark.parametrize("rsd, condition", [
    ("0.005", "VALUE_OUT_OF_RANGE"),
    ("0.4", "VALUE_OUT_OF_RANGE"),
    ("NULL", "UNEXPECTED_NULL"),
    ("rand()", "NON_FOLDABLE_INPUT"),
    ("'abc'", "TYPE_CHECK_FAILURE_WITH_HINT"),
])
def test_bad_rsd_is_named(spark, rsd, condition):
    with pytest.raises(AnalysisException) as info:
        spark.sql(f"SELECT approx_window_count_distinct(1, 1, 10, {rsd})").collect()
    assert error_condition(info.value) == f"DATATYPE_MISMATCH.{condition}"
    assert "`rsd`" in str(info.value)


@pytest.mark.parametrize("ts, window", [("1", "INTERVAL 1 HOUR"), ("TIMESTAMP'2024-01-01'", "10"),
                                        ("1", "0")])
def test_bad_window_is_named(spark, ts, window):
    with pytest.raises(AnalysisException) as info:
        spark.sql(f"SELECT approx_window_count_distinct(1, {ts}, {window})").collect()
    assert "`window`" in str(info.value)


def test_empty_and_null_values_count_zero(spark):
    rows = spark.sql("""
        SELECT ts, approx_window_count_distinct(u, ts, 2) OVER (ORDER BY ts) AS d
        FROM VALUES (1, NULL), (2, 'a'), (3, NULL), (4, NULL), (5, 'b') AS t(ts, u)
        ORDER BY ts""").collect()
    assert [r.d for r in rows] == [0, 1, 1, 0, 1]
    empty = spark.sql("SELECT approx_window_count_distinct(id, id, 5) AS d FROM range(0)")
    assert empty.collect()[0].d == 0


def test_dataframe_function_matches_sql(spark):
    from pyspark.sql import Window

    from windowsketch.functions import approx_window_count_distinct

    df = spark.sql("SELECT id AS ts, id % 37 AS u FROM range(0, 500, 1, 2)")
    w = Window.orderBy("ts")
    got = df.select(approx_window_count_distinct("u", "ts", 50, rsd=0.1).over(w).alias("d")) \
        .collect()
    want = spark.sql("""SELECT approx_window_count_distinct(id % 37, id, 50, 0.1)
                          OVER (ORDER BY id) AS d FROM range(0, 500, 1, 2)""").collect()
    assert [r.d for r in got] == [r.d for r in want] and abs(want[-1].d - 37) <= 2
    with pytest.raises(TypeError, match="`rsd` must be a number in"):
        approx_window_count_distinct("u", "ts", 50, rsd="0.1")


@pytest.mark.parametrize("frame", ["PARTITION BY k",
                                   "PARTITION BY k ORDER BY ts DESC",
                                   "PARTITION BY k ORDER BY ts ROWS BETWEEN 300 PRECEDING AND CURRENT ROW"])
def test_other_frames_answer_as_approx_count_distinct_over_the_window(spark, frame):
    """Frames other than the running one feed rows out of time order (whole partition,
    descending: each frame's newest row is the partition's) or re-feed a sliding frame on
    every row: the answer is still approx_count_distinct over the frame's rows inside the
    window that ends at the frame's newest row."""
    window = 5000  # about 10 of a key's distinct values per register in the window
    # Shuffled, so a frame without ORDER BY takes the rows in no time order.
    spark.sql("""SELECT id % 4 AS k, id DIV 4 AS ts, CAST(rand(5) * 1000000 AS INT) AS u
                 FROM range(0, 40000, 1, 3) DISTRIBUTE BY rand(3)""") \
        .createOrReplaceTempView("distinct_frames")
    rows = spark.sql(f"""
        SELECT approx_window_count_distinct(u, ts, {window}) OVER ({frame}) AS ours,
               approx_count_distinct(CASE WHEN ts > newest - {window} THEN u END)
                 OVER ({frame}) AS spark
        FROM (SELECT *, max(ts) OVER ({frame}) AS newest FROM distinct_frames)""").collect()
    assert len(rows) == 40000 and all(r.ours == r.spark for r in rows)
    assert len({r.ours for r in rows}) > 1 or frame == "PARTITION BY k"
    assert min(r.ours for r in rows) >= 1 and max(r.ours for r in rows) >= 200
