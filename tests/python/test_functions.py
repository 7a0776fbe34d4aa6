"""The PySpark DataFrame function, and the package's session helpers."""
from __future__ import annotations

import datetime

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import Window
from pyspark.sql import functions as F

import windowsketch
from conftest import run_in_own_process
from windowsketch.functions import approx_window_count


@pytest.fixture(scope="module")
def df(spark):
    base = datetime.datetime(2024, 1, 1)
    rows = [(i % 2, i, base + datetime.timedelta(minutes=i), i % 3 != 1) for i in range(60)]
    return spark.createDataFrame(rows, "key INT, pos BIGINT, ts TIMESTAMP, v BOOLEAN")


def sql_counts(spark, df, ts, window):
    df.createOrReplaceTempView("fn_events")
    return [r.n for r in spark.sql(f"""
        SELECT approx_window_count(v, {ts}, {window}, 0.01)
                 OVER (PARTITION BY key ORDER BY {ts}) AS n
        FROM fn_events ORDER BY key, {ts}""").collect()]


def frame_counts(df, column, ts):
    w = Window.partitionBy("key").orderBy(ts)
    return [r.n for r in df.select("key", ts, column.over(w).alias("n"))
            .orderBy("key", ts).collect()]


@pytest.mark.parametrize("window", [datetime.timedelta(minutes=7), "7 minutes"])
def test_time_windows_match_sql(spark, df, window):
    expected = sql_counts(spark, df, "ts", "INTERVAL 7 MINUTES")
    assert frame_counts(df, approx_window_count("v", "ts", window), "ts") == expected
    assert frame_counts(df, approx_window_count(F.col("v"), F.col("ts"), window, eps=0.01),
                        "ts") == expected
    assert max(expected) > 2


def test_position_window_matches_sql(spark, df):
    expected = sql_counts(spark, df, "pos", "9")
    assert frame_counts(df, approx_window_count("v", "pos", 9), "pos") == expected
    assert frame_counts(df, approx_window_count("v", "pos", F.lit(9), F.lit(0.01)),
                        "pos") == expected


def test_group_by(df):
    rows = df.orderBy(F.rand(1)).repartition(3).groupBy("key") \
        .agg(approx_window_count("v", "pos", 10).alias("n")).orderBy("key").collect()
    # key 0 holds the even positions up to 58, key 1 the odd ones up to 59.
    assert [r.n for r in rows] == [
        sum(1 for i in range(49 + key, 60 + key) if i % 2 == key and i < 60 and i % 3 != 1)
        for key in (0, 1)]


@pytest.mark.parametrize("kwargs, message", [
    ({"window": 2.5}, "`window` must be an int"),
    ({"window": True}, "`window` must be an int"),
    ({"window": None}, "`window` must be an int"),
    ({"window": 5, "eps": "0.1"}, "`eps` must be a number"),
    ({"window": 5, "eps": True}, "`eps` must be a number"),
])
def test_bad_python_arguments_raise_type_error(kwargs, message):
    with pytest.raises(TypeError, match=message):
        approx_window_count("v", "pos", **kwargs)


def test_bad_column_argument_raises_type_error():
    with pytest.raises(TypeError, match="`ts` must be a column name or a Column"):
        approx_window_count("v", 3, 10)


def test_out_of_range_eps_is_reported_by_spark(df):
    with pytest.raises(AnalysisException, match="`eps`"):
        df.select(approx_window_count("v", "pos", 5, eps=0.0)).collect()


def test_configure_keeps_existing_settings():
    class Builder:
        def __init__(self):
            self._options = {"spark.jars": "/a.jar", "spark.sql.extensions": "x.Ext"}

        def config(self, key, value):
            self._options[key] = value
            return self

    builder = windowsketch.configure(windowsketch.configure(Builder()))
    assert builder._options["spark.jars"] == f"/a.jar,{windowsketch.jar_path()}"
    assert builder._options["spark.sql.extensions"] == f"x.Ext,{windowsketch.EXTENSIONS_CLASS}"


def test_register_on_a_running_session(spark):
    windowsketch.register(spark)
    assert spark.sql("SELECT approx_window_count(true, 5, 3) AS n").collect()[0].n == 1


REGISTER_ON_JARS_ONLY = '''
import windowsketch
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.jars", windowsketch.jar_path()).getOrCreate())
assert not spark.catalog.functionExists("approx_window_count")
windowsketch.register(spark)
windowsketch.register(spark)  # twice is harmless
q = spark.sql("""SELECT ts, approx_window_count(v, ts, 3, 0.05) OVER (ORDER BY ts) AS n
                 FROM VALUES (1, true), (2, false), (3, true), (4, true) AS t(ts, v)""")
print("COUNTS", [r.n for r in q.orderBy("ts").collect()])
# the optimizer rule came too: the running frame gets the time-ordered histogram
print("ORDERED", "0.05, true" in q._jdf.queryExecution().optimizedPlan().toString())
spark.stop()
'''


def test_register_on_a_session_started_with_only_the_jar(tmp_path):
    """The path of `spark-submit --jars ...` then register(): no extension configured."""
    out = run_in_own_process(REGISTER_ON_JARS_ONLY, tmp_path)
    assert "COUNTS [1, 1, 2, 2]" in out and "ORDERED True" in out


NO_JAR = """
import windowsketch
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
try:
    windowsketch.register(spark)
except RuntimeError as e:
    print("REFUSED:", e)
spark.stop()
"""


def test_register_explains_a_missing_jar(tmp_path):
    """A real session started without the jar: register() says how to start one with it."""
    out = run_in_own_process(NO_JAR, tmp_path)
    assert "REFUSED: windowsketch's jar is not on this session's classpath" in out
    assert f"--jars {windowsketch.jar_path()}" in out


def test_sub_window_needs_as_of():
    from windowsketch.functions import window_sketch_estimate

    with pytest.raises(TypeError, match="`sub_window` needs `as_of`"):
        window_sketch_estimate("s", sub_window="1 hour")


@pytest.mark.parametrize("as_of", [1.5, True, [1]])
def test_bad_as_of_raises_type_error(as_of):
    from windowsketch.functions import window_sketch_bounds

    with pytest.raises(TypeError, match="`as_of` must be"):
        window_sketch_bounds("s", as_of)
