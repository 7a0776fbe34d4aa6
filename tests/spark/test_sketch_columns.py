"""Sketch columns: build per key per period, merge later, estimate; bad bytes and
mismatched sketches fail with the function's name."""
from __future__ import annotations

import datetime

import numpy as np
import pytest

from conftest import error_condition

from windowsketch.functions import (window_sketch, window_sketch_estimate,
                                    window_sketch_merge)

EPS = 0.02
WINDOW_HOURS = 24


@pytest.fixture(scope="module")
def clicks(spark):
    """Five days of clicks over four pages; events are bursty errors."""
    rng = np.random.default_rng(21)
    n = 20_000
    base = datetime.datetime(2024, 5, 1)
    seconds = np.sort(rng.integers(0, 5 * 86400, n))
    errors = rng.random(n) < 0.25
    for start in rng.integers(0, n, 10):
        errors[start:start + 400] = True
    rows = [(int(p), base + datetime.timedelta(seconds=int(s)), bool(e), int(s))
            for p, s, e in zip(rng.integers(0, 4, n), seconds, errors)]
    df = spark.createDataFrame(rows, "page INT, ts TIMESTAMP, error BOOLEAN, pos BIGINT")
    df.createOrReplaceTempView("clicks")
    return df


@pytest.fixture(scope="module")
def daily(spark, clicks):
    df = spark.sql(f"""
        SELECT page, to_date(ts) AS day,
               window_sketch(error, ts, INTERVAL {WINDOW_HOURS} HOURS, {EPS}) AS s
        FROM (SELECT /*+ REPARTITION(6) */ * FROM clicks) GROUP BY page, to_date(ts)""")
    df.createOrReplaceTempView("daily")
    return df


def exact_per_page(spark, as_of=None):
    end = "max(ts) OVER (PARTITION BY page)" if as_of is None else f"TIMESTAMP'{as_of}'"
    return {r.page: r.n for r in spark.sql(f"""
        SELECT page, count_if(error AND ts >= now_ - INTERVAL {WINDOW_HOURS} HOURS) AS n
        FROM (SELECT *, {end} AS now_ FROM clicks) GROUP BY page""").collect()}


def assert_close(approx: dict, exact: dict, eps=EPS):
    assert approx.keys() == exact.keys()
    for k in exact:
        assert abs(approx[k] - exact[k]) <= eps * exact[k], (k, approx[k], exact[k])
    assert max(exact.values()) > 100


def test_merged_daily_sketches_match_exact(spark, daily):
    approx = {r.page: r.n for r in spark.sql("""
        SELECT page, window_sketch_estimate(window_sketch_merge(s)) AS n
        FROM daily GROUP BY page""").collect()}
    assert_close(approx, exact_per_page(spark))


def test_estimate_as_of_a_later_time(spark, daily):
    as_of = "2024-05-06 10:00:00"
    approx = {r.page: r.n for r in spark.sql(f"""
        SELECT page, window_sketch_estimate(window_sketch_merge(s), TIMESTAMP'{as_of}') AS n
        FROM daily GROUP BY page""").collect()}
    assert_close(approx, exact_per_page(spark, as_of))


def test_dataframe_functions(spark, clicks, daily):
    merged = daily.groupBy("page").agg(window_sketch_merge("s").alias("m"))
    got = {r.page: r.n for r in merged.select(
        "page", window_sketch_estimate("m").alias("n")).collect()}
    assert_close(got, exact_per_page(spark))
    direct = clicks.groupBy("page").agg(
        window_sketch_estimate(window_sketch("error", "ts", datetime.timedelta(hours=WINDOW_HOURS),
                                             eps=EPS)).alias("n"))
    assert_close({r.page: r.n for r in direct.collect()}, exact_per_page(spark))
    later = merged.select("page", window_sketch_estimate(
        "m", datetime.datetime(2024, 5, 6, 10)).alias("n"))
    assert_close({r.page: r.n for r in later.collect()},
                 exact_per_page(spark, "2024-05-06 10:00:00"))


def test_positions_sketch(spark, clicks):
    row = spark.sql("""
        SELECT window_sketch_estimate(window_sketch(error, pos, 50000, 0.05)) AS a,
               window_sketch_estimate(window_sketch(error, pos, 50000, 0.05), 440000) AS b,
               count_if(error AND pos > (SELECT max(pos) FROM clicks) - 50000) AS exact_a,
               count_if(error AND pos > 440000 - 50000) AS exact_b
        FROM clicks""").collect()[0]
    assert abs(row.a - row.exact_a) <= 0.05 * row.exact_a and row.exact_a > 100
    assert abs(row.b - row.exact_b) <= 0.05 * row.exact_b and row.exact_b > 100
    assert row.exact_b < row.exact_a  # as_of after the data: the window has slid on


def test_nulls(spark, daily):
    row = spark.sql("""
        SELECT window_sketch_estimate(CAST(NULL AS BINARY)) AS a,
               window_sketch_estimate(s, CAST(NULL AS TIMESTAMP)) AS b,
               (SELECT window_sketch_merge(s) FROM daily WHERE false) AS c
        FROM daily LIMIT 1""").collect()[0]
    assert (row.a, row.b, row.c) == (None, None, None)


def runtime_error(spark, sql) -> str:
    with pytest.raises(Exception) as info:
        spark.sql(sql).collect()
    return str(info.value)


def test_merging_different_windows_is_an_error(spark, clicks):
    message = runtime_error(spark, """
        SELECT window_sketch_merge(s) FROM (
          SELECT window_sketch(error, ts, INTERVAL 1 HOUR) AS s FROM clicks
          UNION ALL SELECT window_sketch(error, ts, INTERVAL 2 HOURS) FROM clicks)""")
    assert "window_sketch_merge: cannot combine sketches of different parameters" in message


@pytest.mark.parametrize("other", [
    "window_sketch(error, ts, INTERVAL 1 HOUR, 0.05)",    # another eps
    "window_sketch(error, pos, 3600000001)",             # positions: another time unit,
])                                                       # the same window length
def test_merging_another_eps_or_time_unit_is_an_error(spark, clicks, other):
    message = runtime_error(spark, f"""
        SELECT window_sketch_merge(s) FROM (
          SELECT window_sketch(error, ts, INTERVAL 1 HOUR) AS s FROM clicks
          UNION ALL SELECT {other} FROM clicks)""")
    assert "window_sketch_merge: cannot combine sketches of different parameters" in message


def test_nulls_among_sketches_are_skipped(spark, daily):
    """A NULL for every real sketch: the merge skips them and counts as before."""
    approx = {r.page: r.n for r in spark.sql("""
        SELECT page, window_sketch_estimate(window_sketch_merge(s)) AS n
        FROM (SELECT page, s FROM daily UNION ALL SELECT page, CAST(NULL AS BINARY) FROM daily)
        GROUP BY page""").collect()}
    assert_close(approx, exact_per_page(spark))


def test_as_of_of_the_wrong_kind_or_too_early(spark, daily):
    assert "the sketch counts time but as_of is of type INT" in runtime_error(
        spark, "SELECT window_sketch_estimate(s, 5) FROM daily")
    assert "is earlier than the sketch's latest ts" in runtime_error(
        spark, "SELECT window_sketch_estimate(s, TIMESTAMP'2024-05-01 00:00:00') FROM daily")


@pytest.mark.parametrize("function", ["window_sketch_estimate", "window_sketch_merge"])
@pytest.mark.parametrize("damage", [
    "X'00'", "X''", "CAST('not a sketch' AS BINARY)",
    "substring(s, 1, length(s) - 1)",                        # truncated
    "concat(substring(s, 1, 20), X'FF', substring(s, 22))",  # one byte overwritten
])
def test_bad_bytes_name_the_function(spark, daily, function, damage):
    message = runtime_error(spark, f"SELECT {function}({damage}) FROM daily")
    assert f"{function}: invalid sketch bytes" in message


def test_damaged_sketches_with_valid_checksums_fail_by_name_or_read_consistently(spark, daily):
    """What the CRC-32 cannot catch, SQL must: damage signed again is either refused with
    the function's name or read as a sketch whose bounds order."""
    from sketch_layout import damaged_variants, sign

    real = bytes(spark.sql("SELECT s FROM daily ORDER BY page, day LIMIT 1").collect()[0].s)
    rng = np.random.default_rng(2718)
    refused = read = 0
    for _, body in damaged_variants(rng, real, each=4):
        blob = sign(bytes(body)).hex()
        for function, query in (
                ("window_sketch_bounds", f"window_sketch_bounds(X'{blob}')"),
                ("window_sketch_merge",
                 f"window_sketch_bounds(window_sketch_merge(s)) FROM (SELECT X'{blob}' AS s "
                 f"UNION ALL SELECT X'{real.hex()}')")):
            try:
                b = spark.sql(f"SELECT {query}").collect()[0][0]
            except Exception as e:  # noqa: BLE001 - the message is what is checked
                message = str(e)
                assert f"{function}: invalid sketch bytes" in message or \
                    f"{function}: cannot combine sketches" in message, message[:2000]
                refused += 1
            else:
                assert 0 <= b.lower <= b.estimate <= b.upper, b
                read += 1
    assert refused > read > 0


def test_type_errors(spark):
    from pyspark.errors import AnalysisException

    for sql in ("SELECT window_sketch_estimate('abc')", "SELECT window_sketch_merge(1)",
                "SELECT window_sketch_estimate(X'00', 'x')"):
        with pytest.raises(AnalysisException) as info:
            spark.sql(sql).collect()
        assert error_condition(info.value) == "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE"
