"""The pure-Python reader of top-k sketches (format kinds 9 and 6), no Spark: the golden files
answer as the JVM recorded and write back byte for byte; sub-window queries of the golden
time sketch hold the bounds against the golden rows; merges, damaged bytes, wrong
families and bad arguments behave as in SQL."""
from __future__ import annotations

import collections
import datetime
import decimal
import json
import os
import zlib

import pytest

from golden_sketches import GOLDEN, golden_rows, golden_top_k_items, load_golden, micros_of_pos
from top_k_reference import check_window
from windowsketch.sketch import InvalidSketchBytes, ItemCount, TopKSketch, WindowSketch

TOP_K_GOLDEN = os.path.join(GOLDEN, "top_k")
EPOCH = datetime.datetime(1970, 1, 1)


def load(name: str) -> bytes:
    with open(os.path.join(TOP_K_GOLDEN, f"{name}.bin"), "rb") as f:
        return f.read()


@pytest.mark.parametrize("name", ["time", "positions_merged", "empty", "kind6_time",
                                  "kind6_positions_merged", "kind6_empty"])
def test_golden_files_answer_as_the_jvm_recorded_and_write_back(name):
    """Kind 9 (items in a dictionary) reads and writes back byte for byte; kind 6 (an
    earlier build's, items in every node) reads and writes back as today's kind-9 file."""
    with open(os.path.join(TOP_K_GOLDEN, "answers.json")) as f:
        recorded = json.load(f)["sketches"][name]
    blob = load(name)
    sketch = WindowSketch.from_bytes(blob)
    assert isinstance(sketch, TopKSketch)
    assert sketch.kind == ("top_k" if name.startswith("kind6_") else "top_k_dictionary")
    assert sketch.item_type == "string"
    assert [list(c) for c in sketch.top(5)] == recorded
    assert sketch.to_bytes() == load(name.removeprefix("kind6_"))


def test_every_sub_window_of_the_golden_time_sketch_holds_the_bounds():
    sketch = TopKSketch.from_bytes(load("time"))
    _, pos, _ = golden_rows()
    items = golden_top_k_items(pos)
    times = [micros_of_pos(p) for p in pos]
    now = max(times)
    checked = 0
    for after_minutes in (0, 1, 30, 600, 1439, 1441):
        for window_minutes in (1, 7, 60, 720, 1440):
            end = now + after_minutes * 60_000_000
            start = end - window_minutes * 60_000_000
            counts = collections.Counter(x for x, t in zip(items, times) if start <= t <= end)
            top = sketch.top(5, as_of=EPOCH + datetime.timedelta(microseconds=end),
                             sub_window=datetime.timedelta(minutes=window_minutes))
            check_window([tuple(c) for c in top], 0.1, counts, (after_minutes, window_minutes),
                         k=5)
            checked += bool(counts)
    assert checked > 12


def test_merge_holds_both_and_leaves_them_alone():
    a = TopKSketch.from_bytes(load("positions_merged"))
    before = a.to_bytes()
    doubled = a.merge(a)
    assert a.to_bytes() == before
    keys, pos, _ = golden_rows()
    items = golden_top_k_items(pos)
    inside = (keys > 0) & (pos > pos[keys > 0].max() - 1000)
    counts = collections.Counter(x for x, keep in zip(items, inside) if keep)
    counts = collections.Counter({x: 2 * c for x, c in counts.items()})
    check_window([tuple(c) for c in doubled.top(5)], 0.3, counts, "doubled", k=5)
    assert TopKSketch.from_bytes(doubled.to_bytes()).to_bytes() == doubled.to_bytes()
    empty = TopKSketch.from_bytes(load("empty"))
    with pytest.raises(ValueError, match=r"cannot merge sketches of different parameters"):
        empty.merge(a)
    with pytest.raises(ValueError, match=r"cannot merge: a count sketch \(window_sketch\) is "
                                         r"not a top-k sketch \(window_top_k_sketch\)"):
        a.merge(WindowSketch.from_bytes(load_golden("positions")))


def with_checksum(body: bytes) -> bytes:
    return body + zlib.crc32(body).to_bytes(4, "big")


def test_damaged_bytes_and_other_families_are_refused_by_name():
    blob = load("positions_merged")
    body = blob[:-4]
    # After the 22-byte header: c (8 bytes), the item type's length and "string" (6 bytes).
    damaged = {
        "checksum mismatch": blob[:-1] + bytes([blob[-1] ^ 1]),
        "invalid length": with_checksum(body[:30] + b"\xff\x7f" + body[31:]),
        "trailing bytes after the sketch": with_checksum(body + b"\x00"),
    }
    for message, bad in damaged.items():
        with pytest.raises(InvalidSketchBytes, match=f"invalid sketch bytes: {message}"):
            TopKSketch.from_bytes(bad)
    with pytest.raises(InvalidSketchBytes, match=r"a count sketch \(window_sketch\) is not a "
                                                 r"top-k sketch"):
        TopKSketch.from_bytes(load_golden("positions"))
    # An item type the reader does not know is named when an answer needs it.
    unknown = with_checksum(body[:30] + b"\x06" + b"struct" + body[37:])
    with pytest.raises(InvalidSketchBytes, match="unknown item type struct"):
        TopKSketch.from_bytes(unknown).top(1)


def test_the_item_dictionary_is_canonical():
    """Kind 9's items ascending, each used: a dictionary out of order or holding an item no
    node counts is refused, as the JVM refuses it."""
    body = load("positions_merged")[:-4]
    start = 22 + 8 + 1 + len(b"string")
    d = body[start]
    entries, at = [], start + 1
    for _ in range(d):
        entries.append(body[at: at + 1 + body[at]])
        at += 1 + body[at]
    swapped = body[:start + 1] + entries[1] + entries[0] + b"".join(entries[2:]) + body[at:]
    unused = body[:start] + bytes([d + 1]) + b"".join(entries) + b"\x03zzz" + body[at:]
    for message, bad in {"items out of order": swapped, "an unused item": unused}.items():
        with pytest.raises(InvalidSketchBytes, match=f"invalid sketch bytes: {message}"):
            TopKSketch.from_bytes(with_checksum(bad))


def test_bad_arguments_are_named():
    sketch = TopKSketch.from_bytes(load("positions_merged"))
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="k must be a positive int"):
            sketch.top(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="as_of: the sketch counts positions"):
        sketch.top(3, as_of=datetime.datetime(2025, 1, 1))
    with pytest.raises(ValueError, match="sub_window 2000 is longer than the sketch's window"):
        sketch.top(3, as_of=10**6, sub_window=2000)


def test_items_come_back_as_python_values():
    from windowsketch.sketch.top_k import _decode

    def ordered(x: int) -> bytes:
        return ((x ^ (1 << 63)) & ((1 << 64) - 1)).to_bytes(8, "big")

    assert _decode(ordered(-5), "bigint") == -5
    assert _decode(ordered(19000), "date") == datetime.date(2022, 1, 8)
    assert _decode(ordered(1_000_000), "timestamp") == datetime.datetime(
        1970, 1, 1, 0, 0, 1, tzinfo=datetime.timezone.utc)
    assert _decode(ordered(1_000_000), "timestamp_ntz") == datetime.datetime(1970, 1, 1, 0, 0, 1)
    assert _decode((-1234).to_bytes(2, "big", signed=True), "decimal(10,2)") == decimal.Decimal("-12.34")
    assert _decode(b"\x01", "boolean") is True and _decode("é".encode(), "string") == "é"
    assert ItemCount("x", 3, 2, 4).count == 3
    with pytest.raises(InvalidSketchBytes, match="an item does not fit its type bigint"):
        _decode(b"\x00", "bigint")
