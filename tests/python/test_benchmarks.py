"""The benchmark harness keeps working: its quick mode runs end to end (figures are for
docs/performance.md, never asserted here)."""
from __future__ import annotations

import csv
import os
import subprocess
import sys

from conftest import ROOT


def test_quick_benchmark_writes_report_csv_and_plots(tmp_path):
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=1500, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-4000:]
    report = (out / "report.md").read_text()
    for section in ("Core throughput", "Running windows", "Moving sums in running frames",
                    "Distinct values in running windows",
                    "Distinct values, GROUP BY", "Distinct-count sketch size", "GROUP BY",
                    "GROUP BY, every family against Spark's nearest aggregate",
                    "p99 in running windows", "Percentiles in GROUP BY",
                    "Percentile sketch size (compact mode) against the values in its window",
                    "Standard deviation in running windows", "Standard deviations in GROUP BY",
                    "Top 5 values in running windows", "Top 5 values in GROUP BY",
                    "Top-k sketch size at a window of 10^9 positions",
                    "Samples of 5 rows in running windows", "Samples of 5 rows in GROUP BY",
                    "Sample sketch size at a window of 10^9 positions",
                    "Seen before in running windows", "Filter sketch bytes against the distinct",
                    "De-duplicating a stream",
                    "State size", "Accuracy",
                    "Structured Streaming state", "Live counts under key churn",
                    "Sketch columns in Spark", "Stored sketch columns read in Python", "Scaling",
                    "Memory per group against the rows in its window (KB of heap)",
                    "Running frames past the exact limits",
                    "100,000 rows in two keys' one window, the default driver"):
        assert f"## {section}" in report
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["section"] for r in rows} == {
        "core", "window", "sums", "distinct", "distinct groupby", "distinct state", "groupby",
        "groupby families", "state",
        "percentiles", "percentile state", "moments", "top k", "samples", "filters",
        "deduplication", "memory per group",
        "bounded frames", "big window",
        "accuracy", "streaming", "live", "sketch columns", "stored", "scaling"}
    assert [r for r in rows if not float(r["value"]) >= 0] == []
    # Every family's GROUP BY beside Spark's nearest aggregate (quick: 10^4 keys).
    ratios = {r["case"] for r in rows if r["measure"] == "ours / spark"}
    assert ratios == {f"10000 keys {family}" for family in
                      ("count", "sum", "distinct", "percentile", "moments", "top_k", "sample")}
    # De-duplication: no id delivered twice by either query.
    assert [r["value"] for r in rows if r["measure"] == "ids delivered twice"] == ["0", "0"]
    # The moments' error at mean 10^9 within eps / 2; the prefix difference's far from it.
    errors = {r["case"]: float(r["value"]) for r in rows if r["measure"].startswith("worst relative")}
    assert errors["approx_window_stddev"] <= 0.005 < errors["exact prefix difference"]
    # Both live operators keep exactly the live keys, counted from the events after every batch.
    (gap,) = [r["value"] for r in rows if r["measure"].startswith("largest |state rows - live")]
    assert float(gap) == 0
    # Window queries sort, and the exact GROUP BY and approx_count_distinct hash (and join),
    # all in memory Spark manages: a zero there would mean the status-store lookup missed
    # the query's tasks. Quick mode runs GROUP BY at one key count, five queries.
    peaks = {r["case"]: float(r["value"]) for r in rows if r["measure"] == "peak task memory"}
    assert len(peaks) == 5 * 2 + 5
    hashed = ("exact two-pass", "approx_count_distinct (Spark's sketch)")
    assert all(v > 0 for case, v in peaks.items()
               if case.startswith("N=") or case.endswith(hashed))
    # Executor memory, polled every 10 ms, beside each GROUP BY query of both tables (quick
    # tasks can end between two polls, so only some must have seen memory in use).
    executor = {(r["section"], r["case"]): float(r["value"]) for r in rows
                if r["measure"] == "peak execution memory"}
    assert len(executor) == 5 + 2 and max(executor.values()) > 0
    # The compact percentile sketch at 10^6 values: about 600 KB against 10 MB exactly.
    (held,) = [float(r["value"]) for r in rows
               if r["section"] == "percentile state" and r["case"] == "n=1000000"
               and r["measure"] == "sketch bytes"]
    assert held < 10**6
    # Every family's heap per group at 10^4 rows of one window, in both orders, within 2 MB.
    heap = {r["case"]: float(r["value"]) for r in rows
            if r["section"] == "memory per group" and r["measure"] == "heap at 10000 rows"}
    assert len(heap) == 14 and all(v < 2 * 2**20 for v in heap.values()), heap
    # A live key's state at 10^4 rows, every family, top values past 128 tick slices and
    # moments past 1,024: a count's is its histogram and the 100 rows after the watermark, a
    # few KB; the leveled counts' and the moments' buckets within the count's + 64 KB;
    # percentiles at 1,000 tick slices smaller than their compact mode (past 1,024).
    live = {r["case"]: float(r["value"]) for r in rows
            if r["section"] == "memory per group" and r["measure"] == "bytes at 10000 rows"}
    assert len(live) == 11 and live["count live state"] < 4096, live
    for unsliced in ("top_k unsliced live state", "moments unsliced live state"):
        assert live[unsliced] < live["count live state"] + 64 * 1024, live
    assert live["percentile 1000 slices live state"] < live["percentile unsliced live state"], live
    for plot in ("window_time.png", "state_size.png", "memory_per_group.png"):
        assert (out / plot).stat().st_size > 5000
