"""The `windowsketch` console script and the demo."""
from __future__ import annotations

import os
import subprocess

import windowsketch
from windowsketch import demo


def run_cli(*args, cwd=None):
    return subprocess.run(["windowsketch", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd, stdin=subprocess.DEVNULL)


def test_jar_path_prints_the_bundled_jar():
    result = run_cli("jar-path")
    assert result.returncode == 0
    path = result.stdout.strip()
    assert path == windowsketch.jar_path() and os.path.isfile(path) and path.endswith(".jar")


def test_unknown_arguments_are_rejected():
    result = run_cli("jar-path", "--bogus")
    assert result.returncode == 2 and "unrecognized arguments" in result.stderr


def test_demo_comparison_holds_the_bound_on_every_row(spark):
    rows, reports, rows_per_second = demo.compare(spark, eps=0.01)
    assert len(rows) == 30_969
    assert sum(r.response == 404 for r in rows) == 221
    for r in rows:
        for label, _ in demo.MEASURES:
            a, e = r[f"approx_{label}"], r[f"exact_{label}"]
            assert abs(a - e) <= 0.01 * e
    by_label = {m.label: m for m in reports}
    assert by_label["requests"].max_exact > 500  # large enough for the sketch to merge
    assert 0 < by_label["requests"].worst_error <= 0.01
    assert by_label["requests"].max_sketch_bytes < 8 * by_label["requests"].max_exact
    text = demo.render(rows, reports, rows_per_second, 0.01)
    assert "held" in text and "BROKEN" not in text


def test_demo_command_runs_end_to_end(tmp_path):
    result = run_cli("demo", "--eps", "0.05", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "30,969 requests, 221 of them 404s" in result.stdout
    assert "on every row: held" in result.stdout
