"""Read, query, merge and write stored sketch columns in pure Python: no Spark, no JVM.

A ``window_sketch``, ``window_distinct_sketch``, ``window_percentile_sketch``,
``window_moments_sketch``, ``window_top_k_sketch``, ``window_sample_sketch`` or
``window_filter_sketch`` column holds
bytes in the format of ``docs/format.md``. This package reads every kind the JVM writes, answers the same queries
as the ``*_estimate`` / ``*_bounds`` SQL functions with the same numbers, merges as the
``*_merge`` functions do and writes the bytes the JVM would write for the same state::

    from datetime import datetime, timedelta
    from windowsketch.sketch import WindowSketch

    s = WindowSketch.from_bytes(blob)          # a CountSketch, DistinctSketch, PercentileSketch...
    s.estimate()                                    # the window ending at the sketch's now
    s.bounds(as_of=datetime(2025, 6, 2), sub_window=timedelta(minutes=10))
    WindowSketch.from_bytes(p99_blob).estimate(0.99)  # a percentile sketch's p99
    WindowSketch.from_bytes(latency_blob).estimate("stddev")  # a moments sketch's deviation
    WindowSketch.from_bytes(paths_blob).top(10)          # a top-k sketch's 10 top items
    WindowSketch.from_bytes(sample_blob).sample(5)       # 5 rows of a sample sketch's window
    WindowSketch.from_bytes(users_blob).contains("ann")  # seen in a filter sketch's window?

Column helpers (:func:`estimate_column`, :func:`bounds_column`, :func:`percentile_column`,
:func:`moments_column`, :func:`sample_column`, :func:`contains_column`,
:func:`merge_column`) answer for a whole
pandas Series, pyarrow array or list of sketch bytes at once.

One module per family (``count``, ``distinct``, ``percentile``, ``moments``, ``top_k``,
``sample``, ``filter``),
each registering its format kinds with the shared reader in ``_base``. It needs only the
standard library; pandas and pyarrow are used when given.
"""
from __future__ import annotations

import importlib
import math
from collections.abc import Iterable
from typing import Any

from windowsketch.sketch._base import (AsOf, InvalidSketchBytes, Rebuild, SubWindow,
                                       WindowSketch)
from windowsketch.sketch.count import CountSketch
from windowsketch.sketch.distinct import DistinctSketch
from windowsketch.sketch.filter import FilterSketch
from windowsketch.sketch.moments import MomentsSketch
from windowsketch.sketch.percentile import Percentage, PercentileSketch
from windowsketch.sketch.sample import SampleSketch
from windowsketch.sketch.top_k import ItemCount, TopKSketch

__all__ = ["CountSketch", "DistinctSketch", "FilterSketch", "InvalidSketchBytes", "ItemCount",
           "MomentsSketch", "PercentileSketch", "SampleSketch", "TopKSketch", "WindowSketch",
           "bounds_column", "contains_column", "estimate_column", "merge_column",
           "moments_column", "percentile_column", "sample_column"]


def _values(column: Any, arrow_type: str = "int64") -> tuple[list[Any], Rebuild]:
    """The column's values as a list, and a function making a column of the same kind
    (a pandas Series on the same index, a pyarrow array of ``arrow_type``, a list) from
    answers."""
    library = type(column).__module__.split(".")[0]
    if library == "pandas":
        pd = importlib.import_module("pandas")
        index = column.index
        values = [None if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
                  else v for v in column.tolist()]
        dtype = {"int64": "Int64", "bool": "boolean"}.get(arrow_type, object)
        return values, lambda answers: pd.Series(answers, index=index, dtype=dtype)
    if library == "pyarrow":
        pa = importlib.import_module("pyarrow")
        types = {"int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_(),
                 "list<float64>": pa.list_(pa.float64())}
        if arrow_type == "inferred":  # lists of values of the sketches' own type
            return column.to_pylist(), lambda answers: pa.array(answers)
        return column.to_pylist(), lambda answers: pa.array(answers, type=types[arrow_type])
    return list(column), lambda answers: answers


def estimate_column(sketches: Any, as_of: AsOf | None = None,
                    sub_window: SubWindow | None = None) -> Any:
    """:meth:`WindowSketch.estimate` of every sketch of a column at one ``as_of``.

    ``sketches`` is a pandas Series, a pyarrow Array or ChunkedArray, or any iterable of
    sketch bytes; None (NULL) gives None. Returns the same kind of column: a pandas Series
    of dtype Int64 on the same index, a pyarrow int64 array, or a list.
    """
    values, rebuild = _values(sketches)
    # One sketch at a time: holding a column of read sketches makes the garbage collector
    # walk them all, over and over. Keywords: a percentile sketch's estimate needs a
    # percentage first, and says so.
    def estimate(blob: Any) -> Any:
        sketch: Any = WindowSketch.from_bytes(blob)  # each family's estimate
        return sketch.estimate(as_of=as_of, sub_window=sub_window)

    return rebuild([None if blob is None else estimate(blob) for blob in values])


def bounds_column(sketches: Any, as_of: AsOf | None = None,
                  sub_window: SubWindow | None = None) -> Any:
    """:meth:`WindowSketch.bounds` of every count sketch of a column, as (estimate, lower,
    upper) tuples (None for NULL): a pandas Series of objects on the same index, a pyarrow
    array of structs, or a list, like ``sketches``."""
    values, _ = _values(sketches)
    answers = [None if blob is None else WindowSketch.from_bytes(blob).bounds(as_of, sub_window)
               for blob in values]
    library = type(sketches).__module__.split(".")[0]
    if library == "pandas":
        pd = importlib.import_module("pandas")
        return pd.Series(answers, index=sketches.index, dtype=object)
    if library == "pyarrow":
        pa = importlib.import_module("pyarrow")
        names = ("estimate", "lower", "upper")
        return pa.array([None if b is None else dict(zip(names, b)) for b in answers],
                        type=pa.struct([(name, pa.int64()) for name in names]))
    return answers


def percentile_column(sketches: Any, percentage: Percentage, as_of: AsOf | None = None,
                      sub_window: SubWindow | None = None) -> Any:
    """:meth:`PercentileSketch.estimate` of every percentile sketch of a column at one
    ``as_of``: floats (lists of floats for several percentages), None for a NULL sketch or
    an empty window. Returns a pandas Series of objects on the same index, a pyarrow
    float64 (or list<float64>) array, or a list, like ``sketches``."""
    several = isinstance(percentage, (list, tuple))
    values, rebuild = _values(sketches, "list<float64>" if several else "float64")
    return rebuild([None if blob is None else
                    PercentileSketch.from_bytes(blob).estimate(percentage, as_of, sub_window)
                    for blob in values])


def moments_column(sketches: Any, statistic: str, as_of: AsOf | None = None,
                   sub_window: SubWindow | None = None) -> Any:
    """:meth:`MomentsSketch.estimate` of every moments sketch of a column at one ``as_of``:
    floats, None for a NULL sketch or where the SQL function gives NULL. Returns a pandas
    Series of objects on the same index, a pyarrow float64 array, or a list, like
    ``sketches``."""
    values, rebuild = _values(sketches, "float64")
    return rebuild([None if blob is None else
                    MomentsSketch.from_bytes(blob).estimate(statistic, as_of, sub_window)
                    for blob in values])


def sample_column(sketches: Any, k: int | None = None, as_of: AsOf | None = None,
                  sub_window: SubWindow | None = None) -> Any:
    """:meth:`SampleSketch.sample` of every sample sketch of a column at one ``as_of``:
    lists of values of their own Python type, None for a NULL sketch. Returns a pandas
    Series of objects on the same index, a pyarrow list array (its type inferred from the
    values), or a list, like ``sketches``."""
    values, rebuild = _values(sketches, "inferred")
    return rebuild([None if blob is None else
                    SampleSketch.from_bytes(blob).sample(k, as_of, sub_window)
                    for blob in values])


def contains_column(sketches: Any, value: Any, as_of: AsOf | None = None,
                    sub_window: SubWindow | None = None) -> Any:
    """:meth:`FilterSketch.contains` of one value in every filter sketch of a column at one
    ``as_of``: booleans, None for a NULL sketch. Returns a pandas Series (nullable boolean)
    on the same index, a pyarrow boolean array, or a list, like ``sketches``."""
    values, rebuild = _values(sketches, "bool")
    return rebuild([None if blob is None else
                    FilterSketch.from_bytes(blob).contains(value, as_of, sub_window)
                    for blob in values])


def merge_column(sketches: Iterable[Any]) -> WindowSketch | None:
    """The merge of every sketch of a column, in order, NULLs skipped, as
    ``window_sketch_merge`` over the column in one partition: None if all are NULL."""
    values, _ = _values(sketches)
    merged: WindowSketch | None = None
    for blob in values:
        if blob is None:
            continue
        sketch = WindowSketch.from_bytes(blob)
        if merged is None:
            merged = sketch._copy()
        else:
            merged._merge_in(sketch)
    return merged
