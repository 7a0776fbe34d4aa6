"""Live monitoring: per host, every minute, over the last 10 minutes: 404s, bytes sent,
distinct URLs, the three most requested URLs, the median and p99 response size and its
mean and standard deviation (a z-score's ingredients); or alerts on the 404s.

    python examples/live_404s.py [--hours N] [--alert-above X]

replays the NASA-HTTP access log of 1995-08-01 (../shared/data) as a stream, one file per
10 minutes of log, and runs windowsketch.streaming.sliding_window on it: a row per host per
minute while the host has requests in its window, a last row when they stop, and the
host's state gone after that. With --alert-above, windowsketch.streaming.sliding_counts
emits only the crossings: a host whose 404s certainly exceed X in 10 minutes, and when
they are certainly back at or under X.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import gzip
import json
import os
import sys
import tempfile

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import windowsketch
from windowsketch import live
from windowsketch.streaming import sliding_counts, sliding_window

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data",
                   "nasa_http_1995-08-01.tsv.gz")
FILE_SPAN = 600  # seconds of log per micro-batch file


def replay_as_files(directory: str, hours: float) -> int:
    """Writes the first `hours` of the log as JSON files, 10 minutes each, modification
    times in log order (the file source reads files in that order). Returns the count."""
    files: dict[int, list[str]] = {}
    with gzip.open(LOG, "rt", newline="") as f:
        rows = csv.DictReader(f, delimiter="\t")
        start = None
        for row in rows:
            t = int(row["time"])
            start = t if start is None else start
            if t - start >= hours * 3600:
                break
            ts = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).replace(tzinfo=None)
            files.setdefault((t - start) // FILE_SPAN, []).append(json.dumps(
                {"host": row["host"], "ts": ts.isoformat(), "status": int(row["response"]),
                 "url": row["url"], "bytes": int(row["bytes"]) if row["bytes"].isdigit() else None}))
    for i, lines in sorted(files.items()):
        path = os.path.join(directory, f"{i:04d}.json")
        with open(path, "w") as out:
            out.write("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return len(files)


def start(spark, input_dir: str, checkpoint_dir: str, on_batch, alert_above=None):
    """The live query; `on_batch(rows)` receives each micro-batch's final rows."""
    events = (spark.readStream.schema("host STRING, ts TIMESTAMP, status INT, url STRING, "
                                      "bytes BIGINT")
              .option("maxFilesPerTrigger", 1).json(input_dir)
              .withWatermark("ts", "1 minute"))
    if alert_above is not None:
        rows = sliding_counts(events, key="host", ts="ts", window="10 minutes", every="1 minute",
                              v=F.col("status") == 404, eps=0.01, alert_above=alert_above)
    else:
        rows = sliding_window(events, key="host", ts="ts", window="10 minutes", every="1 minute",
                              aggregates=[live.count(F.lit(True)).alias("requests"),
                                          live.count(F.col("status") == 404).alias("n404"),
                                          live.sum("bytes"),
                                          live.distinct("url").alias("urls"),
                                          live.top_k("url", 3).alias("top_urls"),
                                          live.percentile("bytes", [0.5, 0.99]).alias("size"),
                                          live.moments("bytes").alias("size_moments")])
    return (rows.writeStream.option("checkpointLocation", checkpoint_dir)
            .foreachBatch(lambda batch, _: on_batch(batch.collect())).start())


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=3.0)
    parser.add_argument("--alert-above", type=int, default=None)
    args = parser.parse_args(argv)
    spark = windowsketch.configure(
        SparkSession.builder.master("local[2]").appName("windowsketch-live-404s")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as work:
        source = os.path.join(work, "in")
        os.makedirs(source)
        replay_as_files(source, args.hours)
        query = start(spark, source, os.path.join(work, "checkpoint"),
                      lambda rows: [print(*r) for r in sorted(rows, key=lambda r: r[1])],
                      args.alert_above)
        query.processAllAvailable()
        state = query.lastProgress["stateOperators"][0]
        print(f"state after the last batch: {state['numRowsTotal']} hosts, "
              f"{state['memoryUsedBytes']} bytes")
        query.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
