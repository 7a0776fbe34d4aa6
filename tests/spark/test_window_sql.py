"""approx_window_count in SQL window frames, against Spark's exact frames on every row."""
from __future__ import annotations

import datetime

import numpy as np
import pytest

from conftest import exact_counts

ROWS = 12_000


def bursty_events(rng, n):
    """Bernoulli background with dense bursts, so buckets straddle the window edge."""
    events = rng.random(n) < 0.2
    for start in rng.integers(0, n, 15):
        events[start:start + int(rng.integers(50, 600))] = True
    return events


@pytest.fixture(scope="module")
def events_table(spark):
    """Three keys; integral positions with gaps and duplicates; timestamps in seconds."""
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 3, ROWS)
    pos = np.cumsum(rng.choice([0, 1, 1, 1, 2, 4], ROWS))
    events = bursty_events(rng, ROWS)
    base = datetime.datetime(2024, 3, 1)
    shuffle = rng.permutation(ROWS)
    rows = [(int(k), i, int(p), base + datetime.timedelta(seconds=int(p)), bool(e), int(r))
            for i, (k, p, e, r) in enumerate(zip(keys, pos, events, shuffle))]
    df = spark.createDataFrame(
        rows, "key INT, id INT, pos BIGINT, ts TIMESTAMP, v BOOLEAN, shuffle INT")
    df.createOrReplaceTempView("events")
    return df


def assert_within_bound(rows, eps, approx="approx", exact="exact", min_peak=200):
    worst = 0.0
    for r in rows:
        a, e = r[approx], r[exact]
        assert abs(a - e) <= eps * e, f"row {r}: |{a} - {e}| > {eps} * {e}"
        if e:
            worst = max(worst, abs(a - e) / e)
    assert max(r[exact] for r in rows) >= min_peak, "the test should reach counts that merge"
    return worst


@pytest.mark.parametrize("eps", [0.1, 0.01])
def test_bigint_positions_match_exact_range_frame(spark, events_table, eps):
    rows = spark.sql(f"""
        SELECT approx_window_count(v, pos, 5000, {eps})
                 OVER (PARTITION BY key ORDER BY pos) AS approx,
               count_if(v) OVER (PARTITION BY key ORDER BY pos
                                 RANGE BETWEEN 4999 PRECEDING AND CURRENT ROW) AS exact
        FROM events""").collect()
    assert len(rows) == ROWS
    assert_within_bound(rows, eps)


@pytest.mark.parametrize("window, eps", [("INTERVAL 90 MINUTES", 0.05), ("'3 hours'", 0.01)])
def test_timestamps_match_exact_range_frame(spark, events_table, window, eps):
    interval = window.strip("'") if window.startswith("'") else window[len("INTERVAL "):]
    rows = spark.sql(f"""
        SELECT approx_window_count(v, ts, {window}, {eps})
                 OVER (PARTITION BY key ORDER BY ts) AS approx,
               count_if(v) OVER (PARTITION BY key ORDER BY ts
                                 RANGE BETWEEN INTERVAL '{interval}' PRECEDING AND CURRENT ROW)
                 AS exact
        FROM events""").collect()
    assert_within_bound(rows, eps)


def test_timestamp_window_includes_its_left_edge(spark):
    rows = spark.sql("""
        SELECT approx_window_count(v, ts, INTERVAL 10 MINUTES) OVER (ORDER BY ts) AS n
        FROM VALUES (true, TIMESTAMP'2024-01-01 10:00:00'),
                    (true, TIMESTAMP'2024-01-01 10:10:00'),
                    (false, TIMESTAMP'2024-01-01 10:10:00.000001') AS t(v, ts)
        ORDER BY ts""").collect()
    assert [r.n for r in rows] == [1, 2, 1]


@pytest.mark.parametrize("ts_expr, window, exact_order, exact_range", [
    ("CAST(pos AS INT)", "5000", "t", "4999"),
    ("CAST(pos AS SMALLINT)", "CAST(5000 AS SMALLINT)", "t", "4999"),
    ("CAST(ts AS TIMESTAMP_NTZ)", "INTERVAL 1 HOUR", "t", "INTERVAL 1 HOUR"),
    # About 30 days with ~400 rows each, so the 2-day window slides and days are peers.
    # The exact frame orders by the day number: Spark 3.5 has no interval RANGE over DATE.
    ("date_add(DATE'2024-03-01', CAST(pos DIV 600 AS INT))", "INTERVAL 1 DAY", "unix_date(t)",
     "1"),
])
def test_every_time_type(spark, events_table, ts_expr, window, exact_order, exact_range):
    rows = spark.sql(f"""
        SELECT t, approx_window_count(CAST(v AS INT), t, {window}, 0.05)
                 OVER (PARTITION BY key ORDER BY t) AS approx,
               count_if(v) OVER (PARTITION BY key ORDER BY {exact_order}
                                 RANGE BETWEEN {exact_range} PRECEDING AND CURRENT ROW) AS exact
        FROM (SELECT *, {ts_expr} AS t FROM events)""").collect()
    assert_within_bound(rows, 0.05, min_peak=100)
    assert len({r.t for r in rows}) > 20  # the window slides over many distinct times


def test_arguments_read_from_columns_answer_as_computed_ones(spark):
    """Every family's update reads a `ts` or numeric `x` that is a column without boxing,
    and evaluates any other expression: both give the same answers, NULLs included, in
    GROUP BY and (for `x`) in a running frame."""
    spark.range(3000).selectExpr(
        "id % 3 AS g", "IF(id % 97 = 5, NULL, id DIV 2) AS ts",
        "IF(id % 11 = 0, NULL, CAST((id * 7919) % 1000 AS DOUBLE) / 8) AS x",
    ).createOrReplaceTempView("args")
    calls = ["approx_window_count(x > 50, {ts}, 400)",
             "approx_window_sum(CAST({x} AS BIGINT), {ts}, 400)",
             "approx_window_count_distinct({x}, {ts}, 400)",
             "approx_window_percentile({x}, {ts}, 400, array(0.1, 0.5, 0.99))",
             "approx_window_stddev({x}, {ts}, 400)", "approx_window_avg({x}, {ts}, 400)",
             "approx_window_top_k(CAST({x} AS INT) % 7, {ts}, 400, 3)",
             "approx_window_sample({x}, {ts}, 400, 3)", "window_filter_sketch({x}, {ts}, 400)"]

    def answers(ts, x, over):
        picks = ", ".join(f"{c.format(ts=ts, x=x)}{over} AS a{i}" for i, c in enumerate(calls))
        if over:
            query = f"SELECT g, ts, x, {picks} FROM args ORDER BY g, ts, x"
        else:
            query = f"SELECT g, {picks} FROM args GROUP BY g ORDER BY g"
        return [tuple(r) for r in spark.sql(query).collect()]

    assert answers("ts", "x", "") == answers("CAST(ts AS INT)", "x + 0.0", "")
    # A running frame ordered by the column itself (another `ts` is not known to be in order).
    over = " OVER (PARTITION BY g ORDER BY ts)"
    assert answers("ts", "x", over) == answers("ts", "x + 0.0", over)


def test_rows_frame_counts_rows_up_to_the_current_one(spark, events_table):
    eps = 0.05
    rows = spark.sql(f"""
        SELECT key, pos, v, approx_window_count(v, pos, 3000, {eps}) OVER (
                 PARTITION BY key ORDER BY pos, id
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS approx
        FROM events ORDER BY key, pos, id""").collect()
    for key in range(3):
        part = [r for r in rows if r.key == key]
        exact = exact_counts([r.pos for r in part], [r.v for r in part], 3000)
        merged = [{"approx": r.approx, "exact": int(e)} for r, e in zip(part, exact)]
        assert_within_bound(merged, eps, min_peak=150)


PEERS = """VALUES (1, true, 1), (1, true, 2), (2, false, 3), (2, true, 4), (2, true, 5),
                  (5, true, 6) AS t(ts, v, id)"""


@pytest.mark.parametrize("frame, expected", [
    # RANGE (the default frame): rows sharing a ts are peers, each counts all of them.
    ("ORDER BY ts", [2, 2, 4, 4, 4, 1]),
    ("ORDER BY ts RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", [2, 2, 4, 4, 4, 1]),
    # ROWS: only the rows up to the current one, peers after it left out.
    ("ORDER BY ts, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", [1, 2, 2, 3, 4, 1]),
    # A sliding frame: the last three rows, counted in the window ending at the newest.
    ("ORDER BY ts, id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW", [1, 2, 2, 2, 2, 1]),
])
def test_peers_and_frames_count_exactly(spark, frame, expected):
    """Small counts are exact, so a peer counted wrongly shows: window 3, (now - 3, now]."""
    rows = spark.sql(f"""SELECT id, approx_window_count(v, ts, 3) OVER ({frame}) AS n
                         FROM {PEERS}""").collect()
    assert [r.n for r in sorted(rows, key=lambda r: r.id)] == expected


def test_sliding_rows_frame_matches_brute_force(spark, events_table):
    """The window-frames guide: a sliding frame is correct (if slow): the count in the sketch's window
    among the frame's rows, ending at the frame's newest pos."""
    eps, window, frame = 0.05, 400, 600
    rows = spark.sql(f"""
        SELECT key, pos, v, approx_window_count(v, pos, {window}, {eps}) OVER (
                 PARTITION BY key ORDER BY pos, id
                 ROWS BETWEEN {frame - 1} PRECEDING AND CURRENT ROW) AS approx
        FROM events WHERE id < 6000 ORDER BY key, pos, id""").collect()
    checked = []
    for key in range(3):
        part = [r for r in rows if r.key == key]
        pos = np.array([r.pos for r in part])
        v = np.array([r.v for r in part])
        for i, r in enumerate(part):
            lo = max(0, i - frame + 1)
            inside = pos[lo:i + 1] > pos[i] - window
            checked.append({"approx": r.approx, "exact": int(np.sum(v[lo:i + 1] & inside))})
    assert_within_bound(checked, eps, min_peak=100)


def test_nulls(spark):
    rows = spark.sql("""
        SELECT ts, approx_window_count(v, ts, 3) OVER (ORDER BY ts) AS n
        FROM VALUES (NULL, true), (1, true), (2, NULL), (3, true), (4, NULL), (7, NULL)
          AS t(ts, v)
        ORDER BY ts NULLS FIRST""").collect()
    # NULL ts: ignored (nothing counted yet); NULL v: no event, but the window moves on.
    assert [(r.ts, r.n) for r in rows] == [(None, 0), (1, 1), (2, 1), (3, 2), (4, 1), (7, 0)]


def test_empty_input_counts_zero(spark):
    assert spark.sql("SELECT approx_window_count(v, pos, 10) AS n FROM events WHERE false") \
        .collect()[0].n == 0
    assert spark.sql("SELECT approx_window_count(NULL, pos, 10) AS n FROM events WHERE id < 3") \
        .collect()[0].n == 0


def running_counts_any_order(rows, window):
    """Exact count per row when rows arrive in the listed order: events seen so far within
    (now - window, now], now being the largest pos seen so far."""
    out, seen_pos, seen_v, now = [], [], [], None
    for r in rows:
        seen_pos.append(r.pos)
        seen_v.append(r.v)
        now = r.pos if now is None else max(now, r.pos)
        out.append(sum(1 for p, v in zip(seen_pos, seen_v) if v and p > now - window))
    return out


@pytest.mark.parametrize("order", ["pos DESC, id DESC", "shuffle"])
def test_frames_in_other_orders_stay_within_the_bound(spark, events_table, order):
    eps, window = 0.05, 3000
    rows = spark.sql(f"""
        SELECT key, pos, v, approx_window_count(v, pos, {window}, {eps})
                 OVER (PARTITION BY key ORDER BY {order}) AS approx
        FROM events WHERE id < 3000 ORDER BY key, {order}""").collect()
    for key in range(3):
        part = [r for r in rows if r.key == key]
        exact = running_counts_any_order(part, window)
        merged = [{"approx": r.approx, "exact": e} for r, e in zip(part, exact)]
        assert_within_bound(merged, eps, min_peak=100)


def optimized_plan(df) -> str:
    return df._jdf.queryExecution().optimizedPlan().toString()


def test_histogram_only_in_running_frames_ordered_by_ts(spark, events_table):
    def plan(over):
        return optimized_plan(spark.sql(
            f"SELECT approx_window_count(v, pos, 100, 0.05) OVER ({over}) FROM events"))

    assert "0.05, true" in plan("PARTITION BY key ORDER BY pos")
    assert "0.05, true" in plan(
        "ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW")
    for over in ("ORDER BY pos DESC", "ORDER BY shuffle", "ORDER BY id",
                 "ORDER BY pos ROWS BETWEEN 10 PRECEDING AND CURRENT ROW"):
        assert "0.05, false" in plan(over), over


@pytest.fixture
def merges_forced(spark):
    """Adaptive execution coalesces small shuffles into one partition; keep them apart so
    partial states really merge."""
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    yield
    spark.conf.unset("spark.sql.adaptive.coalescePartitions.enabled")


@pytest.mark.parametrize("eps", [0.1, 0.01])
@pytest.mark.parametrize("group", ["key", "id % 500"])
def test_group_by_on_shuffled_partitions_matches_exact(spark, events_table, merges_forced,
                                                       eps, group):
    window = 4000
    approx = spark.sql(f"""
        SELECT {group} AS g, approx_window_count(v, pos, {window}, {eps}) AS approx
        FROM (SELECT /*+ REPARTITION(7) */ * FROM events ORDER BY shuffle)
        GROUP BY {group}""")
    exact = spark.sql(f"""
        WITH latest AS (SELECT {group} AS g, max(pos) AS now FROM events GROUP BY {group})
        SELECT g, count_if(v AND pos > now - {window}) AS exact
        FROM (SELECT *, {group} AS g FROM events) JOIN latest USING (g) GROUP BY g""")
    rows = approx.join(exact, "g").collect()
    assert len(rows) == (3 if group == "key" else 500)
    assert_within_bound(rows, eps, min_peak=5 if group != "key" else 200)


def test_global_aggregate_over_timestamps(spark, events_table, merges_forced):
    row = spark.sql("""
        WITH shuffled AS (SELECT /*+ REPARTITION(5) */ * FROM events ORDER BY shuffle)
        SELECT approx_window_count(v, ts, INTERVAL 2 HOURS, 0.02) AS approx,
               (SELECT count_if(v AND ts >= (SELECT max(ts) FROM events) - INTERVAL 2 HOURS)
                FROM events) AS exact
        FROM shuffled""").collect()
    assert_within_bound(row, 0.02, min_peak=300)


def test_scala_functions_object(spark, events_table):
    """windowsketch.spark.functions, the JVM DataFrame API, builds the same expression."""
    try:
        from pyspark.sql.classic.column import Column
    except ImportError:  # Spark 3.5: one Column class
        from pyspark.sql.column import Column
    from pyspark.sql.window import Window

    from windowsketch import _scala_object

    scala_functions = _scala_object(spark, "windowsketch.spark.functions")
    by_name = Column(scala_functions.approx_window_count("v", "pos", 5000, 0.05))
    w = Window.partitionBy("key").orderBy("pos")
    got = events_table.select(by_name.over(w).alias("n")).orderBy("key", "pos", "id")
    expected = spark.sql("""
        SELECT approx_window_count(v, pos, 5000, 0.05) OVER (PARTITION BY key ORDER BY pos) n
        FROM events ORDER BY key, pos, id""")
    assert [r.n for r in got.collect()] == [r.n for r in expected.collect()]
