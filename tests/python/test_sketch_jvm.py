"""The pure-Python reader against the JVM, on random streams and merge trees built in the
JVM: the same estimates and bounds for every as_of and sub-window tried, the same bytes
for the same merges, and the same verdict (and message) on damaged bytes whose checksum
was made to match. The HyperLogLog++ tables it carries are checked against Spark's own.

Run as a script (`python tests/python/test_sketch_jvm.py --write-tables`) it rewrites
python/windowsketch/_hllpp_tables.py from the running Spark.
"""
from __future__ import annotations

import bisect
import datetime
import decimal
import math
import os
import re
import sys
import textwrap
import zlib

import numpy as np
import pytest
from pyspark.sql import functions as F

from sketch_layout import compact_quantile_values, read_varint, sign, varint
from windowsketch import _hllpp_tables
from windowsketch.sketch import (CountSketch, DistinctSketch, FilterSketch, InvalidSketchBytes,
                                 MomentsSketch, PercentileSketch, TopKSketch, WindowSketch,
                                 merge_column)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
CANONICAL_NAN = 0x7FF8000000000000
HELPER = "org.apache.spark.sql.catalyst.util.HyperLogLogPlusPlusHelper$"


def spark_bias_tables(spark) -> dict:
    """Spark's HLL++ tables for the precisions windowsketch uses (4 to 14), by reflection."""
    jvm = spark.sparkContext._jvm
    cls = jvm.java.lang.Class.forName(HELPER)
    helper = cls.getField("MODULE$").get(None)

    def field(name):
        f = cls.getDeclaredField(name)
        f.setAccessible(True)
        return f.get(helper)
    return {"RAW_ESTIMATE_DATA": tuple(tuple(float(x) for x in row)
                                       for row in list(field("RAW_ESTIMATE_DATA"))[:11]),
            "BIAS_DATA": tuple(tuple(float(x) for x in row)
                               for row in list(field("BIAS_DATA"))[:11]),
            "THRESHOLDS": tuple(float(x) for x in list(field("THRESHOLDS"))[:11]),
            "K": int(helper.K())}


def test_bias_tables_are_sparks(spark):
    tables = spark_bias_tables(spark)
    for name, value in tables.items():
        assert getattr(_hllpp_tables, name) == value, name


# -- streams ---------------------------------------------------------------------------

def stream(seed: int, n: int, shape: str, spread: int) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps (any order) and events that stress the window edge."""
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, spread, n))
    events = rng.random(n) < 0.4
    if shape == "burst":  # a burst of events at one timestamp, then quiet
        ts[n // 3: n // 2] = ts[n // 3]
        events[n // 3: n // 2] = True
    elif shape == "ones_then_zeros":
        events[: n // 2] = True
        events[n // 2:] = False
    elif shape == "gaps":
        ts[n // 2:] += spread
    rng.shuffle(order := np.arange(n))
    return ts[order], events[order]


DYADIC_CASES = [
    # seed, rows, shape, spread, window, eps
    (1, 2000, "burst", 5000, 1000, 0.1),
    (2, 3000, "ones_then_zeros", 10**6, 10**5, 0.01),
    (3, 1500, "gaps", 20000, 7, 0.5),
    (4, 4000, "plain", 10**9, 2**40, 0.05),
    (5, 200, "plain", 100, 1, 0.2),
    (6, 20000, "plain", 10**7, 10**7, 0.0001),  # the node cap coarsens the invariant
]


def queries(now: int, window: int, rng) -> list[tuple[int, int]]:
    ends = [now, now + 1, now + window // 2, now + window - 1, now + window,
            *(now + int(x) for x in rng.integers(0, 2 * window + 2, 5))]
    lengths = sorted({1, window, max(1, window // 3), max(1, window - 1),
                      *(int(x) for x in rng.integers(1, window + 1, 5))})
    return [(end, length) for end in ends for length in lengths if end < 2**63]


def longs(values) -> bytes:
    return np.asarray(values, dtype=">i8").tobytes()


@pytest.mark.parametrize("case", DYADIC_CASES, ids=lambda c: f"{c[2]}-w{c[4]}-eps{c[5]}")
def test_dyadic_bounds_equal_the_jvms_for_every_window(sketches, case):
    seed, n, shape, spread, window, eps = case
    ts, events = stream(seed, n, shape, spread)
    blob = bytes(sketches.format.serialize(sketches.dyadic(window, eps, ts, events)))
    jvm = sketches.format.deserialize(blob)  # the JVM queries read bytes, as SQL does
    python = WindowSketch.from_bytes(blob)
    assert python.to_bytes() == blob
    rng = np.random.default_rng(seed)
    by_length: dict[int, list[int]] = {}
    for end, length in queries(int(jvm.now()), window, rng):
        by_length.setdefault(end, []).append(length)
    for end, lengths in by_length.items():
        want = sketches.sub_windows(jvm, end, lengths)
        got = [python.bounds(as_of=end, sub_window=length) for length in lengths]
        assert [tuple(row) for row in want.tolist()] == got, (end, lengths)


def test_time_axis_queries_convert_as_sql_does(spark, sketches):
    """A microsecond sketch queried with datetimes and timedeltas answers as the JVM does at
    the matching (end, length): the window [as_of - sub_window, as_of] is w + 1 long."""
    ts, events = stream(11, 3000, "burst", 3 * 86_400_000_000)
    window = 86_400_000_001  # INTERVAL 1 DAY
    d = sketches.dyadic(window, 0.02)
    getattr(d, "microsecondTime_$eq")(True)
    sketches.replay.insertAll(d, longs(ts), np.asarray(events, dtype=np.uint8).tobytes())
    blob = bytes(sketches.format.serialize(d))
    python = WindowSketch.from_bytes(blob)
    assert python.window == datetime.timedelta(days=1) and python.time_unit == "microseconds"
    now = int(d.now())
    for hours_after, sub in [(0, datetime.timedelta(hours=3)), (5, datetime.timedelta(days=1)),
                             (20, datetime.timedelta(minutes=17, microseconds=3))]:
        end = now + hours_after * 3_600_000_000
        length = sub // datetime.timedelta(microseconds=1) + 1
        want = tuple(sketches.sub_windows(sketches.format.deserialize(blob), end, [length])[0])
        as_of = EPOCH + datetime.timedelta(microseconds=end)
        assert python.bounds(as_of=as_of, sub_window=sub) == want
        # And SQL, through window_sketch_bounds, agrees.
        row = spark.sql(f"SELECT window_sketch_bounds(X'{blob.hex()}', "
                        f"timestamp_micros({end}), INTERVAL '{int(sub.total_seconds() * 10**6)}' "
                        "MICROSECOND) AS b").collect()[0].b
        assert (row.estimate, row.lower, row.upper) == want


@pytest.mark.parametrize("window, eps", [(1000, 0.1), (50, 0.5), (10**6, 0.01)])
def test_histogram_bounds_equal_the_jvms_at_every_as_of(sketches, window, eps):
    ts, events = stream(window, 5000, "burst", 20 * window)
    order = np.argsort(ts, kind="stable")
    h = sketches.new(window, eps)
    sketches.replay.insertAll(h, longs(ts[order]), np.asarray(events[order], np.uint8).tobytes())
    blob = bytes(sketches.format.serialize(h))
    python = WindowSketch.from_bytes(blob)
    assert python.to_bytes() == blob
    now = int(h.now())
    # Ends that put the window's edge on, or next to, each of the oldest buckets' ends.
    edges = {t + window + d for newest, oldest in python._buckets[-6:] for t in (newest, oldest)
             for d in (-1, 0, 1)}
    for end in sorted({now, now + 1, now + window // 4, now + window // 2, now + window - 1,
                       now + window, now + 2 * window, *(e for e in edges if e >= now)}):
        jvm = sketches.format.deserialize(blob)
        jvm.update(end, False)
        assert python.bounds(as_of=end) == (jvm.estimate(), jvm.lowerBound(), jvm.upperBound())


DISTINCT_CASES = [
    # seed, rows, values, spread, window, rsd
    (21, 3000, 500, 5000, 1000, 0.05),
    (22, 5000, 10**9, 10**6, 10**5, 0.02),
    (23, 800, 40, 300, 7, 0.3),
    (24, 20000, 10**6, 10**6, 10**6, 0.01),
]


def hashes(rng, n: int, values: int) -> np.ndarray:
    """64-bit hashes of `values` distinct values (a fixed mix, as Spark's hash would be)."""
    x = rng.integers(0, values, n).astype(np.uint64)
    x = (x + np.uint64(0x9E3779B97F4A7C15)) * np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(29)
    return x.astype(np.int64)


def distinct_blob(sketches, seed, n, values, spread, window, rsd, rng=None) -> bytes:
    rng = rng or np.random.default_rng(seed)
    s = sketches.replay.distinct(window, float(rsd))
    sketches.replay.addDistinct(s, longs(rng.integers(0, spread, n)),
                                longs(hashes(rng, n, values)))
    return bytes(sketches.format.serializeDistinct(s))


@pytest.mark.parametrize("case", DISTINCT_CASES, ids=lambda c: f"w{c[4]}-rsd{c[5]}")
def test_distinct_estimates_equal_sqls_for_every_window(spark, sketches, case):
    seed, n, values, spread, window, rsd = case
    blob = distinct_blob(sketches, *case)
    python = WindowSketch.from_bytes(blob)
    assert python.to_bytes() == blob
    rng = np.random.default_rng(seed)
    pairs = queries(python.now, window, rng)
    for length in sorted({length for _, length in pairs}):
        ends = [end for end, l in pairs if l == length]
        rows = spark.sql(
            f"SELECT a, window_distinct_sketch_estimate(X'{blob.hex()}', a, {length}) AS e "
            f"FROM VALUES {', '.join(f'(CAST({e} AS BIGINT))' for e in ends)} AS t(a)").collect()
        assert {(r.a, r.e) for r in rows} == \
            {(end, python.estimate(as_of=end, sub_window=length)) for end in ends}, length
    assert python.estimate() == spark.sql(
        f"SELECT window_distinct_sketch_estimate(X'{blob.hex()}')").collect()[0][0]


def test_bias_correction_equals_sparks_between_and_on_the_table_points(spark):
    """Spark's k-nearest-neighbour bias at raw estimates on, between and just off its table
    points (the tables are not strictly sorted: its binary search is ported step by step)."""
    from windowsketch.sketch.distinct import _estimate_bias, _precision

    jvm = spark.sparkContext._jvm
    for p in range(4, 15):
        rsd = 1.106 / 2 ** (p / 2) * 1.001
        assert _precision(rsd) == p
        helper = jvm.org.apache.spark.sql.catalyst.util.HyperLogLogPlusPlusHelper(rsd)
        table = _hllpp_tables.RAW_ESTIMATE_DATA[p - 4]
        points = sorted({x for a, b in zip(table, table[1:])
                         for x in (a, (a + b) / 2, np.nextafter(a, -np.inf),
                                   np.nextafter(a, np.inf))} | {table[-1] * 1.01, 0.5})
        for e in points[::max(1, len(points) // 150)] + [128.3463, 128.3462, 128.3464]:
            assert _estimate_bias(p, float(e)) == helper.estimateBias(float(e)), (p, e)


# -- merges ----------------------------------------------------------------------------

def jvm_fold(sketches, blobs: list[bytes], distinct: bool = False) -> bytes:
    """The JVM's window_sketch_merge over `blobs` in one partition: read the first, merge
    the others into it in order, write."""
    fmt = sketches.format
    read = fmt.deserializeDistinct if distinct else fmt.deserialize
    union = read(blobs[0])
    for blob in blobs[1:]:
        union.merge(read(blob))
    return bytes(fmt.serializeDistinct(union) if distinct else fmt.serialize(union))


def partials(sketches, seed: int, parts: int, n: int, window: int, eps: float,
             spread: int) -> list[bytes]:
    ts, events = stream(seed, n, "burst", spread)
    owner = np.random.default_rng(seed).integers(0, parts, n)
    return [bytes(sketches.format.serialize(
        sketches.dyadic(window, eps, ts[owner == p], events[owner == p]))) for p in range(parts)]


@pytest.mark.parametrize("seed, parts, n, window, eps, spread", [
    (31, 2, 500, 1000, 0.1, 3000),
    (32, 12, 20000, 10**5, 0.01, 10**6),    # partials past 64 nodes: compress mid-merge
    (33, 30, 30000, 10**7, 0.0001, 10**7),  # the node cap during the merge
    (34, 5, 3000, 50, 0.5, 10**4),          # partials mostly out of each other's window
])
def test_python_merges_of_jvm_partials_write_the_jvms_bytes(sketches, seed, parts, n, window,
                                                            eps, spread):
    blobs = partials(sketches, seed, parts, n, window, eps, spread)
    want = jvm_fold(sketches, blobs)
    merged = merge_column(blobs)
    assert merged is not None and merged.to_bytes() == want
    chained = WindowSketch.from_bytes(blobs[0])
    for blob in blobs[1:]:
        chained = chained.merge(WindowSketch.from_bytes(blob))
    assert chained.to_bytes() == want
    # A merged sketch answers as its bytes read back do.
    back = WindowSketch.from_bytes(want)
    now = back.now
    for end, length in queries(now, window, np.random.default_rng(seed))[:40]:
        assert chained.bounds(as_of=end, sub_window=length) == \
            back.bounds(as_of=end, sub_window=length)


@pytest.mark.parametrize("seed", [41, 42, 43])
def test_random_merge_trees_write_the_same_bytes_at_every_node(sketches, seed):
    rng = np.random.default_rng(seed)
    eps = [0.2, 0.01, 0.0005][seed % 3]
    level = partials(sketches, seed, 16, 8000, 10**5, eps, 10**6)
    python_level = list(level)
    while len(level) > 1:
        next_level, next_python = [], []
        i = 0
        while i < len(level):
            k = int(min(len(level) - i, rng.integers(1, 4)))
            next_level.append(jvm_fold(sketches, level[i:i + k]))
            merged = merge_column(python_level[i:i + k])
            assert merged is not None
            next_python.append(merged.to_bytes())
            i += k
        assert next_python == next_level
        level, python_level = next_level, next_python


def test_sql_merge_of_stored_sketches_in_one_partition_equals_pythons(spark, sketches):
    blobs = partials(sketches, 51, 6, 6000, 10**4, 0.01, 10**5)
    df = spark.createDataFrame([(i, b) for i, b in enumerate(blobs)], "i INT, s BINARY")
    got = bytes(df.coalesce(1).sortWithinPartitions("i")
                .selectExpr("window_sketch_merge(s) AS m").collect()[0].m)
    merged = merge_column(blobs)
    assert merged is not None and merged.to_bytes() == got


@pytest.mark.parametrize("parts, small", [(2, 0), (7, 0), (5, 30), (6, 3)])
def test_python_distinct_merges_write_the_jvms_bytes(sketches, parts, small):
    """Merges of dense and sparse sketches (kinds 3 and 7: `small` rows in every other
    part, or every part) write what the JVM writes, in the kind it picks."""
    rng = np.random.default_rng(parts)
    rows = [small if small and (p % 2 or small == 30) else 3000 for p in range(parts)]
    blobs = [distinct_blob(sketches, 0, rows[p], 2000, 10**5 * (1 + p % 3), 10**5, 0.05, rng)
             for p in range(parts)]
    want = jvm_fold(sketches, blobs, distinct=True)
    merged = merge_column(blobs)
    assert merged is not None and merged.to_bytes() == want
    kinds = {blob[2] for blob in blobs} | {want[2]}
    assert kinds == ({7} if small == 30 else {3, 7} if small else {3}), kinds
    back = WindowSketch.from_bytes(want)
    for end, length in queries(back.now, 10**5, rng)[:30]:
        assert merged.estimate(as_of=end, sub_window=length) == \
            back.estimate(as_of=end, sub_window=length)


# -- damaged bytes ---------------------------------------------------------------------

# seed, rows, spread of ts, window (positions), eps, and the keys' shares. Past the exact
# limit (256 values at eps 0.2): every key's sketch compact (64); every key's exact and their
# merge compact (65); key 0 compact, the others exact, with about 70 rows a timestamp, more
# than a leaf holds at eps 0.2 (60), merged into it (66).
PERCENTILE_CASES = [(61, 3000, 5000, 1000, 0.01), (62, 800, 300, 7, 0.5), (63, 6000, 10**6, 10**5, 0.05),
                    (64, 6000, 3000, 2000, 0.2), (65, 800, 3000, 2000, 0.2),
                    (66, 1400, 3, 2000, 0.2, [0.55, 0.15, 0.15, 0.15])]


def check_compact_ranks(window_values, answers, percentages, eps, where):
    """Compact answers against the window's rows (docs/percentiles.md, compact mode): each a
    value of the window whose rank, in java.lang.Double.compare order, is within eps n of
    p n; no answer only for an empty window."""
    def key(x):
        return (True, 0.0, 0.0) if math.isnan(x) else (False, x, math.copysign(1.0, x))

    keys = sorted(key(x) for x in window_values)
    n = len(keys)
    assert (answers is None) == (n == 0), where
    for p, answer in zip(percentages, answers or []):
        below, at_most = bisect.bisect_left(keys, key(answer)), bisect.bisect_right(keys, key(answer))
        assert at_most > below and max(0.0, below - p * n, p * n - at_most) <= eps * n, (
            where, p, answer, below, at_most, n)


@pytest.mark.parametrize("case", PERCENTILE_CASES, ids=lambda c: f"w{c[3]}")
def test_percentile_sketches_answer_and_merge_as_sql_does(spark, case):
    """Per-key sketches built in SQL over values with ties, -0.0 and NaN: the reader's
    percentiles equal window_percentile_sketch_estimate's for every as_of and sub-window
    tried, and its merge of the keys' sketches writes window_percentile_sketch_merge's bytes."""
    seed, n, spread, window, eps = case[:5]
    shares = case[5] if len(case) > 5 else [0.25] * 4
    rng = np.random.default_rng(seed)
    values = np.round(rng.pareto(1.1, n) * 10) - 5
    values[rng.random(n) < 0.03] = np.nan
    values[rng.random(n) < 0.03] = -0.0
    rows = [(int(k), int(t), None if rng.random() < 0.05 else float(v))
            for k, t, v in zip(rng.choice(4, n, p=shares), rng.integers(0, spread, n), values)]
    df = spark.createDataFrame(rows, "k INT, ts BIGINT, x DOUBLE").repartition(3)
    blobs = [bytes(r.s) for r in df.groupBy("k").agg(
        F.expr(f"window_percentile_sketch(x, ts, {window}, {eps})").alias("s")).orderBy("k").collect()]
    merged_sql = bytes(spark.createDataFrame([(b,) for b in blobs], "s BINARY").coalesce(1)
                       .selectExpr("window_percentile_sketch_merge(s)").collect()[0][0])
    merged = merge_column(blobs)
    assert merged is not None and merged.to_bytes() == merged_sql
    assert [b[2] for b in blobs] + [merged_sql[2]] == {
        64: [8] * 5, 65: [4] * 4 + [8], 66: [8, 4, 4, 4, 8]}.get(seed, [4] * 5)
    percentages = "array(0.0, 0.01, 0.5, 0.99, 1.0)"
    # The merge is queried as merged, not read back: its rows must have left with the window.
    for key, blob, python in [(k, b, PercentileSketch.from_bytes(b)) for k, b in enumerate(blobs)] + [
            (None, merged_sql, merged)]:
        assert isinstance(python, PercentileSketch) and python.to_bytes() == blob
        pairs = queries(python.now, window, rng)
        for length in sorted({length for _, length in pairs}):  # sub_window is a constant
            ends = [end for end, l in pairs if l == length]
            got = spark.sql(
                f"SELECT a, window_percentile_sketch_estimate(X'{blob.hex()}', {percentages}, "
                f"a, {length}) AS e "
                f"FROM VALUES {', '.join(f'(CAST({e} AS BIGINT))' for e in ends)} AS t(a)").collect()
            assert len(got) == len(ends)
            for r in got:
                want = python.estimate([0.0, 0.01, 0.5, 0.99, 1.0], as_of=r.a, sub_window=length)
                if python.is_compact:
                    check_compact_ranks([x for k, t, x in rows if x is not None and (
                        key is None or k == key) and r.a - length < t <= r.a],
                        want, [0.0, 0.01, 0.5, 0.99, 1.0], eps, (key, r.a, length))
                assert (r.e is None and want is None) or (
                    str(r.e) == str(want) and
                    [math.copysign(1, v) for v in r.e] == [math.copysign(1, v) for v in want]), (
                    r.a, length)


@pytest.mark.parametrize("seed, window, eps", [(71, 300, 0.3), (72, 5000, 0.05)],
                         ids=["w300", "w5000"])
def test_moments_sketches_answer_and_merge_as_sql_does(spark, seed, window, eps):
    """Per-key moments sketches built in SQL over level shifts, equal runs and a mean of
    10^6: the reader's (estimate, lower, upper) of every statistic equal
    window_moments_sketch_bounds' to the last bit for every as_of and sub-window tried, and
    its merge of the keys' sketches writes window_moments_sketch_merge's bytes."""
    rng = np.random.default_rng(seed)
    n = 4000
    ts = rng.integers(0, 3 * window, n)
    values = 1e6 + np.where(ts % 700 < 350, 0.0, 40.0) + np.round(rng.normal(0, 3, n), 2)
    values[(ts > window) & (ts < 1.3 * window)] = 7.5
    rows = [(int(k), int(t), None if rng.random() < 0.05 else float(v))
            for k, t, v in zip(rng.integers(0, 4, n), ts, values)]
    df = spark.createDataFrame(rows, "k INT, ts BIGINT, x DOUBLE").repartition(3)
    blobs = [bytes(r.s) for r in df.groupBy("k").agg(
        F.expr(f"window_moments_sketch(x, ts, {window}, {eps})").alias("s")).orderBy("k").collect()]
    merged_sql = bytes(spark.createDataFrame([(b,) for b in blobs], "s BINARY").coalesce(1)
                       .selectExpr("window_moments_sketch_merge(s)").collect()[0][0])
    merged = merge_column(blobs)
    assert isinstance(merged, MomentsSketch) and merged.to_bytes() == merged_sql
    stats = ("avg", "var_pop", "var_samp", "stddev_pop", "stddev_samp")
    straddled = 0
    for blob, python in [(b, MomentsSketch.from_bytes(b)) for b in blobs] + [(merged_sql, merged)]:
        assert isinstance(python, MomentsSketch) and python.to_bytes() == blob
        pairs = queries(python.now, window, rng)
        for length in sorted({length for _, length in pairs}):  # sub_window is a constant
            ends = [end for end, l in pairs if l == length]
            got = spark.sql(
                f"SELECT a, " + ", ".join(
                    f"window_moments_sketch_bounds(X'{blob.hex()}', '{stat}', a, {length}) AS {stat}"
                    for stat in stats) +
                f" FROM VALUES {', '.join(f'(CAST({e} AS BIGINT))' for e in ends)} AS t(a)").collect()
            assert len(got) == len(ends)
            for r in got:
                for stat in stats:
                    want = python.bounds(stat, as_of=r.a, sub_window=length)
                    assert (None if r[stat] is None else tuple(r[stat])) == want, (r.a, length, stat)
                straddled += r.avg is not None and r.avg.lower < r.avg.upper
    assert straddled > 0


def test_moments_sketches_merged_into_one_without_nodes_and_after_it_write_as_sql_does(spark):
    """A union whose sketches so far hold no nodes (a sketch of NULL values first) takes the
    next sketch's nodes as they are; a sketch whose nodes all come after the union's is
    appended in runs that end where a node-by-node merge would compress. The reader's merge
    writes window_moments_sketch_merge's bytes for both."""
    window, eps = 10**6, 0.05

    def sketch(first, count):
        rows = [(t, float(t % 17) * (1 + t // 100)) for t in range(first, first + count)]
        return bytes(spark.createDataFrame(rows, "ts BIGINT, x DOUBLE").coalesce(1).selectExpr(
            f"window_moments_sketch(x, ts, {window}, {eps})").collect()[0][0])

    empty = bytes(spark.sql(
        f"SELECT window_moments_sketch(CAST(NULL AS DOUBLE), 7L, {window}, {eps})").collect()[0][0])
    early, late = sketch(0, 300), sketch(300, 1000)
    blobs = [empty, early, late, empty]
    merged_sql = bytes(spark.createDataFrame([(b,) for b in blobs], "s BINARY").coalesce(1)
                       .selectExpr("window_moments_sketch_merge(s)").collect()[0][0])
    merged = merge_column(blobs)
    assert isinstance(merged, MomentsSketch) and merged.to_bytes() == merged_sql
    nodes = [len(MomentsSketch.from_bytes(b)._nodes) for b in (early, late)]
    assert 64 < nodes[0] < nodes[1]  # the later sketch's nodes come in more than one run


TOP_K_ITEMS = {
    "string": lambda rng, n: [f"/p{int(v) % 200}" for v in rng.zipf(1.3, n)],
    "bigint": lambda rng, n: [int(v) % 300 - 150 for v in rng.zipf(1.3, n)],
    "double": lambda rng, n: [[0.0, -0.0, float("nan"), 2.5, -1e20][int(v) % 5] if v < 6
                              else float(v % 97) / 8 for v in rng.zipf(1.3, n)],
    "date": lambda rng, n: [datetime.date(2025, 1, 1) + datetime.timedelta(days=int(v) % 90)
                            for v in rng.zipf(1.3, n)],
    "timestamp": lambda rng, n: [datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc) +
                                 datetime.timedelta(seconds=int(v) % 500) for v in rng.zipf(1.3, n)],
    "decimal(10,2)": lambda rng, n: [decimal.Decimal(int(v) % 400 - 200) / 4
                                     for v in rng.zipf(1.3, n)],
}


@pytest.mark.parametrize("spark_type, window, eps", [
    *((t, 400, 0.2) for t in sorted(TOP_K_ITEMS)),
    ("string", 3000, 0.5),  # nodes of 3 counts: merges prune on every collapse
])
def test_top_k_sketches_answer_and_merge_as_sql_does(spark, spark_type, window, eps):
    """Per-key top-k sketches built in SQL: the reader's lists equal
    window_top_k_sketch_estimate's for every as_of and sub-window tried (items typed in
    Python, their CAST AS STRING in SQL), and its merge of the keys' sketches writes
    window_top_k_sketch_merge's bytes."""
    rng = np.random.default_rng(zlib.crc32(f"{spark_type} {eps}".encode()))
    n = 3000
    items = TOP_K_ITEMS[spark_type](rng, n)
    rows = [(int(k), int(t), None if rng.random() < 0.05 else x)
            for k, t, x in zip(rng.integers(0, 4, n), rng.integers(0, 3 * window, n), items)]
    df = spark.createDataFrame(rows, f"k INT, ts BIGINT, x {spark_type}").repartition(3)
    blobs = [bytes(r.s) for r in df.groupBy("k").agg(
        F.expr(f"window_top_k_sketch(x, ts, {window}, {eps})").alias("s")).orderBy("k").collect()]
    merged_sql = bytes(spark.createDataFrame([(b,) for b in blobs], "s BINARY").coalesce(1)
                       .selectExpr("window_top_k_sketch_merge(s)").collect()[0][0])
    merged = merge_column(blobs)
    assert isinstance(merged, TopKSketch) and merged.to_bytes() == merged_sql
    answers = []
    for blob, python in [(b, TopKSketch.from_bytes(b)) for b in blobs] + [(merged_sql, merged)]:
        assert isinstance(python, TopKSketch) and python.to_bytes() == blob
        pairs = queries(python.now, window, rng)
        for length in sorted({length for _, length in pairs}):  # sub_window is a constant
            ends = [end for end, l in pairs if l == length]
            got = spark.sql(
                f"SELECT a, window_top_k_sketch_estimate(X'{blob.hex()}', 5, a, {length}) AS top "
                f"FROM VALUES {', '.join(f'(CAST({e} AS BIGINT))' for e in ends)} AS t(a)").collect()
            for r in got:
                answers.append(([(c.item, c["count"], c.lower, c.upper) for c in r.top],
                                python.top(5, as_of=r.a, sub_window=length)))
    # The Python items, as Spark writes them as text.
    typed = [c.item for _, python in answers for c in python]
    text = [r[0] for r in spark.createDataFrame([(x,) for x in typed], f"x {spark_type}")
            .selectExpr("CAST(x AS STRING)").collect()]
    at = 0
    for sql, python in answers:
        assert sql == [(t, c.count, c.lower, c.upper) for t, c in zip(text[at:], python)]
        at += len(python)
    assert any(c.lower < c.upper for _, python in answers for c in python)


def test_a_nan_with_its_sign_bit_set_ranks_as_in_sql(spark):
    from test_percentile_reader import negative_nan_sketch

    blob = negative_nan_sketch()
    got = spark.sql(f"SELECT window_percentile_sketch_estimate(X'{blob.hex()}', "
                    "array(0.0, 1.0))").collect()[0][0]
    want = PercentileSketch.from_bytes(blob).estimate([0.0, 1.0])
    assert got[0] == want[0] == 5.0 and math.isnan(got[1]) and math.isnan(want[1])


def java_message(message: str) -> str:
    """A JVM message with its doubles written as Python writes them (1.0E-5 -> 1e-05)."""
    return re.sub(r"(?<=eps=|rsd=|fpp=)\S+|(?<=invalid invariant parameter )\S+|"
                  r"(?<=invalid collapse parameter )\S+",
                  lambda m: repr(float(m.group(0).rstrip(","))) +
                  ("," if m.group(0).endswith(",") else ""), message)


def percentile_blob(sketches, seed: int, n: int, eps: float, nan_bits=(CANONICAL_NAN,)) -> bytes:
    """A percentile sketch of n gamma-distributed values, a few of them NaN (each with one
    of `nan_bits`), at times 0..400 in a window of 500: exact (kind 4) while n is within
    eps's exact limit, compact (kind 8) past it."""
    rng = np.random.default_rng(seed)
    bits = np.round(rng.gamma(2.0, 30.0, n), 1).astype(">f8").view(">u8")
    nan = np.flatnonzero(rng.random(n) < 0.05)
    bits[nan] = np.array(nan_bits, dtype=">u8")[np.arange(len(nan)) % len(nan_bits)]
    s = sketches.replay.quantileSketch(500, eps, False, longs(np.sort(rng.integers(0, 400, n))),
                                       bits.tobytes())
    return bytes(sketches.format.serializeQuantiles(s))


def with_eps(blob: bytes, eps: float) -> bytes:
    """The same sketch bytes labelled with another eps (a sketch written under a larger exact
    limit than today's), signed again."""
    _, at = read_varint(blob, 3)
    return sign(blob[:at] + np.array([eps], dtype=">f8").tobytes() + blob[at + 8:-4])


def test_percentile_sketches_turn_compact_one_value_past_the_exact_limit(sketches):
    """At eps 0.25 the exact limit is 256 values (the largest power of two at most 64 / eps):
    in both readers a window of 256 values stays exact (kind 4) when added, read and
    written, and merged from 128 + 128; one more value, in any of these, writes kind 8,
    the same bytes from both readers. Bytes of 256 values labelled eps 0.5 (limit 128),
    as a build with a larger limit wrote them, read and are written back compact."""
    eps, window = 0.25, 10**6

    def jvm(values, start=0):
        return sketches.replay.quantileSketch(window, eps, False, longs(np.arange(start, start + len(values))),
                                              np.asarray(values, dtype=">f8").tobytes())

    def written(sketch) -> bytes:
        return bytes(sketches.format.serializeQuantiles(sketch))

    rng = np.random.default_rng(67)
    values = np.round(rng.gamma(2.0, 30.0, 257), 1)
    kinds = {}
    for n in (256, 257):
        blob = written(jvm(values[:n]))
        python = PercentileSketch.from_bytes(blob)
        read_back = written(sketches.format.deserializeQuantiles(blob))
        assert python.to_bytes() == read_back == blob
        older, newer = jvm(values[:128]), jvm(values[128:n], start=128)
        older.merge(newer)
        merged = written(older)
        python_merged = PercentileSketch.from_bytes(written(jvm(values[:128]))).merge(
            PercentileSketch.from_bytes(written(jvm(values[128:n], start=128))))
        assert python_merged.to_bytes() == merged
        kinds[n] = (blob[2], merged[2])
    assert kinds == {256: (4, 4), 257: (8, 8)}
    relabelled = with_eps(written(jvm(values[:256])), 0.5)
    from_jvm = written(sketches.format.deserializeQuantiles(relabelled))
    assert from_jvm[2] == 8 and PercentileSketch.from_bytes(relabelled).to_bytes() == from_jvm


def test_compact_percentile_damage_behind_a_valid_checksum_gets_both_refusals(sketches):
    """Kind 8's checks behind the checksum, each reached by one change: values out of order
    in a level, a NaN with other bits (each NaN is held as the canonical one, so equal
    states write equal bytes), a node whose row total is not its values' weight."""
    blob = percentile_blob(sketches, 65, 600, 0.2)
    body = blob[:-4]
    nodes = compact_quantile_values(blob)
    value = lambda at: body[at:at + 8]  # noqa: E731
    cases = {}
    for i, levels in enumerate(nodes):
        for at, size, total_at in levels:
            if size >= 2 and value(at) != value(at + 8) and "values out of order" not in cases:
                cases["values out of order"] = (i, body[:at] + value(at + 8) + value(at) + body[at + 16:])
            if size and value(at + 8 * (size - 1)) == CANONICAL_NAN.to_bytes(8, "big"):
                last = at + 8 * (size - 1)
                cases["NaN"] = (i, body[:last] + bytes.fromhex("7ff8000000000001") + body[last + 8:])
        total, end = read_varint(body, levels[0][2])
        if len(varint(total + 1)) == end - levels[0][2]:
            cases.setdefault("total", (i, body[:levels[0][2]] + varint(total + 1) + body[end:]))
    assert set(cases) == {"values out of order", "NaN", "total"}, set(cases)
    messages = {"values out of order": "values out of order at node {}",
                "NaN": "values out of order at node {}", "total": "invalid values at node {}"}
    damaged = [sign(changed) for _, changed in cases.values()]
    for (name, (node, _)), blob_, verdict in zip(cases.items(), damaged,
                                                 sketches.verdicts("percentile", damaged)):
        message = messages[name].format(node)
        assert verdict == f"invalid sketch bytes: {message}", name
        with pytest.raises(InvalidSketchBytes, match=f"^invalid sketch bytes: {message}$"):
            PercentileSketch.from_bytes(blob_)
    assert sketches.verdicts("percentile", [blob]) == ["read"]
    assert PercentileSketch.from_bytes(blob).to_bytes() == blob


def test_nans_of_any_bits_make_compact_bytes_both_readers_read(sketches):
    quiet, negative = 0x7FF8000000000001, 0xFFF8000000000000
    blob = percentile_blob(sketches, 66, 600, 0.2, nan_bits=(quiet, negative))
    assert blob[2] == 8
    assert sketches.verdicts("percentile", [blob]) == ["read"]
    assert PercentileSketch.from_bytes(blob).to_bytes() == blob


def test_damaged_bytes_with_a_matching_checksum_get_the_jvms_verdict(spark, sketches):
    """Random byte changes behind a recomputed checksum: the structure is all that is left
    to catch them. Python refuses exactly what the JVM refuses, with its message, and reads
    the rest to the same bytes."""
    rng = np.random.default_rng(61)
    h = sketches.new(100, 0.2)
    ts = np.sort(rng.integers(0, 300, 400))
    sketches.replay.insertAll(h, longs(ts), (rng.random(400) < 0.5).astype(np.uint8).tobytes())
    moments = sketches.replay.momentsSketch(
        200, 0.3, False, longs(np.sort(rng.integers(0, 300, 400))),
        np.round(rng.normal(50, 10, 400), 1).astype(">f8").tobytes())
    top_k = sketches.replay.topKSketch(200, 0.3, False, longs(np.sort(rng.integers(0, 300, 400))),
                                       longs(rng.integers(0, 12, 400)))
    filter_blob = bytes(spark.range(300).selectExpr("id % 97 AS x", "id * 3 AS ts").coalesce(1)
                        .selectExpr("window_filter_sketch(x, ts, 400, 0.2)").first()[0])
    fmt = sketches.format
    counts = ("count", fmt.deserialize, fmt.serialize, CountSketch)
    # Each source is read back by its family's readers, which name a changed kind byte.
    sources = [(bytes(fmt.serialize(h)), *counts),
               *((blob, *counts) for blob in partials(sketches, 62, 2, 600, 1000, 0.1, 3000)),
               (distinct_blob(sketches, 63, 300, 100, 500, 100, 0.3), "distinct",
                fmt.deserializeDistinct, fmt.serializeDistinct, DistinctSketch),
               (distinct_blob(sketches, 64, 60, 10**6, 500, 400, 0.05), "distinct",
                fmt.deserializeDistinct, fmt.serializeDistinct, DistinctSketch),
               (bytes(fmt.serializeMoments(moments)), "moments", fmt.deserializeMoments,
                fmt.serializeMoments, MomentsSketch),
               (bytes(fmt.serializeTopK(top_k)), "top_k", fmt.deserializeTopK, fmt.serializeTopK,
                TopKSketch),
               (filter_blob, "filter", fmt.deserializeFilter, fmt.serializeFilter, FilterSketch),
               *((percentile_blob(sketches, 65 + compact, 600 if compact else 150,
                                  0.2 if compact else 0.01), "percentile",
                  fmt.deserializeQuantiles, fmt.serializeQuantiles, PercentileSketch)
                 for compact in (0, 1))]
    assert {3, 7} <= {source[0][2] for source in sources}, "both distinct kinds"
    assert {4, 8} <= {source[0][2] for source in sources}, "both percentile kinds"
    damaged: dict[str, list] = {}  # per JVM reader: (blob, source)
    for trial in range(2000):
        source = sources[trial % len(sources)]
        body = bytearray(source[0][:-4])
        for _ in range(int(rng.integers(1, 3))):
            at = int(rng.integers(2, len(body)))
            body[at] = int(rng.integers(0, 256)) if rng.random() < 0.5 else body[at] ^ 1
        blob = bytes(body) + zlib.crc32(body).to_bytes(4, "big")
        damaged.setdefault(source[1], []).append((blob, source))
    verdicts = {"refused": 0, "read": 0}
    for reader, blobs in damaged.items():
        # The JVM's verdicts in one call per reader; any exception but a refusal fails here.
        jvm_verdicts = sketches.verdicts(reader, [blob for blob, _ in blobs])
        assert "read" in jvm_verdicts and len(set(jvm_verdicts)) > 3, (reader, set(jvm_verdicts))
        for (blob, (_, _, read, write, family)), verdict in zip(blobs, jvm_verdicts):
            if verdict != "read":
                with pytest.raises(InvalidSketchBytes) as refused:
                    family.from_bytes(blob)
                assert str(refused.value) == java_message(verdict)
                verdicts["refused"] += 1
                continue
            python = family.from_bytes(blob)
            assert python.to_bytes() == bytes(write(read(blob)))
            verdicts["read"] += 1
    assert verdicts["refused"] > 700 and verdicts["read"] > 50, verdicts


def write_tables(spark) -> None:
    """Rewrites python/windowsketch/_hllpp_tables.py from this Spark's tables."""
    tables = spark_bias_tables(spark)

    def rows(name: str) -> str:
        out = [f"{name}: tuple[tuple[float, ...], ...] = ("]
        for p, row in enumerate(tables[name], start=4):
            out.append(f"    # precision {p}")
            out.extend(textwrap.wrap("(" + ", ".join(repr(x) for x in row) + "),", width=95,
                                     initial_indent="    ", subsequent_indent="     "))
        return "\n".join(out + [")"])
    with open(os.path.join(ROOT, "python", "windowsketch", "_hllpp_tables.py"), "w") as f:
        f.write(f'''"""HyperLogLog++ bias-correction data for precisions 4 to 14, as Apache Spark's
``HyperLogLogPlusPlusHelper`` ships it (from the appendix of Heule, Nunkesser and Hall,
"HyperLogLog in Practice", EDBT 2013), so distinct-count sketches estimate in Python exactly
as ``approx_count_distinct`` does in Spark.

Generated from the JVM by ``python tests/python/test_sketch_jvm.py --write-tables``;
``tests/python/test_sketch_jvm.py`` checks it still equals Spark's. Do not edit.
"""

#: Linear counting is used below these raw estimates (index: precision - 4).
THRESHOLDS: tuple[float, ...] = ({", ".join(repr(x) for x in tables["THRESHOLDS"])})

#: Neighbours averaged for the bias of a raw estimate.
K = {tables["K"]}

{rows("RAW_ESTIMATE_DATA")}

{rows("BIAS_DATA")}
''')


if __name__ == "__main__" and sys.argv[1:] == ["--write-tables"]:
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false") \
        .getOrCreate()
    write_tables(session)
    session.stop()

