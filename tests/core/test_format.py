"""The binary format: exact round trips, and a clear error for every damaged input."""
from __future__ import annotations

import numpy as np
import pytest

STREAMS = [
    (100, 0.1, np.arange(5000), np.ones(5000, dtype=bool)),
    (10**6, 0.01, np.arange(0, 30000, 3), np.random.default_rng(7).random(10000) < 0.3),
    (50, 0.5, np.array([-(2**63), -5, 0, 2**63 - 1]), np.array([1, 1, 0, 1], dtype=bool)),
]


def build(sketches, window, eps, ts, events):
    h = sketches.new(window, eps)
    for t, e in zip(ts.tolist(), events.tolist()):
        h.update(t, e)
    return h


def sketch_bytes(sketches, stream) -> bytes:
    return bytes(sketches.format.serialize(build(sketches, *stream)))


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


def test_empty_sketch_round_trips(sketches):
    back = sketches.format.deserialize(sketches.format.serialize(sketches.new(9, 0.2)))
    assert back.estimate() == 0 and not back.hasTime()


def assert_rejected(sketches, data: bytes):
    with pytest.raises(Exception, match="invalid sketch bytes"):
        sketches.format.deserialize(data)


def test_every_truncation_is_rejected(sketches):
    data = sketch_bytes(sketches, STREAMS[1])
    for n in range(len(data)):
        assert_rejected(sketches, data[:n])


def test_random_bit_flips_are_rejected(sketches):
    rng = np.random.default_rng(2024)
    for stream in STREAMS:
        data = bytearray(sketch_bytes(sketches, stream))
        for _ in range(150):
            damaged = bytearray(data)
            for bit in rng.choice(8 * len(data), size=int(rng.integers(1, 4)), replace=False):
                damaged[bit // 8] ^= 1 << (bit % 8)
            assert_rejected(sketches, bytes(damaged))


@pytest.mark.parametrize("data", [b"", b"\x00", b"garbage that is not a sketch", b"W\x02rest"])
def test_foreign_or_other_version_bytes_are_rejected(sketches, data):
    assert_rejected(sketches, data)
