"""The binary format: exact round trips, and a clear error for every damaged input."""
from __future__ import annotations

import numpy as np
import pytest

STREAMS = [
    (100, 0.1, np.arange(5000), np.ones(5000, dtype=bool)),
    (10**6, 0.01, np.arange(0, 30000, 3), np.random.default_rng(7).random(10000) < 0.3),
    (50, 0.5, np.array([-(2**63), -5, 0, 2**63 - 1]), np.array([1, 1, 0, 1], dtype=bool)),
]


KINDS = ["histogram", "dyadic"]


def build(sketches, window, eps, ts, events, kind="histogram"):
    h = sketches.new(window, eps) if kind == "histogram" else sketches.dyadic(window, eps)
    sketches.replay.insertAll(h, np.asarray(ts, dtype=">i8").tobytes(),
                              np.asarray(events, dtype=np.uint8).tobytes())
    return h


def sketch_bytes(sketches, stream, kind="histogram") -> bytes:
    return bytes(sketches.format.serialize(build(sketches, *stream, kind=kind)))


@pytest.mark.parametrize("stream", STREAMS, ids=["ones", "bernoulli", "extremes"])
def test_dyadic_round_trip_keeps_every_node(sketches, stream):
    d = build(sketches, *stream, kind="dyadic")
    back = sketches.round_trip(d)
    assert (back.estimate(), back.lowerBound(), back.upperBound(), back.now()) == \
        (d.estimate(), d.lowerBound(), d.upperBound(), d.now())
    # Every sub-window reads the same from the restored nodes as from the original ones.
    window, now = stream[0], int(d.now())
    lengths = np.unique(np.geomspace(1, window, 300).astype(np.int64))
    for end in (now, now + window // 3):
        if end < 2**63:  # the extreme stream ends at the largest long
            assert np.array_equal(sketches.sub_windows(back, end, lengths),
                                  sketches.sub_windows(d, end, lengths))


@pytest.mark.parametrize("stream", STREAMS, ids=["ones", "bernoulli", "extremes"])
def test_round_trip_keeps_every_bucket(sketches, stream):
    h = build(sketches, *stream)
    back = sketches.format.deserialize(sketches.format.serialize(h))
    assert sketches.buckets(back) == sketches.buckets(h)
    assert (back.estimate(), back.lowerBound(), back.upperBound(), back.now()) == \
        (h.estimate(), h.lowerBound(), h.upperBound(), h.now())
    # And it goes on from where it was.
    for x in (h, back):
        x.update(int(stream[2][-1]), True)
    assert sketches.buckets(back) == sketches.buckets(h)


@pytest.mark.parametrize("split", [1, 37, 400, 2999])
def test_restored_histogram_goes_on_row_for_row(sketches, split):
    # The restored histogram must rebuild what it caches (the oldest bucket, the newest
    # event): every later row gives the same answer as the histogram that never stopped.
    rng = np.random.default_rng(split)
    ts = np.cumsum(rng.integers(0, 3, 3300))
    events = rng.random(3300) < 0.6
    h = build(sketches, 500, 0.1, ts[:split], events[:split])
    back = sketches.round_trip(h)
    for t, e in zip(ts[split:split + 300].tolist(), events[split:split + 300].tolist()):
        for x in (h, back):
            x.update(t, e)
        assert (back.estimate(), back.lowerBound(), back.upperBound()) == \
            (h.estimate(), h.lowerBound(), h.upperBound()), f"at ts={t}"
    assert sketches.buckets(back) == sketches.buckets(h)
    last = int(ts[split + 299])
    back.update(last + 1, True)
    with pytest.raises(Exception, match=f"arrived after an event at ts={last + 1}"):
        back.update(last, True)


def test_empty_sketch_round_trips(sketches):
    back = sketches.format.deserialize(sketches.format.serialize(sketches.new(9, 0.2)))
    assert back.estimate() == 0 and not back.hasTime()


def assert_rejected(sketches, data: bytes):
    with pytest.raises(Exception, match="invalid sketch bytes"):
        sketches.format.deserialize(data)


def assert_all_rejected(sketches, blobs, intact: bytes):
    """Every blob refused as invalid sketch bytes, in one JVM call which reads `intact`."""
    *verdicts, intact_verdict = sketches.verdicts("count", [*blobs, intact])
    assert intact_verdict == "read"
    read = [(i, v) for i, v in enumerate(verdicts) if not v.startswith("invalid sketch bytes: ")]
    assert not read, f"{len(read)} of {len(blobs)} read, the first: {read[0]}"


@pytest.mark.parametrize("kind", KINDS)
def test_every_truncation_is_rejected(sketches, kind):
    data = sketch_bytes(sketches, STREAMS[1], kind)
    assert_all_rejected(sketches, [data[:n] for n in range(len(data))], data)


@pytest.mark.parametrize("kind", KINDS)
def test_random_bit_flips_are_rejected(sketches, kind):
    rng = np.random.default_rng(2024)
    damaged_copies = []
    for stream in STREAMS:
        data = bytearray(sketch_bytes(sketches, stream, kind))
        for _ in range(150):
            damaged = bytearray(data)
            for bit in rng.choice(8 * len(data), size=int(rng.integers(1, 4)), replace=False):
                damaged[bit // 8] ^= 1 << (bit % 8)
            damaged_copies.append(bytes(damaged))
    assert_all_rejected(sketches, damaged_copies, bytes(data))


@pytest.mark.parametrize("data", [b"", b"\x00", b"garbage that is not a sketch", b"W\x02rest"])
def test_foreign_or_other_version_bytes_are_rejected(sketches, data):
    assert_rejected(sketches, data)
