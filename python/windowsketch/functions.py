"""DataFrame functions of windowsketch.

Each builds its Column by SQL function name with
:func:`pyspark.sql.functions.call_function`, so it works on a classic session and under
Spark Connect alike; the session needs the functions registered (see
:func:`windowsketch.configure`).
"""
from __future__ import annotations

import datetime
from typing import Any, Optional, Sequence, Union

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = [
    "approx_window_avg", "approx_window_avg_bounds", "approx_window_count",
    "approx_window_count_bounds", "approx_window_count_distinct", "approx_window_percentile",
    "approx_window_percentile_bounds", "approx_window_stddev", "approx_window_stddev_bounds",
    "approx_window_sample", "approx_window_seen", "approx_window_stddev_pop", "approx_window_stddev_samp",
    "approx_window_sum", "approx_window_top_k",
    "approx_window_var_pop", "approx_window_var_samp", "approx_window_variance",
    "window_filter_contains", "window_filter_sketch", "window_filter_sketch_merge",
    "window_sample_sketch", "window_sample_sketch_get", "window_sample_sketch_merge",
    "window_distinct_sketch", "window_distinct_sketch_estimate",
    "window_distinct_sketch_merge", "window_moments_sketch", "window_moments_sketch_bounds",
    "window_moments_sketch_estimate", "window_moments_sketch_merge", "window_percentile_sketch",
    "window_percentile_sketch_estimate", "window_percentile_sketch_merge", "window_sketch",
    "window_sketch_bounds", "window_sketch_estimate", "window_sketch_merge",
    "window_top_k_sketch", "window_top_k_sketch_estimate", "window_top_k_sketch_merge"]

ColumnOrName = Union[Column, str]
WindowSpec = Union[int, datetime.timedelta, str, Column]


def _check_column(value: ColumnOrName, name: str) -> None:
    if not isinstance(value, (str, Column)):
        raise TypeError(
            f"`{name}` must be a column name or a Column, got {type(value).__name__}")


def _check_window(window: WindowSpec) -> None:
    if isinstance(window, bool) or not isinstance(
            window, (int, datetime.timedelta, str, Column)):
        raise TypeError(
            "`window` must be an int (positions, for an integral `ts`), a datetime.timedelta "
            "or an interval string such as '10 minutes' (for a timestamp `ts`), got "
            f"{window!r}")


def _check_eps(eps: Union[float, Column], name: str = "eps") -> None:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, Column)):
        allowed = {"eps": "[0.0001, 1)", "rsd": "[0.01, 0.39]", "fpp": "[1e-09, 0.5]"}[name]
        raise TypeError(f"`{name}` must be a number in {allowed}, got {eps!r}")


def _column(value: ColumnOrName) -> Column:
    return F.col(value) if isinstance(value, str) else value


def _literal(value: Any) -> Column:
    # An int becomes an integral literal, a timedelta a DAY TO SECOND interval and a string
    # an interval string: Spark checks each against the type of `ts`.
    return value if isinstance(value, Column) else F.lit(value)


def _window_aggregate(name: str, v: ColumnOrName, ts: ColumnOrName, window: Any,
                      eps: Union[float, Column], v_name: str = "v",
                      eps_name: str = "eps") -> Column:
    _check_column(v, v_name)
    _check_column(ts, "ts")
    _check_window(window)
    _check_eps(eps, eps_name)
    return F.call_function(
        name, _column(v), _column(ts), _literal(window),
        _literal(eps if isinstance(eps, Column) else float(eps)))


def _sketch_query(name: str, sketch: ColumnOrName, as_of: Any, sub_window: Any,
                  *leading: Column) -> Column:
    """A query of a sketch column: (sketch, *leading[, as_of[, sub_window]])."""
    _check_column(sketch, "sketch")
    if as_of is None:
        if sub_window is not None:
            raise TypeError("`sub_window` needs `as_of`: the window it ends at")
        return F.call_function(name, _column(sketch), *leading)
    if isinstance(as_of, bool) or not isinstance(
            as_of, (str, Column, datetime.date, int)):
        raise TypeError(
            "`as_of` must be a column name, a Column, a datetime, a date or an int, got "
            f"{as_of!r}")
    end = F.col(as_of) if isinstance(as_of, str) else _literal(as_of)
    if sub_window is None:
        return F.call_function(name, _column(sketch), *leading, end)
    _check_window(sub_window)
    return F.call_function(name, _column(sketch), *leading, end, _literal(sub_window))


def approx_window_count(
    v: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Approximate count of events in a sliding window, within ``eps`` relative error.

    Over a running window frame (``.over(Window.partitionBy(k).orderBy(ts))``) it gives,
    for every row, the number of rows whose ``v`` is true in the window that ends at that
    row's ``ts``, in amortized O(1) time per row and O((1/eps) log N) memory. In
    ``groupBy(k).agg(...)`` it gives each group's count in the window ending at the
    group's largest ``ts``.
    Every result satisfies ``|result - exact| <= eps * exact``.

    Parameters
    ----------
    v : :class:`~pyspark.sql.Column` or str
        BOOLEAN, or an integral column holding 0 or 1: true / 1 is an event. NULL is not
        an event, but its ``ts`` still moves the window forward. Other integers raise an
        error naming the value.
    ts : :class:`~pyspark.sql.Column` or str
        TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral column: the row's time or position.
        Rows whose ``ts`` is NULL are ignored.
    window : int, :class:`datetime.timedelta`, str or :class:`~pyspark.sql.Column`
        For an integral ``ts``, a positive int N: the window is ``(now - N, now]``, the
        last N positions. For a temporal ``ts``, a timedelta or an interval string such as
        ``'10 minutes'``: the window is ``[now - window, now]``. Must be a constant.
    eps : float, default 0.01
        The relative error bound, a constant in [0.0001, 1). Memory grows as 1/eps.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        BIGINT, never NULL (an empty window counts 0).

    Notes
    -----
    Works in window frames, ``groupBy().agg()`` and Structured Streaming alike: rows may
    arrive in any order and partial results merge without losing the guarantee. In a
    running frame ordered by ``ts`` (the main use) each row costs O(1); other frames and
    orders stay correct but evaluate a mergeable sketch per row.

    For the last N rows (a count-based window), number the rows with
    ``row_number()`` first and use that number as ``ts``.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_count
    >>> df = spark.createDataFrame(
    ...     [(1, True), (2, False), (3, True), (4, True)], "ts INT, v BOOLEAN")
    >>> df.select("ts", approx_window_count("v", "ts", 3).over(Window.orderBy("ts"))
    ...           .alias("recent")).show()
    +---+------+
    | ts|recent|
    +---+------+
    |  1|     1|
    |  2|     1|
    |  3|     2|
    |  4|     2|
    +---+------+
    """
    return _window_aggregate("approx_window_count", v, ts, window, eps)


def window_sketch(
    v: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Aggregates the events of a group into a mergeable window sketch (BINARY).

    Keep sketches per key and period, combine them later with
    :func:`window_sketch_merge`, and read counts with :func:`window_sketch_estimate` --
    as one keeps HyperLogLog sketches per key per day. The arguments are those of
    :func:`approx_window_count`; the sketch records its window, eps and time unit.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        BINARY, never NULL. About 4 KB at window 10**9 and eps 0.01, whatever the order
        of the rows and the number of merges.

    Examples
    --------
    >>> from windowsketch.functions import window_sketch, window_sketch_estimate
    >>> df = spark.createDataFrame(
    ...     [(1, True), (2, False), (3, True), (4, True)], "ts INT, v BOOLEAN")
    >>> df.agg(window_sketch_estimate(window_sketch("v", "ts", 3)).alias("n")).show()
    +---+
    |  n|
    +---+
    |  2|
    +---+
    """
    return _window_aggregate("window_sketch", v, ts, window, eps)


def window_sketch_merge(sketch: ColumnOrName) -> Column:
    """Merges the window sketches of a group into one, as if one sketch saw every event.

    The error of the result does not grow with the number of merges. NULL sketches are
    skipped; a group with none gives NULL. Sketches of different window, eps or time
    unit, or bytes that are not a sketch, raise an error naming the function.

    Examples
    --------
    >>> from windowsketch.functions import (window_sketch, window_sketch_estimate,
    ...                                     window_sketch_merge)
    >>> events = spark.createDataFrame(
    ...     [("a", 1, 1, True), ("a", 1, 2, True), ("a", 2, 3, False), ("a", 2, 4, True)],
    ...     "host STRING, day INT, ts INT, is_error BOOLEAN")
    >>> daily = events.groupBy("host", "day").agg(
    ...     window_sketch("is_error", "ts", 3).alias("s"))
    >>> daily.groupBy("host").agg(
    ...     window_sketch_estimate(window_sketch_merge("s")).alias("errors")).show()
    +----+------+
    |host|errors|
    +----+------+
    |   a|     2|
    +----+------+
    """
    _check_column(sketch, "sketch")
    return F.call_function("window_sketch_merge", _column(sketch))


AsOf = Union[ColumnOrName, datetime.datetime, datetime.date, int, None]


def window_sketch_estimate(
    sketch: ColumnOrName, as_of: AsOf = None, sub_window: Optional[WindowSpec] = None,
) -> Column:
    """The approximate event count of a window sketch, within the sketch's eps.

    Parameters
    ----------
    sketch : :class:`~pyspark.sql.Column` or str
        BINARY made by :func:`window_sketch` or :func:`window_sketch_merge`.
    as_of : Column, column name, datetime, date or int, optional
        Where the window ends; by default the sketch's largest ``ts``. A datetime/date
        (or temporal column) for sketches over time, an int for sketches over positions;
        it may not be earlier than the sketch's largest ``ts``.
    sub_window : int, timedelta or interval string, optional
        A shorter window to count, ending at ``as_of`` (which it needs): any length up to
        the sketch's window keeps the same relative error guarantee.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        BIGINT; NULL when the sketch or ``as_of`` is NULL.

    Examples
    --------
    >>> from windowsketch.functions import window_sketch, window_sketch_estimate
    >>> df = spark.createDataFrame(
    ...     [(1, True), (2, False), (3, True), (4, True), (9, False)], "ts INT, v BOOLEAN")
    >>> s = df.agg(window_sketch("v", "ts", 10).alias("s"))
    >>> s.select(window_sketch_estimate("s").alias("in_10"),
    ...          window_sketch_estimate("s", 9, 6).alias("in_6")).show()
    +-----+----+
    |in_10|in_6|
    +-----+----+
    |    3|   1|
    +-----+----+
    """
    return _sketch_query("window_sketch_estimate", sketch, as_of, sub_window)


def window_sketch_bounds(
    sketch: ColumnOrName, as_of: AsOf = None, sub_window: Optional[WindowSpec] = None,
) -> Column:
    """Like :func:`window_sketch_estimate`, with certified bounds.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        STRUCT<estimate BIGINT, lower BIGINT, upper BIGINT> with
        ``lower <= exact <= upper`` always; NULL when the sketch or ``as_of`` is NULL.

    Examples
    --------
    >>> from windowsketch.functions import window_sketch, window_sketch_bounds
    >>> df = spark.createDataFrame(
    ...     [(1, True), (2, False), (3, True), (4, True), (9, False)], "ts INT, v BOOLEAN")
    >>> df.agg(window_sketch_bounds(window_sketch("v", "ts", 10), 12).alias("b")) \\
    ...     .select("b.*").show()
    +--------+-----+-----+
    |estimate|lower|upper|
    +--------+-----+-----+
    |       2|    2|    2|
    +--------+-----+-----+
    """
    return _sketch_query("window_sketch_bounds", sketch, as_of, sub_window)


def approx_window_count_bounds(
    v: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """:func:`approx_window_count` with certified bounds.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        STRUCT<estimate BIGINT, lower BIGINT, upper BIGINT>: the estimate within
        ``eps * exact`` of the exact count, and ``lower <= exact <= upper`` always. A
        width of 0 means the estimate is exact.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_count_bounds
    >>> df = spark.createDataFrame(
    ...     [(1, True), (2, False), (3, True), (4, True)], "ts INT, v BOOLEAN")
    >>> df.select("ts", approx_window_count_bounds("v", "ts", 3).over(Window.orderBy("ts"))
    ...           .alias("b")).select("ts", "b.*").show()
    +---+--------+-----+-----+
    | ts|estimate|lower|upper|
    +---+--------+-----+-----+
    |  1|       1|    1|    1|
    |  2|       1|    1|    1|
    |  3|       2|    2|    2|
    |  4|       2|    2|    2|
    +---+--------+-----+-----+
    """
    return _window_aggregate("approx_window_count_bounds", v, ts, window, eps)


def approx_window_sum(
    value: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Approximate sum of non-negative integers in a sliding window, within ``eps``.

    Works as :func:`approx_window_count` does -- a moving sum per row over a window
    frame, one per group in ``groupBy().agg()``, in any row order -- with
    ``|result - exact| <= eps * exact`` on every output. Adding a value costs O(1)
    however large it is.

    Parameters
    ----------
    value : :class:`~pyspark.sql.Column` or str
        An integral column of values >= 0 (a negative value is an error naming it; NULL
        adds nothing). For decimal amounts, sum an integral count of the smallest unit,
        e.g. ``(F.col("price") * 100).cast("bigint")`` for cents.
    ts, window, eps
        As for :func:`approx_window_count`.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_sum
    >>> df = spark.createDataFrame([(1, 5), (2, 0), (3, 100), (4, 7)], "ts INT, qty INT")
    >>> df.select("ts", approx_window_sum("qty", "ts", 3).over(Window.orderBy("ts"))
    ...           .alias("moving")).show()
    +---+------+
    | ts|moving|
    +---+------+
    |  1|     5|
    |  2|     5|
    |  3|   105|
    |  4|   107|
    +---+------+
    """
    return _window_aggregate("approx_window_sum", value, ts, window, eps, v_name="value")


def approx_window_count_distinct(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    rsd: Union[float, Column] = 0.05,
) -> Column:
    """Approximate number of distinct values of ``x`` in a sliding window.

    A HyperLogLog++ whose registers remember when they got their values (sliding
    HyperLogLog): works in window frames (about O(1) per row in a running frame ordered
    by ``ts``), in ``groupBy().agg()`` and with rows in any order. Over a window that holds
    every row it answers as ``approx_count_distinct`` with the same ``rsd`` does. The
    error is a distribution, not a bound: about 95% of answers lie within ``2 * rsd``.

    Parameters
    ----------
    x : :class:`~pyspark.sql.Column` or str
        Values of any type Spark can group by; NULL is not counted.
    ts, window
        As for :func:`approx_window_count`.
    rsd : float or :class:`~pyspark.sql.Column`
        The relative standard deviation, in [0.01, 0.39]; default 0.05.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_count_distinct
    >>> df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "a"), (4, "c"), (5, "c")],
    ...                            "ts INT, user STRING")
    >>> df.select("ts", approx_window_count_distinct("user", "ts", 3)
    ...           .over(Window.orderBy("ts")).alias("users")).show()
    +---+-----+
    | ts|users|
    +---+-----+
    |  1|    1|
    |  2|    2|
    |  3|    2|
    |  4|    3|
    |  5|    2|
    +---+-----+
    """
    return _window_aggregate("approx_window_count_distinct", x, ts, window, rsd, v_name="x",
                             eps_name="rsd")


def approx_window_percentile(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    percentage: Union[float, Sequence[float], Column],
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Percentile of ``x`` in a sliding window: p50, p99 of the last 10 minutes at every row.

    ``percentile_approx``'s answer over exactly the window's rows: the smallest value of
    the window such that at least ``percentage`` of the window's non-NULL values are less
    than or equal to it. The guarantee: the answer is a value of the window whose rank is
    within ``eps * n`` of ``percentage * n``. While the window holds at most the exact limit
    (the largest power of two at most 64 / eps: 4,096 values at eps 0.01; in a running frame
    ordered by ``ts``, 320 / eps: 16,384 at eps 0.01) every value is kept: rank error 0.
    Past it, in every frame and in ``groupBy().agg()``, a compact
    summary set by eps (about 440 KB at 10⁶ values, 1.1 MB at 10⁹, eps 0.01) meets the
    bound with probability at least 1 - 2·10⁻⁴ per answer (docs/percentiles.md). Rows may
    come in any order.

    Parameters
    ----------
    x : :class:`~pyspark.sql.Column` or str
        A numeric, DATE, TIMESTAMP or ANSI interval column; NULL is skipped.
    ts, window
        As for :func:`approx_window_count`.
    percentage : float, list of floats or :class:`~pyspark.sql.Column`
        A percentage in [0, 1], or several: then the result is an array of percentiles.
    eps : float or :class:`~pyspark.sql.Column`
        The rank error bound, in [0.0001, 1); default 0.01.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        Of the type of ``x`` (an array of it for several percentages); NULL when the window
        holds no value.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_percentile
    >>> df = spark.createDataFrame([(1, 30), (2, 10), (3, 20), (4, 50), (5, 40)],
    ...                            "ts INT, ms INT")
    >>> df.select("ts", approx_window_percentile("ms", "ts", 3, [0.5, 1.0])
    ...           .over(Window.orderBy("ts")).alias("p50_max")).show()
    +---+--------+
    | ts| p50_max|
    +---+--------+
    |  1|[30, 30]|
    |  2|[10, 30]|
    |  3|[20, 30]|
    |  4|[20, 50]|
    |  5|[40, 50]|
    +---+--------+
    """
    return _percentile_aggregate("approx_window_percentile", x, ts, window, percentage, eps)


def _percentages(percentage: Union[float, Sequence[float], Column]) -> Column:
    """A percentage argument as a Column: a DOUBLE literal, or an array of them."""
    if isinstance(percentage, Column):
        return percentage
    if isinstance(percentage, (int, float)) and not isinstance(percentage, bool):
        return F.lit(float(percentage))
    if isinstance(percentage, (list, tuple)) and percentage and all(
            isinstance(p, (int, float)) and not isinstance(p, bool) for p in percentage):
        return F.array(*[F.lit(float(p)) for p in percentage])
    raise TypeError(
        f"`percentage` must be a number in [0, 1] or a list of them, got {percentage!r}")


def _percentile_aggregate(name: str, x: ColumnOrName, ts: ColumnOrName, window: WindowSpec,
                          percentage: Union[float, Sequence[float], Column],
                          eps: Union[float, Column]) -> Column:
    _check_column(x, "x")
    _check_column(ts, "ts")
    _check_window(window)
    _check_eps(eps)
    return F.call_function(
        name, _column(x), _column(ts), _literal(window), _percentages(percentage),
        _literal(eps if isinstance(eps, Column) else float(eps)))


def approx_window_percentile_bounds(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    percentage: Union[float, Sequence[float], Column],
    eps: Union[float, Column] = 0.01,
) -> Column:
    """:func:`approx_window_percentile` with bounds.

    A struct ``(estimate, lower, upper)`` of values of the window with
    ``lower <= exact <= upper``, the exact percentile being ``percentile_approx``'s over
    exactly the window's rows (an array of such structs for several percentages). In exact
    mode ``lower == estimate == upper``; in compact mode the bounds hold with probability at
    least 1 - 10⁻⁹ and one no held value can vouch for is NULL. Arguments as for
    :func:`approx_window_percentile`; the fields have the type of ``x``.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_percentile_bounds
    >>> df = spark.createDataFrame([(1, 30), (2, 10), (3, 20)], "ts INT, ms INT")
    >>> df.select("ts", approx_window_percentile_bounds("ms", "ts", 3, 0.5)
    ...           .over(Window.orderBy("ts")).alias("p50")).show()
    +---+------------+
    | ts|         p50|
    +---+------------+
    |  1|{30, 30, 30}|
    |  2|{10, 10, 10}|
    |  3|{20, 20, 20}|
    +---+------------+
    """
    return _percentile_aggregate("approx_window_percentile_bounds", x, ts, window, percentage,
                                 eps)


def window_percentile_sketch(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """A mergeable sketch (BINARY) of a group's values and their times, for percentiles.

    Keep one per key and period, merge them later with
    :func:`window_percentile_sketch_merge` and read them with
    :func:`window_percentile_sketch_estimate`: percentiles in any window of up to
    ``window`` ending at or after the sketch's largest ``ts``, each what
    :func:`approx_window_percentile` gives over that window's rows. Arguments as for
    :func:`approx_window_percentile`. A window of at most the exact limit (4,096 values at
    eps 0.01) is written with every value (about 10 bytes each) and answers exactly; a larger
    one in the compact form (about 1.1 MB at 10⁹ values at eps 0.01), within eps·n in rank.

    Examples
    --------
    >>> from windowsketch.functions import (window_percentile_sketch,
    ...     window_percentile_sketch_estimate)
    >>> df = spark.createDataFrame([("home", 1, 30), ("home", 2, 10), ("cart", 3, 20)],
    ...                            "page STRING, ts INT, ms INT")
    >>> df.groupBy("page").agg(window_percentile_sketch_estimate(
    ...     window_percentile_sketch("ms", "ts", 10), 0.5).alias("p50")).orderBy("page").show()
    +----+----+
    |page| p50|
    +----+----+
    |cart|20.0|
    |home|10.0|
    +----+----+
    """
    return _window_aggregate("window_percentile_sketch", x, ts, window, eps, v_name="x")


def window_percentile_sketch_merge(sketch: ColumnOrName) -> Column:
    """Merges a group's percentile sketches. While the merged window holds at most the
    exact limit (4,096 values at eps 0.01), the result is the sketch one
    :func:`window_percentile_sketch` would have made of all their rows, in any merge order;
    past it, a compact sketch whose bounds hold in any merge order (its bytes may depend on
    the order).

    NULL sketches are skipped; a group with none gives NULL. Sketches of another window,
    ``eps`` or time unit, and bytes that are not a percentile sketch, raise an error.

    Examples
    --------
    >>> from windowsketch.functions import (window_percentile_sketch,
    ...     window_percentile_sketch_estimate, window_percentile_sketch_merge)
    >>> df = spark.createDataFrame(
    ...     [("home", 1, 30), ("home", 2, 10), ("cart", 3, 20), ("home", 4, 50)],
    ...     "page STRING, ts INT, ms INT")
    >>> per_page = df.groupBy("page").agg(window_percentile_sketch("ms", "ts", 3).alias("s"))
    >>> per_page.agg(window_percentile_sketch_estimate(window_percentile_sketch_merge("s"), 0.5)
    ...              .alias("p50_of_last_3")).show()
    +-------------+
    |p50_of_last_3|
    +-------------+
    |         20.0|
    +-------------+
    """
    _check_column(sketch, "sketch")
    return F.call_function("window_percentile_sketch_merge", _column(sketch))


def window_percentile_sketch_estimate(
    sketch: ColumnOrName,
    percentage: Union[float, Sequence[float], Column],
    as_of: AsOf = None,
    sub_window: Optional[WindowSpec] = None,
) -> Column:
    """The percentile of a percentile sketch's values in a window.

    Parameters
    ----------
    sketch : :class:`~pyspark.sql.Column` or str
        BINARY made by :func:`window_percentile_sketch` or
        :func:`window_percentile_sketch_merge`.
    percentage : float, list of floats or :class:`~pyspark.sql.Column`
        A percentage in [0, 1], or several: then the result is an array.
    as_of, sub_window
        As for :func:`window_sketch_estimate`: where the window ends (default: the
        sketch's largest ``ts``; never earlier) and how long it is (default: the
        sketch's window).

    Returns
    -------
    :class:`~pyspark.sql.Column`
        DOUBLE (values are kept as the doubles they are ranked by), or an array of them;
        NULL when the window holds no value, or the sketch or ``as_of`` is NULL.

    Examples
    --------
    >>> from windowsketch.functions import (window_percentile_sketch,
    ...     window_percentile_sketch_estimate)
    >>> df = spark.createDataFrame([(1, 30), (2, 10), (3, 20), (4, 50)], "ts INT, ms INT")
    >>> s = df.agg(window_percentile_sketch("ms", "ts", 3).alias("s"))
    >>> s.select(window_percentile_sketch_estimate("s", 0.5).alias("p50"),
    ...          window_percentile_sketch_estimate("s", [0.0, 1.0], 5).alias("range_at_5"),
    ...          window_percentile_sketch_estimate("s", 0.5, 4, 1).alias("at_4_last_1")).show()
    +----+------------+-----------+
    | p50|  range_at_5|at_4_last_1|
    +----+------------+-----------+
    |20.0|[20.0, 50.0]|       50.0|
    +----+------------+-----------+
    """
    return _sketch_query("window_percentile_sketch_estimate", sketch, as_of, sub_window,
                         _percentages(percentage))


def window_distinct_sketch(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    rsd: Union[float, Column] = 0.05,
) -> Column:
    """A mergeable sketch (BINARY) of a group's distinct values and when they were seen.

    Keep one per key and period, merge them later with
    :func:`window_distinct_sketch_merge` and read them with
    :func:`window_distinct_sketch_estimate`: distinct counts in any window of up to
    ``window`` ending at or after the sketch's largest ``ts``, each what
    ``approx_count_distinct`` with the same ``rsd`` gives over that window's rows.
    Arguments as for :func:`approx_window_count_distinct`.

    Examples
    --------
    >>> from windowsketch.functions import (window_distinct_sketch,
    ...     window_distinct_sketch_estimate)
    >>> df = spark.createDataFrame([("home", 1, "a"), ("home", 2, "b"), ("cart", 3, "a")],
    ...                            "page STRING, ts INT, user STRING")
    >>> df.groupBy("page").agg(window_distinct_sketch_estimate(
    ...     window_distinct_sketch("user", "ts", 10)).alias("users")).orderBy("page").show()
    +----+-----+
    |page|users|
    +----+-----+
    |cart|    1|
    |home|    2|
    +----+-----+
    """
    return _window_aggregate("window_distinct_sketch", x, ts, window, rsd, v_name="x",
                             eps_name="rsd")


def window_distinct_sketch_merge(sketch: ColumnOrName) -> Column:
    """Merges a group's distinct-count sketches: exactly the sketch one
    :func:`window_distinct_sketch` would have made of all their rows.

    NULL sketches are skipped; a group with none gives NULL. Sketches of another window,
    ``rsd`` or time unit, and bytes that are not a distinct-count sketch, raise an error.

    Examples
    --------
    >>> from windowsketch.functions import (window_distinct_sketch,
    ...     window_distinct_sketch_estimate, window_distinct_sketch_merge)
    >>> df = spark.createDataFrame(
    ...     [("home", 1, "a"), ("home", 2, "b"), ("cart", 3, "a"), ("home", 4, "c")],
    ...     "page STRING, ts INT, user STRING")
    >>> per_page = df.groupBy("page").agg(window_distinct_sketch("user", "ts", 3).alias("s"))
    >>> per_page.agg(window_distinct_sketch_estimate(window_distinct_sketch_merge("s"))
    ...              .alias("users_in_last_3")).show()
    +---------------+
    |users_in_last_3|
    +---------------+
    |              3|
    +---------------+
    """
    _check_column(sketch, "sketch")
    return F.call_function("window_distinct_sketch_merge", _column(sketch))


def window_distinct_sketch_estimate(
    sketch: ColumnOrName, as_of: AsOf = None, sub_window: Optional[WindowSpec] = None,
) -> Column:
    """The approximate number of distinct values of a distinct-count sketch in a window.

    Parameters
    ----------
    sketch : :class:`~pyspark.sql.Column` or str
        BINARY made by :func:`window_distinct_sketch` or
        :func:`window_distinct_sketch_merge`.
    as_of, sub_window
        As for :func:`window_sketch_estimate`: where the window ends (default: the
        sketch's largest ``ts``; never earlier) and how long it is (default: the
        sketch's window).

    Returns
    -------
    :class:`~pyspark.sql.Column`
        BIGINT: what ``approx_count_distinct`` gives over that window's rows; NULL when
        the sketch or ``as_of`` is NULL.

    Examples
    --------
    >>> from windowsketch.functions import (window_distinct_sketch,
    ...     window_distinct_sketch_estimate)
    >>> df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "a"), (4, "c")],
    ...                            "ts INT, user STRING")
    >>> s = df.agg(window_distinct_sketch("user", "ts", 3).alias("s"))
    >>> s.select(window_distinct_sketch_estimate("s").alias("last_3"),
    ...          window_distinct_sketch_estimate("s", 5).alias("at_5"),
    ...          window_distinct_sketch_estimate("s", 4, 1).alias("at_4_last_1")).show()
    +------+----+-----------+
    |last_3|at_5|at_4_last_1|
    +------+----+-----------+
    |     3|   2|          1|
    +------+----+-----------+
    """
    return _sketch_query("window_distinct_sketch_estimate", sketch, as_of, sub_window)


#: The statistics of a moments sketch, by Spark's names (and their aliases).
STATISTICS = ("avg", "mean", "var_samp", "variance", "var_pop", "stddev_samp", "stddev", "std",
              "stddev_pop")


def approx_window_avg(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Average of ``x`` in a sliding window, within ``eps`` times the window's standard
    deviation.

    The sketch keeps the exact count, mean and M2 (sum of squared deviations) of groups of
    values and knows them exactly except for the group straddling the window's start, so
    the error is relative to the values' spread, which holds for values of any sign (a
    window of -1s and 1s has average 0). Works in window frames (O(1) amortized per row in
    a running frame ordered by ``ts``), in ``groupBy().agg()`` and with rows in any order.
    The proof is in ``docs/moments.md``.

    Parameters
    ----------
    x : :class:`~pyspark.sql.Column` or str
        Numeric values; NULL is skipped but its ``ts`` still moves the window. NaN and
        infinities raise an error.
    ts, window
        As for :func:`approx_window_count`.
    eps : float or :class:`~pyspark.sql.Column`
        The error as a fraction of the window's standard deviation, in [0.0001, 1);
        default 0.01.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        DOUBLE; NULL when the window holds no non-NULL ``x``.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_avg
    >>> df = spark.createDataFrame([(1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0)],
    ...                            "ts INT, ms DOUBLE")
    >>> df.select("ts", approx_window_avg("ms", "ts", 3).over(Window.orderBy("ts"))
    ...           .alias("avg_last_3")).show()
    +---+----------+
    | ts|avg_last_3|
    +---+----------+
    |  1|      10.0|
    |  2|      15.0|
    |  3|      30.0|
    |  4|      40.0|
    +---+----------+
    """
    return _window_aggregate("approx_window_avg", x, ts, window, eps, v_name="x")


def approx_window_variance(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Sample variance of ``x`` in a sliding window (divided by n - 1, as Spark's
    ``variance``), within ``eps`` relative error; an alias of
    :func:`approx_window_var_samp`.

    A window of equal values gives 0 exactly; fewer than two non-NULL values give NULL.
    Arguments as for :func:`approx_window_avg`.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_variance
    >>> df = spark.createDataFrame([(1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0)],
    ...                            "ts INT, ms DOUBLE")
    >>> df.select("ts", approx_window_variance("ms", "ts", 3).over(Window.orderBy("ts"))
    ...           .alias("var")).show()
    +---+-----+
    | ts|  var|
    +---+-----+
    |  1| NULL|
    |  2| 50.0|
    |  3|700.0|
    |  4|400.0|
    +---+-----+
    """
    return _window_aggregate("approx_window_variance", x, ts, window, eps, v_name="x")


def approx_window_var_samp(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Sample variance of ``x`` in a sliding window (as Spark's ``var_samp``), within
    ``eps`` relative error: see :func:`approx_window_variance`.

    Examples
    --------
    >>> from windowsketch.functions import approx_window_var_samp
    >>> df = spark.createDataFrame([("a", 1, 10.0), ("a", 2, 20.0), ("b", 1, 5.0)],
    ...                            "host STRING, ts INT, ms DOUBLE")
    >>> df.groupBy("host").agg(approx_window_var_samp("ms", "ts", 10).alias("var")) \\
    ...   .orderBy("host").show()
    +----+----+
    |host| var|
    +----+----+
    |   a|50.0|
    |   b|NULL|
    +----+----+
    """
    return _window_aggregate("approx_window_var_samp", x, ts, window, eps, v_name="x")


def approx_window_var_pop(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Population variance of ``x`` in a sliding window (divided by n, as Spark's
    ``var_pop``), within ``eps`` relative error; a window of equal values gives 0 exactly.
    Arguments as for :func:`approx_window_avg`.

    Examples
    --------
    >>> from windowsketch.functions import approx_window_var_pop
    >>> df = spark.createDataFrame([("a", 1, 10.0), ("a", 2, 20.0), ("b", 1, 5.0)],
    ...                            "host STRING, ts INT, ms DOUBLE")
    >>> df.groupBy("host").agg(approx_window_var_pop("ms", "ts", 10).alias("var")) \\
    ...   .orderBy("host").show()
    +----+----+
    |host| var|
    +----+----+
    |   a|25.0|
    |   b| 0.0|
    +----+----+
    """
    return _window_aggregate("approx_window_var_pop", x, ts, window, eps, v_name="x")


def approx_window_stddev(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Sample standard deviation of ``x`` in a sliding window (as Spark's ``stddev``),
    within ``eps / 2`` relative error; an alias of :func:`approx_window_stddev_samp`.

    The square root of :func:`approx_window_variance`'s certified bracket: a window of
    equal values gives 0 exactly, fewer than two non-NULL values give NULL. With
    :func:`approx_window_avg` it makes a z-score of the last 10 minutes on every row.
    Arguments as for :func:`approx_window_avg`.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_stddev
    >>> df = spark.createDataFrame([(1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0)],
    ...                            "ts INT, ms DOUBLE")
    >>> df.select("ts", approx_window_stddev("ms", "ts", 3).over(Window.orderBy("ts"))
    ...           .alias("sd")).show()
    +---+------------------+
    | ts|                sd|
    +---+------------------+
    |  1|              NULL|
    |  2|7.0710678118654755|
    |  3|26.457513110645905|
    |  4|              20.0|
    +---+------------------+
    """
    return _window_aggregate("approx_window_stddev", x, ts, window, eps, v_name="x")


def approx_window_stddev_samp(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Sample standard deviation of ``x`` in a sliding window (as Spark's
    ``stddev_samp``): see :func:`approx_window_stddev`.

    Examples
    --------
    >>> from windowsketch.functions import approx_window_stddev_samp
    >>> df = spark.createDataFrame([("a", 1, 10.0), ("a", 2, 20.0), ("a", 3, 20.0)],
    ...                            "host STRING, ts INT, ms DOUBLE")
    >>> df.groupBy("host").agg(approx_window_stddev_samp("ms", "ts", 2).alias("sd")).show()
    +----+---+
    |host| sd|
    +----+---+
    |   a|0.0|
    +----+---+
    """
    return _window_aggregate("approx_window_stddev_samp", x, ts, window, eps, v_name="x")


def approx_window_stddev_pop(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """Population standard deviation of ``x`` in a sliding window (as Spark's
    ``stddev_pop``), within ``eps / 2`` relative error. Arguments as for
    :func:`approx_window_avg`.

    Examples
    --------
    >>> from windowsketch.functions import approx_window_stddev_pop
    >>> df = spark.createDataFrame([("a", 1, 10.0), ("a", 2, 20.0), ("a", 3, 20.0)],
    ...                            "host STRING, ts INT, ms DOUBLE")
    >>> df.groupBy("host").agg(approx_window_stddev_pop("ms", "ts", 10).alias("sd")).show()
    +----+-----------------+
    |host|               sd|
    +----+-----------------+
    |   a|4.714045207910316|
    +----+-----------------+
    """
    return _window_aggregate("approx_window_stddev_pop", x, ts, window, eps, v_name="x")


def approx_window_avg_bounds(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """:func:`approx_window_avg` with certified bounds.

    A struct ``(estimate, lower, upper)`` of DOUBLEs with ``lower <= exact average <=
    upper`` on every row, whatever the rows' order and merges, at most ``2 * eps`` standard
    deviations apart. Arguments as for :func:`approx_window_avg`.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_avg_bounds
    >>> df = spark.createDataFrame([(1, 10.0), (2, 20.0), (3, 60.0)], "ts INT, ms DOUBLE")
    >>> df.select("ts", approx_window_avg_bounds("ms", "ts", 3).over(Window.orderBy("ts"))
    ...           .alias("avg")).show()
    +---+------------------+
    | ts|               avg|
    +---+------------------+
    |  1|{10.0, 10.0, 10.0}|
    |  2|{15.0, 15.0, 15.0}|
    |  3|{30.0, 30.0, 30.0}|
    +---+------------------+
    """
    return _window_aggregate("approx_window_avg_bounds", x, ts, window, eps, v_name="x")


def approx_window_stddev_bounds(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """:func:`approx_window_stddev` (the sample standard deviation) with certified bounds:
    a struct ``(estimate, lower, upper)`` with ``lower <= exact <= upper`` on every row.
    Arguments as for :func:`approx_window_avg`.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_stddev_bounds
    >>> df = spark.createDataFrame([(1, 10.0), (2, 20.0), (3, 10.0)], "ts INT, ms DOUBLE")
    >>> df.select("ts", approx_window_stddev_bounds("ms", "ts", 2)
    ...           .over(Window.orderBy("ts")).alias("sd")).show(truncate=False)
    +---+------------------------------------------------------------+
    |ts |sd                                                          |
    +---+------------------------------------------------------------+
    |1  |NULL                                                        |
    |2  |{7.0710678118654755, 7.0710678118654755, 7.0710678118654755}|
    |3  |{7.0710678118654755, 7.0710678118654755, 7.0710678118654755}|
    +---+------------------------------------------------------------+
    """
    return _window_aggregate("approx_window_stddev_bounds", x, ts, window, eps, v_name="x")


def window_moments_sketch(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """A mergeable sketch (BINARY) of a group's values and their times, for averages,
    variances and standard deviations in sliding windows later.

    Keep one per key and period, merge them with :func:`window_moments_sketch_merge` and
    read them with :func:`window_moments_sketch_estimate` (or ``_bounds``): any statistic
    of any window of up to ``window`` ending at or after the sketch's largest ``ts``, with
    the guarantee of the aggregate of that name. Arguments as for
    :func:`approx_window_avg`.

    Examples
    --------
    >>> from windowsketch.functions import (window_moments_sketch,
    ...     window_moments_sketch_estimate)
    >>> df = spark.createDataFrame([("a", 1, 10.0), ("a", 2, 20.0), ("b", 1, 5.0)],
    ...                            "host STRING, ts INT, ms DOUBLE")
    >>> df.groupBy("host").agg(window_moments_sketch_estimate(
    ...     window_moments_sketch("ms", "ts", 10), "avg").alias("avg")).orderBy("host").show()
    +----+----+
    |host| avg|
    +----+----+
    |   a|15.0|
    |   b| 5.0|
    +----+----+
    """
    return _window_aggregate("window_moments_sketch", x, ts, window, eps, v_name="x")


def window_moments_sketch_merge(sketch: ColumnOrName) -> Column:
    """Merges a group's moments sketches into one; the guarantees hold in any merge order.

    NULL sketches are skipped; a group with none gives NULL. Sketches of another window,
    ``eps`` or time unit, and bytes that are not a moments sketch, raise an error.

    Examples
    --------
    >>> from windowsketch.functions import (window_moments_sketch,
    ...     window_moments_sketch_estimate, window_moments_sketch_merge)
    >>> df = spark.createDataFrame(
    ...     [("a", 1, 10.0), ("a", 2, 20.0), ("b", 3, 60.0), ("a", 4, 40.0)],
    ...     "host STRING, ts INT, ms DOUBLE")
    >>> per_host = df.groupBy("host").agg(window_moments_sketch("ms", "ts", 3).alias("s"))
    >>> per_host.agg(window_moments_sketch_estimate(window_moments_sketch_merge("s"), "avg")
    ...              .alias("avg_last_3")).show()
    +----------+
    |avg_last_3|
    +----------+
    |      40.0|
    +----------+
    """
    _check_column(sketch, "sketch")
    return F.call_function("window_moments_sketch_merge", _column(sketch))


def _statistic(statistic: str) -> Column:
    if not isinstance(statistic, str) or statistic.lower() not in STATISTICS:
        raise ValueError(f"`statistic` must be one of {', '.join(STATISTICS)}, got {statistic!r}")
    return F.lit(statistic)


def window_moments_sketch_estimate(
    sketch: ColumnOrName, statistic: str, as_of: AsOf = None,
    sub_window: Optional[WindowSpec] = None,
) -> Column:
    """One statistic of a moments sketch's values in a window.

    Parameters
    ----------
    sketch : :class:`~pyspark.sql.Column` or str
        BINARY made by :func:`window_moments_sketch` or :func:`window_moments_sketch_merge`.
    statistic : str
        ``"avg"`` (or ``"mean"``), ``"var_samp"`` (or ``"variance"``), ``"var_pop"``,
        ``"stddev_samp"`` (or ``"stddev"``, ``"std"``) or ``"stddev_pop"``.
    as_of, sub_window
        As for :func:`window_sketch_estimate`: where the window ends (default: the
        sketch's largest ``ts``; never earlier) and how long it is (default: the
        sketch's window).

    Returns
    -------
    :class:`~pyspark.sql.Column`
        DOUBLE, with the guarantee of the aggregate of that name; NULL for an empty window
        (or fewer than two values, for the sample forms), or when the sketch or ``as_of``
        is NULL.

    Examples
    --------
    >>> from windowsketch.functions import (window_moments_sketch,
    ...     window_moments_sketch_estimate)
    >>> df = spark.createDataFrame([(1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0)],
    ...                            "ts INT, ms DOUBLE")
    >>> s = df.agg(window_moments_sketch("ms", "ts", 3).alias("s"))
    >>> s.select(window_moments_sketch_estimate("s", "avg").alias("avg"),
    ...          window_moments_sketch_estimate("s", "var_pop", 5).alias("var_at_5"),
    ...          window_moments_sketch_estimate("s", "stddev", 4, 2).alias("sd_last_2")).show()
    +----+--------+------------------+
    | avg|var_at_5|         sd_last_2|
    +----+--------+------------------+
    |40.0|   100.0|14.142135623730951|
    +----+--------+------------------+
    """
    return _sketch_query("window_moments_sketch_estimate", sketch, as_of, sub_window,
                         _statistic(statistic))


def window_moments_sketch_bounds(
    sketch: ColumnOrName, statistic: str, as_of: AsOf = None,
    sub_window: Optional[WindowSpec] = None,
) -> Column:
    """:func:`window_moments_sketch_estimate` with certified bounds: a struct
    ``(estimate, lower, upper)`` with ``lower <= exact <= upper``.

    Examples
    --------
    >>> from windowsketch.functions import window_moments_sketch, window_moments_sketch_bounds
    >>> df = spark.createDataFrame([(1, 10.0), (2, 20.0), (3, 60.0)], "ts INT, ms DOUBLE")
    >>> df.agg(window_moments_sketch_bounds(window_moments_sketch("ms", "ts", 3), "avg")
    ...        .alias("avg")).show()
    +------------------+
    |               avg|
    +------------------+
    |{30.0, 30.0, 30.0}|
    +------------------+
    """
    return _sketch_query("window_moments_sketch_bounds", sketch, as_of, sub_window,
                         _statistic(statistic))


def _k(k: Union[int, Column]) -> Column:
    if isinstance(k, bool) or not isinstance(k, (int, Column)):
        raise TypeError(f"`k` must be a positive int (how many items to list), got {k!r}")
    return _literal(k)


def approx_window_sample(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    k: Union[int, Column],
    seed: Union[int, Column] = 0,
) -> Column:
    """Up to ``k`` rows' ``x`` drawn uniformly at random from a sliding window, in time order.

    Every set of ``k`` rows of the window is equally likely to be the sample; a window of at
    most ``k`` non-NULL rows gives all of them. The draw is a seeded hash of each row's
    ``ts`` and ``x`` (priority sampling over a moving window, Babcock, Datar and Motwani
    2002), so the same rows give the same sample in every frame, partitioning and merge
    order; rows equal in both ``ts`` and ``x`` are drawn together. The state holds about
    ``k * ln(n / k)`` of the window's ``n`` rows in expectation (``docs/sampling.md``).

    Parameters
    ----------
    x : :class:`~pyspark.sql.Column` or str
        A value of any type GROUP BY takes (no MAP inside): ``F.struct("url", "status")``
        samples whole rows. NULL is skipped.
    ts, window
        As for :func:`approx_window_count`.
    k : int or :class:`~pyspark.sql.Column`
        How many values to draw: a constant int in [1, 10000].
    seed : int or :class:`~pyspark.sql.Column`
        A constant integer; another seed draws another sample. Default 0.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        ARRAY of ``x``'s type, oldest row first; an empty array for an empty window.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_sample
    >>> df = spark.createDataFrame([(1, "/a"), (2, "/b"), (3, "/c"), (4, "/d")],
    ...                            "ts INT, url STRING")
    >>> df.select("ts", approx_window_sample("url", "ts", 3, 2).over(Window.orderBy("ts"))
    ...           .alias("sample")).show()
    +---+--------+
    | ts|  sample|
    +---+--------+
    |  1|    [/a]|
    |  2|[/a, /b]|
    |  3|[/b, /c]|
    |  4|[/b, /c]|
    +---+--------+
    """
    return _sample_aggregate("approx_window_sample", x, ts, window, k, seed)


def _sample_k(k: Union[int, Column]) -> Column:
    if isinstance(k, bool) or not isinstance(k, (int, Column)):
        raise TypeError(f"`k` must be a positive int (how many values to draw), got {k!r}")
    return _literal(k)


def _sample_aggregate(name: str, x: ColumnOrName, ts: ColumnOrName, window: WindowSpec,
                      k: Union[int, Column], seed: Union[int, Column]) -> Column:
    _check_column(x, "x")
    _check_column(ts, "ts")
    _check_window(window)
    if isinstance(seed, bool) or not isinstance(seed, (int, Column)):
        raise TypeError(f"`seed` must be an int, got {seed!r}")
    return F.call_function(name, _column(x), _column(ts), _literal(window), _sample_k(k),
                           _literal(seed))


def window_sample_sketch(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    k: Union[int, Column],
    seed: Union[int, Column] = 0,
) -> Column:
    """A mergeable sketch (BINARY) of a group's rows, for samples of sliding windows later.

    Keep one per key and period, merge them with :func:`window_sample_sketch_merge` and
    read them with :func:`window_sample_sketch_get`: the sample of any window of up to
    ``window`` ending at or after the sketch's largest ``ts``, exactly the one
    :func:`approx_window_sample` draws from that window's rows. Arguments as for
    :func:`approx_window_sample`; ``k`` is the largest sample the sketch gives.

    Examples
    --------
    >>> from windowsketch.functions import window_sample_sketch, window_sample_sketch_get
    >>> df = spark.createDataFrame([(1, "/a"), (2, "/b"), (3, "/c"), (4, "/d")],
    ...                            "ts INT, url STRING")
    >>> df.agg(window_sample_sketch_get(window_sample_sketch("url", "ts", 3, 2))
    ...        .alias("sample")).show()
    +--------+
    |  sample|
    +--------+
    |[/b, /c]|
    +--------+
    """
    return _sample_aggregate("window_sample_sketch", x, ts, window, k, seed)


def window_sample_sketch_merge(sketch: ColumnOrName) -> Column:
    """Merges a group's sample sketches into one: the sketch of all their rows, the same
    bytes in any merge order.

    NULL sketches are skipped; a group with none gives NULL. Sketches of another window,
    ``k``, ``seed``, time unit or value type, and bytes that are not a sample sketch, raise
    an error.

    Examples
    --------
    >>> from windowsketch.functions import (window_sample_sketch, window_sample_sketch_get,
    ...     window_sample_sketch_merge)
    >>> df = spark.createDataFrame([("a", 1, "/a"), ("b", 2, "/b"), ("a", 3, "/c"),
    ...                             ("b", 4, "/d")], "host STRING, ts INT, url STRING")
    >>> per_host = df.groupBy("host").agg(window_sample_sketch("url", "ts", 3, 2).alias("s"))
    >>> per_host.agg(window_sample_sketch_get(window_sample_sketch_merge("s"))
    ...              .alias("sample")).show()
    +--------+
    |  sample|
    +--------+
    |[/b, /c]|
    +--------+
    """
    _check_column(sketch, "sketch")
    return F.call_function("window_sample_sketch_merge", _column(sketch))


def window_sample_sketch_get(
    sketch: ColumnOrName, k: Optional[Union[int, Column]] = None, as_of: AsOf = None,
    sub_window: Optional[WindowSpec] = None,
) -> Column:
    """The sample of a sample sketch's window: ``k`` values (default: the sketch's k).

    Parameters
    ----------
    sketch : :class:`~pyspark.sql.Column` or str
        BINARY made by :func:`window_sample_sketch` or :func:`window_sample_sketch_merge`.
    k : int or :class:`~pyspark.sql.Column`, optional
        How many values to draw, at most the sketch's k.
    as_of, sub_window
        As for :func:`window_sketch_estimate`.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        ARRAY<STRING>, oldest row first, each value as text (``CAST(x AS STRING)``,
        timestamps in UTC): the sketch's value type is known only when its bytes are read.
        :class:`windowsketch.sketch.SampleSketch` gives typed values in Python.

    Examples
    --------
    >>> from windowsketch.functions import window_sample_sketch, window_sample_sketch_get
    >>> df = spark.createDataFrame([(1, 404), (2, 200), (3, 404), (4, 500)],
    ...                            "ts INT, status INT")
    >>> s = df.agg(window_sample_sketch("status", "ts", 3, 2).alias("s"))
    >>> s.select(window_sample_sketch_get("s").alias("last_3"),
    ...          window_sample_sketch_get("s", 1, 4, 1).alias("at_4_last_1")).show()
    +----------+-----------+
    |    last_3|at_4_last_1|
    +----------+-----------+
    |[200, 500]|      [500]|
    +----------+-----------+
    """
    count = F.lit(None) if k is None else _sample_k(k)
    if as_of is None and sub_window is None and k is None:
        return _sketch_query("window_sample_sketch_get", sketch, None, None)
    return _sketch_query("window_sample_sketch_get", sketch, as_of, sub_window, count)


def approx_window_top_k(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    k: Union[int, Column],
    eps: Union[float, Column] = 0.01,
) -> Column:
    """The ``k`` most frequent values of ``x`` in a sliding window, with certified counts.

    An array of structs ``(item, count, lower, upper)`` ordered by ``count``, with
    ``lower <= exact <= upper`` for every item listed and ``upper - lower <= eps * n``
    (``n`` the window's non-NULL rows); every item occurring more than ``eps * n`` times is
    listed unless ``k`` items with larger counts are. In a running frame ordered by ``ts``
    the counts are exact while the window holds fewer than 1,407 rows at eps 0.01 (about
    14 / eps), and bounded as above otherwise, in O((1 / eps) log n) memory;
    elsewhere (other frames, ``groupBy().agg()``, rows in any order) a mergeable sketch of
    dyadic time nodes, each with a Misra–Gries summary, answers (``docs/top-k.md``).

    Parameters
    ----------
    x : :class:`~pyspark.sql.Column` or str
        BOOLEAN, numeric, STRING, DATE or TIMESTAMP values; NULL is skipped.
    ts, window
        As for :func:`approx_window_count`.
    k : int or :class:`~pyspark.sql.Column`
        How many items to list: a constant positive int.
    eps : float or :class:`~pyspark.sql.Column`
        The bounds' width as a fraction of the window's rows, in [0.0001, 1); default 0.01.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        ARRAY<STRUCT<item, count BIGINT, lower BIGINT, upper BIGINT>>, the item of ``x``'s
        type; an empty array for an empty window.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_top_k
    >>> df = spark.createDataFrame([(1, "/a"), (2, "/b"), (3, "/b"), (4, "/a"), (5, "/a")],
    ...                            "ts INT, url STRING")
    >>> df.select("ts", approx_window_top_k("url", "ts", 3, 1).over(Window.orderBy("ts"))
    ...           .alias("top")).show(truncate=False)
    +---+---------------+
    |ts |top            |
    +---+---------------+
    |1  |[{/a, 1, 1, 1}]|
    |2  |[{/a, 1, 1, 1}]|
    |3  |[{/b, 2, 2, 2}]|
    |4  |[{/b, 2, 2, 2}]|
    |5  |[{/a, 2, 2, 2}]|
    +---+---------------+
    """
    _check_column(x, "x")
    _check_column(ts, "ts")
    _check_window(window)
    _check_eps(eps)
    return F.call_function("approx_window_top_k", _column(x), _column(ts), _literal(window),
                           _k(k), _literal(eps if isinstance(eps, Column) else float(eps)))


def window_top_k_sketch(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    eps: Union[float, Column] = 0.01,
) -> Column:
    """A mergeable sketch (BINARY) of a group's values and their times, for the most
    frequent values of sliding windows later.

    Keep one per key and period, merge them with :func:`window_top_k_sketch_merge` and read
    them with :func:`window_top_k_sketch_estimate`: the top values of any window of up to
    ``window`` ending at or after the sketch's largest ``ts``, with certified bounds.
    Arguments as for :func:`approx_window_top_k`.

    Examples
    --------
    >>> from windowsketch.functions import window_top_k_sketch, window_top_k_sketch_estimate
    >>> df = spark.createDataFrame([("a", 1, 404), ("a", 2, 200), ("a", 3, 404)],
    ...                            "host STRING, ts INT, status INT")
    >>> df.groupBy("host").agg(window_top_k_sketch_estimate(
    ...     window_top_k_sketch("status", "ts", 10), 1).alias("top")).show()
    +----+----------------+
    |host|             top|
    +----+----------------+
    |   a|[{404, 2, 2, 2}]|
    +----+----------------+
    """
    return _window_aggregate("window_top_k_sketch", x, ts, window, eps, v_name="x")


def window_top_k_sketch_merge(sketch: ColumnOrName) -> Column:
    """Merges a group's top-k sketches into one; the bounds hold in any merge order.

    NULL sketches are skipped; a group with none gives NULL. Sketches of another window,
    ``eps``, time unit or item type, and bytes that are not a top-k sketch, raise an error.

    Examples
    --------
    >>> from windowsketch.functions import (window_top_k_sketch, window_top_k_sketch_estimate,
    ...     window_top_k_sketch_merge)
    >>> df = spark.createDataFrame([("a", 1, "/x"), ("b", 2, "/y"), ("a", 3, "/y")],
    ...                            "host STRING, ts INT, url STRING")
    >>> per_host = df.groupBy("host").agg(window_top_k_sketch("url", "ts", 10).alias("s"))
    >>> per_host.agg(window_top_k_sketch_estimate(window_top_k_sketch_merge("s"), 1)
    ...              .alias("top")).show()
    +---------------+
    |            top|
    +---------------+
    |[{/y, 2, 2, 2}]|
    +---------------+
    """
    _check_column(sketch, "sketch")
    return F.call_function("window_top_k_sketch_merge", _column(sketch))


def window_top_k_sketch_estimate(
    sketch: ColumnOrName, k: Union[int, Column], as_of: AsOf = None,
    sub_window: Optional[WindowSpec] = None,
) -> Column:
    """The ``k`` most frequent values of a top-k sketch in a window.

    Parameters
    ----------
    sketch : :class:`~pyspark.sql.Column` or str
        BINARY made by :func:`window_top_k_sketch` or :func:`window_top_k_sketch_merge`.
    k : int or :class:`~pyspark.sql.Column`
        How many items to list.
    as_of, sub_window
        As for :func:`window_sketch_estimate`.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        ARRAY<STRUCT<item STRING, count, lower, upper>>, as :func:`approx_window_top_k`
        lists them, with each item as text (``CAST(item AS STRING)``, timestamps in UTC):
        the sketch's item type is known only when its bytes are read.

    Examples
    --------
    >>> from windowsketch.functions import window_top_k_sketch, window_top_k_sketch_estimate
    >>> df = spark.createDataFrame([(1, 404), (2, 200), (3, 404), (4, 500)],
    ...                            "ts INT, status INT")
    >>> s = df.agg(window_top_k_sketch("status", "ts", 3).alias("s"))
    >>> s.select(window_top_k_sketch_estimate("s", 1).alias("last_3"),
    ...          window_top_k_sketch_estimate("s", 1, 4, 1).alias("at_4_last_1")).show()
    +----------------+----------------+
    |          last_3|     at_4_last_1|
    +----------------+----------------+
    |[{200, 1, 1, 1}]|[{500, 1, 1, 1}]|
    +----------------+----------------+
    """
    return _sketch_query("window_top_k_sketch_estimate", sketch, as_of, sub_window, _k(k))


def approx_window_seen(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    fpp: Union[float, Column] = 0.01,
) -> Column:
    """Whether each row's ``x`` occurred earlier in the sliding window ending at its ``ts``.

    For a running frame ordered by ``ts`` (``.over(Window.partitionBy(k).orderBy(ts))``):
    true when the value occurred at an earlier ``ts`` of the window, or at the same ``ts``
    in an earlier row of the frame's order (add a tie-breaker to the ordering to make that
    order deterministic). A value of the window is always found; one that is not there is
    reported seen with probability at most ``fpp``. ``F.count_if(~seen)`` counts first
    occurrences and ``.where(~seen)`` de-duplicates. Memory is a fingerprint and a time per
    distinct value of the window (``docs/filtering.md``). In ``groupBy`` or other frames,
    use :func:`window_filter_sketch` and :func:`window_filter_contains`.

    Parameters
    ----------
    x : :class:`~pyspark.sql.Column` or str
        A value of any type GROUP BY takes (no MAP inside), for example
        ``F.struct("user", "url")``; -0.0 and 0.0, and all NaNs, are one value. NULL gives
        NULL.
    ts, window
        As for :func:`approx_window_count`.
    fpp : float or :class:`~pyspark.sql.Column`
        The most probability that an absent value is reported seen, in [1e-09, 0.5], for up
        to 2^32 distinct values in the window. Default 0.01.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        BOOLEAN; NULL where ``x`` or ``ts`` is NULL.

    Examples
    --------
    >>> from pyspark.sql import Window
    >>> from windowsketch.functions import approx_window_seen
    >>> df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "a"), (5, "b"), (7, "a")],
    ...                            "ts INT, user STRING")
    >>> df.select("ts", "user", approx_window_seen("user", "ts", 3).over(Window.orderBy("ts"))
    ...           .alias("seen")).show()
    +---+----+-----+
    | ts|user| seen|
    +---+----+-----+
    |  1|   a|false|
    |  2|   b|false|
    |  3|   a| true|
    |  5|   b|false|
    |  7|   a|false|
    +---+----+-----+
    """
    return _window_aggregate("approx_window_seen", x, ts, window, fpp, "x", "fpp")


def window_filter_sketch(
    x: ColumnOrName,
    ts: ColumnOrName,
    window: WindowSpec,
    fpp: Union[float, Column] = 0.01,
) -> Column:
    """A mergeable filter sketch (BINARY) of a group's values, for membership questions later.

    Keep one per key and period, merge them with :func:`window_filter_sketch_merge` and ask
    them with :func:`window_filter_contains`: whether a value occurred in any window of up to
    ``window`` ending at or after the sketch's largest ``ts``. Arguments as for
    :func:`approx_window_seen`.

    Examples
    --------
    >>> from windowsketch.functions import window_filter_contains, window_filter_sketch
    >>> df = spark.createDataFrame([(1, "a"), (2, "b"), (5, "a")], "ts INT, user STRING")
    >>> s = df.agg(window_filter_sketch("user", "ts", 3).alias("s"))
    >>> s.select(window_filter_contains("s", "a").alias("a"),
    ...          window_filter_contains("s", "b").alias("b")).show()
    +----+-----+
    |   a|    b|
    +----+-----+
    |true|false|
    +----+-----+
    """
    return _window_aggregate("window_filter_sketch", x, ts, window, fpp, "x", "fpp")


def window_filter_sketch_merge(sketch: ColumnOrName) -> Column:
    """Merges a group's filter sketches into one: the sketch of all their rows, the same
    bytes in any merge order.

    NULL sketches are skipped; a group with none gives NULL. Sketches of another window,
    ``fpp``, time unit or value type, and bytes that are not a filter sketch, raise an error.

    Examples
    --------
    >>> from windowsketch.functions import (window_filter_contains, window_filter_sketch,
    ...     window_filter_sketch_merge)
    >>> df = spark.createDataFrame([("x", 1, "a"), ("y", 2, "b")],
    ...                            "host STRING, ts INT, user STRING")
    >>> per_host = df.groupBy("host").agg(window_filter_sketch("user", "ts", 3).alias("s"))
    >>> per_host.agg(window_filter_contains(window_filter_sketch_merge("s"), "a")
    ...              .alias("a")).show()
    +----+
    |   a|
    +----+
    |true|
    +----+
    """
    _check_column(sketch, "sketch")
    return F.call_function("window_filter_sketch_merge", _column(sketch))


def window_filter_contains(
    sketch: ColumnOrName, value: Any, as_of: AsOf = None,
    sub_window: Optional[WindowSpec] = None,
) -> Column:
    """Whether ``value`` occurred in a filter sketch's window.

    Parameters
    ----------
    sketch : :class:`~pyspark.sql.Column` or str
        BINARY made by :func:`window_filter_sketch` or :func:`window_filter_sketch_merge`.
    value : :class:`~pyspark.sql.Column` or a literal
        The value to look for, of the sketch's value type (as for ``array_contains``, a
        plain Python value is a literal, not a column name). NULL gives NULL.
    as_of, sub_window
        As for :func:`window_sketch_estimate`.

    Returns
    -------
    :class:`~pyspark.sql.Column`
        BOOLEAN: true for every value of the window; for a value not in it, true with
        probability at most the sketch's ``fpp``.

    Examples
    --------
    >>> from windowsketch.functions import window_filter_contains, window_filter_sketch
    >>> df = spark.createDataFrame([(1, "a"), (3, "a"), (4, "b")], "ts INT, user STRING")
    >>> s = df.agg(window_filter_sketch("user", "ts", 3).alias("s"))
    >>> s.select(window_filter_contains("s", "b", 4, 1).alias("b_at_4"),
    ...          window_filter_contains("s", "c").alias("c")).show()
    +------+-----+
    |b_at_4|    c|
    +------+-----+
    |  true|false|
    +------+-----+
    """
    return _sketch_query("window_filter_contains", sketch, as_of, sub_window, _literal(value))
