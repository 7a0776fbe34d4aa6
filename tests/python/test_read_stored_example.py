"""examples/read_stored_sketches.py: hourly sketches per host, written by Spark from the
NASA log, read and merged with pandas in a process where pyspark cannot be imported; every
host's answer holds its bounds and eps against the exact count Spark computes."""
from __future__ import annotations

import datetime
import os
import subprocess
import sys

import pandas as pd

from conftest import ROOT
from windowsketch.demo import NASA_LOG

EXAMPLE = os.path.join(ROOT, "examples", "read_stored_sketches.py")
SCHEMA = ("host STRING, logname STRING, time BIGINT, method STRING, url STRING, "
          "response INT, bytes BIGINT, referer STRING, useragent STRING")


def run_without_pyspark(*args: str) -> str:
    """The example as a script, with every import of pyspark failing."""
    launcher = ("import runpy, sys\n"
                "sys.modules['pyspark'] = None\n"
                f"sys.argv = {[EXAMPLE, *args]!r}\n"
                f"runpy.run_path({EXAMPLE!r}, run_name='__main__')\n")
    return subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True,
                          check=True, stdin=subprocess.DEVNULL).stdout


def exact_404s(spark, end: datetime.datetime, minutes: int, hours_before: bool) -> dict[str, int]:
    """Exact 404s per host in [end - minutes, end]; with `hours_before`, only events of the
    hours that start before `end` (what the example reads for a given AS_OF)."""
    start = end - datetime.timedelta(minutes=minutes)
    last = f"date_trunc('HOUR', ts) < TIMESTAMP'{end.isoformat(sep=' ')}'" if hours_before else "true"
    return {r.host: r.n for r in spark.sql(f"""
        SELECT host, count_if(response = 404) AS n FROM nasa
        WHERE ts BETWEEN TIMESTAMP'{start.isoformat(sep=' ')}' AND TIMESTAMP'{end.isoformat(sep=' ')}'
          AND {last}
        GROUP BY host""").collect()}


def test_hourly_sketches_read_in_pandas_hold_their_bounds(spark, tmp_path):
    (spark.read.csv(NASA_LOG, sep="\t", header=True, schema=SCHEMA)
     .selectExpr("host", "timestamp_seconds(time) AS ts", "response")
     .createOrReplaceTempView("nasa"))
    table = str(tmp_path / "hourly")
    spark.sql("""SELECT host, date_trunc('HOUR', ts) AS hour,
                        window_sketch(response = 404, ts, INTERVAL 1 HOUR) AS s
                 FROM nasa GROUP BY host, date_trunc('HOUR', ts)""").write.parquet(table)
    latest = spark.sql("SELECT max(ts) FROM nasa").collect()[0][0]
    checked = 0
    for args, end, minutes in [((), latest, 60),
                               (("1995-08-01T13:00:00", "20"),
                                datetime.datetime(1995, 8, 1, 13, 0), 20)]:
        lines = run_without_pyspark(table, *args).splitlines()
        assert lines[0].split() == ["host", "estimate", "lower", "upper"]
        answers = {host: (int(e), int(lo), int(up))
                   for host, e, lo, up in (line.split() for line in lines[1:])}
        exact = {h: n for h, n in exact_404s(spark, end, minutes, bool(args)).items() if n > 0}
        assert set(exact) <= set(answers), "every host with 404s in the window is listed"
        for host, (estimate, lower, upper) in answers.items():
            n = exact.get(host, 0)
            assert lower <= n <= upper and abs(estimate - n) <= 0.01 * n, (host, n, estimate)
        checked += len(exact)
    assert checked >= 5, "hosts with 404s in the two windows"
    # An AS_OF inside an hour with later events: the reader's clear error.
    failed = subprocess.run([sys.executable, EXAMPLE, table, "1995-08-01T12:30:00"],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert failed.returncode == 1 and "is earlier than the sketch's latest ts" in failed.stderr


def test_without_arguments_it_says_how_to_run_it():
    result = subprocess.run([sys.executable, EXAMPLE], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 1 and "python examples/read_stored_sketches.py TABLE" in result.stderr
    assert pd.__version__  # the example needs pandas, nothing from Spark
