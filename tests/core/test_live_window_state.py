"""Live window state (several aggregates per key): a key stopped and resumed from its bytes
emits exactly the rows of one that never stopped, whatever the families; golden states of
versions 1 and 2 still read; alerts on counts and sums are true of the exact window; a
restart under another window, `every` or aggregate list is refused naming each change;
damaged state whose checksum was made to match is refused or loads into a state that keeps
working, never a crash.

`PYTHONPATH=tests python tests/core/test_live_window_state.py OUT_DIR [SCENARIO ...]`
writes the golden states with whatever jar the session loads: it wrote
tests/golden/live/window_*.bin, with version 1 but for window_alerts_positions (version 2,
the first with alerts), window_moments_positions and window_top_k_positions (version 2,
the first with moments and top values), window_percentile_compact_positions (version 2,
percentiles past the exact limit, after the compact nodes' variance budgets) and
window_sliced_* (version 4, percentiles, moments and top values a summary a tick slice) and
window_split_slices_positions (version 4, two slices a tick period), and
window_split_slices_percentile_positions (version 5, before percentiles took more than 128
slices at eps 0.01)."""
from __future__ import annotations

import collections
import os
import re
import sys
import zlib
from fractions import Fraction

import numpy as np
import pytest
from conftest import _longs, verdict_lines
from live_reference import bit_flips, check_crossings_against_exact
from moments_reference import Exact, check_statistic
from windowsketch.sketch.sample import priority

GOLDEN_LIVE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "golden", "live")
MIX = "count:0.05,sum:0.05,distinct:0.05,percentile:0.01:0.5:0.99"

# name -> (window, every, aggregates)
SCENARIOS = {
    "window_mix_positions": (100, 10, MIX),
    "window_mix_time": (600_000_001, 60_000_000, MIX),
    "window_before_any_tick": (50, 7, "count:0.2,percentile:0.1:0.5"),
    "window_alerts_positions": (100, 10, "count:0.05:above=100:below=50,"
                                "sum:0.05:above=50000:below=25000,percentile:0.01:0.5"),
    # eps 0.3: the moments' buckets compact (and straddle) in windows of ~500 values.
    "window_moments_positions": (100, 10, "count:0.05,moments:0.3"),
    "window_top_k_positions": (100, 10, "count:0.05,top_k:3"),
    # eps 0.3: past 128 values the percentile's window is held compact.
    "window_percentile_compact_positions": (3000, 100, "count:0.05,percentile:0.3:0.5:0.99"),
    # eps 0.1: past 64 rows the top values' counts are bounded (a sketch in the state).
    "window_top_k_bounded_positions": (3000, 100, "count:0.05,top_k:3:0.1"),
    # Samples of 3 over windows of ~50 rows, rows equal in time and value among them.
    "window_sample_positions": (100, 10, "count:0.05,sample:3:7"),
    # Version 4: moments and top values a summary a tick slice, slices pruning at eps 0.3;
    # in time the slices start at a tick (the window's newest instant begins the next one).
    "window_sliced_positions": (100, 10, "count:0.05,moments:0.3,top_k:3:0.3"),
    "window_sliced_time": (600_000_001, 60_000_000,
                           "count:0.05,moments:0.01,top_k:3:0.25,percentile:0.01:0.5:0.9"),
    # Version 4: percentiles a summary a tick slice, compacting past 128 values (eps 0.3).
    "window_sliced_percentile_positions": (3000, 100, "count:0.05,percentile:0.3:0.5:0.99"),
    # Ticks every 50 cut a window of 1,013 into 506 equal slices (moments keep them) or, at
    # most 128 for top values and percentiles, two a tick period: 41, of widths 37 and 13.
    "window_split_slices_positions": (1013, 50, "count:0.05,moments:0.3,top_k:3:0.3,"
                                      "percentile:0.3:0.5:0.99"),
    # At eps 0.01 percentiles keep up to 1,024 slices, but a window that 128 slice two a tick
    # period (41, as before the larger cap) keeps that slicing, not 507 equal ones: the states
    # written before resume.
    "window_split_slices_percentile_positions": (1013, 50, "count:0.05,percentile:0.01:0.5:0.99"),
    # Version 5: ticks every 7 cut a window of 1,000 into more than 128 slices, even two a
    # tick period (285): top values keep the running frames' leveled counts, bounded past
    # 147 rows at eps 0.1.
    "window_leveled_top_k_positions": (1000, 7, "count:0.05,top_k:3:0.1"),
}
# Scenarios whose top values keep leveled counts, not tick slices.
LEVELED = {"window_leveled_top_k_positions"}
# Golden states of versions 2 and 3 whose percentiles, moments or top values a key resumes
# in the running frames' form (compact nodes, buckets, bounded counts), where a new key
# keeps tick slices: their answers are checked against the exact windows instead of a key
# that never stopped.
ORDERED_GOLDEN = {"window_moments_positions", "window_top_k_positions",
                  "window_top_k_bounded_positions", "window_percentile_compact_positions"}
# Golden states of version 3 stopped at a watermark between ticks, with final inputs
# already in the slides (`_folded`); window_top_k_bounded_positions is of version 3 too.
FOLDED_GOLDEN = ["window_mix_positions", "window_percentile_compact_positions",
                 "window_top_k_bounded_positions", "window_sliced_positions",
                 "window_sliced_percentile_positions"]
# Golden states whose percentile window version 2 wrote compressed (kind 8) where memory
# held pending leaves: a key resumed from one continues from the compressed nodes, so its
# percentiles are checked against the exact windows instead of a key that never stopped.
COMPACTED_GOLDEN = {"window_percentile_compact_positions"}
# Small enough to flip every bit: 16 registers for the distinct count.
FUZZED = (100, 10, "count:0.05:above=20:below=5,sum:0.05,distinct:0.39,percentile:0.01:0.5,"
          "moments:0.3,top_k:2,sample:2:-5")


def inputs(name: str):
    """(inputs before the stop, the last tick emitted before it, inputs after, the end, the
    stop): each input (time, aggregate index, value) in the family's encoding."""
    window, every, aggregates = FUZZED if name == "fuzzed" else SCENARIOS[name]
    families = [a.split(":")[0] for a in aggregates.split(",")]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    n = 2000
    if name == "window_before_any_tick":
        ts = rng.integers(-40, 200, n)
    else:
        span = 40 * every
        ts = rng.integers(0, span, n)
        ts = ts[(ts < span // 3) | (ts > span // 2)]  # a gap: every slide empties, then refills
    which = rng.integers(0, len(families), len(ts))
    values = []
    for w in which:
        family = families[w]
        if family == "count":
            values.append(1)
        elif family == "sum":
            values.append(int(rng.integers(1, 1000)))
        elif family == "distinct":
            values.append(int(rng.integers(-2**63, 2**63 - 1)))  # a hash
        elif family in ("top_k", "sample"):
            values.append(int(rng.zipf(1.5)) % 20)  # an item (its 8 bytes)
        else:
            values.append(int(np.float64(rng.normal(100, 30)).view(np.int64)))
    rows = np.array(list(zip(ts, which, values)), dtype=object)
    order = np.argsort(ts, kind="stable")
    rows = rows[order]
    if name == "window_before_any_tick":
        stop, tick = 30, -10**6
    else:
        stop = int(rows[len(rows) // 2][0])
        tick = stop - stop % every - every  # inputs after it wait, pending, in the state
    before = [r for r in rows if r[0] <= stop]
    after = [r for r in rows if r[0] > stop]
    # Within the lateness: shuffle each half a little, as a stream delivers them.
    rng.shuffle(before[-20:])
    rng.shuffle(after[:20])
    end = (200 if name == "window_before_any_tick" else 40 * every) + 3 * window
    # A watermark between ticks (not `stop` itself where it is one): the inputs after the
    # last tick up to it are final, and fold.
    return before, tick, after, end, stop if stop % every else stop - 1


def packed(rows) -> bytes:
    return b"".join(int(t).to_bytes(8, "big", signed=True) + int(w).to_bytes(8, "big") +
                    int(v).to_bytes(8, "big", signed=True) for t, w, v in rows)


def live_window(sketches, name, state, rows, up_to, window=None, every=None, aggregates=None):
    w, e, a = FUZZED if name == "fuzzed" else SCENARIOS[name]
    out = sketches.replay.liveWindowState(window or w, every or e, aggregates or a, state,
                                          packed(rows), up_to)
    return bytes(out[0]), str(out[1]).splitlines()


def load(name: str) -> bytes:
    with open(os.path.join(GOLDEN_LIVE, f"{name}.bin"), "rb") as f:
        return f.read()


def slide_forms(sketches, name, state, every=None) -> str:
    w, e, a = SCENARIOS[name]
    return str(sketches.replay.liveSlideForms(w, every or e, a, state))


@pytest.mark.parametrize("stop_at", ["tick", "watermark"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_resumed_key_emits_the_rows_of_one_never_stopped(sketches, name, stop_at):
    """Stopped where the caller's watermark is a tick (inputs after it wait, pending) or
    between ticks (final inputs after the last tick already in the slides): the state holds
    each slide exactly as memory does."""
    before, tick, after, end, stop = inputs(name)
    up_to = tick if stop_at == "tick" else stop
    state, first = live_window(sketches, name, b"", before, up_to)
    assert state[:2] == bytes([0x57, 5])
    every = SCENARIOS[name][1]
    last_tick = up_to - up_to % every
    folds = any(last_tick < r[0] <= up_to for r in before)
    assert folds == (stop_at == "watermark"), name
    assert bool(state[2] & 4) == folds, name  # the state's flag for folded inputs
    forms = slide_forms(sketches, name, state)
    # Every other scenario's ticks slice its window: percentiles, moments and top values keep slices.
    assert forms.count("sliced") == sum(a.split(":")[0] in ("percentile", "moments", "top_k")
                                        for a in SCENARIOS[name][2].split(",")
                                        if name not in LEVELED), (name, forms)
    # Read and written again with nothing new, the state is the same bytes: nothing held is left out.
    assert live_window(sketches, name, state, [], up_to)[0] == state, name
    final, rest = live_window(sketches, name, state, after, end)
    straight_state, straight = live_window(sketches, name, b"", before + after, end)
    assert first + rest == straight and final == straight_state
    assert len(rest) >= 10 and rest[-1].split("|")[1].startswith("0,0,0"), name  # the last row: empty
    goldens = {"tick": name, "watermark": f"{name}_folded" if name in FOLDED_GOLDEN else None}
    golden = goldens[stop_at]
    if golden is None:
        pass
    elif (stop_at == "tick" and name in COMPACTED_GOLDEN) or name in ORDERED_GOLDEN:
        resumed = live_window(sketches, name, load(golden), after, end)[1]
        assert [r.split("|")[:2] for r in resumed] == [r.split("|")[:2] for r in rest]
        if name in COMPACTED_GOLDEN:
            check_percentiles_against_exact(before + after, resumed, name)
        check_moments_against_exact(before + after, resumed, name)
        check_top_values_against_exact(before + after, resumed, name)
    else:
        # The golden state (of versions 1 to 4) resumes to the same rows.
        assert live_window(sketches, name, load(golden), after, end)[1] == rest
    approximate = check_percentiles_against_exact(before + after, first + rest, name)
    # Compacted past the exact limit: the percentile scenarios at eps 0.3.
    assert (approximate > 0) == (name in ("window_sliced_percentile_positions",
                                          "window_percentile_compact_positions",
                                          "window_split_slices_positions")), (name, approximate)
    check_moments_against_exact(before + after, first + rest, name)
    widened = check_top_values_against_exact(before + after, first + rest, name)
    # Slices pruned past the exact limit (16 counters at eps 0.3, 32 at 0.25, 64 at 0.1).
    pruned = {"window_sliced_positions", "window_sliced_time", "window_top_k_bounded_positions",
              "window_split_slices_positions", "window_leveled_top_k_positions"}
    assert (widened > 0) == (name in pruned), (name, widened)
    if "sample" in SCENARIOS[name][2]:
        check_samples_against_exact(before + after, first + rest, name)


def check_samples_against_exact(rows, lines, name):
    """Each emitted sample (slide 1) is the k highest priorities of its tick's window,
    recomputed from the rows (docs/sampling.md), rows equal in time and value together."""
    window, _, aggregates = SCENARIOS[name]
    k, seed = (int(x) for x in aggregates.split(",")[1].split(":")[1:])
    equal_rows = 0
    for line in lines:
        tick = int(line.split("|")[0])
        copies = collections.Counter(
            (int(t), int(v).to_bytes(8, "big", signed=True)) for t, w, v in rows
            if w == 1 and tick - window < t <= tick)
        ranked = sorted(copies, key=lambda r: (priority(seed, r[0], r[1]), r[0], r[1]),
                        reverse=True)
        left, chosen = k, []
        for r in ranked:
            if left == 0:
                break
            chosen.append((r, min(left, copies[r])))
            left -= chosen[-1][1]
        expected = ",".join(f"{t}:{int.from_bytes(v, 'big', signed=True)}x{c}"
                            for (t, v), c in sorted(chosen))
        assert line.split("|")[2] == expected, (name, tick)
        equal_rows += any(c > 1 for _, c in chosen)
    assert equal_rows > 0, name


def family_slides(name, family):
    """(slide index, the aggregate's parameters) of each aggregate of `family` in a scenario."""
    aggregates = SCENARIOS[name][2].split(",")
    return [(i, [float(x) for x in a.split(":")[1:]]) for i, a in enumerate(aggregates)
            if a.split(":")[0] == family]


def check_moments_against_exact(rows, lines, name):
    """Each emitted average and sample variance against exact rational arithmetic over its
    tick's window: within eps (ordered form) and, where the slide keeps tick slices, exact
    with a closed bracket."""
    window = SCENARIOS[name][0]
    for index, (eps,) in family_slides(name, "moments"):
        mine = [r for r in rows if r[1] == index]
        ts = np.array([r[0] for r in mine], dtype=np.int64)
        values = np.array([r[2] for r in mine], dtype=np.int64).view(np.float64)
        exact = Exact(values)
        for line in lines:
            tick = int(line.split("|")[0])
            n, mean, m2 = exact.of((ts <= tick) & (ts > tick - window))
            for stat, text in zip(["avg", "var_samp"], line.split("|")[1 + index].split(";")):
                got = None if text == "null" else [float(x) for x in text.split(",")]
                check_statistic(stat, *(got or [None] * 3), n, mean, m2, eps, (name, tick))
                if got is not None and name not in ORDERED_GOLDEN:
                    check_statistic(stat, got[0], None, None, n, mean, m2, 0.0, (name, tick))
                    assert got[1] == got[2], (name, tick, got)


def check_top_values_against_exact(rows, lines, name):
    """Each listed item's bounds hold its exact count in its tick's window, at most eps n
    apart; the list is as long as the window's distinct items allow, or shorter only with
    what it leaves off counting at most its width. Returns how many
    listed counts were bounded rather than exact."""
    window = SCENARIOS[name][0]
    widened = 0
    for index, (k, *eps) in family_slides(name, "top_k"):
        eps = eps[0] if eps else 0.01
        for line in lines:
            tick = int(line.split("|")[0])
            counts = collections.Counter(int(v) for t, w, v in rows
                                         if w == index and tick - window < t <= tick)
            n = sum(counts.values())
            listed = [tuple(int(x) for x in c.split(":"))
                      for c in line.split("|")[1 + index].split(",") if c]
            assert len(listed) <= min(int(k), len(counts)), (name, tick)
            if len(listed) < min(int(k), len(counts)):
                # Slices pruned of every counter (docs/top-k.md), in the one scenario whose
                # windows shrink to a few distinct items past pruning: an item left off
                # counts at most the listed width, eps n with none listed.
                assert name == "window_split_slices_positions", (name, tick, listed)
                width = max([upper - lower for _, _, lower, upper in listed], default=eps * n)
                left_off = [c for item, c in counts.items() if item not in {x[0] for x in listed}]
                assert max(left_off) <= width, (name, tick, listed, counts)
            for item, estimate, lower, upper in listed:
                assert lower <= counts[item] <= upper and upper - lower <= eps * n, (name, tick, item)
                assert lower <= estimate <= upper, (name, tick, item)
                widened += upper > lower
    return widened


def check_percentiles_against_exact(rows, lines, name):
    """Each emitted percentile is a value of its tick's window whose rank is within eps n
    of p n; for a key whose windows stay within half the exact limit (64 / eps rounded down
    to a power of two; between ticks a key also holds the rows folded for the next one),
    Spark's exact percentile. Returns how many answers were not the exact percentile."""
    ts = np.array([r[0] for r in rows], dtype=np.int64)
    which = np.array([r[1] for r in rows])
    values = np.array([r[2] for r in rows], dtype=np.int64).view(np.float64)
    return percentiles_against_exact(ts, which, values, lines, SCENARIOS[name][0],
                                     family_slides(name, "percentile"), name)


def percentiles_against_exact(ts, which, values, lines, window, slides, name):
    """check_percentiles_against_exact over arrays: each row's time, aggregate index and
    value, and each percentile slide's (index, [eps, percentages...])."""
    approximate = 0
    for index, (eps, *percentages) in slides:
        limit = 2 ** int(np.floor(np.log2(64 / eps)))
        mine = ts[which == index]
        small = all(np.count_nonzero((mine <= t) & (mine > t - window)) <= limit // 2
                    for t in (int(line.split("|")[0]) for line in lines))
        for line in lines:
            tick = int(line.split("|")[0])
            window_values = np.sort(values[(which == index) & (ts <= tick) & (ts > tick - window)])
            n = len(window_values)
            answer = line.split("|")[1 + index]
            if n == 0:
                assert answer == "null", tick
                continue
            for p, estimate in zip(percentages, (float(x) for x in answer.split(","))):
                below = np.searchsorted(window_values, estimate, "left")
                at_most = np.searchsorted(window_values, estimate, "right")
                assert at_most > below, (name, tick, p)  # a value of the window
                assert max(0.0, below - p * n, p * n - at_most) <= eps * n, (name, tick, p)
                exact = window_values[max(1, int(np.ceil(p * n))) - 1]
                assert estimate == exact or not small, (name, tick, p)
                approximate += estimate != exact
    return approximate


@pytest.mark.parametrize("every, form", [(100, "sliced bounded"), (101, "sliced bounded"),
                                         (7, "bounded")])
def test_bounded_top_values_hold_their_certified_bounds_at_every_tick(sketches, every, form):
    """Past the exact limit each listed count brackets the exact count of its tick's window,
    at most eps * n apart: ticks every 100 positions slice the window of 3,000 (30
    slices), every 101 two a tick period (59 slices of widths 30 and 71); every 7 would
    make 857 even so, past the cap of 128, so the key keeps the running frames' counts."""
    name = "window_top_k_bounded_positions"
    before, _, after, end, _ = inputs(name)
    rows = before + after
    _, lines = live_window(sketches, name, b"", rows, end, every=every)
    halfway, _ = live_window(sketches, name, b"", before, int(before[-1][0]), every=every)
    assert slide_forms(sketches, name, halfway, every=every) == f"-,{form}"
    ts = np.array([r[0] for r in rows], dtype=np.int64)
    which = np.array([r[1] for r in rows])
    value = np.array([r[2] for r in rows], dtype=np.int64)
    window = SCENARIOS[name][0]
    widened = 0
    for line in lines:
        tick = int(line.split("|")[0])
        inside = (which == 1) & (ts <= tick) & (ts > tick - window)
        counts = collections.Counter(int(v) for v in value[inside])
        n = int(inside.sum())
        listed = [tuple(int(x) for x in c.split(":")) for c in line.split("|")[2].split(",") if c]
        assert len(listed) == min(3, len(counts)), tick
        for item, estimate, lower, upper in listed:
            assert lower <= counts[item] <= upper and upper - lower <= 0.1 * n, (tick, item)
            assert lower <= estimate <= upper
            widened += upper > lower
    assert widened > 0  # the bounds are at work


@pytest.mark.parametrize("window, every, form", [(3000, 250, "sliced"), (2999, 250, "sliced"),
                                                  (2999, 2, "-")])
def test_live_moments_of_thousands_of_rows_hold_their_bounds_at_every_tick(sketches, window, every,
                                                                           form):
    """One key with about 3,000 rows in its window (past the buckets' first compaction at
    64), stopped and resumed from its bytes halfway: the average's and the sample
    variance's estimates and certified brackets at every tick, against exact rational
    arithmetic over the tick's window. Bursts of one position, a level shift that makes the
    oldest bucket's rows unlike the window's, and a gap that empties the window. A window
    of 3,000 is 12 slices of ticks every 250 (exact answers), one of 2,999 23 (two a tick
    period); with ticks every 2 it would be 1,500 even so, past the cap of 1,024, so it
    keeps the buckets, whose oldest straddles the window's start."""
    rng = np.random.default_rng(zlib.crc32(b"live-moments-thousands"))
    eps = 0.1
    ts = np.concatenate([np.arange(0, 6000), np.repeat(np.arange(2000, 2050), 20),
                         np.arange(12_000, 16_000)])
    values = np.where(ts < 4000, rng.normal(100, 5, len(ts)), rng.normal(1e4, 50, len(ts)))
    order = np.argsort(ts, kind="stable")
    ts, values = ts[order], values[order]
    rows = [(int(t), 0, int(np.float64(v).view(np.int64))) for t, v in zip(ts, values)]
    aggregates = f"moments:{eps}"
    stop = 7000
    out = sketches.replay.liveWindowState(window, every, aggregates, b"",
                                          packed([r for r in rows if r[0] <= stop]), stop)
    lines = str(out[1]).splitlines()
    assert sketches.replay.liveSlideForms(window, every, aggregates, bytes(out[0])) == form
    out = sketches.replay.liveWindowState(window, every, aggregates, bytes(out[0]),
                                          packed([r for r in rows if r[0] > stop]),
                                          16_000 + 2 * window)
    lines += str(out[1]).splitlines()
    exact = Exact(values)
    straddled = 0
    for line in lines:
        tick, answer = line.split("|")
        tick = int(tick)
        n, mean, m2 = exact.of((ts <= tick) & (ts > tick - window))
        for stat, text in zip(["avg", "var_samp"], answer.split(";")):
            got = None if text == "null" else [float(x) for x in text.split(",")]
            check_statistic(stat, *(got or [None] * 3), n, mean, m2, eps, tick)
            if form == "sliced" and got is not None:
                check_statistic(stat, got[0], None, None, n, mean, m2, 0.0, tick)
            straddled += got is not None and got[1] < got[2]
    assert len(lines) > 50 and (straddled > 10) == (form != "sliced"), (len(lines), straddled)


def test_alerts_on_counts_and_sums_are_true_of_the_exact_window(sketches):
    """Each crossing of the count's and the sum's thresholds, against the exact count and sum
    of its tick's window; the gap empties both (falls), the refill raises them again."""
    name = "window_alerts_positions"
    before, _, after, end, _ = inputs(name)
    rows = before + after
    _, lines = live_window(sketches, name, b"", rows, end)
    ts = np.array([r[0] for r in rows], dtype=np.int64)
    which = np.array([r[1] for r in rows])
    value = np.array([r[2] for r in rows], dtype=np.int64)
    for index, (above, below) in enumerate([(100, 50), (50_000, 25_000)]):
        fired, exact_rows = [], []
        for line in lines:
            tick = int(line.split("|")[0])
            answer = line.split("|")[1 + index].split(",")
            fired += [(tick, *c.split(" ")) for c in answer[3:]]
            inside = (which == index) & (ts <= tick) & (ts > tick - 100)
            exact_rows.append((tick, int(value[inside].sum())))
        crossings = [(a, c) for _, a, c in fired]
        assert crossings.count(("above", "rise")) >= 2 and crossings.count(("below", "fall")) >= 1
        check_crossings_against_exact(fired, exact_rows, above, below, 0.05)


def packed_columns(ts, values) -> bytes:
    """`packed` for one aggregate (index 0) from arrays, without a Python loop per row."""
    rows = np.empty(len(ts), dtype=[("t", ">i8"), ("w", ">i8"), ("v", ">i8")])
    rows["t"], rows["w"], rows["v"] = ts, 0, values
    return rows.tobytes()


@pytest.mark.parametrize("window, every, form", [(3000, 10, "sliced bounded"),
                                                  (10240, 10, "sliced bounded"),
                                                  (10250, 10, "bounded")])
def test_live_percentiles_keep_up_to_1024_tick_slices_at_eps_001(sketches, window, every, form):
    """At eps 0.01 a key's percentiles keep a summary a tick slice up to 1,024 slices
    (`SlicedQuantiles.mostSlices`; 128 before): windows of 300 and 1,024 slices, and of 1,025,
    which keeps the running frames' compact mode. Two rows a position for three windows, well
    past the exact limit (6,000 to 20,500 values), of heavy tails, ties, a monotone run, a
    burst of 3,000 rows at one position and a gap of half a window: every tick's answers
    against the exact sorted window, and a key stopped halfway resumes from its bytes as one
    that never stopped."""
    rng = np.random.default_rng(window)
    ts = np.repeat(np.arange(3 * window, dtype=np.int64), 2)
    ts = ts[(ts < window) | (ts >= window + window // 2)]  # the gap
    ts = np.sort(np.concatenate([ts, np.full(3000, 2 * window + 7, dtype=np.int64)]))  # the burst
    values = np.empty(len(ts))
    quarter = len(ts) // 4
    values[:quarter] = rng.pareto(1.2, quarter)
    values[quarter:2 * quarter] = rng.integers(0, 5, quarter)
    values[2 * quarter:3 * quarter] = np.arange(quarter)
    values[3 * quarter:] = rng.normal(0, 1, len(ts) - 3 * quarter)
    aggregate = "percentile:0.01:0.5:0.99"
    encoded = values.view(np.int64)
    end = int(ts[-1]) + window
    out = sketches.replay.liveWindowState(window, every, aggregate, b"", packed_columns(ts, encoded), end)
    straight_state, straight = bytes(out[0]), str(out[1]).splitlines()
    assert len(straight) > 3 * window // every
    approximate = percentiles_against_exact(ts, np.zeros(len(ts)), values, straight, window,
                                            [(0, [0.01, 0.5, 0.99])], window)
    assert approximate > 0
    stop = int(ts[len(ts) // 2])
    before = ts <= stop
    out = sketches.replay.liveWindowState(window, every, aggregate, b"",
                                          packed_columns(ts[before], encoded[before]), stop)
    state, first = bytes(out[0]), str(out[1]).splitlines()
    assert sketches.replay.liveSlideForms(window, every, aggregate, state) == form
    out = sketches.replay.liveWindowState(window, every, aggregate, state,
                                          packed_columns(ts[~before], encoded[~before]), end)
    assert first + str(out[1]).splitlines() == straight and bytes(out[0]) == straight_state


EVERY_FAMILY = "count:0.05,sum:0.05,distinct:0.2,percentile:0.25:0.5:0.9,moments:0.3,top_k:3:0.1,sample:3:7"


@pytest.mark.parametrize("window, every, forms", [
    (10**6, 1, "-,-,-,bounded,-,bounded,-"),
    (1000, 10, "-,-,-,sliced bounded,sliced,sliced bounded,-")], ids=["running-forms", "sliced"])
def test_every_family_resumes_at_every_watermark(sketches, window, every, forms):
    """A key of every family with three rows a position for each, its state written and read
    back at every position's watermark, in the running frames' forms (ticks every position
    of a window of 10^6: compact percentiles past 256 values, leveled top values, moments'
    buckets) and in tick slices (100 a window): the rows and the last state are those of a
    key that never stopped. In the compact percentiles each compress that takes a time's
    first row leaves its next rows a pending leaf of the newest node's time, which states
    must read (they were refused as damaged, which stopped the query)."""
    rng = np.random.default_rng(3)
    positions = 300
    rows = []
    for t in range(positions):
        for _ in range(3):
            rows += [(t, 0, 1), (t, 1, int(rng.integers(1, 1000))),
                     (t, 2, int(rng.integers(-2**63, 2**63 - 1))),
                     (t, 3, int(np.float64(rng.normal()).view(np.int64))),
                     (t, 4, int(np.float64(rng.normal()).view(np.int64))),
                     (t, 5, int(rng.zipf(1.5)) % 50), (t, 6, int(rng.integers(0, 50)))]
    per_position = len(rows) // positions
    state, resumed = b"", []
    for t in range(positions):
        out = sketches.replay.liveWindowState(window, every, EVERY_FAMILY, state,
                                              packed(rows[t * per_position:(t + 1) * per_position]), t)
        state = bytes(out[0])
        resumed += str(out[1]).splitlines()
    assert sketches.replay.liveSlideForms(window, every, EVERY_FAMILY, state) == forms
    out = sketches.replay.liveWindowState(window, every, EVERY_FAMILY, b"", packed(rows), positions - 1)
    assert resumed == str(out[1]).splitlines() and state == bytes(out[0])


@pytest.mark.parametrize("aggregate,every", [
    ("percentile:0.01:0.5:0.99", 10**5), ("top_k:5:0.01", 10**5), ("moments:0.01", 10**5),
    ("top_k:5:0.01", 4999)], ids=["percentile", "top_k", "moments", "top_k-leveled"])
def test_a_sliced_keys_state_at_a_million_rows_stays_within_64_kb(sketches, aggregate, every):
    """One key with 10^6 rows in its window of 10^6 positions, ticks every 10^5 (11 slices),
    or for top values every 4,999 (past 128 slices: the leveled counts): the state after
    the last row (the newest slice still counting) is under 64 KB, the rows alone 10 MB;
    the last tick's answers against the exact window (900,001 rows, or 994,800): ranks
    within eps n, counts bracketed at most eps n apart, moments exact (integer values, so
    exact sums)."""
    n = 10**6
    rng = np.random.default_rng(zlib.crc32(aggregate.encode()))
    ts = np.arange(n, dtype=np.int64)
    family = aggregate.split(":")[0]
    if family == "top_k":
        values = (10_000 * rng.random(n) ** 3).astype(np.int64)
    else:
        values = np.round(rng.normal(1000, 300, n)).astype(np.float64)
    encoded = values if family == "top_k" else values.view(np.int64)
    out = sketches.replay.liveWindowState(n, every, aggregate, b"", packed_columns(ts, encoded), n - 1)
    state, lines = bytes(out[0]), str(out[1]).splitlines()
    assert sketches.replay.liveSlideForms(n, every, aggregate, state) == \
        {"percentile": "sliced bounded", "top_k": "sliced bounded", "moments": "sliced"}[family] \
        if every == 10**5 else "bounded"
    assert len(state) < 64 * 1024, len(state)
    tick, answer = lines[-1].split("|")
    assert int(tick) == (n - 1) // every * every
    inside = values[: int(tick) + 1]
    count = len(inside)
    if family == "percentile":
        ordered = np.sort(inside)
        for p, estimate in zip([0.5, 0.99], (float(x) for x in answer.split(","))):
            below = np.searchsorted(ordered, estimate, "left")
            at_most = np.searchsorted(ordered, estimate, "right")
            assert at_most > below and max(0.0, below - p * count, p * count - at_most) <= 0.01 * count
    elif family == "top_k":
        exact = np.bincount(inside)
        listed = [tuple(int(x) for x in c.split(":")) for c in answer.split(",")]
        assert len(listed) == 5 and listed[0][0] == int(np.argmax(exact))
        for item, estimate, lower, upper in listed:
            assert lower <= exact[item] <= upper and upper - lower <= 0.01 * count
    else:
        whole = inside.astype(np.int64)
        s, ss = int(whole.sum()), int((whole * whole).sum())
        mean, m2 = Fraction(s, count), Fraction(count * ss - s * s, count)
        for stat, text in zip(["avg", "var_samp"], answer.split(";")):
            got = [float(x) for x in text.split(",")]
            check_statistic(stat, got[0], got[1], got[2], count, mean, m2, 0.0, tick)


@pytest.mark.parametrize("aggregate", ["percentile:0.1:0.5", "top_k:3:0.1"])
def test_a_state_written_after_nodes_left_the_window_resumes(sketches, aggregate):
    """A steady key past the exact limit in the running frames' form (ticks every 7 of a
    window of 3,000), stopped where its oldest compressed nodes (for top values, records)
    have left the window since the last compress, or the whole window has (a row still
    pending after it): the state reads back and continues as a key that never stopped. States like these were refused
    as damaged ("node 0 lies outside the window"), which stopped the query."""
    window, every = 3000, 7
    numeric = aggregate.startswith("percentile")

    def row(t):
        v = t * 7919 % 37
        return (t, 0, int(np.float64(v).view(np.int64)) if numeric else v)

    for stop in (3500, 4100, 9000):
        rows = [row(t) for t in range(5000)] + [row(stop + 1000)]
        before = [r for r in rows if r[0] <= stop]
        after = [r for r in rows if r[0] > stop] + [row(stop + 1001)]
        end = stop + 1001 + 2 * window
        out = sketches.replay.liveWindowState(window, every, aggregate, b"", packed(before), stop)
        state, first = bytes(out[0]), str(out[1]).splitlines()
        # Top values' leveled counts answer exactly again once the window has emptied.
        emptied = not numeric and stop - window >= 5000
        assert sketches.replay.liveSlideForms(window, every, aggregate, state) == \
            ("exact" if emptied else "bounded"), stop
        out = sketches.replay.liveWindowState(window, every, aggregate, state, packed(after), end)
        straight = sketches.replay.liveWindowState(window, every, aggregate, b"",
                                                   packed(before + after), end)
        assert first + str(out[1]).splitlines() == str(straight[1]).splitlines(), stop
        assert bytes(out[0]) == bytes(straight[0]), stop


def test_an_input_before_one_already_folded_is_dropped_as_late(sketches):
    """Inputs at or before the watermark (up_to) fold into the slides before their tick;
    one that arrives after them with an earlier time can no longer be placed, so it is
    late even though no tick has passed it: the state is the one without it."""
    def state(prior, rows):
        out = sketches.replay.liveWindowState(100, 10, "count:0.05", prior, packed(rows), 15)
        return bytes(out[0])

    folded = state(b"", [(t, 0, 1) for t in range(1, 16)])  # tick 10 emitted, 11..15 fold
    assert state(folded, [(12, 0, 1)]) == state(folded, [])
    assert state(folded, [(15, 0, 1)]) != state(folded, [])  # at the last folded time: kept


@pytest.mark.parametrize("window, every, sliced", [(10**6, 1, ""), (2560, 256, "sliced "),
                                                   (2600, 256, "sliced ")])
def test_a_live_percentile_turns_compact_one_value_past_the_exact_limit(sketches, window, every, sliced):
    """At eps 0.25 a key's percentile window holds 256 values exactly: a state stopped with
    256 values in the window reads back exact, one with 257 compact (as an add past the
    limit turns it), and both answer as the window's values say; with ticks every position
    (the running frames' form) and ticks every 256 of a window of 2,560 (10 tick slices:
    the last tick holds the first 256 values, the 257th is folded in after it) or of 2,600
    (21 slices, two a tick period)."""
    aggregates = "percentile:0.25:0.5"
    for rows, form in ((256, "exact"), (257, "bounded")):
        values = np.arange(rows, dtype=np.float64)[::-1]
        out = sketches.replay.liveWindowState(window, every, aggregates, b"", packed(
            [(t + 1, 0, int(np.float64(v).view(np.int64))) for t, v in enumerate(values)]), rows)
        state, lines = bytes(out[0]), str(out[1]).splitlines()
        assert sketches.replay.liveSlideForms(window, every, aggregates, state) == sliced + form, rows
        last = int(lines[-1].split("|")[0])
        assert last == rows - rows % every
        median = float(lines[-1].split("|")[1])
        assert abs(median - (last - 1) / 2) <= 0.25 * last, (rows, median)


@pytest.mark.parametrize("aggregate, every, form, most, growth", [
    ("percentile:0.01:0.5:0.99", 1003, "bounded", 500_000, 2.5),
    ("percentile:0.01:0.5:0.99", 1000, "sliced bounded", 150_000, 3.0),
    ("top_k:5:0.01", 1000, "bounded", 400_000, 2.5)], ids=["percentile", "percentile-sliced", "top_k"])
def test_a_busy_keys_state_is_set_by_eps_not_by_its_rows(sketches, aggregate, every, form, most, growth):
    """One key with 2·10^4 and then 2·10^5 rows in its window (one a position, window 10^6,
    items of a skewed stream over 10^4 values): the state bytes past the exact limit stay
    within a bound (the rows alone take 2 MB: 10 bytes each), and ten times the rows add
    far less than ten times the bytes: in the running frames' form (ticks every 1,003: no
    slicing fits) and, for percentiles, a summary a tick slice (every 1,000: 1,000 slices,
    of which the rows fill 20 and 200, about 12/eps values each)."""
    sizes = []
    for rows in (20_000, 200_000):
        rng = np.random.default_rng(zlib.crc32(aggregate.encode()))
        if aggregate.startswith("top_k"):
            values = (10_000 * rng.random(rows) ** 3).astype(np.int64)
        else:
            values = rng.normal(100, 30, rows).astype(np.float64).view(np.int64)
        inputs = [(t, 0, int(v)) for t, v in enumerate(values)]
        out = sketches.replay.liveWindowState(10**6, every, aggregate, b"", packed(inputs), rows)
        sizes.append(len(bytes(out[0])))
        assert sketches.replay.liveSlideForms(10**6, every, aggregate, bytes(out[0])) == form
    assert sizes[1] < most and sizes[1] < growth * sizes[0], sizes


@pytest.mark.parametrize("k", [0, 100_001])
def test_a_top_k_past_the_sql_functions_range_is_refused(sketches, k):
    """k as approx_window_top_k takes it, [1, 100000], for Scala and JSON callers too."""
    with pytest.raises(Exception, match=re.escape(f"k must be in [1, 100000], got {k}")):
        sketches.replay.liveWindowState(100, 10, f"top_k:{k}:0.01", b"", b"", 0)


@pytest.mark.parametrize("change, message", [
    ({"every": 20}, "every 10 (now 20)"),
    ({"window": 99}, "window 100 (now 99)"),
    ({"aggregates": "count:0.05,sum:0.05,distinct:0.05,percentile:0.01:0.5"},
     "aggregates count(0.05), sum(0.05), distinct(0.05), percentile(0.01, 0.5, 0.99) "
     "(now count(0.05), sum(0.05), distinct(0.05), percentile(0.01, 0.5))"),
    ({"aggregates": "count:0.05:above=3,sum:0.05,distinct:0.05,percentile:0.01:0.5:0.99"},
     "aggregates count(0.05), sum(0.05), distinct(0.05), percentile(0.01, 0.5, 0.99) "
     "(now count(0.05, above 3), sum(0.05), distinct(0.05), percentile(0.01, 0.5, 0.99))"),
    ({"aggregates": "count:0.1", "every": 5},
     "every 10 (now 5), aggregates count(0.05), sum(0.05), distinct(0.05), "
     "percentile(0.01, 0.5, 0.99) (now count(0.1))"),
])
def test_restart_under_other_parameters_is_refused_naming_them(sketches, change, message):
    before, tick, _, _, _ = inputs("window_mix_positions")
    state, _ = live_window(sketches, "window_mix_positions", b"", before, tick)
    with pytest.raises(Exception, match=re.escape(
            f"the live window state was written with {message}: ")):
        live_window(sketches, "window_mix_positions", state, [], tick, **change)


def flipped_verdicts(sketches, spec, state, bits, after, end) -> list[str]:
    """`state` with each of `bits` flipped (checksum recomputed), each read in one JVM call
    and fed `after` up to `end`: per flip "read" or the refusal, which must name invalid
    sketch bytes or a restart under other parameters, never another error."""
    window, every, aggregates = spec
    flips = bit_flips(state, bits)
    found = verdict_lines(sketches.replay.liveWindowVerdicts(
        window, every, aggregates, b"".join(flips), _longs([len(f) for f in flips]),
        packed(after), end), len(flips))
    for bit, verdict in zip(bits, found):
        assert verdict == "read" or verdict.startswith("invalid sketch bytes: ") or \
            verdict.startswith("the live window state was written with "), (bit, verdict[:400])
    return found


def test_damaged_state_with_a_matching_checksum_is_refused_or_keeps_working(sketches):
    """Single-bit flips, the checksum recomputed: refused with "invalid sketch bytes" (or,
    for a flip in a parameter, as a restart under other parameters), or read into a state
    that takes the rest of the stream without an error. Every flip in the fixed fields
    (magic, version, flags, last tick, window, every) is refused but one (below); after
    them, every fifth bit is flipped (values and hashes are free bits: they load). All in
    one JVM call."""
    name = "fuzzed"
    before, tick, after, end, _ = inputs(name)
    state, _ = live_window(sketches, name, b"", before[-60:], tick)
    fixed_bits = 8 * (3 + 3 * 8)
    bits = [*range(fixed_bits), *range(fixed_bits, 8 * (len(state) - 4), 5)]
    found = flipped_verdicts(sketches, FUZZED, state, bits, after[:20], end)
    # But the version's lowest bit: 5 flips to 4, whose layout version 5 only extends (a
    # top values' form these aggregates do not have), so that state reads.
    version_low_bit = 8  # byte 1, bit 0
    refused_fixed = sum(verdict != "read" for bit, verdict in zip(bits, found)
                        if bit < fixed_bits and bit != version_low_bit)
    assert found[bits.index(version_low_bit)] == "read"
    refused = sum(verdict != "read" for verdict in found)
    loaded = len(found) - refused
    assert refused_fixed == fixed_bits - 1 and refused > fixed_bits and loaded > 0, (refused, loaded)


def test_damaged_leveled_top_k_state_is_refused_or_keeps_working(sketches):
    """The leveled counts' state (version 5, past 147 rows at eps 0.1), every third bit after
    the fixed fields flipped with the checksum recomputed: refused as invalid sketch bytes,
    or read into a state that takes the rest of the stream; items, counters, record times
    and levels all damaged somewhere."""
    name = "window_leveled_top_k_positions"
    before, tick, after, end, _ = inputs(name)
    state, _ = live_window(sketches, name, b"", before, tick)
    assert slide_forms(sketches, name, state) == "-,bounded"
    bits = list(range(8 * (3 + 3 * 8), 8 * (len(state) - 4), 3))
    found = flipped_verdicts(sketches, SCENARIOS[name], state, bits, after[:20], end)
    refused = sum(verdict.startswith("invalid sketch bytes: invalid leveled top-k state") for verdict in found)
    loaded = sum(verdict == "read" for verdict in found)
    assert refused > 50 and loaded > 50, (refused, loaded)


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    import windowsketch
    from windowsketch import _scala_object

    session = windowsketch.configure(SparkSession.builder.master("local[1]")).getOrCreate()

    class Replay:
        replay = _scala_object(session, "windowsketch.core.Replay")

    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for scenario in sys.argv[2:] or SCENARIOS:
        first_inputs, first_tick, _, _, first_stop = inputs(scenario)
        data, _ = live_window(Replay, scenario, b"", first_inputs, first_tick)
        with open(os.path.join(out_dir, f"{scenario}.bin"), "wb") as f:
            f.write(data)
        if scenario in FOLDED_GOLDEN:
            data, _ = live_window(Replay, scenario, b"", first_inputs, first_stop)
            with open(os.path.join(out_dir, f"{scenario}_folded.bin"), "wb") as f:
                f.write(data)
    session.stop()
