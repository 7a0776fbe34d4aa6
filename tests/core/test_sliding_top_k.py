"""The top-k family's core (windowsketch.core.frequencies.SlidingTopK, and OrderedTopK for running
frames) against exact counts of every row's window: each listed count inside its certified
bounds, the bounds at most eps * n apart, every item that occurs more than eps * n times
listed unless k items rank ahead of it, in time order, in any order and after merges of
shuffled partials, for sub-windows too; bytes round trip and damage is refused."""
from __future__ import annotations

import collections
import math
import struct
import zlib

import numpy as np
import pytest

from conftest import _flags, _longs, stable_seed
from sketch_layout import one_bit_flips
from top_k_reference import check_window
from windowsketch import _scala_object

K = 5


def raw_bytes(item: int) -> bytes:
    """How the core orders these test items (each its 8 bytes): two's complement."""
    return item.to_bytes(8, "big", signed=True)


def stream(rng, kind, n):
    """Times (bursts, gaps) and items that stress the window edge: Zipf, uniform, an item
    that floods then vanishes, ties, many distinct items; `present` marks non-NULL items."""
    gaps = np.where(rng.random(n) < 0.1, rng.integers(5, 60, n), rng.integers(0, 3, n))
    ts = np.cumsum(gaps).astype(np.int64)
    items = {
        "zipf": rng.zipf(1.3, n) % 1000,
        "uniform": rng.integers(0, 20, n),
        "flood": np.where((np.arange(n) // 150) % 4 == 1, 7, rng.integers(100, 160, n)),
        "ties": np.arange(n) % 6,
        "distinct": np.arange(n) * 7919 % 100_003,
    }[kind].astype(np.int64)
    present = rng.random(n) >= 0.1
    return ts, items, present


KINDS = ["zipf", "uniform", "flood", "ties", "distinct"]


def answers(packed, rows, k=K, modes=None):
    """Per output: (listed [(item, estimate, lower, upper)], effective eps); the sketch's
    invariant, checked on some rows, must hold on each. `modes`, a list, receives the
    time-ordered counts' mode per row (1 exact, 2 bounded)."""
    width = 3 + 4 * k
    values = np.frombuffer(bytes(packed), dtype=">i8").reshape(rows, width)
    if modes is None:
        assert (values[:, -1] == 1).all(), "the sketch's invariant broke"
    else:
        assert np.isin(values[:, -1], (1, 2)).all()
        modes.extend(int(x) for x in values[:, -1])
    out = []
    for row in values:
        m = int(row[0])
        listed = [tuple(int(x) for x in row[1 + 4 * j: 5 + 4 * j]) for j in range(m)]
        out.append((listed, struct.unpack(">d", struct.pack(">q", int(row[-2])))[0]))
    return out


def window_counts(ts, items, present, seen, end, length):
    mask = seen & present & (ts <= end) & (ts > end - length)
    return collections.Counter(int(x) for x in items[mask])


def per_row(sketches, window, eps, ts, items, present, ordered, modes=None):
    packed = sketches.replay.topKPerRow(window, float(eps), K, ordered, _longs(ts), _longs(items),
                                        _flags(present))
    return answers(packed, len(ts), modes=modes if ordered else None)


def exact_limit(eps: float) -> int:
    """OrderedTopK.exactLimit: the largest power of two at most 8 / eps."""
    limit = 1
    while 2 * limit <= 8 / eps:
        limit *= 2
    return limit


def test_items_order_as_unsigned_bytes_a_prefix_first(spark):
    """ItemCounts.compare, eight bytes at a time then byte by byte, orders as Python orders
    bytes: pairs of 0 to 20 bytes, mostly a shared prefix with one byte changed anywhere."""
    items = _scala_object(spark, "windowsketch.core.frequencies.ItemCounts")
    rng = np.random.default_rng(29)
    for _ in range(600):
        a = bytes(rng.integers(0, 256, rng.integers(0, 21)).tolist())
        b = bytearray(a[:rng.integers(0, len(a) + 1)] if rng.random() < 0.3 else a)
        if b and rng.random() < 0.8:
            b[rng.integers(0, len(b))] = int(rng.integers(0, 256))
        b = bytes(b)
        want = (a > b) - (a < b)
        got = items.compare(bytearray(a), bytearray(b))
        assert (got > 0) - (got < 0) == want, (a.hex(), b.hex())


@pytest.mark.parametrize("ordered", [False, True], ids=["sketch", "ordered"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("window,eps", [(1, 0.3), (200, 0.3), (200, 0.1), (1000, 0.05)])
def test_every_row_in_time_order(sketches, kind, window, eps, ordered):
    """The sketch, and the time-ordered counts: exact until the window first holds more than
    their exact limit rows (16, 64 and 128 here), bounded by eps for good after."""
    rng = np.random.default_rng(stable_seed("top-k-in-order", kind, window))
    ts, items, present = stream(rng, kind, 1200)
    modes: list[int] = []
    out = per_row(sketches, window, eps, ts, items, present, ordered, modes)
    straddled = 0
    bounded_from = None
    for i, (listed, effective) in enumerate(out):
        seen = np.arange(len(ts)) <= i
        counts = window_counts(ts, items, present, seen, ts[i], window)
        exact = ordered and modes[i] == 1
        if ordered and bounded_from is None and sum(counts.values()) > exact_limit(eps):
            bounded_from = i
        if ordered:  # bounded exactly from the first window past the limit
            assert modes[i] == (1 if bounded_from is None else 2), (kind, i)
        check_window(listed, effective, counts, (kind, i), exact=exact, tie=raw_bytes)
        straddled += any(lower < upper for _, _, lower, upper in listed)
        assert effective <= eps  # no node cap at this size
    if window > 1 and eps == 0.3 and kind not in ("ties", "distinct"):
        assert straddled > len(ts) // 10, straddled  # the bounds are at work
    if ordered and window > 1:
        assert bounded_from is not None, kind


@pytest.mark.parametrize("k", [2, 3])
def test_each_answer_in_time_order_heads_a_longer_one(sketches, k):
    """The time-ordered counts' answer for k is the first k of their answer for k = 100 on
    every row, and within its bounds of the exact counts: they list the largest estimates,
    straddling counts included, whatever items they skip as unable to reach the k-th. One
    item comes in blocks of 30 rows a hundred (five others, within a summary's capacity at
    eps 0.3, share the rest), so as a block leaves the window most of its rows straddle the
    window's start, and its estimate outranks items counted more often inside."""
    window, eps = 200, 0.3
    position = np.arange(1200)
    items = np.where(position % 100 < 30, 1, 2 + position % 5)
    present = np.ones(len(position), dtype=bool)

    def run(listed, modes):
        packed = sketches.replay.topKPerRow(window, eps, listed, True, _longs(position), _longs(items),
                                            _flags(present))
        return answers(packed, len(position), k=listed, modes=modes)

    modes: list[int] = []
    for i, ((listed, effective), (longer, _)) in enumerate(zip(run(k, modes), run(100, []))):
        assert listed == longer[:k], i
        counts = window_counts(position, items, present, position <= i, position[i], window)
        check_window(listed, effective, counts, i, k=k, exact=modes[i] == 1, tie=raw_bytes)
    assert modes[-1] == 2  # bounded: the skip is at work


@pytest.mark.parametrize("leveled", [False, True], ids=["ordered", "leveled"])
@pytest.mark.parametrize("kind", KINDS)
def test_each_answer_in_time_order_is_the_one_ranked_anew(sketches, kind, leveled):
    """Past their exact limit the time-ordered counts (summaries per node, or leveled)
    re-rank only the items whose counts rose since the last answer, and keep the last answer's array while it is unchanged (a
    running frame then reuses the row it made of it): on every row, items, estimates and
    both bounds equal those of an answer ranked anew from all the counts."""
    rng = np.random.default_rng(stable_seed("anew", kind))
    ts, items, present = stream(rng, kind, 3000)
    reused_rows = 0
    for window, eps in [(10**9, 0.05), (400, 0.1), (3000, 0.1)]:
        packed = np.frombuffer(bytes(sketches.replay.orderedTopKAnsweredAnew(
            window, eps, K, leveled, _longs(ts), _longs(items), _flags(present))), dtype=">i8")
        kept, anew = packed[1:].reshape(2, len(ts), 1 + 4 * K)
        differ = np.flatnonzero((kept != anew).any(axis=1))
        assert len(differ) == 0, (window, eps, differ[:3], kept[differ[:1]], anew[differ[:1]])
        reused_rows += int(packed[0])
    assert reused_rows > 100, reused_rows


@pytest.mark.parametrize("kind", KINDS)
def test_every_row_in_any_order(sketches, kind):
    """Rows shuffled, then in order again: every row's window, whether the row moves now
    forward, back or not at all."""
    rng = np.random.default_rng(stable_seed("top-k-any-order", kind))
    ts, items, present = stream(rng, kind, 1000)
    order = rng.permutation(len(ts))
    order[len(order) // 2:] = np.sort(order[len(order) // 2:])
    ts, items, present = ts[order], items[order], present[order]
    out = per_row(sketches, 300, 0.2, ts, items, present, False)
    for i, (listed, effective) in enumerate(out):
        seen = np.arange(len(ts)) <= i
        counts = window_counts(ts, items, present, seen, ts[: i + 1].max(), 300)
        check_window(listed, effective, counts, (kind, i), tie=raw_bytes)
        assert effective <= 0.2, (kind, i)  # the tolerance is the one asked for


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("partials", [1, 3, 16])
def test_merged_partials_and_sub_windows(sketches, kind, partials):
    """GROUP BY: rows shuffled into partials, each fed in its own order, folded linearly;
    then the window and sub-windows of it ending at now and after now."""
    rng = np.random.default_rng(stable_seed("top-k-merged", kind, partials))
    ts, items, present = stream(rng, kind, 2000)
    parts = rng.integers(0, partials, len(ts)).astype(np.uint8)
    order = rng.permutation(len(ts))
    window, eps = 600, 0.2
    now = int(ts.max())
    lengths = [1, 40, 300, window]
    for end in (now, now + 250):
        packed = sketches.replay.topKMerged(window, eps, K, _longs(ts[order]), _longs(items[order]),
                                            _flags(present[order]), bytes(parts[order]), end,
                                            _longs(lengths))
        for (listed, effective), length in zip(answers(packed, len(lengths)), lengths):
            counts = window_counts(ts, items, present, np.ones(len(ts), dtype=bool), end, length)
            check_window(listed, effective, counts, (end, length), tie=raw_bytes)
            assert effective <= eps, (end, length)


def test_many_items_in_a_long_stream_stay_within_the_caps(sketches):
    """10^5 rows of 10^4 items at eps 0.02: nodes and counts per node stay bounded and the
    last rows keep the guarantee."""
    rng = np.random.default_rng(stable_seed("top-k-long"))
    n = 100_000
    ts = np.arange(n, dtype=np.int64)
    items = (rng.zipf(1.2, n) % 10_000).astype(np.int64)
    present = np.ones(n, dtype=bool)
    sketch = sketches.replay.topKSketch(20_000, 0.02, False, _longs(ts), _longs(items))
    assert sketch.nodeCount() < 4096 and sketch.capacity() == 99
    out = answers(sketches.replay.topKAnswers(sketch, n - 1, _longs([20_000, 5_000]), K), 2)
    for (listed, effective), length in zip(out, [20_000, 5_000]):
        counts = window_counts(ts, items, present, np.ones(n, dtype=bool), n - 1, length)
        check_window(listed, effective, counts, length, tie=raw_bytes)
        assert effective <= 0.02, length  # under the node cap: no coarsening
    data = bytes(sketches.format.serializeTopK(sketch))
    assert len(data) < 200_000, len(data)


def _sketch(sketches, ts, items, window=50, eps=0.3, microseconds=False):
    return sketches.replay.topKSketch(window, eps, microseconds, _longs(ts), _longs(items))


@pytest.mark.parametrize("shuffled", [False, True])
def test_bytes_round_trip_to_the_same_answers_and_bytes(sketches, shuffled):
    rng = np.random.default_rng(stable_seed("top-k-bytes", shuffled))
    ts = np.sort(rng.integers(0, 400, 800))
    items = rng.zipf(1.5, 800) % 50
    order = rng.permutation(800) if shuffled else np.arange(800)
    sketch = _sketch(sketches, ts[order], items[order], window=200)
    data = bytes(sketches.format.serializeTopK(sketch))
    back = sketches.format.deserializeTopK(data)
    end = int(ts.max())
    lengths = _longs([1, 50, 200])
    assert bytes(sketches.replay.topKAnswers(back, end, lengths, K)) == bytes(
        sketches.replay.topKAnswers(sketch, end, lengths, K))
    assert bytes(sketches.format.serializeTopK(back)) == data
    # A GROUP BY's final side reads its partial buffers without the invariant's check.
    final_side = sketches.format.deserializeTopKBuffer(data)
    assert bytes(sketches.format.serializeTopK(final_side)) == data
    assert bytes(sketches.replay.topKAnswers(final_side, end, lengths, K)) == bytes(
        sketches.replay.topKAnswers(sketch, end, lengths, K))
    assert back.itemType() == "bigint" and back.window() == 200 and back.eps() == 0.3
    assert 1 < back.nodeCount() < 400


def _crc(body: bytes) -> bytes:
    return body + zlib.crc32(body).to_bytes(4, "big")


def test_damaged_or_foreign_bytes_are_refused_by_name(sketches):
    sketch = _sketch(sketches, list(range(300)), [i % 9 for i in range(300)], window=500)
    data = bytes(sketches.format.serializeTopK(sketch))
    body = data[:-4]
    # After the 22-byte header: c (8 bytes), the item type (a length byte and "bigint").
    damaged = {
        "checksum mismatch": data[:-1] + bytes([data[-1] ^ 1]),
        "truncated": data[:3],
        "invalid collapse parameter": _crc(body[:22] + struct.pack(">d", 2.0) + body[30:]),
        "invalid length": _crc(body[:30] + b"\xff\x7f" + body[31:]),
        "trailing bytes after the sketch": _crc(body + b"\x00"),
        r"a count sketch \(window_sketch\) is not a top-k sketch": bytes(
            sketches.format.serialize(sketches.dyadic(50, 0.02))),
    }
    for message, bad in damaged.items():
        with pytest.raises(Exception, match=f"invalid sketch bytes: {message}"):
            sketches.format.deserializeTopK(bad)
    with pytest.raises(Exception, match=r"a top-k sketch \(window_top_k_sketch\) is not a count sketch"):
        sketches.format.deserialize(data)


def test_the_item_dictionary_is_canonical(sketches):
    """Kind 9 writes each item once, ascending, every one used: bytes with the dictionary out
    of order or holding an item no node counts are refused (equal states, equal bytes), and
    a sketch read back writes the same bytes."""
    sketch = _sketch(sketches, list(range(300)), [i % 9 for i in range(300)], window=500)
    data = bytes(sketches.format.serializeTopK(sketch))
    assert data[2] == 9
    body = data[:-4]
    # After the header (22 bytes), c (8), the item type (7): the count, then 9 items of 9 bytes.
    start = 38
    assert body[start - 1] == 9 and all(body[start + 9 * i] == 8 for i in range(9))
    items = [body[start + 9 * i: start + 9 * i + 9] for i in range(9)]
    swapped = body[:start] + items[1] + items[0] + b"".join(items[2:]) + body[start + 81:]
    unused = (body[:start - 1] + bytes([10]) + b"".join(items) + b"\x08" + b"\x7f" * 8
              + body[start + 81:])
    for message, bad in {"items out of order": swapped, "an unused item": unused}.items():
        with pytest.raises(Exception, match=f"invalid sketch bytes: {message}"):
            sketches.format.deserializeTopK(_crc(bad))
    assert bytes(sketches.format.serializeTopK(sketches.format.deserializeTopK(data))) == data


def test_damaged_bytes_with_valid_checksums_are_refused_or_stay_certified(sketches):
    """Any byte changed, checksum recomputed: refused by name, or a sketch whose answers
    still list items with lower <= upper."""
    rng = np.random.default_rng(stable_seed("top-k-fuzz"))
    data = bytes(sketches.format.serializeTopK(
        _sketch(sketches, np.arange(300), rng.integers(0, 12, 300), window=300)))
    body = bytearray(data[:-4])
    refused, kept = sketches.refused_and_read("top_k", one_bit_flips(rng, body))
    for back in kept:
        listed, _ = answers(sketches.replay.topKAnswers(back, back.now(), _longs([back.window()]), K),
                            1)[0]
        assert all(lower <= estimate <= upper for _, estimate, lower, upper in listed)
    assert refused > 0 and kept


def leveled_per_row(sketches, window, eps, ts, items, present, k=K):
    """LeveledTopK's answers per row, each row's mode (1 exact, 2 bounded), and the most
    levels and the most counters and records it held on any row."""
    packed = bytes(sketches.replay.leveledTopKPerRow(window, float(eps), k, _longs(ts), _longs(items),
                                                      _flags(present)))
    levels, held = np.frombuffer(packed[-16:], dtype=">i8")
    modes: list[int] = []
    return answers(packed[:-16], len(ts), k=k, modes=modes), modes, int(levels), int(held)


def sliding_counts(ts, items, present, window):
    """The exact item counts of each row's window (rows in time order), kept incrementally."""
    counts: collections.Counter = collections.Counter()
    start = 0
    for i in range(len(ts)):
        if present[i]:
            counts[int(items[i])] += 1
        while ts[start] <= ts[i] - window:
            if present[start]:
                counts[int(items[start])] -= 1
                if counts[int(items[start])] == 0:
                    del counts[int(items[start])]
            start += 1
        yield counts


def cover_records(eps: float) -> int:
    """LeveledTopK.coverRecords as docs/top-k.md states it: with m = ceil(2 / eps) - 1,
    ceil(12 / eps · (m + 2) / (m + 1)) + m + 2."""
    m = math.ceil(2 / eps) - 1
    return math.ceil(12 / eps * (m + 2) / (m + 1)) + m + 2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("window,eps", [(300, 0.3), (3000, 0.3), (10**9, 0.3), (3000, 0.1), (10**9, 0.05)])
def test_leveled_counts_every_row_in_time_order(spark, sketches, kind, window, eps):
    """The running frames' leveled counts on every row of 6,000: each listed count within
    bounds at most eps·n apart, every item above eps·n listed, exact whenever the window
    holds fewer than coverRecords rows; levels and what they hold stay within
    log2(rows) + 2 levels of queueCapacity records and capacity counters each."""
    rng = np.random.default_rng(stable_seed("leveled-top-k", kind, window, eps))
    n = 6000
    ts, items, present = stream(rng, kind, n)
    out, modes, levels, held = leveled_per_row(sketches, window, eps, ts, items, present)
    cover = cover_records(eps)
    assert _scala_object(spark, "windowsketch.core.frequencies.LeveledTopK").coverRecords(eps) == cover
    straddled = bounded = 0
    for i, ((listed, effective), counts) in enumerate(zip(out, sliding_counts(ts, items, present, window))):
        rows = sum(counts.values())
        if rows < cover:
            assert modes[i] == 1, (kind, i, rows)
        bounded += modes[i] == 2
        check_window(listed, effective, counts, (kind, i), exact=modes[i] == 1, tie=raw_bytes)
        straddled += any(lower < upper for _, _, lower, upper in listed)
    assert levels <= np.log2(n) + 2, levels
    queue = cover + cover // 8 + 1
    assert held <= levels * (queue + int(np.ceil(2 / eps))), held
    if window > 300:
        assert bounded > n // 3, bounded
        if kind != "distinct":  # items of one row each: none is certainly counted once bounded
            assert straddled > n // 10, straddled
    # Levels of g past n / queue hold fewer records than a full queue: about n / g + m.
    m = int(np.ceil(2 / eps)) - 1
    assert held <= (np.log2(n / queue) + 3) * queue + levels * (2 * m + 2), (held, levels, queue)


@pytest.mark.parametrize("k", [2, 3])
def test_leveled_answer_for_k_heads_a_longer_one(sketches, k):
    """The leveled counts' answer for k, kept from row to row, is the first k of the answer
    for 100 on every row: an item in blocks of 30 rows a hundred, five others sharing the rest."""
    window, eps = 2000, 0.3
    position = np.arange(6000)
    items = np.where(position % 100 < 30, 1, 2 + position % 5)
    present = np.ones(len(position), dtype=bool)
    short, modes, _, _ = leveled_per_row(sketches, window, eps, position, items, present, k=k)
    longer, _, _, _ = leveled_per_row(sketches, window, eps, position, items, present, k=100)
    for i, ((listed, effective), (full, _), counts) in enumerate(
            zip(short, longer, sliding_counts(position, items, present, window))):
        assert listed == full[:k], i
        check_window(listed, effective, counts, i, k=k, exact=modes[i] == 1, tie=raw_bytes)
    assert modes[-1] == 2
