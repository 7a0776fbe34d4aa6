"""approx_window_sample against the sample its window's rows define, on every output: each
row's frame comes from Spark's own collect_list over the same frame, and the k
highest-priority rows of its window are recomputed in Python from the rows alone
(``sample_reference``), in running, sliding, whole-partition and descending frames and in
GROUP BY over shuffled partitions; then value types, time windows, uniformity over many
groups and the errors."""
from __future__ import annotations

import datetime
import decimal
import json
import os

import numpy as np
import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from conftest import error_condition, parameter_index, stable_seed
from golden_sketches import (GOLDEN, golden_item_view, golden_rows, golden_top_k_items,
                             rewrite_golden)
from sample_reference import expected_sample, with_a_dominated_row
from test_percentiles import FRAMES
from windowsketch.functions import (approx_window_sample, window_sample_sketch,
                                    window_sample_sketch_merge)
from windowsketch.sketch import InvalidSketchBytes, SampleSketch, WindowSketch, merge_column
from windowsketch.sketch.sample import priority as sample_priority

K = 3
WINDOW = 40


def rows(rng, kind, n):
    """(id, key, ts, x) rows that stress the window's edge: bursts and gaps, rows equal in
    time and value (drawn together), a strictly monotone run, all distinct; NULL values and
    NULL times."""
    steps = {
        "bursts": np.where(rng.random(n) < 0.1, rng.integers(10, 60, n), rng.integers(0, 3, n)),
        "duplicates": rng.integers(0, 2, n),
        "monotone": np.ones(n, dtype=np.int64),
        "distinct": rng.integers(0, 4, n),
    }[kind]
    ts = np.cumsum(steps)
    x = {
        "bursts": [f"/b{int(v)}" for v in rng.integers(0, 30, n)],
        "duplicates": [f"/d{int(v)}" for v in rng.integers(0, 3, n)],
        "monotone": [f"/m{int(v)}" for v in rng.integers(0, 1000, n)],
        "distinct": [f"/u{i}" for i in range(n)],
    }[kind]
    return [(i, f"k{i % 3}", None if rng.random() < 0.02 else int(ts[i]),
             None if rng.random() < 0.1 else x[i]) for i in range(n)]


KINDS = ["bursts", "duplicates", "monotone", "distinct"]


@pytest.mark.parametrize("frame", sorted(FRAMES))
@pytest.mark.parametrize("kind", KINDS)
def test_every_row_is_its_windows_sample_in_every_frame(spark, kind, frame):
    rng = np.random.default_rng(stable_seed("sample-frames", kind, frame))
    spark.createDataFrame(rows(rng, kind, 900), "id INT, key STRING, ts BIGINT, x STRING") \
        .repartition(3).createOrReplaceTempView("sample_rows")
    over = f"OVER ({FRAMES[frame]})"
    got = spark.sql(f"""
        SELECT approx_window_sample(x, ts, {WINDOW}, {K}) {over} AS ours,
               approx_window_sample(x, ts, {WINDOW}, {K}, -7) {over} AS seeded,
               collect_list(struct(ts, x)) {over} AS frame
        FROM sample_rows""").collect()
    full = partial = 0
    for r in got:
        assert r.ours == expected_sample(r.frame, WINDOW, K), r.frame
        assert r.seeded == expected_sample(r.frame, WINDOW, K, seed=-7), r.frame
        full += len(r.ours) == K
        partial += 0 < len(r.ours) < K
    assert len(got) == 900 and full > 300
    if frame != "whole-partition":
        assert partial > 0  # windows of fewer than k rows give them all


@pytest.mark.parametrize("kind", KINDS)
def test_group_by_over_shuffled_partitions_gives_the_running_frames_last_sample(spark, kind):
    rng = np.random.default_rng(stable_seed("sample-group-by", kind))
    data = [(i, f"g{int(rng.integers(0, 20))}", t, x) for i, _, t, x in rows(rng, kind, 6000)]
    df = spark.createDataFrame(data, "id INT, key STRING, ts BIGINT, x STRING")
    window = 1500
    grouped = (df.repartition(7, "id").groupBy("key")
               .agg(approx_window_sample("x", "ts", window, 5).alias("sample"),
                    F.collect_list(F.struct("ts", "x")).alias("frame"))
               .collect())
    w = Window.partitionBy("key").orderBy("ts")
    running = {r.key: r.sample for r in df.select(
        "key", "ts", approx_window_sample("x", "ts", window, 5).over(w).alias("sample"),
        F.row_number().over(w.orderBy(F.desc_nulls_last("ts"))).alias("last"))
        .where("last = 1").collect()}
    assert len(grouped) == 20
    for r in grouped:
        assert len(r.sample) == 5
        assert r.sample == expected_sample(r.frame, window, 5), r.key
        assert r.sample == running[r.key], r.key


def test_values_of_any_type_and_time_windows(spark):
    """Structs sample whole rows, other types come back as they went in, and a time window
    [now - w, now] holds its first microsecond: every value is a row of its window, there
    are min(k, n) of them, and GROUP BY draws the running frame's last sample."""
    base = datetime.datetime(2025, 1, 1, 10)
    data = [(i, base + datetime.timedelta(minutes=i // 2), f"/p{i % 7}", 200 + i % 3,
             decimal.Decimal(i) / 4, [i, i + 1], datetime.date(2025, 1, 1 + i % 3))
            for i in range(60)]
    df = spark.createDataFrame(
        data, "id INT, t TIMESTAMP, url STRING, status INT, price DECIMAL(10,2), "
              "pair ARRAY<INT>, d DATE")
    row = F.struct("id", "url", "status", "price", "pair", "d")
    w = Window.orderBy("t", "id").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    got = df.select("id", "t", approx_window_sample(row, "t", "10 minutes", 4).over(w).alias("s"),
                    F.collect_list(F.struct("t", row.alias("x"))).over(w).alias("frame")) \
        .collect()
    for r in got:
        inside = [f.x for f in r.frame if f.t >= r.t - datetime.timedelta(minutes=10)]
        assert len(r.s) == min(4, len(inside))
        assert all(v in inside for v in r.s) and len(set(v.id for v in r.s)) == len(r.s)
        assert [v.id for v in r.s] == sorted(v.id for v in r.s)  # oldest first
    # 10:19:30 is the last row; [10:09:30, 10:19:30] holds rows from 10:10 on (ids 20-59)
    # and no row of 10:09.
    assert len({v.id for r in got for v in r.s if r.id == 59} - set(range(20, 60))) == 0
    grouped = df.groupBy().agg(approx_window_sample(row, "t", "10 minutes", 4).alias("s")).first()
    assert grouped.s == got[-1].s
    assert type(got[-1].s[0].price) is decimal.Decimal and type(got[-1].s[0].d) is datetime.date


def test_each_row_is_drawn_equally_often(spark):
    """Uniformity: 3,000 groups of the same 30 positions, each group's values distinct (so
    its priorities are independent of the others'), a window of the last 20 positions and
    k = 5; then one window under 120 seeds. Each of those 20 positions must be drawn in about a quarter of the groups and
    the 10 expired ones never; a chi-square over the 20 counts against 750 each, at a
    false-failure probability below 10^-6 (the statistic of a sample without replacement
    is at most a chi-square of 19 degrees of freedom scaled by 1 - 5/20)."""
    groups, positions, window, k = 3000, 30, 20, 5
    got = spark.range(groups * positions).selectExpr(
        f"id DIV {positions} AS g", f"id % {positions} + 1 AS pos").groupBy("g").agg(
        approx_window_sample(F.struct("g", "pos"), "pos", window, k).alias("s")).collect()
    drawn = np.zeros(positions + 1, dtype=np.int64)
    for r in got:
        assert len(r.s) == k
        for v in r.s:
            drawn[v.pos] += 1
    assert drawn[:positions - window + 1].sum() == 0
    counts = drawn[positions - window + 1:]
    expected = groups * k / window
    statistic = float(((counts - expected) ** 2 / expected).sum())
    # P(chi2(19) > 60) < 10^-6: the survival function at 60 is about 3.9e-6 for 19 degrees;
    # 66 is below 4e-7. The scaled statistic's mean is 19 * 0.75.
    assert statistic < 66.0, (statistic, counts.tolist())
    assert statistic > 1.0, (statistic, counts.tolist())  # not suspiciously even
    # The same over seeds: one window of 20 rows, 120 seeds in one query, k = 5 (30 draws
    # of each row expected; the same chi-square bound).
    seeds = 120
    row = spark.range(20).selectExpr("id AS pos").agg(*(
        approx_window_sample("pos", "pos", 20, 5, seed).alias(f"s{seed}") for seed in range(seeds))).first()
    by_seed = np.bincount([v for sample in row for v in sample], minlength=20)
    assert all(len(sample) == 5 for sample in row)
    statistic = float(((by_seed - seeds * 5 / 20) ** 2 / (seeds * 5 / 20)).sum())
    assert 1.0 < statistic < 66.0, (statistic, by_seed.tolist())


def test_seeds_draw_different_samples_and_equal_rows_go_together(spark):
    df = spark.range(200).selectExpr("id AS ts", "id % 50 AS x")
    seeds = {tuple(df.groupBy().agg(approx_window_sample("x", "ts", 200, 5, seed).alias("s"))
                   .first().s) for seed in range(6)}
    assert len(seeds) == 6
    # 40 rows at one time with 2 values: each value's copies share one priority.
    twins = spark.range(40).selectExpr("0 AS ts", "CAST(id % 2 AS STRING) AS x")
    sample = twins.groupBy().agg(approx_window_sample("x", "ts", 10, 25).alias("s")).first().s
    assert sorted(set(sample)) == ["0", "1"] and len(sample) == 25
    assert abs(sample.count("0") - sample.count("1")) == 15  # one value's 20 copies, then 5


def check_refused(spark, query, condition, parameters):
    with pytest.raises(Exception) as e:
        spark.sql(query).collect()
    assert error_condition(e.value) == condition, str(e.value)
    for p in parameters:
        assert p in str(e.value), (p, str(e.value))


@pytest.mark.parametrize("call, condition, parameters", [
    ("approx_window_sample(x, ts, 10, 0)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", ["`k`", "[1, 10000]"]),
    ("approx_window_sample(x, ts, 10, 10001)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", ["`k`"]),
    ("approx_window_sample(x, ts, 10, ts)", "DATATYPE_MISMATCH.NON_FOLDABLE_INPUT", ["`k`"]),
    ("approx_window_sample(x, ts, 10, CAST(NULL AS INT))", "DATATYPE_MISMATCH.UNEXPECTED_NULL", ["`k`"]),
    ("approx_window_sample(x, ts, 10, 2.5)", "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT", ["`k`"]),
    ("approx_window_sample(x, ts, 10, 2, 0.5)", "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT", ["`seed`"]),
    ("approx_window_sample(x, ts, 10, 2, ts)", "DATATYPE_MISMATCH.NON_FOLDABLE_INPUT", ["`seed`"]),
    ("approx_window_sample(x, ts, 10, 2, CAST(NULL AS BIGINT))", "DATATYPE_MISMATCH.UNEXPECTED_NULL", ["`seed`"]),
    ("approx_window_sample(map(x, ts), ts, 10, 2)", "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE",
     [parameter_index(0), "MAP"]),
    ("approx_window_sample(x, ts, 0, 2)", "DATATYPE_MISMATCH.VALUE_OUT_OF_RANGE", ["`window`"]),
    ("approx_window_sample(x, ts, INTERVAL 1 HOUR, 2)", "DATATYPE_MISMATCH.TYPE_CHECK_FAILURE_WITH_HINT",
     ["`window`"]),
    ("approx_window_sample(x, x, 10, 2)", "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE", [parameter_index(1)]),
])
def test_bad_arguments_are_refused_naming_the_argument(spark, call, condition, parameters):
    check_refused(spark, f"SELECT {call} FROM VALUES ('a', 1L) AS t(x, ts)", condition, parameters)


def test_python_arguments_are_checked_before_spark(spark):
    for bad in (dict(k=True), dict(k=2.0), dict(k=2, seed="1"), dict(k=2, seed=1.5)):
        with pytest.raises(TypeError):
            approx_window_sample("x", "ts", 10, **bad)
    with pytest.raises(TypeError):
        approx_window_sample(1, "ts", 10, 2)


def test_stored_sketches_merged_in_any_shape_give_every_windows_sample(spark):
    """Sketches per key and period, merged in SQL and by the Python reader (the same bytes),
    answer every (k, as_of, sub_window) with the sample of exactly that window's rows."""
    rng = np.random.default_rng(stable_seed("sample-columns"))
    data = rows(rng, "bursts", 3000)
    df = spark.createDataFrame(data, "id INT, key STRING, ts BIGINT, x STRING")
    window, k = 400, 6
    parts = (df.repartition(5, "id").groupBy("key", F.floor(F.col("ts") / 150).alias("period"))
             .agg(window_sample_sketch("x", "ts", window, k, 3).alias("s")))
    merged = bytes(parts.agg(window_sample_sketch_merge("s")).first()[0])
    assert merged == bytes(df.coalesce(1).agg(window_sample_sketch("x", "ts", window, k, 3))
                           .first()[0])
    python_merged = merge_column([bytes(r.s) for r in parts.collect()])
    assert isinstance(python_merged, SampleSketch) and python_merged.to_bytes() == merged
    frame = [{"ts": t, "x": x} for _, _, t, x in data]
    now = max(t for _, _, t, _ in data if t is not None)
    queries = [(k, None, None), (2, None, None), (k, now + 100, None), (4, now, 50),
               (k, now + 390, 400), (1, now + 5, 1)]
    for count, as_of, sub in queries:
        args = [f"{count}"] + ([] if as_of is None else [f"{as_of}L"]) + (
            [] if sub is None else [f"{sub}L"])
        got = spark.sql(f"SELECT window_sample_sketch_get(X'{merged.hex()}', "
                        f"{', '.join(args)})").first()[0]
        want = expected_sample(frame, sub or window, count, seed=3, end=as_of)
        assert got == want, (count, as_of, sub)
        assert python_merged.sample(count, as_of, sub) == want, (count, as_of, sub)
    assert spark.sql(f"SELECT window_sample_sketch_get(X'{merged.hex()}')").first()[0] == \
        expected_sample(frame, window, k, seed=3)


def test_sketch_columns_refuse_what_they_cannot_answer(spark):
    s = bytes(spark.sql("SELECT window_sample_sketch(x, ts, 10, 3) FROM VALUES ('a', 5L), "
                        "('b', 6L) AS t(x, ts)").first()[0])
    other = bytes(spark.sql("SELECT window_sample_sketch(x, ts, 10, 3, 1) FROM VALUES "
                            "('a', 5L) AS t(x, ts)").first()[0])
    top_k = bytes(spark.sql("SELECT window_top_k_sketch(x, ts, 10) FROM VALUES ('a', 5L) "
                            "AS t(x, ts)").first()[0])
    full = bytes(spark.sql("SELECT window_sample_sketch(x, ts, 10, 3) FROM VALUES ('a', 5L), "
                           "('b', 6L), ('c', 7L), ('d', 8L), ('e', 8L) AS t(x, ts)").first()[0])
    dominated = with_a_dominated_row(WindowSketch.from_bytes(full))
    cases = {
        f"window_sample_sketch_get(X'{s.hex()}', 4)": "k 4 is larger than the sketch's k (3)",
        f"window_sample_sketch_get(X'{s.hex()}', 2, 5L)": "as_of (5) is earlier than the sketch's",
        f"window_sample_sketch_get(X'{s.hex()}', 2, 7L, 11L)": "is longer than the sketch's window",
        f"window_sample_sketch_get(X'{top_k.hex()}')":
            "a top-k sketch (window_top_k_sketch) is not a sample sketch (window_sample_sketch)",
        f"window_sample_sketch_get(X'{s[:-1].hex()}')": "checksum mismatch",
        f"window_sample_sketch_get(X'{dominated.hex()}')":
            "invalid sketch bytes: 1 rows are expired, dominated or repeated",
        f"window_sample_sketch_merge(s) FROM VALUES (X'{s.hex()}'), (X'{other.hex()}') AS t(s)":
            "cannot merge sample sketches",
    }
    for call, message in cases.items():
        with pytest.raises(Exception) as e:
            spark.sql(f"SELECT {call}").collect()
        assert message in str(e.value), (call, str(e.value)[:500])
        name = call.split("(")[0]
        assert f"{name}: " in str(e.value), (call, str(e.value)[:500])


def test_a_value_that_is_not_a_binary_row_of_its_type_is_refused_not_read(spark):
    """A sketch column's values are read with Spark's unchecked offsets, so bytes whose
    string points outside them (a valid checksum: written by hand) are refused first, by
    the SQL functions and the Python reader alike."""
    s = bytes(spark.sql("SELECT window_sample_sketch(x, ts, 10, 3) FROM VALUES ('abc', 5L) "
                        "AS t(x, ts)").first()[0])
    sketch = WindowSketch.from_bytes(s)
    (ts, value), = sketch.sample_bytes()
    bad = value[:8] + ((1 << 40) | 3).to_bytes(8, "little") + value[16:]  # offset 256
    forged = sketch._copy()
    forged._rows = [forged._rows[0]._replace(value=bad, priority=sample_priority(0, ts, bad))]
    blob = forged.to_bytes()
    for function in ("window_sample_sketch_get", "window_sample_sketch_merge"):
        with pytest.raises(Exception) as e:
            spark.sql(f"SELECT {function}(s) FROM VALUES (X'{blob.hex()}') AS t(s)").collect()
        assert f"{function}: invalid sketch bytes: a value is not a binary row of string" in \
            str(e.value), str(e.value)[:500]
    with pytest.raises(InvalidSketchBytes, match="a value is not a binary row of its type"):
        WindowSketch.from_bytes(blob).sample()


# Golden sample sketches (format kind 10), read on every line and by the Python reader
# (tests/python/test_sample_reader.py). `python tests/spark/test_sample.py` rewrites them;
# the tests never do.
SAMPLE_GOLDEN = os.path.join(GOLDEN, "sample")


def golden_sample_bytes(spark) -> dict[str, bytes]:
    """name -> bytes, from the golden rows in one partition, in order: strings over time,
    positions merged from two keys' partials, whole rows as structs, and an empty sketch."""
    golden_item_view(spark, "golden_sample_rows")

    def one(query: str) -> bytes:
        return bytes(spark.sql(query).collect()[0][0])

    return {
        "time": one("SELECT window_sample_sketch(x, ts, INTERVAL 1 DAY, 5) FROM golden_sample_rows"),
        "positions_merged": one(
            "SELECT window_sample_sketch_merge(s) FROM (SELECT /*+ COALESCE(1) */ key, "
            "window_sample_sketch(pos * 7, pos, 1000, 8, 42) AS s FROM golden_sample_rows "
            "WHERE key > 0 GROUP BY key ORDER BY key)"),
        "struct": one(
            "SELECT window_sample_sketch(struct(pos, x, array(key, NULL) AS a, "
            "CAST(pos AS DECIMAL(24, 2)) / 3 AS d, date_from_unix_date(CAST(pos AS INT)) AS day), "
            "pos, 500, 4, -1) FROM golden_sample_rows"),
        "empty": one("SELECT window_sample_sketch(x, pos, 10, 3) FROM golden_sample_rows WHERE false"),
    }


GOLDEN_SAMPLE_QUERIES = ["", ", 2", ", 3, {end} + 200", ", 2, {end}, {sub}"]


def golden_sample_answers(spark, data: bytes) -> list:
    """The sketch's samples at its own window, 2 of it, 200 later, and a short sub-window."""
    sketch = WindowSketch.from_bytes(data)
    end = f"TIMESTAMP '{sketch.now:%Y-%m-%d %H:%M:%S}'" if sketch.time_unit == "microseconds" \
        else str(sketch.now or 0)
    shift = "INTERVAL 200 SECONDS" if sketch.time_unit == "microseconds" else "200"
    sub = "INTERVAL 1 HOUR" if sketch.time_unit == "microseconds" else "50"
    calls = [q.replace("{end} + 200", f"{end} + {shift}").format(end=end, sub=sub)
             for q in GOLDEN_SAMPLE_QUERIES]
    if sketch.now is None:  # the empty sketch: its own window only
        calls = calls[:2]
    row = spark.sql("SELECT " + ", ".join(f"window_sample_sketch_get(X'{data.hex()}'{c})"
                                          for c in calls)).collect()[0]
    return [list(answer) for answer in row]


def test_golden_sample_sketches_read_answer_and_rewrite_as_recorded(spark):
    with open(os.path.join(SAMPLE_GOLDEN, "answers.json")) as f:
        recorded = json.load(f)
    written = golden_sample_bytes(spark)
    assert sorted(recorded["sketches"]) == sorted(written) == sorted(
        f[:-4] for f in os.listdir(SAMPLE_GOLDEN) if f.endswith(".bin"))
    for name, today in written.items():
        with open(os.path.join(SAMPLE_GOLDEN, f"{name}.bin"), "rb") as f:
            stored = f.read()
        assert stored[2] == 10 and stored == today, name
        assert golden_sample_answers(spark, stored) == recorded["sketches"][name], name
    # The answers are samples of their windows: rows of it, min(k, n) of them.
    keys, pos, _ = golden_rows()
    items = golden_top_k_items(pos)
    last_day = {x for x, p in zip(items, pos) if p >= pos.max() - 86_400 // 30}
    assert len(recorded["sketches"]["time"][0]) == 5 and set(recorded["sketches"]["time"][0]) <= last_day
    merged = {str(7 * int(p)) for k, p in zip(keys, pos) if k > 0 and p > pos[keys > 0].max() - 1000}
    assert len(recorded["sketches"]["positions_merged"][0]) == 8
    assert set(recorded["sketches"]["positions_merged"][0]) <= merged
    assert recorded["sketches"]["empty"] == [[], []]


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    import windowsketch

    session = windowsketch.configure(SparkSession.builder.master("local[1]")).getOrCreate()
    rewrite_golden(SAMPLE_GOLDEN, golden_sample_bytes(session),
                   lambda data: golden_sample_answers(session, data), session.version)
