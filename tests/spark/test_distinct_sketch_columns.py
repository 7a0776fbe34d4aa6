"""Distinct-count sketch columns: sketches per key per period, merged in any shape, read for
any window ending at or after their data give exactly approx_count_distinct over that
window's rows; mismatched or foreign sketches fail with the function's name."""
from __future__ import annotations

import datetime

import numpy as np
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from conftest import error_condition

from windowsketch.functions import (window_distinct_sketch, window_distinct_sketch_estimate,
                                    window_distinct_sketch_merge)

RSD = 0.04
WINDOW_HOURS = 24
BASE = datetime.datetime(2024, 5, 1)


@pytest.fixture(scope="module")
def visits(spark):
    """Five days of visits to four pages: a steady crowd, bursts of one user, a user base
    that drifts, so windows ending at different times hold different users."""
    rng = np.random.default_rng(31)
    n = 30_000
    seconds = np.sort(rng.integers(0, 5 * 86400, n))
    users = rng.integers(0, 4000, n) + (seconds // 7200) * 150  # drifting population
    for start in rng.integers(0, n - 500, 8):
        users[start:start + 500] = users[start]  # one user's burst
    rows = [(int(p), BASE + datetime.timedelta(seconds=int(s)), f"u{int(u)}", int(s))
            for p, s, u in zip(rng.integers(0, 4, n), seconds, users)]
    df = spark.createDataFrame(rows, "page INT, ts TIMESTAMP, user STRING, pos BIGINT")
    df.createOrReplaceTempView("visits")
    return df


@pytest.fixture(scope="module")
def daily(spark, visits):
    df = spark.sql(f"""
        SELECT page, to_date(ts) AS day,
               window_distinct_sketch(user, ts, INTERVAL {WINDOW_HOURS} HOURS, {RSD}) AS s,
               window_distinct_sketch(user, pos, 7200, {RSD}) AS p
        FROM (SELECT /*+ REPARTITION(6) */ * FROM visits) GROUP BY page, to_date(ts)""")
    df.createOrReplaceTempView("daily_users")
    return df


def spark_hll_in(spark, start: str, end: str) -> dict:
    """approx_count_distinct over the rows of each page with start <= ts <= end."""
    return {r.page: r.n for r in spark.sql(f"""
        SELECT page, approx_count_distinct(user, {RSD}) AS n FROM visits
        WHERE ts BETWEEN TIMESTAMP'{start}' AND TIMESTAMP'{end}' GROUP BY page""").collect()}


def exact_in(spark, start: str, end: str) -> dict:
    return {r.page: r.n for r in spark.sql(f"""
        SELECT page, count(DISTINCT user) AS n FROM visits
        WHERE ts BETWEEN TIMESTAMP'{start}' AND TIMESTAMP'{end}' GROUP BY page""").collect()}


def test_merged_daily_sketches_answer_as_approx_count_distinct_over_the_window(spark, daily):
    rows = spark.sql("""
        SELECT page, window_distinct_sketch_estimate(window_distinct_sketch_merge(s)) AS n,
               max(day) AS last_day
        FROM daily_users GROUP BY page""").collect()
    newest = {r.page: r.ts for r in spark.sql(
        "SELECT page, max(ts) AS ts FROM visits GROUP BY page").collect()}
    assert len(rows) == 4
    for r in rows:
        end = newest[r.page]
        start = end - datetime.timedelta(hours=WINDOW_HOURS)
        want = spark_hll_in(spark, str(start), str(end))[r.page]
        exact = exact_in(spark, str(start), str(end))[r.page]
        assert r.n == want, (r.page, r.n, want)
        assert exact > 1000 and abs(r.n - exact) <= 4 * RSD * exact


@pytest.mark.parametrize("as_of, hours", [
    ("2024-05-05 23:59:59", WINDOW_HOURS),  # the sketch's own window, at its end
    ("2024-05-06 10:00:00", WINDOW_HOURS),  # later: the oldest values have left
    ("2024-05-06 10:00:00", 3),             # a sub-window past the data: nothing in it
    ("2024-05-06 00:30:00", 2),             # a sub-window holding the last hour and a half
    ("2024-05-07 12:00:00", 1),             # far past: nothing
])
def test_any_window_ending_at_or_after_the_data(spark, daily, as_of, hours):
    got = {r.page: r.n for r in spark.sql(f"""
        SELECT page, window_distinct_sketch_estimate(window_distinct_sketch_merge(s),
                       TIMESTAMP'{as_of}', INTERVAL {hours} HOURS) AS n
        FROM daily_users GROUP BY page""").collect()}
    end = datetime.datetime.fromisoformat(as_of)
    want = spark_hll_in(spark, str(end - datetime.timedelta(hours=hours)), as_of)
    assert got == {page: want.get(page, 0) for page in got} and len(got) == 4


def test_position_sketches_and_sub_windows(spark, daily):
    """Integral ts: (as_of - N, as_of], as approx_count_distinct over those positions."""
    last = spark.sql("SELECT max(pos) FROM visits").collect()[0][0]
    sizes = []
    for as_of, length in [(last, 7200), (last + 1000, 7200), (last + 100, 500), (last, 1)]:
        got = {r.page: r.n for r in spark.sql(f"""
            SELECT page, window_distinct_sketch_estimate(window_distinct_sketch_merge(p),
                                                         {as_of}, {length}) AS n
            FROM daily_users GROUP BY page""").collect()}
        want = {r.page: r.n for r in spark.sql(f"""
            SELECT page, approx_count_distinct(user, {RSD}) AS n FROM visits
            WHERE pos > {as_of - length} AND pos <= {as_of} GROUP BY page""").collect()}
        assert got == {page: want.get(page, 0) for page in got}, (as_of, length)
        sizes.append(max(got.values()))
    assert sizes[0] > 100 and sizes[0] > sizes[1] > sizes[2] > 0, sizes


def test_window_edges_are_exact(spark):
    """A distinct value at every position: (as_of - N, as_of] holds exactly N of them, and
    the row at as_of - N must be out. Over time, [as_of - w, as_of]: a row exactly at
    as_of - w is in, one a microsecond earlier is out."""
    spark.sql("""SELECT id AS pos, id AS u FROM range(0, 3000, 1, 3)""") \
        .createOrReplaceTempView("every_position")
    for as_of, length in [(2999, 1), (2999, 2), (3000, 3), (2999, 40), (3001, 700), (2999, 3000)]:
        got, want = spark.sql(f"""
            SELECT window_distinct_sketch_estimate(window_distinct_sketch(u, pos, 3000), {as_of},
                                                   {length}),
                   (SELECT approx_count_distinct(u) FROM every_position
                    WHERE pos > {as_of - length} AND pos <= {as_of})
            FROM every_position""").collect()[0]
        exact = min(as_of, 2999) - max(as_of - length, -1)
        assert got == want and abs(got - exact) <= 0.1 * exact, (as_of, length, got, want)
    edge = spark.sql("""
        SELECT window_distinct_sketch_estimate(window_distinct_sketch(u, ts, INTERVAL 2 HOURS),
                                               TIMESTAMP'2024-01-01 11:00:00', INTERVAL 1 HOUR)
        FROM VALUES ('early', TIMESTAMP'2024-01-01 09:59:59.999999'),
                    ('edge', TIMESTAMP'2024-01-01 10:00:00'),
                    ('inside', TIMESTAMP'2024-01-01 10:30:00') AS t(u, ts)""").collect()[0][0]
    assert edge == 2


def test_merge_shape_does_not_matter(spark, visits):
    """Hourly sketches merged into days then into one, or all at once, or the whole table
    in one aggregate: the same bytes."""
    hourly = spark.sql(f"""
        SELECT date_trunc('HOUR', ts) AS hour, to_date(ts) AS day,
               window_distinct_sketch(user, ts, INTERVAL {WINDOW_HOURS} HOURS, {RSD}) AS s
        FROM visits GROUP BY 1, 2""")
    hourly.createOrReplaceTempView("hourly_users")
    two_level = spark.sql("""
        SELECT window_distinct_sketch_merge(d) FROM (
          SELECT window_distinct_sketch_merge(s) AS d FROM hourly_users GROUP BY day)""")
    one_level = spark.sql("SELECT window_distinct_sketch_merge(s) FROM hourly_users")
    direct = spark.sql(f"""
        SELECT window_distinct_sketch(user, ts, INTERVAL {WINDOW_HOURS} HOURS, {RSD})
        FROM (SELECT /*+ REPARTITION(5) */ * FROM visits)""")
    blobs = {bytes(df.collect()[0][0]) for df in (two_level, one_level, direct)}
    assert len(blobs) == 1 and len(next(iter(blobs))) > 1000


def test_dataframe_functions(spark, visits):
    per_page = visits.groupBy("page", F.to_date("ts").alias("day")).agg(
        window_distinct_sketch("user", "ts", f"{WINDOW_HOURS} hours", rsd=RSD).alias("s"))
    got = {r.page: r.n for r in per_page.groupBy("page").agg(
        window_distinct_sketch_estimate(window_distinct_sketch_merge("s"),
                                        datetime.datetime(2024, 5, 6, 1),
                                        datetime.timedelta(hours=3)).alias("n")).collect()}
    assert got == spark_hll_in(spark, "2024-05-05 22:00:00", "2024-05-06 01:00:00")
    with pytest.raises(TypeError, match="`sub_window` needs `as_of`"):
        window_distinct_sketch_estimate("s", sub_window=3)
    with pytest.raises(TypeError, match="`rsd` must be a number in"):
        window_distinct_sketch("user", "ts", 3, rsd="0.1")


def test_nulls(spark):
    row = spark.sql("""
        SELECT window_distinct_sketch_merge(CAST(NULL AS BINARY)) AS merged,
               window_distinct_sketch_estimate(CAST(NULL AS BINARY)) AS estimate,
               window_distinct_sketch_estimate(window_distinct_sketch(u, ts, 5),
                                               CAST(NULL AS BIGINT)) AS at_null,
               window_distinct_sketch_estimate(window_distinct_sketch(u, ts, 5)) AS nothing
        FROM VALUES (1, CAST(NULL AS STRING)) AS t(ts, u)""").collect()[0]
    assert (row.merged, row.estimate, row.at_null, row.nothing) == (None, None, None, 0)


def sketch_sql(window="10", rsd="0.05"):
    return (f"(SELECT window_distinct_sketch(u, ts, {window}, {rsd}) "
            "FROM VALUES (1, 'a') AS t(ts, u))")


@pytest.mark.parametrize("query, message", [
    (f"SELECT window_distinct_sketch_merge(s) FROM (SELECT {sketch_sql()} AS s UNION ALL "
     f"SELECT {sketch_sql(rsd='0.1')})",
     "window_distinct_sketch_merge: cannot merge distinct-count sketches with different "
     "parameters"),
    (f"SELECT window_distinct_sketch_merge(s) FROM (SELECT {sketch_sql()} AS s UNION ALL "
     f"SELECT {sketch_sql(window='11')})",
     "window_distinct_sketch_merge: cannot merge distinct-count sketches"),
    ("SELECT window_distinct_sketch_merge(s) FROM (SELECT window_sketch(true, 1, 10) AS s)",
     "window_distinct_sketch_merge: invalid sketch bytes: a count sketch (window_sketch) "
     "is not a distinct-count sketch"),
    (f"SELECT window_distinct_sketch_estimate({sketch_sql()})",
     None),  # a valid query: checked separately below
    ("SELECT window_distinct_sketch_estimate(window_sketch(true, 1, 10))",
     "window_distinct_sketch_estimate: invalid sketch bytes: a count sketch (window_sketch) "
     "is not a distinct-count sketch"),
    (f"SELECT window_sketch_estimate({sketch_sql()})",
     "window_sketch_estimate: invalid sketch bytes: a distinct-count sketch "
     "(window_distinct_sketch) is not a count sketch"),
    (f"SELECT window_sketch_merge({sketch_sql()})",
     "window_sketch_merge: invalid sketch bytes: a distinct-count sketch "
     "(window_distinct_sketch) is not a count sketch"),
    ("SELECT window_distinct_sketch_estimate(X'0102030405')",
     "window_distinct_sketch_estimate: invalid sketch bytes"),
    (f"SELECT window_distinct_sketch_estimate({sketch_sql()}, 0)",
     "window_distinct_sketch_estimate: as_of (0) is earlier than the sketch's latest ts (1)"),
    (f"SELECT window_distinct_sketch_estimate({sketch_sql()}, TIMESTAMP'2024-01-01')",
     "window_distinct_sketch_estimate: the sketch counts positions but as_of is of type "
     "TIMESTAMP"),
    (f"SELECT window_distinct_sketch_estimate({sketch_sql()}, 5, 11)",
     "window_distinct_sketch_estimate: sub_window 11 is longer than the sketch's window"),
])
def test_runtime_errors_name_the_function(spark, query, message):
    if message is None:
        assert spark.sql(query).collect()[0][0] == 1
        return
    with pytest.raises(Exception) as info:
        spark.sql(query).collect()
    assert message in str(info.value)


def with_checksum(body: bytes) -> bytes:
    import zlib

    return bytes(body) + zlib.crc32(body).to_bytes(4, "big")


def with_rank_zero(sketch: bytes) -> bytes:
    """The sketch with its last pair's rank set to 0, behind a valid checksum."""
    damaged = bytearray(sketch[:-4])
    damaged[-1] = 0
    return with_checksum(bytes(damaged))


def test_the_estimate_checks_the_registers_it_reads_from_the_bytes(spark):
    """The estimate sums a stored sketch's registers straight from its bytes, without
    building the sketch: damage behind a valid checksum still fails by name."""
    sketches = [bytes(r[0]) for r in spark.sql(
        "SELECT window_distinct_sketch(id, id, 100000) FROM range(40) "
        "UNION ALL SELECT window_distinct_sketch(id, id, 100000) FROM range(3000)").collect()]
    assert sorted(s[2] for s in sketches) == [3, 7]  # a dense and a sparse sketch
    for sketch in sketches:
        for blob, message in [(with_rank_zero(sketch), "invalid rank 0"),
                              (with_checksum(sketch[:-4] + b"\x00"), "trailing bytes"),
                              (with_checksum(sketch[:-5]), "truncated")]:
            df = spark.createDataFrame([(bytearray(blob),)], "s BINARY")
            with pytest.raises(Exception) as info:
                df.select(window_distinct_sketch_estimate("s")).collect()
            assert ("window_distinct_sketch_estimate: invalid sketch bytes: " + message
                    in str(info.value)), (sketch[2], message, str(info.value)[:500])


def test_a_partition_merging_stored_sketches_checks_each_one(spark):
    """Within one partition each stored sketch after the first is read straight into the
    union: another rsd, another family and damaged bytes fail by name as when read alone,
    and sparse and dense sketches merge to what one sketch of all the rows writes."""
    def one(sql: str) -> bytes:
        return bytes(spark.sql(sql).collect()[0][0])

    sparse = one("SELECT window_distinct_sketch(id, id, 100000) FROM range(40)")
    dense = one("SELECT window_distinct_sketch(id, id, 100000) FROM range(40, 3000)")
    whole = one("SELECT window_distinct_sketch(id, id, 100000) FROM range(3000)")
    assert (sparse[2], dense[2]) == (7, 3)
    damaged = with_rank_zero(sparse)

    def merged(*blobs: bytes):
        df = spark.createDataFrame([(bytearray(b),) for b in blobs], "s BINARY").coalesce(1)
        return df.agg(window_distinct_sketch_merge("s")).collect()[0][0]

    assert bytes(merged(sparse, dense)) == bytes(merged(dense, sparse)) == whole
    other_rsd = one("SELECT window_distinct_sketch(id, id, 100000, 0.1) FROM range(5)")
    count = one("SELECT window_sketch(true, id, 100000) FROM range(5)")
    for blob, message in [
            (other_rsd, "window_distinct_sketch_merge: cannot merge distinct-count sketches "
                        "with different parameters"),
            (count, "window_distinct_sketch_merge: invalid sketch bytes: a count sketch "
                    "(window_sketch) is not a distinct-count sketch"),
            (damaged, "window_distinct_sketch_merge: invalid sketch bytes: invalid rank 0")]:
        with pytest.raises(Exception) as info:
            merged(sparse, blob)
        assert message in str(info.value), str(info.value)[:500]


@pytest.mark.parametrize("query, index", [
    ("SELECT window_distinct_sketch_estimate(42)", 0),
    ("SELECT window_distinct_sketch_merge('abc')", 0),
    ("SELECT window_distinct_sketch_estimate(X'00', 'x')", 1),
])
def test_type_errors_name_the_argument(spark, query, index):
    with pytest.raises(AnalysisException) as info:
        spark.sql(query).collect()
    assert error_condition(info.value).startswith("DATATYPE_MISMATCH")
    if index == 0:
        assert "window_distinct_sketch" in str(info.value) and "BINARY" in str(info.value)


@pytest.mark.parametrize("args, argument", [
    ("u, ts, 10, 0.5", "`rsd`"),
    ("u, ts, 0", "`window`"),
    ("u, ts, INTERVAL 1 HOUR", "`window`"),
])
def test_bad_arguments_of_the_aggregate(spark, args, argument):
    with pytest.raises(AnalysisException) as info:
        spark.sql(f"SELECT window_distinct_sketch({args}) FROM VALUES (1, 'a') AS t(ts, u)") \
            .collect()
    assert argument in str(info.value)
