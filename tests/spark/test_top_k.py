"""approx_window_top_k and the top-k sketch columns in SQL against exact counts on every
output: each row's frame (or each group's rows) comes from Spark's own collect_list over the
same frame, the window is cut from it in Python and counted, and every answer must list
counts inside their certified bounds, at most eps * n apart, every item of more than
eps * n rows unless k items rank ahead of it, in running (exact while the window holds
fewer than coverRecords rows, bounded otherwise), sliding,
whole-partition and descending frames and in GROUP BY over shuffled partitions; then
stored sketches merged in any shape, types, NULLs and errors."""
from __future__ import annotations

import collections
import datetime
import decimal
import json
import math
import os

import numpy as np
import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from conftest import error_condition, parameter_index, stable_seed
from golden_sketches import GOLDEN, golden_rows, golden_top_k_items
from test_percentiles import FRAMES
from top_k_reference import check_window
from windowsketch import _scala_object
from windowsketch.functions import (approx_window_top_k, window_top_k_sketch,
                                    window_top_k_sketch_estimate, window_top_k_sketch_merge)
from windowsketch.sketch import TopKSketch

EPS = 0.3
K = 4
WINDOW = 3000
COVER_RECORDS = 54  # LeveledTopK.coverRecords(0.3), checked below


def rows(rng, kind, n):
    """(id, key, ts, x) rows: Zipf paths, a path that floods then vanishes at the window's
    edge, ties, many distinct values; NULL items and NULL times; bursts and gaps."""
    ts = np.cumsum(np.where(rng.random(n) < 0.1, rng.integers(10, 60, n), rng.integers(0, 3, n)))
    x = {
        "zipf": [f"/p{int(v) % 300}" for v in rng.zipf(1.3, n)],
        "flood": [("/flood" if (i // 120) % 3 == 1 else f"/q{int(rng.integers(0, 40))}")
                  for i in range(n)],
        "ties": [f"/t{i % 7}" for i in range(n)],
        "distinct": [f"/d{i}" for i in range(n)],
    }[kind]
    return [(i, f"k{i % 3}", None if rng.random() < 0.02 else int(ts[i]),
             None if rng.random() < 0.1 else x[i]) for i in range(n)]


KINDS = ["zipf", "flood", "ties", "distinct"]


def counts_of(frame, window, temporal=False):
    """The exact item counts of a frame's (ts, x) rows inside the window ending at its
    largest ts."""
    times = [r["ts"] for r in frame if r["ts"] is not None]
    if not times:
        return collections.Counter()
    now = max(times)
    return collections.Counter(
        r["x"] for r in frame if r["ts"] is not None and r["x"] is not None and r["ts"] <= now
        and (now - window <= r["ts"] if temporal else now - window < r["ts"]))


def listed(answer):
    return [(r.item, r["count"], r.lower, r.upper) for r in answer]


def utf8(item: str) -> bytes:
    return item.encode()


@pytest.mark.parametrize("frame", sorted(FRAMES))
@pytest.mark.parametrize("kind", KINDS)
def test_every_row_within_the_bounds_in_every_frame(spark, kind, frame):
    rng = np.random.default_rng(stable_seed("top-k-frames", kind, frame))
    spark.createDataFrame(rows(rng, kind, 900), "id INT, key STRING, ts BIGINT, x STRING") \
        .repartition(3).createOrReplaceTempView("top_rows")
    over = f"OVER ({FRAMES[frame]})"
    got = spark.sql(f"""
        SELECT approx_window_top_k(x, ts, {WINDOW}, {K}, {EPS}) {over} AS top,
               collect_list(struct(ts, x)) {over} AS frame
        FROM top_rows""").collect()
    wide = exact_rows = 0
    for r in got:
        # A running frame's leveled counts are exact whenever the window holds fewer than
        # coverRecords rows (54 at eps 0.3), bounded by eps otherwise.
        counts = counts_of(r.frame, WINDOW)
        exact = frame.startswith("running") and sum(counts.values()) < COVER_RECORDS
        check_window(listed(r.top), EPS, counts, (kind, frame), k=K, exact=exact, tie=utf8)
        wide += any(item[2] < item[3] for item in listed(r.top))
        exact_rows += exact
    assert len(got) == 900
    if frame == "whole-partition" and kind in ("zipf", "flood"):
        assert wide > 0  # the sketch's bounds are at work
    if frame.startswith("running"):
        assert exact_rows > 0 and (wide > 0 or kind == "distinct"), (exact_rows, wide)
        assert _scala_object(spark, "windowsketch.core.frequencies.LeveledTopK").coverRecords(EPS) == COVER_RECORDS


@pytest.mark.parametrize("kind", KINDS)
def test_group_by_over_shuffled_partitions(spark, kind):
    rng = np.random.default_rng(stable_seed("top-k-group-by", kind))
    data = [(i, f"g{int(rng.integers(0, 20))}", t, x) for i, _, t, x in rows(rng, kind, 6000)]
    df = spark.createDataFrame(data, "id INT, key STRING, ts BIGINT, x STRING")
    window = 15000
    got = (df.repartition(7, "id").groupBy("key")
           .agg(approx_window_top_k("x", "ts", window, K, EPS).alias("top"),
                F.collect_list(F.struct("ts", "x")).alias("frame"))
           .collect())
    assert len(got) == 20
    for r in got:
        counts = counts_of(r.frame, window)
        assert sum(counts.values()) > 50
        check_window(listed(r.top), EPS, counts, (kind, r.key), k=K)


def test_item_types_come_back_and_equal_values_group_as_spark_groups_them(spark):
    base = datetime.datetime(2025, 1, 1, 10)
    data = [(i, base + datetime.timedelta(minutes=i % 5), datetime.date(2025, 1, 1 + i % 3),
             decimal.Decimal(i % 4) / 4, [0.0, -0.0, float("nan"), 1.5][i % 4], i % 2 == 0,
             i % 3) for i in range(24)]
    df = spark.createDataFrame(
        data, "pos BIGINT, t TIMESTAMP, d DATE, price DECIMAL(10,2), f DOUBLE, b BOOLEAN, n INT")
    w = Window.orderBy("pos")
    got = df.select(*(approx_window_top_k(c, "pos", 24, 3 if c == "f" else 2).over(w).alias(c)
                      for c in ("t", "d", "price", "f", "b", "n"))).collect()[-1]
    assert [r.item for r in got.t] == [base, base + datetime.timedelta(minutes=1)]
    assert [(r.item, r["count"]) for r in got.d] == [(datetime.date(2025, 1, 1), 8),
                                                     (datetime.date(2025, 1, 2), 8)]
    assert [r.item for r in got.price] == [decimal.Decimal("0.00"), decimal.Decimal("0.25")]
    # -0.0 and 0.0 are one value, as Spark's GROUP BY has them; NaN is one value, after
    # every number in the order of ties.
    assert [(r.item, r["count"]) for r in got.f[:2]] == [(0.0, 12), (1.5, 6)]
    assert math.isnan(got.f[2].item) and got.f[2]["count"] == 6
    assert [(r.item, r["count"]) for r in got.b] == [(False, 12), (True, 12)]
    assert [(r.item, r["count"]) for r in got.n] == [(0, 8), (1, 8)]
    # The sketch's text form of each type, as CAST(item AS STRING) with timestamps in UTC.
    texts = spark.createDataFrame(data[:4], df.schema).agg(*(
        window_top_k_sketch_estimate(window_top_k_sketch(c, "pos", 24), 1).alias(c)
        for c in ("t", "d", "price", "f", "b", "n"))).collect()[0]
    assert [texts[c][0].item for c in ("t", "d", "price", "f", "b", "n")] == [
        "2025-01-01 10:00:00", "2025-01-01", "0.00", "0.0", "false", "0"]


def test_tied_decimals_are_listed_by_value_everywhere(spark):
    # DECIMAL items are held as two's-complement bytes, whose order is not the values':
    # 0.00, 1.28, 0.25, 0.99, -0.25, -1.28. Ties must still go to the smaller value.
    prices = ["0.25", "-0.25", "1.28", "0.99", "-1.28", "0.00"]
    df = spark.createDataFrame([(i, decimal.Decimal(p)) for i, p in enumerate(prices)],
                               "pos BIGINT, price DECIMAL(10,2)")
    ascending = sorted(decimal.Decimal(p) for p in prices)
    running = df.select(approx_window_top_k("price", "pos", 100, 3).over(Window.orderBy("pos"))
                        .alias("top")).collect()[-1].top
    grouped, blob = df.agg(approx_window_top_k("price", "pos", 100, 3),
                           window_top_k_sketch("price", "pos", 100)).collect()[0]
    stored = df.agg(window_top_k_sketch_estimate(window_top_k_sketch("price", "pos", 100), 3)
                    .alias("top")).collect()[0].top
    for where, answer in [("running", running), ("group by", grouped)]:
        assert [r.item for r in answer] == ascending[:3], where
    assert [r.item for r in stored] == [str(v) for v in ascending[:3]]
    assert [c.item for c in TopKSketch.from_bytes(bytes(blob)).top(3)] == ascending[:3]


def test_nulls_and_an_empty_window(spark):
    got = spark.sql("""
        SELECT ts, approx_window_top_k(x, ts, 2, 3) OVER (ORDER BY ts) AS top
        FROM VALUES (1, 'a'), (2, CAST(NULL AS STRING)), (5, NULL), (6, 'b') AS t(ts, x)""").collect()
    assert [[(r.item, r["count"]) for r in row.top] for row in got] == [
        [("a", 1)], [("a", 1)], [], [("b", 1)]]
    nothing = spark.sql("SELECT approx_window_top_k(x, ts, 5, 2) FROM VALUES (1, CAST(NULL AS INT)) "
                        "AS t(ts, x)").collect()[0][0]
    assert nothing == []


BASE = datetime.datetime(2024, 5, 1)


@pytest.fixture(scope="module")
def hourly_paths(spark):
    """Two days of requests for three hosts over Zipf paths with a flood of one path, kept
    as top-k sketches per host per hour over shuffled partitions, on time and positions."""
    rng = np.random.default_rng(49)
    n = 6000
    seconds = np.sort(rng.integers(0, 2 * 86400, n))
    paths = [f"/p{int(v) % 200}" for v in rng.zipf(1.4, n)]
    paths[2500:2900] = ["/flood"] * 400
    data = [(f"h{int(rng.integers(0, 3))}", BASE + datetime.timedelta(seconds=int(seconds[i])), i,
             None if rng.random() < 0.05 else paths[i]) for i in range(n)]
    spark.createDataFrame(data, "host STRING, ts TIMESTAMP, pos BIGINT, path STRING") \
        .createOrReplaceTempView("paths")
    spark.sql(f"""
        SELECT host, date_trunc('HOUR', ts) AS hour,
               window_top_k_sketch(path, ts, INTERVAL 6 HOURS, {EPS}) AS s,
               window_top_k_sketch(path, pos, 1500, {EPS}) AS p
        FROM (SELECT /*+ REPARTITION(5) */ * FROM paths) GROUP BY 1, 2""") \
        .createOrReplaceTempView("hourly_paths")
    return data


@pytest.mark.parametrize("as_of, hours", [
    (None, None),
    ("2024-05-02 23:59:59", 6),
    ("2024-05-03 02:00:00", 6),
    ("2024-05-03 00:30:00", 1),
    ("2024-05-03 05:00:00", 1),  # past the data: an empty window, no items
])
def test_merged_hourly_sketches_within_the_bounds(spark, hourly_paths, as_of, hours):
    where = "" if as_of is None else f", TIMESTAMP'{as_of}', INTERVAL {hours} HOURS"
    got = spark.sql(f"""
        SELECT host, window_top_k_sketch_estimate(window_top_k_sketch_merge(s), {K}{where}) AS top,
               max(max_ts) AS max_ts
        FROM hourly_paths JOIN (SELECT host, max(ts) AS max_ts FROM paths GROUP BY host)
             USING (host) GROUP BY host""").collect()
    assert len(got) == 3
    for r in got:
        end = r.max_ts if as_of is None else datetime.datetime.fromisoformat(as_of)
        length = datetime.timedelta(hours=6 if hours is None else hours)
        counts = collections.Counter(p for h, ts, _, p in hourly_paths
                                     if h == r.host and p is not None and end - length <= ts <= end)
        check_window(listed(r.top), EPS, counts, (as_of, r.host), k=K)
        if as_of == "2024-05-03 05:00:00":
            assert r.top == []


def test_position_sketches_merge_in_any_shape(spark, hourly_paths):
    one = spark.sql(f"SELECT host, window_top_k_sketch(path, pos, 1500, {EPS}) AS m FROM paths "
                    "GROUP BY host")
    merged = spark.sql("SELECT host, window_top_k_sketch_merge(p) AS m FROM hourly_paths GROUP BY host")
    halves = spark.sql("""
        SELECT host, window_top_k_sketch_merge(m) AS m FROM (
          SELECT host, hour < TIMESTAMP'2024-05-02' AS early, window_top_k_sketch_merge(p) AS m
          FROM hourly_paths GROUP BY 1, 2) GROUP BY host""")
    last = len(hourly_paths) - 1
    for df in (one, merged, halves):
        for as_of, sub in ((last, 1500), (last + 400, 1500), (last, 200), (last + 1600, 100)):
            for r in df.select("host", window_top_k_sketch_estimate("m", K, as_of, sub)
                               .alias("top")).collect():
                counts = collections.Counter(p for h, _, pos, p in hourly_paths
                                             if h == r.host and p is not None
                                             and as_of - sub < pos <= as_of)
                check_window(listed(r.top), EPS, counts, (as_of, sub), k=K)


def test_python_arguments_are_checked_before_spark_sees_them():
    with pytest.raises(TypeError, match="`k` must be a positive int"):
        approx_window_top_k("x", "ts", 3, 2.5)
    with pytest.raises(TypeError, match="`k` must be a positive int"):
        window_top_k_sketch_estimate("s", "5")
    with pytest.raises(TypeError, match="`sub_window` needs `as_of`"):
        window_top_k_sketch_estimate("s", 3, sub_window=2)
    assert window_top_k_sketch_merge("s") is not None


@pytest.mark.parametrize("expression, condition, parameter", [
    ("approx_window_top_k(x, ts, 3, 0)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`k`"),
    ("approx_window_top_k(x, ts, 3, ts)", "DATATYPE_MISMATCH.NON_FOLDABLE_INPUT", "`k`"),
    ("approx_window_top_k(x, ts, 3, CAST(NULL AS INT))", "DATATYPE_MISMATCH.UNEXPECTED_NULL", "`k`"),
    ("approx_window_top_k(x, ts, 3, 1.5)", "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT", "`k`"),
    ("approx_window_top_k(x, ts, 3, 2, 0)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`eps`"),
    ("approx_window_top_k(x, ts, 0, 2)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`window`"),
    ("approx_window_top_k(array(x), ts, 3, 2)", "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE", "\"STRING\""),
    ("approx_window_top_k(x, ts, 3)", "WRONG_NUM_ARGS.WITHOUT_SUGGESTION", "approx_window_top_k"),
    ("window_top_k_sketch_estimate(window_top_k_sketch(x, ts, 3), 0)",
     "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", "`k`"),
    ("window_top_k_sketch_estimate(x, 2)", "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE",
     "window_top_k_sketch"),
])
def test_bad_arguments_are_named(spark, expression, condition, parameter):
    with pytest.raises(Exception) as raised:
        spark.sql(f"SELECT {expression} FROM VALUES ('a', 1) AS t(x, ts)").collect()
    assert error_condition(raised.value) == condition
    assert parameter in str(raised.value)
    if "array(x)" in expression:
        assert raised.value.getMessageParameters()["paramIndex"] == parameter_index(0)


@pytest.mark.parametrize("query, message", [
    ("SELECT window_top_k_sketch_estimate(window_sketch(true, 1, 3), 2)",
     "window_top_k_sketch_estimate: invalid sketch bytes: a count sketch (window_sketch) is not "
     "a top-k sketch"),
    ("SELECT window_top_k_sketch_merge(s) FROM (SELECT window_top_k_sketch('a', 1, 3) AS s "
     "UNION ALL SELECT window_top_k_sketch('a', 1, 4))", "cannot merge top-k sketches"),
    ("SELECT window_top_k_sketch_merge(s) FROM (SELECT window_top_k_sketch('a', 1, 3) AS s "
     "UNION ALL SELECT window_top_k_sketch(7, 1, 3))", "cannot merge top-k sketches"),
    ("SELECT window_top_k_sketch_merge(s) FROM (SELECT window_top_k_sketch('a', 1, 1001) AS s "
     "UNION ALL SELECT window_top_k_sketch('a', TIMESTAMP'2025-01-01 00:00:00', "
     "INTERVAL 1 MILLISECOND))", "on different time axes"),
    ("SELECT window_top_k_sketch_estimate(window_top_k_sketch('a', 5, 3), 1, 4)",
     "as_of (4) is earlier than the sketch's latest ts (5)"),
])
def test_runtime_errors_name_the_function(spark, query, message):
    with pytest.raises(Exception) as raised:
        spark.sql(query).collect()
    assert message in str(raised.value), str(raised.value)[:2000]


# Golden top-k sketches (format kind 9, and kind 6 as earlier builds wrote it), read and
# rewritten on every line: old bytes keep reading. `python tests/spark/test_top_k.py`
# rewrites them; the tests never do.
TOP_K_GOLDEN = os.path.join(GOLDEN, "top_k")
# Kind-6 files (items written in every node), as builds before the dictionary kind (9)
# wrote the same rows: they read, answer as recorded and write back as today's file.
KIND6_GOLDEN = {"kind6_time": "time", "kind6_positions_merged": "positions_merged",
                "kind6_empty": "empty"}


def golden_top_k_bytes(spark) -> dict[str, bytes]:
    """name -> bytes, from the golden rows in one partition, in order: a time sketch of
    strings, a positions sketch merged from two keys' partials, and an empty one."""
    keys, pos, _ = golden_rows()
    items = golden_top_k_items(pos)
    df = spark.createDataFrame(
        [(int(k), int(p), datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=30 * int(p)), x)
         for k, p, x in zip(keys, pos, items)],
        "key INT, pos BIGINT, ts TIMESTAMP, x STRING").coalesce(1)
    df.createOrReplaceTempView("golden_top_k_rows")
    return {
        "time": bytes(spark.sql("SELECT window_top_k_sketch(x, ts, INTERVAL 1 DAY, 0.1) "
                                "FROM golden_top_k_rows").collect()[0][0]),
        "positions_merged": bytes(spark.sql(
            "SELECT window_top_k_sketch_merge(s) FROM (SELECT /*+ COALESCE(1) */ key, "
            "window_top_k_sketch(x, pos, 1000, 0.3) AS s FROM golden_top_k_rows WHERE key > 0 "
            "GROUP BY key ORDER BY key)").collect()[0][0]),
        "empty": bytes(spark.sql("SELECT window_top_k_sketch(x, pos, 10) FROM golden_top_k_rows "
                                 "WHERE false").collect()[0][0]),
    }


def golden_top_k_answers(spark, data: bytes) -> list:
    """The sketch's own window: its 5 top items as [item, count, lower, upper]."""
    top = spark.sql(f"SELECT window_top_k_sketch_estimate(X'{data.hex()}', 5)").collect()[0][0]
    return [[r.item, r["count"], r.lower, r.upper] for r in top]


def test_golden_top_k_sketches_read_answer_and_rewrite_as_recorded(spark):
    with open(os.path.join(TOP_K_GOLDEN, "answers.json")) as f:
        recorded = json.load(f)
    written = golden_top_k_bytes(spark)
    assert sorted(recorded["sketches"]) == sorted([*written, *KIND6_GOLDEN]) == sorted(
        f[:-4] for f in os.listdir(TOP_K_GOLDEN) if f.endswith(".bin"))
    from windowsketch import _scala_object

    fmt = _scala_object(spark, "windowsketch.core.SketchFormat")
    for name in [*written, *KIND6_GOLDEN]:
        with open(os.path.join(TOP_K_GOLDEN, f"{name}.bin"), "rb") as f:
            stored = f.read()
        assert golden_top_k_answers(spark, stored) == recorded["sketches"][name], name
        today = written[KIND6_GOLDEN.get(name, name)]
        assert stored[2] == (6 if name in KIND6_GOLDEN else 9), name
        assert bytes(fmt.serializeTopK(fmt.deserializeTopK(stored))) == today, name
    # The answers hold the bounds against the exact window, not just stay stable.
    keys, pos, _ = golden_rows()
    items = golden_top_k_items(pos)
    for name, inside, eps in [("time", pos >= pos.max() - 86_400 // 30, 0.1),
                              ("positions_merged", (keys > 0) & (pos > pos[keys > 0].max() - 1000),
                               0.3)]:
        counts = collections.Counter(x for x, keep in zip(items, inside) if keep)
        check_window([tuple(a) for a in recorded["sketches"][name]], eps, counts, name, k=5)
    assert any(a[2] < a[3] for a in recorded["sketches"]["positions_merged"])  # bounds at work
    assert recorded["sketches"]["empty"] == []


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    import windowsketch

    session = windowsketch.configure(SparkSession.builder.master("local[1]")).getOrCreate()
    os.makedirs(TOP_K_GOLDEN, exist_ok=True)
    written_now = golden_top_k_bytes(session)
    for golden_name, golden_data in written_now.items():
        with open(os.path.join(TOP_K_GOLDEN, f"{golden_name}.bin"), "wb") as out:
            out.write(golden_data)
    with open(os.path.join(TOP_K_GOLDEN, "answers.json")) as f:
        kept = {k: v for k, v in json.load(f)["sketches"].items() if k in KIND6_GOLDEN}
    with open(os.path.join(TOP_K_GOLDEN, "answers.json"), "w") as out:
        json.dump({"written_by": f"windowsketch {windowsketch.__version__} on Spark "
                                 f"{session.version}", "format_version": 1,
                   "sketches": dict(sorted({**kept, **{
                       name: golden_top_k_answers(session, data)
                       for name, data in written_now.items()}}.items()))}, out, indent=1)
        out.write("\n")
