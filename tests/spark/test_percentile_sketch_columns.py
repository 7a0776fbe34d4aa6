"""Percentile sketch columns: sketches per key per hour, merged in any shape over shuffled
partitions, read for any window ending at or after their data, give on every output the
sorted window's value at rank ceil(p n) (percentile_approx's definition); mismatched or
foreign sketches fail with the function's name; the bounds aggregate brackets the exact
percentile in every frame."""
from __future__ import annotations

import datetime

import numpy as np
import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from conftest import parameter_index
from test_percentiles import FRAMES, P_SQL, PERCENTAGES, exact_percentiles, rows, window_of
from windowsketch.functions import (approx_window_percentile, approx_window_percentile_bounds,
                                    window_percentile_sketch, window_percentile_sketch_estimate,
                                    window_percentile_sketch_merge)

WINDOW_HOURS = 6
POSITIONS = 500
BASE = datetime.datetime(2024, 5, 1)


@pytest.fixture(scope="module")
def latencies(spark):
    """Two days of request latencies for four endpoints: heavy tails, a slow burst, ties
    (whole milliseconds), rows sharing a second, NULL latencies; `pos` a global position."""
    rng = np.random.default_rng(47)
    n = 8000
    seconds = np.sort(rng.integers(0, 2 * 86400, n))
    ms = np.round(rng.pareto(1.3, n) * 20)
    ms[3000:3400] += 900  # a slow burst: the upper percentiles jump, then fall back
    data = []
    for i in range(n):
        value = None if rng.random() < 0.05 else float(ms[i])
        data.append((f"e{int(rng.integers(0, 4))}", BASE + datetime.timedelta(seconds=int(seconds[i])),
                     i, value))
    df = spark.createDataFrame(data, "endpoint STRING, ts TIMESTAMP, pos BIGINT, ms DOUBLE")
    df.createOrReplaceTempView("latencies")
    return data


@pytest.fixture(scope="module")
def hourly(spark, latencies):
    df = spark.sql(f"""
        SELECT endpoint, date_trunc('HOUR', ts) AS hour,
               window_percentile_sketch(ms, ts, INTERVAL {WINDOW_HOURS} HOURS) AS s,
               window_percentile_sketch(ms, pos, {POSITIONS}) AS p
        FROM (SELECT /*+ REPARTITION(5) */ * FROM latencies) GROUP BY 1, 2""")
    df.createOrReplaceTempView("hourly_latencies")
    return df


def exact_by_endpoint(latencies, inside) -> dict:
    """endpoint -> the exact percentiles of its non-NULL latencies whose row is `inside`."""
    values: dict = {}
    for endpoint, ts, pos, ms in latencies:
        values.setdefault(endpoint, [])
        if ms is not None and inside(ts, pos):
            values[endpoint].append(ms)
    return {e: exact_percentiles(v) for e, v in values.items()}


@pytest.mark.parametrize("as_of, hours", [
    (None, None),                       # the sketch's own window, ending at its last row
    ("2024-05-02 23:59:59", WINDOW_HOURS),
    ("2024-05-03 02:00:00", WINDOW_HOURS),  # later: the oldest rows have left
    ("2024-05-03 00:30:00", 1),         # a sub-window holding the last half hour
    ("2024-05-03 05:00:00", 1),         # past the data: an empty window, NULL
])
def test_merged_hourly_sketches_equal_the_sorted_window(spark, latencies, hourly, as_of, hours):
    if as_of is None:
        query = f"window_percentile_sketch_estimate(window_percentile_sketch_merge(s), {P_SQL})"
    else:
        query = (f"window_percentile_sketch_estimate(window_percentile_sketch_merge(s), {P_SQL}, "
                 f"TIMESTAMP'{as_of}', INTERVAL {hours} HOURS)")
    got = {r.endpoint: r.ps for r in spark.sql(f"""
        SELECT endpoint, {query} AS ps
        FROM (SELECT /*+ REPARTITION(3) */ * FROM hourly_latencies) GROUP BY endpoint""").collect()}
    newest = {}
    for endpoint, ts, _, _ in latencies:
        newest[endpoint] = max(newest.get(endpoint, ts), ts)
    for endpoint in got:
        end = newest[endpoint] if as_of is None else datetime.datetime.fromisoformat(as_of)
        start = end - datetime.timedelta(hours=hours or WINDOW_HOURS)
        want = exact_by_endpoint(latencies, lambda ts, _: start <= ts <= end)[endpoint]
        assert got[endpoint] == want, (endpoint, as_of, hours)
    assert len(got) == 4 and (as_of is not None and as_of > "2024-05-03 04") == (
        all(v is None for v in got.values()))


def test_position_sketches_and_sub_windows(spark, latencies, hourly):
    """An integral ts: the window (as_of - N, as_of], its edge row out."""
    last = len(latencies) - 1
    for as_of, length in [(last, POSITIONS), (last + 120, POSITIONS), (last + 3, 40), (last, 1)]:
        got = {r.endpoint: r.ps for r in spark.sql(f"""
            SELECT endpoint, window_percentile_sketch_estimate(window_percentile_sketch_merge(p),
                                                               {P_SQL}, {as_of}, {length}) AS ps
            FROM hourly_latencies GROUP BY endpoint""").collect()}
        want = exact_by_endpoint(latencies, lambda _, pos: as_of - length < pos <= as_of)
        assert got == want, (as_of, length)


def test_merge_shape_does_not_matter(spark, hourly):
    """Hourly sketches merged per day then into one, or at once, or one aggregate over the
    whole table: the same bytes."""
    two_level = spark.sql("""
        SELECT window_percentile_sketch_merge(d) FROM (
          SELECT window_percentile_sketch_merge(s) AS d FROM hourly_latencies
          GROUP BY to_date(hour))""")
    one_level = spark.sql("SELECT window_percentile_sketch_merge(s) FROM hourly_latencies")
    direct = spark.sql(f"""
        SELECT window_percentile_sketch(ms, ts, INTERVAL {WINDOW_HOURS} HOURS)
        FROM (SELECT /*+ REPARTITION(4) */ * FROM latencies)""")
    blobs = {bytes(df.collect()[0][0]) for df in (two_level, one_level, direct)}
    assert len(blobs) == 1 and len(next(iter(blobs))) > 5000


def test_dataframe_functions_and_types(spark, latencies):
    df = spark.table("latencies")
    per_endpoint = df.groupBy("endpoint", F.to_date("ts").alias("day")).agg(
        window_percentile_sketch("ms", "ts", f"{WINDOW_HOURS} hours", eps=0.02).alias("s"))
    # The first day's sketches, read an hour after that day.
    first_day = per_endpoint.where(F.col("day") == datetime.date(2024, 5, 1))
    end = datetime.datetime(2024, 5, 2, 1)
    got = {r.endpoint: (r.p99, r.both) for r in first_day.groupBy("endpoint").agg(
        window_percentile_sketch_estimate(window_percentile_sketch_merge("s"), 0.99, end,
                                          datetime.timedelta(hours=2)).alias("p99"),
        window_percentile_sketch_estimate(window_percentile_sketch_merge("s"), [0.5, 0.99], end,
                                          datetime.timedelta(hours=2)).alias("both"),
    ).collect()}
    start = end - datetime.timedelta(hours=2)
    want = exact_by_endpoint(latencies, lambda ts, _: start <= ts < datetime.datetime(2024, 5, 2))
    assert got == {e: (w[4], [w[2], w[4]]) for e, w in want.items()}
    assert isinstance(next(iter(got.values()))[0], float)
    with pytest.raises(TypeError, match="`sub_window` needs `as_of`"):
        window_percentile_sketch_estimate("s", 0.5, sub_window=3)
    with pytest.raises(TypeError, match="`percentage`"):
        window_percentile_sketch_estimate("s", "p99")
    with pytest.raises(TypeError, match="`eps` must be a number in"):
        window_percentile_sketch("ms", "ts", 3, eps="0.1")


@pytest.mark.parametrize("frame", sorted(FRAMES))
def test_bounds_bracket_the_exact_percentile_in_every_frame(spark, frame):
    rng = np.random.default_rng(11)
    spark.createDataFrame(rows(rng, "heavy-tailed", 400),
                          "id INT, key STRING, ts BIGINT, x DOUBLE") \
        .repartition(3).createOrReplaceTempView("bound_rows")
    over = FRAMES[frame]
    got = spark.sql(f"""
        SELECT approx_window_percentile_bounds(x, ts, 30, {P_SQL}) OVER ({over}) AS b,
               approx_window_percentile(x, ts, 30, {P_SQL}) OVER ({over}) AS p,
               collect_list(struct(ts, x)) OVER ({over}) AS frame
        FROM bound_rows""").collect()
    checked = 0
    for r in got:
        expected = exact_percentiles(window_of(r.frame, 30))
        if expected is None:
            assert r.b is None and r.p is None
            continue
        for b, p, exact in zip(r.b, r.p, expected):
            assert b.lower <= exact <= b.upper and b.estimate == p, (r.frame, b, exact)
        checked += 1
    assert checked > 300


def test_bounds_in_group_by_and_from_python(spark):
    df = spark.createDataFrame(
        [("a", 1, 30), ("a", 2, 10), ("a", 3, 20), ("b", 1, 5), ("b", 9, None)],
        "key STRING, ts INT, ms INT")
    got = {r.key: r.b for r in df.groupBy("key").agg(
        approx_window_percentile_bounds("ms", "ts", 3, 0.5).alias("b")).collect()}
    assert got == {"a": (20, 20, 20), "b": None}
    assert isinstance(got["a"].lower, int)
    running = df.where("key = 'a'").select(approx_window_percentile_bounds(
        "ms", "ts", 2, [0.0, 1.0]).over(Window.orderBy("ts")).alias("b")).collect()
    assert [[tuple(x) for x in r.b] for r in running] == [
        [(30, 30, 30), (30, 30, 30)], [(10, 10, 10), (30, 30, 30)], [(10, 10, 10), (20, 20, 20)]]
    plain = df.where("key = 'a'").select(
        approx_window_percentile("ms", "ts", 2, 0.5).over(Window.orderBy("ts"))).collect()
    assert [r[0] for r in plain] == [30, 10, 10]


def test_nulls(spark):
    row = spark.sql("""
        SELECT window_percentile_sketch_merge(CAST(NULL AS BINARY)) AS merged,
               window_percentile_sketch_estimate(CAST(NULL AS BINARY), 0.5) AS estimate,
               window_percentile_sketch_estimate(window_percentile_sketch(x, ts, 5), 0.5,
                                                 CAST(NULL AS BIGINT)) AS at_null,
               window_percentile_sketch_estimate(window_percentile_sketch(x, ts, 5), 0.5) AS none
        FROM VALUES (1, CAST(NULL AS DOUBLE)) AS t(ts, x)""").collect()[0]
    assert (row.merged, row.estimate, row.at_null, row.none) == (None, None, None, None)


def sketch_sql(window="10", eps="0.01"):
    return (f"(SELECT window_percentile_sketch(x, ts, {window}, {eps}) "
            "FROM VALUES (1, 2.5) AS t(ts, x))")


@pytest.mark.parametrize("query, message", [
    (f"SELECT window_percentile_sketch_merge(s) FROM (SELECT {sketch_sql()} AS s UNION ALL "
     f"SELECT {sketch_sql(eps='0.02')})",
     "window_percentile_sketch_merge: cannot merge percentile sketches of (window, eps) "
     "(10, 0.01) and (10, 0.02)"),
    (f"SELECT window_percentile_sketch_merge(s) FROM (SELECT {sketch_sql()} AS s UNION ALL "
     f"SELECT {sketch_sql(window='11')})",
     "window_percentile_sketch_merge: cannot merge percentile sketches"),
    # Positions never merge with microseconds (a time window of 1 ms spans 1,001 of them):
    # exact and compact sketches.
    (f"SELECT window_percentile_sketch_merge(s) FROM (SELECT {sketch_sql(window='1001')} AS s "
     "UNION ALL SELECT window_percentile_sketch(x, ts, INTERVAL 1 MILLISECOND) "
     "FROM VALUES (TIMESTAMP'2025-01-01 00:00:00', 2.5) AS t(ts, x))",
     "cannot merge percentile sketches of (window, eps) (1001, 0.01) and (1001, 0.01) on "
     "different time axes"),
    ("SELECT window_percentile_sketch_merge(s) FROM (SELECT window_percentile_sketch(id, id, "
     "1000001, 0.1) AS s FROM range(5000) UNION ALL SELECT window_percentile_sketch(id, "
     "timestamp_micros(id), INTERVAL 1 SECOND, 0.1) FROM range(5000))",
     "cannot merge percentile sketches of (window, eps) (1000001, 0.1) and (1000001, 0.1) on "
     "different time axes"),
    ("SELECT window_percentile_sketch_merge(s) FROM (SELECT window_sketch(true, 1, 10) AS s)",
     "window_percentile_sketch_merge: invalid sketch bytes: a count sketch (window_sketch) "
     "is not a percentile sketch (window_percentile_sketch)"),
    ("SELECT window_percentile_sketch_estimate(window_distinct_sketch(1, 1, 10), 0.5)",
     "window_percentile_sketch_estimate: invalid sketch bytes: a distinct-count sketch "
     "(window_distinct_sketch) is not a percentile sketch"),
    (f"SELECT window_distinct_sketch_estimate({sketch_sql()})",
     "window_distinct_sketch_estimate: invalid sketch bytes: a percentile sketch "
     "(window_percentile_sketch) is not a distinct-count sketch"),
    (f"SELECT window_sketch_bounds({sketch_sql()})",
     "window_sketch_bounds: invalid sketch bytes: a percentile sketch "
     "(window_percentile_sketch) is not a count sketch"),
    ("SELECT window_percentile_sketch_estimate(X'0102030405', 0.5)",
     "window_percentile_sketch_estimate: invalid sketch bytes"),
    (f"SELECT window_percentile_sketch_estimate({sketch_sql()}, 0.5, 0)",
     "window_percentile_sketch_estimate: as_of (0) is earlier than the sketch's latest ts (1)"),
    (f"SELECT window_percentile_sketch_estimate({sketch_sql()}, 0.5, TIMESTAMP'2024-01-01')",
     "window_percentile_sketch_estimate: the sketch counts positions but as_of is of type "
     "TIMESTAMP"),
    (f"SELECT window_percentile_sketch_estimate({sketch_sql()}, 0.5, 5, 11)",
     "window_percentile_sketch_estimate: sub_window 11 is longer than the sketch's window"),
])
def test_runtime_errors_name_the_function(spark, query, message):
    with pytest.raises(Exception) as info:
        spark.sql(query).collect()
    assert message in str(info.value)


@pytest.mark.parametrize("query, parameter, index", [
    ("window_percentile_sketch_estimate(42, 0.5)", "requires the \"BINARY\"", 0),
    ("window_percentile_sketch_estimate(s, 1.5)", "`percentage`", None),
    ("window_percentile_sketch_estimate(s, ts)", "`percentage`", None),
    ("window_percentile_sketch_estimate(s, 0.5, 'today')", "requires the (\"TIMESTAMP\"", 2),
    ("window_percentile_sketch_estimate(s, 0.5, ts, 0)", "`sub_window`", None),
    ("window_percentile_sketch(x, ts, 3, 2.0)", "`eps`", None),
    ("window_percentile_sketch('slow', ts, 3)", "requires the (\"NUMERIC\"", 0),
    ("window_percentile_sketch_merge(x)", "requires the \"BINARY\"", 0),
    ("approx_window_percentile_bounds(x, ts, 3, 2.0)", "`percentage`", None),
])
def test_bad_arguments_are_named(spark, query, parameter, index):
    with pytest.raises(Exception) as raised:
        spark.sql(f"""SELECT {query} FROM (SELECT 1.0 AS x, 1 AS ts,
                      window_percentile_sketch(1.0, 1, 3) AS s)""").collect()
    assert parameter in str(raised.value)
    if index is not None:
        assert raised.value.getMessageParameters()["paramIndex"] == parameter_index(index)
