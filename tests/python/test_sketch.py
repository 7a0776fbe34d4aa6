"""The pure-Python sketch reader (windowsketch.sketch) on its own: the golden files answer
as the JVM recorded and write back byte for byte, damaged bytes and bad arguments get
clear errors, and the column helpers agree with the reader. No Spark here: the
cross-language tests are in test_sketch_jvm.py."""
from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import zlib

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from golden_sketches import (SKETCHES, Query, golden_rows, load_answers, load_golden, micros_of_pos,
                             written_golden)
from windowsketch.sketch import (InvalidSketchBytes, WindowSketch, bounds_column, estimate_column,
                                 merge_column)

UTC = datetime.timezone.utc


def query_arguments(name: str, query: Query) -> dict:
    """A recorded query as estimate()/bounds() keyword arguments."""
    if query.at is not None:
        return {"as_of": query.at, "sub_window": query.sub_window}
    if query.after is None:
        return {}
    _, pos, _ = golden_rows()
    if SKETCHES[name].column == "ts":
        latest = datetime.datetime(1970, 1, 1) + datetime.timedelta(
            microseconds=micros_of_pos(pos.max()))
        return {"as_of": latest + query.after, "sub_window": query.sub_window}
    return {"as_of": int(pos.max()) + query.after, "sub_window": query.sub_window}


def python_answers(name: str, sketch: WindowSketch) -> list[list[int]]:
    out = []
    for query in SKETCHES[name].queries:
        arguments = query_arguments(name, query)
        out.append([sketch.estimate(**arguments)] if sketch.is_distinct
                   else list(sketch.bounds(**arguments)))
    return out


@pytest.mark.parametrize("name", sorted(SKETCHES))
def test_golden_files_answer_as_the_jvm_recorded(name):
    sketch = WindowSketch.from_bytes(load_golden(name))
    assert python_answers(name, sketch) == load_answers()["sketches"][name]


@pytest.mark.parametrize("name", sorted(SKETCHES))
def test_golden_files_write_back_byte_for_byte(name):
    blob = load_golden(name)
    written = load_golden(written_golden(name))  # an earlier build's bytes: today's kind
    assert WindowSketch.from_bytes(blob).to_bytes() == written
    # bytearray and memoryview read the same.
    assert WindowSketch.from_bytes(memoryview(bytearray(blob))).to_bytes() == written


def test_golden_files_cover_every_kind_and_edge():
    sketches = {name: WindowSketch.from_bytes(load_golden(name)) for name in SKETCHES}
    assert {s.kind for s in sketches.values()} == {"histogram", "dyadic", "distinct"}
    assert {s.time_unit for s in sketches.values()} == {"microseconds", "positions"}
    assert sketches["empty"].now is None and sketches["empty"].estimate() == 0
    assert sketches["one_event"].bounds() == (1, 1, 1)
    histogram = sketches["histogram_positions"]
    assert histogram._merge_at() - 1 in histogram._sizes, "a full level"
    node_cap = sketches["node_cap"]
    assert len(node_cap._nodes) > 3000 and node_cap._invariant > 2 * node_cap.eps, \
        "the node cap coarsened the invariant"


@pytest.mark.parametrize("name, kinds", [("distinct_positions", {7}), ("distinct_time", {3, 7})])
def test_distinct_sketches_are_written_in_the_shorter_kind(name, kinds, monkeypatch):
    """Around the point where kind 7 (sparse) stops being shorter than kind 3 (dense):
    the writer picks the shorter bytes (kind 3 on a tie), and both kinds read back to the
    same registers and estimates."""
    from windowsketch.sketch import distinct
    from windowsketch.sketch.distinct import DistinctSketch

    full = WindowSketch.from_bytes(load_golden(name))
    assert isinstance(full, DistinctSketch)
    m = len(full._registers)
    held = [j for j, pairs in enumerate(full._registers) if pairs]
    picked = set()
    for keep in sorted({1, len(held) // 4, len(held) // 3, len(held) // 2, len(held)}
                       | set(range(m // 2 - 8, m // 2 + 8))):
        sketch = WindowSketch.from_bytes(load_golden(name))
        kept = set(held[:keep])
        sketch._registers = [pairs if j in kept else [] for j, pairs in enumerate(sketch._registers)]
        written = {}
        for kind in (3, 7):
            monkeypatch.setattr(distinct, "_sparse_is_shorter", lambda inside, k=kind: k == 7)
            written[kind] = sketch.to_bytes()
        monkeypatch.undo()
        chosen = sketch.to_bytes()
        assert chosen == (written[7] if len(written[7]) < len(written[3]) else written[3]), keep
        picked.add(chosen[2])
        dense, sparse = (WindowSketch.from_bytes(written[k]) for k in (3, 7))
        assert dense._registers == sparse._registers == sketch._registers
        assert dense.estimate() == sparse.estimate() == sketch.estimate()
    assert picked == kinds


def test_parameters_read_as_given_to_the_aggregate():
    _, pos, _ = golden_rows()
    time = WindowSketch.from_bytes(load_golden("time"))
    assert time.window == datetime.timedelta(days=1) and time.eps == 0.01
    assert time.time_unit == "microseconds" and time.kind == "dyadic" and not time.is_distinct
    assert time.now == datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(
        microseconds=micros_of_pos(pos.max()))
    positions = WindowSketch.from_bytes(load_golden("distinct_positions"))
    assert (positions.window, positions.eps, positions.now, positions.time_unit) == \
        (1000, 0.02, int(pos.max()), "positions")
    assert positions.is_distinct and "distinct" in repr(positions)


def test_as_of_accepts_naive_aware_and_date_alike():
    sketch = WindowSketch.from_bytes(load_golden("time"))
    naive = sketch.now.replace(tzinfo=None) + datetime.timedelta(hours=5)
    aware = naive.replace(tzinfo=UTC).astimezone(datetime.timezone(datetime.timedelta(hours=2)))
    assert sketch.bounds(as_of=naive) == sketch.bounds(as_of=aware)
    day = naive.date() + datetime.timedelta(days=1)
    assert sketch.bounds(as_of=day) == sketch.bounds(
        as_of=datetime.datetime(day.year, day.month, day.day))
    assert sketch.bounds(as_of=pd.Timestamp(naive)) == sketch.bounds(as_of=naive)


def test_query_errors_name_the_argument():
    time = WindowSketch.from_bytes(load_golden("time"))
    positions = WindowSketch.from_bytes(load_golden("positions"))
    with pytest.raises(TypeError, match="as_of: the sketch counts time, so as_of must be a "
                                        "datetime or a date, got int"):
        time.estimate(as_of=5)
    with pytest.raises(TypeError, match="as_of: the sketch counts positions, so as_of must be "
                                        "an int, got datetime"):
        positions.estimate(as_of=datetime.datetime(2025, 1, 1))
    with pytest.raises(TypeError, match="as_of: .* got bool"):
        positions.estimate(as_of=True)
    with pytest.raises(ValueError, match=r"as_of \(1970-01-20 .*\) is earlier than the "
                                         r"sketch's latest ts \(1970-01-20 .*\); the sketch "
                                         "cannot leave out events after as_of"):
        time.estimate(as_of=time.now - datetime.timedelta(microseconds=1))
    with pytest.raises(ValueError, match=r"as_of \(56999\) is earlier than the sketch.s latest ts \(57105\)"):
        positions.estimate(as_of=56999)
    with pytest.raises(ValueError, match=r"sub_window datetime.timedelta\(days=1, "
                                         r"microseconds=1\) is longer than the sketch's window"):
        time.estimate(sub_window=datetime.timedelta(days=1, microseconds=1))
    with pytest.raises(TypeError, match="sub_window: the sketch counts time, so sub_window "
                                        "must be a timedelta, got int"):
        time.estimate(sub_window=60)
    with pytest.raises(ValueError, match="sub_window must be a positive number of positions, "
                                         "got 0"):
        positions.bounds(sub_window=0)
    with pytest.raises(ValueError, match="sub_window must be a positive duration"):
        time.bounds(sub_window=datetime.timedelta(0))
    with pytest.raises(TypeError, match=r"bounds: a distinct-count sketch \(window_distinct_sketch\)"
                                        r" has no certified bounds; use estimate\(\)"):
        WindowSketch.from_bytes(load_golden("distinct_time")).bounds()
    histogram = WindowSketch.from_bytes(load_golden("histogram_positions"))
    with pytest.raises(ValueError, match="sub-window queries need a sketch made by "
                                         "window_sketch; this one is a time-ordered histogram"):
        histogram.bounds(sub_window=999)
    assert histogram.bounds(sub_window=1000) == histogram.bounds()
    with pytest.raises(TypeError, match="use WindowSketch.from_bytes"):
        WindowSketch()
    with pytest.raises(TypeError, match="data must be bytes .* got str"):
        WindowSketch.from_bytes("W\x01")


def test_merge_errors_say_what_cannot_merge():
    time, positions, distinct, histogram = (
        WindowSketch.from_bytes(load_golden(name))
        for name in ("time", "positions", "distinct_time", "histogram_positions"))
    with pytest.raises(ValueError, match=r"cannot merge sketches of different parameters: "
                                         r"window=86400000001 microseconds, eps=0.01 versus "
                                         r"window=1000 positions, eps=0.05"):
        time.merge(positions)
    # Named as the SQL merge names the sketch it cannot add, the other one.
    with pytest.raises(ValueError, match=r"cannot merge: a distinct-count sketch "
                                         r"\(window_distinct_sketch\) is not a count sketch"):
        time.merge(distinct)
    with pytest.raises(ValueError, match=r"cannot merge: a count sketch \(window_sketch\) is "
                                         r"not a distinct-count sketch"):
        distinct.merge(time)
    with pytest.raises(ValueError, match="a time-ordered histogram .* cannot merge"):
        histogram.merge(histogram)
    with pytest.raises(TypeError, match="other must be a WindowSketch, got bytes"):
        time.merge(load_golden("time"))


def test_merge_returns_a_new_sketch_and_leaves_both_alone():
    merged_bytes = load_golden("merged")
    a, b = WindowSketch.from_bytes(merged_bytes), WindowSketch.from_bytes(load_golden("time"))
    before = (a.to_bytes(), b.to_bytes())
    merged = a.merge(b)
    assert (a.to_bytes(), b.to_bytes()) == before
    assert merged.now == max(a.now, b.now)
    # Every event of "merged" is also in "time": the merge counts them twice.
    assert merged.bounds()[1] >= a.bounds()[1] + b.bounds()[1] - 1


@pytest.mark.parametrize("name", ["time", "node_cap", "distinct_positions", "histogram_time"])
def test_every_truncation_and_bit_flip_is_refused(name):
    blob = load_golden(name)
    for n in range(len(blob)):
        with pytest.raises(InvalidSketchBytes, match="^invalid sketch bytes: "):
            WindowSketch.from_bytes(blob[:n])
    rng = np.random.default_rng(len(blob))
    for position in rng.integers(0, len(blob), 300):
        damaged = bytearray(blob)
        damaged[position] ^= 1 << int(rng.integers(0, 8))
        with pytest.raises(InvalidSketchBytes):
            WindowSketch.from_bytes(bytes(damaged))
    with pytest.raises(InvalidSketchBytes, match="trailing bytes after the sketch"):
        WindowSketch.from_bytes(with_checksum(blob[:-4] + b"\x00"))


def with_checksum(body: bytes) -> bytes:
    return body + zlib.crc32(body).to_bytes(4, "big")


def test_header_problems_have_their_own_messages():
    blob = load_golden("positions")
    body = bytearray(blob[:-4])
    cases = {
        "the bytes are not a windowsketch sketch (bad magic byte)": b"X" + bytes(body[1:]),
        "format version 2 is not supported (this build reads version 1)":
            bytes(body[:1]) + b"\x02" + bytes(body[2:]),
        "unknown sketch kind 99": bytes(body[:2]) + b"\x63" + bytes(body[3:]),
    }
    for message, damaged in cases.items():
        with pytest.raises(InvalidSketchBytes, match=f"^invalid sketch bytes: {re.escape(message)}$"):
            WindowSketch.from_bytes(with_checksum(damaged))
    with pytest.raises(InvalidSketchBytes, match="checksum mismatch"):
        WindowSketch.from_bytes(bytes(body) + b"\x00\x00\x00\x00")


def test_reader_works_without_pyspark():
    """Importable and usable where pyspark is not installed (a blocked import here)."""
    script = (
        "import sys\n"
        "sys.modules['pyspark'] = None\n"  # any import of pyspark now fails
        "from windowsketch.sketch import WindowSketch\n"
        f"blob = open({os.path.join(ROOT, 'tests', 'golden', 'time.bin')!r}, 'rb').read()\n"
        "print(WindowSketch.from_bytes(blob).bounds())\n"
        "assert 'py4j' not in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")})
    assert out.stdout.strip() == str(tuple(load_answers()["sketches"]["time"][0]))


def test_column_helpers_match_the_reader_on_every_column_type():
    names = ["time", "merged"]
    blobs = [load_golden(name) for name in names] + [None]
    as_of = WindowSketch.from_bytes(blobs[0]).now + datetime.timedelta(hours=2)
    sub = datetime.timedelta(hours=12)
    want = [WindowSketch.from_bytes(b).estimate(as_of, sub) for b in blobs[:2]] + [None]
    want_bounds = [WindowSketch.from_bytes(b).bounds(as_of, sub) for b in blobs[:2]] + [None]

    assert estimate_column(blobs, as_of, sub) == want
    assert bounds_column(blobs, as_of, sub) == want_bounds

    series = pd.Series(blobs, index=[10, 20, 30], dtype=object)
    got = estimate_column(series, as_of, sub)
    assert got.dtype == "Int64" and list(got.index) == [10, 20, 30]
    assert got.tolist()[:2] == want[:2] and got.isna().tolist() == [False, False, True]
    assert bounds_column(series, as_of, sub).tolist() == want_bounds

    merged = merge_column(series)
    chained = WindowSketch.from_bytes(blobs[0]).merge(WindowSketch.from_bytes(blobs[1]))
    assert merged is not None and merged.to_bytes() == chained.to_bytes()
    assert merge_column([None, None]) is None


def test_column_helpers_on_pyarrow_columns():
    import pyarrow as pa

    blobs = [load_golden("time"), load_golden("merged"), None]
    as_of = WindowSketch.from_bytes(blobs[0]).now + datetime.timedelta(hours=2)
    sub = datetime.timedelta(hours=12)
    want = [WindowSketch.from_bytes(b).estimate(as_of, sub) for b in blobs[:2]] + [None]
    want_bounds = [WindowSketch.from_bytes(b).bounds(as_of, sub) for b in blobs[:2]] + [None]
    array = pa.array(blobs, type=pa.binary())
    assert estimate_column(array, as_of, sub).to_pylist() == want
    assert estimate_column(pa.chunked_array([array[:1], array[1:]]), as_of, sub).to_pylist() == want
    assert bounds_column(array, as_of, sub).to_pylist() == [
        None if b is None else dict(zip(("estimate", "lower", "upper"), b)) for b in want_bounds]
    merged = merge_column(array)
    assert merged is not None and merged.to_bytes() == merge_column(blobs).to_bytes()
