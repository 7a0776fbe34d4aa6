"""The exact answers a live sliding count must approximate, computed by brute force: which
ticks emit a row and the exact count of each, for events that were not late."""
from __future__ import annotations

import zlib

import numpy as np


def tick_at_or_after(ts: int, every: int) -> int:
    return -(-ts // every) * every


def exact_at(accepted: np.ndarray, tick: int, window: int) -> int:
    """Events in (tick - window, tick]: `window` in the core's units (an inclusive time
    window of w microseconds is w + 1)."""
    return int(np.count_nonzero((accepted <= tick) & (accepted > tick - window)))


def expected_rows(accepted, window: int, every: int, up_to: int) -> list[tuple[int, int]]:
    """(tick, exact) of every row a count emits through `up_to`: each tick whose window holds
    events, and the first empty tick after such a run (the 0 row)."""
    accepted = np.sort(np.asarray(accepted, dtype=np.int64))
    if len(accepted) == 0:
        return []
    rows, previous = [], 0
    tick = tick_at_or_after(int(accepted[0]), every)
    while tick <= up_to:
        exact = exact_at(accepted, tick, window)
        if exact > 0 or previous > 0:
            rows.append((tick, exact))
        if exact == 0:  # skip to the tick of the next event
            later = accepted[accepted > tick]
            if len(later) == 0:
                break
            tick = tick_at_or_after(int(later[0]), every)
        else:
            tick += every
        previous = exact
    return rows


def expected_crossings(rows, above: int | None, below: int | None):
    """(tick, alert, crossing) the certified hysteresis gives on these (tick, estimate,
    lower, upper) rows, a key starting at 0."""
    out, is_above, is_below = [], False, True
    for tick, _, lower, upper in rows:
        if above is not None:
            if not is_above and lower > above:
                is_above = True
                out.append((tick, "above", "rise"))
            elif is_above and upper <= above:
                is_above = False
                out.append((tick, "above", "fall"))
        if below is not None:
            if not is_below and upper < below:
                is_below = True
                out.append((tick, "below", "fall"))
            elif is_below and lower >= below:
                is_below = False
                out.append((tick, "below", "rise"))
    return out


def check_crossings_against_exact(fired, exact_rows, above: int | None, below: int | None,
                                  eps: float) -> None:
    """Alerts against the exact values of each emitted tick's window: no crossing is false
    (a rise above X has exact > X, ...), rises and falls alternate, and none is missed once the exact value is past its
    threshold by more than the bounds' width (2 eps). `fired` holds (tick, alert, crossing),
    `exact_rows` (tick, exact) for every emitted tick, in tick order."""
    by_tick: dict[int, list[tuple[str, str]]] = {}
    for tick, alert, crossing in fired:
        by_tick.setdefault(tick, []).append((alert, crossing))
    is_above, is_below = False, True
    for tick, exact in exact_rows:
        for alert, crossing in by_tick.get(tick, []):
            if alert == "above":
                assert exact > above if crossing == "rise" else exact <= above, (tick, exact)
                assert is_above == (crossing == "fall"), (tick, "rises and falls alternate")
                is_above = crossing == "rise"
            else:
                assert exact < below if crossing == "fall" else exact >= below, (tick, exact)
                assert is_below == (crossing == "rise"), (tick, "rises and falls alternate")
                is_below = crossing == "fall"
        if above is not None:
            assert is_above or exact * (1 - 2 * eps) <= above, (tick, exact, "above missed")
            assert not is_above or exact * (1 + 2 * eps) > above, (tick, exact, "fall missed")
        if below is not None:
            assert is_below or exact * (1 + 2 * eps) >= below, (tick, exact, "below missed")
            assert not is_below or exact * (1 - 2 * eps) < below, (tick, exact, "rise missed")


def bit_flips(state: bytes, bits) -> list[bytes]:
    """`state` with each of `bits` of its body (all but the 4-byte checksum) flipped in turn,
    the CRC-32 checksum recomputed: damage the checksum does not catch."""
    body = state[:-4]
    flipped = []
    for bit in bits:
        damaged = bytearray(body)
        damaged[bit // 8] ^= 1 << (bit % 8)
        flipped.append(bytes(damaged) + zlib.crc32(damaged).to_bytes(4, "big"))
    return flipped

