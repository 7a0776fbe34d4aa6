"""Structured Streaming: 404s, distinct clients and the p99 and standard deviation of the
latency of the last hour, per host, kept in the state store.

    python examples/streaming_counts.py INPUT_DIR CHECKPOINT_DIR

reads the JSON lines that land in INPUT_DIR ({"host": ..., "ts": ..., "status": ...,
"client": ..., "ms": ...}), keeps one window sketch, one sliding HyperLogLog, one
percentile window and one moments sketch per host in the state store (where Spark's exact
sliding-window aggregation keeps one state row per host per slide, and an exact distinct
count every client of the window; the percentile window holds the hour's latencies, exact
mode; the moments sketch groups of them with their count, mean and M2) and
prints the updated figures of each micro-batch. Stop it and start it again with the same
CHECKPOINT_DIR: it carries on where it stopped, nothing lost, nothing counted twice.
"""
from __future__ import annotations

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import windowsketch
from windowsketch.functions import (approx_window_count, approx_window_count_distinct,
                                    approx_window_percentile, approx_window_stddev)

SCHEMA = "host STRING, ts TIMESTAMP, status INT, client STRING, ms DOUBLE"


def start(spark, input_dir: str, checkpoint_dir: str, on_batch, available_now: bool = False):
    """Starts the query; `on_batch(rows)` receives each micro-batch's updated counts."""
    counts = (spark.readStream.schema(SCHEMA).json(input_dir)
              .groupBy("host")
              .agg(approx_window_count(F.col("status") == 404, "ts", "1 hour", eps=0.01)
                   .alias("errors_last_hour"),
                   approx_window_count_distinct("client", "ts", "1 hour")
                   .alias("clients_last_hour"),
                   approx_window_percentile("ms", "ts", "1 hour", 0.99).alias("p99_ms_last_hour"),
                   approx_window_stddev("ms", "ts", "1 hour").alias("stddev_ms_last_hour"),
                   F.max("ts").alias("as_of")))
    writer = (counts.writeStream.outputMode("update")
              .option("checkpointLocation", checkpoint_dir)
              .foreachBatch(lambda batch, _: on_batch(batch.collect())))
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def main(input_dir: str, checkpoint_dir: str) -> None:
    spark = windowsketch.configure(SparkSession.builder.appName("windowsketch-streaming")) \
        .getOrCreate()
    query = start(spark, input_dir, checkpoint_dir,
                  lambda rows: [print(r.host, r.as_of, r.errors_last_hour, r.clients_last_hour,
                                      r.p99_ms_last_hour, r.stddev_ms_last_hour) for r in rows])
    query.awaitTermination()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
