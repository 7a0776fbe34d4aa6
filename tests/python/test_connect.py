"""The DataFrame function under Spark Connect: a local Connect server started by the client,
in its own process (it needs its own JVM, apart from the test session's)."""
from __future__ import annotations

import textwrap

import pytest

from conftest import SPARK_LINE, local_connect_port, run_in_own_process

SCRIPT = textwrap.dedent("""
    import datetime
    from pyspark.sql import SparkSession, Window
    import windowsketch
    from windowsketch.functions import approx_window_count

    builder = SparkSession.builder.remote("local[2]").config("spark.ui.enabled", "false")
    spark = windowsketch.configure(builder).getOrCreate()
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    base = datetime.datetime(2024, 1, 1)
    df = spark.createDataFrame(
        [(i % 2, i, base + datetime.timedelta(seconds=i), i % 3 == 0) for i in range(40)],
        "key INT, pos BIGINT, ts TIMESTAMP, v BOOLEAN")
    w_pos = Window.partitionBy("key").orderBy("pos")
    w_ts = Window.partitionBy("key").orderBy("ts")
    got = df.select(
        "key", "pos",
        approx_window_count("v", "pos", 6).over(w_pos).alias("by_pos"),
        approx_window_count("v", "ts", datetime.timedelta(seconds=5)).over(w_ts).alias("by_td"),
        approx_window_count("v", "ts", "5 seconds", eps=0.1).over(w_ts).alias("by_str"),
    ).orderBy("key", "pos").collect()
    for r in got:
        expected = sum(1 for p in range(r.pos - 5, r.pos + 1)
                       if p >= 0 and p % 2 == r.key and p % 3 == 0)
        assert r.by_pos == r.by_td == r.by_str == expected, (r, expected)
    print("CONNECT OK", len(got))
    spark.stop()
""")


@pytest.mark.skipif(
    SPARK_LINE == "3.5",
    reason="pyspark 3.5 does not bundle the Spark Connect server: remote('local') fetches "
           "org.apache.spark:spark-connect_2.12 from Maven, which this machine cannot reach")
def test_dataframe_function_under_spark_connect(tmp_path):
    with local_connect_port():
        assert "CONNECT OK 40" in run_in_own_process(SCRIPT, tmp_path)
