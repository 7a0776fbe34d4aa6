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
the first with moments and top values) and window_percentile_compact_positions (version 2,
percentiles past the exact limit, after the compact nodes' variance budgets)."""
from __future__ import annotations

import os
import re
import sys
import zlib

import numpy as np
import pytest
from live_reference import check_crossings_against_exact

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
    # eps 0.3: past 256 values the percentile's state is written compact (kind 8).
    "window_percentile_compact_positions": (3000, 100, "count:0.05,percentile:0.3:0.5:0.99"),
}
# Small enough to flip every bit: 16 registers for the distinct count.
FUZZED = (100, 10, "count:0.05:above=20:below=5,sum:0.05,distinct:0.39,percentile:0.01:0.5,"
          "moments:0.3,top_k:2")


def inputs(name: str):
    """(inputs before the stop, the last tick emitted before it, inputs after, the end):
    each input (time, aggregate index, value) in the family's encoding."""
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
        elif family == "top_k":
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
    return before, tick, after, end


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


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_resumed_key_emits_the_rows_of_one_never_stopped(sketches, name):
    before, tick, after, end = inputs(name)
    state, first = live_window(sketches, name, b"", before, tick)
    assert state[:2] == bytes([0x57, 2])
    if name == "window_percentile_compact_positions":
        assert bytes([0x57, 1, 8]) in state  # a compact percentile sketch's header
    final, rest = live_window(sketches, name, state, after, end)
    straight_state, straight = live_window(sketches, name, b"", before + after, end)
    assert first + rest == straight and final == straight_state
    assert len(rest) >= 10 and rest[-1].split("|")[1].startswith("0,0,0"), name  # the last row: empty
    # The golden state (version 1; version 2 for alerts) resumes to the same rows.
    assert live_window(sketches, name, load(name), after, end)[1] == rest


def test_alerts_on_counts_and_sums_are_true_of_the_exact_window(sketches):
    """Each crossing of the count's and the sum's thresholds, against the exact count and sum
    of its tick's window; the gap empties both (falls), the refill raises them again."""
    name = "window_alerts_positions"
    before, _, after, end = inputs(name)
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
    before, tick, _, _ = inputs("window_mix_positions")
    state, _ = live_window(sketches, "window_mix_positions", b"", before, tick)
    with pytest.raises(Exception, match=re.escape(
            f"the live window state was written with {message}: ")):
        live_window(sketches, "window_mix_positions", state, [], tick, **change)


def test_damaged_state_with_a_matching_checksum_is_refused_or_keeps_working(sketches):
    """Single-bit flips, the checksum recomputed: refused with "invalid sketch bytes" (or,
    for a flip in a parameter, as a restart under other parameters), or read into a state
    that takes the rest of the stream without an error. Every flip in the fixed fields
    (magic, version, flags, last tick, window, every) is refused; after them, every fifth
    bit is flipped (values and hashes are free bits: they load)."""
    name = "fuzzed"
    before, tick, after, end = inputs(name)
    state, _ = live_window(sketches, name, b"", before[-60:], tick)
    body = state[:-4]
    fixed_bits = 8 * (3 + 3 * 8)
    refused_fixed = refused = loaded = 0
    for bit in [*range(fixed_bits), *range(fixed_bits, 8 * len(body), 5)]:
        damaged = bytearray(body)
        damaged[bit // 8] ^= 1 << (bit % 8)
        damaged += zlib.crc32(damaged).to_bytes(4, "big")
        try:
            live_window(sketches, name, bytes(damaged), after[:20], end)
        except Exception as e:  # py4j wraps the JVM's exception
            assert ("invalid sketch bytes: " in str(e) or
                    "the live window state was written with " in str(e)), (bit, str(e)[:400])
            refused += 1
            refused_fixed += bit < fixed_bits
        else:
            loaded += 1
    assert refused_fixed == fixed_bits and refused > fixed_bits and loaded > 0, (refused, loaded)


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
        first_inputs, first_tick, _, _ = inputs(scenario)
        data, _ = live_window(Replay, scenario, b"", first_inputs, first_tick)
        with open(os.path.join(out_dir, f"{scenario}.bin"), "wb") as f:
            f.write(data)
    session.stop()
