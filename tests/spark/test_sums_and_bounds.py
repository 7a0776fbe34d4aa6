"""approx_window_sum, the bounds functions and sub-window queries in SQL, against exact
Spark queries on every row."""
from __future__ import annotations

import datetime

import numpy as np
import pytest
from pyspark.errors import AnalysisException

from conftest import error_condition

from windowsketch.functions import (approx_window_count_bounds, approx_window_sum,
                                    window_sketch, window_sketch_bounds,
                                    window_sketch_estimate)

ROWS = 8000


@pytest.fixture(scope="module")
def sales(spark):
    """Three stores; quantities heavy-tailed with zeros and bursts of huge orders."""
    rng = np.random.default_rng(31)
    minutes = np.sort(rng.integers(0, 3 * 24 * 60, ROWS))
    qty = np.floor(rng.pareto(1.3, ROWS) * 5).astype(np.int64)
    qty[rng.random(ROWS) < 0.15] = 0
    qty[rng.integers(0, ROWS, 20)] = 10**9
    base = datetime.datetime(2024, 2, 1)
    rows = [(int(s), i, base + datetime.timedelta(minutes=int(m)), int(q), int(r))
            for i, (s, m, q, r) in enumerate(zip(rng.integers(0, 3, ROWS), minutes, qty,
                                                rng.permutation(ROWS)))]
    df = spark.createDataFrame(rows, "store INT, id INT, ts TIMESTAMP, qty BIGINT, shuffle INT")
    df.createOrReplaceTempView("sales")
    return df


def check(rows, eps, approx="approx", exact="exact"):
    for r in rows:
        assert abs(r[approx] - r[exact]) <= eps * r[exact], r


@pytest.mark.parametrize("eps", [0.05, 0.01])
def test_moving_sum_matches_exact_range_frame(spark, sales, eps):
    rows = spark.sql(f"""
        SELECT approx_window_sum(qty, ts, INTERVAL 3 HOURS, {eps})
                 OVER (PARTITION BY store ORDER BY ts) AS approx,
               sum(qty) OVER (PARTITION BY store ORDER BY ts
                              RANGE BETWEEN INTERVAL 3 HOURS PRECEDING AND CURRENT ROW) AS exact
        FROM sales""").collect()
    check(rows, eps)
    assert max(r.exact for r in rows) > 10**9


def test_running_sums_use_the_time_ordered_histogram_and_others_the_mergeable_sketch(
        spark, sales):
    """Running frames ordered by ts get the O(1) histogram; a frame in any other order
    keeps the guarantee on the mergeable sketch."""
    def plan(over):
        return spark.sql(f"SELECT approx_window_sum(qty, ts, INTERVAL 3 HOURS, 0.05) "
                         f"OVER ({over}) FROM sales")._jdf.queryExecution().optimizedPlan() \
            .toString()

    assert "0.05, true" in plan("PARTITION BY store ORDER BY ts")
    for over in ("PARTITION BY store ORDER BY ts DESC", "PARTITION BY store ORDER BY shuffle"):
        assert "0.05, false" in plan(over), over
    rows = spark.sql("""
        SELECT approx_window_sum(qty, ts, INTERVAL 3 HOURS, 0.05)
                 OVER (PARTITION BY store ORDER BY ts DESC) AS approx,
               sum(IF(ts >= top - INTERVAL 3 HOURS, qty, 0))
                 OVER (PARTITION BY store ORDER BY ts DESC) AS exact
        FROM (SELECT *, max(ts) OVER (PARTITION BY store) AS top FROM sales)""").collect()
    check(rows, 0.05)
    assert max(r.exact for r in rows) > 1000


def test_sum_group_by_on_shuffled_partitions(spark, sales):
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    try:
        rows = spark.sql("""
            WITH latest AS (SELECT store, max(ts) AS now FROM sales GROUP BY store),
            exact AS (SELECT store, sum(IF(ts >= now - INTERVAL 12 HOURS, qty, 0)) AS exact
                      FROM sales JOIN latest USING (store) GROUP BY store),
            approx AS (SELECT store, approx_window_sum(qty, ts, INTERVAL 12 HOURS, 0.02) AS approx
                       FROM (SELECT /*+ REPARTITION(5) */ * FROM sales ORDER BY shuffle)
                       GROUP BY store)
            SELECT * FROM approx JOIN exact USING (store)""").collect()
    finally:
        spark.conf.unset("spark.sql.adaptive.coalescePartitions.enabled")
    assert len(rows) == 3
    check(rows, 0.02)


def test_sum_nulls_zeros_and_small_types(spark):
    rows = spark.sql("""
        SELECT ts, approx_window_sum(q, ts, 2) OVER (ORDER BY ts) AS n
        FROM VALUES (1, 3Y), (2, NULL), (3, 0Y), (4, 5Y), (5, NULL) AS t(ts, q)
        ORDER BY ts""").collect()
    assert [r.n for r in rows] == [3, 3, 0, 5, 5]


def test_negative_value_is_a_runtime_error_naming_it(spark):
    with pytest.raises(Exception, match="argument `value` must be non-negative, got -4"):
        spark.sql("""SELECT approx_window_sum(q, ts, 5) OVER (ORDER BY ts)
                     FROM VALUES (1, 2), (2, -4) AS t(ts, q)""").collect()


@pytest.mark.parametrize("over", ["OVER (ORDER BY ts)", "OVER (ORDER BY ts DESC)", ""])
def test_sum_overflow_is_an_error_never_a_wrap(spark, over):
    """Running frames, other frames and GROUP BY: a window's sum past BIGINT fails."""
    with pytest.raises(Exception, match="the sum of the window's values overflows BIGINT"):
        spark.sql(f"""SELECT approx_window_sum(q, ts, 10) {over}
                      FROM VALUES (1, 5000000000000000000L), (2, 5000000000000000000L)
                        AS t(ts, q)""").collect()


@pytest.mark.parametrize("value", ["1.5", "CAST(2 AS DOUBLE)", "CAST(3 AS DECIMAL(10, 2))"])
def test_decimal_or_floating_value_is_a_type_error(spark, value):
    with pytest.raises(AnalysisException) as info:
        spark.sql(f"SELECT approx_window_sum({value}, 1, 5)").collect()
    assert error_condition(info.value) == "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT"
    assert "`value`" in str(info.value) and "CAST(price * 100 AS BIGINT)" in str(info.value)


def test_count_bounds_contain_the_exact_count_on_every_row(spark, sales):
    """Ascending: the time-ordered histogram; descending: the mergeable sketch."""
    rows = spark.sql("""
        SELECT b.estimate AS approx, b.lower, b.upper, exact,
               d.estimate AS approx_desc, d.lower AS lower_desc, d.upper AS upper_desc,
               exact_desc
        FROM (
          SELECT approx_window_count_bounds(qty > 3, ts, INTERVAL 6 HOURS, 0.05)
                   OVER (PARTITION BY store ORDER BY ts) AS b,
                 count_if(qty > 3) OVER (PARTITION BY store ORDER BY ts
                   RANGE BETWEEN INTERVAL 6 HOURS PRECEDING AND CURRENT ROW) AS exact,
                 approx_window_count_bounds(qty > 3, ts, INTERVAL 6 HOURS, 0.05)
                   OVER (PARTITION BY store ORDER BY ts DESC) AS d,
                 count_if(qty > 3 AND ts >= top - INTERVAL 6 HOURS)
                   OVER (PARTITION BY store ORDER BY ts DESC) AS exact_desc
          FROM (SELECT *, max(ts) OVER (PARTITION BY store) AS top FROM sales))""").collect()
    for r in rows:
        assert r.lower <= r.exact <= r.upper and r.lower <= r.approx <= r.upper, r
        assert r.lower_desc <= r.exact_desc <= r.upper_desc, r
    check(rows, 0.05)
    check(rows, 0.05, "approx_desc", "exact_desc")
    assert max(r.exact for r in rows) > 30


def test_bounds_in_group_by_and_from_sketches(spark, sales):
    rows = spark.sql("""
        WITH latest AS (SELECT store, max(ts) AS now FROM sales GROUP BY store)
        SELECT store, approx_window_count_bounds(qty > 3, ts, INTERVAL 6 HOURS, 0.02) AS a,
               window_sketch_bounds(window_sketch(qty > 3, ts, INTERVAL 6 HOURS, 0.02)) AS b,
               count_if(qty > 3 AND ts >= now - INTERVAL 6 HOURS) AS exact
        FROM sales JOIN latest USING (store) GROUP BY store""").collect()
    for r in rows:
        for b in (r.a, r.b):
            assert b.lower <= r.exact <= b.upper
            assert abs(b.estimate - r.exact) <= 0.02 * r.exact


@pytest.mark.parametrize("hours", [1, 5, 17, 24])
def test_sub_window_queries_of_a_sketch(spark, sales, hours):
    as_of = "2024-02-04 00:00:00"  # just after the last sale: every sub-window holds some
    rows = spark.sql(f"""
        WITH s AS (SELECT store, window_sketch(qty > 3, ts, INTERVAL 24 HOURS, 0.02) AS s
                   FROM sales GROUP BY store)
        SELECT store,
               window_sketch_estimate(s, TIMESTAMP'{as_of}', INTERVAL {hours} HOURS) AS approx,
               window_sketch_bounds(s, TIMESTAMP'{as_of}', '{hours} hours') AS b,
               (SELECT count_if(qty > 3 AND ts >= TIMESTAMP'{as_of}' - INTERVAL {hours} HOURS)
                FROM sales x WHERE x.store = s.store) AS exact
        FROM s""").collect()
    check(rows, 0.02)
    for r in rows:
        assert r.b.lower <= r.exact <= r.b.upper and r.exact > 0


def test_sub_window_errors(spark, sales):
    with pytest.raises(Exception, match="sub_window INTERVAL '2' DAY is longer"):
        spark.sql("""SELECT window_sketch_estimate(window_sketch(qty > 3, ts, INTERVAL 1 DAY),
                            TIMESTAMP'2024-03-01 00:00:00', INTERVAL 2 DAYS) FROM sales""").collect()
    with pytest.raises(AnalysisException) as info:
        spark.sql("""SELECT window_sketch_estimate(X'00', TIMESTAMP'2024-03-01 00:00:00', 5)
                  """).collect()
    assert "`sub_window`" in str(info.value)


def test_dataframe_functions(spark, sales):
    """The Python functions against exact Spark queries, on every row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("store").orderBy("ts")
    rows = sales.withColumn("t", F.col("ts").cast("long")).select(
        approx_window_sum("qty", "ts", datetime.timedelta(hours=3), eps=0.05).over(w)
        .alias("approx"),
        F.sum("qty").over(Window.partitionBy("store").orderBy("t").rangeBetween(-3 * 3600, 0))
        .alias("exact"),
        approx_window_count_bounds(sales.qty > 3, "ts", "3 hours").over(w).alias("b"),
        F.count_if(F.col("qty") > 3).over(
            Window.partitionBy("store").orderBy("t").rangeBetween(-3 * 3600, 0))
        .alias("exact_count")).collect()
    check(rows, 0.05)
    for r in rows:
        assert r.b.lower <= r.exact_count <= r.b.upper
    sketch = sales.groupBy("store").agg(window_sketch(sales.qty > 3, "ts", "1 day").alias("s"))
    got = sketch.select(
        "store",
        window_sketch_estimate("s", datetime.datetime(2024, 2, 4),
                               datetime.timedelta(hours=5)).alias("e"),
        window_sketch_bounds("s", datetime.datetime(2024, 2, 4), "5 hours").alias("b"))
    exact = {r.store: r.n for r in spark.sql("""
        SELECT store, count_if(qty > 3 AND ts >= TIMESTAMP'2024-02-03 19:00:00') AS n
        FROM sales GROUP BY store""").collect()}
    assert min(exact.values()) > 20
    for r in got.collect():
        assert abs(r.e - exact[r.store]) <= 0.01 * exact[r.store]
        assert r.b.lower <= exact[r.store] <= r.b.upper and r.b.estimate == r.e
