"""Every error row of the contract (shared/design/semantics.md): class, and the argument named."""
from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

from conftest import error_condition, parameter_index

TS = "TIMESTAMP'2024-01-01 00:00:00'"
# Every aggregate over (v, ts, window [, eps]) checks its arguments the same way.
AGGREGATES = ["approx_window_count", "approx_window_count_bounds", "approx_window_sum",
              "window_sketch"]


def analysis_error(spark, sql: str) -> AnalysisException:
    with pytest.raises(AnalysisException) as info:
        spark.sql(sql).collect()
    return info.value


@pytest.mark.parametrize("eps, condition", [
    ("0", "VALUE_OUT_OF_RANGE"),
    ("-0.5", "VALUE_OUT_OF_RANGE"),
    ("1", "VALUE_OUT_OF_RANGE"),
    ("1.5", "VALUE_OUT_OF_RANGE"),
    ("0.00001", "VALUE_OUT_OF_RANGE"),
    ("CAST(NULL AS DOUBLE)", "UNEXPECTED_NULL"),
    ("NULL", "UNEXPECTED_NULL"),
    ("rand()", "NON_FOLDABLE_INPUT"),
    ("'abc'", "TYPE_CHECK_FAILURE_WITH_HINT"),
])
@pytest.mark.parametrize("function", AGGREGATES)
def test_bad_eps(spark, function, eps, condition):
    e = analysis_error(spark, f"SELECT {function}(1, 1, 10, {eps})")
    assert error_condition(e) == f"DATATYPE_MISMATCH.{condition}"
    assert "`eps`" in str(e)


@pytest.mark.parametrize("ts, window, condition", [
    ("1", "0", "VALUE_OUT_OF_RANGE"),
    ("1", "-5", "VALUE_OUT_OF_RANGE"),
    ("1", "CAST(NULL AS INT)", "UNEXPECTED_NULL"),
    ("id", "id", "NON_FOLDABLE_INPUT"),
    (TS, "10", "TYPE_CHECK_FAILURE_WITH_HINT"),                  # integer window, TIMESTAMP ts
    ("1", "INTERVAL 10 MINUTES", "TYPE_CHECK_FAILURE_WITH_HINT"),  # interval, BIGINT ts
    ("1", "'10 minutes'", "TYPE_CHECK_FAILURE_WITH_HINT"),
    (TS, "INTERVAL 1 MONTH", "TYPE_CHECK_FAILURE_WITH_HINT"),     # year-month interval
    (TS, "'1 month'", "TYPE_CHECK_FAILURE_WITH_HINT"),
    (TS, "'not an interval'", "TYPE_CHECK_FAILURE_WITH_HINT"),
    (TS, "INTERVAL -10 MINUTES", "TYPE_CHECK_FAILURE_WITH_HINT"),
    (TS, "INTERVAL 0 SECONDS", "TYPE_CHECK_FAILURE_WITH_HINT"),
    (TS, "CAST(NULL AS INTERVAL DAY TO SECOND)", "UNEXPECTED_NULL"),
])
@pytest.mark.parametrize("function", AGGREGATES)
def test_bad_window(spark, function, ts, window, condition):
    e = analysis_error(spark, f"SELECT {function}(1, {ts}, {window}) FROM range(1)")
    assert error_condition(e) == f"DATATYPE_MISMATCH.{condition}"
    assert "`window`" in str(e)


@pytest.mark.parametrize("v", ["1.5", "'yes'", "CAST(1 AS DOUBLE)", "array(1)"])
def test_bad_event_type(spark, v):
    e = analysis_error(spark, f"SELECT approx_window_count({v}, 1, 10)")
    assert error_condition(e) == "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE"
    assert e.getMessageParameters()["paramIndex"] == parameter_index(0)


@pytest.mark.parametrize("ts", ["'2024-01-01'", "1.5", "true"])
def test_bad_time_type(spark, ts):
    e = analysis_error(spark, f"SELECT approx_window_count(true, {ts}, 10)")
    assert error_condition(e) == "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE"
    assert e.getMessageParameters()["paramIndex"] == parameter_index(1)


@pytest.mark.parametrize("function", AGGREGATES)
@pytest.mark.parametrize("args", ["true, 1", "true", "true, 1, 10, 0.1, 5"])
def test_wrong_number_of_arguments(spark, function, args):
    e = analysis_error(spark, f"SELECT {function}({args})")
    assert error_condition(e) == "WRONG_NUM_ARGS.WITHOUT_SUGGESTION"


@pytest.mark.parametrize("function", AGGREGATES)
@pytest.mark.parametrize("eps", ["0.0001", "0.99999"])
def test_eps_at_the_ends_of_its_range_is_accepted(spark, function, eps):
    rows = spark.sql(f"SELECT {function}(v, ts, 10, {eps}) AS r "
                     "FROM VALUES (1, 1), (2, 0), (3, 1) AS t(ts, v)").collect()
    assert len(rows) == 1 and rows[0].r is not None


@pytest.mark.parametrize("value", [2, -1, 7])
def test_integral_event_other_than_0_or_1_names_the_value(spark, value):
    with pytest.raises(Exception) as info:
        spark.sql(f"""SELECT approx_window_count(v, ts, 10) OVER (ORDER BY ts)
                      FROM VALUES (1, 1), (2, {value}) AS t(ts, v)""").collect()
    assert f"argument `v` must be TRUE/FALSE or 0/1, got {value}" in str(info.value)


def test_integral_zero_and_one_are_accepted(spark):
    rows = spark.sql("""SELECT approx_window_count(v, ts, 10) OVER (ORDER BY ts) AS n
                        FROM VALUES (1, 1Y), (2, 0Y), (3, 1Y) AS t(ts, v) ORDER BY ts""").collect()
    assert [r.n for r in rows] == [1, 1, 2]
