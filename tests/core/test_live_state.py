"""Live count state across versions and restarts: state written by versions 1 (before the
state recorded `every` and the thresholds) and 2 (a layout of its own) still reads, and a query resumed from it emits
exactly the rows of one that never stopped; a restart with another `every`, `alert_above`
or `alert_below` is refused naming each change; damaged state whose checksum was made to
match is refused or loads into a state that keeps working, never a crash.

`python tests/core/test_live_state.py OUT_DIR` writes the golden states with whatever jar
the session loads: it wrote tests/golden/live/ with version 1's LiveCount, and the `v2_`
files with version 2's (since then a live count's state is a live window's)."""
from __future__ import annotations

import os
import re
import sys
import zlib

import numpy as np
import pytest

from conftest import _longs, verdict_lines
from live_reference import bit_flips

GOLDEN_LIVE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "golden", "live")

# name -> (window, every, eps, alert_above, alert_below, events before, first upTo,
#          events after, last upTo); -1 is no threshold.
SCENARIOS = {
    "positions_alerts": (100, 10, 0.1, 30, 5),
    "time_plain": (600_000_001, 60_000_000, 0.01, -1, -1),
    "before_any_tick": (50, 7, 0.2, 10, -1),
}


def events(name: str) -> tuple[np.ndarray, int, np.ndarray, int]:
    """(events before the stop, the last tick emitted before it, events after, the end)."""
    window, every, *_ = SCENARIOS[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name == "before_any_tick":  # nothing emitted yet: negative positions pending
        before = rng.integers(-40, 30, 60)
        return before, -10**6, rng.integers(30, 200, 80), 400
    span = 40 * every
    stream = np.sort(rng.integers(0, span, 3000))
    stream = stream[(stream < span // 3) | (stream > span // 2)]  # a gap: counts fall, rise
    stop = int(stream[len(stream) // 2])
    tick = stop - stop % every - every  # events after it wait, pending, in the state
    return stream[stream <= stop], tick, stream[stream > stop], span + 3 * window


def live_state(sketches, name, state, ts, up_to, **changes):
    window, every, eps, above, below = SCENARIOS[name]
    params = dict(window=window, every=every, eps=eps, above=above, below=below) | changes
    out = sketches.replay.liveState(params["window"], params["every"], float(params["eps"]),
                                    params["above"], params["below"], state,
                                    np.asarray(ts, dtype=">i8").tobytes(), up_to)
    rows = np.frombuffer(bytes(out[1]), dtype=">i8").reshape(-1, 7)
    return bytes(out[0]), [tuple(int(x) for x in r) for r in rows]


def load(name: str, version: int) -> bytes:
    prefix = "" if version == 1 else f"v{version}_"
    with open(os.path.join(GOLDEN_LIVE, f"{prefix}{name}.bin"), "rb") as f:
        return f.read()


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_an_old_layouts_state_resumes_as_if_never_stopped(sketches, name, version):
    before, tick, after, end = events(name)
    old = load(name, version)
    assert old[0] == version  # a live count's own layout
    _, resumed = live_state(sketches, name, old, after, end)
    state, first = live_state(sketches, name, b"", before, tick)
    assert state[:2] == bytes([0x57, 5])  # now a live window's
    _, rest = live_state(sketches, name, state, after, end)
    _, straight = live_state(sketches, name, b"", np.concatenate([before, after]), end)
    assert resumed == rest and first + rest == straight and len(resumed) >= 2, name


@pytest.mark.parametrize("change, old_message, message", [
    ({"every": 20}, "every 10 (now 20)", "every 10 (now 20)"),
    ({"above": 31}, "alert_above 30 (now 31)",
     "aggregates count(0.1, above 30, below 5) (now count(0.1, above 31, below 5))"),
    ({"below": -1}, "alert_below 5 (now none)",
     "aggregates count(0.1, above 30, below 5) (now count(0.1, above 30))"),
    ({"every": 5, "above": -1}, "every 10 (now 5), alert_above 30 (now none)",
     "every 10 (now 5), aggregates count(0.1, above 30, below 5) (now count(0.1, below 5))"),
    ({"eps": 0.2}, "written for another window or eps",
     "aggregates count(0.1, above 30, below 5) (now count(0.2, above 30, below 5))"),
])
def test_restart_with_other_every_or_thresholds_is_refused(sketches, change, old_message, message):
    before, tick, _, _ = events("positions_alerts")
    state, _ = live_state(sketches, "positions_alerts", b"", before, tick)
    with pytest.raises(Exception, match=re.escape(f"the live window state was written with {message}: ")):
        live_state(sketches, "positions_alerts", state, [], tick, **change)
    with pytest.raises(Exception, match=re.escape(old_message)):
        live_state(sketches, "positions_alerts", load("positions_alerts", 2), [], tick, **change)


def test_pending_events_at_or_before_the_last_tick_are_refused(sketches):
    """The last field is the pending events as (step from the previous, aggregate): one
    event 3 after the last tick is (1, 3, 0). A step of 0 puts it on the emitted tick, a
    window already final."""
    state, _ = live_state(sketches, "positions_alerts", b"", [1, 2, 3, 23], 20)
    body = state[:-4]
    assert body[-3:] == bytes([1, 3, 0])
    minus_one = b"\xff" * 9 + b"\x01"  # a step back: events out of order
    for damaged in (body[:-2] + bytes([0, 0]), body[:-3] + bytes([2, 3, 0]) + minus_one + bytes([0])):
        with pytest.raises(Exception, match="invalid sketch bytes: pending inputs out of order"):
            live_state(sketches, "positions_alerts", damaged + zlib.crc32(damaged).to_bytes(4, "big"),
                       [], 20)


@pytest.mark.parametrize("layout", ["live window", "version 2"])
def test_damaged_state_with_a_matching_checksum_is_refused_or_keeps_working(sketches, layout):
    """Every single-bit flip, the checksum recomputed: refused with "invalid sketch bytes"
    (or, for a flip in a parameter, as a restart under other parameters), or read into a
    state that takes the rest of the stream without an error; all in one JVM call."""
    name = "positions_alerts"
    before, tick, after, end = events(name)
    state = live_state(sketches, name, b"", before, tick)[0] if layout == "live window" else load(name, 2)
    flips = bit_flips(state, range(8 * (len(state) - 4)))
    window, every, eps, above, below = SCENARIOS[name]
    found = verdict_lines(sketches.replay.liveStateVerdicts(
        window, every, float(eps), above, below, b"".join(flips), _longs([len(f) for f in flips]),
        _longs(after[:50]), end), len(flips))
    for bit, verdict in enumerate(found):
        assert verdict == "read" or verdict.startswith("invalid sketch bytes: ") or re.match(
            "the live (count|window) state was written (with|for) ", verdict), (bit, verdict[:400])
    refused = sum(verdict != "read" for verdict in found)
    assert refused > len(found) - refused > 0, (refused, len(found))


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    import windowsketch
    from windowsketch import _scala_object

    session = windowsketch.configure(SparkSession.builder.master("local[1]")).getOrCreate()

    class Replay:
        replay = _scala_object(session, "windowsketch.core.Replay")

    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for scenario in SCENARIOS:
        first_events, first_tick, _, _ = events(scenario)
        data, _ = live_state(Replay, scenario, b"", first_events, first_tick)
        with open(os.path.join(out_dir, f"{scenario}.bin"), "wb") as f:
            f.write(data)
    session.stop()
