"""Distributed for real: two executor JVMs, so partial states are serialized, shuffled and
merged across processes. Runs in its own process (its own SparkContext)."""
from __future__ import annotations

import textwrap

from conftest import run_in_own_process

SCRIPT = textwrap.dedent("""
    from pyspark.sql import SparkSession
    import windowsketch

    builder = (SparkSession.builder.master("local-cluster[2,1,1024]")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.adaptive.coalescePartitions.enabled", "false"))
    spark = windowsketch.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(0, 400000, 1, 8).selectExpr(
        "CAST(id % 37 AS INT) AS key",
        "CAST((id * 7919) % 400000 AS BIGINT) AS pos",
        "(id * 31) % 10 < 3 OR (id % 50000) < 2000 AS v").createOrReplaceTempView("events")
    rows = spark.sql('''
        WITH shuffled AS (SELECT /*+ REPARTITION(16) */ * FROM events),
        approx AS (SELECT key, approx_window_count(v, pos, 60000, 0.01) AS a
                   FROM shuffled GROUP BY key),
        parts AS (SELECT key, window_sketch(v, pos, 60000, 0.01) AS s
                  FROM shuffled GROUP BY key, pos % 5),
        merged AS (SELECT key, window_sketch_estimate(window_sketch_merge(s)) AS b
                   FROM parts GROUP BY key),
        latest AS (SELECT key, max(pos) AS now FROM events GROUP BY key),
        exact AS (SELECT key, count_if(v AND pos > now - 60000) AS e
                  FROM events JOIN latest USING (key) GROUP BY key)
        SELECT * FROM approx JOIN merged USING (key) JOIN exact USING (key)''').collect()
    assert len(rows) == 37
    for r in rows:
        assert abs(r.a - r.e) <= 0.01 * r.e and abs(r.b - r.e) <= 0.01 * r.e, r
    assert min(r.e for r in rows) > 100
    # The driver plus the two executor processes that ran the tasks.
    assert len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) == 3
    print("CLUSTER OK", len(rows))
    spark.stop()
""")


def test_group_by_across_executor_processes(tmp_path):
    assert "CLUSTER OK 37" in run_in_own_process(SCRIPT, tmp_path)
