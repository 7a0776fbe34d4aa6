"""Answers from a table of stored window sketches with pandas alone: no Spark, no JVM.

    python examples/read_stored_sketches.py TABLE [AS_OF] [SUB_WINDOW_MINUTES]

TABLE is a Parquet file or directory with columns `host`, `hour` and `s`, the sketch of the
host's 404s in that hour, as Spark wrote it with

    CREATE TABLE hourly USING parquet AS
    SELECT host, date_trunc('HOUR', ts) AS hour,
           window_sketch(status = 404, ts, INTERVAL 1 HOUR) AS s
    FROM logs GROUP BY host, date_trunc('HOUR', ts)

For every host it merges the host's hourly sketches and prints the 404s in the hour (or the
last SUB_WINDOW_MINUTES) before AS_OF (an ISO time, UTC; default: the latest event stored),
with certified bounds: the table a dashboard backend would serve. A stored hour is used
whole, so with AS_OF the hours that start before it are read, and an AS_OF inside an hour
that has later events is refused: give one on an hour boundary.
"""
from __future__ import annotations

import sys
from datetime import datetime, timedelta

import pandas as pd

from windowsketch.sketch import WindowSketch, merge_column


def recent_404s(table: pd.DataFrame, as_of: datetime | None = None,
                sub_window: timedelta | None = None) -> pd.DataFrame:
    """Per host: (estimate, lower, upper) of its 404s in the window ending at `as_of`."""
    if as_of is not None:
        cutoff = pd.Timestamp(as_of)
        if table["hour"].dt.tz is not None and cutoff.tz is None:
            cutoff = cutoff.tz_localize("UTC")  # Spark's TIMESTAMP is UTC in Parquet
        table = table[table["hour"] < cutoff]
    merged: dict[str, WindowSketch] = {}
    for host, sketches in table.sort_values("hour").groupby("host")["s"]:
        sketch = merge_column(sketches)
        if sketch is not None:
            merged[str(host)] = sketch
    if as_of is None:  # one window end for every host: the latest event of any
        as_of = max(s.now for s in merged.values() if isinstance(s.now, datetime))
    rows = [(host, *sketch.bounds(as_of=as_of, sub_window=sub_window))
            for host, sketch in merged.items()]
    return (pd.DataFrame(rows, columns=["host", "estimate", "lower", "upper"])
            .sort_values(["estimate", "host"], ascending=[False, True], ignore_index=True))


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit(__doc__)
    as_of = datetime.fromisoformat(argv[1]) if len(argv) > 1 else None
    sub_window = timedelta(minutes=int(argv[2])) if len(argv) > 2 else None
    answers = recent_404s(pd.read_parquet(argv[0]), as_of, sub_window)
    print(answers[answers.upper > 0].to_string(index=False))


if __name__ == "__main__":
    main(sys.argv[1:])
