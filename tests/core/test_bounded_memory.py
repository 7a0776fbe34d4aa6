"""Memory per group is set by eps, never by the window's rows (docs/production.md, "Memory
per group"): every family's structure holding 10^5 and then 10^6 rows of one window keeps a
few MB of heap at most, and ten times the rows add little, in time order (running frames,
live keys) and in any order (GROUP BY buffers, sketch columns). The window's rows alone
would take 16 MB at 10^6 (a time and a value each); the exact forms of percentiles and top
values that held them took that and more."""
from __future__ import annotations

import pytest

FAMILIES = ["count", "sum", "distinct", "moments", "percentile", "top_k"]
MB = 1 << 20


def held(sketches, family: str, rows: int, ordered: bool) -> int:
    eps = 0.05 if family == "distinct" else 0.01  # distinct's parameter is its rsd
    return int(sketches.throughput.heldHeapBytes(family, rows, 10**12, eps, ordered, 1))


@pytest.mark.parametrize("ordered", [True, False], ids=["in-order", "any-order"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_window_of_a_million_rows_holds_a_few_megabytes(sketches, family, ordered):
    small = held(sketches, family, 10**5, ordered)
    big = held(sketches, family, 10**6, ordered)
    assert big < 5 * MB, (family, big)
    # Ten times the rows: the structures grow with log(rows), not with rows.
    assert big < 2 * small + MB // 2, (family, small, big)
