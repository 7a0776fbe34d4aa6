"""One bucket of `drop_duplicates_within` (windowsketch.core.filter.DeduplicationState),
driven over micro-batches as the operator drives it, against a brute-force model of the
rule on every row: a row is delivered unless a row of its fingerprint was delivered at a
time after `ts - window`. Forgetting at the watermark never changes a decision, and what
is held is exactly the fingerprints delivered within a window of the watermark; the state
resumes from its bytes (and from a golden state) as if it never stopped; damaged bytes are
refused or load, never a crash.

`PYTHONPATH=tests python tests/core/test_deduplication_state.py OUT_DIR` writes the golden
state tests/golden/live/deduplication_v1.bin with whatever jar the session loads."""
from __future__ import annotations

import os
import struct
import sys
import zlib

import numpy as np
import pytest

from conftest import _longs, verdict_lines
from live_reference import bit_flips

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "golden", "live", "deduplication_v1.bin")
WINDOW, DELAY = 100, 30


def fingerprint_bits(fpp: float) -> int:
    extra = 0
    while 2.0 ** -extra > fpp:
        extra += 1
    return 32 + extra


def make_stream(kind: str, seed: int, n: int = 3000):
    """(times, value hashes) in arrival order. Hashes are random 64-bit values per value,
    but for `collisions`, where values share a fingerprint in pairs (equal top bits)."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 120, n)
    if kind == "out_of_order":  # within the watermark's delay, and some later
        ts = np.sort(rng.integers(0, 20 * WINDOW, n)) + rng.integers(-DELAY - 10, 1, n)
    elif kind == "bursts":  # many copies at one time, quiet between
        ts = np.sort(rng.choice(np.arange(0, 40 * WINDOW, 37), n))
        values = rng.integers(0, 15, n)
    elif kind == "gaps":  # quiet spans longer than the window: everything is forgotten
        ts = np.sort(rng.integers(0, 8 * WINDOW, n))
        ts = ts + (ts // (2 * WINDOW)) * 3 * WINDOW
    elif kind == "monotone":  # a row a tick, its value back after 0.96 or 1.04 windows
        ts = np.arange(n, dtype=np.int64)
        values = np.where(ts % 2 == 0, (ts // 2) % 48, 100 + (ts // 2) % 52)
    else:  # collisions
        ts = np.sort(rng.integers(0, 20 * WINDOW, n))
    hashes = rng.integers(-2**63, 2**63 - 1, 200, dtype=np.int64)
    if kind == "collisions":  # value 2k+1 differs from 2k in the low 16 bits only
        hashes[1::2] = hashes[0::2] ^ rng.integers(1, 2**16, 100)
    return ts.astype(np.int64), hashes[values]


def micro_batches(ts, hashes, n_batches: int):
    """Splits arrivals into batches and does what Spark does before the state function:
    drops rows at or before the batch's watermark (the largest earlier time - DELAY), then,
    as the operator does, sorts each batch by time (stable). Returns the rows offered in
    order, the batch ends and each batch's watermark after it."""
    offered_ts, offered_h, ends, up_to, newest = [], [], [], [], None
    for chunk in np.array_split(np.arange(len(ts)), n_batches):
        watermark = None if newest is None else newest - DELAY
        keep = [i for i in chunk if watermark is None or ts[i] > watermark]
        keep.sort(key=lambda i: ts[i])
        offered_ts += [int(ts[i]) for i in keep]
        offered_h += [int(hashes[i]) for i in keep]
        ends.append(len(offered_ts))
        newest = max(int(ts[chunk].max()), newest if newest is not None else -2**62)
        up_to.append(newest - DELAY)
    return np.array(offered_ts, dtype=np.int64), np.array(offered_h, dtype=np.int64), ends, up_to


def model(ts, hashes, ends, up_to, fpp: float):
    """Delivered flags by the rule, with no forgetting; and per batch how many fingerprints
    have a delivered time after the watermark - window (what may still match a row)."""
    shift = 64 - fingerprint_bits(fpp)
    latest: dict[int, int] = {}
    delivered, held, start = [], [], 0
    for end, mark in zip(ends, up_to):
        for t, h in zip(ts[start:end], hashes[start:end]):
            fp = (int(h) & (2**64 - 1)) >> shift
            ok = fp not in latest or latest[fp] <= t - WINDOW
            delivered.append(int(ok))
            if ok:
                latest[fp] = int(t)
        held.append(sum(1 for t in latest.values() if t > mark - WINDOW))
        start = end
    return delivered, held


def run(sketches, ts, hashes, ends, up_to, fpp: float, state: bytes = b""):
    out = bytes(sketches.replay.deduplicate(WINDOW, float(fpp), state, _longs(ts),
                                            _longs(hashes), _longs(ends), _longs(up_to)))
    longs = len(ts) + 2 * len(ends)
    values = np.frombuffer(out[:8 * longs], dtype=">i8").astype(np.int64)
    per_batch = values[len(ts):].reshape(-1, 2)
    return values[:len(ts)], per_batch[:, 0], per_batch[:, 1], out[8 * longs:]


@pytest.mark.parametrize("kind", ["out_of_order", "bursts", "gaps", "monotone", "collisions"])
def test_every_row_is_delivered_as_the_rule_says_and_forgetting_changes_nothing(sketches, kind):
    ts, hashes = make_stream(kind, seed=len(kind))
    offered, offered_h, ends, up_to = micro_batches(ts, hashes, 40)
    fpp = 0.01
    delivered, held, state_bytes, _ = run(sketches, offered, offered_h, ends, up_to, fpp)
    expected, expected_held = model(offered, offered_h, ends, up_to, fpp)
    assert delivered.tolist() == expected
    # Forgetting is exact: what is held is what may still match, batch by batch.
    assert held.tolist() == expected_held
    # A value's delivered rows lie more than a window apart, and some were dropped.
    times_by_fp: dict = {}
    for t, h, d in zip(offered, offered_h, delivered):
        if d:
            times_by_fp.setdefault(int(h) >> 20, []).append(int(t))
    for times in times_by_fp.values():
        assert all(b - a >= WINDOW for a, b in zip(times, times[1:]))
    assert 0 < sum(delivered) < len(delivered)
    # The state is a few bytes a held value, never the rows.
    assert max(state_bytes) <= 48 + 16 * max(expected_held)
    if kind == "gaps":  # after quiet longer than a window, only the newest rows are held
        assert min(held) < max(held) / 3


def test_a_state_resumed_from_its_bytes_or_the_golden_one_decides_as_one_never_stopped(sketches):
    ts, hashes = make_stream("out_of_order", seed=7)
    offered, offered_h, ends, up_to = micro_batches(ts, hashes, 30)
    fpp = 0.001
    whole, _, _, _ = run(sketches, offered, offered_h, ends, up_to, fpp)
    cut = 12
    first, _, _, state = run(sketches, offered[:ends[cut]], offered_h[:ends[cut]],
                             ends[:cut + 1], up_to[:cut + 1], fpp)
    rest = offered[ends[cut]:], offered_h[ends[cut]:], [e - ends[cut] for e in ends[cut + 1:]]
    second, _, _, _ = run(sketches, *rest, up_to[cut + 1:], fpp, state)
    assert np.concatenate([first, second]).tolist() == whole.tolist()
    with open(GOLDEN, "rb") as f:
        golden = f.read()
    assert golden == state, "the golden state is what this stream writes at the cut"
    from_golden, _, _, _ = run(sketches, *rest, up_to[cut + 1:], fpp, golden)
    assert from_golden.tolist() == second.tolist()


def test_a_restart_under_another_window_or_fpp_is_refused_naming_both(sketches):
    ts, hashes = make_stream("bursts", seed=3, n=200)
    offered, offered_h, ends, up_to = micro_batches(ts, hashes, 4)
    _, _, _, state = run(sketches, offered, offered_h, ends, up_to, 0.01)
    found = verdict_lines(sketches.replay.deduplicationVerdicts(
        WINDOW, 0.05, state, _longs([len(state)]), 10**6, _longs(hashes[:3]), 10**6 - DELAY), 1)
    assert found == ["the checkpoint's state was written with window 100 and fpp 0.01 on the "
                     "time axis, and this query has window 100 and fpp 0.05: restart with the "
                     "same ones, or from a new checkpoint"]


def test_damaged_state_with_a_matching_checksum_is_refused_or_keeps_working(sketches):
    """Single-bit flips, the checksum recomputed: every flip of the magic, version, window
    and fpp is refused; the rest are refused or load into a state that takes more rows."""
    ts, hashes = make_stream("out_of_order", seed=5, n=400)
    offered, offered_h, ends, up_to = micro_batches(ts, hashes, 5)
    _, _, _, state = run(sketches, offered, offered_h, ends, up_to, 0.01)
    fixed_bits = 8 * (2 + 8 + 8)
    bits = [*range(8 * (len(state) - 4))]
    flips = bit_flips(state, bits)
    later = int(offered.max()) + 1
    found = verdict_lines(sketches.replay.deduplicationVerdicts(
        WINDOW, 0.01, b"".join(flips), _longs([len(f) for f in flips]), later,
        _longs(hashes[:50]), later - DELAY), len(flips))
    for bit, verdict in zip(bits, found):
        assert verdict == "read" or verdict.startswith("invalid sketch bytes: ") or \
            verdict.startswith("the checkpoint's state was written with "), (bit, verdict[:300])
    assert all(verdict != "read" for bit, verdict in zip(bits, found) if bit < fixed_bits)
    assert any(verdict == "read" for verdict in found)


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value >= 0x80 else 0))
        value >>= 7
        if not value:
            return bytes(out)


def encoded_state(fingerprints, backs, fpp=0.01, horizon=900, newest=1000) -> bytes:
    """A state written from its documented layout (docs/format.md), checksum included."""
    body = bytes([0x44, 1]) + struct.pack(">qdqq", WINDOW, fpp, horizon, newest)
    body += varint(len(fingerprints))
    previous = 0
    for fp, back in zip(fingerprints, backs):
        body += varint(fp - previous) + varint(back)
        previous = fp
    return body + zlib.crc32(body).to_bytes(4, "big")


@pytest.mark.parametrize("fingerprints, backs, verdict", [
    ([5, 2**38], [0, 99], "read"),
    ([5, 5], [0, 1], "invalid sketch bytes: fingerprint 2 is out of order or range"),
    ([5, 2**39], [0, 1], "invalid sketch bytes: fingerprint 2 is out of order or range"),
    ([5, 6], [0, 100], "invalid sketch bytes: value 2 lies outside the held times"),
])
def test_a_state_from_the_documented_layout_reads_and_bad_entries_are_refused(
        sketches, fingerprints, backs, verdict):
    """The layout pinned from Python: held fingerprints ascend strictly, fit their 39 bits
    (fpp 0.01) and have times in (horizon, newest]."""
    state = encoded_state(fingerprints, backs)
    found = verdict_lines(sketches.replay.deduplicationVerdicts(
        WINDOW, 0.01, state, _longs([len(state)]), 1001, _longs([]), 1001 - DELAY), 1)
    assert found == [verdict]


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    import windowsketch
    from windowsketch import _scala_object

    session = windowsketch.configure(SparkSession.builder.master("local[1]")).getOrCreate()

    class Replay:
        replay = _scala_object(session, "windowsketch.core.Replay")

    stream_ts, stream_hashes = make_stream("out_of_order", seed=7)
    o_ts, o_h, o_ends, o_up = micro_batches(stream_ts, stream_hashes, 30)
    _, _, _, golden_state = run(Replay, o_ts[:o_ends[12]], o_h[:o_ends[12]], o_ends[:13],
                                o_up[:13], 0.001)
    os.makedirs(sys.argv[1], exist_ok=True)
    with open(os.path.join(sys.argv[1], "deduplication_v1.bin"), "wb") as out:
        out.write(golden_state)
