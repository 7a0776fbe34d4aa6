"""The moments family's core (windowsketch.core.moments.SlidingMoments) against exact rational
arithmetic over every row's window: the count, mean, variances and standard deviations
inside their certified brackets, the estimates within the stated guarantee
(docs/moments.md), constant windows at exactly 0, in time order, in any order, and after
merges of shuffled partials, for sub-windows too."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import _flags, _longs, stable_seed
from moments_reference import STATS, Exact, check_statistic
from sketch_layout import one_bit_flips

WIDTH = 2 + 3 * len(STATS)


def _doubles(values) -> bytes:
    return np.asarray(values, dtype=">f8").tobytes()


def stream(rng, kind, n):
    """Times and values that stress the window edge and the arithmetic; `present` marks
    non-NULL values."""
    gaps = rng.integers(0, 3, n)
    if kind in ("bursts", "level-shifts"):
        gaps = np.where(rng.random(n) < 0.1, rng.integers(20, 200, n), 0)
    ts = np.cumsum(gaps).astype(np.int64)
    blocks = np.repeat(rng.choice([-500.0, 0.0, 1000.0], n // 25 + 1), 25)[:n]
    values = {
        "bursts": rng.normal(0, 1, n),
        "level-shifts": blocks + rng.normal(0, 0.01, n),
        "constant-runs": np.where(rng.random(n) < 0.97, blocks, rng.normal(0, 50, n)),
        "huge-mean": 1e9 + rng.normal(0, 1, n),
        "negative-heavy-tailed": -rng.pareto(1.2, n) * 1e4 + 10,
        "increasing": np.arange(n, dtype=float),
    }[kind]
    present = rng.random(n) >= 0.15  # NULLs
    return ts, values, present


KINDS = ["bursts", "level-shifts", "constant-runs", "huge-mean", "negative-heavy-tailed",
         "increasing"]


def check_answer(got, n, mean, m2, eps, where):
    """Every answer of one window (a row of Replay's output) against the exact window."""
    assert got[0] <= n <= got[1], where
    for k, stat in enumerate(STATS):
        estimate, lower, upper = (None if math.isnan(v) else v for v in got[2 + 3 * k: 5 + 3 * k])
        check_statistic(stat, estimate, lower, upper, n, mean, m2, eps, where)


def per_row(sketches, window, eps, ts, values, present, ordered=False):
    """Every row's answers: from the time-ordered buckets (running frames) if `ordered`,
    else from the dyadic sketch."""
    packed = sketches.replay.momentsPerRow(window, eps, ordered, _longs(ts), _doubles(values),
                                           _flags(present))
    return np.frombuffer(bytes(packed), dtype=">f8").reshape(len(ts), WIDTH + 3)


def check_rows(out, ts, values, present, window, eps):
    exact = Exact(values)
    now = None
    for i in range(len(ts)):
        now = ts[i] if now is None else max(now, ts[i])
        seen = np.arange(len(ts)) <= i
        inside = seen & present & (ts <= now) & (ts > now - window)
        effective = out[i, WIDTH + 1]
        assert effective <= eps, ("effective eps", i)  # the tolerance is the one asked for
        assert out[i, WIDTH + 2] == 1.0, ("invariant", i)
        check_answer(out[i], *exact.of(inside), effective, i)


# eps 0.3: large enough that nodes straddle the window's edge on most rows of streams this
# short (at eps 0.05 the sketch holds these windows exactly); 0.05 as a user would set it.
@pytest.mark.parametrize("ordered", [False, True], ids=["dyadic", "ordered"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("window,eps", [(1, 0.3), (100, 0.3), (500, 0.3), (500, 0.05)])
def test_every_row_in_time_order_within_the_guarantee(sketches, kind, window, eps, ordered):
    rng = np.random.default_rng(stable_seed("moments-in-order", kind, window))
    ts, values, present = stream(rng, kind, 1500)
    out = per_row(sketches, window, eps, ts, values, present, ordered)
    check_rows(out, ts, values, present, window, eps)
    assert (out[:, WIDTH + 1] == eps).all()  # no node cap at this size
    if window == 500 and eps == 0.3 and kind not in ("bursts", "level-shifts"):
        assert (out[:, 1] > out[:, 0]).mean() > 0.5  # mostly straddled: the bounds are at work


@pytest.mark.parametrize("kind", KINDS)
def test_every_row_in_any_order_within_the_guarantee(sketches, kind):
    """Rows shuffled, then in order again: every row's window within the guarantee,
    whether the row moves now forward, back or not at all."""
    rng = np.random.default_rng(stable_seed("moments-any-order", kind))
    ts, values, present = stream(rng, kind, 1000)
    order = rng.permutation(len(ts))
    order[len(order) // 2:] = np.sort(order[len(order) // 2:])
    ts, values, present = ts[order], values[order], present[order]
    check_rows(per_row(sketches, 150, 0.3, ts, values, present), ts, values, present, 150, 0.3)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("partials", [1, 3, 16])
def test_merged_partials_and_sub_windows_within_the_guarantee(sketches, kind, partials):
    """GROUP BY: rows shuffled into partials, each fed in its own order, folded linearly;
    then the window and sub-windows of it ending at now and after now."""
    rng = np.random.default_rng(stable_seed("moments-merged", kind, partials))
    ts, values, present = stream(rng, kind, 1500)
    parts = rng.integers(0, partials, len(ts)).astype(np.uint8)
    order = rng.permutation(len(ts))
    exact = Exact(values)
    window, eps = 400, 0.3
    now = int(ts.max())
    for end in (now, now + 150):
        lengths = [1, 30, 200, window]
        packed = sketches.replay.momentsMerged(
            window, eps, _longs(ts[order]), _doubles(values[order]), _flags(present[order]),
            bytes(parts[order]), end, _longs(lengths))
        out = np.frombuffer(bytes(packed), dtype=">f8").reshape(len(lengths), WIDTH)
        for row, length in zip(out, lengths):
            inside = present & (ts <= end) & (ts > end - length)
            check_answer(row, *exact.of(inside), eps, (end, length))


@pytest.mark.parametrize("ordered", [False, True], ids=["dyadic", "ordered"])
def test_a_long_stream_stays_small_and_within_the_guarantee(sketches, ordered):
    """10^5 rows in order, window 10^4 positions: the nodes (buckets) held stay near (1/c)
    per doubling of the count, far below the rows held, and the last rows keep the
    guarantee."""
    rng = np.random.default_rng(stable_seed("moments-long"))
    n, window, eps = 100_000, 10_000, 0.02
    ts = np.arange(n, dtype=np.int64)
    values = 1e6 + np.cumsum(rng.normal(0, 1, n))  # a random walk: the mean drifts
    present = np.ones(n, dtype=bool)
    out = per_row(sketches, window, eps, ts, values, present, ordered)
    assert out[:, WIDTH + 2].min() == 1.0
    # The ordered buckets compact once they have grown by half since the last compaction
    # (2,382 at most here; 3,215 when they waited to double).
    assert out[:, WIDTH].max() < (2_800 if ordered else 2_000), out[:, WIDTH].max()
    tail = slice(n - 50, n)
    check_rows_from(out, ts, values, present, window, eps, tail)


def check_rows_from(out, ts, values, present, window, eps, rows):
    exact = Exact(values)
    for i in range(*rows.indices(len(ts))):
        now = ts[: i + 1].max()
        inside = (np.arange(len(ts)) <= i) & present & (ts > now - window)
        check_answer(out[i], *exact.of(inside), eps, i)


def test_equal_values_answer_zero_exactly_and_values_must_be_finite(sketches):
    out = per_row(sketches, 10, 0.01, list(range(50)), [0.1] * 50, [True] * 50)
    assert (out[1:, 5:17] == 0.0).all() and (out[:, 2] == 0.1).all()
    with pytest.raises(Exception, match="a value must be finite, got NaN"):
        per_row(sketches, 10, 0.01, [1], [float("nan")], [True])


def _sketch(sketches, ts, values, window=50, eps=0.3, microseconds=False):
    return sketches.replay.momentsSketch(window, eps, microseconds, _longs(ts), _doubles(values))


def _answers(sketches, sketch, end, lengths=(1, 10, 50)):
    packed = sketches.replay.momentsAnswers(sketch, end, _longs(list(lengths)))
    return np.frombuffer(bytes(packed), dtype=">f8")


@pytest.mark.parametrize("shuffled", [False, True])
def test_bytes_round_trip_to_the_same_answers_and_bytes(sketches, shuffled):
    """Kind 5 holds the compressed nodes: a state read back answers as before, writes the
    same bytes, and keeps taking rows as the sketch it was written from."""
    rng = np.random.default_rng(stable_seed("moments-bytes", shuffled))
    ts = np.sort(rng.integers(0, 400, 600))
    values = rng.normal(1e6, 3, 600)
    order = rng.permutation(600) if shuffled else np.arange(600)
    sketch = _sketch(sketches, ts[order], values[order])
    data = bytes(sketches.format.serializeMoments(sketch))
    back = sketches.format.deserializeMoments(data)
    end = int(ts.max())
    assert np.array_equal(_answers(sketches, back, end), _answers(sketches, sketch, end), equal_nan=True)
    assert bytes(sketches.format.serializeMoments(back)) == data
    assert back.microsecondTime() is False and back.window() == 50 and back.eps() == 0.3
    assert 1 < back.nodeCount() < 600  # collapsed: the bytes are not the rows
    for s in (back, sketch):
        s.add(end + 30, 2.0)
    assert np.array_equal(_answers(sketches, back, end + 30), _answers(sketches, sketch, end + 30),
                          equal_nan=True)


@pytest.mark.parametrize("order", ["in-order", "stragglers", "shuffled"])
def test_aggregation_buffers_read_back_checked_and_compress_to_the_written_bytes(sketches, order):
    """A GROUP BY's partial buffer (serializeMomentsBuffer) holds the nodes gathered but not
    collapsed: it reads back checked (pre-order, (I) and (M) at every internal node), its
    windows stay within the guarantee, and compressed it writes exactly the sketch's bytes,
    read checked or as the final side reads it. A sketch merged into an empty one is taken
    as it is."""
    rng = np.random.default_rng(stable_seed("moments-buffer", order))
    n, window, eps = 3000, 2000, 0.05
    ts = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)  # duplicates and gaps
    values = np.repeat(rng.choice([-500.0, 0.0, 1000.0], n // 25 + 1), 25)[:n] + rng.normal(0, 1, n)
    rows = np.arange(n)
    if order == "stragglers":
        late = rng.random(n) < 0.05
        rows = np.concatenate([rows[~late], rows[late]])
    elif order == "shuffled":
        rows = rng.permutation(n)
    sketch = _sketch(sketches, ts[rows], values[rows], window=window, eps=eps)
    buffer = bytes(sketches.format.serializeMomentsBuffer(sketch))
    written = bytes(sketches.format.serializeMoments(sketch))
    back = sketches.format.deserializeMoments(buffer)  # checked as it is read
    assert back.nodeCount() > sketches.format.deserializeMoments(written).nodeCount()
    assert bytes(sketches.format.serializeMoments(back)) == written
    now = int(ts.max())
    lengths = (1, 40, 500, window)
    exact = Exact(values)
    for row, length in zip(_answers(sketches, back, now, lengths).reshape(len(lengths), WIDTH), lengths):
        check_answer(row, *exact.of((ts <= now) & (ts > now - length)), eps, length)
    # The final side's reader parses the same nodes without the certificate check.
    final_side = sketches.format.deserializeMomentsBuffer(buffer)
    assert bytes(sketches.format.serializeMoments(final_side)) == written
    empty = sketches.replay.momentsSketch(window, eps, False, _longs([]), _doubles([]))
    empty.merge(sketches.format.deserializeMomentsBuffer(buffer))
    assert bytes(sketches.format.serializeMomentsBuffer(empty)) == buffer


def _crc(body: bytes) -> bytes:
    import zlib
    return body + zlib.crc32(body).to_bytes(4, "big")


def test_damaged_or_foreign_bytes_are_refused_by_name(sketches):
    import struct

    sketch = _sketch(sketches, list(range(200)), [float(i % 7) for i in range(200)], window=500)
    data = bytes(sketches.format.serializeMoments(sketch))
    body = data[:-4]
    # After the 25-byte header (magic, version, kind, window varint (2 bytes), eps, flags,
    # now): c (8 bytes), the node count, then the nodes.
    nodes_at = 22 + 8
    first_mean = nodes_at + 1 + 1 + 2 + 1  # count varint, level, step (2 bytes), n
    level, = struct.unpack(">b", body[nodes_at + 1:nodes_at + 2])
    damaged = {
        "checksum mismatch": data[:-1] + bytes([data[-1] ^ 1]),
        "truncated": data[:3],
        "invalid collapse parameter": _crc(body[:22] + struct.pack(">d", 0.1) + body[30:]),
        "invalid node count": _crc(body[:nodes_at] + b"\xff\x7f" + body[nodes_at + 1:]),
        "invalid moments at node 0": _crc(body[:first_mean] + struct.pack(">d", float("nan"))
                                          + body[first_mean + 8:]),
        "trailing bytes after the sketch": _crc(body + b"\x00"),
        r"a count sketch \(window_sketch\) is not a moments sketch": bytes(
            sketches.format.serialize(sketches.dyadic(50, 0.02))),
    }
    assert level > 0  # the first node is an internal one: (I) and (M) are checked on it
    for message, bad in damaged.items():
        with pytest.raises(Exception, match=f"invalid sketch bytes: {message}"):
            sketches.format.deserializeMoments(bad)
    with pytest.raises(Exception, match=r"a moments sketch \(window_moments_sketch\) is not a count sketch"):
        sketches.format.deserialize(data)


def test_damaged_bytes_with_valid_checksums_are_refused_or_stay_certified(sketches):
    """Any byte changed, checksum recomputed: refused by name, or a sketch whose brackets
    still hold the exact answers of the values its nodes hold (the width is what forged
    bytes can break, by at most 2x: docs/moments.md)."""
    rng = np.random.default_rng(stable_seed("moments-fuzz"))
    ts = np.arange(300)
    values = rng.normal(50, 10, 300)
    data = bytes(sketches.format.serializeMoments(_sketch(sketches, ts, values, window=300)))
    body = bytearray(data[:-4])
    refused, kept = sketches.refused_and_read("moments", one_bit_flips(rng, body))
    for back in kept:
        row = _answers(sketches, back, back.now(), (back.window(),))
        assert row[0] <= row[1] and all(row[2 + 3 * k + 1] <= row[2 + 3 * k + 2]
                                        for k in range(len(STATS)) if not math.isnan(row[2 + 3 * k]))
    assert refused > 0 and kept


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        b = data[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return value, pos
        shift += 7


def _write_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def test_a_live_state_of_ordered_buckets_reads_back_checked(sketches):
    """The buckets a live window stores answer as before when read back; a bucket of
    several timestamps whose count or mean breaks its certificate against the newer
    buckets is refused by name (a CRC cannot tell a forged state from a true one)."""
    rng = np.random.default_rng(stable_seed("moments-live-state"))
    ts = np.arange(3000, dtype=np.int64)
    values = rng.normal(100, 5, 3000)
    window, eps = 2000, 0.3
    state = bytes(sketches.replay.orderedMomentsState(window, eps, _longs(ts), _doubles(values)))
    answers = np.frombuffer(bytes(sketches.replay.orderedMomentsAnswers(window, eps, state)),
                            dtype=">f8")
    n, mean, m2 = Exact(values).of(ts > ts.max() - window)
    check_answer(answers, n, mean, m2, eps, "read back")
    # flags (1), now (8), the next compaction and the bucket count, then buckets newest
    # first: age, span, count (varints), mean and M2 (8 bytes each).
    pos = 9
    _, pos = _varint(state, pos)
    count, pos = _varint(state, pos)
    buckets = []
    for _ in range(count):
        start = pos
        _, pos = _varint(state, pos)
        span, pos = _varint(state, pos)
        at_count = pos
        n_bucket, pos = _varint(state, pos)
        buckets.append((start, span, at_count, pos, n_bucket))
        pos += 16
    assert pos == len(state)
    start, span, at_count, at_mean, n_bucket = next(b for b in reversed(buckets) if b[1] > 0)
    too_many = state[:at_count] + _write_varint(n_bucket * 1000) + state[at_mean:]
    far_mean = state[:at_mean] + np.float64(1e6).byteswap().tobytes() + state[at_mean + 8:]
    for bad in (too_many, far_mean):
        with pytest.raises(Exception, match=r"invalid sketch bytes: moments bucket \d+ breaks "
                                            r"its certificate"):
            sketches.replay.orderedMomentsAnswers(window, eps, bad)
    with pytest.raises(Exception, match=r"invalid sketch bytes: invalid moments bucket \d+"):
        sketches.replay.orderedMomentsAnswers(window, eps, state[:9] + state[9:-16] +
                                              np.float64(np.nan).byteswap().tobytes() * 2)
