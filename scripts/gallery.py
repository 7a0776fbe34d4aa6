"""Makes the site's gallery: plots of real runs on local Spark, written to docs/gallery/.

    python scripts/gallery.py           # about a minute on 2 cores

1. nasa_bounds.png: 10-minute request counts at every request of the NASA log (1 August
   1995), approximate and exact, with the certified bounds as a band.
2. error_vs_eps.png: on the same rows, the worst and mean relative error over every row for
   each eps, against the guarantee, and the largest histogram a running frame keeps.
3. state_vs_window.png: bytes of each family's sketch of a window holding N rows (all
   values distinct, the hardest case), against what an exact window keeps.

Each figure's numbers are also printed, so a run can be checked against its picture.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "gallery")
FIGURES = ("nasa_bounds.png", "error_vs_eps.png", "state_vs_window.png")

EPS_SWEEP = (0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)
WINDOW_ROWS = (10**2, 10**3, 10**4, 10**5, 10**6)


def nasa_requests(spark):
    from windowsketch.demo import load_log

    load_log(spark).createOrReplaceTempView("nasa")


def nasa_bounds(spark, plt) -> None:
    rows = spark.sql("""
        SELECT ts, b.estimate, b.lower, b.upper, exact FROM (
          SELECT ts,
                 approx_window_count_bounds(true, ts, INTERVAL 10 MINUTES, 0.05)
                   OVER (ORDER BY ts) AS b,
                 count(1) OVER (ORDER BY ts RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING
                                AND CURRENT ROW) AS exact
          FROM nasa)
        WHERE ts BETWEEN TIMESTAMP'1995-08-01 12:00:00' AND TIMESTAMP'1995-08-01 13:00:00'
        ORDER BY ts""").collect()
    times = [r.ts for r in rows]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    ax.fill_between(times, [r.lower for r in rows], [r.upper for r in rows], step="post",
                    color="tab:blue", alpha=0.25, label="certified bounds (lower, upper)")
    ax.step(times, [r.exact for r in rows], where="post", color="black", lw=1,
            label="exact (RANGE frame)")
    ax.step(times, [r.estimate for r in rows], where="post", color="tab:blue", lw=1,
            ls="--", label="approx_window_count, eps 0.05")
    ax.set_xlabel("request time, 1 August 1995 (UTC)")
    ax.set_ylabel("requests in the last 10 minutes")
    ax.set_title("NASA-HTTP log, 12:00-13:00: every request's 10-minute count")
    ax.legend(loc="upper left", fontsize=8)
    fig.autofmt_xdate()
    save(fig, "nasa_bounds.png")
    outside = sum(not (r.lower <= r.exact <= r.upper) for r in rows)
    print(f"nasa_bounds: {len(rows)} rows, exact outside the bounds on {outside}")


def error_vs_eps(spark, plt) -> None:
    from windowsketch.demo import sketch_sizes

    times = [r[0] for r in spark.sql(
        "SELECT unix_micros(ts) FROM nasa ORDER BY ts").collect()]
    worst, mean, sizes = [], [], []
    for eps in EPS_SWEEP:
        r = spark.sql(f"""
            SELECT max(abs(a - e) / e) AS worst, avg(abs(a - e) / e) AS mean FROM (
              SELECT approx_window_count(true, ts, INTERVAL 10 MINUTES, {eps})
                       OVER (ORDER BY ts) AS a,
                     count(1) OVER (ORDER BY ts RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING
                                    AND CURRENT ROW) AS e
              FROM nasa)""").first()
        size, _ = sketch_sizes(spark, times, [True] * len(times), eps)
        worst.append(r.worst)
        mean.append(r.mean)
        sizes.append(size)
        print(f"error_vs_eps: eps {eps}: worst {r.worst:.5f}, mean {r.mean:.6f}, "
              f"sketch {size} bytes")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.loglog(EPS_SWEEP, EPS_SWEEP, color="black", lw=1, label="guarantee: error <= eps")
    ax.loglog(EPS_SWEEP, [max(w, 1e-7) for w in worst], "o-", label="worst row")
    ax.loglog(EPS_SWEEP, [max(m, 1e-7) for m in mean], "s-", label="mean over rows")
    ax.set_xlabel("eps")
    ax.set_ylabel("|approx - exact| / exact")
    ax.invert_xaxis()
    ax.set_title("10-minute request counts, NASA log (30,969 rows)")
    side = ax.twinx()
    side.semilogx(EPS_SWEEP, sizes, "^:", color="tab:gray", label="sketch bytes")
    side.set_ylabel("largest histogram over the day (bytes)")
    lines = ax.get_legend_handles_labels()
    extra = side.get_legend_handles_labels()
    ax.legend(lines[0] + extra[0], lines[1] + extra[1], loc="lower left", fontsize=8)
    save(fig, "error_vs_eps.png")


def state_vs_window(spark, plt) -> None:
    families = {
        "count (window_sketch, eps 0.01)": "window_sketch(true, id, {w})",
        "distinct (window_distinct_sketch, rsd 0.05)": "window_distinct_sketch(id, id, {w})",
        "moments (window_moments_sketch, eps 0.01)": "window_moments_sketch(id, id, {w})",
        "top-k (window_top_k_sketch, eps 0.01)": "window_top_k_sketch(id, id, {w})",
        "percentile (window_percentile_sketch, eps 0.01)": "window_percentile_sketch(id, id, {w})",
    }
    sizes: dict[str, list[int]] = {name: [] for name in families}
    for w in WINDOW_ROWS:
        # The window's rows, newest at the end: the sketch of its last w positions.
        row = spark.range(w).selectExpr(
            *[f"length({expr.format(w=w)})" for expr in families.values()]).first()
        for name, size in zip(families, row):
            sizes[name].append(size)
        print(f"state_vs_window: {w} rows: " + ", ".join(
            f"{name.split(' ')[0]} {size}" for name, size in zip(families, row)))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.loglog(WINDOW_ROWS, [8 * w for w in WINDOW_ROWS], color="black", lw=1,
              label="exact count: a timestamp (8 bytes) a row")
    ax.loglog(WINDOW_ROWS, [16 * w for w in WINDOW_ROWS], color="black", lw=1, ls="--",
              label="exact statistics: timestamp and value, 16 bytes a row")
    for name, values in sizes.items():
        ax.loglog(WINDOW_ROWS, values, "o-", label=name)
    ax.set_xlabel("rows in the window (all values distinct)")
    ax.set_ylabel("serialized sketch bytes")
    ax.set_title("State against window length")
    ax.legend(fontsize=7)
    save(fig, "state_vs_window.png")


def save(fig, name: str) -> None:
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, name), dpi=110)


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pyspark.sql import SparkSession

    import windowsketch

    os.makedirs(OUT, exist_ok=True)
    spark = (windowsketch.configure(SparkSession.builder.master("local[2]"))
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    try:
        nasa_requests(spark)
        nasa_bounds(spark, plt)
        error_vs_eps(spark, plt)
        state_vs_window(spark, plt)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
