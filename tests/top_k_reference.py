"""What every answer of the top-k family must satisfy against the exact item counts of
its window (docs/top-k.md), shared by the core, SQL and reader tests."""
from __future__ import annotations


def check_window(listed, effective_eps, counts, where, k=5, exact=False, tie=lambda item: item):
    """One window's answer, listed as (item, estimate, lower, upper), against its exact
    item counts: each listed count inside its bounds, the bounds at most eps * n apart,
    listed by estimate, then the larger lower bound, then the item (`tie`: its sort key,
    by default the value), and every item of more than eps * n rows listed unless k items
    whose estimates are at least its own are; `exact` answers list the k largest counts."""
    n = sum(counts.values())
    allowed = effective_eps * n
    order = [(-e, -low, tie(item)) for item, e, low, _ in listed]
    assert order == sorted(order), (where, listed)
    assert len({item for item, *_ in listed}) == len(listed), where
    for item, estimate, lower, upper in listed:
        true = counts.get(item, 0)
        assert lower <= true <= upper, (where, item, lower, true, upper)
        assert upper - lower <= allowed + 1e-9, (where, item, upper - lower, allowed)
        assert abs(estimate - true) <= allowed + 1e-9, (where, item)
        if exact:
            assert estimate == lower == upper == true, where
    assert len(listed) == min(k, len(counts)) or (not exact and len(listed) < k), where
    shown = {item for item, *_ in listed}
    for item, true in counts.items():
        if true > allowed and item not in shown:
            # Missed only behind k items whose estimates are at least its own.
            assert len(listed) == k and listed[-1][1] >= true - allowed, (where, item, true)
    if exact:  # the k largest counts, ties by the item
        want = sorted(counts.items(), key=lambda c: (-c[1], tie(c[0])))
        assert [(i, e) for i, e, _, _ in listed] == want[:k], where
