"""One key's live count (windowsketch.core.LiveCount) over micro-batches, as the streaming
operator drives it, against brute-force exact counts of every tick's window."""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import _longs, stable_seed
from live_reference import check_crossings_against_exact, exact_at, expected_crossings, expected_rows

ALERT = {0: None, 1: "above", 2: "below"}
CROSSING = {0: None, 1: "rise", -1: "fall"}


def run_live(sketches, window, every, eps, batches, up_to, above=-1, below=-1,
             through_bytes=True):
    """Emitted rows (batch, tick, estimate, lower, upper, alert, crossing) and per-batch
    (live, next tick, state bytes, refused)."""
    ends = np.cumsum([len(b) for b in batches])
    ts = np.concatenate([np.asarray(b, dtype=np.int64) for b in batches]) if batches else []
    rows, per_batch = sketches.replay.runLive(
        window, every, float(eps), above, below, _longs(ts), _longs(ends), _longs(up_to),
        through_bytes)
    rows = np.frombuffer(bytes(rows), dtype=">i8").astype(np.int64).reshape(-1, 7)
    per_batch = np.frombuffer(bytes(per_batch), dtype=">i8").astype(np.int64).reshape(-1, 4)
    return rows, per_batch


def watermarked_batches(rng, stream, n_batches, delay):
    """Splits a time-jittered stream into micro-batches and drops what Spark would drop:
    events at or before the watermark of their batch (the largest earlier ts - delay)."""
    chunks = np.array_split(stream, n_batches)
    batches, up_to, accepted, newest = [], [], [], None
    for chunk in chunks:
        mark = -(2**62) if newest is None else newest - delay
        kept = chunk[chunk > mark]
        batches.append(rng.permutation(kept))
        up_to.append(mark)
        accepted.extend(kept.tolist())
        if len(chunk):
            newest = max(int(chunk.max()), newest if newest is not None else int(chunk.max()))
    return batches, up_to, np.array(accepted, dtype=np.int64), newest


STREAMS = ["bursts", "all-then-nothing", "duplicates", "gaps", "steady"]


def make_stream(rng, kind, n, window):
    if kind == "bursts":
        starts = np.sort(rng.integers(0, 40 * window, 8))
        ts = np.concatenate([s + rng.integers(0, window // 4 + 1, n // 8) for s in starts])
    elif kind == "all-then-nothing":
        ts = rng.integers(0, 2 * window, n)
    elif kind == "duplicates":
        ts = np.repeat(rng.integers(0, 10 * window, n // 20), 20)
    elif kind == "gaps":
        ts = rng.integers(0, window, n) + rng.integers(0, 6, n) * 5 * window
    else:
        ts = rng.integers(0, 20 * window, n)
    jitter = rng.integers(0, max(2, window // 10), len(ts))
    return np.sort(ts).astype(np.int64), jitter


@pytest.mark.parametrize("kind", STREAMS)
@pytest.mark.parametrize("window, every, eps", [(50, 10, 0.1), (1000, 250, 0.01),
                                                (300, 300, 0.05), (7, 3, 0.5)])
def test_every_tick_within_the_bound_and_no_tick_missed(sketches, kind, window, every, eps):
    rng = np.random.default_rng(stable_seed(kind, window, every, eps))
    ts, jitter = make_stream(rng, kind, 2000, window)
    arrival = ts[np.argsort(ts + jitter, kind="stable")]  # out of order, by up to the jitter
    delay = int(jitter.max())
    batches, up_to, accepted, newest = watermarked_batches(rng, arrival, 40, delay)
    flush = newest + window + 2 * every
    batches.append(np.array([], np.int64))
    up_to.append(flush)
    rows, per_batch = run_live(sketches, window, every, eps, batches, up_to)

    expected = expected_rows(accepted, window, every, flush)
    assert [int(t) for t in rows[:, 1]] == [t for t, _ in expected]
    for (b, tick, est, lower, upper, _, _), (_, exact) in zip(rows, expected):
        assert lower <= exact <= upper, (tick, lower, exact, upper)
        assert abs(est - exact) <= eps * exact, (tick, est, exact)
        assert (upper == 0) == (exact == 0)
        assert up_to[b] >= tick and (b == 0 or up_to[b - 1] < tick)  # emitted once final
    assert per_batch[:, 3].sum() == 0  # nothing the watermark lets through is refused
    assert per_batch[-1, 0] == 0  # every key ends: its window emptied, nothing pending
    assert sum(1 for _, e in expected if e == 0) >= 1


def test_state_survives_bytes_between_batches(sketches):
    rng = np.random.default_rng(3)
    ts, jitter = make_stream(rng, "bursts", 3000, 400)
    batches, up_to, _, newest = watermarked_batches(rng, ts[np.argsort(ts + jitter)], 60,
                                                    int(jitter.max()))
    batches.append(np.array([], np.int64))
    up_to.append(newest + 1000)
    kept, _ = run_live(sketches, 400, 50, 0.02, batches, up_to, through_bytes=False)
    restored, per_batch = run_live(sketches, 400, 50, 0.02, batches, up_to, through_bytes=True)
    assert np.array_equal(kept, restored)
    # The state is a sketch plus the events that wait for the watermark, a few bytes each.
    arrived = np.cumsum([len(b) for b in batches])
    every_event = np.concatenate(batches)
    for b, state_bytes in enumerate(per_batch[:, 2]):
        waiting = np.count_nonzero(every_event[:arrived[b]] > up_to[b])
        assert state_bytes <= 600 + 3 * waiting, (b, state_bytes, waiting)


def test_a_busy_keys_state_holds_its_histogram_and_the_events_after_the_watermark(sketches):
    """One event a position for 2.4·10^5 positions, window 2.4·10^5, a tick every 6·10^4
    (a minute of a busy key), batches of 5,000 with the watermark 1,000 behind the newest:
    events at or before the watermark enter the histogram at once, so the state is the
    histogram (a few KB) plus the events after the watermark, never the events of a tick
    still to come (up to 6·10^4 here)."""
    n, window, every, delay = 240_000, 240_000, 60_000, 1_000
    ts = np.arange(n, dtype=np.int64)
    batches = np.array_split(ts, n // 5_000)
    up_to = [int(b[-1]) - delay for b in batches]
    _, per_batch = run_live(sketches, window, every, 0.01, batches, up_to)
    for b, state_bytes in enumerate(per_batch[:, 2]):
        assert state_bytes <= 4_000 + 3 * delay, (b, state_bytes)


def test_late_events_are_refused_not_counted(sketches):
    """At or before a tick already emitted: refused (Spark's watermark drops these first)."""
    rows, per_batch = run_live(sketches, 100, 10, 0.1, [[5, 15, 25], [20, 31], [30]],
                               [20, 30, 1000])
    assert list(per_batch[:, 3]) == [0, 1, 1]  # 20 after tick 20; 30 after tick 30
    emitted = {int(t): int(e) for t, e in rows[:, [1, 2]]}
    assert emitted[30] == 3 and emitted[40] == 4  # 5, 15, 25 then 31


def test_a_quiet_key_emits_zero_once_and_ends(sketches):
    rows, per_batch = run_live(sketches, 30, 10, 0.1, [[1, 2, 3], [], []], [0, 100, 10**6])
    assert [(int(t), int(e)) for t, e in rows[:, [1, 2]]] == [(10, 3), (20, 3), (30, 3), (40, 0)]
    assert list(per_batch[:, 0]) == [1, 0, 0]


@pytest.mark.parametrize("above, below", [(40, -1), (-1, 25), (40, 25)])
def test_alerts_fire_once_per_certified_crossing(sketches, above, below):
    rng = np.random.default_rng(stable_seed(above, below))
    # Rates that rise well above 40 and fall well under 25 in the 100-wide window, twice.
    rates = [0.05, 0.8, 0.1, 0.02, 0.9, 0.0]
    ts = np.concatenate([np.flatnonzero(rng.random(600) < r) + 600 * i
                         for i, r in enumerate(rates)]).astype(np.int64)
    batches = np.array_split(ts, 30)
    up_to = [int(b[0]) - 1 if len(b) else -1 for b in batches[1:]] + [10**6]
    counts, _ = run_live(sketches, 100, 20, 0.05, batches, up_to)
    alerts, _ = run_live(sketches, 100, 20, 0.05, batches, up_to, above, below)
    expected = expected_crossings([tuple(r[1:5]) for r in counts],
                                  above if above >= 0 else None, below if below >= 0 else None)
    got = [(int(r[1]), ALERT[int(r[5])], CROSSING[int(r[6])]) for r in alerts]
    assert got == expected
    for name in ("above", "below"):
        kinds = [c for _, a, c in got if a == name]
        assert all(x != y for x, y in zip(kinds, kinds[1:]))  # rises and falls alternate
    if above >= 0:
        assert [c for _, a, c in got if a == "above"] == ["rise", "fall", "rise", "fall"]
    if below >= 0:
        assert [c for _, a, c in got if a == "below"] == ["rise", "fall", "rise", "fall"]
    # Certified: an alert row's bounds are on its side of the threshold, so the exact is too.
    for r in alerts:
        lower, upper, alert, crossing = r[3], r[4], ALERT[int(r[5])], CROSSING[int(r[6])]
        if alert == "above":
            assert lower > above if crossing == "rise" else upper <= above
        else:
            assert upper < below if crossing == "fall" else lower >= below
    # Against the exact count of each tick's window.
    check_crossings_against_exact(
        got, [(int(r[1]), exact_at(ts, int(r[1]), 100)) for r in counts],
        above if above >= 0 else None, below if below >= 0 else None, 0.05)


def test_a_crossing_at_an_empty_first_tick_is_emitted(sketches):
    """`every` longer than the window: the event at 1 has left the window ending at the first
    tick, 60. A count starts under any `below`; at 0 it is not under `below 0`, so that
    alert rises there, and the row says so although the window is empty."""
    rows, per_batch = run_live(sketches, 10, 60, 0.1, [[1]], [1000], below=0)
    assert [(int(r[1]), ALERT[int(r[5])], CROSSING[int(r[6])], int(r[4])) for r in rows] == \
        [(60, "below", "rise", 0)]
    assert per_batch[-1, 0] == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_alerts_are_never_false_against_the_exact_count_near_the_threshold(sketches, seed):
    """A count that hovers around the thresholds, within the estimate's error: every alert
    is true of the exact count of its tick's window (an alert on the estimate is not)."""
    rng = np.random.default_rng(stable_seed("hover", seed))
    ts = np.flatnonzero(rng.random(20_000) < 0.4).astype(np.int64)  # about 40 a window
    batches = np.array_split(ts, 50)
    up_to = [int(b[0]) - 1 for b in batches[1:]] + [10**6]
    alerts, _ = run_live(sketches, 100, 1, 0.05, batches, up_to, 40, 40)
    assert len(alerts) >= 10
    for r in alerts:
        exact = exact_at(ts, int(r[1]), 100)
        alert, crossing = ALERT[int(r[5])], CROSSING[int(r[6])]
        if alert == "above":
            assert exact > 40 if crossing == "rise" else exact <= 40, (int(r[1]), exact)
        else:
            assert exact < 40 if crossing == "fall" else exact >= 40, (int(r[1]), exact)


def test_state_from_other_parameters_is_refused(sketches):
    spec = sketches.replay.liveSpec(100, 10, 0.1)
    other = sketches.replay.liveSpec(200, 10, 0.1)
    state = sketches.replay.liveCount(spec)
    state.add(5)
    data = state.toBytes()
    with pytest.raises(Exception, match=re.escape("written with window 100 (now 200)")):
        sketches.replay.liveFromBytes(other, data)
    damaged = bytearray(bytes(data))
    damaged[3] ^= 1
    with pytest.raises(Exception, match="invalid sketch bytes: live window state checksum"):
        sketches.replay.liveFromBytes(spec, bytes(damaged))
