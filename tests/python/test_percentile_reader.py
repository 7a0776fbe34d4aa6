"""The pure-Python reader of percentile sketches (format kind 4), no Spark: the golden files
answer as the JVM recorded and write back byte for byte; every sub-window query equals the
sorted window cut from the golden rows; merges, damaged bytes, wrong families and bad
arguments behave as in SQL; the column helpers agree with the reader."""
from __future__ import annotations

import datetime
import json
import math
import os
import re
import struct
import zlib

import numpy as np
import pandas as pd
import pytest

from golden_sketches import GOLDEN, golden_percentile_values, golden_rows, load_golden, micros_of_pos
from windowsketch.sketch import (InvalidSketchBytes, PercentileSketch, WindowSketch,
                                 estimate_column, percentile_column)

PERCENTAGES = [0.0, 0.01, 0.5, 0.9, 0.99, 1.0]
EPOCH = datetime.datetime(1970, 1, 1)
PERCENTILE_GOLDEN = os.path.join(GOLDEN, "percentile")


def load(name: str) -> bytes:
    with open(os.path.join(PERCENTILE_GOLDEN, f"{name}.bin"), "rb") as f:
        return f.read()


def nan_as_none(values):
    return [None if v is not None and math.isnan(v) else v for v in values]


def java_sorted(values):
    """Ascending in java.lang.Double.compare order: -0.0 before 0.0, NaN last."""
    return sorted(values, key=lambda x: (math.isnan(x), x, math.copysign(1.0, x)))


def exact(values, percentages=PERCENTAGES):
    ordered = java_sorted(values)
    if not ordered:
        return None
    return [ordered[max(math.ceil(p * len(ordered)) - 1, 0)] for p in percentages]


@pytest.mark.parametrize("name", ["time", "positions_merged", "empty", "compact_time",
                                  "compact_merged", "legacy_compact_time",
                                  "legacy_compact_merged", "legacy_replayed_compact_time",
                                  "legacy_replayed_compact_merged"])
def test_golden_files_answer_as_the_jvm_recorded_and_write_back(name):
    """Each golden file reads and answers as the JVM recorded, and writes back the same
    bytes; a legacy one (before the variance budgets, or replayed compact when written)
    writes back compacted to today's
    capacities (tests/spark/test_percentiles.py checks those bytes against the JVM's)."""
    with open(os.path.join(PERCENTILE_GOLDEN, "answers.json")) as f:
        recorded = json.load(f)["sketches"][name]
    blob = load(name)
    sketch = WindowSketch.from_bytes(blob)
    assert isinstance(sketch, PercentileSketch)
    assert (sketch.kind, sketch.is_compact) == (("percentile_compact", True) if "compact" in name
                                                 else ("percentile", False))
    answers = sketch.estimate(PERCENTAGES)
    assert [float(sketch.count())] + (nan_as_none(answers) if answers else
                                      [None] * len(PERCENTAGES)) == recorded
    if name.startswith("legacy_"):
        blob = sketch.to_bytes()
        assert PercentileSketch.from_bytes(blob).count() == recorded[0]
    assert sketch.to_bytes() == blob
    assert PercentileSketch.from_bytes(memoryview(bytearray(blob))).to_bytes() == blob


def test_every_sub_window_equals_the_sorted_window_of_the_golden_rows():
    """The time sketch holds every key's rows at pos * 30 s with a one-day window: any
    [as_of - w, as_of] cut from the rows, sorted, gives each answer, -0.0 and NaN included."""
    sketch = PercentileSketch.from_bytes(load("time"))
    _, pos, _ = golden_rows()
    values = golden_percentile_values(pos)
    times = np.array([micros_of_pos(p) for p in pos])
    now = int(times.max())
    assert sketch.now == datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + \
        datetime.timedelta(microseconds=now)
    checked = 0
    for after_minutes in (0, 1, 30, 600, 1439, 1441):
        for window_minutes in (1, 7, 60, 720, 1440):
            end = now + after_minutes * 60_000_000
            inside = (times >= end - window_minutes * 60_000_000) & (times <= end)
            want = exact(list(values[inside]))
            got = sketch.estimate(PERCENTAGES, as_of=EPOCH + datetime.timedelta(microseconds=end),
                                  sub_window=datetime.timedelta(minutes=window_minutes))
            assert (got is None and want is None) or (
                nan_as_none(got) == nan_as_none(want) and
                [math.copysign(1, v) for v in got] == [math.copysign(1, v) for v in want]), (
                after_minutes, window_minutes)
            checked += want is not None
    assert checked > 12


def test_merge_adds_rows_and_leaves_both_alone():
    a = PercentileSketch.from_bytes(load("positions_merged"))
    before = a.to_bytes()
    doubled = a.merge(a)
    assert a.to_bytes() == before and doubled.count() == 2 * a.count()
    assert nan_as_none(doubled.estimate(PERCENTAGES)) == nan_as_none(a.estimate(PERCENTAGES))
    empty = PercentileSketch.from_bytes(load("empty"))
    with pytest.raises(ValueError, match=r"cannot merge sketches of different parameters: "
                                         r"window=10 positions, eps=0.01 versus "
                                         r"window=1000 positions, eps=0.05"):
        empty.merge(a)
    with pytest.raises(ValueError, match=r"cannot merge: a count sketch \(window_sketch\) is "
                                         r"not a percentile sketch \(window_percentile_sketch\)"):
        a.merge(WindowSketch.from_bytes(load_golden("positions")))


def test_reading_as_one_family_refuses_another():
    with pytest.raises(InvalidSketchBytes, match=r"a count sketch \(window_sketch\) is not a "
                                                 r"percentile sketch"):
        PercentileSketch.from_bytes(load_golden("positions"))
    assert WindowSketch.from_bytes(load_golden("positions")).kind == "dyadic"


def with_checksum(body: bytes) -> bytes:
    return body + zlib.crc32(body).to_bytes(4, "big")


# window_percentile_sketch(ms, ts, 3) over (1, 30), (2, 10), (3, 20), (4, 50): a 21-byte
# header (magic, version, kind 4, window 3, eps, flags, now 4), the row count 3, then each
# row's step back in time and its value's 8 bytes, newest first.
SMALL = bytes.fromhex("570104033f847ae147ae147b010000000000000004030040490000000000000140"
                      "340000000000000140240000000000002c4bba53")


def row(step: int, value: float) -> bytes:
    return bytes([step]) + struct.pack(">d", value)


def test_damaged_bytes_get_the_jvms_messages():
    assert PercentileSketch.from_bytes(SMALL).estimate([0.0, 0.5, 1.0]) == [10.0, 20.0, 50.0]
    body = SMALL[:-4]
    for n in range(len(SMALL)):
        with pytest.raises(InvalidSketchBytes, match="^invalid sketch bytes: "):
            WindowSketch.from_bytes(SMALL[:n])
    blob = load("positions_merged")
    rng = np.random.default_rng(4)
    for position in rng.integers(0, len(blob), 200):
        damaged = bytearray(blob)
        damaged[position] ^= 1 << int(rng.integers(0, 8))
        with pytest.raises(InvalidSketchBytes):
            WindowSketch.from_bytes(bytes(damaged))
    header = body[:21]
    cases = {
        "invalid row count 16777217": header + b"\x81\x80\x80\x08" + body[22:],
        "a row lies outside the window": header + b"\x03" + row(3, 50.0),
        "rows out of order": header + b"\x02" + row(0, 20.0) + row(0, 10.0),
        "trailing bytes after the sketch": body + b"\x00",
        "invalid parameters window=3, eps=1.5":
            body[:4] + struct.pack(">d", 1.5) + body[12:],
        "truncated": header + b"\x01\x00\x40\x49",
    }
    for message, damaged in cases.items():
        with pytest.raises(InvalidSketchBytes, match=f"^invalid sketch bytes: {re.escape(message)}$"):
            WindowSketch.from_bytes(with_checksum(damaged))
    # Rows of one time in ascending order, -0.0 before 0.0 and NaN last, read and rewrite.
    ties = with_checksum(header + b"\x03" + row(0, -0.0) + row(0, 0.0) + row(0, math.nan))
    sketch = PercentileSketch.from_bytes(ties)
    assert sketch.to_bytes() == ties
    low, middle, high = sketch.estimate([0.0, 0.5, 1.0])
    assert (math.copysign(1, low), math.copysign(1, middle), math.isnan(high)) == (-1, 1, True)



def negative_nan_sketch() -> bytes:
    """SMALL's header over a NaN with its sign bit set (now) and 5.0 (a step earlier): Java
    ranks every NaN last, whatever its bits."""
    negative_nan = bytes.fromhex("fff8000000000000")
    return with_checksum(SMALL[:21] + b"\x02\x00" + negative_nan + b"\x01" + struct.pack(">d", 5.0))


def test_a_nan_with_its_sign_bit_set_ranks_last_as_in_java():
    sketch = PercentileSketch.from_bytes(negative_nan_sketch())
    low, high = sketch.estimate([0.0, 1.0])
    assert low == 5.0 and math.isnan(high)
    assert sketch.to_bytes() == negative_nan_sketch()  # its bits are kept


def test_bad_arguments_are_named():
    sketch = PercentileSketch.from_bytes(load("positions_merged"))
    for bad in ("p99", [], [0.5, "0.9"], True, None):
        with pytest.raises(TypeError, match="percentage must be a number in"):
            sketch.estimate(bad)
    with pytest.raises(ValueError, match=r"percentage must be in \[0, 1\], got 1.5"):
        sketch.estimate([0.5, 1.5])
    with pytest.raises(ValueError, match="is earlier than the sketch's latest ts"):
        sketch.estimate(0.5, as_of=0)
    with pytest.raises(ValueError, match="sub_window 1001 is longer than the sketch's window"):
        sketch.estimate(0.5, as_of=10**6, sub_window=1001)
    with pytest.raises(TypeError, match=r"bounds: a percentile sketch .* has no certified"):
        sketch.bounds()
    with pytest.raises(TypeError, match="percentage"):
        estimate_column([load("positions_merged")])


COLUMN_BLOBS = [load("time"), load("positions_merged"), load("empty"), None]
COLUMN_MEDIANS = [PercentileSketch.from_bytes(b).estimate(0.5)
                  for b in COLUMN_BLOBS[:3]] + [None]


def test_percentile_column_on_lists_and_pandas():
    blobs, want = COLUMN_BLOBS, COLUMN_MEDIANS
    assert want[2] is None and isinstance(want[0], float)
    assert percentile_column(blobs, 0.5) == want
    series = percentile_column(pd.Series(blobs, index=[5, 6, 7, 8], dtype=object), [0.5, 0.9])
    assert list(series.index) == [5, 6, 7, 8]
    assert series.tolist() == [PercentileSketch.from_bytes(b).estimate([0.5, 0.9])
                               for b in blobs[:3]] + [None]


def test_percentile_column_on_pyarrow():
    import pyarrow as pa

    blobs, want = COLUMN_BLOBS, COLUMN_MEDIANS
    arrow = percentile_column(pa.array(blobs, type=pa.binary()), 0.5)
    assert arrow.type == pa.float64() and arrow.to_pylist() == want
    several = percentile_column(pa.array(blobs, type=pa.binary()), [0.0])
    assert several.type == pa.list_(pa.float64())
