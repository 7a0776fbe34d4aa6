"""Structured Streaming with a checkpoint: stop, restart, and the counts carry on exactly
(within the bound) over all events, nothing lost and nothing counted twice; so do the
distinct counts, which equal the batch aggregate's over every event, the p99 latency,
which equals the exact p99 of each host's last hour, and its standard deviation, within
eps / 2 of the exact one."""
from __future__ import annotations

import datetime
import importlib.util
import json
import math
import os

import numpy as np

from conftest import ROOT, run_in_own_process
from moments_reference import Exact, check_statistic
from windowsketch.functions import approx_window_count_distinct

EXAMPLE = os.path.join(ROOT, "examples", "streaming_counts.py")


def load_example():
    spec = importlib.util.spec_from_file_location("streaming_counts", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_batch(directory, name, rows):
    with open(os.path.join(directory, name), "w") as f:
        for host, ts, status, client, ms in rows:
            f.write(json.dumps({"host": host, "ts": ts.isoformat(), "status": status,
                                "client": client, "ms": ms}) + "\n")


def make_events(rng, n, start):
    """Events in shuffled order: late arrivals within and across files."""
    seconds = rng.integers(0, 2 * 3600, n)
    latencies = np.round(rng.pareto(1.5, n) * 20, 1)
    rows = [(f"h{int(h)}", start + datetime.timedelta(seconds=int(s)),
             404 if rng.random() < 0.3 else 200, f"c{int(c)}", float(ms))
            for h, s, c, ms in zip(rng.integers(0, 5, n), seconds, rng.integers(0, 400, n),
                                   latencies)]
    return [rows[i] for i in rng.permutation(n)]


def latest_per_host(rows):
    latest = {}
    for host, ts, *_ in rows:
        latest[host] = max(latest.get(host, ts), ts)
    return latest


def exact_last_hour(rows):
    return {host: sum(1 for h, ts, s, *_ in rows
                      if h == host and s == 404 and ts >= now - datetime.timedelta(hours=1))
            for host, now in latest_per_host(rows).items()}


def exact_p99_last_hour(rows):
    """The value at rank ceil(0.99 n) of each host's latencies of the last hour."""
    out = {}
    for host, now in latest_per_host(rows).items():
        values = sorted(ms for h, ts, _, _, ms in rows
                        if h == host and ts >= now - datetime.timedelta(hours=1))
        out[host] = values[max(math.ceil(0.99 * len(values)) - 1, 0)]
    return out


def check_stddev_last_hour(rows, seen):
    """Each host's standard deviation of its last hour's latencies within eps / 2 (0.005)
    of the exact one, in exact arithmetic."""
    for host, now in latest_per_host(rows).items():
        hour_ago = now - datetime.timedelta(hours=1)
        values = [ms for h, ts, _, _, ms in rows if h == host and ts >= hour_ago]
        n, mean, m2 = Exact(values).of(np.ones(len(values), dtype=bool))
        check_statistic("stddev_samp", seen[host][3], None, None, n, mean, m2, 0.01, host)


def batch_distinct_last_hour(spark, rows):
    """The batch aggregate over every event: the same registers a correct stream holds."""
    df = spark.createDataFrame([(h, ts, c) for h, ts, _, c, _ in rows],
                               "host STRING, ts TIMESTAMP, client STRING")
    return dict(df.groupBy("host").agg(
        approx_window_count_distinct("client", "ts", "1 hour")).collect())


def run_until_caught_up(spark, example, source, checkpoint, seen):
    query = example.start(spark, source, checkpoint,
                          lambda rows: seen.update(
                              {r.host: (r.errors_last_hour, r.clients_last_hour,
                                        r.p99_ms_last_hour, r.stddev_ms_last_hour)
                               for r in rows}),
                          available_now=True)
    query.awaitTermination(600)
    assert query.exception() is None


RESTART = """
import importlib.util, json
from pyspark.sql import SparkSession
import windowsketch

spec = importlib.util.spec_from_file_location("streaming_counts", {example!r})
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
spark = windowsketch.configure(
    SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    .config("spark.sql.session.timeZone", "UTC")).getOrCreate()
seen = {{}}
query = example.start(spark, {source!r}, {checkpoint!r},
                      lambda rows: seen.update(
                          {{r.host: (r.errors_last_hour, r.clients_last_hour,
                                     r.p99_ms_last_hour, r.stddev_ms_last_hour)
                            for r in rows}}),
                      available_now=True)
query.awaitTermination(600)
assert query.exception() is None
print("SEEN", json.dumps(seen))
spark.stop()
"""


def test_counts_survive_a_restart_from_the_checkpoint(spark, tmp_path):
    example = load_example()
    source, checkpoint = str(tmp_path / "in"), str(tmp_path / "checkpoint")
    os.makedirs(source)
    rng = np.random.default_rng(17)
    t0 = datetime.datetime(2024, 6, 1, 8)
    first = make_events(rng, 3000, t0)
    # The second wave overlaps the first in time, so the last hour after the restart holds
    # events from both: lost state or replayed files would both show.
    second = make_events(rng, 3000, t0 + datetime.timedelta(minutes=20))
    for i, chunk in enumerate(np.array_split(np.arange(len(first)), 3)):
        write_batch(source, f"a{i}.json", [first[j] for j in chunk])

    seen: dict = {}
    run_until_caught_up(spark, example, source, checkpoint, seen)
    before = exact_last_hour(first)
    for host, exact in before.items():
        assert abs(seen[host][0] - exact) <= 0.01 * exact, (host, seen[host], exact)
    assert {h: d for h, (_, d, _, _) in seen.items()} == batch_distinct_last_hour(spark, first)
    assert {h: p for h, (_, _, p, _) in seen.items()} == exact_p99_last_hour(first)
    check_stddev_last_hour(first, seen)

    for i, chunk in enumerate(np.array_split(np.arange(len(second)), 3)):
        write_batch(source, f"b{i}.json", [second[j] for j in chunk])
    # A new process, as after a crash or a redeploy: only the checkpoint carries the state.
    out = run_in_own_process(RESTART.format(example=EXAMPLE, source=source,
                                            checkpoint=checkpoint), tmp_path)
    seen.update({h: tuple(v) for h, v in
                 json.loads(out.split("SEEN ", 1)[1].splitlines()[0]).items()})

    after = exact_last_hour(first + second)
    assert all(after[h] > exact_last_hour(second)[h] + 20 for h in after)
    for host, exact in after.items():
        assert abs(seen[host][0] - exact) <= 0.01 * exact, (host, seen[host], exact)
    assert min(after.values()) > 50
    # Distinct clients: the batch answer over both waves, so neither wave was lost or
    # doubled; the waves' windows differ, so an answer from one wave alone would show.
    distinct_after = batch_distinct_last_hour(spark, first + second)
    assert {h: d for h, (_, d, _, _) in seen.items()} == distinct_after
    assert distinct_after != batch_distinct_last_hour(spark, second)
    assert min(distinct_after.values()) > 200
    # The p99 of each host's last hour, over both waves: exact, so a lost or doubled wave
    # (or a window cut from one wave's rows) would show.
    p99_after = exact_p99_last_hour(first + second)
    assert {h: p for h, (_, _, p, _) in seen.items()} == p99_after
    assert p99_after != exact_p99_last_hour(second)
    check_stddev_last_hour(first + second, seen)
    print(f"\nstreaming restart: per-host exact {sorted(after.items())}, "
          f"approx {sorted(seen.items())}")
