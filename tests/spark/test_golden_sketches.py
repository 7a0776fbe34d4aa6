"""Stored sketch columns survive upgrades: committed sketch bytes (tests/golden/) read, merge
and answer the same on every Spark line, and every line writes the same bytes from the same
rows. Since each line reproduces the committed bytes and reads them, bytes written on one
line read on every other (3.5 to 4.3 and back).

The files are written by this module (`python tests/spark/test_golden_sketches.py`) only
when the format version changes; old files must then still read.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")
ANSWERS = os.path.join(GOLDEN, "answers.json")

MAX_TS = "(SELECT max(ts) FROM rows)"
MAX_POS = "(SELECT max(pos) FROM rows)"
TIME_QUERIES = [(None, None), (f"{MAX_TS} + INTERVAL 2 HOURS", None),
                (MAX_TS, "INTERVAL 1 HOUR"), (f"{MAX_TS} + INTERVAL 6 HOURS", "INTERVAL 12 HOURS")]

# name -> (the rows, the aggregate over them, the (as_of, sub_window) queries recorded; None
# is "not given"). Rows come from fixed seeds, in a single partition, so the aggregate sees
# them in the same order, and writes the same bytes, on every run.
SKETCHES = {
    "positions": ("rows", "window_sketch(v, pos, 1000, 0.05)",
                  [(None, None), (f"{MAX_POS} + 300", None), (MAX_POS, "100"),
                   (f"{MAX_POS} + 600", "800")]),
    "time": ("rows", "window_sketch(v, ts, INTERVAL 1 DAY, 0.01)", TIME_QUERIES),
    # Keys 1 and 2 only: test_stored_sketches_merge_with_new_ones adds key 0.
    "merged": ("(SELECT key, window_sketch(v, ts, INTERVAL 1 DAY, 0.01) AS s FROM rows "
               "WHERE key > 0 GROUP BY key)", "window_sketch_merge(s)", TIME_QUERIES),
    "empty": ("rows WHERE false", "window_sketch(v, pos, 10)",
              [(None, None), ("CAST(5 AS BIGINT)", None)]),
    "one_event": ("(SELECT true AS v, CAST(17 AS BIGINT) AS pos)", "window_sketch(v, pos, 5)",
                  [(None, None), ("CAST(21 AS BIGINT)", None), ("CAST(22 AS BIGINT)", None)]),
    "node_cap": ("(SELECT id % 3 = 0 AS v, id * 7 AS pos FROM range(0, 300000, 1, 1))",
                 "window_sketch(v, pos, 10000000, 0.0001)",
                 [(None, None), ("CAST(2100000 AS BIGINT)", "40000"),
                  ("CAST(2100000 AS BIGINT)", "1000000")]),
    # Distinct-count sketches (kind 3): the values are the rows' positions, folded.
    "distinct_time": ("rows", "window_distinct_sketch(pos % 1999, ts, INTERVAL 1 DAY, 0.05)",
                      TIME_QUERIES),
    "distinct_positions": ("rows", "window_distinct_sketch(pos * 31 % 9973, pos, 1000, 0.02)",
                           [(None, None), (f"{MAX_POS} + 300", None), (MAX_POS, "100"),
                            (f"{MAX_POS} + 600", "800")]),
    "distinct_merged": ("(SELECT key, window_distinct_sketch(pos % 1999, ts, INTERVAL 1 DAY, "
                        "0.05) AS s FROM rows WHERE key > 0 GROUP BY key)",
                        "window_distinct_sketch_merge(s)", TIME_QUERIES),
}


def register_rows(spark) -> None:
    """4,000 rows over 3 keys: bursts, duplicates and a gap, positions and seconds."""
    rng = np.random.default_rng(20260101)
    n = 4000
    pos = np.cumsum(rng.choice([0, 1, 1, 2, 5], n))
    pos[n // 2:] += 50_000  # a gap longer than every window
    v = rng.random(n) < 0.3
    v[700:1100] = True
    v[3000:3050] = False
    rows = [(int(k), int(p), bool(e)) for k, p, e in zip(rng.integers(0, 3, n), pos, v)]
    (spark.createDataFrame(rows, "key INT, pos BIGINT, v BOOLEAN").coalesce(1)
     .selectExpr("key", "pos", "timestamp_seconds(pos * 30) AS ts", "v")
     .createOrReplaceTempView("rows"))


def written_bytes(spark, name: str) -> bytes:
    source, aggregate, _ = SKETCHES[name]
    return bytes(spark.sql(f"SELECT {aggregate} AS s FROM {source}").collect()[0].s)


def answers(spark, blob: bytes, name: str) -> list[list[int]]:
    """Per recorded query: [estimate, lower, upper] of a count sketch, [estimate] of a
    distinct-count sketch."""
    out = []
    for as_of, sub_window in SKETCHES[name][2]:
        args = ", ".join(a for a in (f"X'{blob.hex()}'", as_of, sub_window) if a)
        if name.startswith("distinct"):
            out.append([spark.sql(f"SELECT window_distinct_sketch_estimate({args})")
                        .collect()[0][0]])
        else:
            b = spark.sql(f"SELECT window_sketch_bounds({args}) AS b").collect()[0].b
            out.append([b.estimate, b.lower, b.upper])
    return out


def load_golden(name: str) -> bytes:
    with open(os.path.join(GOLDEN, f"{name}.bin"), "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def golden_answers(spark):
    register_rows(spark)
    with open(ANSWERS) as f:
        return json.load(f)


def test_every_golden_file_has_answers(golden_answers):
    files = sorted(f[:-4] for f in os.listdir(GOLDEN) if f.endswith(".bin"))
    assert files == sorted(SKETCHES) == sorted(golden_answers["sketches"])


@pytest.mark.parametrize("name", sorted(SKETCHES))
def test_golden_bytes_read_and_answer_as_recorded(spark, golden_answers, name):
    assert answers(spark, load_golden(name), name) == golden_answers["sketches"][name]


@pytest.mark.parametrize("name", sorted(SKETCHES))
def test_same_rows_write_the_same_bytes(spark, golden_answers, name):
    assert written_bytes(spark, name) == load_golden(name)


def assert_answers_hold(spark, answered, queries, rows, column, window, eps):
    """Each (estimate, lower, upper) against the exact count of `rows` in its window."""
    temporal = column == "ts"
    for (as_of, sub_window), (est, lower, upper) in zip(queries, answered):
        end = as_of or f"(SELECT max({column}) FROM {rows})"
        length = sub_window or window
        start = f"{column} >= {end} - {length}" if temporal else f"{column} > {end} - {length}"
        exact = spark.sql(f"SELECT count_if(v AND {column} <= {end} AND {start}) AS n "
                          f"FROM {rows}").collect()[0].n
        assert exact > 0, "every recorded query covers events"
        assert lower <= exact <= upper and abs(est - exact) <= eps * exact, \
            (as_of, sub_window, est, lower, upper, exact)


@pytest.mark.parametrize("name, rows, column, window, eps", [
    ("positions", "rows", "pos", "1000", 0.05),
    ("time", "rows", "ts", "INTERVAL 1 DAY", 0.01),
    ("merged", "(SELECT * FROM rows WHERE key > 0)", "ts", "INTERVAL 1 DAY", 0.01)])
def test_recorded_answers_hold_the_bound_against_exact(spark, golden_answers, name, rows,
                                                       column, window, eps):
    """The recorded answers are right, not just stable."""
    assert_answers_hold(spark, golden_answers["sketches"][name], SKETCHES[name][2], rows,
                        column, window, eps)


@pytest.mark.parametrize("name, rows, x, column, window, rsd", [
    ("distinct_time", "rows", "pos % 1999", "ts", "INTERVAL 1 DAY", 0.05),
    ("distinct_positions", "rows", "pos * 31 % 9973", "pos", "1000", 0.02),
    ("distinct_merged", "(SELECT * FROM rows WHERE key > 0)", "pos % 1999", "ts",
     "INTERVAL 1 DAY", 0.05)])
def test_recorded_distinct_answers_are_approx_count_distinct(spark, golden_answers, name, rows,
                                                             x, column, window, rsd):
    """Each recorded distinct count is what approx_count_distinct gives over its window."""
    temporal = column == "ts"
    for (as_of, sub_window), [got] in zip(SKETCHES[name][2], golden_answers["sketches"][name]):
        end = as_of or f"(SELECT max({column}) FROM {rows})"
        length = sub_window or window
        start = f"{column} >= {end} - {length}" if temporal else f"{column} > {end} - {length}"
        want = spark.sql(f"SELECT approx_count_distinct({x}, {rsd}) FROM {rows} "
                         f"WHERE {column} <= {end} AND {start}").collect()[0][0]
        assert got == want and want > 10, (name, as_of, sub_window, got, want)


def test_stored_sketches_merge_with_new_ones(spark, golden_answers):
    """A stored sketch (keys 1 and 2) merged with one written now (key 0) counts all rows."""
    stored = load_golden("merged")
    merged = bytes(spark.sql(f"""
        SELECT window_sketch_merge(s) AS s FROM (
          SELECT window_sketch(v, ts, INTERVAL 1 DAY, 0.01) AS s FROM rows WHERE key = 0
          UNION ALL SELECT X'{stored.hex()}' AS s)""").collect()[0].s)
    assert_answers_hold(spark, answers(spark, merged, "merged"), TIME_QUERIES, "rows", "ts",
                        "INTERVAL 1 DAY", 0.01)


def write_golden() -> None:
    """Rewrites tests/golden/ from the rows above: for a new format version only."""
    from pyspark.sql import SparkSession
    from pyspark.version import __version__ as spark_version

    import windowsketch

    spark = windowsketch.configure(
        SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")).getOrCreate()
    register_rows(spark)
    os.makedirs(GOLDEN, exist_ok=True)
    recorded = {}
    for name in sorted(SKETCHES):
        blob = written_bytes(spark, name)
        with open(os.path.join(GOLDEN, f"{name}.bin"), "wb") as f:
            f.write(blob)
        recorded[name] = answers(spark, blob, name)
    with open(ANSWERS, "w") as f:
        f.write(f'{{"written_by": "windowsketch {windowsketch.__version__} on Spark '
                f'{spark_version}",\n "format_version": {blob[1]},\n "sketches": {{\n')
        f.write(",\n".join(f"  {json.dumps(name)}: {json.dumps(recorded[name])}"
                           for name in sorted(recorded)))
        f.write("\n }\n}\n")
    spark.stop()


if __name__ == "__main__":
    write_golden()
