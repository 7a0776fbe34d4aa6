"""Windows of millions of rows in a driver with a 512 MB heap, as a user meets them: the
percentile, top-values, sample and filter running frames and GROUP BY over 2·10^6 rows in two keys, one
window covering every row, complete, and their last answers hold their guarantees against
exact ranks and exact counts. Top values are paths of about 500 characters: held row by row
as the exact mode once held them, a key's window takes more than the heap (that build's
driver died here), and a partial aggregate that kept an item's bytes in every node that
counts it, and wrote them so, took more too. Runs in its own process (its own driver heap)."""
from __future__ import annotations

import textwrap

from conftest import WITH_C2, run_in_own_process

SCRIPT = textwrap.dedent("""
    from pyspark.sql import SparkSession
    import windowsketch

    builder = (SparkSession.builder.master("local[2]")
               .config("spark.driver.memory", "512m")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    spark = windowsketch.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    assert spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory() <= 512 << 20
    n = 2_000_000
    spark.range(n).selectExpr(
        "id % 2 AS k", "id AS ts", "(id * 2654435761) % 100003 AS x",
        "concat('/p', CAST(floor(pow((id * 40503) % 65536 / 65536.0, 3) * 500) AS STRING), '/',"
        " repeat('x', 490)) AS path").createOrReplaceTempView("big")
    window = 100_000_000  # every row
    # The last row of each key (k's times are k, k + 2, ...) in the running frame.
    last = spark.sql(f'''
        SELECT k, p, t, s, seen FROM (
          SELECT k, ts,
                 approx_window_percentile(x, ts, {window}, array(0.5, 0.99)) OVER w AS p,
                 approx_window_top_k(path, ts, {window}, 3) OVER w AS t,
                 approx_window_sample(path, ts, {window}, 3) OVER w AS s,
                 approx_window_seen(path, ts, {window}) OVER w AS seen
          FROM big WINDOW w AS (PARTITION BY k ORDER BY ts))
        WHERE ts >= {n - 2} ORDER BY k''').collect()
    grouped = spark.sql(f'''
        SELECT k, approx_window_percentile(x, ts, {window}, array(0.5, 0.99)) AS p,
               approx_window_top_k(path, ts, {window}, 3) AS t,
               approx_window_sample(path, ts, {window}, 3) AS s,
               window_filter_sketch(path, ts, {window}) AS f
        FROM big GROUP BY k ORDER BY k''').collect()
    per_key = n // 2
    answers = [(r.k, p, value) for rows in (last, grouped) for r in rows
               for p, value in zip((0.5, 0.99), r.p)]
    ranks = spark.sql("SELECT " + ", ".join(
        f"count_if(k = {k} AND x < {v}), count_if(k = {k} AND x <= {v})" for k, _, v in answers)
        + " FROM big").first()
    for i, (k, p, value) in enumerate(answers):
        below, at_most = ranks[2 * i], ranks[2 * i + 1]
        assert at_most > below  # a value of the window
        assert max(0.0, below - p * per_key, p * per_key - at_most) <= 0.01 * per_key, (k, p)
    listed = {item.item for rows in (last, grouped) for r in rows for item in r.t}
    counts = {(r.k, r.path): r.c for r in spark.sql(
        "SELECT k, path, count(*) AS c FROM big GROUP BY k, path").collect() if r.path in listed}
    for rows in (last, grouped):
        assert [r.k for r in rows] == [0, 1]
        for r in rows:
            assert len(r.t) == 3
            for item in r.t:
                exact = counts[(r.k, item.item)]
                assert item.lower <= exact <= item.upper, (r.k, item)
                assert item.upper - item.lower <= 0.01 * per_key, (r.k, item)
    # The sample: three of the key's rows, the same in the running frame and in GROUP BY.
    paths = {r.path for r in spark.sql("SELECT DISTINCT path FROM big").collect()}
    for a, b in zip(last, grouped):
        assert a.s == b.s and len(a.s) == 3 and set(a.s) <= paths, (a.s, b.s)
    # The filter: a fingerprint per distinct path (about 500), not per row; each key's last
    # path occurred before, and the key's sketch holds exactly its paths.
    from windowsketch.sketch import WindowSketch
    assert [r.seen for r in last] == [True, True]
    for r in grouped:
        key_paths = {p.path for p in spark.sql(f"SELECT DISTINCT path FROM big WHERE k = {r.k}").collect()}
        f = WindowSketch.from_bytes(bytes(r.f))
        assert len(f) == len(key_paths) < 600 and all(f.contains(p) for p in key_paths)
        assert not any(f.contains(p + "-") for p in key_paths)
    print("BOUNDED OK", len(last), len(grouped))
    spark.stop()
""")


def test_millions_of_rows_in_one_window_fit_a_512_mb_driver(tmp_path):
    assert "BOUNDED OK 2 2" in run_in_own_process(SCRIPT, tmp_path, WITH_C2)
