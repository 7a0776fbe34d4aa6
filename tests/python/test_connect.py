"""The DataFrame function under Spark Connect: a local Connect server started by the client,
in its own process (it needs its own JVM, apart from the test session's)."""
from __future__ import annotations

import textwrap

import pytest

from conftest import SPARK_LINE, local_connect_port, run_in_own_process

SCRIPT = textwrap.dedent("""
    import datetime
    from pyspark.sql import SparkSession, Window
    import windowsketch
    from windowsketch.functions import approx_window_count

    # Two shuffle partitions, not 200: each streaming micro-batch below runs a task per
    # state partition (over a minute per line with the default).
    builder = (SparkSession.builder.remote("local[2]").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    spark = windowsketch.configure(builder).getOrCreate()
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    base = datetime.datetime(2024, 1, 1)
    df = spark.createDataFrame(
        [(i % 2, i, base + datetime.timedelta(seconds=i), i % 3 == 0) for i in range(40)],
        "key INT, pos BIGINT, ts TIMESTAMP, v BOOLEAN")
    w_pos = Window.partitionBy("key").orderBy("pos")
    w_ts = Window.partitionBy("key").orderBy("ts")
    got = df.select(
        "key", "pos",
        approx_window_count("v", "pos", 6).over(w_pos).alias("by_pos"),
        approx_window_count("v", "ts", datetime.timedelta(seconds=5)).over(w_ts).alias("by_td"),
        approx_window_count("v", "ts", "5 seconds", eps=0.1).over(w_ts).alias("by_str"),
    ).orderBy("key", "pos").collect()
    for r in got:
        expected = sum(1 for p in range(r.pos - 5, r.pos + 1)
                       if p >= 0 and p % 2 == r.key and p % 3 == 0)
        assert r.by_pos == r.by_td == r.by_str == expected, (r, expected)
    print("CONNECT OK", len(got))

    # Sums, bounds and sketch columns go through Connect too.
    from windowsketch.functions import (approx_window_count_bounds, approx_window_sum,
                                        window_sketch, window_sketch_bounds,
                                        window_sketch_estimate, window_sketch_merge)
    rows = df.select(
        "key", "pos",
        approx_window_sum("pos", "pos", 6).over(w_pos).alias("s"),
        approx_window_count_bounds("v", "pos", 6).over(w_pos).alias("b"),
    ).collect()
    for r in rows:
        inside = [p for p in range(r.pos - 5, r.pos + 1) if p >= 0 and p % 2 == r.key]
        count = sum(1 for p in inside if p % 3 == 0)
        assert r.s == sum(inside) and tuple(r.b) == (count, count, count), (r, inside)
    merged = (df.groupBy("key").agg(window_sketch("v", "pos", 12).alias("s"))
              .agg(window_sketch_merge("s").alias("m")))
    row = merged.select(window_sketch_estimate("m").alias("n"),
                        window_sketch_bounds("m", 40, 10).alias("b")).collect()[0]
    assert row.n == 4 and tuple(row.b) == (3, 3, 3), row  # {30, 33, 36, 39}; {33, 36, 39}
    print("CONNECT SKETCHES OK", len(rows))

    # Distinct counts and their sketch columns: what approx_count_distinct gives over the
    # same rows (the last 10 positions of a key are its last 5 rows).
    from pyspark.sql import functions as F
    from windowsketch.functions import (approx_window_count_distinct, window_distinct_sketch,
                                        window_distinct_sketch_estimate,
                                        window_distinct_sketch_merge)
    distinct = df.select(
        approx_window_count_distinct(F.col("pos") % 7, "pos", 10).over(w_pos).alias("ours"),
        F.approx_count_distinct(F.col("pos") % 7).over(w_pos.rowsBetween(-4, 0)).alias("spark"),
    ).collect()
    assert all(r.ours == r.spark for r in distinct) and max(r.ours for r in distinct) >= 4
    m = (df.groupBy("key").agg(window_distinct_sketch("pos", "pos", 12).alias("s"))
         .agg(window_distinct_sketch_merge("s").alias("m")))
    got = m.select(window_distinct_sketch_estimate("m").alias("n"),
                   window_distinct_sketch_estimate("m", 45, 10).alias("later")).collect()[0]
    want = [df.filter(f"pos > {lo} AND pos <= {hi}").agg(F.approx_count_distinct("pos"))
            .collect()[0][0] for lo, hi in [(27, 39), (35, 45)]]
    assert [got.n, got.later] == want and want[0] >= 10, (got, want)
    print("CONNECT DISTINCT OK", len(distinct))

    # Percentiles: percentile_approx over exactly the same rows (the last 10 positions of
    # a key are its last 5 rows), scalar and array forms.
    from windowsketch.functions import approx_window_percentile
    pct = df.select(
        approx_window_percentile(F.col("pos") % 7, "pos", 10, [0.5, 0.9]).over(w_pos)
        .alias("ours"),
        F.percentile_approx(F.col("pos") % 7, [0.5, 0.9], 100000)
        .over(w_pos.rowsBetween(-4, 0)).alias("spark"),
    ).collect()
    assert all(list(r.ours) == list(r.spark) for r in pct), pct
    from windowsketch.functions import (approx_window_percentile_bounds, window_percentile_sketch,
                                        window_percentile_sketch_estimate,
                                        window_percentile_sketch_merge)
    b = df.select(approx_window_percentile_bounds(F.col("pos") % 7, "pos", 10, 0.5).over(w_pos)
                  .alias("b")).collect()
    assert [r.b.lower for r in b] == [r.ours[0] for r in pct] == [r.b.upper for r in b]
    m = (df.groupBy("key").agg(window_percentile_sketch("pos", "pos", 12).alias("s"))
         .agg(window_percentile_sketch_merge("s").alias("m")))
    got = m.select(window_percentile_sketch_estimate("m", [0.0, 1.0]).alias("range"),
                   window_percentile_sketch_estimate("m", 0.0, 45, 10).alias("later")).collect()[0]
    assert list(got.range) == [28.0, 39.0] and got.later == 36.0, got
    print("CONNECT PERCENTILES OK", len(pct))

    # Moments: Spark's avg and stddev over exactly the same rows (windows this small are
    # held exactly), and the sketch columns.
    from windowsketch.functions import (approx_window_avg, approx_window_stddev,
                                        window_moments_sketch, window_moments_sketch_estimate,
                                        window_moments_sketch_merge)
    mom = df.select(
        approx_window_avg("pos", "pos", 10).over(w_pos).alias("a"),
        F.avg("pos").over(w_pos.rowsBetween(-4, 0)).alias("spark_a"),
        approx_window_stddev("pos", "pos", 10).over(w_pos).alias("sd"),
        F.stddev("pos").over(w_pos.rowsBetween(-4, 0)).alias("spark_sd")).collect()
    assert all(abs(r.a - r.spark_a) < 1e-9 and (r.sd is None) == (r.spark_sd is None) and
               (r.sd is None or abs(r.sd - r.spark_sd) < 1e-9) for r in mom), mom
    m = (df.groupBy("key").agg(window_moments_sketch("pos", "pos", 12).alias("s"))
         .agg(window_moments_sketch_merge("s").alias("m")))
    got = m.select(window_moments_sketch_estimate("m", "avg").alias("a"),
                   window_moments_sketch_estimate("m", "var_pop", 39, 2).alias("v")).collect()[0]
    assert (got.a, got.v) == (33.5, 0.25), got  # positions 28..39; then 38 and 39
    print("CONNECT MOMENTS OK", len(mom))

    # Top-k: exact in a running frame (the last 10 positions of a key are its last 5 rows),
    # and the sketch columns.
    from windowsketch.functions import (approx_window_top_k, window_top_k_sketch,
                                        window_top_k_sketch_estimate, window_top_k_sketch_merge)
    tops = df.select("key", "pos", approx_window_top_k(F.col("pos") % 3, "pos", 10, 1).over(w_pos)
                     .alias("top")).collect()
    for r in tops:
        window = [p % 3 for p in range(r.pos - 9, r.pos + 1) if p >= 0 and p % 2 == r.key]
        best = max(window.count(v) for v in set(window))
        assert (r.top[0].item, r.top[0]["count"]) == (
            min(v for v in set(window) if window.count(v) == best), best), (r, window)
    m = (df.groupBy("key").agg(window_top_k_sketch("v", "pos", 12).alias("s"))
         .agg(window_top_k_sketch_merge("s").alias("m")))
    got = m.select(window_top_k_sketch_estimate("m", 2).alias("top")).collect()[0]
    assert [(t.item, t["count"]) for t in got.top] == [("false", 8), ("true", 4)], got
    print("CONNECT TOP K OK", len(tops))

    # Samples: a window of at most k rows gives them all, oldest first.
    from windowsketch.functions import approx_window_sample
    samples = df.select("key", "pos", approx_window_sample("pos", "pos", 10, 5).over(w_pos)
                        .alias("s")).collect()
    assert all(r.s == [p for p in range(r.pos - 9, r.pos + 1) if p >= 0 and p % 2 == r.key]
               for r in samples), samples
    print("CONNECT SAMPLES OK", len(samples))

    # Filters: pos % 4 recurs every 4 positions, inside a window of 6 and not of 4.
    from windowsketch.functions import (approx_window_seen, window_filter_contains,
                                        window_filter_sketch)
    seen = df.select("pos", approx_window_seen(F.col("pos") % 4, "pos", 6).over(
        Window.orderBy("pos")).alias("s6"), approx_window_seen(F.col("pos") % 4, "pos", 4).over(
        Window.orderBy("pos")).alias("s4")).collect()
    assert all(r.s6 == (r.pos >= 4) and r.s4 is False for r in seen), seen
    filt = df.agg(window_filter_sketch("pos", "pos", 5).alias("f"))
    answers = filt.select(window_filter_contains("f", 38), window_filter_contains("f", 30),
                          window_filter_contains("f", 38, 40, 3)).collect()[0]
    assert tuple(answers) == (True, False, True), answers
    print("CONNECT FILTERS OK", len(seen))

    try:
        windowsketch.register(spark)
    except RuntimeError as e:
        print("REGISTER REFUSED:", e)

    # sliding_window through the server's relation plugin: a stream of files, every row
    # against the windows (T - 10, T] of the positions, as on a classic session.
    import json, math, os, tempfile
    from windowsketch import live
    from windowsketch.streaming import sliding_window
    source = tempfile.mkdtemp()
    batches = [[("a", 1, 5), ("a", 2, None), ("a", 3, 7), ("a", 9, 1), ("a", 12, 4), ("a", 30, 9)],
               [("z", 1000, None)], [("z", 1001, None)]]
    for i, rows in enumerate(batches):
        path = os.path.join(source, f"{i}.json")
        with open(path, "w") as f:
            f.write("\\n".join(json.dumps({"k": k, "pos": p, "x": x}) for k, p, x in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    events = (spark.readStream.schema("k STRING, pos BIGINT, x BIGINT")
              .option("maxFilesPerTrigger", 1).json(source))
    windowed = sliding_window(events, "k", "pos", 10, 5, lateness=2, aggregates=[
        live.count(F.col("x").isNotNull()).alias("n"), live.sum("x"),
        live.distinct("x"), live.percentile("x", 0.5).alias("median"), live.moments("x"),
        live.top_k("x", 1), live.sample("x", 5, seed=3)])
    try:
        windowed.writeStream.outputMode("update")
    except ValueError as e:
        print("UPDATE REFUSED:", e)
    query = (windowed.writeStream.format("memory").queryName("live_connect")
             .option("checkpointLocation", tempfile.mkdtemp()).start())
    query.processAllAvailable()
    query.stop()
    emitted = spark.sql("SELECT * FROM live_connect WHERE k = 'a'").collect()
    got = sorted((r.window_end, r.n.estimate, r.sum.estimate, r.distinct, r.median)
                 for r in emitted)
    tops = sorted((r.window_end, [(t.item, t["count"]) for t in r.top_k]) for r in emitted)
    assert tops == [(5, [(5, 1)]), (10, [(1, 1)]), (15, [(1, 1)]), (20, [(4, 1)]), (25, []),
                    (30, [(9, 1)]), (35, [(9, 1)]), (40, [])], tops
    averages = sorted((r.window_end, r.moments.avg) for r in emitted)
    assert [(t, None if a is None else round(a, 9)) for t, a in averages] == [
        (5, 6.0), (10, 4.333333333), (15, 2.5), (20, 4.0), (25, None), (30, 9.0), (35, 9.0),
        (40, None)], averages
    # 5 -> {5, 7}; 10 -> {5, 7, 1}; 15 -> {1, 4}; 20 -> {4}; 25: the last row; 30, 35 -> {9}.
    assert got == [(5, 2, 12, 2, 5.0), (10, 3, 13, 3, 5.0), (15, 2, 5, 2, 1.0),
                   (20, 1, 4, 1, 4.0), (25, 0, 0, 0, None), (30, 1, 9, 1, 9.0),
                   (35, 1, 9, 1, 9.0), (40, 0, 0, 0, None)], got
    # Windows of at most 5 values: the sample is all of them, oldest first.
    samples = sorted((r.window_end, r["sample"]) for r in emitted)
    assert samples == [(5, [5, 7]), (10, [5, 7, 1]), (15, [1, 4]), (20, [4]), (25, []),
                       (30, [9]), (35, [9]), (40, [])], samples
    print("CONNECT SLIDING WINDOW OK", len(got))

    # A TIMESTAMP ts and a restart from the checkpoint between the files: every emitted row
    # of both runs against its window [T - 10 s, T]: all five statistics, two percentiles
    # (rank ceil(p n)) and the two most frequent values (then by value).
    import statistics
    tsource, tcheck = tempfile.mkdtemp(), tempfile.mkdtemp()
    t0 = datetime.datetime(2024, 1, 1)
    timed = [(1, 5.0), (2, 7.0), (3, 1.0), (9, 4.0), (10, 4.0), (14, 8.0), (15, 9.0),
             (20, 2.0), (31, 2.0)]
    def write_timed(i, rows):
        path = os.path.join(tsource, f"{i}.json")
        with open(path, "w") as f:
            f.write("\\n".join(json.dumps({"k": k, "ts": (t0 + datetime.timedelta(seconds=s))
                                          .isoformat(), "x": x}) for k, s, x in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    timed_events = (spark.readStream.schema("k STRING, ts TIMESTAMP, x DOUBLE")
                    .option("maxFilesPerTrigger", 1).json(tsource).withWatermark("ts", "2 seconds"))
    timed_window = sliding_window(timed_events, "k", "ts", "10 seconds", "5 seconds", [
        live.moments("x"), live.percentile("x", [0.5, 0.9]).alias("p"),
        live.top_k("x", 2).alias("top")])
    timed_out = tempfile.mkdtemp()  # a file sink: the memory sink cannot restart
    for run_index, files in enumerate([[[("a", s, x) for s, x in timed[:5]]],
                                       [[("a", s, x) for s, x in timed[5:]], [("z", 100, 0.0)]]]):
        for i, rows in enumerate(files):
            write_timed(2 * run_index + i, rows)
        q = (timed_window.writeStream.format("parquet").option("path", timed_out)
             .option("checkpointLocation", tcheck).start())
        q.processAllAvailable()
        q.stop()
    emitted = spark.read.parquet(timed_out).where("k = 'a'").collect()
    ends = sorted(int((r.window_end - t0).total_seconds()) for r in emitted)
    assert ends == list(range(5, 50, 5)), ends  # each once, 45 the first empty window
    for r in emitted:
        end = int((r.window_end - t0).total_seconds())
        xs = sorted(x for s, x in timed if end - 10 <= s <= end)
        if not xs:
            assert list(r.moments) == [None] * 5 and r.p is None and r.top == [], r
            continue
        want = [statistics.fmean(xs), statistics.pvariance(xs),
                statistics.variance(xs) if len(xs) > 1 else None, statistics.pstdev(xs),
                statistics.stdev(xs) if len(xs) > 1 else None]
        assert all((w is None and g is None) or abs(g - w) < 1e-9
                   for g, w in zip(r.moments, want)), (end, r.moments, want)
        assert list(r.p) == [xs[max(math.ceil(q * len(xs)) - 1, 0)] for q in (0.5, 0.9)], (end, r.p)
        counts = sorted(((-xs.count(x), x) for x in set(xs)))[:2]
        assert [(t.item, t["count"]) for t in r.top] == [(x, -c) for c, x in counts], (end, r.top)
    print("CONNECT TIMESTAMP RESTART OK", len(emitted))

    # sliding_counts runs as sliding_window with one count: its columns, and with thresholds
    # one row per certified crossing (above 2: 3 events at 10, 2 at 15; below 2: 2 at 5, 1 at 20).
    from windowsketch.streaming import sliding_counts
    def run(frame, name):
        q = (frame.writeStream.format("memory").queryName(name)
             .option("checkpointLocation", tempfile.mkdtemp()).start())
        q.processAllAvailable()
        q.stop()
        return spark.sql(f"SELECT * FROM {name} WHERE k = 'a' ORDER BY window_end").collect()
    counts = sliding_counts(events, "k", "pos", 10, 5, v=F.col("x").isNotNull(), lateness=2)
    assert counts.columns == ["k", "window_end", "estimate", "lower", "upper"], counts.columns
    assert [(r.window_end, r.estimate) for r in run(counts, "counts_connect")] == [
        (t, n) for t, n, *_ in got]
    alerts = sliding_counts(events, "k", "pos", 10, 5, v=F.col("x").isNotNull(), lateness=2,
                            alert_above=2, alert_below=2)
    fired = [(r.window_end, r.estimate, r.alert, r.crossing) for r in run(alerts, "alerts_connect")]
    assert fired == [(5, 2, "below", "rise"), (10, 3, "above", "rise"),
                     (15, 2, "above", "fall"), (20, 1, "below", "fall")], fired
    try:
        sliding_counts(events, "k", "pos", "10 minutes", 5, lateness=2)
    except ValueError as e:
        print("CONNECT SLIDING COUNTS REFUSED:", e)
    try:
        sliding_window(events, "k", "pos", 10, 5, [live.count("x")], lateness=2)
    except ValueError as e:
        print("CONNECT SLIDING WINDOW REFUSED:", e)

    # drop_duplicates_within through the same plugin: a@1 delivered, then a@2..9 within 10
    # positions of it dropped, a@12 (11 after) and a@30 delivered; z@1001 is z@1000's copy.
    from windowsketch.streaming import drop_duplicates_within
    unique = drop_duplicates_within(events, "k", "pos", 10, lateness=2)
    assert unique.columns == ["k", "pos", "x"], unique.columns
    q = (unique.writeStream.format("memory").queryName("dedup_connect")
         .option("checkpointLocation", tempfile.mkdtemp()).start())
    q.processAllAvailable()
    q.stop()
    kept = sorted((r.k, r.pos) for r in spark.sql("SELECT * FROM dedup_connect").collect())
    assert kept == [("a", 1), ("a", 12), ("a", 30), ("z", 1000)], kept
    print("CONNECT DEDUP OK", len(kept))
    try:
        drop_duplicates_within(events, "k", "pos", 10, fpp=0.7, lateness=2)
    except ValueError as e:
        print("CONNECT DEDUP REFUSED:", e)
    spark.stop()
""")


@pytest.mark.skipif(
    SPARK_LINE == "3.5",
    reason="pyspark 3.5 does not bundle the Spark Connect server: remote('local') fetches "
           "org.apache.spark:spark-connect_2.12 from Maven, which this machine cannot reach")
def test_dataframe_function_under_spark_connect(tmp_path):
    with local_connect_port():
        out = run_in_own_process(SCRIPT, tmp_path)
    assert "CONNECT OK 40" in out and "CONNECT SKETCHES OK 40" in out
    assert "CONNECT DISTINCT OK 40" in out and "CONNECT PERCENTILES OK 40" in out
    assert "CONNECT MOMENTS OK 40" in out and "CONNECT TOP K OK 40" in out
    assert "CONNECT SAMPLES OK 40" in out
    assert "REGISTER REFUSED: windowsketch.register() needs a classic SparkSession" in out
    assert "CONNECT SLIDING WINDOW OK 8" in out and "CONNECT TIMESTAMP RESTART OK 9" in out
    assert ("UPDATE REFUSED: sliding_window emits final rows, each (key, window_end) once: "
            "write it in append mode") in out
    assert ("CONNECT SLIDING WINDOW REFUSED: sliding_window: count `count`: its column must be "
            "BOOLEAN (which rows are events), got BIGINT") in out
    assert "CONNECT DEDUP OK 4" in out
    assert ("CONNECT DEDUP REFUSED: drop_duplicates_within: `fpp` must be in [1.0E-9, 0.5], "
            "got 0.7") in out
    assert ("CONNECT SLIDING COUNTS REFUSED: sliding_counts: `window` must be a positive number "
            "of positions for an integral `ts`, got '10 minutes'") in out
