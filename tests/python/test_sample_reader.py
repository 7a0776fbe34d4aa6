"""The pure-Python reader of sample sketches (format kind 10), no Spark: the golden files
answer as the JVM recorded, with values of their own Python type, and write back byte for
byte; merges keep what both hold; damaged, forged and foreign bytes are refused by name."""
from __future__ import annotations

import datetime
import decimal
import json
import os

import pytest

from golden_sketches import GOLDEN, golden_rows
from sample_reference import with_a_dominated_row
from windowsketch.sketch.sample import priority
from windowsketch.sketch import InvalidSketchBytes, SampleSketch, WindowSketch

SAMPLE_GOLDEN = os.path.join(GOLDEN, "sample")
WHEN = datetime.timedelta


def load(name: str) -> bytes:
    with open(os.path.join(SAMPLE_GOLDEN, f"{name}.bin"), "rb") as f:
        return f.read()


def recorded(name: str) -> list:
    with open(os.path.join(SAMPLE_GOLDEN, "answers.json")) as f:
        return json.load(f)["sketches"][name]


def text(value) -> str:
    """A Python value as CAST(value AS STRING) writes it."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "{" + ", ".join(text(v) for v in value.values()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(text(v) for v in value) + "]"
    return str(value)


def python_answers(sketch: SampleSketch) -> list:
    """The queries of tests/spark/test_sample.py's golden_sample_answers, in Python."""
    if sketch.now is None:
        return [sketch.sample(), sketch.sample(2)]
    later = sketch.now + (WHEN(seconds=200) if sketch.time_unit == "microseconds" else 200)
    short = WHEN(hours=1) if sketch.time_unit == "microseconds" else 50
    return [sketch.sample(), sketch.sample(2), sketch.sample(3, as_of=later),
            sketch.sample(2, as_of=sketch.now, sub_window=short)]


@pytest.mark.parametrize("name", ["time", "positions_merged", "struct", "empty"])
def test_golden_files_answer_as_the_jvm_recorded_and_write_back(name):
    blob = load(name)
    sketch = WindowSketch.from_bytes(blob)
    assert isinstance(sketch, SampleSketch) and sketch.kind == "sample"
    assert [[text(v) for v in answer] for answer in python_answers(sketch)] == recorded(name)
    assert sketch.to_bytes() == blob


def test_values_come_back_typed_as_the_rows_held_them():
    sketch = WindowSketch.from_bytes(load("struct"))
    assert (sketch.k, sketch.seed) == (4, -1)
    assert sketch.value_type == ("struct<pos:bigint,x:string,a:array<int>,d:decimal(28,6),"
                                 "day:date>")
    keys, pos, _ = golden_rows()
    key_of = dict(zip(pos.tolist(), keys.tolist()))
    for value in sketch.sample():
        assert value["a"] == [key_of[value["pos"]], None]
        assert value["d"] == (decimal.Decimal(value["pos"]) / 3).quantize(decimal.Decimal("1e-6"))
        assert value["day"] == datetime.date(1970, 1, 1) + datetime.timedelta(days=value["pos"])
        assert value["x"].startswith("/p")
    times = WindowSketch.from_bytes(load("time"))
    assert times.now.tzinfo is datetime.timezone.utc and times.window == WHEN(days=1)
    assert all(isinstance(v, str) for v in times.sample())


def test_merge_holds_both_and_leaves_them_alone():
    blob = load("positions_merged")
    sketch = WindowSketch.from_bytes(blob)
    twice = sketch.merge(sketch)
    assert sketch.to_bytes() == blob  # untouched
    # Every row twice: equal rows join, so each sampled row comes with its copy.
    once = sketch.sample(4)
    assert twice.sample(8) == sorted(once + once, key=lambda v: once.index(v))
    with pytest.raises(ValueError, match="cannot merge sketches of different parameters"):
        sketch.merge(WindowSketch.from_bytes(load("struct")))
    with pytest.raises(ValueError, match="cannot merge: a count sketch .window_sketch. is not a sample sketch"):
        sketch.merge(WindowSketch.from_bytes(load_golden_count()))


def load_golden_count() -> bytes:
    with open(os.path.join(GOLDEN, "positions.bin"), "rb") as f:
        return f.read()


def test_damaged_and_forged_bytes_are_refused_by_name():
    blob = load("time")
    for i in range(2, len(blob) - 4, 7):
        damaged = bytearray(blob)
        damaged[i] ^= 0x10
        with pytest.raises(InvalidSketchBytes):
            WindowSketch.from_bytes(bytes(damaged))
    sketch = WindowSketch.from_bytes(blob)
    # A row that the others dominate, with a valid checksum: not a state a sketch writes.
    forged = with_a_dominated_row(sketch)
    with pytest.raises(InvalidSketchBytes, match="1 rows are expired, dominated or repeated"):
        WindowSketch.from_bytes(forged)
    with pytest.raises(InvalidSketchBytes, match="is not a sample sketch"):
        SampleSketch.from_bytes(load_golden_count())


def test_bad_arguments_are_named():
    sketch = WindowSketch.from_bytes(load("time"))
    for k in (0, 6, True, 2.0):
        with pytest.raises(ValueError, match=r"k must be an int in \[1, 5\]"):
            sketch.sample(k)
    with pytest.raises(ValueError, match="earlier than the sketch's latest ts"):
        sketch.sample(as_of=sketch.now - WHEN(seconds=1))
    with pytest.raises(ValueError, match="longer than the sketch's window"):
        sketch.sample(as_of=sketch.now, sub_window=WHEN(days=2))
    with pytest.raises(TypeError, match="has no estimate"):
        sketch.estimate()


@pytest.mark.parametrize("k", [1, 2, 5])
def test_pruning_keeps_exactly_the_rows_fewer_than_k_rows_dominate(k):
    """The reader's prune (what a merge and every read's check use) against the definition,
    brute force: a row stays unless rows at its time or later, ranked above it, hold k
    copies; rows equal in time and value join. Times with many rows and repeated values."""
    import random

    from windowsketch.sketch.sample import _prune, _Row

    rng = random.Random(41)
    for _ in range(200):
        rows = []
        for _ in range(rng.randint(1, 40)):
            ts, value = rng.randint(0, 12), bytes([rng.randint(0, 5)])
            rows.append(_Row(ts, value, rng.randint(1, 3), priority(9, ts, value)))
        joined: dict[tuple[int, bytes], _Row] = {}
        for r in rows:
            key = (r.ts, r.value)
            joined[key] = r._replace(copies=joined[key].copies + r.copies) if key in joined else r
        expected = sorted((r for r in joined.values()
                           if sum(o.copies for o in joined.values()
                                  if o.ts >= r.ts and o.rank > r.rank) < k),
                          key=lambda r: (r.ts, r.rank))
        assert _prune(rows, lambda t: t >= 2, k) == [r for r in expected if r.ts >= 2]


def test_sample_column_on_lists_and_pandas():
    import pandas as pd

    from windowsketch.sketch import sample_column

    blobs = [load("time"), None, load("positions_merged")]
    expected = [WindowSketch.from_bytes(load("time")).sample(2), None,
                WindowSketch.from_bytes(load("positions_merged")).sample(2)]
    assert sample_column(blobs, 2) == expected
    series = sample_column(pd.Series(blobs, index=[7, 8, 9]), 2)
    assert list(series.index) == [7, 8, 9] and series.tolist() == expected


def test_sample_column_on_pyarrow():
    import pyarrow as pa

    from windowsketch.sketch import sample_column

    strings = sample_column(pa.array([load("time"), None]), 3)
    assert strings.type == pa.list_(pa.string()) and strings.to_pylist()[1] is None
    assert strings.to_pylist()[0] == WindowSketch.from_bytes(load("time")).sample(3)
