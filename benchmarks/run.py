"""The windowsketch benchmark harness: speed, memory and accuracy, each side by side with
what a user would write instead, in the same process.

    python benchmarks/run.py [--quick] [--only SECTIONS] [--out DIR]

writes DIR/report.md, DIR/results.csv and PNG plots (default DIR: benchmarks/report).
--quick runs small sizes in a minute or two (CI runs it to keep the harness working);
the committed full report is `python benchmarks/run.py --out docs/performance`.
"""
from __future__ import annotations

import argparse
import csv
import glob
import gzip
import math
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED_DATA = os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "data")


@dataclass
class Sizes:
    core_rows: int
    window_rows: int
    windows: list
    sliding_budget: int  # rows x frame the exact sliding frame may process
    group_rows: int
    group_keys: int
    state_events: int
    state_windows: list
    synthetic_rows: int
    stream_keys: int
    stream_events: int
    stream_files: int  # micro-batches of the Structured Streaming state section
    churn_keys: int
    churn_events: int
    churn_batches: int
    live_warm_up: bool  # run every live query once before the measured run
    live_each_family: bool  # sliding_window with each family alone, beside all six
    stored_sketches: int
    column_sketches: int
    sum_rows: int
    percentile_rows: int
    percentile_window: int
    percentile_sliding_rows: int  # rows percentile_approx's sliding frame is timed on
    percentile_keys: list
    moments_rows: int
    moments_window: int
    moments_sliding_window: int  # the window stddev's sliding frame is timed at
    moments_sliding_rows: int
    moments_keys: list
    top_k_rows: int
    top_k_window: int
    top_k_sliding_rows: int
    top_k_state_rows: int
    percentile_state_rows: list
    memory_rows: list       # rows in one window, for each family's heap per group
    bounded_frame_rows: int  # rows of the running frames past the exact limits
    big_window_rows: int     # rows in two keys' one window, in a 1 GB driver
    sample_rows: int
    sample_window: int
    sample_sliding_rows: int
    sample_state_rows: int   # rows of the sample sketch over a window of 10^9
    sample_group_rows: int
    sample_keys: list
    filter_rows: int         # rows of the running frames of approx_window_seen
    filter_window: int
    filter_distinct: list    # distinct values of one window, for the filter's bytes
    dedup_ids: int           # distinct ids of the de-duplicated stream (and 25% more rows)
    dedup_batches: int       # its micro-batches


QUICK = Sizes(core_rows=300_000, window_rows=20_000, windows=[10**3, 10**4],
              sliding_budget=10**7, group_rows=40_000, group_keys=10_000,
              state_events=100_000, state_windows=[10**3, 10**6, 10**9],
              synthetic_rows=50_000, stream_keys=100, stream_events=5_000, stream_files=2,
              churn_keys=2_500, churn_events=10_000, churn_batches=2, live_warm_up=False,
              live_each_family=False, stored_sketches=2_000,
              column_sketches=10_000, sum_rows=40_000, percentile_rows=10_000,
              percentile_window=1_000, percentile_sliding_rows=1_000, percentile_keys=[10**3],
              moments_rows=40_000, moments_window=5_000, moments_sliding_window=1_000,
              moments_sliding_rows=1_000, moments_keys=[10**3],
              top_k_rows=10_000, top_k_window=1_000, top_k_sliding_rows=500,
              top_k_state_rows=20_000, percentile_state_rows=[10**5, 10**6],
              memory_rows=[10**3, 10**4], bounded_frame_rows=40_000, big_window_rows=100_000,
              sample_rows=10_000, sample_window=1_000, sample_sliding_rows=500,
              sample_state_rows=20_000, sample_group_rows=40_000, sample_keys=[10**3],
              filter_rows=100_000, filter_window=10_000, filter_distinct=[10**3, 10**4],
              dedup_ids=5_000, dedup_batches=2)
FULL = Sizes(core_rows=50_000_000, window_rows=10_000_000,
             windows=[10**3, 10**4, 10**5, 10**6, 10**7], sliding_budget=5 * 10**9,
             group_rows=10_000_000, group_keys=1_000_000, state_events=2_000_000,
             state_windows=[10**3, 10**4, 10**5, 10**6, 10**7, 10**8, 10**9],
             synthetic_rows=500_000, stream_keys=1000, stream_events=1_000_000, stream_files=10,
             churn_keys=200_000, churn_events=2_000_000, churn_batches=12, live_warm_up=True,
             live_each_family=True, stored_sketches=100_000,
             column_sketches=1_000_000, sum_rows=3_000_000, percentile_rows=1_000_000,
             percentile_window=10_000, percentile_sliding_rows=500, percentile_keys=[10**4, 10**6],
             moments_rows=10_000_000, moments_window=100_000, moments_sliding_window=10_000,
             moments_sliding_rows=500, moments_keys=[10**4, 10**6],
             top_k_rows=1_000_000, top_k_window=10_000, top_k_sliding_rows=500,
             top_k_state_rows=2_000_000, percentile_state_rows=[10**6, 10**8, 10**9],
             memory_rows=[10**3, 10**4, 10**5, 10**6, 10**7, 10**8, 10**9],
             bounded_frame_rows=2_000_000,
             big_window_rows=30_000_000, sample_rows=1_000_000, sample_window=10_000,
             sample_sliding_rows=500, sample_state_rows=2_000_000, sample_group_rows=10_000_000,
             sample_keys=[10**4, 10**6], filter_rows=10_000_000, filter_window=100_000,
             filter_distinct=[10**3, 10**4, 10**5, 10**6], dedup_ids=1_000_000,
             dedup_batches=10)


@dataclass
class Report:
    rows: list = field(default_factory=list)  # (section, case, measure, value, unit, note)
    markdown: list = field(default_factory=list)

    def add(self, section, case, measure, value, unit, note=""):
        self.rows.append((section, case, measure, value, unit, note))

    def table(self, title, header, lines, text=""):
        self.markdown += [f"## {title}", ""] + ([text, ""] if text else [])
        self.markdown += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        self.markdown += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
        self.markdown.append("")


def session(master="local[2]"):
    from pyspark.sql import SparkSession

    import windowsketch

    builder = (SparkSession.builder.master(master).appName("windowsketch-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.memory", "8g")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "8")
              # Executor memory polled during tasks: the stages' peaks of Spark-managed
              # memory, which an object aggregate's sort fallback does not report per task.
              .config("spark.executor.metrics.pollingInterval", "10ms"))
    spark = windowsketch.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass
class Measured:
    seconds: float
    peak_task_bytes: float  # the largest task's peak of Spark-managed execution memory
    spilled_bytes: float    # the largest task's memory spilled to disk
    # The executor's peak of Spark-managed execution memory (every running task) over the
    # query's stages, polled: it sees sorters that do not report a task peak.
    peak_executor_bytes: float


def measured(spark, df) -> Measured:
    """Times `df` (after a warm-up run, but in --quick) and reads, from Spark's status store,
    the memory its tasks took from Spark's memory manager: sort buffers, WindowExec's
    partition buffer, hash aggregation. Objects an aggregate keeps on the heap (our
    sketches) are not in it."""
    sc = spark.sparkContext
    if WARM_UP:
        df.write.format("noop").mode("overwrite").save()
    group = f"bench-{time.monotonic_ns()}"
    sc.setJobGroup(group, group)
    try:
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        seconds = time.perf_counter() - start
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    # The status store learns of finished tasks through the listener bus, asynchronously:
    # let it catch up, or the last tasks' figures may be missing.
    sc._jsc.sc().listenerBus().waitUntilEmpty(60_000)
    store, gateway = sc._jsc.sc().statusStore(), sc._gateway
    quantiles = gateway.new_array(gateway.jvm.double, 1)
    quantiles[0] = 1.0  # the largest task
    peak = spilled = executor_peak = 0.0
    for job in sc.statusTracker().getJobIdsForGroup(group):
        for stage in sc.statusTracker().getJobInfo(job).stageIds:
            summary = store.taskSummary(stage, 0, quantiles)
            if summary.isDefined():
                tasks = summary.get()
                peak = max(peak, tasks.peakExecutionMemory().apply(0))
                spilled = max(spilled, tasks.memoryBytesSpilled().apply(0))
            executor = store.lastStageAttempt(stage).peakExecutorMetrics()
            if executor.isDefined():
                executor_peak = max(executor_peak, sum(
                    executor.get().getMetricValue(name)
                    for name in ("OnHeapExecutionMemory", "OffHeapExecutionMemory")))
    return Measured(seconds, peak, spilled, executor_peak)


# The most measured runs of a query, and whether `measured` runs it once unmeasured first:
# --quick runs each once, cold (its figures only show the harness works).
MAX_RUNS = 3
WARM_UP = True


def best_alternating(spark, queries: dict, runs: int = 3) -> dict:
    """The fastest of `runs` measured runs of each query, alternating between them so that
    noise picks no side: short queries compared in one table."""
    best: dict = {}
    for _ in range(min(runs, MAX_RUNS)):
        for name, q in queries.items():
            m = measured(spark, spark.sql(q))
            if name not in best or m.seconds < best[name].seconds:
                best[name] = m
    return best


def full_frame_cost(spark, query_for_rows, frame: int, sample: int) -> float:
    """Nanoseconds a row of a query that re-aggregates each row's sliding frame costs at full
    frames: the time difference between one key's first frame + 3 * sample rows and frame +
    sample, each the best of 3 alternating runs, also in a quick run (a difference of single
    runs went negative under load). NaN when the difference is lost in the noise."""
    best: dict = {}
    for _ in range(3):
        for name, rows in (("long", frame + 3 * sample), ("short", frame + sample)):
            m = measured(spark, spark.sql(query_for_rows(rows)))
            best[name] = min(best.get(name, m.seconds), m.seconds)
    ns = (best["long"] - best["short"]) / (2 * sample) * 1e9
    return ns if ns > 0 else float("nan")


def shown_ns(ns: float, divisor: float = 1.0, digits: int = 0) -> str:
    return "—" if math.isnan(ns) else f"{ns / divisor:,.{digits}f}"


def megabytes(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def core_throughput(spark, sizes, report):
    from windowsketch import _scala_object

    t = _scala_object(spark, "windowsketch.core.Throughput")
    lines = []
    for eps in (0.1, 0.01, 0.001):
        for p in (0.5, 0.01):
            rate = t.histogramRowsPerSecond(10**6, eps, p, sizes.core_rows, 3, False)
            report.add("core", f"histogram eps={eps} p={p}", "rows/s", rate, "rows/s")
            lines.append(("histogram, in order, update + estimate", eps, p,
                          f"{rate / 1e6:,.1f} M/s"))
    # Controls at eps 0.01 that split the cost of a row: no events (the per-row floor),
    # every row an event (all the insert and merge work, nothing to mispredict), and p = 0.5
    # as a fixed pattern (the same work as random p = 0.5 with a predictable branch).
    for label, p, periodic in (("no events", 0.0, False), ("every row an event", 1.0, False),
                               ("events every 2nd row (predictable branch)", 0.5, True)):
        rate = t.histogramRowsPerSecond(10**6, 0.01, p, sizes.core_rows, 3, periodic)
        report.add("core", f"histogram eps=0.01 control: {label}", "rows/s", rate, "rows/s")
        lines.append((f"histogram control: {label}", 0.01, p, f"{rate / 1e6:,.1f} M/s"))
    for eps in (0.1, 0.01):
        rate = t.dyadicInsertsPerSecond(10**6, eps, 0.5, sizes.core_rows // 10, 3)
        report.add("core", f"mergeable eps={eps}", "inserts/s", rate, "inserts/s")
        lines.append(("mergeable sketch, shuffled inserts", eps, 0.5, f"{rate / 1e6:,.2f} M/s"))
        merges = t.dyadicMergesPerSecond(10**6, eps, sizes.core_rows // 10, 200, 3)
        report.add("core", f"mergeable eps={eps}", "merges/s", merges, "merges/s")
        lines.append(("mergeable sketch, 200-way fold", eps, 0.5, f"{merges:,.0f} merges/s"))
    report.table("Core throughput (one JVM thread, warmed up, best of 3)",
                 ["structure", "eps", "p(event)", "rate"], lines,
                 "Every row is an update then an estimate, as in a running window frame. "
                 "Random events at p = 0.5 make the per-row 'is it an event' branch "
                 "unpredictable; the controls run the same histogram with no events, with an "
                 "event on every row, and with p = 0.5 as a fixed pattern, which splits a row's "
                 "cost into the floor, the insert-and-merge work and the mispredicted branch.")


def running_windows(spark, sizes, report):
    n = sizes.window_rows
    spark.range(n).selectExpr(
        "id % 4 AS k", "id AS ts",
        "(id * 2654435761) % 100 < 30 OR (id % 100000) < 500 AS v") \
        .createOrReplaceTempView("stream")
    lines, plot = [], {}
    for window in sizes.windows:
        queries = {
            "approx_window_count": f"approx_window_count(v, ts, {window}) OVER (PARTITION BY k ORDER BY ts)",
            "exact sliding RANGE frame (a)": f"count_if(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN {window - 1} PRECEDING AND CURRENT ROW)",
            "exact prefix difference (b)": f"sum(CAST(v AS INT)) OVER (PARTITION BY k ORDER BY ts) - coalesce(sum(CAST(v AS INT)) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN UNBOUNDED PRECEDING AND {window} PRECEDING), 0)",
            "running count, the floor (c)": "count(v) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING)",
            "exact sliding + segment tree (d)": None,
        }
        results, used, memory = {}, {}, {}
        for name, expr in queries.items():
            sliding = name.startswith("exact sliding")
            rows = min(n, max(10_000, sizes.sliding_budget // window)) if sliding else n
            if expr is None:
                expr = queries["exact sliding RANGE frame (a)"]
                spark.conf.set("spark.sql.window.segmentTree.enabled", "true")
            try:
                m = measured(spark, spark.sql(f"SELECT {expr} AS c FROM stream WHERE ts < {rows}"))
            finally:
                spark.conf.unset("spark.sql.window.segmentTree.enabled")
            results[name] = m.seconds / rows * 1e9
            used[name] = rows
            memory[name] = m
            report.add("window", f"N={window} {name}", "ns/row", results[name], "ns/row",
                       f"{rows} rows")
            report.add("window", f"N={window} {name}", "peak task memory", m.peak_task_bytes,
                       "bytes", f"{rows} rows; spilled {m.spilled_bytes:.0f}")
        approx = results["approx_window_count"]
        for name, ns in results.items():
            lines.append((f"{window:,}", name, f"{used[name]:,}", f"{ns:,.0f}",
                          f"{ns / approx:,.2f}", megabytes(memory[name].peak_task_bytes),
                          megabytes(memory[name].spilled_bytes)))
        plot[window] = results
    report.table(
        f"Running windows over {n:,} rows (4 keys), cost per row",
        ["window N", "query", "rows", "ns/row", "÷ approx", "peak task MB", "spilled MB"], lines,
        "Each query writes to Spark's noop sink, timed after one warm-up run (none in "
        "--quick). The exact "
        "sliding frames cost O(N) per row, so at large N they run on fewer rows "
        f"(rows × N ≤ {sizes.sliding_budget:.0e}, at least 10,000) and are compared per row; "
        "where a key's rows are fewer than N their frames never fill, so their figures there "
        "understate the cost at that N. 'peak task MB' is the largest task's peak of "
        "Spark-managed execution memory (Spark's status store): the sort and WindowExec's "
        "buffer of a PARTITION BY group's rows, which every query here needs alike. The "
        "sketch adds one exponential histogram per group on the heap, outside that figure: "
        "two timestamps per bucket (the state-size table below).")
    return plot


def running_sums(spark, sizes, report):
    """Moving sums per row in a running frame: approx_window_sum (the time-ordered sum
    histogram, docs/ordered-sums.md) against the exact prefix difference, two running
    sums, which is the fastest exact query Spark has for it."""
    n = sizes.sum_rows
    window = 10**5
    spark.range(n).selectExpr("id % 8 AS k", "id AS ts", "(id * 2654435761) % 1000 AS x") \
        .createOrReplaceTempView("amounts")
    queries = {
        "approx_window_sum": f"approx_window_sum(x, ts, {window}) OVER (PARTITION BY k ORDER BY ts)",
        "exact prefix difference": f"sum(x) OVER (PARTITION BY k ORDER BY ts) - coalesce(sum(x) "
                                   f"OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN UNBOUNDED "
                                   f"PRECEDING AND {window} PRECEDING), 0)",
        # Ordered by an expression equal to ts that the planner rule cannot see through.
        "approx_window_sum on the mergeable sketch":
            f"approx_window_sum(x, ts, {window}) OVER (PARTITION BY k ORDER BY ts + 0)",
    }
    runs = 1 if sizes is QUICK else 2
    seconds = {name: min(measured(spark, spark.sql(f"SELECT {q} AS s FROM amounts")).seconds
                         for _ in range(runs)) for name, q in queries.items()}
    exact = seconds["exact prefix difference"]
    for name, t in seconds.items():
        report.add("sums", name, "seconds", t, "s", f"{n} rows, window {window}")
    report.table(
        f"Moving sums in running frames: {n:,} rows, 8 keys, window {window:,} positions",
        ["query", "seconds", "÷ exact prefix difference"],
        [(name, f"{t:.2f}", f"{t / exact:.2f}") for name, t in seconds.items()],
        "Values 0–999, best of two warm runs each (one in --quick). The exact prefix difference subtracts a "
        "running sum lagging the window from the running sum. The third row orders by an "
        "expression equal to ts that the planner rule cannot see through, so it runs on the "
        "mergeable sketch, queried on every row: the cost the histogram removes.")


def distinct_windows(spark, sizes, report):
    """Distinct values per row in a running frame: the sliding HyperLogLog against Spark's
    approx_count_distinct and exact size(collect_set) over sliding RANGE frames (which
    re-aggregate the frame for every row), and the running count floor."""
    n = sizes.window_rows
    spark.range(n).selectExpr("id % 4 AS k", "id AS ts",
                              "CAST((id * 2654435761) % 50000 AS INT) AS u") \
        .createOrReplaceTempView("users")
    lines = []
    for window in sizes.windows:
        sliding = f"OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN {window - 1} PRECEDING AND CURRENT ROW)"
        queries = {
            "approx_window_count_distinct": f"approx_window_count_distinct(u, ts, {window}) OVER (PARTITION BY k ORDER BY ts)",
            "approx_count_distinct, sliding frame": f"approx_count_distinct(u) {sliding}",
            "exact size(collect_set), sliding frame": f"size(collect_set(u) {sliding})",
            "running count, the floor": "count(u) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING)",
        }
        results = {}
        for name, expr in queries.items():
            rows = min(n, max(10_000, sizes.sliding_budget // (8 * window))) if "sliding" in name else n
            m = measured(spark, spark.sql(f"SELECT {expr} AS c FROM users WHERE ts < {rows}"))
            results[name] = (m.seconds / rows * 1e9, rows)
            report.add("distinct", f"N={window} {name}", "ns/row", results[name][0], "ns/row",
                       f"{rows} rows")
        ours = results["approx_window_count_distinct"][0]
        for name, (ns, rows) in results.items():
            lines.append((f"{window:,}", name, f"{rows:,}", f"{ns:,.0f}", f"{ns / ours:,.2f}"))
    report.table(
        f"Distinct values in running windows over {n:,} rows (4 keys), cost per row",
        ["window N", "query", "rows", "ns/row", "÷ approx_window_count_distinct"], lines,
        "rsd 0.05 everywhere (p = 9). The sliding frames re-aggregate every row's frame, so "
        "at large N they run on fewer rows and are compared per row.")


def percentiles(spark, sizes, report):
    """p99 per row in a running frame: approx_window_percentile (exact mode,
    docs/percentiles.md) against percentile_approx over the same sliding frame, which
    re-aggregates the frame for every row, and the running count floor; then GROUP BY
    against percentile_approx."""
    n, window, sample = sizes.percentile_rows, sizes.percentile_window, sizes.percentile_sliding_rows
    # 4 keys, each with consecutive positions: the window is the key's last `window` rows.
    spark.range(n).selectExpr("id % 4 AS k", "id DIV 4 AS ts",
                              "CAST((id * 2654435761) % 100000 AS DOUBLE) / 100 AS ms") \
        .createOrReplaceTempView("latencies")
    ours = measured(spark, spark.sql(
        f"SELECT approx_window_percentile(ms, ts, {window}, 0.99) OVER (PARTITION BY k "
        "ORDER BY ts) AS p FROM latencies")).seconds / n * 1e9
    floor = measured(spark, spark.sql(
        "SELECT count(ms) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING) AS c "
        "FROM latencies")).seconds / n * 1e9
    spark_sliding = full_frame_cost(spark, lambda rows: (
        f"SELECT percentile_approx(ms, 0.99) OVER (ORDER BY ts ROWS BETWEEN {window - 1} "
        f"PRECEDING AND CURRENT ROW) AS p FROM latencies WHERE k = 0 AND ts < {rows}"), window, sample)
    results = {"approx_window_percentile": (ours, f"{n:,}"),
               "percentile_approx, sliding frame": (spark_sliding, f"{2 * sample:,} at full frames"),
               "running count, the floor": (floor, f"{n:,}")}
    for name, (ns, rows) in results.items():
        if not math.isnan(ns):
            report.add("percentiles", name, "ns/row", ns, "ns/row", f"{rows} rows, window {window}")
    report.table(
        f"p99 in running windows of {window:,} rows ({n:,} rows, 4 keys), cost per row",
        ["query", "rows", "ns/row", "÷ approx_window_percentile"],
        [(name, rows, shown_ns(ns), shown_ns(ns, ours, 2)) for name, (ns, rows) in results.items()],
        "Values uniform on [0, 1000). percentile_approx re-aggregates each row's frame: its "
        "cost per row is measured at full frames, as the time difference between one key's "
        f"first {window:,} + {3 * sample:,} and {window:,} + {sample:,} rows, each the best of 3 "
        "alternating runs; — where the difference was lost in the noise.")
    lines = []
    for keys in sizes.percentile_keys:
        rows = sizes.group_rows
        spark.range(rows).selectExpr(f"id % {keys} AS g", "id AS ts",
                                     "CAST((id * 2654435761) % 100000 AS DOUBLE) / 100 AS ms") \
            .createOrReplaceTempView("latency_groups")
        best = best_alternating(spark, {
            "approx_window_percentile": "SELECT g, approx_window_percentile(ms, ts, 1000000000, "
                                        "0.5) FROM latency_groups GROUP BY g",
            "percentile_approx": "SELECT g, percentile_approx(ms, 0.5) FROM latency_groups GROUP BY g",
        }, runs=2)
        ratio = best["approx_window_percentile"].seconds / best["percentile_approx"].seconds
        for name, m in best.items():
            report.add("percentiles", f"GROUP BY {keys} keys {name}", "seconds", m.seconds, "s",
                       f"{rows} rows")
            lines.append((f"{keys:,}", name, f"{m.seconds:.2f}"))
        lines.append((f"{keys:,}", "ours ÷ percentile_approx", f"{ratio:.2f}"))
    report.table(
        f"Percentiles in GROUP BY: {sizes.group_rows:,} rows",
        ["keys", "query", "seconds"], lines,
        "Best of two alternating runs. The window covers every row, so both answer over the same "
        "rows; percentile_approx at its default accuracy (1/eps = 10,000), ours exact.")


def moments(spark, sizes, report):
    """Standard deviations per row in a running frame: approx_window_stddev (the
    time-ordered buckets, docs/moments.md) against Spark's stddev over the same sliding
    frame (which re-aggregates the frame for every row), the running count floor, and the
    exact prefix difference (running count, sum and sum of squares, minus the same lagging
    the window), whose error at a mean of 10^9 is measured against exact integer sums; then
    GROUP BY against Spark's stddev."""
    n, window = sizes.moments_rows, sizes.moments_window
    sliding_window, sample = sizes.moments_sliding_window, sizes.moments_sliding_rows
    # 4 keys of consecutive positions; values 10^9 + m / 64 (doubles held exactly), m < 64,000.
    value = "1e9 + CAST((id * 2654435761) % 64000 AS DOUBLE) / 64"
    spark.range(n).selectExpr("id % 4 AS k", "id DIV 4 AS ts", f"{value} AS x") \
        .createOrReplaceTempView("moment_latencies")
    running = "OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING)"
    lagging = f"OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND {window} PRECEDING)"
    prefix = (f"SELECT k, ts, sqrt(try_divide(s2 - l2 - (s1 - l1) * (s1 - l1) / (c - lc), c - lc - 1)) AS sd "
              f"FROM (SELECT k, ts, count(x) {running} AS c, sum(x) {running} AS s1, "
              f"sum(x * x) {running} AS s2, coalesce(count(x) {lagging}, 0) AS lc, "
              f"coalesce(sum(x) {lagging}, 0) AS l1, coalesce(sum(x * x) {lagging}, 0) AS l2 "
              f"FROM moment_latencies)")
    ours_sql = (f"SELECT k, ts, approx_window_stddev(x, ts, {window}) OVER (PARTITION BY k "
                f"ORDER BY ts) AS sd FROM moment_latencies")
    queries = {"approx_window_stddev": ours_sql, "exact prefix difference": prefix,
               "running count, the floor": f"SELECT count(x) {running} AS c FROM moment_latencies"}
    runs = 1 if sizes is QUICK else 2
    ns = {name: min(measured(spark, spark.sql(q)).seconds for _ in range(runs)) / n * 1e9
          for name, q in queries.items()}

    spark_sliding = full_frame_cost(spark, lambda rows: (
        f"SELECT stddev(x) OVER (ORDER BY ts ROWS BETWEEN {sliding_window - 1} PRECEDING "
        f"AND CURRENT ROW) AS sd FROM moment_latencies WHERE k = 0 AND ts < {rows}"),
        sliding_window, sample)

    # Accuracy at mean 10^9: the last rows of key 0 against exact sums of the values * 64.
    checked = min(2_000, n // 4 - window)
    last = n // 4 - 1
    got = {name: dict(spark.sql(f"SELECT ts, sd FROM ({q}) WHERE k = 0 AND ts > {last - checked}")
                      .collect()) for name, q in (("approx_window_stddev", ours_sql),
                                                  ("exact prefix difference", prefix))}
    first = last - checked + 1  # the first row checked; its window starts window - 1 before
    ints = {t: 64 * 10**9 + (4 * t * 2654435761) % 64000 for t in range(first - window, last + 1)}
    worst = {name: 0.0 for name in got}
    s1 = sum(ints[t] for t in range(first - window, first))
    s2 = sum(ints[t] ** 2 for t in range(first - window, first))
    for t in range(first, last + 1):  # the window (t - window, t], slid by integer sums
        s1 += ints[t] - ints[t - window]
        s2 += ints[t] ** 2 - ints[t - window] ** 2
        exact = math.sqrt((window * s2 - s1 * s1) / (window * (window - 1))) / 64
        for name in got:
            answer = got[name][t]
            error = math.inf if answer is None or math.isnan(answer) else abs(answer - exact) / exact
            worst[name] = max(worst[name], error)
    results = {"approx_window_stddev": (ns["approx_window_stddev"], f"{n:,}"),
               "exact prefix difference (count, sum, sum of squares)":
                   (ns["exact prefix difference"], f"{n:,}"),
               "Spark's stddev, sliding frame": (spark_sliding, f"{2 * sample:,} at full frames of {sliding_window:,}"),
               "running count, the floor": (ns["running count, the floor"], f"{n:,}")}
    ours = ns["approx_window_stddev"]
    for name, (value_ns, rows) in results.items():
        if not math.isnan(value_ns):
            report.add("moments", name, "ns/row", value_ns, "ns/row", f"{rows} rows, window {window}")
    for name, error in worst.items():
        report.add("moments", name, "worst relative error of stddev at mean 10^9", error, "ratio",
                   f"last {checked} rows of a key")
    report.table(
        f"Standard deviation in running windows of {window:,} rows ({n:,} rows, 4 keys, mean 10^9), "
        "cost per row",
        ["query", "rows", "ns/row", "÷ approx_window_stddev", "worst relative error"],
        [(name, rows, shown_ns(v), shown_ns(v, ours, 2),
          {"approx_window_stddev": f"{worst['approx_window_stddev']:.1e}",
           "exact prefix difference (count, sum, sum of squares)":
               f"{worst['exact prefix difference']:.1e}"}.get(name, ""))
         for name, (v, rows) in results.items()],
        "Values 10^9 + m/64 for m < 64,000 (deviation about 290), exact as doubles. The "
        "error column compares the last rows of a key with the exact standard deviation from "
        "integer sums (eps 0.01 promises at most 0.005): the prefix difference subtracts sums "
        "of squares of values near 10^9, and their rounding swamps the variance. Spark's "
        "stddev over a sliding frame "
        "re-aggregates it per row, so its cost grows with the frame; it is measured at full "
        f"frames of {sliding_window:,} rows (best of 3 alternating runs each of one key's "
        f"first {sliding_window:,} + {3 * sample:,} and {sliding_window:,} + {sample:,} rows; — where the difference was lost in the noise).")
    lines = []
    for keys in sizes.moments_keys:
        rows = sizes.group_rows
        groups = spark.range(rows).selectExpr(
            f"id % {keys} AS g", "id AS ts",
            "CAST((id * 2654435761) % 100000 AS DOUBLE) / 100 AS x").cache()
        groups.count()  # cached before timing: the ratio compares aggregation, not row generation
        groups.createOrReplaceTempView("moment_groups")
        best = best_alternating(spark, {
            "approx_window_stddev": "SELECT g, approx_window_stddev(x, ts, 1000000000) "
                                    "FROM moment_groups GROUP BY g",
            "stddev": "SELECT g, stddev(x) FROM moment_groups GROUP BY g",
        }, runs=2)
        for name, m in best.items():
            report.add("moments", f"GROUP BY {keys} keys {name}", "seconds", m.seconds, "s",
                       f"{rows} rows")
            lines.append((f"{keys:,}", name, f"{m.seconds:.2f}"))
        lines.append((f"{keys:,}", "ours ÷ stddev",
                      f"{best['approx_window_stddev'].seconds / best['stddev'].seconds:.2f}"))
        groups.unpersist()
    report.table(
        f"Standard deviations in GROUP BY: {sizes.group_rows:,} cached rows", ["keys", "query", "seconds"],
        lines, "Best of two alternating runs. The window covers every row, so both answer over "
        "the same rows. Spark's stddev is a declarative aggregate: generated code over a "
        "fixed-size buffer in the hash aggregation's rows; ours is an object per key (the "
        "mergeable sketch), which Spark sorts past 128 keys a task.")


def top_k(spark, sizes, report):
    """The top 5 values per row in a running frame: approx_window_top_k (exact there)
    against the exact sliding-frame query a user would write (Spark's mode(), the top 1)
    and Spark's approx_top_k over the same frame, which re-aggregate the frame per row; then
    GROUP BY against approx_top_k, and the sketch's bytes at a window of 10^9."""
    from windowsketch import _scala_object

    n, window, sample = sizes.top_k_rows, sizes.top_k_window, sizes.top_k_sliding_rows
    # 4 keys of consecutive positions; Zipf-like paths: (id * 2654435761) mod a prime, squared down.
    path = "CONCAT('/p', CAST(floor(pow(((id * 2654435761) % 100003) / 100003.0, 4) * 1000) AS INT))"
    spark.range(n).selectExpr("id % 4 AS k", "id DIV 4 AS ts", f"{path} AS url") \
        .createOrReplaceTempView("top_k_requests")
    ours = measured(spark, spark.sql(
        f"SELECT approx_window_top_k(url, ts, {window}, 5) OVER (PARTITION BY k ORDER BY ts) AS t "
        "FROM top_k_requests")).seconds / n * 1e9
    floor = measured(spark, spark.sql(
        "SELECT count(url) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING) AS c "
        "FROM top_k_requests")).seconds / n * 1e9
    frame = f"OVER (ORDER BY ts ROWS BETWEEN {window - 1} PRECEDING AND CURRENT ROW)"
    baselines = {"Spark's mode(), exact, the top 1, sliding frame": f"mode(url) {frame}",
                 "Spark's approx_top_k, the top 5, sliding frame": f"approx_top_k(url, 5) {frame}"}
    results = {"approx_window_top_k (exact in a running frame)": (ours, f"{n:,}")}
    for name, expression in baselines.items():
        try:
            per_row = full_frame_cost(spark, lambda rows, expression=expression: (
                f"SELECT {expression} AS t FROM top_k_requests WHERE k = 0 AND ts < {rows}"), window, sample)
        except Exception as e:  # noqa: BLE001 - a line without approx_top_k says so
            results[name] = (float("nan"), f"not on this line: {str(e).splitlines()[0][:60]}")
            continue
        results[name] = (per_row, f"{2 * sample:,} at full frames")
    results["running count, the floor"] = (floor, f"{n:,}")
    for name, (ns, rows) in results.items():
        if not math.isnan(ns):
            report.add("top k", name, "ns/row", ns, "ns/row", f"{rows} rows, window {window}")
    report.table(
        f"Top 5 values in running windows of {window:,} rows ({n:,} rows, 4 keys), cost per row",
        ["query", "rows", "ns/row", "÷ approx_window_top_k"],
        [(name, rows, shown_ns(v), shown_ns(v, ours, 2)) for name, (v, rows) in results.items()],
        "About 1,000 paths, Zipf-like. The sliding frames re-aggregate each row's frame: their "
        "cost per row is measured at full frames, as the time difference between one key's "
        f"first {window:,} + {3 * sample:,} and {window:,} + {sample:,} rows (best of 3 "
        "alternating runs each; — where the difference was lost in the noise).")
    spark.range(sizes.group_rows).selectExpr(
        "id % 10000 AS g", "id AS ts", f"{path.replace('id *', '(id DIV 10000) *')} AS url") \
        .createOrReplaceTempView("top_k_groups")
    lines = []
    queries = {"approx_window_top_k": "SELECT g, approx_window_top_k(url, ts, 1000000000, 5) "
                                      "FROM top_k_groups GROUP BY g",
               "approx_top_k": "SELECT g, approx_top_k(url, 5) FROM top_k_groups GROUP BY g"}
    try:
        best = best_alternating(spark, queries, runs=2)
    except Exception:  # noqa: BLE001 - approx_top_k arrived in Spark 4.1
        best = best_alternating(spark, {"approx_window_top_k": queries["approx_window_top_k"]}, runs=2)
    for name, m in best.items():
        report.add("top k", f"GROUP BY 10000 keys {name}", "seconds", m.seconds, "s",
                   f"{sizes.group_rows} rows")
        lines.append(("10,000", name, f"{m.seconds:.2f}"))
    if len(best) == 2:
        lines.append(("10,000", "ours ÷ approx_top_k",
                      f"{best['approx_window_top_k'].seconds / best['approx_top_k'].seconds:.2f}"))
    report.table(
        f"Top 5 values in GROUP BY: {sizes.group_rows:,} rows", ["keys", "query", "seconds"], lines,
        "Best of two alternating runs; the window covers every row. approx_top_k keeps a "
        "DataSketches frequent-items sketch of 10,000 items per group; ours a sketch of dyadic "
        "time nodes with ceil(2/eps) - 1 = 199 counts each.")
    replay = _scala_object(spark, "windowsketch.core.Replay")
    fmt = _scala_object(spark, "windowsketch.core.SketchFormat")
    rows = sizes.top_k_state_rows
    ids = np.arange(rows, dtype=np.int64)
    ts = (ids * (10**9 // rows)).astype(">i8").tobytes()  # rows spread over a window of 10^9
    items = (np.floor((((ids * 2654435761) % 100003) / 100003.0) ** 4 * 10**5)).astype(">i8").tobytes()
    lines = []
    for eps in (0.01, 0.001):
        sketch = replay.topKSketch(10**9, eps, False, ts, items)
        size = len(bytes(fmt.serializeTopK(sketch)))
        report.add("top k", f"state eps={eps}", "bytes", size, "bytes",
                   f"{rows} rows of about 100,000 values over a window of 10^9")
        report.add("top k", f"state eps={eps}", "effective eps", sketch.effectiveEps(), "ratio")
        lines.append((eps, f"{sketch.effectiveEps():.4f}", f"{rows:,}", f"{sketch.nodeCount():,}",
                      f"{size / 1024:,.1f}"))
    report.table("Top-k sketch size at a window of 10^9 positions",
                 ["eps", "effective eps", "rows in the window", "nodes", "KB"], lines,
                 "Rows spread evenly over the window, Zipf-like values out of 100,000. A node "
                 "keeps up to ceil(2/eps) - 1 counts and the sketch up to 4,096 nodes, past which "
                 "it coarsens eps (the effective eps, which the bounds' width keeps): "
                 "O((1/eps)^2 log n) in the worst case (docs/top-k.md). The exact alternative "
                 "holds every row of the window.")


def samples(spark, sizes, report):
    """Five random rows of each row's window in a running frame: approx_window_sample against
    the exact query a user would write (shuffle the sliding frame's collect_list, keep 5),
    which copies the frame per row, and Spark's running count; then GROUP BY against
    collect_list + shuffle + slice, and the sketch's rows and bytes at a window of 10^9."""
    from windowsketch.sketch import WindowSketch

    n, window, sample = sizes.sample_rows, sizes.sample_window, sizes.sample_sliding_rows
    spark.range(n).selectExpr("id % 4 AS k", "id DIV 4 AS ts", "CONCAT('/p', id % 1000) AS url") \
        .createOrReplaceTempView("sample_requests")
    ours = measured(spark, spark.sql(
        f"SELECT approx_window_sample(url, ts, {window}, 5) OVER (PARTITION BY k ORDER BY ts) AS s "
        "FROM sample_requests")).seconds / n * 1e9
    floor = measured(spark, spark.sql(
        "SELECT count(url) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING) AS c "
        "FROM sample_requests")).seconds / n * 1e9
    frame = f"OVER (ORDER BY ts ROWS BETWEEN {window - 1} PRECEDING AND CURRENT ROW)"
    exact = full_frame_cost(spark, lambda rows: (
        f"SELECT slice(shuffle(collect_list(url) {frame}), 1, 5) AS s FROM sample_requests "
        f"WHERE k = 0 AND ts < {rows}"), window, sample)
    results = {"approx_window_sample": (ours, f"{n:,}"),
               "slice(shuffle(collect_list(url)), 1, 5), sliding frame": (exact, f"{2 * sample:,} at full frames"),
               "running count, the floor": (floor, f"{n:,}")}
    for name, (ns, rows) in results.items():
        if not math.isnan(ns):
            report.add("samples", name, "ns/row", ns, "ns/row", f"{rows} rows, window {window}")
    report.table(
        f"Samples of 5 rows in running windows of {window:,} rows ({n:,} rows, 4 keys), cost per row",
        ["query", "rows", "ns/row", "÷ approx_window_sample"],
        [(name, rows, shown_ns(v), shown_ns(v, ours, 2)) for name, (v, rows) in results.items()],
        "The exact query copies each row's frame and shuffles it (and draws another sample on "
        "every run): its cost per row is measured at full frames, as the time difference "
        f"between one key's first {window:,} + {3 * sample:,} and {window:,} + {sample:,} rows "
        "(best of 3 alternating runs each; — where the difference was lost in the noise).")
    lines = []
    for keys in sizes.sample_keys:
        spark.range(sizes.sample_group_rows).selectExpr(
            f"id % {keys} AS g", "id AS ts", "CONCAT('/p', id % 1000) AS url") \
            .createOrReplaceTempView("sample_groups")
        best = best_alternating(spark, {
            "approx_window_sample": "SELECT g, approx_window_sample(url, ts, 1000000000, 5) "
                                    "FROM sample_groups GROUP BY g",
            "slice(shuffle(collect_list(url)), 1, 5)":
                "SELECT g, slice(shuffle(collect_list(url)), 1, 5) FROM sample_groups GROUP BY g"},
            runs=2)
        for name, m in best.items():
            report.add("samples", f"GROUP BY {keys} keys {name}", "seconds", m.seconds, "s",
                       f"{sizes.sample_group_rows} rows")
            lines.append((f"{keys:,}", name, f"{m.seconds:.2f}"))
    report.table(
        f"Samples of 5 rows in GROUP BY: {sizes.sample_group_rows:,} rows", ["keys", "query", "seconds"],
        lines, "Best of two alternating runs; the window covers every row. collect_list holds "
               "every row of a group before the shuffle.")
    rows = sizes.sample_state_rows
    blob = bytes(spark.range(rows).selectExpr(f"id * {10**9 // rows} AS ts", "CONCAT('/p', id) AS url")
                 .coalesce(1).selectExpr("window_sample_sketch(url, ts, 1000000000, 5) AS s")
                 .first().s)
    held = len(WindowSketch.from_bytes(blob)._rows)
    report.add("samples", "state at a window of 10^9", "rows held", held, "rows", f"{rows} rows")
    report.add("samples", "state at a window of 10^9", "bytes", len(blob), "bytes", f"{rows} rows")
    report.table(
        "Sample sketch size at a window of 10^9 positions", ["k", "rows in the window", "rows held",
                                                             "k (1 + ln(n / k))", "bytes"],
        [(5, f"{rows:,}", held, f"{5 * (1 + math.log(rows / 5)):.0f}", f"{len(blob):,}")],
        "Distinct paths spread evenly over the window. The sketch holds the rows fewer than 5 "
        "later rows outrank: k (1 + ln(n / k)) in expectation (docs/sampling.md).")


def filters(spark, sizes, report):
    """Seen before in the window, per row of a running frame: approx_window_seen against the
    exact query a user would write (the previous row of the same key and value by lag, a
    second sort) and Spark's running count; then the filter sketch's bytes against the
    distinct values of its window, at fpp 0.01 and 0.001."""
    from windowsketch.sketch import WindowSketch

    n, window = sizes.filter_rows, sizes.filter_window
    # 4 keys; a user's next request 1 to ~2 windows later: about half the rows are seen.
    spark.range(n).selectExpr("id % 4 AS k", "id DIV 4 AS ts",
                              f"CAST(hash(id DIV 4) % {max(1, window // 2)} AS BIGINT) AS user") \
        .createOrReplaceTempView("filter_requests")
    queries = {
        "approx_window_seen":
            f"SELECT approx_window_seen(user, ts, {window}) OVER (PARTITION BY k ORDER BY ts) AS s "
            "FROM filter_requests",
        "exact: lag(ts) OVER (PARTITION BY k, user ORDER BY ts)":
            f"SELECT coalesce(ts - lag(ts) OVER (PARTITION BY k, user ORDER BY ts) < {window}, "
            "false) AS s FROM filter_requests",
        "running count, the floor":
            "SELECT count(user) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING) AS c "
            "FROM filter_requests",
    }
    best = best_alternating(spark, queries, runs=2)
    ours = best["approx_window_seen"].seconds
    seen = spark.sql(f"SELECT count_if(s) AS seen FROM ({queries['approx_window_seen']})").first().seen
    exact = spark.sql(f"SELECT count_if(s) AS seen FROM ({list(queries.values())[1]})").first().seen
    report.add("filters", "rows seen: approx_window_seen - exact", "rows", seen - exact, "rows",
               f"{n} rows")
    lines = []
    for name, m in best.items():
        ns = m.seconds / n * 1e9
        report.add("filters", name, "ns/row", ns, "ns/row", f"{n} rows, window {window}")
        lines.append((name, shown_ns(ns), f"{m.seconds / ours:.2f}"))
    report.table(
        f"Seen before in running windows of {window:,} rows ({n:,} rows, 4 keys), cost per row",
        ["query", "ns/row", "÷ approx_window_seen"], lines,
        f"Best of two alternating runs. Rows seen: {seen:,} by approx_window_seen, {exact:,} "
        "exactly (a difference would be false positives; at fpp 0.01 and this many values "
        "none is expected). The exact query sorts the rows again by (key, value, ts).")
    lines = []
    for fpp in (0.01, 0.001):
        for distinct in sizes.filter_distinct:
            blob = bytes(spark.range(distinct).selectExpr("id AS ts", "id * 7919 AS user")
                         .coalesce(1).selectExpr(f"window_filter_sketch(user, ts, {distinct}, {fpp}) AS f")
                         .first().f)
            held = len(WindowSketch.from_bytes(blob))
            report.add("filters", f"sketch bytes fpp={fpp}", f"bytes at {distinct} values",
                       len(blob), "bytes")
            lines.append((fpp, f"{distinct:,}", f"{held:,}", f"{len(blob):,}",
                          f"{len(blob) / distinct:.2f}"))
    report.table(
        "Filter sketch bytes against the distinct values of its window",
        ["fpp", "distinct values", "fingerprints", "bytes", "bytes per value"], lines,
        "One value a position over a window of as many positions: every value's fingerprint "
        "(32 + ceil(log2(1 / fpp)) bits, written as steps between sorted fingerprints) and "
        "its time (a step back from now). Two values may share a fingerprint (about d^2 / "
        "2^(bits + 1) pairs of d values: 0.9 at 10^6 values and fpp 0.01), which is what a "
        "false positive is.")


def deduplication(spark, sizes, report, workdir):
    """De-duplication of a stream within an hour: drop_duplicates_within at fpp 0.001
    against Spark's dropDuplicatesWithinWatermark with a 1-hour watermark delay (the same
    horizon), on the same files: events per second, state after the last micro-batch, and
    what each delivered (no id twice; ids wrongly dropped)."""
    from pyspark.sql import functions as F

    from windowsketch.streaming import drop_duplicates_within

    ids, files = sizes.dedup_ids, sizes.dedup_batches
    source = os.path.join(workdir, "dedup-in")
    # ids spread over an hour; a quarter of them again 1 s to 30 min later (20% of rows).
    spark.range(ids).selectExpr(
        "concat('event-', CAST(id AS STRING)) AS event_id",
        f"timestamp_seconds(1704067200 + CAST(id * 3600 / {ids} AS BIGINT)) AS ts") \
        .createOrReplaceTempView("dedup_firsts")
    spark.sql("SELECT event_id, ts FROM dedup_firsts UNION ALL "
              "SELECT event_id, ts + make_interval(0, 0, 0, 0, 0, 0, 1 + abs(hash(event_id)) % 1800) "
              "FROM dedup_firsts WHERE abs(hash(event_id, 1)) % 4 = 0") \
        .withColumn("file", F.floor((F.unix_seconds("ts") - 1704067200) / (5400 / files))) \
        .repartition("file").write.partitionBy("file").parquet(source)
    rows = spark.read.parquet(source).count()
    # One file of rows a micro-batch, in time order (partition directories sort by name).
    paths = sorted(glob.glob(os.path.join(source, "file=*", "*.parquet")),
                   key=lambda p: int(p.split("file=")[1].split(os.sep)[0]))
    for i, path in enumerate(paths):
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))

    def events():
        return (spark.readStream.schema("event_id STRING, ts TIMESTAMP")
                .option("maxFilesPerTrigger", 1).option("recursiveFileLookup", "true")
                .parquet(source))

    queries = {
        "drop_duplicates_within, fpp 0.001": lambda: drop_duplicates_within(
            events().withWatermark("ts", "1 minute"), "event_id", "ts", "1 hour", fpp=0.001),
        "dropDuplicatesWithinWatermark, delay 1 hour": lambda:
            events().withWatermark("ts", "1 hour").dropDuplicatesWithinWatermark(["event_id"]),
    }
    # Two alternating runs each (one in --quick), from new checkpoints; the faster one
    # counts (the first query of a JVM pays its warm-up).
    best: dict = {}
    for run in range(min(2, MAX_RUNS)):
        for i, (name, build) in enumerate(queries.items()):
            sink = os.path.join(workdir, f"dedup-out-{run}-{i}")
            query = (build().writeStream.format("parquet").option("path", sink)
                     .option("checkpointLocation", os.path.join(workdir, f"dedup-ckpt-{run}-{i}"))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            progress = [p for p in query.recentProgress if p["numInputRows"]]
            seconds = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
            if name not in best or seconds < best[name][0]:
                state = [p for p in query.recentProgress
                         if p["stateOperators"]][-1]["stateOperators"][0]
                best[name] = (seconds, sink, state, progress[-1]["eventTime"]["watermark"])
    lines, state_bytes = [], {}
    for name, (seconds, sink, state, watermark) in best.items():
        delivered = spark.read.parquet(sink)
        counts = delivered.groupBy("event_id").count()
        twice = counts.where("count > 1").count()
        dropped = ids - counts.count()
        if name.startswith("drop_duplicates_within"):
            # Held: ids whose delivered row is after the last batch's watermark - 1 hour.
            held = delivered.where(F.col("ts") > F.to_timestamp(F.lit(watermark))
                                   - F.expr("INTERVAL 1 HOUR")).count()
        else:
            held = state["numRowsTotal"]
        state_bytes[name] = state["memoryUsedBytes"]
        report.add("deduplication", name, "events/s", rows / seconds, "events/s", f"{rows} rows")
        report.add("deduplication", name, "state bytes", state["memoryUsedBytes"], "bytes",
                   f"{ids} ids")
        report.add("deduplication", name, "state bytes per value held",
                   state["memoryUsedBytes"] / held, "bytes", f"{held} values")
        report.add("deduplication", name, "ids delivered twice", twice, "ids")
        report.add("deduplication", name, "ids dropped", dropped, "ids")
        lines.append((name, f"{rows / seconds:,.0f}", f"{state['numRowsTotal']:,}", f"{held:,}",
                      megabytes(state["memoryUsedBytes"]),
                      f"{state['memoryUsedBytes'] / held:,.1f}", f"{twice:,}", f"{dropped:,}"))
    ours, spark_own = state_bytes.values()
    report.table(
        f"De-duplicating a stream: {ids:,} ids in an hour, {rows:,} events ({rows - ids:,} "
        f"copies), {files} micro-batches",
        ["query", "events/s", "state rows", "values held", "state", "bytes per value held",
         "ids delivered twice", "ids dropped"], lines,
        f"State after the last micro-batch as the state store reports it (memoryUsedBytes): "
        f"{spark_own / ours:.1f}× smaller for drop_duplicates_within. Spark's holds every id "
        "of the last 2 hours of event time (its delay is both the lateness and the horizon); "
        "ours the ids of the window before its watermark, which lags by 1 minute. Events per "
        "second over the micro-batches' trigger time, both writing parquet, the faster of "
        "two alternating runs. An id dropped by drop_duplicates_within is a false match of "
        "its fingerprint (probability at most fpp); Spark's is exact.")


def percentile_state(spark, sizes, report):
    """Bytes of a percentile sketch past the exact limit (the compact mode) against its
    window's values, next to the exact form (each value with its time: about 10 bytes)."""
    from windowsketch import _scala_object

    replay = _scala_object(spark, "windowsketch.core.Replay")
    lines = []
    for rows in sizes.percentile_state_rows:
        started = time.time()
        held, nodes, inside, _, variance, size = list(replay.compactState(rows, 0.01, rows, False))
        seconds = time.time() - started
        delta = math.sqrt(2 * variance * math.log(2 / 1e-4)) / (0.01 * inside)
        report.add("percentile state", f"n={rows}", "sketch bytes", size, "bytes",
                   "in-order rows, uniform values, window = n, eps 0.01")
        report.add("percentile state", f"n={rows}", "values held", held, "values")
        report.add("percentile state", f"n={rows}", "Delta / (eps n)", delta, "ratio")
        lines.append((f"{rows:,}", f"{held:,}", f"{nodes:,}", f"{size / 1024:,.0f}",
                      f"{10 * rows / 2**20:,.0f}", f"{delta:.2f}", f"{seconds:.0f}"))
    report.table("Percentile sketch size (compact mode) against the values in its window",
                 ["values in window", "values held", "nodes", "KB", "exact form MB",
                  "Δ(10^-4) / (eps n)", "seconds to build"], lines,
                 "eps 0.01, one row a position in time order, uniform values, a window as long "
                 "as the stream (Replay.compactState, one JVM thread). Δ is the rank error the "
                 "compactions stay within with probability 1 - 10^-4 at a fixed value; the "
                 "straddling rows add at most eps n / 3 (docs/percentiles.md). The goal for "
                 "10^9 values was 64 KB.")


MEMORY_FAMILIES = ["count", "sum", "distinct", "moments", "percentile", "top_k", "sample"]


def memory_per_group(spark, sizes, report):
    """Heap one group's structure holds against the rows of its window, every family, in
    time order (running frames, live keys) and in any order (GROUP BY buffers, sketch
    columns), next to the window's rows themselves (16 bytes a row: a time and a value)."""
    from windowsketch import _scala_object

    throughput = _scala_object(spark, "windowsketch.core.Throughput")
    measured_heap = {}
    lines = []
    for family in MEMORY_FAMILIES:
        for ordered in (True, False):
            row = [family, "in time order" if ordered else "any order"]
            for rows in sizes.memory_rows:
                if not ordered and rows > 10**6:
                    row.append("—")  # shuffled feeds past 10^6 cost minutes, not information
                    continue
                eps = 0.05 if family == "distinct" else 0.01
                # Small structures need copies to rise above the readings' jitter (~1 KB); the
                # big ones (MBs past 10^6 rows) show alone and would cost minutes each, as does
                # every family past 10^7 rows (10^9 rows of top values take about 7 minutes).
                big = family in ("moments", "percentile", "top_k")
                copies = 1 if rows >= 10**8 or (rows >= 10**6 and big) else 8
                held = throughput.heldHeapBytes(family, rows, 10**12, eps, ordered, copies)
                measured_heap[(family, ordered, rows)] = held
                report.add("memory per group", f"{family} {'in order' if ordered else 'any order'}",
                           f"heap at {rows} rows", held, "bytes")
                row.append(f"{held / 1024:,.0f}")
            lines.append(row)
    lines.append(["the window's rows (time and value)", ""] + [f"{16 * r / 1024:,.0f}" for r in sizes.memory_rows])
    report.table(
        "Memory per group against the rows in its window (KB of heap)",
        ["family", "order"] + [f"{r:,} rows" for r in sizes.memory_rows], lines,
        "One window holding every row (window 10^12 positions; any order up to 10^6 rows), "
        "eps 0.01 (distinct counts: "
        "rsd 0.05), uniform values, items of a skewed stream over 10^4 values (8 bytes each). "
        "Each figure is the collector's used heap, in a JVM of its own, with copies of the "
        "structure held, less without, per copy (Throughput.heldHeapBytes). Percentiles are exact up to 4,096 "
        "values (16,384 in time order, a running frame's limit), top values in time order "
        "below 1,407 rows, then bounded; the other families hold their sketches "
        "from the first row.")
    # Past 10^7 rows a live state is the heap table's in-order structure written, at minutes a run.
    live_rows = [r for r in sizes.memory_rows if r <= 10**7]
    live_lines = []
    for family in MEMORY_FAMILIES + ["top_k unsliced", "moments unsliced", "percentile 1000 slices",
                                     "percentile unsliced"]:
        row = [family]
        for rows in live_rows:
            if family == "percentile unsliced" and rows < 10**4:
                row.append("")  # every position a slice is 1,000 at most: within the cap
                continue
            state = throughput.liveStateBytes(family, rows, 0.05 if family == "distinct" else 0.01)
            report.add("memory per group", f"{family} live state", f"bytes at {rows} rows", state, "bytes")
            row.append(f"{state / 1024:,.1f}")
        live_lines.append(row)
    report.table(
        "Live state per key against the rows in its window (KB of state bytes)",
        ["family"] + [f"{r:,} rows" for r in live_rows], live_lines,
        "One key of `sliding_window` with one family, as the state store holds it "
        "(Throughput.liveStateBytes): one row a position, window of that many rows, a tick every "
        "tenth of it, micro-batches of a hundredth with the watermark 100 rows behind the "
        "newest (they wait in the state: a byte or two each for counts, about 10 for values); "
        "the largest state after a batch once the window is full. eps 0.01 (distinct counts: "
        "rsd 0.05), values as above. `top_k unsliced`: ticks every window / 200 + 1 positions, "
        "past 128 tick slices, so the key keeps the running frames' leveled counts; `moments "
        "unsliced`: every window / 2,000 + 1, past 1,024, so it keeps their buckets, and "
        "`percentile unsliced` their compact mode (from 10^4 rows); `percentile 1000 slices`: "
        "every window / 1,000, within the 1,024 slices percentiles keep at eps 0.01.")
    return measured_heap


def bounded_frames(spark, sizes, report):
    """Running frames whose window holds more than the exact limits (every row: window
    10^10), so percentiles run on the compact mode and top values on the bounded counts,
    per row against Spark's running count over the same rows."""
    n = sizes.bounded_frame_rows
    path = "CONCAT('/p', CAST(floor(pow(((id * 2654435761) % 100003) / 100003.0, 4) * 1000) AS INT))"
    spark.range(n).selectExpr("id % 4 AS k", "id DIV 4 AS ts",
                              "CAST((id * 2654435761) % 100000 AS DOUBLE) / 100 AS ms",
                              f"{path} AS url").createOrReplaceTempView("bounded_rows")
    over = "OVER (PARTITION BY k ORDER BY ts)"
    queries = {
        "approx_window_percentile p99, compact mode": f"approx_window_percentile(ms, ts, 10000000000, 0.99) {over}",
        "approx_window_top_k top 5, leveled counts": f"approx_window_top_k(url, ts, 10000000000, 5) {over}",
        "running count, the floor": "count(ms) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING)",
    }
    ns = {name: measured(spark, spark.sql(f"SELECT {q} AS a FROM bounded_rows")).seconds / n * 1e9
          for name, q in queries.items()}
    floor = ns["running count, the floor"]
    for name, value in ns.items():
        report.add("bounded frames", name, "ns/row", value, "ns/row", f"{n} rows, 4 keys, one window each")
    report.table(
        f"Running frames past the exact limits: {n:,} rows in 4 keys' windows, cost per row",
        ["query", "ns/row", "÷ running count"],
        [(name, f"{value:,.0f}", f"{value / floor:.2f}") for name, value in ns.items()],
        "Each key's window holds all its rows (window 10^10 positions), past the exact limits "
        "(16,384 values; 1,407 rows at eps 0.01): the percentiles' compact mode answers from its "
        "view (a Fenwick tree over the summary's values), the top values from the leveled "
        "counts. About 1,000 paths, Zipf-like; values uniform on [0, 1000).")


BIG_WINDOW_QUERIES = {
    "count": "approx_window_count(v, ts, 1000000000)",
    "sum": "approx_window_sum(b, ts, 1000000000)",
    "distinct": "approx_window_count_distinct(u, ts, 1000000000)",
    "moments": "approx_window_stddev(x, ts, 1000000000)",
    "percentile": "approx_window_percentile(x, ts, 1000000000, 0.99)",
    "top_k": "approx_window_top_k(u, ts, 1000000000, 5)",
}


def big_window_child(rows: int) -> None:
    """Runs in its own process with the default 1 GB driver: every family's running frame
    and GROUP BY over `rows` rows in two keys, one window covering every row; prints one
    JSON line of seconds and the heap's peak after each."""
    import json

    from pyspark.sql import SparkSession

    import windowsketch

    builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    spark = windowsketch.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark.sparkContext._jvm
    pools = [p for p in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
             if str(p.getType()) == "Heap memory"]
    spark.range(rows).selectExpr(
        "id % 2 AS k", "id AS ts", "(id * 2654435761) % 100 < 30 AS v", "id % 100 AS b",
        "(id * 2654435761) % 1000003 AS u", "CAST((id * 2654435761) % 100000 AS DOUBLE) / 100 AS x") \
        .createOrReplaceTempView("big")
    out = {"max heap MB": jvm.java.lang.Runtime.getRuntime().maxMemory() / 2**20}
    for name, expression in BIG_WINDOW_QUERIES.items():
        for mode, sql in (("running", f"SELECT max(hash(r)) FROM (SELECT {expression} OVER (PARTITION BY k ORDER BY ts) AS r FROM big)"),
                          ("group by", f"SELECT k, {expression} FROM big GROUP BY k")):
            for p in pools:
                p.resetPeakUsage()
            started = time.time()
            try:
                spark.sql(sql).collect()
                seconds = time.time() - started
            except Exception as e:  # noqa: BLE001 - an out-of-memory is the finding
                seconds = f"failed: {str(e).splitlines()[0][:80]}"
            out[f"{name} {mode}"] = [seconds, sum(p.getPeakUsage().getUsed() for p in pools) / 2**20]
    print(json.dumps(out))
    spark.stop()


def big_window(sizes, report):
    """Every family over one window of millions of rows in the default 1 GB driver."""
    import json
    import subprocess
    import sys

    rows = sizes.big_window_rows
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--big-window-child", str(rows)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        report.table(f"{rows:,} rows in one window, default 1 GB driver", ["outcome"],
                     [(f"the driver failed: {result.stderr.strip().splitlines()[-1][:120]}",)])
        return
    measured_runs = json.loads(result.stdout.strip().splitlines()[-1])
    heap = measured_runs.pop("max heap MB")
    lines = []
    for name, (seconds, peak) in measured_runs.items():
        shown = f"{seconds:.1f}" if isinstance(seconds, float) else seconds
        report.add("big window", name, "seconds", seconds if isinstance(seconds, float) else float("nan"), "s",
                   f"{rows} rows, 2 keys")
        report.add("big window", name, "peak heap", peak, "MB")
        lines.append((name, shown, f"{peak:,.0f}"))
    report.table(
        f"{rows:,} rows in two keys' one window, the default driver ({heap:,.0f} MB of heap)",
        ["aggregate", "seconds", "peak heap MB (all pools, the whole driver)"], lines,
        "A running frame (PARTITION BY k ORDER BY ts) and a GROUP BY k per family, the window "
        "(10^9 positions) covering every row, in a fresh local[2] driver with Spark's default "
        "1 GB; the peak is the heap pools' peak used bytes during the query (the driver's, "
        "Spark's own buffers included).")


def distinct_group_by(spark, sizes, report):
    """GROUP BY distinct counts against Spark's approx_count_distinct (HLL++ in a fixed-size
    buffer of the code-generated hash aggregate), at few large and many small groups, with
    each side's peak memory: Spark-managed memory from the status store, and for ours the
    heap its sketches hold, which Spark's metrics do not see."""
    from windowsketch import _scala_object

    throughput = _scala_object(spark, "windowsketch.core.Throughput")
    # Spark's object hash aggregation holds this many keys' buffers, then sorts the rest of
    # the task's rows and aggregates one key at a time: at most this many sketches (+1) live.
    held_keys = int(spark.conf.get("spark.sql.objectHashAggregate.sortBased.fallbackThreshold")) + 1
    lines = []
    for keys in sorted({10_000, sizes.group_keys}):
        spark.range(sizes.group_rows).selectExpr(
            f"(id * 7919) % {keys} AS k", "id AS ts", "CAST((id * 2654435761) % 50000 AS INT) AS u") \
            .createOrReplaceTempView("visits")
        queries = {
            "approx_window_count_distinct": "SELECT k, approx_window_count_distinct(u, ts, 100000) "
                                            "FROM visits GROUP BY k",
            "approx_count_distinct": "SELECT k, approx_count_distinct(u) FROM visits GROUP BY k",
        }
        results = best_alternating(spark, queries)
        # A key's rows in one map task: every keys-th position of the task's share of the range.
        rows_per_task = max(1, sizes.group_rows // keys // spark.sparkContext.defaultParallelism)
        sketch_heap = held_keys * throughput.distinctSketchHeapBytes(rows_per_task, keys, 100000,
                                                                     0.05, 20_000)
        ours = results["approx_window_count_distinct"].seconds
        for name, m in results.items():
            report.add("distinct groupby", f"{keys} keys {name}", "seconds", m.seconds, "s")
            report.add("distinct groupby", f"{keys} keys {name}", "peak execution memory",
                       m.peak_executor_bytes, "bytes", f"spilled {m.spilled_bytes:.0f}")
            heap = sketch_heap if name == "approx_window_count_distinct" else 0
            if heap:
                report.add("distinct groupby", f"{keys} keys {name}", "sketch heap per task",
                           heap, "bytes", f"{held_keys} sketches at most")
            lines.append((f"{keys:,}", f"{sizes.group_rows // keys:,}", name, f"{m.seconds:.2f}",
                          f"{m.seconds / ours:.2f}", megabytes(m.peak_executor_bytes),
                          megabytes(heap) if heap else "in the managed figure"))
    report.table(
        f"Distinct values, GROUP BY over {sizes.group_rows:,} rows",
        ["keys", "rows per key", "query", "seconds", "÷ approx_window_count_distinct",
         "peak execution MB, both tasks (Spark-managed)", "sketch heap MB per task, at most"],
        lines,
        "rsd 0.05 (m = 512 registers) for both; best of 3 runs each. Our sketches are objects "
        "whose partial aggregates are serialized (a sketch of few values in the sparse kind), "
        "where approx_count_distinct keeps 52 longs inside Spark's hash-aggregation row: with "
        "many keys of few rows, Spark's sort-based fallback of object aggregates is about half "
        "of our time (JFR). Peak execution memory is what Spark's memory manager had handed "
        "out to the two running tasks at most, polled every 10 ms (our side: the sort of the "
        f"rows past {held_keys - 1} keys; theirs: the hash map of every key's buffer). Our sketches live on the heap outside it: a task holds at most "
        f"{held_keys} at once (Spark's object hash aggregation, then one key at a time), each "
        "measured by the collector's used heap over 20,000 copies of a key's sketch in one "
        "task (random values at the key's positions).")


def distinct_state(spark, sizes, report):
    """Bytes of one distinct-count sketch against the window's distinct values, next to an
    exact sliding set (each distinct value with its latest time: 16 bytes)."""
    lines = []
    for n in [10**3, 10**4, 10**5, 10**6][: 2 if sizes is QUICK else 4]:
        sketch_bytes = spark.sql(f"""SELECT length(window_distinct_sketch(id, id, {n}))
                                     FROM range({n})""").collect()[0][0]
        report.add("distinct state", f"n={n}", "sketch bytes", sketch_bytes, "bytes")
        lines.append((f"{n:,}", f"{sketch_bytes:,}", f"{16 * n:,}", f"{16 * n / sketch_bytes:,.0f}"))
    report.table("Distinct-count sketch size against the distinct values in its window",
                 ["distinct values in window", "sketch bytes (rsd 0.05)", "exact set bytes",
                  "exact ÷ sketch"], lines,
                 "Every value distinct, one per position, window = n: the sketch keeps per "
                 "register the (time, rank) pairs that can still be its maximum, about "
                 "ln(n / m) of them.")


def map_side_sorting(spark, df) -> tuple:
    """(tasks, keys) whose map side went past its hash table to Spark's sort, in one run of
    `df`: our partial SketchHashAggregate past its table (the keys its sort emitted), or
    Spark's ObjectHashAggregate past its fallback threshold (128 keys), whose fallback sorts
    every key of the task, the hash map's too (all the node's keys once every task fell back)."""
    execution = df._jdf.queryExecution()
    execution.toRdd().count()  # runs this plan (a write would plan its own)
    todo, sorted_tasks, sorted_keys = [execution.executedPlan()], 0, 0
    while todo:
        node = todo.pop()
        if node.nodeName() == "AdaptiveSparkPlan":
            todo.append(node.executedPlan())
            continue
        if node.nodeName().endswith("QueryStage"):
            todo.append(node.plan())
        children = [node.children().apply(i) for i in range(node.children().size())]
        shuffled = any(name in child.nodeName() for child in children
                       for name in ("Exchange", "ShuffleQueryStage", "AQEShuffleRead"))
        if node.nodeName() in ("SketchHashAggregate", "ObjectHashAggregate") and not shuffled:  # the map side
            metrics = node.metrics()
            tasks = int(metrics.get("numTasksFallBacked").get().value())
            sorted_tasks += tasks
            if node.nodeName() == "SketchHashAggregate":
                sorted_keys += int(metrics.get("numKeysSorted").get().value())
            elif tasks:
                sorted_keys += int(metrics.get("numOutputRows").get().value())
        todo.extend(children)
    return sorted_tasks, sorted_keys


def group_by(spark, sizes, report):
    """approx_window_count GROUP BY against Spark's own sketch aggregate (approx_count_distinct,
    HLL++ in the code-generated hash aggregate), a peer object aggregate (percentile_approx),
    the exact two-pass answer and count_if (exact, no window: the floor), on cached rows: the
    times compare aggregation, not row generation."""
    lines = []
    # 10^4 keys, 2*10^4, 10^5 and 10^6 (past the table's 65,536 keys a task): one in --quick.
    for keys in sorted({10_000, max(10_000, sizes.group_keys // 50),
                        max(10_000, sizes.group_keys // 10), sizes.group_keys}):
        events = spark.range(sizes.group_rows).selectExpr(
            f"(id * 7919) % {keys} AS k", "id AS ts", "(id * 31) % 10 < 3 AS v").cache()
        events.count()
        events.createOrReplaceTempView("events")
        compared = {
            "approx_window_count": "SELECT k, approx_window_count(v, ts, 100000) FROM events GROUP BY k",
            "approx_count_distinct (Spark's sketch)":
                "SELECT k, approx_count_distinct(ts) FROM events GROUP BY k",
        }
        others = {
            "count_if (exact, no window)": "SELECT k, count_if(v) FROM events GROUP BY k",
            "exact two-pass": "SELECT e.k, count_if(v AND ts > now - 100000) FROM events e JOIN "
                              "(SELECT k, max(ts) AS now FROM events GROUP BY k) m ON e.k = m.k "
                              "GROUP BY e.k",
            "percentile_approx (peer object aggregate)":
                "SELECT k, percentile_approx(ts, 0.5) FROM events GROUP BY k",
        }
        results = best_alternating(spark, compared)
        results.update({name: measured(spark, spark.sql(q)) for name, q in others.items()})
        sorted_tasks, _ = map_side_sorting(spark, spark.sql(compared["approx_window_count"]))
        report.add("groupby", f"{keys} keys approx_window_count", "map tasks sorted", sorted_tasks,
                   "tasks")
        approx = results["approx_window_count"].seconds
        for name, m in results.items():
            report.add("groupby", f"{keys} keys {name}", "seconds", m.seconds, "s")
            report.add("groupby", f"{keys} keys {name}", "peak task memory", m.peak_task_bytes,
                       "bytes", f"spilled {m.spilled_bytes:.0f}")
            report.add("groupby", f"{keys} keys {name}", "peak execution memory",
                       m.peak_executor_bytes, "bytes")
            lines.append((f"{keys:,}", name, f"{m.seconds:.2f}", f"{m.seconds / approx:.2f}",
                          megabytes(m.peak_executor_bytes), megabytes(m.spilled_bytes),
                          str(sorted_tasks) if name == "approx_window_count" else ""))
        events.unpersist()
    report.table(f"GROUP BY over {sizes.group_rows:,} cached rows",
                 ["keys", "query", "seconds", "÷ approx_window_count",
                  "peak execution MB, both tasks", "spilled MB", "map tasks sorted"],
                 lines,
                 "Window 100,000 positions, eps 0.01, Spark's default settings; the rows are "
                 "cached (and counted) before timing, so the times compare aggregation. "
                 "approx_window_count and approx_count_distinct: best of 3 alternating runs; "
                 "the others one warm run. Our aggregates run on SketchHashAggregate: a hash "
                 "table of its own on the map side while a task's keys and the heap their "
                 "sketches hold fit its share of user memory, at most 65,536 keys a task, then "
                 "Spark's sort-based aggregation for the rest of the task (the last column: map "
                 "tasks that went past the table). Peak "
                 "execution memory is what Spark's memory manager had handed out to the two "
                 "running tasks at most, polled every 10 ms: sorts, hash maps, joins. Object "
                 "aggregates (ours, percentile_approx) keep their buffers on the heap outside "
                 "it; a count sketch per key is a few hundred bytes (the state-size table).")


#: Each family's GROUP BY next to the Spark aggregate a user would otherwise run on it.
FAMILY_GROUP_BY = {
    "count": ("approx_window_count(v, ts, 100000000)", "approx_count_distinct(ts)"),
    "sum": ("approx_window_sum(b, ts, 100000000)", "sum(b)"),
    "distinct": ("approx_window_count_distinct(u, ts, 100000000)", "approx_count_distinct(u)"),
    "percentile": ("approx_window_percentile(x, ts, 100000000, 0.99)", "percentile_approx(x, 0.99)"),
    "moments": ("approx_window_stddev(x, ts, 100000000)", "stddev(x)"),
    "top_k": ("approx_window_top_k(u, ts, 100000000, 5)", "approx_top_k(u, 5)"),
    "sample": ("approx_window_sample(u, ts, 100000000, 5)", "slice(shuffle(collect_list(u)), 1, 5)"),
}


def group_by_families(spark, sizes, report, families=None):
    """Every family's GROUP BY against the Spark aggregate nearest to it, at 10^4, 2*10^4,
    10^5 and 10^6 keys (the last two past our table's 65,536 keys a task) over the same cached rows
    (1,000 down to 10 rows a key), the window covering every row so that both sides
    aggregate the same rows; with the map tasks that went past their hash table to a sort
    and the keys those sorts aggregated."""
    lines = []
    for keys in sorted({10_000, max(10_000, sizes.group_keys // 50),
                        max(10_000, sizes.group_keys // 10), sizes.group_keys}):
        rows = spark.range(sizes.group_rows).selectExpr(
            f"(id * 7919) % {keys} AS k", "id AS ts", "(id * 31) % 10 < 3 AS v",
            "(id * 2654435761) % 1000 AS b",
            "CAST((id * 2654435761) % 100000 AS DOUBLE) / 100 AS x",
            "CAST(floor(pow(((id * 2654435761) % 100003) / 100003.0, 4) * 1000) AS INT) AS u").cache()
        rows.count()
        rows.createOrReplaceTempView("family_rows")
        for family, (ours, spark_side) in FAMILY_GROUP_BY.items():
            if families and family not in families:
                continue
            queries = {"ours": f"SELECT k, {ours} AS a FROM family_rows GROUP BY k",
                       "spark": f"SELECT k, {spark_side} AS a FROM family_rows GROUP BY k"}
            best = best_alternating(spark, queries, runs=2)
            sorted_tasks, sorted_keys = map_side_sorting(spark, spark.sql(queries["ours"]))
            ratio = best["ours"].seconds / best["spark"].seconds
            case = f"{keys} keys {family}"
            report.add("groupby families", case, "ours seconds", best["ours"].seconds, "s", ours)
            report.add("groupby families", case, "spark seconds", best["spark"].seconds, "s", spark_side)
            report.add("groupby families", case, "ours / spark", ratio, "ratio")
            report.add("groupby families", case, "map tasks sorted", sorted_tasks, "tasks")
            report.add("groupby families", case, "map keys sorted", sorted_keys, "keys")
            lines.append((f"{keys:,}", f"{sizes.group_rows // keys:,}", family,
                          f"{best['ours'].seconds:.2f}", spark_side,
                          f"{best['spark'].seconds:.2f}", f"{ratio:.2f}",
                          f"{sorted_tasks} / {sorted_keys:,}"))
        rows.unpersist()
    report.table(f"GROUP BY, every family against Spark's nearest aggregate, {sizes.group_rows:,} cached rows",
                 ["keys", "rows a key", "family", "ours s", "Spark's", "Spark's s", "ours ÷ Spark's",
                  "our map side sorted: tasks / keys"], lines,
                 "One window of 10^8 positions covers every row, so both sides aggregate the "
                 "same rows; eps 0.01, k = 5, Spark's default settings. The rows are cached and "
                 "counted before timing; each figure is the best of 2 alternating runs. Counts, "
                 "sums and distinct counts run their map side on SketchHashAggregate's own "
                 "table (at most 65,536 keys a task, then Spark's sort for the rest), the other "
                 "families on Spark's ObjectHashAggregate, which sorts past 128 keys a task: "
                 "the last column counts the map tasks that sorted and the keys their sorts "
                 "aggregated (Spark's fallback sorts the keys already in its hash map too). Spark's sum, stddev and "
                 "count_if are declarative aggregates compiled into the hash aggregate; "
                 "approx_count_distinct, percentile_approx and approx_top_k keep a sketch per key.")


def state_size(spark, sizes, report):
    from windowsketch import _scala_object

    t = _scala_object(spark, "windowsketch.core.Throughput")
    lines, plot = [], {}
    for eps in (0.1, 0.01, 0.001):
        for window in sizes.state_windows:
            events = min(window, sizes.state_events)
            h, fresh, shuffled, folded = t.stateBytes(window, eps, events)
            k = math.ceil(1 / eps)
            theory = (k // 2 + 2) * max(1, math.ceil(math.log2(2 * events / k + 1)))
            lines.append((eps, f"{window:,}", f"{events:,}", h, fresh, shuffled, folded,
                          theory, f"{window / 8:,.0f}"))
            plot[(eps, window)] = (h, folded)
            for name, value in [("histogram", h), ("mergeable fresh", fresh),
                                ("mergeable shuffled", shuffled), ("mergeable 200-way fold", folded)]:
                report.add("state", f"eps={eps} N={window}", name, value, "bytes")
    report.table(
        "State size (serialized bytes)",
        ["eps", "window N", "events in window", "histogram (in order)", "mergeable, in order",
         "mergeable, shuffled", "mergeable, 200-way fold", "theory: buckets", "exact bitmap bytes"],
        lines,
        "Events spread evenly over the window. 'theory' is the histogram's bucket bound "
        "(ceil(k/2)+2 per level, log2(2n/k) levels); an exact sliding count needs one bit "
        "per position (or 8 bytes per event).")
    return plot


def accuracy_streams(sizes):
    """(name, ts, events, window, eps, count-based?) for real and synthetic streams."""
    streams = []
    with gzip.open(os.path.join(SHARED_DATA, "nasa_http_1995-08-01.tsv.gz"), "rt") as f:
        next(f)
        parts = [line.rstrip("\n").split("\t") for line in f]
    seconds = np.array([int(p[2]) for p in parts], dtype=np.int64)
    is404 = np.array([p[5] == "404" for p in parts])
    streams.append(("NASA 404s, 10 min", seconds * 10**6, is404, 600 * 10**6 + 1, 0.01, False))
    streams.append(("NASA requests, 10 min", seconds * 10**6, np.ones(len(parts), bool),
                    600 * 10**6 + 1, 0.01, False))
    streams.append(("NASA 404s, last 1000 requests", np.arange(len(parts)), is404, 1000, 0.1,
                    True))
    rng = np.random.default_rng(1)
    n = sizes.synthetic_rows
    bursty = rng.random(n) < 0.05
    for start in rng.integers(0, n, 40):
        bursty[start:start + int(rng.integers(100, 3000))] = True
    streams.append(("synthetic bursts, last 5000", np.arange(n), bursty, 5000, 0.05, True))
    streams.append(("synthetic p=0.5, last 1000", np.arange(n), rng.random(n) < 0.5, 1000,
                    0.1, True))
    return streams


def accuracy(spark, sizes, report):
    import dgim

    from windowsketch import _scala_object

    replay = _scala_object(spark, "windowsketch.core.Replay")
    lines = []
    for name, ts, events, window, eps, count_based in accuracy_streams(sizes):
        packed = replay.run(window, eps, np.asarray(ts, ">i8").tobytes(),
                            np.asarray(events, np.uint8).tobytes(), False)
        out = np.frombuffer(bytes(packed), ">i8").reshape(len(events), -1)
        prefix = np.concatenate([[0], np.cumsum(events)])
        exact = prefix[1:] - prefix[np.searchsorted(ts, ts - window, side="right")]
        mask = exact > 0
        # Both read the same histogram: (estimates, buckets held per row).
        columns = {"windowsketch": (out[:, 0], out[:, 4]),
                   "seed ceil(total - last/2)": (out[:, 3], out[:, 4])}
        if count_based:
            d = dgim.Dgim(window, error_rate=eps)
            estimates = np.empty(len(events), np.int64)
            buckets = np.empty(len(events), np.int64)
            for i, e in enumerate(events.tolist()):
                d.update(bool(e))
                estimates[i] = d.get_count()
                buckets[i] = d.nb_buckets
            columns["PyPI dgim 0.2.0"] = (estimates, buckets)
        for method, (estimate, buckets) in columns.items():
            rel = np.abs(estimate - exact)[mask] / exact[mask]
            worst, mean = float(rel.max()), float(rel.mean())
            lines.append((name, eps, method, f"{worst / eps:.3f}", f"{mean / eps:.4f}",
                          "yes" if worst <= eps else "**no**", f"{buckets.mean():,.1f}"))
            report.add("accuracy", f"{name} {method}", "worst/eps", worst / eps, "ratio")
            report.add("accuracy", f"{name} {method}", "mean/eps", mean / eps, "ratio")
            report.add("accuracy", f"{name} {method}", "mean buckets", float(buckets.mean()),
                       "buckets")
    report.table("Accuracy: relative error / eps over every row",
                 ["stream", "eps", "estimator", "worst / eps", "mean / eps", "bound held",
                  "mean buckets"], lines,
                 "The seed's estimator reads the same histogram as windowsketch "
                 "(`ceil(total - last/2)`); PyPI's dgim counts only the last N elements, so it "
                 "runs on the count-based windows. dgim keeps up to ceil(1/eps) buckets of a "
                 "size where the seed's rule, which windowsketch follows, keeps ceil(k/2) + 1: "
                 "its lower mean error is paid for in buckets.")


# Each of ours next to Spark's own floor for the same plan shape, so the report shows how
# much of the scaling is Spark's.
SCALING_QUERIES = {
    "running window": "SELECT approx_window_count(v, ts, 100000) OVER (PARTITION BY k ORDER BY ts) "
                      "FROM stream",
    "running count (Spark's floor)": "SELECT count(v) OVER (PARTITION BY k ORDER BY ts ROWS "
                                     "UNBOUNDED PRECEDING) FROM stream",
    "GROUP BY": "SELECT k2, approx_window_count(v, ts, 100000) FROM stream GROUP BY k2",
    "GROUP BY count (Spark's floor)": "SELECT k2, count(*) FROM stream GROUP BY k2",
}


def scaling_child(master: str, rows: int) -> None:
    """Runs in its own process (one SparkContext per master): prints one JSON line."""
    import json

    spark = session(master)
    spark.range(rows).selectExpr("id % 8 AS k", "id % 10007 AS k2", "id AS ts",
                                 "(id * 2654435761) % 100 < 30 AS v") \
        .createOrReplaceTempView("stream")
    print(json.dumps({name: measured(spark, spark.sql(q)).seconds
                      for name, q in SCALING_QUERIES.items()}))
    spark.stop()


def scaling(sizes, report):
    import json
    import subprocess
    import sys

    seconds = {}
    for master in ("local[1]", "local[2]"):
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--scaling-child", master,
             "--rows", str(sizes.window_rows)],
            capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL).stdout
        seconds[master] = json.loads(out.strip().splitlines()[-1])
    lines = []
    for name in SCALING_QUERIES:
        one, two = seconds["local[1]"][name], seconds["local[2]"][name]
        lines.append((name, f"{one:.2f}", f"{two:.2f}", f"{one / two:.2f}×"))
        report.add("scaling", name, "local[1] s", one, "s")
        report.add("scaling", name, "local[2] s", two, "s")
    report.table(f"Scaling: {sizes.window_rows:,} rows on one core and on two",
                 ["query", "local[1] s", "local[2] s", "speed-up"], lines,
                 "Running window: 8 keys, window 10^5. GROUP BY: 10,007 keys. Each master in "
                 "its own process.")


def streaming_state(spark, sizes, report, workdir):
    """State-store bytes per key and micro-batch time: the sketch against Spark's exact
    sliding-window aggregation, on the same files of events."""
    import datetime
    import json

    from pyspark.sql import functions as F

    from windowsketch.functions import approx_window_count

    rng = np.random.default_rng(8)
    source = os.path.join(workdir, "stream-in")
    os.makedirs(source, exist_ok=True)
    start = datetime.datetime(2024, 1, 1)
    files = sizes.stream_files
    per_file = sizes.stream_events // files
    span = 7200 // files
    for f in range(files):  # two hours of events, in time order across files
        seconds = np.sort(rng.integers(f * span, (f + 1) * span, per_file))
        keys = rng.integers(0, sizes.stream_keys, per_file)
        with open(os.path.join(source, f"part-{f:03d}.json"), "w") as out:
            for s, k in zip(seconds.tolist(), keys.tolist()):
                ts = (start + datetime.timedelta(seconds=s)).isoformat()
                out.write(json.dumps({"key": int(k), "ts": ts, "v": bool(s % 7 == 0)}) + "\n")
    events = spark.readStream.schema("key INT, ts TIMESTAMP, v BOOLEAN") \
        .option("maxFilesPerTrigger", 1).json(source)
    queries = {
        "approx_window_count per key": events.groupBy("key").agg(
            approx_window_count("v", "ts", "1 hour").alias("n")),
        "exact: window(ts, '1 hour', '1 minute'), key": events.withWatermark("ts", "1 hour")
            .groupBy(F.window("ts", "1 hour", "1 minute"), "key").agg(F.count_if("v")),
    }
    lines = []
    for name, df in queries.items():
        # Every partition must be consumed for the state stores to commit.
        query = (df.writeStream.outputMode("update")
                 .foreachBatch(lambda batch, _: batch.write.format("noop").mode("overwrite").save())
                 .option("checkpointLocation", os.path.join(workdir, f"ckpt-{len(lines)}"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        progress = [p for p in query.recentProgress if p["stateOperators"]]
        state = progress[-1]["stateOperators"][0]
        batch_ms = np.mean([p["durationMs"]["triggerExecution"] for p in progress])
        per_key = state["memoryUsedBytes"] / sizes.stream_keys
        lines.append((name, f"{state['numRowsTotal']:,}", f"{state['memoryUsedBytes']:,}",
                      f"{per_key:,.0f}", f"{batch_ms:,.0f}"))
        report.add("streaming", name, "state bytes per key", per_key, "bytes")
        report.add("streaming", name, "micro-batch ms", batch_ms, "ms")
    report.table(
        f"Structured Streaming state: {sizes.stream_keys:,} keys, {sizes.stream_events:,} "
        f"events over two hours, {files} micro-batches",
        ["query", "state rows", "state bytes", "bytes per key", "mean micro-batch ms"], lines,
        "State after the last micro-batch, as the state store reports it "
        "(memoryUsedBytes). The exact query needs a watermark to drop old windows at all.")


def sketch_columns(spark, sizes, report, workdir):
    """Stored sketch columns in Spark: window_sketch_merge per key and window_sketch_estimate
    per row over stored sketches, and the same for window_distinct_sketch, against the same
    work on Spark's own stored HLL sketches (hll_union_agg, hll_sketch_estimate) of the same
    groups, from the same Parquet files."""
    n = sizes.column_sketches
    keys = 1000
    per_sketch = 10
    spark.range(n * per_sketch).selectExpr(
        f"id % {n} AS g", f"timestamp_seconds(1700000000 + (id DIV {n}) * 60 + id % 3600) AS ts",
        # x: ten distinct values per group (a prime modulus, so id's multiples of n differ).
        "(id * 31) % 10 < 3 AS v", "(id * 7) % 100003 AS x").createOrReplaceTempView("column_rows")
    path = os.path.join(workdir, "sketch-columns")
    # hll_sketch_agg at its default lgConfigK 12 beside the count sketch, and at 9 (512
    # buckets) beside the distinct sketch at its default rsd 0.05 (m = 512).
    spark.sql("""SELECT g, window_sketch(v, ts, INTERVAL 1 HOUR, 0.01) AS s, hll_sketch_agg(x) AS h,
                        window_distinct_sketch(x, ts, INTERVAL 1 HOUR) AS d,
                        hll_sketch_agg(x, 9) AS h9
                 FROM column_rows GROUP BY g""").write.parquet(path)
    spark.read.parquet(path).createOrReplaceTempView("stored_columns")
    sizes_row = spark.sql("SELECT avg(length(s)), avg(length(h)), avg(length(d)), avg(length(h9)) "
                          "FROM stored_columns").collect()[0]
    cases = {
        "window_sketch_merge per key": (
            f"SELECT g % {keys} AS k, window_sketch_merge(s) FROM stored_columns GROUP BY k",
            f"SELECT g % {keys} AS k, hll_union_agg(h) FROM stored_columns GROUP BY k"),
        "window_sketch_estimate per row": ("SELECT window_sketch_estimate(s) FROM stored_columns",
                                           "SELECT hll_sketch_estimate(h) FROM stored_columns"),
        "window_distinct_sketch_merge per key": (
            f"SELECT g % {keys} AS k, window_distinct_sketch_merge(d) FROM stored_columns GROUP BY k",
            f"SELECT g % {keys} AS k, hll_union_agg(h9) FROM stored_columns GROUP BY k"),
        "window_distinct_sketch_estimate per row": (
            "SELECT window_distinct_sketch_estimate(d) FROM stored_columns",
            "SELECT hll_sketch_estimate(h9) FROM stored_columns"),
    }
    lines = []
    for case, (ours, theirs) in cases.items():
        best = best_alternating(spark, {"ours": ours, "hll": theirs})
        mine, hll = best["ours"].seconds, best["hll"].seconds
        report.add("sketch columns", f"{case} ours", "seconds", mine, "s")
        report.add("sketch columns", f"{case} hll", "seconds", hll, "s")
        lines.append((case, f"{mine:.2f}", f"{hll:.2f}", f"{mine / hll:.2f}"))
    report.table(
        f"Sketch columns in Spark: {n:,} stored sketches",
        ["query", "ours s", "Spark's HLL sketch s", "÷ HLL"], lines,
        f"Per group of {per_sketch} rows: a window sketch (mean {sizes_row[0]:,.0f} bytes) "
        f"beside an HLL sketch at `hll_sketch_agg`'s defaults (mean {sizes_row[1]:,.0f} "
        f"bytes), and a distinct-count sketch at rsd 0.05 (mean {sizes_row[2]:,.0f} bytes, "
        f"the sparse kind) beside an HLL sketch of as many buckets, lgConfigK 9 (mean "
        f"{sizes_row[3]:,.0f} bytes); read from Parquet, best of 3 alternating runs. Merge: "
        f"{keys:,} keys of {n // keys:,} sketches each against `hll_union_agg`; estimate: one "
        "per stored row against `hll_sketch_estimate`.")


def stored_sketches(spark, sizes, report, workdir):
    """Stored sketch columns read without Spark: windowsketch.sketch decoding and querying
    a Parquet column of sketches in Python, on one core, against window_sketch_estimate
    (window_distinct_sketch_estimate) over the same column in Spark, local[2]."""
    import datetime

    import pyarrow.parquet as pq

    from windowsketch.sketch import estimate_column

    n = sizes.stored_sketches
    per_key = 40
    spark.range(n * per_key).selectExpr(
        f"id % {n} AS k", f"timestamp_seconds(1700000000 + (id DIV {n}) * 90 + id % 60) AS ts",
        "(id * 31) % 10 < 3 AS v", "(id * 7) % 1000 AS x").createOrReplaceTempView("stored")
    as_of = datetime.datetime(2023, 11, 14, 23, 30)  # an hour after the last row
    kinds = {"count": ("window_sketch(v, ts, INTERVAL 2 HOURS, 0.01)", "window_sketch_estimate"),
             "distinct": ("window_distinct_sketch(x, ts, INTERVAL 2 HOURS)",
                          "window_distinct_sketch_estimate")}
    lines = []
    for kind, (aggregate, estimate) in kinds.items():
        path = os.path.join(workdir, f"stored-{kind}")
        spark.sql(f"SELECT k, {aggregate} AS s FROM stored GROUP BY k").coalesce(2) \
            .write.parquet(path)
        in_spark = spark.read.parquet(path).selectExpr(
            "k", f"{estimate}(s, TIMESTAMP'{as_of.isoformat(sep=' ')}') AS e")
        spark_seconds = measured(spark, in_spark).seconds
        table = pq.read_table(path, columns=["k", "s"])
        start = time.perf_counter()
        answers = estimate_column(table.column("s"), as_of)
        python_seconds = time.perf_counter() - start
        # The same numbers, or the rates compare different work.
        want = {r.k: r.e for r in in_spark.collect()}
        assert dict(zip(table.column("k").to_pylist(), answers.to_pylist())) == want
        mean_bytes = float(np.mean([len(b) for b in table.column("s").to_pylist()]))
        for who, seconds in (("python", python_seconds), ("spark", spark_seconds)):
            report.add("stored", f"{kind} {who}", "sketches per second", n / seconds, "1/s",
                       f"mean {mean_bytes:.0f} bytes")
        lines.append((kind, f"{n:,}", f"{mean_bytes:,.0f}", f"{n / python_seconds:,.0f}",
                      f"{n / spark_seconds:,.0f}", f"{spark_seconds / python_seconds:.2f}"))
    report.table(
        f"Stored sketch columns read in Python without Spark: {n:,} sketches",
        ["sketch", "sketches", "mean bytes", "Python sketches/s (1 core)",
         "Spark sketches/s (local[2])", "Python ÷ Spark rate"], lines,
        f"One sketch per key over {per_key} rows, written to Parquet; each read once at one "
        "as_of. Python: `windowsketch.sketch.estimate_column` over the pyarrow column "
        "(decoding with every check the JVM makes, then the query); Spark: the estimate "
        "function over the same files, a warm run. Both give the same numbers (checked).")


KEYED_FLOOR = "Spark's groupBy(key).count() (the keyed stateful floor)"


def live_queries(events, each_family: bool = True) -> dict:
    """The live operators (first) and what a user would run instead, on one event stream;
    `each_family` adds sliding_window with each family alone."""
    from pyspark.sql import functions as F

    from windowsketch import live
    from windowsketch.functions import approx_window_count
    from windowsketch.streaming import sliding_counts, sliding_window

    families = {"count": live.count(F.lit(True)), "sum": live.sum("x"),
                "distinct": live.distinct("x"), "p50 and p99": live.percentile("x", [0.5, 0.99]),
                "moments": live.moments("x"), "top 3": live.top_k("x", 3)}

    def window(*names):
        return (sliding_window(events, "key", "ts", "1 hour", "1 minute",
                               [families[n] for n in names]), "append")

    return {
        "sliding_counts": (sliding_counts(events, "key", "ts", "1 hour", "1 minute"), "append"),
        f"sliding_window: {', '.join(families)}": window(*families),
        **{f"sliding_window: {name} alone": window(name) for name in families if each_family},
        KEYED_FLOOR: (
            events.groupBy("key").count(), "update"),
        "groupBy(key).agg(approx_window_count)": (events.groupBy("key").agg(
            approx_window_count(F.lit(True), "ts", "1 hour").alias("n")), "update"),
        "exact: groupBy(window(ts, '1 hour', '1 minute'), key)": (events.groupBy(
            F.window("ts", "1 hour", "1 minute"), "key").count(), "update"),
    }


def run_stream(df, mode: str, checkpoint: str):
    """Runs a streaming query over everything its source holds; its progress reports."""
    query = (df.writeStream.outputMode(mode)
             .foreachBatch(lambda batch, _: batch.write.format("noop").mode("overwrite").save())
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    return query.recentProgress


def live_counts(spark, sizes, report, workdir):
    """Key churn on a stream: every key lives a few minutes of event time in a day, with a
    1-hour window and 1-minute ticks. State rows and bytes after every micro-batch and the
    micro-batch time, for sliding_counts, sliding_window with every family, the plain
    per-key aggregation, Spark's exact sliding-window count with the same watermark and
    Spark's own keyed count (the floor for a keyed stateful stream)."""
    import shutil

    from pyspark.sql import functions as F

    span, batches, life = 24 * 3600, sizes.churn_batches, 300
    source = os.path.join(workdir, "churn-in")
    os.makedirs(source)
    per_batch = sizes.churn_events // batches
    for b in range(batches):  # events in time order across files; key k lives ~5 minutes
        staging = os.path.join(workdir, f"churn-staging-{b}")
        (spark.range(b * per_batch, (b + 1) * per_batch, numPartitions=1)
         .selectExpr(f"id * {span / sizes.churn_events} + rand({b}) AS t")
         .selectExpr(f"CAST(GREATEST(t - rand({b + 100}) * {life}, 0) * "
                     f"{sizes.churn_keys / span} AS BIGINT) AS key",
                     "timestamp_seconds(CAST(1704067200 + t AS DECIMAL(18, 6))) AS ts",
                     f"CAST(rand({b + 200}) * 1000 AS BIGINT) AS x")
         .write.parquet(staging))
        part = next(f for f in os.listdir(staging) if f.endswith(".parquet"))
        target = os.path.join(source, f"batch-{b:03d}.parquet")
        shutil.move(os.path.join(staging, part), target)
        os.utime(target, (1_700_000_000 + b, 1_700_000_000 + b))
    # Every query runs twice over the same files, all in turn, and the second runs are
    # measured: a stream runs for hours, and the JIT's warm-up of the code paths the queries
    # share otherwise charges the first (a warm-up on the first 3 files was not enough).

    def events(folder):
        return (spark.readStream.schema("key BIGINT, ts TIMESTAMP, x BIGINT")
                .option("maxFilesPerTrigger", 1).parquet(folder).withWatermark("ts", "1 minute"))

    each_family = sizes.live_each_family
    for i, (df, mode) in enumerate(live_queries(events(source), each_family).values()
                                   if sizes.live_warm_up else []):
        run_stream(df, mode, os.path.join(workdir, f"churn-warm-up-ckpt-{i}"))
    queries = live_queries(events(source), each_family)
    # Every row is an input of every family but the sum (x may be 0), so these operators'
    # keys are live exactly when they hold an event.
    live_operators = [name for name in queries if "sliding" in name and "sum alone" not in name]
    lines = []
    live_rows: dict[str, list[int]] = {}
    for i, (name, (df, mode)) in enumerate(queries.items()):
        progress = [p for p in run_stream(df, mode, os.path.join(workdir, f"churn-ckpt-{i}"))
                    if p["stateOperators"] and p["numInputRows"]]
        rows = [p["stateOperators"][0]["numRowsTotal"] for p in progress]
        state_bytes = [p["stateOperators"][0]["memoryUsedBytes"] for p in progress]
        batch_s = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
        events_per_s = sum(p["numInputRows"] for p in progress) / sum(batch_s)
        if name in live_operators:
            live_rows[name] = rows
        lines.append([name, f"{np.median(rows):,.0f}", f"{max(rows):,}",
                      megabytes(max(state_bytes)), f"{np.median(batch_s):.2f}",
                      f"{events_per_s:,.0f}", events_per_s])
        report.add("live", name, "max state rows", max(rows), "rows")
        report.add("live", name, "max state bytes", max(state_bytes), "bytes")
        report.add("live", name, "median micro-batch s", float(np.median(batch_s)), "s")
        report.add("live", name, "events per second", events_per_s, "events/s")
    floor = next(line[-1] for line in lines if line[0] == KEYED_FLOOR)
    for line in lines:
        line[-1] = f"{line[-1] / floor:.0%}"
        report.add("live", line[0], "events/s as a share of Spark's keyed count",
                   float(line[-1][:-1]) / 100, "ratio")
    # The keys live after each data batch, counted from the events: batch b runs with the
    # watermark of the batches before it (their newest ts minus the 1-minute delay), emits
    # every tick up to it, and keeps the keys with an event at or after its last tick's
    # window start ([T - 1 hour, T]) or waiting after T.
    files = sorted(os.path.join(source, f) for f in os.listdir(source))
    newest = [spark.read.parquet(f).selectExpr("max(unix_micros(ts))").first()[0] for f in files]
    live_counts = []
    for b in range(batches):
        start = -2**62  # the first batch has no watermark: every event waits
        if b > 0:
            tick = (max(newest[:b]) - 60_000_000) // 60_000_000 * 60_000_000
            start = tick - 3_600_000_000
        live_counts.append(spark.read.parquet(*files[:b + 1])
                           .where(F.expr(f"unix_micros(ts) >= {start}"))
                           .select("key").distinct().count())
    live_keys = float(np.median(live_counts))
    report.add("live", "keys live after a batch (counted)", "median", live_keys, "keys")
    gap = max(max(abs(a - b) for a, b in zip(rows, live_counts)) if len(rows) == len(live_counts)
              else -1 for rows in live_rows.values())
    report.add("live", "live operators", "largest |state rows - live keys| over batches",
               gap, "rows", "-1: the batch counts differ")
    report.table(
        f"Live counts under key churn: {sizes.churn_keys:,} keys, {sizes.churn_events:,} "
        f"events over a day, each key live about {life // 60} minutes; 1-hour window, "
        f"1-minute ticks, {batches} micro-batches",
        ["query", "median state rows", "max state rows", "max state MB", "median micro-batch s",
         "events/s", "of the floor's events/s"], lines,
        f"Live keys after a data batch, counted from the events (an event in the window of "
        f"the last tick the batch emitted, or after that tick): median {live_keys:,.0f}; "
        f"the live operators' state rows differ from it by at most {gap} after any batch. "
        "State rows and bytes as the state store reports them "
        "after each micro-batch (memoryUsedBytes); events/s over the data batches" +
        (" of a second run (every query ran once before, in turn, to warm up the JIT)."
         if sizes.live_warm_up else " of a first run (--quick: no warm-up run, so the first query pays the JIT's)."))


def memory_plot(out, heap, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for family in MEMORY_FAMILIES:
        xs = [r for r in rows if (family, True, r) in heap]
        ax.plot(xs, [heap[(family, True, r)] / 1024 for r in xs], marker="o", label=family)
    ax.plot(rows, [16 * r / 1024 for r in rows], linestyle=":", color="grey",
            label="the window's rows (16 bytes each)")
    ax.set(xscale="log", yscale="log", xlabel="rows in the window", ylabel="KB of heap",
           title="Memory per group in time order (eps 0.01)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "memory_per_group.png"), dpi=110)


def plots(out, window_plot, state_plot):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    windows = sorted(window_plot)
    for name in window_plot[windows[0]]:
        ax.plot(windows, [window_plot[w][name] for w in windows], marker="o", label=name)
    ax.set(xscale="log", yscale="log", xlabel="window N (rows)", ylabel="ns per row",
           title="Sliding counts in Spark window frames")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "window_time.png"), dpi=110)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for eps in sorted({e for e, _ in state_plot}):
        ws = sorted(w for e, w in state_plot if e == eps)
        ax.plot(ws, [state_plot[(eps, w)][0] for w in ws], marker="o",
                label=f"histogram, eps={eps}")
        ax.plot(ws, [state_plot[(eps, w)][1] for w in ws], marker="s", linestyle="--",
                label=f"mergeable, 200-way fold, eps={eps}")
    ax.set(xscale="log", yscale="log", xlabel="window N", ylabel="serialized bytes",
           title="State size against window and eps")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "state_size.png"), dpi=110)


#: The report's sections in order: each a function of (spark, sizes, report[, workdir]),
#: but scaling, which starts its own Spark processes.
SECTIONS = ["core_throughput", "running_windows", "running_sums", "distinct_windows", "distinct_group_by",
            "percentiles", "percentile_state", "moments", "top_k", "samples", "filters",
            "deduplication", "memory_per_group",
            "bounded_frames", "distinct_state", "group_by", "group_by_families", "state_size", "accuracy",
            "streaming_state", "live_counts", "sketch_columns", "stored_sketches", "scaling",
            "big_window"]
NEEDS_WORKDIR = {"streaming_state", "live_counts", "sketch_columns", "stored_sketches",
                 "deduplication"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI")
    parser.add_argument("--out", default=os.path.join(HERE, "report"))
    parser.add_argument("--only", metavar="SECTIONS",
                        help=f"run only these sections, comma-separated: {', '.join(SECTIONS)}")
    parser.add_argument("--families", metavar="FAMILIES",
                        help=f"group_by_families: only these, comma-separated: {', '.join(FAMILY_GROUP_BY)}")
    parser.add_argument("--scaling-child", help=argparse.SUPPRESS)
    parser.add_argument("--big-window-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.scaling_child:
        return scaling_child(args.scaling_child, args.rows)
    if args.big_window_child:
        return big_window_child(args.big_window_child)
    sizes = QUICK if args.quick else FULL
    if args.quick:
        global MAX_RUNS, WARM_UP
        MAX_RUNS, WARM_UP = 1, False
    only = [name.strip() for name in (args.only or "").split(",") if name.strip()]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        parser.error(f"--only: unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    chosen = only or SECTIONS
    families = [name.strip() for name in (args.families or "").split(",") if name.strip()]
    unknown = sorted(set(families) - set(FAMILY_GROUP_BY))
    if unknown:
        parser.error(f"--families: unknown families {unknown}; choose from {', '.join(FAMILY_GROUP_BY)}")
    os.makedirs(args.out, exist_ok=True)
    report = Report()
    spark = session()
    started = time.time()
    made = {}  # the data behind the plots, from the sections that make them
    try:
        with tempfile.TemporaryDirectory() as workdir:
            for name in chosen:
                if name in ("scaling", "big_window"):
                    continue  # their own processes, after this session stops
                function = globals()[name]
                arguments = (spark, sizes, report) + ((workdir,) if name in NEEDS_WORKDIR else ())
                options = {"families": families} if name == "group_by_families" else {}
                section_started = time.time()
                made[name] = function(*arguments, **options)
                print(f"{name}: {time.time() - section_started:.0f} s", file=sys.stderr)
    finally:
        spark.stop()
    if "scaling" in chosen:
        scaling(sizes, report)
    if "big_window" in chosen:
        big_window(sizes, report)
    if "running_windows" in made and "state_size" in made:
        plots(args.out, made["running_windows"], made["state_size"])
    if made.get("memory_per_group"):
        memory_plot(args.out, made["memory_per_group"], sizes.memory_rows)
    command = "python benchmarks/run.py" + (" --quick" if args.quick else "") + \
        (f" --only {','.join(only)}" if only else "") + \
        (f" --families {','.join(families)}" if families else "")
    header = [f"# windowsketch benchmarks ({'quick' if args.quick else 'full'} run)", "",
              f"`{command}` on "
              f"{platform.platform()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}; {time.time() - started:,.0f} s in all.", "",
              *(["![time](window_time.png) ![state](state_size.png)", ""] if not only else [])]
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(header + report.markdown) + "\n")
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["section", "case", "measure", "value", "unit", "note"])
        writer.writerows(report.rows)
    print(f"report written to {args.out}")


if __name__ == "__main__":
    main()
