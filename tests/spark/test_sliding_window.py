"""windowsketch.streaming.sliding_window end to end: every family and a mix in one query,
micro-batches from files, a restart from the checkpoint mid-stream, every emitted row of
every key against a brute force over its window (none lost, none twice), state rows equal
to live keys after every batch, late rows dropped, positions, a state the operator cannot
read, and the errors."""
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

from conftest import SPARK_LINE
from live_reference import check_crossings_against_exact, tick_at_or_after
from moments_reference import STATS, Exact, check_statistic
from sample_reference import expected_sample
from sketch_layout import varint
from test_sliding_counts import BASE, DELAY_S, EVERY_S, US, WINDOW_S, WINDOW_UNITS, micros, \
    micros_of, write_in_order
from windowsketch import live
from windowsketch.streaming import sliding_counts, sliding_window

EPS = 0.05
SCHEMA = "key STRING, ts TIMESTAMP, status INT, client STRING, latency DOUBLE, bytes BIGINT"
SENTINEL_S = 10 * 3600
N404_ABOVE, N404_BELOW, BYTES_ABOVE = 8, 3, 30_000
SAMPLE_SEED = 2**53


def churn(rng, n_keys=20, n_batches=8):
    """Keys live for a few windows; each row feeds some of the aggregates (404 or not,
    NULL clients, latencies and byte counts), shuffled within the watermark's delay."""
    rows = []
    for k in range(n_keys):
        start = int(rng.integers(0, 2 * 3600))
        life = int(rng.integers(60, 2 * WINDOW_S))
        for s in rng.integers(0, life, int(rng.integers(5, 50))):
            rows.append({
                "key": f"k{k}", "second": start + int(s),
                "status": 404 if rng.random() < 0.4 else 200,
                "client": None if rng.random() < 0.3 else f"c{int(rng.integers(0, 12))}",
                "latency": None if rng.random() < 0.3 else round(float(rng.gamma(2.0, 50.0)), 1),
                "bytes": None if rng.random() < 0.2 else int(rng.integers(0, 5000))})
    # One busy key: hundreds of distinct clients in a window, where HyperLogLog's registers
    # collide and the estimate depends on the hash (few values estimate the same under any).
    start = int(rng.integers(0, 2 * 3600))
    for s in rng.integers(0, WINDOW_S, 1500):
        rows.append({"key": "busy", "second": start + int(s), "status": 200,
                     "client": f"b{int(rng.integers(0, 10**6))}", "latency": None,
                     "bytes": None})
    rows.sort(key=lambda r: r["second"] + rng.integers(0, DELAY_S))
    batches = [list(b) for b in np.array_split(np.array(rows, dtype=object), n_batches)]
    late = {"key": "k0", "second": 3, "status": 404, "client": "late", "latency": 1.0,
            "bytes": 1}
    batches[n_batches // 2].append(late)
    return batches


def sentinel():
    return {"key": "sentinel", "second": SENTINEL_S, "status": 200, "client": None,
            "latency": None, "bytes": None}


def write(directory, i, rows):
    write_in_order(os.path.join(directory, f"{i:04d}.json"), [json.dumps({
        **{k: v for k, v in r.items() if k != "second"},
        "ts": (BASE + datetime.timedelta(seconds=r["second"])).isoformat()}) for r in rows], i)


def aggregates():
    return [live.count(F.col("status") == 404, eps=EPS, alert_above=N404_ABOVE,
                       alert_below=N404_BELOW).alias("n404"),
            live.sum("bytes", eps=EPS, alert_above=BYTES_ABOVE).alias("bytes"),
            live.distinct("client"),
            # No alert: the struct is the three bounds alone.
            live.count(F.col("client").isNotNull(), eps=EPS).alias("requests"),
            live.percentile("latency", [0.5, 0.99]).alias("latency"),
            live.percentile("latency", 0.9).alias("p90"),
            live.moments("latency", eps=EPS).alias("spread"),
            live.top_k("client", 2).alias("top_clients"),
            live.sample("client", 3, seed=SAMPLE_SEED).alias("some_clients")]


def start(spark, source, checkpoint, out):
    events = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source)
              .withWatermark("ts", f"{DELAY_S} seconds"))
    windowed = sliding_window(events, key="key", ts="ts", window=f"{WINDOW_S} seconds",
                              every=f"{EVERY_S} seconds", aggregates=aggregates())
    return (windowed.writeStream.option("checkpointLocation", checkpoint)
            .foreachBatch(lambda df, _: out.extend(df.collect())).start())


def inputs(r):
    """Which aggregates a row feeds: a 404, a positive byte count (a 0 adds nothing to a
    sum), a client, a latency."""
    return (r["status"] == 404, (r["bytes"] or 0) > 0, r["client"] is not None,
            r["latency"] is not None)


def rank_value(values, p):
    """percentile_approx's value at p over exactly these values (rank ceil(p n), from 1)."""
    ordered = sorted(values)
    return ordered[max(math.ceil(p * len(ordered)) - 1, 0)]


def expected_ticks(times, up_to):
    """The ticks a key emits: each whose window holds an input, and the first empty one
    after such a run."""
    times = np.sort(np.asarray(times, dtype=np.int64))
    out, previous = [], False
    tick = tick_at_or_after(int(times[0]), EVERY_S * US)
    while tick <= up_to:
        held = bool(np.any((times <= tick) & (times > tick - WINDOW_UNITS)))
        if held or previous:
            out.append((tick, held))
        if held:
            tick += EVERY_S * US
        else:
            later = times[times > tick]
            if len(later) == 0:
                break
            tick = tick_at_or_after(int(later[0]), EVERY_S * US)
        previous = held
    return out


def test_every_family_in_one_query_across_a_restart(spark, tmp_path):
    rng = np.random.default_rng(20261124)
    batches = churn(rng)
    source, checkpoint = str(tmp_path / "in"), str(tmp_path / "checkpoint")
    os.makedirs(source)
    out, progress = [], []
    half = len(batches) // 2
    for last, part in ((False, batches[:half]), (True, batches[half:])):  # 2 queries, 1 checkpoint
        first = len(os.listdir(source))
        for i, rows in enumerate(part):
            write(source, first + i, rows)
        if last:  # the sentinel moves the watermark past every tick; the batch after uses it
            write(source, len(batches), [sentinel()])
            write(source, len(batches) + 1, [sentinel()])
        query = start(spark, source, checkpoint, out)
        query.processAllAvailable()
        progress += [p for p in query.recentProgress if p["stateOperators"]]
        query.stop()

    # The rows that were not late, by file, as the watermark before each file saw them.
    newest = None
    accepted_by_file = []
    for rows in batches + [[sentinel()]] * 2:
        mark = -(2**62) if newest is None else newest - DELAY_S * US
        accepted_by_file.append([r for r in rows if micros(r["second"]) > mark])
        newest = max([micros(r["second"]) for r in rows] + ([newest] if newest else []))
    accepted: dict[str, list[dict]] = {}
    for rows in accepted_by_file:
        for r in rows:
            if any(inputs(r)):
                accepted.setdefault(r["key"], []).append(r)
    final = newest - DELAY_S * US
    got: dict[str, list] = {}
    for r in out:
        got.setdefault(r.key, []).append(r)
    assert set(got) == set(accepted)

    # Spark's approx_count_distinct over each emitted window's clients: what `distinct`
    # must equal, row for row.
    windows = [(key, micros_of(r.window_end), c["client"]) for key, rows in got.items()
               for r in rows for c in accepted[key]
               if c["client"] is not None and micros_of(r.window_end) - WINDOW_UNITS
               < micros(c["second"]) <= micros_of(r.window_end)]
    hll = {(r.key, r.t): r.n for r in spark.createDataFrame(
        windows, "key STRING, t BIGINT, client STRING").groupBy("key", "t").agg(
        F.approx_count_distinct("client", 0.05).alias("n")).collect()}

    checked = bounded = 0
    crossings = {"n404": [], "bytes": []}
    for key, rows in accepted.items():
        times = [micros(r["second"]) for r in rows]
        emitted = sorted(got[key], key=lambda r: r.window_end)
        expected = expected_ticks(times, final)
        assert [micros_of(r.window_end) for r in emitted] == [t for t, _ in expected], key
        exact_rows: dict[str, list] = {"n404": [], "bytes": []}
        for row in emitted:
            tick = micros_of(row.window_end)
            window = [r for r in rows if tick - WINDOW_UNITS < micros(r["second"]) <= tick]
            n404 = sum(1 for r in window if r["status"] == 404)
            total = sum(r["bytes"] or 0 for r in window)
            exact_rows["n404"].append((tick, n404))
            exact_rows["bytes"].append((tick, total))
            crossings["n404"] += [(key, tick, "above", row.n404.above)] * (row.n404.above is not None)
            crossings["n404"] += [(key, tick, "below", row.n404.below)] * (row.n404.below is not None)
            crossings["bytes"] += [(key, tick, "above", row.bytes.above)] * (row.bytes.above is not None)
            requests = sum(1 for r in window if r["client"] is not None)
            for got_bounds, exact in ((row.n404, n404), (row.bytes, total), (row.requests, requests)):
                assert got_bounds.lower <= exact <= got_bounds.upper, (key, tick)
                assert abs(got_bounds.estimate - exact) <= EPS * exact, (key, tick)
            assert row.distinct == hll.get((key, tick), 0), (key, tick)
            latencies = [r["latency"] for r in window if r["latency"] is not None]
            if latencies:
                assert row.latency == [rank_value(latencies, 0.5), rank_value(latencies, 0.99)]
                assert row.p90 == rank_value(latencies, 0.9)
            else:
                assert row.latency is None and row.p90 is None
            n, mean, m2 = Exact(latencies).of(np.ones(len(latencies), dtype=bool))
            for stat in STATS:
                check_statistic(stat, row.spread[stat], None, None, n, mean, m2, EPS, (key, tick))
            clients = collections.Counter(r["client"] for r in window if r["client"] is not None)
            top = sorted(clients.items(), key=lambda c: (-c[1], c[0].encode()))[:2]
            n = sum(clients.values())
            if n <= 512:  # the exact limit at eps 0.01: exact counts, the exact top 2
                assert [(t.item, t["count"], t.lower, t.upper) for t in row.top_clients] == \
                    [(item, c, c, c) for item, c in top], (key, tick)
            else:  # certified: each listed count brackets the exact one, eps n wide at most;
                # an item left off counts at most that width (the counters dropped: a window
                # of distinct clients lists few)
                for t in row.top_clients:
                    assert t.lower <= clients[t.item] <= t.upper <= t.lower + 0.01 * n, (key, tick)
                listed = {t.item for t in row.top_clients}
                if 0 < len(listed) < 2:
                    width = row.top_clients[0].upper - row.top_clients[0].lower
                    assert max(c for item, c in clients.items() if item not in listed) <= width
                bounded += 1
            assert row.some_clients == expected_sample(
                [{"ts": micros(r["second"]), "x": r["client"]} for r in rows], WINDOW_UNITS, 3,
                seed=SAMPLE_SEED, end=tick), (key, tick)
            checked += 1
        last = emitted[-1]
        assert (last.n404.upper, last.bytes.upper, last.requests.upper, last.distinct,
                last.latency) == (0, 0, 0, 0, None)
        assert list(last.spread) == [None] * len(STATS) and last.top_clients == []
        assert last.some_clients == []
        # Alerts, their states carried across the restart, against the exact windows.
        for name, above, below in (("n404", N404_ABOVE, N404_BELOW), ("bytes", BYTES_ABOVE, None)):
            fired = [(t, a, c) for k, t, a, c in crossings[name] if k == key]
            check_crossings_against_exact(fired, exact_rows[name], above, below, EPS)
    assert checked > 300 and bounded > 0 and max(r.distinct for r in out) >= 1000
    assert any(r.requests.lower < r.requests.upper for r in out)  # bounds that are not exact
    assert [sum(1 for c in crossings["n404"] if c[2:] == kind) >= 5
            for kind in (("above", "rise"), ("above", "fall"), ("below", "rise"),
                         ("below", "fall"))] == [True] * 4
    assert sum(1 for c in crossings["bytes"] if c[3] == "rise") >= 5

    # After every micro-batch the state rows are the live keys: some input in the window
    # of the last tick the watermark has passed, or after it.
    for p in progress:
        files = int(re.search(r"logOffset\D+(\d+)", str(p["sources"][0]["endOffset"])).group(1))
        mark = micros_of(datetime.datetime.fromisoformat(p["eventTime"]["watermark"][:-1]))
        tick = mark // (EVERY_S * US) * EVERY_S * US
        arrived: dict[str, list[int]] = {}
        for rows in accepted_by_file[:files + 1]:
            for r in rows:
                if any(inputs(r)):
                    arrived.setdefault(r["key"], []).append(micros(r["second"]))
        keys_live = sum(1 for ts in arrived.values()
                        if max(ts) > tick or any(tick - WINDOW_UNITS < t <= tick for t in ts))
        assert p["stateOperators"][0]["numRowsTotal"] == keys_live, (p["batchId"], keys_live)
    assert progress[-1]["stateOperators"][0]["numRowsTotal"] == 0
    dropped = sum(p["stateOperators"][0].get("numRowsDroppedByWatermark", 0) for p in progress)
    assert dropped == 1


def run_positions(spark, tmp_path, batches, aggregates, schema="k STRING, pos BIGINT, x BIGINT",
                  key="k"):
    source = str(tmp_path / "in")
    os.makedirs(source, exist_ok=True)
    for i, rows in enumerate(batches):
        write_in_order(os.path.join(source, f"{i}.json"), [json.dumps(r) for r in rows], i)
    events = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(source)
    windowed = sliding_window(events, key, "pos", window=10, every=5, aggregates=aggregates,
                              lateness=2)
    out: list = []
    query = (windowed.writeStream.option("checkpointLocation", str(tmp_path / "ck"))
             .foreachBatch(lambda df, _: out.extend(df.collect())).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return out


def test_integral_positions_with_a_sum_a_median_and_tied_decimals(spark, tmp_path):
    rows = [(1, 5), (2, None), (3, 7), (9, 1), (12, 4), (11, 0), (30, 9)]
    batches = [[{"k": "a", "pos": p, "x": x} for p, x in rows],
               [{"k": "z", "pos": 1000, "x": None}], [{"k": "z", "pos": 1001, "x": None}]]
    # Tied DECIMAL items are listed by value (their bytes order 3.00 before 1.00 before -3.00).
    shifted = live.top_k((F.col("x") - 4).cast("decimal(10,2)"), 2).alias("top")
    out = run_positions(spark, tmp_path, batches,
                        [live.sum("x"), live.percentile("x", 0.5), shifted])
    got = sorted((r.window_end, r.sum.estimate, r.percentile, [int(t.item) for t in r.top])
                 for r in out if r.k == "a")
    # (T - 10, T]: 5 -> {5, 7}; 10 -> {5, 7, 1}; 15 -> {1, 4, 0}; 20 -> {4, 0}; 25 -> none
    # (the last row); 30 -> {9}; 35 -> {9}; 40 -> none.
    assert got == [(5, 12, 5.0, [1, 3]), (10, 13, 5.0, [-3, 1]), (15, 5, 1.0, [-4, -3]),
                   (20, 4, 0.0, [-4, 0]), (25, 0, None, []), (30, 9, 9.0, [5]),
                   (35, 9, 9.0, [5]), (40, 0, None, [])]
    # Sums this small are exact: the bounds are the estimate.
    assert all(tuple(r.sum) == (r.sum.estimate,) * 3 for r in out if r.k == "a")


def test_keys_items_and_samples_of_every_kind_come_out_as_they_went_in(spark, tmp_path):
    """Output rows are built as Spark's internal rows (InternalRowEncoder): the keys, a
    NULL among them, and the items and sampled values of dates, decimals, timestamps and
    structs come out as the input held them."""
    import decimal
    seen = ["2024-05-01T10:00:00", "2024-05-01T10:00:00", "2024-05-02T11:30:00"]
    rows = [{"name": None, "day": "2024-01-02", "price": "1.50", "pos": p, "seen": t,
             "info": {"a": p, "b": f"v{p}"}} for p, t in zip((1, 2, 3), seen)]
    rows.append({"name": "b", "day": "2024-01-03", "price": "-2.25", "pos": 2,
                 "seen": seen[2], "info": None})
    batches = [rows, [{"name": "z", "pos": 1000}], [{"name": "z", "pos": 1001}]]
    out = run_positions(
        spark, tmp_path, batches,
        [live.count(F.col("pos") < 100), live.top_k("seen", 1), live.sample("info", 5)],
        schema="name STRING, day DATE, price DECIMAL(10,2), pos BIGINT, seen TIMESTAMP, "
               "info STRUCT<a: INT, b: STRING>", key=["name", "day", "price"])
    first = {(r.name, r.day, r.price): r for r in out if r.window_end == 5}
    null_key = (None, datetime.date(2024, 1, 2), decimal.Decimal("1.50"))
    b_key = ("b", datetime.date(2024, 1, 3), decimal.Decimal("-2.25"))
    assert set(first) == {null_key, b_key}
    assert tuple(first[null_key]["count"]) == (3, 3, 3)  # estimate, lower, upper: exact
    assert tuple(first[b_key]["count"]) == (1, 1, 1)
    assert [(t.item, t["count"]) for t in first[null_key].top_k] == \
        [(datetime.datetime(2024, 5, 1, 10, 0), 2)]
    assert [t.item for t in first[b_key].top_k] == [datetime.datetime(2024, 5, 2, 11, 30)]
    assert sorted((v.a, v.b) for v in first[null_key].sample) == [(1, "v1"), (2, "v2"), (3, "v3")]
    assert first[b_key].sample == []  # its one value is NULL: no input


def test_a_negative_sum_value_stops_the_query_naming_it(spark, tmp_path):
    batches = [[{"k": "a", "pos": 1, "x": 3}, {"k": "a", "pos": 2, "x": -4}]]
    with pytest.raises(Exception, match=r"sliding_window: sum takes non-negative values, got -4"):
        run_positions(spark, tmp_path, batches, [live.sum("x")])


@pytest.mark.parametrize("value, shown", [(float("nan"), "NaN"), (float("-inf"), "-Infinity")])
def test_a_nan_or_infinite_moments_value_stops_the_query_naming_it(spark, tmp_path, value, shown):
    """Moments of NaN or an infinity have no meaning a bound could certify (percentiles rank
    them, as Spark does): the batch fails naming the value, never a NaN answer."""
    batches = [[{"k": "a", "pos": 1, "x": 3.0}, {"k": "a", "pos": 2, "x": value}]]
    with pytest.raises(Exception, match=re.escape(
            f"sliding_window: moments take finite values, got {shown}")):
        run_positions(spark, tmp_path, batches, [live.moments("x")],
                      schema="k STRING, pos BIGINT, x DOUBLE")


def test_a_state_the_operator_cannot_read_stops_the_query_naming_the_key(spark, tmp_path):
    """A checkpoint written by sliding_counts, restarted as sliding_window: the state
    store's values do not decode, and the query says so, naming the key (never a row)."""
    source, checkpoint = str(tmp_path / "in"), str(tmp_path / "ck")
    os.makedirs(source)
    write_in_order(os.path.join(source, "0.json"),
                   [json.dumps({"k": "host-7", "pos": p}) for p in (1, 2, 3)], 0)
    events = spark.readStream.schema("k STRING, pos BIGINT").json(source)
    out: list = []
    for operator in (lambda e: sliding_counts(e, "k", "pos", 10, 5, lateness=2),
                     lambda e: sliding_window(e, "k", "pos", 10, 5, [live.count(F.lit(True))],
                                              lateness=2)):
        query = (operator(events).writeStream.option("checkpointLocation", checkpoint)
                 .foreachBatch(lambda df, _: out.extend(df.collect())).start())
        if out:  # the second query reads the first one's state on its next batch
            write_in_order(os.path.join(source, "1.json"),
                           [json.dumps({"k": "host-7", "pos": 40})], 1)
            with pytest.raises(Exception, match=re.escape(
                    "sliding_window: the live window state of key (k=host-7) in the state "
                    "store does not decode (invalid sketch bytes: not a live window state)")):
                query.processAllAvailable()
        else:
            query.processAllAvailable()
        query.stop()
    assert len(out) == 0  # the first query's ticks wait for a watermark past them


@pytest.fixture(scope="module")
def stream(spark, tmp_path_factory):
    source = str(tmp_path_factory.mktemp("in"))
    return (spark.readStream.schema("key STRING, ts TIMESTAMP, n INT, s STRING, b BOOLEAN")
            .json(source).withWatermark("ts", "1 minute"))


def window_of(*aggregates, **kwargs):
    return lambda s: sliding_window(s, "key", "ts", "10 minutes", "1 minute", list(aggregates),
                                    **kwargs)


def test_alerts_on_a_family_without_bounds_are_refused_naming_it(spark, stream):
    """Python's live.distinct has no thresholds; a JSON description (Connect's way in) or the
    Scala API can ask for them, and is refused."""
    from windowsketch import _scala_object
    operator = _scala_object(spark, "windowsketch.spark.SlidingWindow")
    spec = {"key": ["key"], "ts": "ts", "window": "10 minutes", "every": "1 minute",
            "lateness": None, "aggregates": [{"family": "distinct", "name": "clients",
                                              "input": "s", "eps": 0.05, "above": 3}]}
    with pytest.raises(Exception, match=re.escape(
            "sliding_window: distinct `clients`: alerts fire on certified bounds, which only "
            "count and sum have")):
        operator.fromJson(stream._jdf, json.dumps(spec))


@pytest.mark.parametrize("call, error, message", [
    (window_of(live.count("n")), ValueError,
     "sliding_window: count `count`: its column must be BOOLEAN (which rows are events), got INT"),
    (window_of(live.sum("s")), ValueError,
     "sliding_window: sum `sum`: its column must be an integral column (non-negative values), "
     "got STRING"),
    (window_of(live.percentile("s", 0.5)), ValueError,
     "sliding_window: percentile `percentile`: its column must be numeric, got STRING"),
    (window_of(live.count("b"), live.count("b")), ValueError,
     "sliding_window: two output columns are named `count`: give each aggregate its own name"),
    (window_of(live.count("b").alias("key")), ValueError,
     "sliding_window: two output columns are named `key`"),
    (window_of(live.count("b", eps=1.5)), ValueError,
     "sliding_window: count `count`: eps must be in [1.0E-4, 1), got 1.5"),
    (window_of(live.distinct("s", rsd=0.5)), ValueError,
     "sliding_window: distinct `distinct`: rsd must be in [0.01, 0.39], got 0.5"),
    (window_of(live.percentile("n", 0.5, eps=2.0)), ValueError,
     "sliding_window: percentile `percentile`: eps must be in [1.0E-4, 1), got 2.0"),
    (window_of(live.percentile("b", [0.5, 0.9])), ValueError,
     "sliding_window: percentile `percentile`: its column must be numeric, got BOOLEAN"),
    (lambda s: live.percentile("n", []), ValueError,
     "`percentage` must be a number in [0, 1] or a non-empty list of them, got []"),
    (window_of(live.moments("n", eps=1.5).alias("spread")), ValueError,
     "sliding_window: moments `spread`: eps must be in [1.0E-4, 1), got 1.5"),
    (window_of(live.moments("s")), ValueError,
     "sliding_window: moments `moments`: its column must be numeric, got STRING"),
    (lambda s: live.top_k("s", 0), ValueError,
     "`k` must be a positive int (how many values to list), got 0"),
    (lambda s: live.top_k("s", 100_001), ValueError,
     "`k` must be at most 100000 (as approx_window_top_k's), got 100001"),
    (lambda s: live.top_k("s", 2.5), ValueError,
     "`k` must be a positive int (how many values to list), got 2.5"),
    (window_of(live.top_k("s", 3, eps=0)), ValueError,
     "sliding_window: top_k `top_k`: eps must be in [1.0E-4, 1), got 0.0"),
    (lambda s: window_of(live.top_k(F.create_map("s", "n"), 3))(s), ValueError,
     "sliding_window: top_k `top_k`: its column must be BOOLEAN, numeric, STRING, DATE or "
     "TIMESTAMP, got MAP<STRING, INT>"),
    (lambda s: live.sample("s", 0), ValueError,
     "`k` must be an int in [1, 10000] (how many values to draw), got 0"),
    (lambda s: live.sample("s", 2, seed=2**60), ValueError,
     "`seed` must be an int in [-2**53, 2**53], got 1152921504606846976"),
    (lambda s: window_of(live.sample(F.create_map("s", "n"), 3))(s), ValueError,
     "sliding_window: sample `sample`: its column must be of a type GROUP BY takes (no MAP "
     "inside), got MAP<STRING, INT>"),
    (window_of(live.count("nope")), Exception, "nope"),
    (lambda s: sliding_window(s, "key", "ts", "10 minutes", "1 minute", []), TypeError,
     "`aggregates` must be a non-empty list of windowsketch.live aggregates"),
    (lambda s: sliding_window(s, "key", "ts", "10 minutes", "1 minute", live.count("b")),
     TypeError, "`aggregates` must be a list of windowsketch.live aggregates"),
    (lambda s: live.percentile("n", 1.5), ValueError,
     "`percentage` must be a number in [0, 1] or a non-empty list of them, got 1.5"),
    (lambda s: live.count("b", eps="tight"), TypeError, "`eps` must be a number, got 'tight'"),
    (lambda s: live.sum("n", alert_below=-1), ValueError,
     "`alert_below` must be a non-negative int (a count), got -1"),
    (lambda s: live.count("b", alert_above=2.5), ValueError,
     "`alert_above` must be a non-negative int (a count), got 2.5"),
    (lambda s: sliding_window(s.drop("ts").withColumn("ts", F.current_timestamp()), "key", "ts",
                              "10 minutes", "1 minute", [live.count("b")]), ValueError,
     "sliding_window: the events need a watermark on `ts` (ts)"),
])
def test_bad_arguments_are_named(stream, call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call(stream)


@pytest.mark.skipif(SPARK_LINE == "3.5", reason="the relation plugin is Spark Connect's, from Spark 4")
def test_the_connect_relation_plugin_passes_other_messages_on_and_names_a_missing_field(spark):
    """The server offers every relation extension to each plugin: another type URL is left
    to the others (empty), and ours without its events or its description is refused by
    name before anything is planned."""
    from windowsketch import _scala_object

    def message(field: int, payload: bytes) -> bytes:  # a length-delimited protobuf field
        return bytes([field << 3 | 2]) + varint(len(payload)) + payload

    def extension(type_url: str, value: bytes) -> bytes:  # a google.protobuf.Any
        return message(1, type_url.encode()) + message(2, value)

    plugin = spark._jvm.org.apache.spark.sql.windowsketch.SlidingWindowRelationPlugin()
    operators = _scala_object(
        spark, "org.apache.spark.sql.windowsketch.SlidingWindowRelationPlugin").Operators()
    assert not plugin.transform(extension("type.googleapis.com/other.Relation", message(2, b"{}")),
                                None).isPresent()
    for type_url, name in (("type.googleapis.com/windowsketch.SlidingWindow", "sliding_window"),
                           ("type.googleapis.com/windowsketch.DropDuplicatesWithin",
                            "drop_duplicates_within")):
        assert operators.contains(type_url)
        for value in (message(2, b'{"key": ["k"]}'), b""):
            with pytest.raises(Exception, match=re.escape(
                    f"{name}: the Connect relation lacks its events or its description")):
                plugin.transform(extension(type_url, value), None)


@pytest.mark.parametrize("operator", ["sliding_window", "sliding_counts", "drop_duplicates_within"])
def test_the_output_serializer_stays_out_of_whole_stage_code_generation(stream, operator, capsys):
    """Whole-stage code generation writes a serializer into one method; for six families'
    nested columns it passed the JVM's 8,000-byte compile limit and ran interpreted (a
    sliding_window with every family at half speed). Outside it, Spark's projection splits
    the fields into methods (`*(n)` marks an operator inside a code-generated stage)."""
    from windowsketch.streaming import drop_duplicates_within
    frame = {
        "sliding_window": window_of(live.count("b"), live.sum("n"), live.distinct("s"),
                                    live.percentile("n", [0.5, 0.99]), live.moments("n"),
                                    live.top_k("s", 3)),
        "sliding_counts": lambda s: sliding_counts(s, "key", "ts", "10 minutes", "1 minute"),
        "drop_duplicates_within": lambda s: drop_duplicates_within(s, "s", "ts", "10 minutes"),
    }[operator](stream)
    frame.explain()
    serializers = [line for line in capsys.readouterr().out.splitlines()
                   if "SerializeFromObject" in line]
    assert serializers and all(not re.match(r"[\s:+-]*\*\(\d+\) SerializeFromObject", line)
                               for line in serializers), serializers


def test_a_table_is_refused_with_the_functions_to_use(spark):
    table = spark.createDataFrame([("a", BASE, True)], "key STRING, ts TIMESTAMP, b BOOLEAN")
    with pytest.raises(ValueError, match=re.escape(
            "sliding_window needs a streaming DataFrame; for a table, use the approx_window_* "
            "functions in a window frame")):
        sliding_window(table, "key", "ts", "10 minutes", "1 minute", [live.count("b")])


@pytest.mark.parametrize("operator", ["sliding_window", "sliding_counts"])
def test_update_mode_is_refused_saying_to_use_append(stream, operator, tmp_path):
    if operator == "sliding_window":
        frame = sliding_window(stream, "key", "ts", "10 minutes", "1 minute", [live.count("b")])
    else:
        frame = sliding_counts(stream, "key", "ts", "10 minutes", "1 minute")
    with pytest.raises(ValueError, match=re.escape(
            f"{operator} emits final rows, each (key, window_end) once: write it in append "
            "mode (the default), not 'update'")):
        frame.writeStream.outputMode("update")
    query = (frame.writeStream.outputMode("append").format("memory").queryName(operator)
             .option("checkpointLocation", str(tmp_path)).start())
    query.stop()


def test_the_live_monitoring_example_runs_every_family(spark, tmp_path):
    """examples/live_404s.py without alerts on the first hour of the NASA log: a row per
    host and minute with every aggregate, each within what the window can hold."""
    from test_sliding_counts import load_example

    example = load_example()
    source = str(tmp_path / "in")
    os.makedirs(source)
    assert example.replay_as_files(source, hours=1) == 6
    rows: list = []
    query = example.start(spark, source, str(tmp_path / "ck"), rows.extend)
    query.processAllAvailable()
    query.stop()
    assert len({r.host for r in rows}) > 100
    for r in rows:
        assert r.n404.upper <= r.requests.upper and r.urls <= r.requests.upper * 1.2 + 2
        assert (r.size is None) == (r.sum.upper == 0) or r.size == [0.0, 0.0]
        if r.size is None:
            assert list(r.size_moments) == [None] * 5
        else:  # sizes are not negative
            assert r.size_moments.avg >= 0 and r.size_moments.stddev_pop >= 0
        counts = [t["count"] for t in r.top_urls]
        assert counts == sorted(counts, reverse=True) and sum(counts) <= r.requests.upper
    busy = max(rows, key=lambda r: r.requests.estimate)
    assert busy.requests.estimate > 20 and busy.urls > 5 and busy.size[0] <= busy.size[1]
    assert len(busy.top_urls) == 3
    assert busy.size_moments.stddev_samp > 0
