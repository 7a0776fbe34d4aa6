"""approx_window_seen and the filter sketch columns against the exact answer on every
output: each row's "seen before in the window" is recomputed in Python from the rows in the
frame's order, on streams that stress the window edge (bursts, gaps, rows equal in time and
value, monotone runs, NULLs), in running frames with and without peers and per key; sketches
built over shuffled partitions equal one partition's, and answer every value present and
absent at several (as_of, sub_window); then the false-positive rate, value types, the Python
reader's agreement, golden files and the errors."""
from __future__ import annotations

import datetime
import json
import math
import os
from collections import defaultdict

import numpy as np
import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from conftest import parameter_index, stable_seed
from golden_sketches import GOLDEN, golden_filter_probes, golden_item_view, rewrite_golden
from test_sample import KINDS, check_refused, rows
from windowsketch.functions import (approx_window_seen, window_filter_contains,
                                    window_filter_sketch, window_filter_sketch_merge)
from windowsketch.sketch import FilterSketch, WindowSketch, merge_column
from windowsketch.sketch.filter import fingerprint_bits

WINDOW = 40


def expected_seen(ordered_rows, window):
    """Per row (id, ts, x) in the frame's order: NULL for a NULL x or ts, else whether an
    earlier row of the order has the same x at a time in (ts - window, ts]."""
    last = {}
    out = {}
    for rid, t, x in ordered_rows:
        if t is None or x is None:
            out[rid] = None
            continue
        out[rid] = x in last and t - last[x] < window
        last[x] = t
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_every_row_of_a_running_frame_is_seen_exactly_when_its_value_is_in_the_window(spark, kind):
    """ROWS and RANGE frames ordered by (ts, id), per key: every output equals the brute
    force; a false positive at fpp 0.01 has probability below 10^-6 on these streams."""
    rng = np.random.default_rng(stable_seed("filter-frames", kind))
    data = rows(rng, kind, 1500)
    if kind == "monotone":  # 50 values on a step-1 run: repeats right at the window's edge
        data = [(i, k, t, x and f"/m{int(x[2:]) % 50}") for i, k, t, x in data]
    df = spark.createDataFrame(data, "id INT, key STRING, ts BIGINT, x STRING").repartition(3)
    by_key = Window.partitionBy("key").orderBy("ts", "id")
    frames = {"range": by_key,
              "rows": by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)}
    got = df.select("id", *[approx_window_seen("x", "ts", WINDOW).over(w).alias(name)
                            for name, w in frames.items()]).collect()
    ordered = defaultdict(list)
    for rid, key, t, x in sorted(data, key=lambda r: (r[1], r[2] is not None, r[2] or 0, r[0])):
        ordered[key].append((rid, t, x))
    expected = {}
    for key_rows in ordered.values():
        expected.update(expected_seen(key_rows, WINDOW))
    assert len(got) == 1500
    for r in got:
        assert r.range == expected[r.id] and r.rows == expected[r.id], (r, expected[r.id])
    answers = [expected[r.id] for r in got]
    assert None in answers and answers.count(False) >= 9
    assert answers.count(True) == 0 if kind == "distinct" else answers.count(True) > 50


def test_rows_of_one_time_get_their_own_answers_in_the_default_frame(spark):
    """OVER (ORDER BY ts) is a RANGE frame whose peers Spark evaluates together: run as
    ROWS, of each (ts, x) not seen before exactly one row is new, whatever the peers' order."""
    rng = np.random.default_rng(stable_seed("filter-peers"))
    data = [(i, int(t), f"v{int(v)}") for i, (t, v) in
            enumerate(zip(np.cumsum(rng.integers(0, 2, 3000)), rng.integers(0, 40, 3000)))]
    df = spark.createDataFrame(data, "id INT, ts BIGINT, x STRING").repartition(4)
    got = df.select("ts", "x", approx_window_seen("x", "ts", 25).over(Window.orderBy("ts"))
                    .alias("seen")).collect()
    new_rows = defaultdict(int)
    for r in got:
        new_rows[(r.ts, r.x)] += not r.seen
    times = defaultdict(set)
    for _, t, x in data:
        times[x].add(t)
    for (t, x), new in new_rows.items():
        earlier = any(0 < t - u < 25 for u in times[x])
        assert new == (0 if earlier else 1), (t, x)
    assert 0 < sum(new_rows.values()) < len(got)


def test_it_refuses_group_by_and_frames_that_are_not_running_ones(spark):
    df = spark.createDataFrame([(1, "a"), (2, "a")], "ts BIGINT, x STRING")
    message = "approx_window_seen answers for each row of a running frame ordered by its ts"
    for query in (df.groupBy().agg(approx_window_seen("x", "ts", 5)),
                  df.select(approx_window_seen("x", "ts", 5).over(
                      Window.orderBy("ts").rowsBetween(-1, 0))),
                  df.select(approx_window_seen("x", "ts", 5).over(Window.orderBy(F.desc("ts"))))):
        with pytest.raises(Exception, match=message):
            query.collect()


@pytest.mark.parametrize("kind", KINDS)
def test_sketches_over_shuffled_partitions_answer_every_value_exactly(spark, kind):
    """Per-key sketches built over 7 shuffled partitions equal one partition's bytes and,
    merged in SQL and in Python (the same bytes), answer each value present and absent at
    four (as_of, sub_window) as the rows do."""
    rng = np.random.default_rng(stable_seed("filter-group-by", kind))
    data = rows(rng, kind, 4000)
    df = spark.createDataFrame(data, "id INT, key STRING, ts BIGINT, x STRING")
    window = 300
    shuffled = {r.key: bytes(r.s) for r in df.repartition(7, "id").groupBy("key")
                .agg(window_filter_sketch("x", "ts", window).alias("s")).collect()}
    single = {r.key: bytes(r.s) for r in df.coalesce(1).groupBy("key")
              .agg(window_filter_sketch("x", "ts", window).alias("s")).collect()}
    assert shuffled == single and len(shuffled) == 3
    parts = (df.repartition(5, "id").groupBy("key", F.floor(F.col("ts") / 90).alias("period"))
             .agg(window_filter_sketch("x", "ts", window).alias("s")))
    merged = bytes(parts.agg(window_filter_sketch_merge("s")).first()[0])
    assert merged == bytes(df.coalesce(1).agg(window_filter_sketch("x", "ts", window)).first()[0])
    python_merged = merge_column([bytes(r.s) for r in parts.collect()])
    assert isinstance(python_merged, FilterSketch) and python_merged.to_bytes() == merged
    now = max(t for _, _, t, _ in data if t is not None)
    values = sorted({x for *_, x in data if x is not None}) + ["/absent", "/b999", ""]
    queries = [(None, None), (now + 100, None), (now, 50), (now + 290, 300), (now + 5, 1)]
    sql = spark.createDataFrame([(v,) for v in values], "v STRING").select(
        "v", *[window_filter_contains(F.lit(merged), F.col("v"), *(
            [] if as_of is None else [F.lit(as_of)] + ([] if sub is None else [F.lit(sub)])))
            .alias(f"q{i}") for i, (as_of, sub) in enumerate(queries)]).collect()
    latest = {}
    for _, _, t, x in data:
        if t is not None and x is not None:
            latest[x] = max(t, latest.get(x, t))
    for r in sql:
        for i, (as_of, sub) in enumerate(queries):
            end, length = (now if as_of is None else as_of), (sub or window)
            # Every time is at most now <= end: the value's latest time decides.
            exact = r.v in latest and end - latest[r.v] < length
            assert r[f"q{i}"] == exact, (r.v, as_of, sub)
            assert python_merged.contains(r.v, as_of, sub) == exact, (r.v, as_of, sub)


def test_false_positives_follow_the_fingerprints_and_stay_within_fpp(spark):
    """At fpp 0.5 (33-bit fingerprints) 3·10^5 values give each absent value a false
    positive with probability p = d / 2^33 (d distinct fingerprints); over 4·10^6 absent
    values the count lies within p·m ± 6 sqrt(p·m) + 4 (a false failure below 10^-8), and p
    is far below fpp: the bound's 2^32 values are a ceiling, not the typical case."""
    replay = spark._jvm.windowsketch.core.Replay
    distinct, absent = 300_000, 4_000_000
    bits = fingerprint_bits(0.5)
    p = distinct / 2.0 ** bits
    mean = p * absent
    positives = replay.filterFalsePositives(distinct, absent, 0.5)
    assert abs(positives - mean) <= 6 * math.sqrt(mean) + 4, (positives, mean)
    assert positives > 0 and p <= 0.5 * distinct / 2.0 ** 32
    assert [fingerprint_bits(f) for f in (0.5, 0.01, 0.001, 1e-9)] == [33, 39, 42, 62]


def test_values_of_any_type_and_the_python_reader_agree_with_sql(spark):
    """Scalars, structs and time windows [now - w, now] (their first microsecond in):
    window_filter_contains and the Python reader answer alike for every type the reader
    encodes, -0.0 is 0.0 and every NaN one NaN, as GROUP BY takes them."""
    base = datetime.datetime(2025, 1, 1, 10)
    data = [(i, base + datetime.timedelta(minutes=i), i % 5, 1.5 * (i % 3), f"u{i % 4}",
             datetime.date(2025, 1, 1 + i % 2), i % 2 == 0) for i in range(30)]
    df = spark.createDataFrame(
        data, "id INT, t TIMESTAMP, n BIGINT, d DOUBLE, s STRING, day DATE, b BOOLEAN")
    columns = {"n": "bigint", "d": "double", "s": "string", "day": "date", "b": "boolean",
               "t": "timestamp"}
    sketches = df.agg(*[window_filter_sketch(c, "t", "10 minutes").alias(c) for c in columns]) \
        .first()
    last = base + datetime.timedelta(minutes=29)
    probes = {"n": [0, 3, 4, 7, -1], "d": [0.0, -0.0, 1.5, 3.0, 4.5], "s": ["u0", "u3", "x"],
              "day": [datetime.date(2025, 1, 1), datetime.date(2025, 1, 3)], "b": [True, False],
              "t": [last, last - datetime.timedelta(minutes=10),
                    last - datetime.timedelta(minutes=11)]}
    for c, t in columns.items():
        blob = bytes(sketches[c])
        sketch = WindowSketch.from_bytes(blob)
        assert sketch.value_type == t
        inside = {r[c] for r in df.where(F.col("t") >= last - datetime.timedelta(minutes=10))
                  .select(c).collect()}
        for v in probes[c]:
            got = spark.range(1).select(window_filter_contains(
                F.lit(blob), F.lit(v).cast(t))).first()[0]
            assert got == (v in inside) == sketch.contains(v), (c, v)
    # A struct value's bytes go through contains_bytes in Python.
    s = spark.sql("SELECT window_filter_sketch(struct(id, name), ts, 10) FROM VALUES "
                  "(1, 'a', 5L), (2, 'b', 6L) AS t(id, name, ts)").first()[0]
    assert spark.sql(f"SELECT window_filter_contains(X'{bytes(s).hex()}', struct(1 AS id, 'a' AS name)),"
                     f" window_filter_contains(X'{bytes(s).hex()}', struct(1 AS id, 'b' AS name))"
                     ).first() == (True, False)
    nans = spark.sql("SELECT x, approx_window_seen(x, ts, 10) OVER (ORDER BY ts) FROM VALUES "
                     "(1L, -0.0D), (2L, 0.0D), (3L, double('NaN')), (4L, -double('NaN')) "
                     "AS t(ts, x)").collect()
    assert [r[1] for r in nans] == [False, True, False, True]


def test_memory_follows_the_distinct_values_of_the_window_not_its_rows(spark):
    """10^6 rows of 100 values in one window: the sketch holds 100 fingerprints; and a
    window that slides past 10^5 distinct values keeps only its own."""
    few = bytes(spark.range(1_000_000).selectExpr("id AS ts", "id % 100 AS x")
                .agg(window_filter_sketch("x", "ts", 10**7)).first()[0])
    assert len(WindowSketch.from_bytes(few)) == 100 and len(few) < 1500
    sliding = bytes(spark.range(100_000).selectExpr("id AS ts", "id AS x")
                    .agg(window_filter_sketch("x", "ts", 1000)).first()[0])
    assert len(WindowSketch.from_bytes(sliding)) == 1000


@pytest.mark.parametrize("call, condition, parameters", [
    ("window_filter_sketch(x, ts, 10, 0.6)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", ["`fpp`", "0.5"]),
    ("window_filter_sketch(x, ts, 10, 0)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", ["`fpp`"]),
    ("window_filter_sketch(x, ts, 10, ts)", "DATATYPE_MISMATCH.NON_FOLDABLE_INPUT", ["`fpp`"]),
    ("window_filter_sketch(x, ts, 10, CAST(NULL AS DOUBLE))", "DATATYPE_MISMATCH.UNEXPECTED_NULL", ["`fpp`"]),
    ("window_filter_sketch(x, ts, 10, 'a')", "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT", ["`fpp`"]),
    ("window_filter_sketch(map(x, ts), ts, 10)", "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE",
     [parameter_index(0), "MAP"]),
    ("window_filter_sketch(x, ts, 0)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", ["`window`"]),
    ("window_filter_sketch(x, x, 10)", "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE", [parameter_index(1)]),
    ("approx_window_seen(x, ts, 10, 2.0) OVER (ORDER BY ts)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE",
     ["`fpp`"]),
    ("window_filter_contains(window_filter_sketch(x, ts, 10), map(x, 1))",
     "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE", [parameter_index(1), "MAP"]),
])
def test_bad_arguments_are_refused_naming_the_argument(spark, call, condition, parameters):
    check_refused(spark, f"SELECT {call} FROM VALUES ('a', 1L) AS t(x, ts)", condition, parameters)


def test_python_arguments_are_checked_before_spark():
    for bad in (dict(fpp="0.1"), dict(fpp=True)):
        with pytest.raises(TypeError, match="fpp"):
            approx_window_seen("x", "ts", 10, **bad)
    with pytest.raises(TypeError, match="`x`"):
        window_filter_sketch(1, "ts", 10)


def test_sketch_columns_refuse_what_they_cannot_answer(spark):
    s = bytes(spark.sql("SELECT window_filter_sketch(x, ts, 10) FROM VALUES ('a', 5L), "
                        "('b', 6L) AS t(x, ts)").first()[0])
    other = bytes(spark.sql("SELECT window_filter_sketch(x, ts, 10, 0.001) FROM VALUES "
                            "('a', 5L) AS t(x, ts)").first()[0])
    sample = bytes(spark.sql("SELECT window_sample_sketch(x, ts, 10, 2) FROM VALUES ('a', 5L) "
                             "AS t(x, ts)").first()[0])
    n = bytes(spark.sql("SELECT window_filter_sketch(ts, ts, 10) FROM VALUES (5L) AS t(ts)")
              .first()[0])
    cases = {
        f"window_filter_contains(X'{s.hex()}', 1)": "the sketch holds values of type string, but "
                                                    "`value` is of type int: cast it to string",
        f"window_filter_contains(X'{n.hex()}', 1.5D)": "the sketch holds values of type bigint, "
                                                       "but `value` is of type double",
        f"window_filter_contains(X'{s.hex()}', 'a', 5L)": "as_of (5) is earlier than the sketch's",
        f"window_filter_contains(X'{s.hex()}', 'a', 7L, 11L)": "is longer than the sketch's window",
        f"window_filter_contains(X'{sample.hex()}', 'a')":
            "a sample sketch (window_sample_sketch) is not a filter sketch (window_filter_sketch)",
        f"window_filter_contains(X'{s[:-1].hex()}', 'a')": "checksum mismatch",
        f"window_filter_sketch_merge(s) FROM VALUES (X'{s.hex()}'), (X'{other.hex()}') AS t(s)":
            "cannot merge filter sketches",
    }
    for call, message in cases.items():
        with pytest.raises(Exception) as e:
            spark.sql(f"SELECT {call}").collect()
        assert message in str(e.value), (call, str(e.value)[:500])
        name = call.split("(")[0]
        assert f"{name}: " in str(e.value), (call, str(e.value)[:500])
    assert spark.sql(f"SELECT window_filter_contains(X'{s.hex()}', CAST(NULL AS STRING)), "
                     f"window_filter_contains(CAST(NULL AS BINARY), 'a')").first() == (None, None)
    # Rows asking different sketches in turn (the last one read is kept) each get their own.
    pairs = spark.createDataFrame([(s, "a"), (other, "b"), (s, "b"), (other, "a"), (s, "c")],
                                  "f BINARY, v STRING")
    assert [r[0] for r in pairs.select(window_filter_contains("f", F.col("v"))).collect()] == [
        True, False, True, True, False]
    # A narrower number widens to the sketch's type: 5 (INT) and 5Y are the BIGINT 5.
    assert spark.sql(f"SELECT window_filter_contains(X'{n.hex()}', 5), window_filter_contains("
                     f"X'{n.hex()}', 5Y), window_filter_contains(X'{n.hex()}', 6)").first() == (
        True, True, False)


# Golden filter sketches (format kind 11), read on every line and by the Python reader
# (tests/python/test_filter_reader.py). `python tests/spark/test_filter.py` rewrites them;
# the tests never do.
FILTER_GOLDEN = os.path.join(GOLDEN, "filter")


def golden_filter_bytes(spark) -> dict[str, bytes]:
    """name -> bytes from the golden rows in one partition: strings over time, positions
    merged from two keys' partials at fpp 0.001, and an empty sketch."""
    golden_item_view(spark, "golden_filter_rows")

    def one(query: str) -> bytes:
        return bytes(spark.sql(query).collect()[0][0])

    return {
        "time": one("SELECT window_filter_sketch(x, ts, INTERVAL 1 DAY) FROM golden_filter_rows"),
        "positions_merged": one(
            "SELECT window_filter_sketch_merge(s) FROM (SELECT /*+ COALESCE(1) */ key, "
            "window_filter_sketch(pos % 97, pos, 1000, 0.001) AS s FROM golden_filter_rows "
            "WHERE key > 0 GROUP BY key ORDER BY key)"),
        "empty": one("SELECT window_filter_sketch(x, pos, 10) FROM golden_filter_rows WHERE false"),
    }


def golden_filter_answers(spark, data: bytes) -> list:
    sketch = WindowSketch.from_bytes(data)
    out = []
    for v, as_of, sub in golden_filter_probes(sketch):
        args = [F.lit(data), F.lit(v).cast(sketch.value_type)]
        if as_of is not None:
            args.append(F.lit(as_of))
            if sub is not None:
                args.append(F.lit(sub))
        out.append(spark.range(1).select(window_filter_contains(*args)).first()[0])
    return out


def test_golden_filter_sketches_read_answer_and_rewrite_as_recorded(spark):
    with open(os.path.join(FILTER_GOLDEN, "answers.json")) as f:
        recorded = json.load(f)
    written = golden_filter_bytes(spark)
    assert sorted(recorded["sketches"]) == sorted(written) == sorted(
        f[:-4] for f in os.listdir(FILTER_GOLDEN) if f.endswith(".bin"))
    for name, today in written.items():
        with open(os.path.join(FILTER_GOLDEN, f"{name}.bin"), "rb") as f:
            stored = f.read()
        assert stored[2] == 11 and stored == today, name
        assert golden_filter_answers(spark, stored) == recorded["sketches"][name], name
    assert True in recorded["sketches"]["time"] and False in recorded["sketches"]["time"]
    assert recorded["sketches"]["empty"] == [False, False]


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    import windowsketch

    session = windowsketch.configure(SparkSession.builder.master("local[1]")).getOrCreate()
    rewrite_golden(FILTER_GOLDEN, golden_filter_bytes(session),
                   lambda data: golden_filter_answers(session, data), session.version)
