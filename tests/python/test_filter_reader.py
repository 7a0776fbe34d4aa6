"""The pure-Python reader of filter sketches (format kind 11), no Spark: the golden files
answer as the JVM recorded and write back byte for byte; merges keep each value's latest
time and drop what left the window; damaged, forged and foreign bytes are refused by name."""
from __future__ import annotations

import json
import os

import pytest

from golden_sketches import GOLDEN, golden_filter_probes
from windowsketch.sketch import FilterSketch, InvalidSketchBytes, WindowSketch
from windowsketch.sketch._base import _Writer

FILTER_GOLDEN = os.path.join(GOLDEN, "filter")


def load(name: str) -> bytes:
    with open(os.path.join(FILTER_GOLDEN, f"{name}.bin"), "rb") as f:
        return f.read()


@pytest.mark.parametrize("name", ["time", "positions_merged", "empty"])
def test_golden_files_answer_as_the_jvm_recorded_and_write_back(name):
    with open(os.path.join(FILTER_GOLDEN, "answers.json")) as f:
        recorded = json.load(f)["sketches"][name]
    blob = load(name)
    sketch = WindowSketch.from_bytes(blob)
    assert isinstance(sketch, FilterSketch) and sketch.kind == "filter"
    assert [sketch.contains(v, as_of, sub) for v, as_of, sub in golden_filter_probes(sketch)] \
        == recorded
    assert sketch.to_bytes() == blob


def test_merges_keep_the_latest_time_and_drop_what_left_the_window():
    s = WindowSketch.from_bytes(load("positions_merged"))
    assert s.merge(s).to_bytes() == s.to_bytes()
    empty = WindowSketch.from_bytes(load("empty"))
    assert empty.merge(empty).to_bytes() == empty.to_bytes()
    values = [v for v in range(97) if s.contains(v)]
    assert 0 < len(values) == len(s) < 97
    with pytest.raises(ValueError, match="cannot merge"):
        s.merge(WindowSketch.from_bytes(load("time")))


def forged(sketch: FilterSketch, entries: list[tuple[int, int]]) -> bytes:
    """The sketch's bytes with its entries replaced by (fingerprint step, step back) pairs."""
    w = _Writer()
    good = sketch.to_bytes()
    header = good[:good.index(b"\x06bigint") + 7]
    for b in header:
        w.byte(b)
    w.varint(len(entries))
    for step, back in entries:
        w.varint(step)
        w.varint(back)
    return w.finish()


def test_forged_and_damaged_bytes_are_refused_by_name():
    s = WindowSketch.from_bytes(load("positions_merged"))
    assert forged(s, [(5, 0), (3, 1)]) != s.to_bytes()
    WindowSketch.from_bytes(forged(s, [(5, 0), (3, 1)]))  # well formed: reads
    cases = {
        "fingerprints out of order": [(5, 0), (0, 1)],
        "fingerprint 1 is out of range": [(1 << 43, 0)],
        "value 2 lies outside the window": [(5, 0), (3, 1000)],
    }
    for problem, entries in cases.items():
        with pytest.raises(InvalidSketchBytes, match=problem.replace("fingerprints out of order",
                                                                      "fingerprint 2 is out of order")):
            WindowSketch.from_bytes(forged(s, entries))
    with pytest.raises(InvalidSketchBytes, match="checksum mismatch"):
        WindowSketch.from_bytes(s.to_bytes()[:-1])
    with pytest.raises(TypeError, match="a bigint value must be an int"):
        s.contains("5")
    with pytest.raises(TypeError, match="use contains"):
        s.estimate()


def test_contains_column_on_lists_and_pandas():
    from windowsketch.sketch import contains_column

    blob = load("positions_merged")
    s = WindowSketch.from_bytes(blob)
    present = next(v for v in range(97) if s.contains(v))
    blobs = [blob, None, blob]
    assert contains_column(blobs, present) == [True, None, True]
    assert contains_column(blobs, present, as_of=s.now + s.window) == [False, None, False]
    pd = pytest.importorskip("pandas")
    series = contains_column(pd.Series(blobs, index=[4, 5, 6]), present)
    assert list(series.index) == [4, 5, 6] and series.dtype == "boolean"
    assert series.tolist() == [True, pd.NA, True]
    with pytest.raises(TypeError, match="a bigint value must be an int"):
        contains_column(blobs, "7")
