"""The sample a window must give, computed from its rows alone: each row's priority is the
seeded hash of its time and its value's binary-row bytes (docs/sampling.md; the Python
reader's hash, checked against the JVM's by every test that uses this), and the sample is
the k highest-ranked rows of the window, oldest first. Values are encoded here, not taken
from Spark: only BIGINT and STRING, enough for the property streams."""
from __future__ import annotations

import struct

from windowsketch.sketch.sample import priority


def row_bytes(value, sql_type: str) -> bytes:
    """Spark's binary row (UnsafeRow) of one field holding a non-NULL ``value``."""
    nulls = bytes(8)
    if sql_type == "bigint":
        return nulls + struct.pack("<q", value)
    if sql_type == "string":
        data = value.encode()
        padded = data + bytes(-len(data) % 8)
        return nulls + struct.pack("<q", (16 << 32) | len(data)) + padded
    raise ValueError(sql_type)


def expected_sample(frame, window: int, k: int, seed: int = 0, sql_type: str = "string",
                    temporal: bool = False, end: int | None = None):
    """The sample of the window ending at ``end`` (default: the frame's largest ``ts``):
    its ``x`` values, oldest first, equal times by their bytes. ``frame`` holds rows with
    ``ts`` and ``x`` fields."""
    times = [r["ts"] for r in frame if r["ts"] is not None]
    if not times:
        return []
    now = max(times) if end is None else end
    copies: dict[tuple[int, bytes], int] = {}
    values = {}
    for r in frame:
        t, x = r["ts"], r["x"]
        if t is None or x is None or t > now or not (
                now - window <= t if temporal else now - window < t):
            continue
        key = (t, row_bytes(x, sql_type))
        copies[key] = copies.get(key, 0) + 1
        values[key] = x
    ranked = sorted(copies, key=lambda key: (priority(seed, key[0], key[1]), key[0], key[1]),
                    reverse=True)
    left = k
    chosen = []
    for key in ranked:
        if left == 0:
            break
        take = min(left, copies[key])
        chosen.append((key, take))
        left -= take
    return [values[key] for key, take in sorted(chosen) for _ in range(take)]


def with_a_dominated_row(sketch) -> bytes:
    """A sketch's bytes with one more row at its oldest time that k of its rows outrank:
    a valid checksum, but no sketch writes it (the row can never be drawn)."""
    oldest = min(sketch._rows, key=lambda r: r.ts)
    kth = sorted((r.rank for r in sketch._rows), reverse=True)[sketch.k - 1]
    extra = next(e for e in (oldest._replace(value=oldest.value[:-1] + bytes([i]))
                             for i in range(1, 100))
                 if (priority(sketch.seed, e.ts, e.value), e.ts, e.value) < kth)
    forged = sketch._copy()
    forged._rows = forged._rows + [
        extra._replace(priority=priority(sketch.seed, extra.ts, extra.value))]
    return forged.to_bytes()
