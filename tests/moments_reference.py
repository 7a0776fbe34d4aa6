"""Exact moments of a window in rational arithmetic, and the checks every answer of the
moments family must pass against them (docs/moments.md): NULL where Spark's function gives
NULL, the exact value inside the certified bracket, the estimate within the guarantee, and
exactly 0 for a window of equal values."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

STATS = ["avg", "var_pop", "var_samp", "stddev_pop", "stddev_samp"]
ULP = 2.0 ** -52


class Exact:
    """Windows' count, mean and M2 in exact arithmetic: the doubles as integers at one
    scale, so sums of values and squares are exact."""

    def __init__(self, values):
        values = [0.0 if v is None else float(v) for v in values]
        exponents = [Fraction(x).denominator.bit_length() - 1 for x in values]
        self.shift = max(exponents, default=0)
        self.ints = np.array([int(Fraction(x) * 2 ** self.shift) for x in values], dtype=object)
        self.squares = self.ints * self.ints

    def of(self, mask):
        """(n, mean, M2) of the values where `mask` is true: mean and M2 as Fractions."""
        n = int(np.count_nonzero(mask))
        if n == 0:
            return 0, None, None
        s, ss = int(self.ints[mask].sum()), int(self.squares[mask].sum())
        mean = Fraction(s, n * 2 ** self.shift)
        m2 = Fraction(n * ss - s * s, n * 4 ** self.shift)
        return n, mean, m2


def answers_of(n, mean, m2):
    """Spark's answers (None for NULL), exact or, for the square roots, as floats."""
    if n == 0:
        return {s: None for s in STATS}
    out = {"avg": mean, "var_pop": m2 / n, "var_samp": m2 / (n - 1) if n > 1 else None}
    out["stddev_pop"] = math.sqrt(out["var_pop"])
    out["stddev_samp"] = math.sqrt(out["var_samp"]) if n > 1 else None
    return out


def check_statistic(stat, estimate, lower, upper, n, mean, m2, eps, where):
    """One answer (estimate, lower, upper; lower and upper None when only the estimate is
    known) against the exact window, with an allowance for rounding: each pairwise
    combination moves a mean by an ulp of the values' size."""
    exact = answers_of(n, mean, m2)[stat]
    if exact is None:
        assert estimate is None and lower is None and upper is None, (where, stat, estimate)
        return
    assert estimate is not None, (where, stat)
    value = float(exact)
    sigma = math.sqrt(m2 / n)
    slack_mean = 64 * ULP * abs(float(mean)) + 1e-12 * sigma
    slack_var = 1e-9 * float(m2 / n) + 4 * slack_mean * (sigma + slack_mean)
    if stat == "avg":
        slack, allowed = slack_mean, eps * sigma
    elif stat.startswith("var"):
        slack, allowed = slack_var, eps * value
    else:  # the square root halves the bracket's relative width
        slack, allowed = math.sqrt(value * value + slack_var) - value, eps / 2 * value
    if lower is not None:
        assert lower - slack <= value <= upper + slack, (where, stat, lower, value, upper)
    assert abs(estimate - value) <= allowed + slack, (where, stat, estimate, value)
    if stat != "avg" and m2 == 0:
        assert estimate == 0.0 and lower in (None, 0.0) and upper in (None, 0.0), (where, stat)
