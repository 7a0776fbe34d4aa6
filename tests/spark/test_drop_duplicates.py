"""drop_duplicates_within on Structured Streaming: micro-batches from files, out of order
within the watermark and some late, NULLs among the values, a restart from the checkpoint,
and (on the main line and 3.5) a SIGKILL of the driver's JVM mid-stream. Every delivered row is
checked against a brute-force model of the rule over all rows: delivered unless a row of
its value was delivered within the window (before it, or after it for a row out of order),
late rows dropped as Spark drops them; the file sink holds each delivered row exactly once.
Bad arguments are refused by name."""
from __future__ import annotations

import collections
import datetime
import json
import math
import os
import re

import numpy as np
import pytest
from pyspark.sql import functions as F

from conftest import ROOT, run_in_own_process
from windowsketch.streaming import drop_duplicates_within

T0 = datetime.datetime(2024, 3, 1, 12)
WINDOW = datetime.timedelta(minutes=10)
DELAY = datetime.timedelta(minutes=1)
SCHEMA = "user STRING, page STRING, ts TIMESTAMP, n BIGINT"


def make_batches(seed: int, n_batches: int, per_batch: int = 60):
    """Rows (user, page, ts, n) per micro-batch: time moves on ~2 minutes a batch, rows
    arrive up to 90 s out of order (so some are late past the 1-minute watermark), values
    repeat within and across windows, NULL users and pages among them."""
    rng = np.random.default_rng(seed)
    users = [None, "u1", "u2", "u3", "u4"]
    pages = [None, "u1", "/a", "/b"]
    batches, n = [], 0
    for b in range(n_batches):
        rows = []
        for _ in range(per_batch):
            seconds = b * 120 + int(rng.integers(0, 120)) - int(rng.integers(0, 91))
            rows.append((users[int(rng.integers(0, len(users)))],
                         pages[int(rng.integers(0, len(pages)))],
                         T0 + datetime.timedelta(seconds=seconds), n))
            n += 1
        batches.append(rows)
    return batches


def model(batches):
    """Delivered rows by the rule, batch by batch as Spark runs them: rows at or before the
    batch's watermark (the largest earlier ts - DELAY) are late; the others, earliest first,
    are delivered unless a delivered row of their (user, page) lies at or after ts - WINDOW."""
    latest: dict = {}
    delivered, newest = [], None
    for rows in batches:
        watermark = None if newest is None else newest - DELAY
        for user, page, ts, n in sorted((r for r in rows if watermark is None or r[2] > watermark),
                                        key=lambda r: r[2]):
            held = latest.get((user, page))
            if held is None or held < ts - WINDOW:
                latest[(user, page)] = ts
                delivered.append((user, page, ts))
        newest = max([r[2] for r in rows] + ([newest] if newest else []))
    return delivered


def write_batches(source, batches, first: int = 0):
    """One JSON file per micro-batch, modification times in order (maxFilesPerTrigger 1)."""
    for i, rows in enumerate(batches, start=first):
        path = os.path.join(source, f"{i:03d}.json")
        with open(path, "w") as f:
            f.write("\n".join(json.dumps({"user": u, "page": p, "ts": t.isoformat(), "n": n})
                              for u, p, t, n in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def events(spark, source):
    return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source)
            .withWatermark("ts", "1 minute"))


def run_to_sink(spark, source, sink, checkpoint, fpp=1e-6):
    unique = drop_duplicates_within(events(spark, source), ["user", "page"], "ts", "10 minutes",
                                    fpp=fpp)
    query = (unique.writeStream.format("parquet").option("path", sink)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination(600)
    assert query.exception() is None
    return query


def delivered_rows(spark, sink):
    return [(r.user, r.page, r.ts) for r in spark.read.parquet(sink).collect()]


def sort_key(row):
    return tuple("" if v is None else str(v) for v in row)


def test_every_delivered_row_follows_the_rule_across_batches_and_a_restart(spark, tmp_path):
    source, sink, checkpoint = (str(tmp_path / d) for d in ("in", "out", "checkpoint"))
    os.makedirs(source)
    batches = make_batches(seed=11, n_batches=8)
    write_batches(source, batches[:4])
    first = run_to_sink(spark, source, sink, checkpoint)
    state = first.lastProgress["stateOperators"][0]
    expected = model(batches[:4])
    assert sorted(delivered_rows(spark, sink), key=sort_key) == sorted(expected, key=sort_key)
    # Restarted from the checkpoint: the state carries on, nothing delivered twice.
    write_batches(source, batches[4:], first=4)
    run_to_sink(spark, source, sink, checkpoint)
    expected = model(batches)
    got = delivered_rows(spark, sink)
    assert sorted(got, key=sort_key) == sorted(expected, key=sort_key)
    # The streams stress the rule: late rows, NULL values (one of them (u1, NULL) beside
    # (NULL, u1)), values back after a window, most rows dropped.
    values = collections.Counter((u, p) for u, p, _ in got)
    assert values[(None, None)] >= 2 and ("u1", None) in values and (None, "u1") in values
    rows = sum(len(b) for b in batches)
    assert len(got) < rows / 3
    assert state["numRowsTotal"] <= 1024


SIGKILL = """
import os, signal
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener
import windowsketch
from windowsketch.streaming import drop_duplicates_within

spark = windowsketch.configure(
    SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "3")
    .config("spark.sql.session.timeZone", "UTC")).getOrCreate()
jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()


class KillAfter(StreamingQueryListener):
    def onQueryStarted(self, event): pass
    def onQueryIdle(self, event): pass
    def onQueryTerminated(self, event): pass
    def onQueryProgress(self, event):
        if event.progress.batchId >= 1:  # the JVM dies as the next batch runs
            os.kill(jvm_pid, signal.SIGKILL)
            print("KILLED", event.progress.batchId, flush=True)
            os._exit(0)


spark.streams.addListener(KillAfter())
events = (spark.readStream.schema({schema!r}).option("maxFilesPerTrigger", 1).json({source!r})
          .withWatermark("ts", "1 minute"))
unique = drop_duplicates_within(events, ["user", "page"], "ts", "10 minutes", fpp=1e-6)
query = (unique.writeStream.format("parquet").option("path", {sink!r})
         .option("checkpointLocation", {checkpoint!r}).trigger(availableNow=True).start())
query.awaitTermination(600)
print("NOT KILLED", flush=True)
"""


def test_each_row_is_delivered_exactly_once_across_a_sigkill(spark, tmp_path):
    """The driver's JVM is killed with SIGKILL after its second micro-batch, as the next one
    runs; the query restarted from the checkpoint delivers the rest, and the file sink holds
    every delivered row once."""
    source, sink, checkpoint = (str(tmp_path / d) for d in ("in", "out", "checkpoint"))
    os.makedirs(source)
    batches = make_batches(seed=23, n_batches=6)
    write_batches(source, batches)
    out = run_in_own_process(SIGKILL.format(schema=SCHEMA, source=source, sink=sink,
                                            checkpoint=checkpoint), tmp_path)
    assert "KILLED" in out and "NOT KILLED" not in out, out
    killed_at = int(re.search(r"KILLED (\d+)", out).group(1))
    assert killed_at < len(batches) - 1
    run_to_sink(spark, source, sink, checkpoint)
    got = delivered_rows(spark, sink)
    assert sorted(got, key=sort_key) == sorted(model(batches), key=sort_key)


def test_false_drops_stay_within_fpp_and_no_duplicate_passes(spark, tmp_path):
    """5·10^4 distinct ids, each twice within the window, at fpp 0.5 (33-bit fingerprints):
    no second copy passes, and the unique ids wrongly dropped are within the bound d / 2^33
    for the d ids held (at most 5·10^4), far under 0.5."""
    source, sink, checkpoint = (str(tmp_path / d) for d in ("in", "out", "checkpoint"))
    ids = np.arange(50_000)
    rows = [(f"id{i}", T0 + datetime.timedelta(milliseconds=int(i)), int(i)) for i in ids]
    copies = [(u, t + datetime.timedelta(seconds=30), n) for u, t, n in rows]
    spark.createDataFrame(rows + copies, "user STRING, ts TIMESTAMP, n BIGINT") \
        .repartition(4).write.json(source)
    stream = (spark.readStream.schema("user STRING, ts TIMESTAMP, n BIGINT").json(source)
              .withWatermark("ts", "1 minute"))
    unique = drop_duplicates_within(stream, "user", "ts", "10 minutes", fpp=0.5)
    query = (unique.writeStream.format("parquet").option("path", sink)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination(600)
    delivered = spark.read.parquet(sink)
    counts = delivered.groupBy("user").count()
    assert counts.where("count > 1").count() == 0
    dropped = len(ids) - counts.count()
    # P(a given id is dropped) <= 5·10^4 / 2^33; P(>= 4 of 5·10^4) under a Poisson of mean
    # 0.29 is below 3·10^-4, the false-failure probability of this check.
    assert dropped <= 3, dropped


def test_positions_with_lateness(spark, tmp_path):
    """An integral ts: duplicates are fewer than `window` positions apart; rows more than
    `lateness` behind the largest position seen are late. a@1 is delivered, a@2 and a@10
    are its copies, a@11 and a@30 are not; in the second batch (the watermark at 30 - 2)
    a@27 and a@28 are late, b@29 is new and a@30 a copy of the first."""
    source = str(tmp_path / "in")
    os.makedirs(source)
    batches = [[("a", 1), ("a", 2), ("a", 10), ("a", 11), ("a", 30)],
               [("a", 27), ("b", 29), ("a", 28), ("a", 30)]]
    for i, rows in enumerate(batches):
        path = os.path.join(source, f"{i}.json")
        with open(path, "w") as f:
            f.write("\n".join(json.dumps({"k": k, "pos": p}) for k, p in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    stream = spark.readStream.schema("k STRING, pos BIGINT").option("maxFilesPerTrigger", 1) \
        .json(source)
    unique = drop_duplicates_within(stream, "k", "pos", 10, lateness=2)
    query = (unique.writeStream.format("memory").queryName("dedup_positions")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    query.processAllAvailable()
    query.stop()
    got = sorted((r.k, r.pos) for r in spark.sql("SELECT * FROM dedup_positions").collect())
    assert got == [("a", 1), ("a", 11), ("a", 30), ("b", 29)]


def test_a_window_count_after_it_sees_every_delivered_row(spark, tmp_path):
    """The output watermarked again and counted in 5-minute windows in append mode (with
    Spark's correctness check off, as the docs say): each window's count is the delivered
    rows of it, none lost as late downstream."""
    source = str(tmp_path / "in")
    os.makedirs(source)
    batches = make_batches(seed=5, n_batches=6)
    write_batches(source, batches)
    unique = drop_duplicates_within(events(spark, source), ["user", "page"], "ts", "10 minutes")
    counted = unique.withWatermark("ts", "1 minute").groupBy(F.window("ts", "5 minutes")).count()
    key = "spark.sql.streaming.statefulOperator.checkCorrectness.enabled"
    spark.conf.set(key, "false")
    try:
        query = (counted.writeStream.format("memory").queryName("dedup_windows")
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(600)
    finally:
        spark.conf.unset(key)
    got = {r.window.start: r["count"] for r in spark.sql("SELECT * FROM dedup_windows").collect()}
    expected = collections.Counter(
        T0 + datetime.timedelta(seconds=300 * math.floor((ts - T0).total_seconds() / 300))
        for _, _, ts in model(batches))
    # Windows the final watermark closed (the last ones stay open, as append mode keeps them).
    assert got and all(got[start] == expected[start] for start in got)
    assert len(got) >= len(expected) - 2


@pytest.mark.parametrize("call, message", [
    (lambda s, e: drop_duplicates_within(e, "user", "ts", "10 minutes", fpp=0.6),
     "drop_duplicates_within: `fpp` must be in [1.0E-9, 0.5], got 0.6"),
    (lambda s, e: drop_duplicates_within(e, "user", "ts", "10 minutes", fpp=0.0),
     "drop_duplicates_within: `fpp` must be in [1.0E-9, 0.5], got 0.0"),
    (lambda s, e: drop_duplicates_within(e, ["user", "nope"], "ts", "10 minutes"),
     "drop_duplicates_within: `columns` names no column of the events: nope"),
    (lambda s, e: drop_duplicates_within(e, [], "ts", "10 minutes"), None),
    (lambda s, e: drop_duplicates_within(e, "user", "ts", "-1 minute"),
     "drop_duplicates_within: `window` must be a positive day-time interval"),
    (lambda s, e: drop_duplicates_within(e.withColumn("m", __import__("pyspark.sql.functions")
                                                      .sql.functions.create_map("user", "page")),
                                         ["m"], "ts", "10 minutes"),
     "drop_duplicates_within: `columns` cannot hold a MAP, as GROUP BY cannot: m is "
     "MAP<STRING, STRING>"),
    (lambda s, e: drop_duplicates_within(s.readStream.schema(SCHEMA).json(ROOT), "user", "ts",
                                         "10 minutes"),
     "drop_duplicates_within: the events need a watermark on `ts` (ts)"),
    (lambda s, e: drop_duplicates_within(s.createDataFrame([], SCHEMA), "user", "ts",
                                         "10 minutes"),
     "drop_duplicates_within needs a streaming DataFrame; for a table, use approx_window_seen"),
])
def test_bad_arguments_are_refused_by_name(spark, tmp_path, call, message):
    stream = events(spark, str(tmp_path))
    if message is None:
        with pytest.raises(TypeError, match="`columns` must be a column name or a non-empty list"):
            call(spark, stream)
        return
    with pytest.raises(ValueError, match=re.escape(message)):
        call(spark, stream)


def test_update_mode_is_refused_as_rows_are_never_revised(spark, tmp_path):
    unique = drop_duplicates_within(events(spark, str(tmp_path)), "user", "ts", "10 minutes")
    with pytest.raises(ValueError, match=re.escape(
            "drop_duplicates_within delivers each row once, never revised: write it in append "
            "mode (the default), not 'update'")):
        unique.writeStream.outputMode("update")
