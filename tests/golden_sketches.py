"""What the golden sketch files (tests/golden/) hold and which queries their answers record,
shared by the JVM test (tests/spark/test_golden_sketches.py, which also writes them) and
the pure-Python reader's test (tests/python/test_sketch.py). No Spark here."""
from __future__ import annotations

import datetime
import json
import os
from typing import NamedTuple, Union

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden")
ANSWERS = os.path.join(GOLDEN, "answers.json")

Offset = Union[int, datetime.timedelta]


class Query(NamedTuple):
    """A recorded query: the window ends at the rows' largest ts (or pos) plus `after`,
    at `at` when given, or at the sketch's own now when both are None; it is `sub_window`
    long (None: the sketch's window)."""
    after: Offset | None = None
    sub_window: Offset | None = None
    at: int | None = None


HOUR = datetime.timedelta(hours=1)
TIME_QUERIES = [Query(), Query(after=2 * HOUR), Query(after=0 * HOUR, sub_window=HOUR),
                Query(after=6 * HOUR, sub_window=12 * HOUR)]
POSITION_QUERIES = [Query(), Query(after=300), Query(after=0, sub_window=100),
                    Query(after=600, sub_window=800)]


class Golden(NamedTuple):
    source: str       # the rows (SQL) the aggregate reads
    aggregate: str    # the SQL aggregate that writes the sketch
    column: str       # "ts" or "pos": the time axis of the queries
    queries: list[Query]
    # Bytes an earlier build wrote, kept to be read: the same rows now write the golden
    # file of this name (and reading these bytes and writing them back gives it too).
    rewritten_as: str | None = None


# name -> how it is written and queried. Rows come from fixed seeds, in a single
# partition, so the aggregate sees them in the same order, and writes the same bytes, on
# every run. Names starting "histogram" are kind 1, written by the core (no SQL aggregate
# writes that kind: it is live counts' state); their aggregate field gives (window, eps).
SKETCHES = {
    "positions": Golden("rows", "window_sketch(v, pos, 1000, 0.05)", "pos", POSITION_QUERIES),
    "time": Golden("rows", "window_sketch(v, ts, INTERVAL 1 DAY, 0.01)", "ts", TIME_QUERIES),
    # Keys 1 and 2 only: test_stored_sketches_merge_with_new_ones adds key 0.
    "merged": Golden("(SELECT key, window_sketch(v, ts, INTERVAL 1 DAY, 0.01) AS s FROM rows "
                     "WHERE key > 0 GROUP BY key)", "window_sketch_merge(s)", "ts",
                     TIME_QUERIES),
    "empty": Golden("rows WHERE false", "window_sketch(v, pos, 10)", "pos",
                    [Query(), Query(at=5)]),
    "one_event": Golden("(SELECT true AS v, CAST(17 AS BIGINT) AS pos)",
                        "window_sketch(v, pos, 5)", "pos", [Query(), Query(at=21), Query(at=22)]),
    "node_cap": Golden("(SELECT id % 3 = 0 AS v, id * 7 AS pos FROM range(0, 300000, 1, 1))",
                       "window_sketch(v, pos, 10000000, 0.0001)", "pos",
                       [Query(), Query(at=2100000, sub_window=40000),
                        Query(at=2100000, sub_window=1000000)]),
    # Distinct-count sketches (kind 3): the values are the rows' positions, folded.
    "distinct_time": Golden("rows", "window_distinct_sketch(pos % 1999, ts, INTERVAL 1 DAY, 0.05)",
                            "ts", TIME_QUERIES),
    # Kind 7 (sparse: 1,000 values at most over 4,096 registers); the same state in kind
    # 3, as every build before the sparse kind wrote it, in distinct_positions_kind3.
    "distinct_positions": Golden("rows",
                                 "window_distinct_sketch(pos * 31 % 9973, pos, 1000, 0.02)",
                                 "pos", POSITION_QUERIES),
    "distinct_positions_kind3": Golden("rows",
                                       "window_distinct_sketch(pos * 31 % 9973, pos, 1000, 0.02)",
                                       "pos", POSITION_QUERIES, rewritten_as="distinct_positions"),
    "distinct_merged": Golden("(SELECT key, window_distinct_sketch(pos % 1999, ts, INTERVAL 1 "
                              "DAY, 0.05) AS s FROM rows WHERE key > 0 GROUP BY key)",
                              "window_distinct_sketch_merge(s)", "ts", TIME_QUERIES),
    # Time-ordered histograms (kind 1) of the rows' events in pos order. Positions: a
    # level is full (ceil(k/2) + 1 buckets); time: microseconds, one day.
    "histogram_positions": Golden("rows", "1000, 0.1", "pos",
                                  [Query(), Query(after=0, sub_window=1000), Query(after=700)]),
    "histogram_time": Golden("rows", "86400000001, 0.05", "ts",
                             [Query(), Query(after=20 * HOUR), Query(after=23 * HOUR)]),
}


def golden_rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 4,000 rows (key, pos, v) over 3 keys: bursts, duplicates and a gap; the rows' ts
    is pos * 30 seconds."""
    rng = np.random.default_rng(20260101)
    n = 4000
    pos = np.cumsum(rng.choice([0, 1, 1, 2, 5], n))
    pos[n // 2:] += 50_000  # a gap longer than every window
    v = rng.random(n) < 0.3
    v[700:1100] = True
    v[3000:3050] = False
    keys = rng.integers(0, 3, n)
    return keys, pos, v


def golden_percentile_values(pos: np.ndarray) -> np.ndarray:
    """The values of the golden percentile sketches (tests/golden/percentile), one per
    golden row: ties, -0.0 and NaN."""
    values = np.where(pos % 97 == 0, np.nan, (pos * 37 % 1000) / 8.0 - 40.0)
    values[pos % 89 == 0] = -0.0
    return values


def micros_of_pos(pos: int) -> int:
    return int(pos) * 30 * 1_000_000


def is_time(name: str) -> bool:
    return SKETCHES[name].column == "ts"


def written_golden(name: str) -> str:
    """The golden file the rows of `name` write today (itself, unless an earlier build's)."""
    return SKETCHES[name].rewritten_as or name


def load_golden(name: str) -> bytes:
    with open(os.path.join(GOLDEN, f"{name}.bin"), "rb") as f:
        return f.read()


def load_answers() -> dict:
    with open(ANSWERS) as f:
        return json.load(f)


def golden_moments_values(pos: np.ndarray) -> np.ndarray:
    """The values of the golden moments sketches (tests/golden/moments), one per golden row:
    a sawtooth around 20, a run of equal values and a level shift of 10^6."""
    values = (pos * 37 % 1000) / 8.0 - 40.0
    values[(pos > 1000) & (pos < 1300)] = 7.25
    values[pos > 60_000] += 1e6
    return values


def golden_top_k_items(pos: np.ndarray) -> list[str]:
    """The items of the golden top-k sketches (tests/golden/top_k), one per golden row:
    Zipf-like paths, with one path flooding a stretch of rows."""
    items = [f"/p{(p * 37 % 101) % (1 + p % 17)}" for p in pos.tolist()]
    for i in range(1500, 1800):
        items[i] = "/flood"
    return items


def golden_filter_probes(sketch) -> list:
    """(value, as_of, sub_window) probes of a golden filter sketch (tests/golden/filter), on
    its axis and value type: the same for the JVM and the Python reader."""
    if sketch.value_type == "string":
        values = ["/", "/index.html", "/images/", "/absent"] + [f"/p{i}" for i in range(5)]
    else:
        values = [0, 5, 42, 96, 97, -1]
    if sketch.now is None:
        return [(v, None, None) for v in values[:2]]
    micro = sketch.time_unit == "microseconds"
    later = sketch.now + (datetime.timedelta(hours=6) if micro else 300)
    short = datetime.timedelta(hours=1) if micro else 50
    return [(v, w, s) for v in values for w, s in ((None, None), (later, None), (sketch.now, short))]


def golden_item_view(spark, view: str) -> None:
    """The golden rows with their items (golden_top_k_items) as a one-partition view `view`
    of (key, pos, ts, x), `ts` 30 seconds a position: what the sample and filter golden
    sketches are written from."""
    keys, pos, _ = golden_rows()
    items = golden_top_k_items(pos)
    spark.createDataFrame(
        [(int(k), int(p), datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=30 * int(p)), x)
         for k, p, x in zip(keys, pos, items)],
        "key INT, pos BIGINT, ts TIMESTAMP, x STRING").coalesce(1).createOrReplaceTempView(view)


def rewrite_golden(directory: str, written: dict, answers, spark_version: str) -> None:
    """Writes a family's golden sketches (name -> bytes) and their recorded answers
    (`answers(bytes)`) to `directory`: what `python tests/spark/test_<family>.py` runs."""
    import windowsketch

    os.makedirs(directory, exist_ok=True)
    for name, data in written.items():
        with open(os.path.join(directory, f"{name}.bin"), "wb") as out:
            out.write(data)
    with open(os.path.join(directory, "answers.json"), "w") as out:
        json.dump({"written_by": f"windowsketch {windowsketch.__version__} on Spark "
                                 f"{spark_version}", "format_version": 1,
                   "sketches": {name: answers(data) for name, data in sorted(written.items())}},
                  out, indent=1)
        out.write("\n")
