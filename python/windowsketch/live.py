"""The aggregates of :func:`windowsketch.streaming.sliding_window`, one per family::

    from windowsketch import live
    from windowsketch.streaming import sliding_window

    sliding_window(events, key="host", ts="ts", window="10 minutes", every="1 minute",
                   aggregates=[live.count(F.col("status") == 404).alias("n404"),
                               live.distinct("client"),
                               live.percentile("latency", [0.5, 0.99])])

Each is named in the output by its family (``count``, ``sum``, ``distinct``,
``percentile``, ``moments``, ``top_k``, ``sample``) unless renamed with
:meth:`LiveAggregate.alias`.

Counts and sums can carry alerts on their certified bounds (``alert_above``,
``alert_below``), as :func:`windowsketch.streaming.sliding_counts` does: the struct gains a
field ``above`` and/or ``below`` that is ``"rise"`` or ``"fall"`` at the tick where the
alert crosses and NULL at other ticks. ``above`` X rises once the lower bound passes X and
falls once the upper bound is back at or under X; ``below`` Y falls once the upper bound is
under Y and rises once the lower bound is back at Y or more; a new key starts at 0. So no
alert is ever false of the exact window, and a value hovering within eps of a threshold
cannot flap. Keep only the alerts with ``.where(F.col("n404.above").isNotNull())``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence, Union

from pyspark.sql import Column

__all__ = ["LiveAggregate", "count", "distinct", "moments", "percentile", "sample", "sum",
           "top_k"]

ColumnOrName = Union[Column, str]


@dataclasses.dataclass(frozen=True)
class LiveAggregate:
    """One aggregate of a live window: a family over a column, named in the output."""

    family: str
    column: ColumnOrName
    name: str
    eps: float
    percentages: tuple[float, ...] = ()
    single: bool = False
    above: Optional[int] = None
    below: Optional[int] = None
    k: int = 0
    seed: int = 0

    def alias(self, name: str) -> "LiveAggregate":
        """The same aggregate under another output column name."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"alias must be a non-empty string, got {name!r}")
        return dataclasses.replace(self, name=name)

    def _spec(self, input_column: str) -> dict[str, Any]:
        return {"family": self.family, "name": self.name, "input": input_column,
                "eps": self.eps, "percentages": list(self.percentages), "single": self.single,
                "above": self.above, "below": self.below, "k": self.k, "seed": self.seed}


def _checked(value: Any, name: str) -> ColumnOrName:
    if not isinstance(value, (str, Column)):
        raise TypeError(f"`{name}` must be a column name or a Column, got {value!r}")
    return value


# The most values a top_k answer lists: the JVM's SlidingTopK.MaxK.
_MAX_K = 100_000


def _accuracy(value: Any, name: str) -> float:
    """A number; its range is checked by the operator, which names the aggregate."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a number, got {value!r}")
    return float(value)


def _threshold(value: Optional[int], name: str) -> Optional[int]:
    """An alert threshold: None or a non-negative int."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"`{name}` must be a non-negative int (a count), got {value!r}")
    return value


def count(v: ColumnOrName, eps: float = 0.01, alert_above: Optional[int] = None,
          alert_below: Optional[int] = None) -> LiveAggregate:
    """The events (rows where BOOLEAN ``v`` is true) in the window, as a struct
    ``estimate, lower, upper``: ``|estimate - exact| <= eps * exact`` and
    ``lower <= exact <= upper``, as :func:`windowsketch.functions.approx_window_count`;
    with thresholds, the alert fields described in :mod:`windowsketch.live`."""
    return LiveAggregate("count", _checked(v, "v"), "count", _accuracy(eps, "eps"),
                         above=_threshold(alert_above, "alert_above"),
                         below=_threshold(alert_below, "alert_below"))


def sum(x: ColumnOrName, eps: float = 0.01, alert_above: Optional[int] = None,  # noqa: A001
        alert_below: Optional[int] = None) -> LiveAggregate:
    """The sum of the window's non-negative integral ``x`` (NULL skipped), as a struct
    ``estimate, lower, upper`` with the guarantee of :func:`count`, and its alerts; a
    negative value stops the query naming it."""
    return LiveAggregate("sum", _checked(x, "x"), "sum", _accuracy(eps, "eps"),
                         above=_threshold(alert_above, "alert_above"),
                         below=_threshold(alert_below, "alert_below"))


def distinct(x: ColumnOrName, rsd: float = 0.05) -> LiveAggregate:
    """The distinct non-NULL values of ``x`` in the window (BIGINT): what
    ``approx_count_distinct(x, rsd)`` gives over the window's rows."""
    return LiveAggregate("distinct", _checked(x, "x"), "distinct",
                         _accuracy(rsd, "rsd"))


def percentile(x: ColumnOrName, percentage: Union[float, Sequence[float]],
               eps: float = 0.01) -> LiveAggregate:
    """The value of numeric ``x`` at ``percentage`` in the window (DOUBLE; an ARRAY of
    DOUBLE for a list of percentages; NULL for a window with no value): a value of the
    window whose rank is that of ``percentile_approx`` over the window's rows."""
    single = not isinstance(percentage, (list, tuple))
    values: list[Any] = [percentage] if single else list(percentage)  # type: ignore[arg-type]
    if not values or not all(not isinstance(p, bool) and isinstance(p, (int, float))
                             and 0.0 <= p <= 1.0 for p in values):
        raise ValueError(f"`percentage` must be a number in [0, 1] or a non-empty list of "
                         f"them, got {percentage!r}")
    return LiveAggregate("percentile", _checked(x, "x"), "percentile",
                         _accuracy(eps, "eps"),
                         tuple(float(p) for p in values), single)


def moments(x: ColumnOrName, eps: float = 0.01) -> LiveAggregate:
    """The average, variances and standard deviations of numeric ``x`` in the window (NULL
    skipped), as a struct ``avg, var_pop, var_samp, stddev_pop, stddev_samp`` of DOUBLEs
    (NULL as Spark's: no values; one, for the sample forms), with the guarantees of
    :func:`windowsketch.functions.approx_window_avg`, ``_variance`` and ``_stddev``: the
    ingredients of a z-score per key and tick. Where the ticks cut the window into at most
    1,024 slices of time (``gcd(window, every)`` wide, or two a tick period, cut where the
    windows start) the answers are exact, from each
    slice's count, mean and M2. NaN or infinite values stop the query."""
    return LiveAggregate("moments", _checked(x, "x"), "moments", _accuracy(eps, "eps"))


def top_k(x: ColumnOrName, k: int, eps: float = 0.01) -> LiveAggregate:
    """The ``k`` most frequent non-NULL values of ``x`` (BOOLEAN, numeric, STRING, DATE or
    TIMESTAMP) in the window, as an array of structs ``item, count, lower, upper`` ordered
    by count (ties by the larger lower bound, then by item; empty for an empty window), with
    ``lower <= exact <= upper``: exact counts while a key holds at most
    ``2**floor(log2(8 / eps))`` counters (512 at eps 0.01; one per distinct value of each
    slice of time the ticks cut), then ``upper - lower <= eps * n`` from a Misra-Gries
    summary of ``ceil(1 / eps) - 1`` counters a slice (past 128 slices, as
    :func:`windowsketch.functions.approx_window_top_k` counts them in a running frame:
    exact below about 14 / eps rows)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"`k` must be a positive int (how many values to list), got {k!r}")
    if k > _MAX_K:
        raise ValueError(f"`k` must be at most {_MAX_K} (as approx_window_top_k's), got {k}")
    return LiveAggregate("top_k", _checked(x, "x"), "top_k", _accuracy(eps, "eps"), k=k)


# The largest sample and the seeds a live state keeps exactly: the JVM's SlidingSample.MaxK
# and LiveSampleAggregate's range.
_MAX_SAMPLE = 10_000
_MAX_SEED = 1 << 53


def sample(x: ColumnOrName, k: int, seed: int = 0) -> LiveAggregate:
    """Up to ``k`` values of ``x`` (any type GROUP BY takes; a struct samples whole rows)
    drawn uniformly from the window's non-NULL rows, oldest first (an ARRAY of ``x``'s type,
    empty for an empty window): the sample
    :func:`windowsketch.functions.approx_window_sample` draws over the same rows with the
    same ``seed`` (an int in [-2**53, 2**53]), in state of about ``k * ln(n / k)`` rows."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= _MAX_SAMPLE:
        raise ValueError(f"`k` must be an int in [1, {_MAX_SAMPLE}] (how many values to draw), "
                         f"got {k!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or abs(seed) > _MAX_SEED:
        raise ValueError(f"`seed` must be an int in [-2**53, 2**53], got {seed!r}")
    return LiveAggregate("sample", _checked(x, "x"), "sample", 0.0, k=k, seed=seed)
