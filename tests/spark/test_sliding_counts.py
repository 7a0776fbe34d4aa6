"""windowsketch.streaming.sliding_counts end to end: micro-batches from files, a restart
from the checkpoint mid-stream, every emitted count against a brute-force exact count of
its window, state rows equal to live keys after every batch, late rows dropped and counted,
alerts, positions, and the errors."""
from __future__ import annotations

import datetime
import json
import os
import re

import numpy as np
import pytest
from pyspark.sql import functions as F

from live_reference import exact_at, expected_rows, tick_at_or_after
from windowsketch.streaming import sliding_counts

BASE = datetime.datetime(2024, 5, 1)
US = 1_000_000
WINDOW_S, EVERY_S, DELAY_S = 600, 60, 30  # 10-minute window, 1-minute ticks, 30 s watermark
WINDOW_UNITS = WINDOW_S * US + 1  # the inclusive window [T - 10 min, T] in microseconds


def churn(rng, n_keys=24, n_batches=10):
    """Keys that live for a few windows and leave; rows in batches, shuffled within the
    watermark's delay, with some rows later than it. Returns (batches, late rows)."""
    rows = []
    for k in range(n_keys):
        start = int(rng.integers(0, 3 * 3600))
        life = int(rng.integers(60, 2 * WINDOW_S))
        n = int(rng.integers(5, 60))
        rows += [(f"k{k}", start + int(s), bool(rng.random() < 0.7))
                 for s in rng.integers(0, life, n)]
    rows.sort(key=lambda r: r[1] + rng.integers(0, DELAY_S))
    batches = [list(b) for b in np.array_split(np.array(rows, dtype=object), n_batches)]
    late = [("late", 5, True), ("k0", 7, True)]  # far behind any watermark after batch 0
    batches[n_batches // 2] += late
    return [[tuple(r) for r in b] for b in batches], late


def write_in_order(path, lines, i):
    """The file source takes files in modification order: make it the order of `i`."""
    with open(path, "w") as f:
        f.writelines(line + "\n" for line in lines)
    os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def write(directory, i, rows):
    write_in_order(os.path.join(directory, f"{i:04d}.json"), [
        json.dumps({"key": key, "ts": (BASE + datetime.timedelta(seconds=second)).isoformat(),
                    "ok": not is_event}) for key, second, is_event in rows], i)


def start(spark, source, checkpoint, out):
    events = (spark.readStream.schema("key STRING, ts TIMESTAMP, ok BOOLEAN")
              .option("maxFilesPerTrigger", 1).json(source)
              .withWatermark("ts", f"{DELAY_S} seconds"))
    live = sliding_counts(events, key="key", ts="ts", window=f"{WINDOW_S} seconds",
                          every=datetime.timedelta(seconds=EVERY_S), v=~F.col("ok"), eps=0.05)
    return (live.writeStream.option("checkpointLocation", checkpoint)
            .foreachBatch(lambda df, _: out.extend(df.collect())).start())


def micros(second: int) -> int:
    return int((BASE - datetime.datetime(1970, 1, 1)).total_seconds() + second) * US


def test_live_counts_across_a_restart(spark, tmp_path):
    rng = np.random.default_rng(20240501)
    batches, late = churn(rng)
    source, checkpoint = str(tmp_path / "in"), str(tmp_path / "checkpoint")
    os.makedirs(source)
    out, progress = [], []
    half = len(batches) // 2
    for last, part in ((False, batches[:half]), (True, batches[half:])):  # 2 queries, 1 checkpoint
        first = len(os.listdir(source))
        for i, rows in enumerate(part):
            write(source, first + i, rows)
        if last:  # a far-future row moves the watermark past all; the
            # batch after it (a data batch, so processAllAvailable waits for it) uses it
            write(source, len(batches), [("sentinel", 10 * 3600, False)])
            write(source, len(batches) + 1, [("sentinel", 10 * 3600, False)])
        query = start(spark, source, checkpoint, out)
        query.processAllAvailable()
        progress += [p for p in query.recentProgress if p["stateOperators"]]
        query.stop()

    # Exact: per key, the events that were not late, at every tick up to the end.
    newest = None
    accepted_by_file: list[list[tuple[str, int]]] = []
    for rows in batches + [[("sentinel", 10 * 3600, False)]] * 2:
        mark = -(2**62) if newest is None else newest - DELAY_S * US
        accepted_by_file.append([(key, micros(second)) for key, second, is_event in rows
                                 if is_event and micros(second) > mark])
        newest = max([micros(s) for _, s, _ in rows] + ([newest] if newest else []))
    accepted = events_by_key(accepted_by_file)
    final = newest - DELAY_S * US
    got: dict[str, list[tuple[int, int, int, int]]] = {}
    for r in out:
        got.setdefault(r.key, []).append((micros_of(r.window_end), r.estimate, r.lower, r.upper))
    assert set(got) == set(accepted) and "late" not in got
    for key, events in accepted.items():
        expected = expected_rows(events, WINDOW_UNITS, EVERY_S * US, final)
        rows = sorted(got[key])
        assert [t for t, *_ in rows] == [t for t, _ in expected], key  # none lost, none twice
        for (tick, est, lower, upper), (_, exact) in zip(rows, expected):
            assert lower <= exact <= upper and abs(est - exact) <= 0.05 * exact, (key, tick)
        assert expected[-1][1] == 0  # every key reached its 0 row

    # After every micro-batch the state rows are the live keys: a non-empty window at the
    # last tick the watermark has passed, or events after it.
    for p in progress:
        # The file source's offset: a dict, or its text (JSON, or a Python repr on 4.0/4.1).
        files = int(re.search(r"logOffset\D+(\d+)", str(p["sources"][0]["endOffset"])).group(1))
        mark = micros_of(datetime.datetime.fromisoformat(p["eventTime"]["watermark"][:-1]))
        tick = mark // (EVERY_S * US) * EVERY_S * US
        arrived = events_by_key(accepted_by_file[:files + 1])
        live = sum(1 for evs in arrived.values()
                   if max(evs) > tick or exact_at(np.array(evs), tick, WINDOW_UNITS))
        assert p["stateOperators"][0]["numRowsTotal"] == live, (p["batchId"], live)
    assert progress[-1]["stateOperators"][0]["numRowsTotal"] == 0
    assert max(p["stateOperators"][0]["numRowsTotal"] for p in progress) < len(accepted) / 2
    dropped = sum(p["stateOperators"][0].get("numRowsDroppedByWatermark", 0) for p in progress)
    assert dropped == len(late)


def events_by_key(files):
    out: dict[str, list[int]] = {}
    for rows in files:
        for key, us in rows:
            out.setdefault(key, []).append(us)
    return out


def micros_of(t: datetime.datetime) -> int:
    return int((t - datetime.datetime(1970, 1, 1)) / datetime.timedelta(microseconds=1))


def test_alerts_emit_only_crossings(spark, tmp_path):
    source = str(tmp_path / "in")
    os.makedirs(source)
    # One key: 30 events in a minute (rises above 20), then quiet (falls), then the sentinel.
    write(source, 0, [("a", s, True) for s in range(0, 60, 2)])
    write(source, 1, [("other", 2000, False)])
    # Key b's one event waits for its tick when the query stops: b keeps state.
    write(source, 2, [("other", 5000, False), ("b", 4995, True)])
    events = (spark.readStream.schema("key STRING, ts TIMESTAMP, ok BOOLEAN")
              .option("maxFilesPerTrigger", 1).json(source).withWatermark("ts", "10 seconds"))
    alerts = sliding_counts(events, "key", "ts", "5 minutes", "1 minute", v=~F.col("ok"),
                            alert_above=20, alert_below=5)
    assert alerts.columns == ["key", "window_end", "estimate", "lower", "upper", "alert",
                              "crossing"]
    out = []
    query = (alerts.writeStream.option("checkpointLocation", str(tmp_path / "ck"))
             .foreachBatch(lambda df, _: out.extend(df.collect())).start())
    query.processAllAvailable()
    query.stop()
    got = sorted((r.window_end.minute, r.alert, r.crossing, r.estimate) for r in out)
    # 1 min: 30 events (above rises, below rises); 6 min: window empty (both fall).
    assert got == [(1, "above", "rise", 30), (1, "below", "rise", 30),
                   (6, "above", "fall", 0), (6, "below", "fall", 0)]
    # Restarted from the checkpoint with another threshold: the key's state would carry an
    # alert state for the old one, so the query fails naming the change.
    write(source, 3, [("b", 5100, True)])
    changed = sliding_counts(events, "key", "ts", "5 minutes", "1 minute", v=~F.col("ok"),
                             alert_above=25, alert_below=5)
    query = (changed.writeStream.option("checkpointLocation", str(tmp_path / "ck"))
             .foreachBatch(lambda df, _: out.extend(df.collect())).start())
    try:
        with pytest.raises(Exception, match=r"the live window state was written with "
                                            r"aggregates count\(0.01, above 20, below 5\) "
                                            r"\(now count\(0.01, above 25, below 5\)\)"):
            query.processAllAvailable()
    finally:
        query.stop()


def test_integral_positions_with_lateness(spark, tmp_path):
    source = str(tmp_path / "in")
    os.makedirs(source)
    # Spark drops rows at or behind a watermark that moves at the end of each batch (which
    # batch's watermark a batch drops against differs between Spark's operators and
    # versions): the spacer batch, another key's row at 30, keeps it at 28 under either
    # reading for the batch after it. That batch drops 26 and keeps 29: lateness 0 would
    # drop 29 too, a larger lateness would keep 26.
    batches = [[("a", 1), ("a", 2), ("a", 3), ("a", 9)], [("a", 12), ("a", 11), ("a", 30)],
               [("z", 30)], [("a", 26), ("a", 29), ("a", 33)], [("z", 1000)], [("z", 1001)]]
    for i, rows in enumerate(batches):
        write_in_order(os.path.join(source, f"{i}.json"),
                       [json.dumps({"k": k, "pos": p}) for k, p in rows], i)
    events = (spark.readStream.schema("k STRING, pos BIGINT").option("maxFilesPerTrigger", 1)
              .json(source))
    live = sliding_counts(events, "k", "pos", window=10, every=5, lateness=2)
    out = []
    query = (live.writeStream.option("checkpointLocation", str(tmp_path / "ck"))
             .foreachBatch(lambda df, _: out.extend(df.collect())).start())
    query.processAllAvailable()
    query.stop()
    rows = sorted((r.window_end, r.estimate) for r in out if r.k == "a")
    # (T - 10, T]: 5 -> {1,2,3}; 10 -> {1,2,3,9}; 15 -> {9,11,12}; 20 -> {11,12}; 25 -> {};
    # 30 -> {29,30}; 35 -> {29,30,33}; 40 -> {33}; 45 -> {} (the 0 row).
    assert rows == [(5, 3), (10, 4), (15, 3), (20, 2), (25, 0), (30, 2), (35, 3), (40, 1),
                    (45, 0)]
    assert rows == expected_rows([1, 2, 3, 9, 12, 11, 30, 29, 33], 10, 5, 999)


def test_several_keys_a_named_event_column_and_a_timedelta_window(spark, tmp_path):
    """`key` as a list groups on every column of it (one host in two regions is two keys),
    `v` as a column name whose NULLs are not events, `window` as a timedelta: every row
    against the exact count."""
    rng = np.random.default_rng(20241124)
    rows = [(host, region, int(second), [True, False, None][int(rng.integers(0, 3))])
            for host, region in [("h1", "eu"), ("h1", "us"), ("h2", "eu")]
            for second in rng.integers(0, 1800, 80)]
    rows.sort(key=lambda r: r[2])
    rows += [("sentinel", "x", 10 * 3600, False)]
    source = str(tmp_path / "in")
    os.makedirs(source)
    for i, part in enumerate(np.array_split(np.arange(len(rows)), 4) + [[len(rows) - 1]]):
        write_in_order(os.path.join(source, f"{i}.json"), [json.dumps({
            "host": rows[j][0], "region": rows[j][1], "bad": rows[j][3],
            "ts": (BASE + datetime.timedelta(seconds=rows[j][2])).isoformat()}) for j in part], i)
    events = (spark.readStream.schema("host STRING, region STRING, ts TIMESTAMP, bad BOOLEAN")
              .option("maxFilesPerTrigger", 1).json(source)
              .withWatermark("ts", f"{DELAY_S} seconds"))
    live = sliding_counts(events, ["host", "region"], "ts",
                          datetime.timedelta(seconds=WINDOW_S), f"{EVERY_S} seconds",
                          v="bad", eps=0.05)
    out: list = []
    query = (live.writeStream.option("checkpointLocation", str(tmp_path / "ck"))
             .foreachBatch(lambda df, _: out.extend(df.collect())).start())
    query.processAllAvailable()
    query.stop()
    got: dict = {}
    for r in out:
        got.setdefault((r.host, r.region), []).append(
            (micros_of(r.window_end), r.estimate, r.lower, r.upper))
    final = micros(10 * 3600) - DELAY_S * US
    assert set(got) == {("h1", "eu"), ("h1", "us"), ("h2", "eu")}
    for key, ticks in got.items():
        accepted = [micros(second) for host, region, second, bad in rows
                    if (host, region) == key and bad is True]
        expected = expected_rows(accepted, WINDOW_UNITS, EVERY_S * US, final)
        ticks.sort()
        assert [t for t, *_ in ticks] == [t for t, _ in expected], key
        for (tick, est, lower, upper), (_, exact) in zip(ticks, expected):
            assert lower <= exact <= upper and abs(est - exact) <= 0.05 * exact, (key, tick)
        assert max(exact for _, exact in expected) >= 5


@pytest.fixture(scope="module")
def stream(spark, tmp_path_factory):
    source = str(tmp_path_factory.mktemp("in"))
    return spark.readStream.schema("key STRING, ts TIMESTAMP, d DATE, n INT").json(source)


@pytest.mark.parametrize("call, message", [
    (lambda s: sliding_counts(s, "key", "ts", "10 minutes", "1 minute"),
     "the events need a watermark on `ts` (ts)"),
    (lambda s: sliding_counts(s.withWatermark("ts", "1 minute"), "key", "d", "1 day", "1 day"),
     "`ts` must be a TIMESTAMP column with a watermark or an integral column of positions, "
     "but d is DATE"),
    (lambda s: sliding_counts(s, "key", "n", 10, 5),
     "an integral `ts` needs `lateness`"),
    (lambda s: sliding_counts(s.withWatermark("ts", "1 minute"), "key", "ts", "10 parsecs",
                              "1 minute"),
     "`window` must be a positive day-time interval such as '10 minutes', got '10 parsecs'"),
    (lambda s: sliding_counts(s.withWatermark("ts", "1 minute"), "key", "ts", "10 minutes",
                              "1 month"),
     "`every` must be a positive day-time interval"),
    (lambda s: sliding_counts(s.withWatermark("ts", "1 minute"), "nope", "ts", "10 minutes",
                              "1 minute"),
     "`key` names no column of the events: nope"),
    (lambda s: sliding_counts(s, "key", "n", 10, 0, lateness=1),
     "`every` must be a positive number of positions for an integral `ts`, got '0'"),
    (lambda s: sliding_counts(s, "key", "ts", "10 minutes", "1 minute", lateness=3),
     "`lateness` is for an integral `ts`"),
    (lambda s: sliding_counts(s.withWatermark("ts", "1 minute"), "key", "ts", "10 minutes",
                              "1 minute", eps=1.5),
     "`eps` must be a number in [0.0001, 1), got 1.5"),
    (lambda s: sliding_counts(s.withWatermark("ts", "1 minute"), "key", "ts", "10 minutes",
                              "1 minute", alert_above=-3),
     "`alert_above` must be a non-negative int"),
])
def test_bad_arguments_are_named(stream, call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call(stream)


def test_a_table_is_refused_with_the_window_function_to_use(spark):
    table = spark.createDataFrame([("a", BASE)], "key STRING, ts TIMESTAMP")
    with pytest.raises(ValueError, match="needs a streaming DataFrame; for a table, use "
                                         "approx_window_count in a window frame"):
        sliding_counts(table, "key", "ts", "10 minutes", "1 minute")


def test_the_live_monitoring_example_runs(spark, tmp_path):
    """examples/live_404s.py on the first hour of the NASA log: final rows with bounds."""
    example = load_example()
    source = str(tmp_path / "in")
    os.makedirs(source)
    assert example.replay_as_files(source, hours=1) == 6
    rows = []
    query = example.start(spark, source, str(tmp_path / "ck"), rows.extend, alert_above=2)
    query.processAllAvailable()
    query.stop()
    assert rows and all(r.alert == "above" for r in rows)
    assert all(r.lower > 2 if r.crossing == "rise" else r.upper <= 2 for r in rows)


def load_example():
    import importlib.util

    from conftest import ROOT

    path = os.path.join(ROOT, "examples", "live_404s.py")
    spec = importlib.util.spec_from_file_location("live_404s", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
