"""The sliding HyperLogLog (windowsketch.core.hll.SlidingHyperLogLog) against a HyperLogLog
built from scratch over exactly each window's values: the registers must be equal, in any
row order, after merges and through bytes."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import _longs, stable_seed

P_FOR_RSD = {0.05: 9, 0.2: 5, 0.01: 14}


def registers_of(hashes, p):
    """Plain HyperLogLog registers of these 64-bit hashes, as Spark's HLL++ computes them."""
    u = hashes.astype(np.uint64)
    index = (u >> np.uint64(64 - p)).astype(np.int64)
    w = (u << np.uint64(p)) | np.uint64(1 << (p - 1))
    rank = 64 - np.floor(np.log2(w.astype(np.float64))).astype(np.int64)
    # floor(log2) of a float can round up near powers of two: fix from the exact bit length
    rank = np.array([65 - int(x).bit_length() for x in w.tolist()], dtype=np.int64)
    regs = np.zeros(1 << p, dtype=np.int64)
    np.maximum.at(regs, index, rank)
    return regs


def in_window(ts, now, window):
    return (ts <= now) & (now - ts < window)


def stream(rng, kind, n):
    values = {
        "all-distinct": np.arange(n),
        "repeats": rng.integers(0, 30, n),
        "skewed": np.minimum(rng.zipf(1.3, n), 10**6),
        "bursts": np.where(rng.random(n) < 0.5, rng.integers(0, 5, n), np.arange(n)),
    }[kind]
    hashes = (values.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
              ^ np.uint64(0xD6E8FEB86659FD93)).astype(np.int64)
    hashes = (hashes.astype(np.uint64) * np.uint64(0xFF51AFD7ED558CCD)).astype(np.int64)
    return hashes


@pytest.mark.parametrize("kind", ["all-distinct", "repeats", "skewed", "bursts"])
@pytest.mark.parametrize("window", [1, 10, 300, 10**9])
@pytest.mark.parametrize("rsd", [0.05, 0.2])
def test_registers_equal_a_fresh_hyperloglog_of_each_window(sketches, kind, window, rsd):
    rng = np.random.default_rng(stable_seed(kind, window, rsd))
    n, p = 1500, P_FOR_RSD[rsd]
    ts = np.sort(rng.integers(0, 3000, n)).astype(np.int64)
    hashes = stream(rng, kind, n)
    packed = sketches.replay.distinctRegistersPerRow(window, rsd, _longs(ts), _longs(hashes))
    row_bytes = (1 << p) + 12
    data = bytes(packed)
    for i in range(0, n, 7):
        row = data[i * row_bytes:(i + 1) * row_bytes]
        got = np.frombuffer(row[:1 << p], dtype=np.int8).astype(np.int64)
        inside = in_window(ts[:i + 1], ts[i], window)
        expected = registers_of(hashes[:i + 1][inside], p)
        assert np.array_equal(got, expected), i
        z = np.frombuffer(row[1 << p:(1 << p) + 8], dtype=">f8")[0]
        zeros = int.from_bytes(row[(1 << p) + 8:], "big")
        assert z == np.sum(2.0 ** -expected) and zeros == np.count_nonzero(expected == 0)


@pytest.mark.parametrize("order", ["shuffled", "reversed", "merged", "bytes"])
def test_any_order_and_merges_hold_the_same_registers(sketches, order):
    rng = np.random.default_rng(stable_seed(order))
    n, window, rsd, p = 4000, 500, 0.05, 9
    ts = rng.integers(0, 5000, n).astype(np.int64)
    hashes = stream(rng, "skewed", n)
    expected = registers_of(hashes[in_window(ts, ts.max(), window)], p)
    if order in ("shuffled", "reversed"):
        perm = rng.permutation(n) if order == "shuffled" else np.argsort(-ts, kind="stable")
        sketch = sketches.replay.distinct(window, rsd)
        sketches.replay.addDistinct(sketch, _longs(ts[perm]), _longs(hashes[perm]))
    else:
        sketch = sketches.replay.distinct(window, rsd)
        for part in np.array_split(rng.permutation(n), 37):
            piece = sketches.replay.distinct(window, rsd)
            sorted_part = part[np.argsort(ts[part], kind="stable")]
            sketches.replay.addDistinct(piece, _longs(ts[sorted_part]), _longs(hashes[sorted_part]))
            if order == "bytes":
                piece = sketches.format.deserializeDistinct(sketches.format.serializeDistinct(piece))
            sketch.merge(piece)
    got = np.frombuffer(bytes(sketches.replay.distinctRegisters(sketch)), dtype=np.int8)
    assert np.array_equal(got.astype(np.int64), expected)
    # What the state holds: at most 65 - p pairs per register, far fewer in practice.
    assert sketch.pairCount() <= (1 << p) * 12


@pytest.mark.parametrize("n", [40, 200, 3000])
@pytest.mark.parametrize("via", ["merge", "bytes"])
def test_a_merge_into_a_fresh_sketch_keeps_its_running_sums(sketches, n, via):
    """Every row at one time: the fresh sketch's buffer settles within the merge with its
    replayed rows in time order; the pairs merged after must still reach its sums."""
    rng = np.random.default_rng(stable_seed("fresh merge", n, via))
    window, rsd, p = 100, 0.05, 9
    ts = np.full(n, 42, dtype=np.int64)
    hashes = stream(rng, "all-distinct", n)
    piece = sketches.replay.distinct(window, rsd)
    sketches.replay.addDistinct(piece, _longs(ts), _longs(hashes))
    fresh = sketches.replay.distinct(window, rsd)
    if via == "merge":
        fresh.merge(piece)
    else:
        sketches.format.mergeDistinct(fresh, sketches.format.serializeDistinct(piece))
    expected = registers_of(hashes, p)
    assert fresh.inverseSum() == np.sum(2.0 ** -expected)
    assert fresh.zeroRegisters() == np.count_nonzero(expected == 0)


@pytest.mark.parametrize("order", ["in order", "shuffled"])
def test_a_sketch_writes_the_same_bytes_from_its_row_buffer_as_from_its_registers(sketches, order):
    """A sketch keeps its rows in a buffer until something reads its registers, or until
    more rows stay inside its window than the buffer holds; the bytes written from the
    buffer, from the registers, after a read back, and after any merge of halves (each one
    buffered or not) are those of one sketch fed every row, and so are the registers."""
    rng = np.random.default_rng(stable_seed("buffer", order))
    for case in range(80):
        n = int(rng.integers(1, 160))
        window = int(rng.choice([1, 5, 40, 10**9]))
        rsd = float(rng.choice([0.05, 0.2]))
        # About eight rows a time: a register often holds rows of two ranks at one time.
        ts = np.sort(rng.integers(0, n // 8 + 2, n)).astype(np.int64)
        if order == "shuffled":
            ts = rng.permutation(ts)
        hashes = stream(rng, str(rng.choice(["repeats", "bursts", "all-distinct"])), n)

        def fed(rows, read_registers):
            sketch = sketches.replay.distinct(window, rsd)
            sketches.replay.addDistinct(sketch, _longs(ts[rows]), _longs(hashes[rows]))
            if read_registers:
                sketch.pairCount()  # settles the buffer into the registers
            return sketch

        def written(sketch):
            return bytes(sketches.format.serializeDistinct(sketch))

        every = np.arange(n)
        data = written(fed(every, False))
        assert data == written(fed(every, True)), case
        assert written(sketches.format.deserializeDistinct(data)) == data, case
        expected = registers_of(hashes[in_window(ts, ts.max(), window)], 9 if rsd == 0.05 else 5)
        cut = int(rng.integers(0, n + 1))
        for first_read, second_read in [(False, False), (False, True), (True, False), (True, True)]:
            merged = fed(every[:cut], first_read)
            merged.merge(fed(every[cut:], second_read))
            assert written(merged) == data, (case, first_read, second_read)
            assert np.array_equal(np.frombuffer(bytes(sketches.replay.distinctRegisters(merged)),
                                                dtype=np.int8).astype(np.int64), expected), case


def test_merging_other_parameters_is_refused(sketches):
    a, b = sketches.replay.distinct(100, 0.05), sketches.replay.distinct(200, 0.05)
    with pytest.raises(Exception, match="different parameters"):
        a.merge(b)


def read_distinct(sketches, data: bytes):
    """("ok", sketch) or ("corrupt", message); any other exception fails the test."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    try:
        return "ok", sketches.format.deserializeDistinct(data)
    except (Py4JJavaError, CapturedException) as e:
        thrown = e.java_exception if isinstance(e, Py4JJavaError) else e._origin
        assert thrown.getClass().getName() == "windowsketch.core.CorruptSketchException", (
            thrown.getClass().getName(), str(thrown.getMessage()))
        return "corrupt", str(thrown.getMessage())


def test_damaged_bytes_with_valid_checksums_are_rejected_or_consistent(sketches):
    """Behind the CRC: every truncation and much damage is caught by the structure (pair
    counts, ranks increasing with age, steps, the window); what reads must round-trip."""
    from sketch_layout import sign

    rng = np.random.default_rng(77)
    ts = np.sort(rng.integers(0, 3000, 3000)).astype(np.int64)
    sketch = sketches.replay.distinct(1000, 0.2)
    sketches.replay.addDistinct(sketch, _longs(ts), _longs(stream(rng, "skewed", 3000)))
    data = bytes(sketches.format.serializeDistinct(sketch))
    assert read_distinct(sketches, data)[0] == "ok"
    body = data[:-4]
    outcomes = {"flip": [0, 0], "truncate": [0, 0]}
    variants = [("truncate", body[:n]) for n in range(len(body))]
    for _ in range(300):
        damaged = bytearray(body)
        at = int(rng.integers(3, len(body)))
        damaged[at] ^= 1 << int(rng.integers(0, 8))
        variants.append(("flip", bytes(damaged)))
    signed = [sign(variant) for _, variant in variants]
    # Every verdict in one JVM call; the JVM names anything else than a refusal there.
    for (how, _), blob, verdict in zip(variants, signed, sketches.verdicts("distinct", signed)):
        if verdict == "read":
            again = bytes(sketches.format.serializeDistinct(sketches.format.deserializeDistinct(blob)))
            assert bytes(sketches.format.serializeDistinct(
                sketches.format.deserializeDistinct(again))) == again
        else:
            assert verdict.startswith("invalid sketch bytes: "), verdict
        outcomes[how][verdict != "read"] += 1
    # A stored sketch's estimate reads its registers straight from the bytes, with the
    # same checks: the same verdict, the same message, for every variant.
    assert sketches.verdicts("stored distinct", signed) == sketches.verdicts("distinct", signed)
    # A flipped step or rank often still describes a valid sketch (measured: 125 of 300
    # flips rejected): the CRC is what catches those; the structure catches the rest.
    assert outcomes["truncate"][0] == 0 and outcomes["flip"][1] >= 100, outcomes
    # A count sketch is not a distinct-count sketch, and the other way round.
    count = bytes(sketches.format.serialize(sketches.dyadic(10, 0.1, [1], [True])))
    assert "is not a distinct-count sketch" in read_distinct(sketches, count)[1]
    with pytest.raises(Exception, match=r"a distinct-count sketch \(window_distinct_sketch\) "
                                        r"is not a count sketch \(window_sketch\)"):
        sketches.format.deserialize(data)


def test_a_sketch_read_back_and_resumed_in_order_keeps_its_running_sums(sketches):
    """A live key's distinct count is read back from its state each micro-batch and resumed
    in time order. Its rows may come back in a buffer, which replays them in the buffer's
    order, not time order: resuming settles them first, so rows in time order after it
    leave the sketch in order (each read O(1), not a pass over every register), with the
    registers of the window's rows."""
    rng = np.random.default_rng(stable_seed("resume"))
    for case in range(40):
        window = int(rng.choice([5, 40, 10**9]))
        n = int(rng.integers(2, 60))
        ts = np.sort(rng.integers(0, 30, n)).astype(np.int64)
        hashes = stream(rng, str(rng.choice(["repeats", "bursts", "all-distinct"])), n)
        cut = int(rng.integers(1, n))
        sketch = sketches.replay.distinct(window, 0.05)
        sketches.replay.addDistinct(sketch, _longs(ts[:cut]), _longs(hashes[:cut]))
        read = sketches.format.deserializeDistinct(sketches.format.serializeDistinct(sketch))
        read.resumeInOrder()
        sketches.replay.addDistinct(read, _longs(ts[cut:]), _longs(hashes[cut:]))
        z, zeros = read.inverseSum(), read.zeroRegisters()
        assert read.isInOrder(), case
        expected = registers_of(hashes[in_window(ts, ts.max(), window)], 9)
        assert z == np.sum(2.0 ** -expected) and zeros == np.count_nonzero(expected == 0), case


@pytest.mark.parametrize("kind", ["skewed", "all-distinct", "bursts"])
def test_a_stored_sketch_sums_its_registers_from_its_bytes_as_the_sketch_read_from_them(
        sketches, kind):
    """window_distinct_sketch_estimate sums a stored sketch's registers straight from its
    bytes (SketchFormat.readStoredDistinct): for sparse and dense sketches, at their own
    window and at later ends and shorter sub-windows, the sums equal the deserialized
    sketch's bit for bit and a fresh HyperLogLog's of exactly that window's values."""
    rng = np.random.default_rng(stable_seed("stored", kind))
    kinds = set()
    for case in range(30):
        n = int(rng.integers(1, 2500))
        window = int(rng.choice([3, 50, 700, 10**9]))
        ts = np.sort(rng.integers(0, 1500, n)).astype(np.int64)
        hashes = stream(rng, kind, n)
        sketch = sketches.replay.distinct(window, 0.05)
        sketches.replay.addDistinct(sketch, _longs(ts), _longs(hashes))
        data = bytes(sketches.format.serializeDistinct(sketch))
        kinds.add(data[2])
        stored = sketches.format.readStoredDistinct(data)
        read = sketches.format.deserializeDistinct(data)
        now = int(ts.max())
        assert (stored.now(), stored.window(), stored.rsd()) == (now, window, 0.05)
        ends = [(now, window), (now, max(1, window // 3)), (now + int(rng.integers(0, 60)), window),
                (now + 5, 1)]
        sums = [stored.registerSums()] + [stored.registerSumsAt(e, length) for e, length in ends]
        wanted = [read.registerSums()] + [read.registerSumsAt(e, length) for e, length in ends]
        for (end, length), got, want in zip([(now, window)] + ends, sums, wanted):
            assert (got._1(), got._2()) == (want._1(), want._2()), (case, end, length)
            inside = (ts <= end) & (end - ts < length)
            expected = registers_of(hashes[inside], 9)
            assert got._1() == np.sum(2.0 ** -expected), (case, end, length)
            assert got._2() == np.count_nonzero(expected == 0), (case, end, length)
    assert kinds == {3, 7}, kinds  # dense and sparse sketches both
