"""Live sliding windows on Structured Streaming: :func:`sliding_window` (several
aggregates per key: counts, sums, distinct counts, percentiles, moments, top values,
samples), :func:`sliding_counts` (counts with alerts) and :func:`drop_duplicates_within`
(de-duplication over a sliding window with bounded state).

The operators run in the JVM (``flatMapGroupsWithState`` with event-time timeouts, each
family's structure per key or bucket); Python only builds the query, so no Python code runs
per event. A Spark 4 Connect client reaches them through windowsketch's relation plugin
(``windowsketch.configure`` enables it on the server); on Spark 3.5 they need a classic
SparkSession.
"""
from __future__ import annotations

import datetime
import json
from typing import Any, NoReturn, Optional, Sequence, Union

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from windowsketch import _require_built_line, _scala_object
from windowsketch import live
from windowsketch.live import LiveAggregate, _threshold

__all__ = ["drop_duplicates_within", "sliding_counts", "sliding_window"]

_OPERATOR_CLASS = "windowsketch.spark.SlidingCounts"
_WINDOW_OPERATOR_CLASS = "windowsketch.spark.SlidingWindow"
_DEDUPLICATION_CLASS = "windowsketch.spark.DropDuplicatesWithin"
_INPUT_COLUMN = "__windowsketch_input_{}"
# The relation plugin's type URL for each operator (SlidingWindowRelationPlugin.Operators).
_CONNECT_TYPE_URLS = {"sliding_window": "type.googleapis.com/windowsketch.SlidingWindow",
                      "drop_duplicates_within":
                          "type.googleapis.com/windowsketch.DropDuplicatesWithin"}
_EVENT_COLUMN = "__windowsketch_is_event"
Span = Union[int, datetime.timedelta, str]


def _span(value: Span, name: str) -> str:
    """An interval string (timestamps) or a number of positions, as the JVM parses it."""
    if isinstance(value, bool) or not isinstance(value, (int, datetime.timedelta, str)):
        raise TypeError(
            f"`{name}` must be an interval string such as '10 minutes' or a datetime.timedelta "
            f"(for a TIMESTAMP `ts`) or an int of positions (for an integral `ts`), got {value!r}")
    if isinstance(value, datetime.timedelta):
        return f"{value // datetime.timedelta(microseconds=1)} microseconds"
    return str(value)


def sliding_counts(
    events: DataFrame,
    key: Union[str, Sequence[str]],
    ts: str,
    window: Span,
    every: Span,
    v: Union[Column, str, None] = None,
    eps: float = 0.01,
    alert_above: Optional[int] = None,
    alert_below: Optional[int] = None,
    lateness: Optional[int] = None,
) -> DataFrame:
    """Live per-key counts of the events in a sliding window, one row per key per tick.

    For each tick ``T`` (a multiple of ``every`` since the epoch, or since position 0) once
    the watermark has passed ``T``, emits one row per key whose window ending at ``T``
    (``[T - window, T]`` for a TIMESTAMP ``ts``; ``(T - window, T]`` positions for an
    integral one) holds events: ``key..., window_end, estimate, lower, upper``, with
    ``|estimate - exact| <= eps * exact`` and ``lower <= exact <= upper``. Rows are final:
    every event at or before ``T`` that is not late has arrived. When a key's window
    empties it emits one last row with 0, and once nothing of it is pending its state is
    deleted, so the state holds only live keys. Events at or before the watermark are
    dropped, as Spark drops late rows (``numRowsDroppedByWatermark`` in the query's
    progress).

    With ``alert_above`` and/or ``alert_below``, only crossings are emitted, with two more
    columns: ``alert`` (``"above"`` or ``"below"``) and ``crossing`` (``"rise"`` or
    ``"fall"``). Crossings fire on the certified bounds, never on the estimate alone:
    above ``X`` rises once ``lower > X`` and falls once ``upper <= X``; below ``Y`` falls
    once ``upper < Y`` and rises once ``lower >= Y``. So no alert is ever false and a count
    hovering within eps of a threshold does not flap; the price is a delay of at most the
    ticks it takes the count to pass the threshold by its error.

    Args:
        events: a streaming DataFrame. For a TIMESTAMP ``ts`` it must carry a watermark on
            ``ts`` (``events.withWatermark("ts", "1 minute")``).
        key: a column name or a list of them.
        ts: the name of a TIMESTAMP column, or of an integral column of positions (then
            give ``lateness``).
        window: the window's length: an interval string or ``datetime.timedelta`` for a
            TIMESTAMP ``ts``, an int of positions for an integral one.
        every: the tick spacing, in the same units as ``window``.
        v: which rows are events: a BOOLEAN Column or column name (NULL is not an event);
            by default every row is.
        eps: the relative error bound, in [0.0001, 1); default 0.01.
        alert_above, alert_below: thresholds (counts); see above.
        lateness: for an integral ``ts`` only: how many positions behind the largest one
            seen an event may still arrive (the watermark on positions).

    Returns:
        A streaming DataFrame to write in append mode (its rows are final; asking its
        ``writeStream`` for another output mode raises a ValueError saying so).

    Raises:
        ValueError: not a streaming DataFrame, no watermark on a TIMESTAMP ``ts``, a bad
            ``window``/``every``/``eps``/threshold, or a missing column.
        RuntimeError: under Spark Connect on Spark 3.5. (A Spark 4 Connect client runs it
            as :func:`sliding_window` with one count: the same rows, another state format,
            so a checkpoint does not move between a classic and a Connect run.)
    """
    keys = _keys(key, ts)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0.0001 <= eps < 1:
        raise ValueError(f"`eps` must be a number in [0.0001, 1), got {eps!r}")
    if lateness is not None and (isinstance(lateness, bool) or not isinstance(lateness, int)):
        raise TypeError(f"`lateness` must be an int of positions, got {lateness!r}")
    if v is not None and not isinstance(v, (str, Column)):
        raise TypeError(f"`v` must be a column name, a Column or None, got {v!r}")
    if getattr(events, "_jdf", None) is None:
        return _connect_sliding_counts(events, keys, ts, window, every, v, eps,
                                       _threshold(alert_above, "alert_above"),
                                       _threshold(alert_below, "alert_below"), lateness)
    if v is not None:
        # A column, not a filter: the rows that are not events still move the watermark.
        events = events.withColumn(_EVENT_COLUMN, F.col(v) if isinstance(v, str) else v)

    spark = events.sparkSession
    _require_built_line(spark)
    operator = _scala_object(spark, _OPERATOR_CLASS)
    try:
        counted = operator.fromPython(
            events._jdf, keys, ts, _span(window, "window"), _span(every, "every"), float(eps),
            _threshold(alert_above, "alert_above"), _threshold(alert_below, "alert_below"),
            None if lateness is None else str(lateness), None if v is None else _EVENT_COLUMN)
    except Exception as e:  # py4j or pyspark's conversion of the JVM's IllegalArgumentException
        _raise_operator_error(e, "sliding_counts")
    return _final_rows(DataFrame(counted, spark), "sliding_counts")


def sliding_window(
    events: DataFrame,
    key: Union[str, Sequence[str]],
    ts: str,
    window: Span,
    every: Span,
    aggregates: Sequence[LiveAggregate],
    lateness: Optional[int] = None,
) -> DataFrame:
    """Live per-key sliding aggregates, one row per key per tick with all of them.

    For each tick ``T`` (a multiple of ``every`` since the epoch, or since position 0) once
    the watermark has passed ``T``, emits one row per key whose window ending at ``T``
    (``[T - window, T]`` for a TIMESTAMP ``ts``; ``(T - window, T]`` positions for an
    integral one) holds an input of some aggregate: ``key..., window_end`` and one column
    per aggregate (see :mod:`windowsketch.live` for each family's type and guarantee). Rows
    are final. When every aggregate's window has emptied the key emits one last row (counts,
    sums and distinct counts 0, percentiles and moments NULL, top values empty) and, with
    nothing pending, its state is deleted, so the state holds only live keys. Late rows are
    dropped, as Spark drops them (``numRowsDroppedByWatermark``), as are rows where every
    aggregate's input is NULL or not an event.

    Args:
        events: a streaming DataFrame; with a TIMESTAMP ``ts`` it needs a watermark on it.
        key: a column name or a list of them.
        ts: a TIMESTAMP column, or an integral column of positions (then give ``lateness``).
        window, every: the window's length and the tick spacing: interval strings or
            ``datetime.timedelta`` for a TIMESTAMP ``ts``, ints of positions otherwise.
        aggregates: :func:`windowsketch.live.count`, ``sum``, ``distinct``, ``percentile``,
            ``moments``, ``top_k``, ``sample``, each under its own output name
            (``.alias(...)``).
        lateness: for an integral ``ts`` only, as in :func:`sliding_counts`.

    Returns:
        A streaming DataFrame to write in append mode (its rows are final; asking its
        ``writeStream`` for another output mode raises a ValueError saying so).

    Raises:
        ValueError: not a streaming DataFrame, no watermark, a bad window, ``every`` or
            parameter, a column of the wrong type, or two outputs with one name.
        RuntimeError: under Spark Connect on Spark 3.5 (Spark 4's Connect server runs it
            through windowsketch's relation plugin, which ``windowsketch.configure`` enables).
    """
    keys = _keys(key, ts)
    if isinstance(aggregates, LiveAggregate) or not isinstance(aggregates, (list, tuple)):
        raise TypeError(f"`aggregates` must be a list of windowsketch.live aggregates, got "
                        f"{aggregates!r}")
    if not aggregates or not all(isinstance(a, LiveAggregate) for a in aggregates):
        raise TypeError("`aggregates` must be a non-empty list of windowsketch.live aggregates "
                        "(live.count, live.sum, live.distinct, live.percentile, live.moments, "
                        "live.top_k, live.sample)")
    if lateness is not None and (isinstance(lateness, bool) or not isinstance(lateness, int)):
        raise TypeError(f"`lateness` must be an int of positions, got {lateness!r}")
    specs = []
    for i, aggregate in enumerate(aggregates):
        # A column, not a filter: rows without an input still move the watermark.
        column = F.col(aggregate.column) if isinstance(aggregate.column, str) else aggregate.column
        events = events.withColumn(_INPUT_COLUMN.format(i), column)
        specs.append(aggregate._spec(_INPUT_COLUMN.format(i)))
    spec = json.dumps({"key": keys, "ts": ts, "window": _span(window, "window"),
                       "every": _span(every, "every"),
                       "lateness": None if lateness is None else str(lateness),
                       "aggregates": specs})
    return _final_rows(_run_operator(events, spec, "sliding_window", _WINDOW_OPERATOR_CLASS),
                       "sliding_window")


def drop_duplicates_within(
    events: DataFrame,
    columns: Union[str, Sequence[str]],
    ts: str,
    window: Span,
    fpp: float = 0.01,
    lateness: Optional[int] = None,
) -> DataFrame:
    """The stream's rows but duplicates within a sliding window, with state bounded by a filter.

    A row is delivered unless a row with the same values of ``columns`` was delivered
    within ``window`` of its time: at most ``window`` before it, or after it when rows arrive
    out of order (``[t - window, t + window]`` for a TIMESTAMP ``ts``; fewer than ``window``
    positions apart for an integral one). So no two delivered rows of a value lie within one
    window of each other, and a value that keeps coming is delivered again once a window has
    passed since its last delivered row, as Spark's ``dropDuplicatesWithinWatermark`` does
    with its watermark delay. Rows are delivered as their micro-batch runs, earliest first
    within it; one that arrives after a later row of its value was delivered is dropped.
    Rows at or before the watermark are dropped as late, as Spark drops them.

    No duplicate is ever delivered. A new value is wrongly dropped when its fingerprint
    matches one of the values delivered within a window of it: probability at most ``fpp``
    while that is up to 2^32 values. The state is fingerprints of ``32 + ceil(log2(1/fpp))``
    bits with their last delivered times, in 1,024 state rows: about 7–10 bytes a value
    delivered within a window of the watermark, where Spark's de-duplication keeps a state
    row per value. Values compare as GROUP BY compares them, NULL equal to NULL.

    Args:
        events: a streaming DataFrame; with a TIMESTAMP ``ts`` it needs a watermark on it.
        columns: a column name or a list of them: the values duplicates share.
        ts: a TIMESTAMP column, or an integral column of positions (then give ``lateness``).
        window: an interval string or ``datetime.timedelta`` for a TIMESTAMP ``ts``, an int
            of positions otherwise.
        fpp: the probability that a new value is dropped, in [1e-9, 0.5].
        lateness: for an integral ``ts`` only: how many positions a row may arrive behind
            the largest one seen.

    Returns:
        A streaming DataFrame with the events' columns, to write in append mode. It keeps
        no watermark: for a stateful operator after it, set one again
        (``.withWatermark(ts, delay)``) and set
        ``spark.sql.streaming.statefulOperator.checkCorrectness.enabled`` to false. Spark
        cannot tell that the operator's ``flatMapGroupsWithState`` emits no row behind the
        watermark; every delivered row is after it, so the operator after it loses none.

    Raises:
        ValueError: not a streaming DataFrame, no watermark, a bad window or ``fpp``, a
            missing column or a MAP column.
        RuntimeError: under Spark Connect on Spark 3.5 (Spark 4's Connect server runs it
            through windowsketch's relation plugin, which ``windowsketch.configure`` enables).
    """
    names = [columns] if isinstance(columns, str) else columns
    if not isinstance(names, (list, tuple)) or not names or \
            not all(isinstance(c, str) for c in names):
        raise TypeError(f"`columns` must be a column name or a non-empty list of them, got "
                        f"{columns!r}")
    if not isinstance(ts, str):
        raise TypeError(f"`ts` must be a column name, got {ts!r}")
    if isinstance(fpp, bool) or not isinstance(fpp, (int, float)):
        raise TypeError(f"`fpp` must be a number in [1e-9, 0.5], got {fpp!r}")
    if lateness is not None and (isinstance(lateness, bool) or not isinstance(lateness, int)):
        raise TypeError(f"`lateness` must be an int of positions, got {lateness!r}")
    spec = json.dumps({"columns": list(names), "ts": ts, "window": _span(window, "window"),
                       "fpp": float(fpp),
                       "lateness": None if lateness is None else str(lateness)})
    return _final_rows(_run_operator(events, spec, "drop_duplicates_within",
                                     _DEDUPLICATION_CLASS), "drop_duplicates_within",
                       keyed=False)


def _run_operator(events: DataFrame, spec: str, name: str, operator_class: str) -> DataFrame:
    """The operator `name` built in the JVM from its JSON description: by its Scala object on
    a classic session, through the relation plugin under Spark 4 Connect."""
    spark = events.sparkSession
    if getattr(events, "_jdf", None) is None:
        if int(spark.version.split(".")[0]) < 4:
            raise RuntimeError(
                f"{name} under Spark Connect needs Spark 4 (its relation plugin); on "
                "Spark 3.5 run the streaming job with a classic session")
        return _connect_operator(events, spec, name)
    _require_built_line(spark)
    operator = _scala_object(spark, operator_class)
    try:
        built = operator.fromJson(events._jdf, spec)
    except Exception as e:
        _raise_operator_error(e, name)
    return DataFrame(built, spark)


def _connect_sliding_counts(events: DataFrame, keys: list[str], ts: str, window: Span,
                            every: Span, v: Union[Column, str, None], eps: float,
                            above: Optional[int], below: Optional[int],
                            lateness: Optional[int]) -> DataFrame:
    """sliding_counts for a Spark Connect client: sliding_window with one count, its struct
    flattened into sliding_counts' columns, and with thresholds one row per crossing."""
    name = "__windowsketch_count"
    count = live.count(F.lit(True) if v is None else v, eps, above, below).alias(name)
    try:
        windowed = sliding_window(events, keys, ts, window, every, [count], lateness)
    except ValueError as e:
        raise ValueError(str(e).replace(f"sliding_window: count `{name}`: ", "sliding_counts: ")
                         .replace("sliding_window", "sliding_counts")) from None
    except RuntimeError as e:
        raise RuntimeError(str(e).replace("sliding_window", "sliding_counts")) from None
    columns: list[Column] = [*map(F.col, keys), F.col("window_end"),
                             *(F.col(f"{name}.{field}").alias(field)
                               for field in ("estimate", "lower", "upper"))]
    if above is None and below is None:
        return _final_rows(windowed.select(*columns), "sliding_counts")
    crossings = F.array(*(F.struct(F.lit(alert).alias("alert"),
                                   F.col(f"{name}.{alert}").alias("crossing"))
                          for alert, threshold in (("above", above), ("below", below))
                          if threshold is not None))
    fired = F.explode(F.filter(crossings, lambda c: c["crossing"].isNotNull())).alias("fired")
    return _final_rows(windowed.select(*columns, fired).select(
        *keys, "window_end", "estimate", "lower", "upper", "fired.alert", "fired.crossing"),
        "sliding_counts")


def _connect_operator(events: DataFrame, spec: str, name: str) -> DataFrame:
    """Operator `name` for a Spark Connect client: a relation extension the server's plugin
    (``windowsketch.CONNECT_RELATION_PLUGIN``) turns into the operator. Its value holds the
    events' relation (field 1) and the JSON description (field 2), in protobuf's wire
    format. The schema is asked for at once, so bad arguments fail here, as on a classic
    session."""
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
    from pyspark.sql.connect.plan import LogicalPlan

    def field(number: int, payload: bytes) -> bytes:
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    class OperatorRelation(LogicalPlan):
        def plan(self, session: Any) -> Any:
            relation = self._create_proto_relation()
            assert self._child is not None
            child = self._child.plan(session).SerializeToString()
            relation.extension.type_url = _CONNECT_TYPE_URLS[name]
            relation.extension.value = field(1, child) + field(2, spec.encode())
            return relation

    events_plan: Any = getattr(events, "_plan")  # noqa: B009 - Connect's, not a column
    frame = ConnectDataFrame(OperatorRelation(events_plan),
                             events.sparkSession)  # type: ignore[arg-type]
    try:
        frame.schema
    except Exception as e:
        message = str(e)
        start = message.find(name)
        if start >= 0 and ("IllegalArgumentException" in message or "INTERNAL_ERROR" in message
                           or type(e).__name__ == "IllegalArgumentException"):
            raise ValueError(message[start:].splitlines()[0]) from None
        raise
    return frame


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


class _AppendOnly:
    """Mixed into a live operator's stream writer (classic or Connect): its rows are final,
    each emitted once, so append is the mode; Spark's own refusal of update mode names an
    operator the user never wrote."""

    _operator = "the live operator"
    _keyed = True

    def outputMode(self, outputMode: str) -> Any:  # noqa: N802 - Spark's name
        if isinstance(outputMode, str) and outputMode.strip().lower() != "append":
            if self._keyed:
                raise ValueError(
                    f"{self._operator} emits final rows, each (key, window_end) once: write it "
                    f"in append mode (the default), not {outputMode!r}; a sink that upserts can "
                    f"key on (key, window_end)")
            raise ValueError(
                f"{self._operator} delivers each row once, never revised: write it in append "
                f"mode (the default), not {outputMode!r}")
        return super().outputMode(outputMode)  # type: ignore[misc]


class _FinalRows:
    """Mixed into a live operator's DataFrame: its ``writeStream`` is append-only."""

    _operator = "the live operator"
    _keyed = True

    @property
    def writeStream(self) -> Any:  # noqa: N802 - Spark's name
        writer = super().writeStream  # type: ignore[misc]
        writer.__class__ = _mixed(_AppendOnly, type(writer))
        writer._operator = self._operator
        writer._keyed = self._keyed
        return writer


_MIXED_TYPES: dict[tuple[type, type], type] = {}


def _mixed(mixin: type, base: type) -> type:
    """`base` with `mixin` in front, one class per pair (the classic and Connect classes
    differ, and between Spark lines)."""
    key = (mixin, base)
    if key not in _MIXED_TYPES:
        _MIXED_TYPES[key] = type(base.__name__, (mixin, base), {})
    return _MIXED_TYPES[key]


def _final_rows(frame: DataFrame, operator: str, keyed: bool = True) -> DataFrame:
    """`frame`, its class kept as a base, with the append-only writer (`keyed`: its rows
    are one per key and window_end)."""
    frame.__class__ = _mixed(_FinalRows, type(frame))
    frame._operator = operator  # type: ignore[attr-defined]
    frame._keyed = keyed  # type: ignore[attr-defined]
    return frame


def _keys(key: Union[str, Sequence[str]], ts: str) -> list[str]:
    keys = [key] if isinstance(key, str) else list(key)
    if not keys or not all(isinstance(k, str) for k in keys):
        raise TypeError(f"`key` must be a column name or a list of them, got {key!r}")
    if not isinstance(ts, str):
        raise TypeError(f"`ts` must be a column name, got {ts!r}")
    return keys


def _raise_operator_error(error: Exception, name: str) -> NoReturn:
    """The JVM's refusal of the arguments as a ValueError; anything else as it came."""
    message = _jvm_message(error)
    if message is not None and message.startswith(name):
        raise ValueError(message) from None
    raise error


def _jvm_message(error: Exception) -> Optional[str]:
    from py4j.protocol import Py4JJavaError

    if isinstance(error, Py4JJavaError):
        return str(error.java_exception.getMessage())
    origin = getattr(error, "_origin", None)  # pyspark's CapturedException
    return None if origin is None else str(origin.getMessage())
