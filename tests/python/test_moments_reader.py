"""The pure-Python reader of moments sketches (format kind 5), no Spark: the golden files
answer as the JVM recorded and write back byte for byte; sub-window queries of the golden
time sketch hold the guarantee against the golden rows; merges, damaged bytes, wrong
families and bad arguments behave as in SQL; the column helper agrees with the reader."""
from __future__ import annotations

import datetime
import json
import math
import os
import struct
import zlib

import numpy as np
import pandas as pd
import pytest

from golden_sketches import GOLDEN, golden_moments_values, golden_rows, load_golden, micros_of_pos
from moments_reference import STATS, Exact, check_statistic
from windowsketch.sketch import InvalidSketchBytes, MomentsSketch, WindowSketch, moments_column

MOMENTS_GOLDEN = os.path.join(GOLDEN, "moments")
EPOCH = datetime.datetime(1970, 1, 1)


def load(name: str) -> bytes:
    with open(os.path.join(MOMENTS_GOLDEN, f"{name}.bin"), "rb") as f:
        return f.read()


def answers(sketch: MomentsSketch, as_of=None, sub_window=None) -> list:
    out: list = []
    for stat in STATS:
        b = sketch.bounds(stat, as_of, sub_window)
        out += [None] * 3 if b is None else list(b)
    return out


@pytest.mark.parametrize("name", ["time", "positions_merged", "empty"])
def test_golden_files_answer_as_the_jvm_recorded_and_write_back(name):
    with open(os.path.join(MOMENTS_GOLDEN, "answers.json")) as f:
        recorded = json.load(f)["sketches"][name]
    blob = load(name)
    sketch = WindowSketch.from_bytes(blob)
    assert isinstance(sketch, MomentsSketch) and sketch.kind == "moments"
    assert answers(sketch) == recorded[2:]
    assert sketch.to_bytes() == blob
    assert MomentsSketch.from_bytes(memoryview(bytearray(blob))).to_bytes() == blob


def test_every_sub_window_of_the_golden_time_sketch_holds_the_guarantee():
    """The time sketch holds every golden row at pos * 30 s with a one-day window, eps 0.1:
    any [as_of - w, as_of] cut from the rows gives each statistic within the guarantee and
    inside its bracket."""
    sketch = MomentsSketch.from_bytes(load("time"))
    _, pos, _ = golden_rows()
    values = golden_moments_values(pos)
    exact = Exact(values)
    times = np.array([micros_of_pos(p) for p in pos])
    now = int(times.max())
    checked = 0
    for after_minutes in (0, 1, 30, 600, 1439, 1441):
        for window_minutes in (1, 7, 60, 720, 1440):
            end = now + after_minutes * 60_000_000
            inside = (times >= end - window_minutes * 60_000_000) & (times <= end)
            n, mean, m2 = exact.of(inside)
            as_of = EPOCH + datetime.timedelta(microseconds=end)
            sub = datetime.timedelta(minutes=window_minutes)
            for stat in STATS:
                check_statistic(stat, *(sketch.bounds(stat, as_of, sub) or (None,) * 3),
                                n, mean, m2, 0.1, (after_minutes, window_minutes, stat))
            assert sketch.estimate("stddev", as_of, sub) == (
                None if n < 2 else sketch.bounds("stddev_samp", as_of, sub)[0])
            checked += n > 1
    assert checked > 12


def test_merge_holds_both_and_leaves_them_alone():
    a = MomentsSketch.from_bytes(load("positions_merged"))
    before = a.to_bytes()
    doubled = a.merge(a)
    assert a.to_bytes() == before
    # Every value twice: the mean and the population variance stay; the count doubles.
    assert doubled.estimate("avg") == pytest.approx(a.estimate("avg"), rel=0.05)
    keys, pos, _ = golden_rows()
    values = golden_moments_values(pos)
    inside = (keys > 0) & (pos > pos[keys > 0].max() - 1000)
    n, mean, m2 = Exact(np.concatenate([values, values])).of(np.concatenate([inside, inside]))
    for stat in STATS:
        check_statistic(stat, *doubled.bounds(stat), n, mean, m2, 0.3, stat)
    assert MomentsSketch.from_bytes(doubled.to_bytes()).to_bytes() == doubled.to_bytes()
    empty = MomentsSketch.from_bytes(load("empty"))
    with pytest.raises(ValueError, match=r"cannot merge sketches of different parameters: "
                                         r"window=10 positions, eps=0.01 versus "
                                         r"window=1000 positions, eps=0.3"):
        empty.merge(a)
    with pytest.raises(ValueError, match=r"cannot merge: a count sketch \(window_sketch\) is "
                                         r"not a moments sketch \(window_moments_sketch\)"):
        a.merge(WindowSketch.from_bytes(load_golden("positions")))


def test_reading_as_one_family_refuses_another():
    with pytest.raises(InvalidSketchBytes, match=r"a count sketch \(window_sketch\) is not a "
                                                 r"moments sketch"):
        MomentsSketch.from_bytes(load_golden("positions"))


def with_checksum(body: bytes) -> bytes:
    return body + zlib.crc32(body).to_bytes(4, "big")


def varint_end(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1


def test_damaged_bytes_are_refused_by_name():
    blob = load("positions_merged")
    body = blob[:-4]
    # After the 22-byte header (magic, version, kind, window (2 bytes), eps, flags, now): c
    # (8 bytes), the node count, then the nodes: level, step back, n, mean, M2.
    nodes_at = 22 + 8
    first = varint_end(body, nodes_at)
    first_mean = varint_end(body, varint_end(body, first + 1))
    damaged = {
        "checksum mismatch": blob[:-1] + bytes([blob[-1] ^ 1]),
        "invalid collapse parameter": with_checksum(body[:22] + struct.pack(">d", 0.1) + body[30:]),
        "invalid node count": with_checksum(body[:nodes_at] + b"\xff\x7f" + body[first:]),
        "invalid moments at node 0": with_checksum(body[:first_mean] + struct.pack(">d", math.inf)
                                                   + body[first_mean + 8:]),
        "trailing bytes after the sketch": with_checksum(body + b"\x00"),
    }
    for message, bad in damaged.items():
        with pytest.raises(InvalidSketchBytes, match=f"invalid sketch bytes: {message}"):
            MomentsSketch.from_bytes(bad)


def test_bad_arguments_are_named():
    sketch = MomentsSketch.from_bytes(load("positions_merged"))
    with pytest.raises(ValueError, match="statistic must be one of avg, mean"):
        sketch.estimate("median")
    with pytest.raises(TypeError, match="as_of: the sketch counts positions"):
        sketch.estimate("avg", as_of=datetime.datetime(2025, 1, 1))
    with pytest.raises(ValueError, match="as_of .* is earlier than the sketch's latest ts"):
        sketch.estimate("avg", as_of=0)
    with pytest.raises(ValueError, match="sub_window 2000 is longer than the sketch's window"):
        sketch.estimate("avg", as_of=10**6, sub_window=2000)
    with pytest.raises(TypeError, match="estimate"):
        sketch.estimate()  # type: ignore[call-arg]


def test_moments_column_on_lists_and_pandas():
    blobs = [load("positions_merged"), None, load("empty"), load("time")]
    want = [None if b is None else MomentsSketch.from_bytes(b).estimate("stddev") for b in blobs]
    assert moments_column(blobs, "stddev") == want
    assert want[1] is None and want[2] is None and want[0] > 0
    series = moments_column(pd.Series(blobs, index=[5, 6, 7, 8], dtype=object), "avg")
    assert list(series.index) == [5, 6, 7, 8]
    assert series[5] == MomentsSketch.from_bytes(blobs[0]).estimate("avg") and series[6] is None
