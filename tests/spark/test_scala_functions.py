"""Every overload of windowsketch.spark.functions, the Scala/Java DataFrame API, gives what
the SQL function it names gives."""
from __future__ import annotations

import pytest

from windowsketch import _scala_object

try:
    from pyspark.sql.classic.column import Column
except ImportError:  # Spark 3.5: one Column class
    from pyspark.sql.column import Column


@pytest.fixture(scope="module")
def api(spark):
    jvm = spark.sparkContext._jvm
    functions = _scala_object(spark, "windowsketch.spark.functions")
    df = spark.createDataFrame(
        [(t, t % 3 != 0, t * 10) for t in range(1, 41)], "ts BIGINT, v BOOLEAN, q BIGINT")
    df.createOrReplaceTempView("scala_api")
    sketch = spark.sql("SELECT window_sketch(v, ts, 12, 0.1) AS s FROM scala_api")
    sketch.createOrReplaceTempView("scala_api_sketch")

    def col(name):
        return jvm.org.apache.spark.sql.functions.col(name)

    def lit(value):
        return jvm.org.apache.spark.sql.functions.lit(value)

    def select(jcolumn, table=df):
        return table.select(Column(jcolumn).alias("r")).collect()[0].r

    return functions, col, lit, select, sketch


def sql(spark, expression, table="scala_api"):
    return spark.sql(f"SELECT {expression} AS r FROM {table}").collect()[0].r


def agree(spark, cases, table="scala_api"):
    """(expression, Scala column's answer, SQL's answer) for each (Scala column, SQL
    expression) of `cases` over `table`: all the columns in one query, all the expressions
    in another (a query a case cost minutes of CI over the Spark lines)."""
    got = spark.table(table).select(
        *[Column(jcolumn).alias(f"r{i}") for i, (jcolumn, _) in enumerate(cases)]).collect()[0]
    want = spark.sql("SELECT " + ", ".join(f"{expression} AS r{i}" for i, (_, expression)
                                            in enumerate(cases)) + f" FROM {table}").collect()[0]
    return [(expression, got[i], want[i]) for i, (_, expression) in enumerate(cases)]


def test_counts_sums_and_bounds(spark, api):
    f, col, lit, select, _ = api
    cases = [
        (f.approx_window_count(col("v"), col("ts"), lit(12), lit(0.1)),
         "approx_window_count(v, ts, 12, 0.1)"),
        (f.approx_window_count(col("v"), col("ts"), lit(12)), "approx_window_count(v, ts, 12)"),
        (f.approx_window_count("v", "ts", 12, 0.1), "approx_window_count(v, ts, 12, 0.1)"),
        (f.approx_window_count("v", "ts", 12), "approx_window_count(v, ts, 12)"),
        (f.approx_window_count_bounds(col("v"), col("ts"), lit(12), lit(0.1)),
         "approx_window_count_bounds(v, ts, 12, 0.1)"),
        (f.approx_window_count_bounds(col("v"), col("ts"), lit(12)),
         "approx_window_count_bounds(v, ts, 12)"),
        (f.approx_window_sum(col("q"), col("ts"), lit(12), lit(0.1)),
         "approx_window_sum(q, ts, 12, 0.1)"),
        (f.approx_window_sum(col("q"), col("ts"), lit(12)), "approx_window_sum(q, ts, 12)"),
        (f.approx_window_sum("q", "ts", 12, 0.1), "approx_window_sum(q, ts, 12, 0.1)"),
        (f.approx_window_count_distinct(col("q"), col("ts"), lit(12), lit(0.1)),
         "approx_window_count_distinct(q, ts, 12, 0.1)"),
        (f.approx_window_count_distinct(col("q"), col("ts"), lit(12)),
         "approx_window_count_distinct(q, ts, 12)"),
        (f.approx_window_count_distinct("q", "ts", 12, 0.1),
         "approx_window_count_distinct(q, ts, 12, 0.1)"),
    ]
    for expression, got, want in agree(spark, cases):
        assert got == want and want, (expression, got, want)


def test_sketch_columns(spark, api):
    f, col, lit, select, sketch = api
    for jcolumn in (f.window_sketch(col("v"), col("ts"), lit(12), lit(0.1)),
                    f.window_sketch("v", "ts", 12, 0.1)):
        assert bytes(select(jcolumn)) == bytes(sketch.collect()[0].s)
    assert bytes(select(f.window_sketch(col("v"), col("ts"), lit(12)))) == bytes(
        sql(spark, "window_sketch(v, ts, 12)"))
    for jcolumn in (f.window_sketch_merge(col("s")), f.window_sketch_merge("s")):
        assert bytes(select(jcolumn, sketch)) == bytes(
            sql(spark, "window_sketch_merge(s)", "scala_api_sketch"))
    s = col("s")
    cases = [
        (f.window_sketch_estimate(s), "window_sketch_estimate(s)"),
        (f.window_sketch_estimate(s, lit(44)), "window_sketch_estimate(s, 44)"),
        (f.window_sketch_estimate(s, lit(44), lit(6)), "window_sketch_estimate(s, 44, 6)"),
        (f.window_sketch_bounds(s), "window_sketch_bounds(s)"),
        (f.window_sketch_bounds(s, lit(44)), "window_sketch_bounds(s, 44)"),
        (f.window_sketch_bounds(s, lit(44), lit(6)), "window_sketch_bounds(s, 44, 6)"),
    ]
    for expression, got, want in agree(spark, cases, "scala_api_sketch"):
        assert got == want and want, (expression, got, want)


def test_distinct_sketch_columns(spark, api):
    f, col, lit, select, _ = api
    sketch = spark.sql("SELECT window_distinct_sketch(q, ts, 12, 0.1) AS s FROM scala_api")
    sketch.createOrReplaceTempView("scala_api_distinct")
    stored = bytes(sketch.collect()[0].s)
    for jcolumn in (f.window_distinct_sketch(col("q"), col("ts"), lit(12), lit(0.1)),
                    f.window_distinct_sketch("q", "ts", 12, 0.1)):
        assert bytes(select(jcolumn)) == stored
    assert bytes(select(f.window_distinct_sketch(col("q"), col("ts"), lit(12)))) == bytes(
        sql(spark, "window_distinct_sketch(q, ts, 12)"))
    for jcolumn in (f.window_distinct_sketch_merge(col("s")),
                    f.window_distinct_sketch_merge("s")):
        assert bytes(select(jcolumn, sketch)) == bytes(
            sql(spark, "window_distinct_sketch_merge(s)", "scala_api_distinct"))
    s = col("s")
    cases = [
        (f.window_distinct_sketch_estimate(s), "window_distinct_sketch_estimate(s)"),
        (f.window_distinct_sketch_estimate(s, lit(44)), "window_distinct_sketch_estimate(s, 44)"),
        (f.window_distinct_sketch_estimate(s, lit(44), lit(6)),
         "window_distinct_sketch_estimate(s, 44, 6)"),
    ]
    for expression, got, want in agree(spark, cases, "scala_api_distinct"):
        assert got == want and want, (expression, got, want)


def test_percentiles(spark, api):
    f, col, lit, select, _ = api
    percentages = spark.sparkContext._jvm.org.apache.spark.api.python.PythonUtils.toSeq(
        [0.5, 0.9])
    cases = [
        (f.approx_window_percentile(col("q"), col("ts"), lit(12), lit(0.5), lit(0.1)),
         "approx_window_percentile(q, ts, 12, 0.5, 0.1)"),
        (f.approx_window_percentile(col("q"), col("ts"), lit(12), lit(0.9)),
         "approx_window_percentile(q, ts, 12, 0.9)"),
        (f.approx_window_percentile("q", "ts", 12, 0.25, 0.1),
         "approx_window_percentile(q, ts, 12, 0.25, 0.1)"),
        (f.approx_window_percentile("q", "ts", 12, percentages, 0.1),
         "approx_window_percentile(q, ts, 12, array(0.5, 0.9), 0.1)"),
    ]
    for expression, got, want in agree(spark, cases):
        assert got == want and want, (expression, got, want)
    cases = [
        (f.approx_window_percentile_bounds(col("q"), col("ts"), lit(12), lit(0.5), lit(0.1)),
         "approx_window_percentile_bounds(q, ts, 12, 0.5, 0.1)"),
        (f.approx_window_percentile_bounds(col("q"), col("ts"), lit(12), lit(0.9)),
         "approx_window_percentile_bounds(q, ts, 12, 0.9)"),
    ]
    for expression, got, want in agree(spark, cases):
        assert got == want and want, (expression, got, want)


def test_percentile_sketch_columns(spark, api):
    f, col, lit, select, _ = api
    sketch = spark.sql("SELECT window_percentile_sketch(q, ts, 12, 0.1) AS s FROM scala_api")
    sketch.createOrReplaceTempView("scala_api_percentile")
    stored = bytes(sketch.collect()[0].s)
    for jcolumn in (f.window_percentile_sketch(col("q"), col("ts"), lit(12), lit(0.1)),
                    f.window_percentile_sketch("q", "ts", 12, 0.1)):
        assert bytes(select(jcolumn)) == stored
    assert bytes(select(f.window_percentile_sketch(col("q"), col("ts"), lit(12)))) == bytes(
        sql(spark, "window_percentile_sketch(q, ts, 12)"))
    for jcolumn in (f.window_percentile_sketch_merge(col("s")),
                    f.window_percentile_sketch_merge("s")):
        assert bytes(select(jcolumn, sketch)) == bytes(
            sql(spark, "window_percentile_sketch_merge(s)", "scala_api_percentile"))
    s = col("s")
    cases = [
        (f.window_percentile_sketch_estimate(s, lit(0.5)),
         "window_percentile_sketch_estimate(s, 0.5)"),
        (f.window_percentile_sketch_estimate(s, lit(0.5), lit(44)),
         "window_percentile_sketch_estimate(s, 0.5, 44)"),
        (f.window_percentile_sketch_estimate(s, lit(0.9), lit(44), lit(6)),
         "window_percentile_sketch_estimate(s, 0.9, 44, 6)"),
    ]
    for expression, got, want in agree(spark, cases, "scala_api_percentile"):
        assert got == want and want, (expression, got, want)


def test_moments(spark, api):
    f, col, lit, select, _ = api
    cases = []
    for name in ("approx_window_avg", "approx_window_variance", "approx_window_var_samp",
                 "approx_window_var_pop", "approx_window_stddev", "approx_window_stddev_samp",
                 "approx_window_stddev_pop", "approx_window_avg_bounds",
                 "approx_window_stddev_bounds"):
        function = getattr(f, name)
        cases += [(function(col("q"), col("ts"), lit(12), lit(0.1)), f"{name}(q, ts, 12, 0.1)"),
                  (function(col("q"), col("ts"), lit(12)), f"{name}(q, ts, 12)")]
        if name in ("approx_window_avg", "approx_window_variance", "approx_window_stddev"):
            cases.append((function("q", "ts", 12, 0.1), f"{name}(q, ts, 12, 0.1)"))
    for expression, got, want in agree(spark, cases):
        assert got == want and want, (expression, got, want)


def test_moments_sketch_columns(spark, api):
    f, col, lit, select, _ = api
    sketch = spark.sql("SELECT window_moments_sketch(q, ts, 12, 0.1) AS s FROM scala_api")
    sketch.createOrReplaceTempView("scala_api_moments")
    stored = bytes(sketch.collect()[0].s)
    for jcolumn in (f.window_moments_sketch(col("q"), col("ts"), lit(12), lit(0.1)),
                    f.window_moments_sketch("q", "ts", 12, 0.1)):
        assert bytes(select(jcolumn)) == stored
    assert bytes(select(f.window_moments_sketch(col("q"), col("ts"), lit(12)))) == bytes(
        sql(spark, "window_moments_sketch(q, ts, 12)"))
    for jcolumn in (f.window_moments_sketch_merge(col("s")), f.window_moments_sketch_merge("s")):
        assert bytes(select(jcolumn, sketch)) == bytes(
            sql(spark, "window_moments_sketch_merge(s)", "scala_api_moments"))
    s = col("s")
    cases = [
        (f.window_moments_sketch_estimate(s, "avg"), "window_moments_sketch_estimate(s, 'avg')"),
        (f.window_moments_sketch_estimate(s, "stddev", lit(44)),
         "window_moments_sketch_estimate(s, 'stddev', 44)"),
        (f.window_moments_sketch_estimate(s, "var_pop", lit(44), lit(6)),
         "window_moments_sketch_estimate(s, 'var_pop', 44, 6)"),
        (f.window_moments_sketch_bounds(s, "avg"), "window_moments_sketch_bounds(s, 'avg')"),
        (f.window_moments_sketch_bounds(s, "stddev", lit(44)),
         "window_moments_sketch_bounds(s, 'stddev', 44)"),
        (f.window_moments_sketch_bounds(s, "var_pop", lit(44), lit(6)),
         "window_moments_sketch_bounds(s, 'var_pop', 44, 6)"),
    ]
    for expression, got, want in agree(spark, cases, "scala_api_moments"):
        assert got == want and want, (expression, got, want)


def test_top_k(spark, api):
    f, col, lit, select, _ = api
    cases = [
        (f.approx_window_top_k(col("q"), col("ts"), lit(12), lit(2), lit(0.1)),
         "approx_window_top_k(q, ts, 12, 2, 0.1)"),
        (f.approx_window_top_k(col("q"), col("ts"), lit(12), lit(2)), "approx_window_top_k(q, ts, 12, 2)"),
        (f.approx_window_top_k("q", "ts", 12, 2, 0.1), "approx_window_top_k(q, ts, 12, 2, 0.1)"),
    ]
    for expression, got, want in agree(spark, cases):
        assert got == want and want, (expression, got, want)
    sketch = spark.sql("SELECT window_top_k_sketch(v, ts, 12, 0.1) AS s FROM scala_api")
    sketch.createOrReplaceTempView("scala_api_top_k")
    assert bytes(select(f.window_top_k_sketch(col("v"), col("ts"), lit(12), lit(0.1)))) == bytes(
        sketch.collect()[0].s)
    assert bytes(select(f.window_top_k_sketch(col("q"), col("ts"), lit(12)))) == bytes(
        sql(spark, "window_top_k_sketch(q, ts, 12)"))
    assert bytes(select(f.window_top_k_sketch("q", "ts", 12, 0.1))) == bytes(
        sql(spark, "window_top_k_sketch(q, ts, 12, 0.1)"))
    for jcolumn in (f.window_top_k_sketch_merge(col("s")), f.window_top_k_sketch_merge("s")):
        assert bytes(select(jcolumn, sketch)) == bytes(
            sql(spark, "window_top_k_sketch_merge(s)", "scala_api_top_k"))
    s = col("s")
    cases = [
        (f.window_top_k_sketch_estimate(s, 2), "window_top_k_sketch_estimate(s, 2)"),
        (f.window_top_k_sketch_estimate(s, 2, lit(44)), "window_top_k_sketch_estimate(s, 2, 44)"),
        (f.window_top_k_sketch_estimate(s, 2, lit(44), lit(6)),
         "window_top_k_sketch_estimate(s, 2, 44, 6)"),
    ]
    for expression, got, want in agree(spark, cases, "scala_api_top_k"):
        assert got == want and want, (expression, got, want)


def test_sample(spark, api):
    f, col, lit, select, _ = api
    cases = [
        (f.approx_window_sample(col("q"), col("ts"), lit(12), lit(3), lit(5)),
         "approx_window_sample(q, ts, 12, 3, 5)"),
        (f.approx_window_sample(col("q"), col("ts"), lit(12), lit(3)), "approx_window_sample(q, ts, 12, 3)"),
        (f.approx_window_sample("q", "ts", 12, 3, 5), "approx_window_sample(q, ts, 12, 3, 5)"),
    ]
    for expression, got, want in agree(spark, cases):
        assert got == want and len(want) == 3, (expression, got, want)
    assert sql(spark, "approx_window_sample(q, ts, 12, 3, 5)") != sql(
        spark, "approx_window_sample(q, ts, 12, 3, 6)")
    sketch = spark.sql("SELECT window_sample_sketch(q, ts, 12, 3, 5) AS s FROM scala_api")
    sketch.createOrReplaceTempView("scala_api_sample")
    stored = bytes(sketch.collect()[0].s)
    for jcolumn in (f.window_sample_sketch(col("q"), col("ts"), lit(12), lit(3), lit(5)),
                    f.window_sample_sketch("q", "ts", 12, 3, 5)):
        assert bytes(select(jcolumn)) == stored
    assert bytes(select(f.window_sample_sketch(col("q"), col("ts"), lit(12), lit(3)))) == bytes(
        sql(spark, "window_sample_sketch(q, ts, 12, 3)"))
    for jcolumn in (f.window_sample_sketch_merge(col("s")), f.window_sample_sketch_merge("s")):
        assert bytes(select(jcolumn, sketch)) == bytes(
            sql(spark, "window_sample_sketch_merge(s)", "scala_api_sample"))
    s = col("s")
    cases = [
        (f.window_sample_sketch_get(s), "window_sample_sketch_get(s)"),
        (f.window_sample_sketch_get(s, 2), "window_sample_sketch_get(s, 2)"),
        (f.window_sample_sketch_get(s, 2, lit(44)), "window_sample_sketch_get(s, 2, 44)"),
        (f.window_sample_sketch_get(s, 2, lit(44), lit(6)), "window_sample_sketch_get(s, 2, 44, 6)"),
    ]
    for expression, got, want in agree(spark, cases, "scala_api_sample"):
        assert got == want and want, (expression, got, want)


def test_filter(spark, api):
    f, col, lit, select, _ = api
    from pyspark.sql import Window
    table = spark.table("scala_api")
    want = [r.r for r in spark.sql("SELECT approx_window_seen(q % 70, ts, 12, 0.001) OVER "
                                   "(ORDER BY ts) AS r FROM scala_api").collect()]
    assert True in want and False in want
    q = col("q").mod(lit(70))
    for jcolumn in (f.approx_window_seen(q, col("ts"), lit(12), lit(0.001)),
                    f.approx_window_seen(q, col("ts"), lit(12))):
        got = [r.r for r in table.select(Column(jcolumn).over(Window.orderBy("ts")).alias("r"))
               .collect()]
        assert got == want
    assert [r.r for r in table.select(Column(f.approx_window_seen("q", "ts", 12, 0.001)).over(
        Window.orderBy("ts")).alias("r")).collect()] == [False] * 40
    sketch = spark.sql("SELECT window_filter_sketch(q, ts, 12, 0.001) AS s FROM scala_api")
    sketch.createOrReplaceTempView("scala_api_filter")
    stored = bytes(sketch.collect()[0].s)
    for jcolumn in (f.window_filter_sketch(col("q"), col("ts"), lit(12), lit(0.001)),
                    f.window_filter_sketch("q", "ts", 12, 0.001)):
        assert bytes(select(jcolumn)) == stored
    assert bytes(select(f.window_filter_sketch(col("q"), col("ts"), lit(12)))) == bytes(
        sql(spark, "window_filter_sketch(q, ts, 12)"))
    for jcolumn in (f.window_filter_sketch_merge(col("s")), f.window_filter_sketch_merge("s")):
        assert bytes(select(jcolumn, sketch)) == bytes(
            sql(spark, "window_filter_sketch_merge(s)", "scala_api_filter"))
    s = col("s")
    cases = [
        (f.window_filter_contains(s, lit(400)), "window_filter_contains(s, 400L)", True),
        (f.window_filter_contains(s, lit(300), lit(44)), "window_filter_contains(s, 300L, 44)", False),
        (f.window_filter_contains(s, lit(400), lit(44), lit(6)),
         "window_filter_contains(s, 400L, 44, 6)", True),
        (f.window_filter_contains(s, lit(380), lit(44), lit(6)),
         "window_filter_contains(s, 380L, 44, 6)", False),
    ]
    answers = agree(spark, [(jcolumn, expression) for jcolumn, expression, _ in cases],
                    "scala_api_filter")
    for (expression, got, want), (_, _, answer) in zip(answers, cases):
        assert got == want == answer, (expression, got, want)
