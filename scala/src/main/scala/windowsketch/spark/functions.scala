package windowsketch.spark

import org.apache.spark.sql.Column
import org.apache.spark.sql.functions.{call_function, col, lit}

/**
 * The DataFrame API of windowsketch for Scala and Java, mirroring the SQL functions.
 * Columns are built by function name, so they need the functions registered
 * (`WindowSketchExtensions` or `WindowSketch.register`) and work under Spark Connect too.
 */
// scalastyle:off object.name
object functions {
// scalastyle:on object.name

  /**
   * The approximate number of rows whose `v` is true (or 1) in the sliding window ending at
   * the largest `ts` seen, with |result - exact| <= eps * exact. Use it over a running frame,
   * `approx_window_count(...).over(Window.partitionBy(k).orderBy(ts))`, for a count per row.
   *
   * @param v      BOOLEAN or 0/1 integral column: the events
   * @param ts     TIMESTAMP, TIMESTAMP_NTZ, DATE or integral column: the time or position
   * @param window for an integral `ts` a positive integer; otherwise a day-time interval
   *               literal or an interval string such as "10 minutes"
   * @param eps    the relative error bound, in [0.0001, 1)
   */
  def approx_window_count(v: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_count", v, ts, window, eps)

  def approx_window_count(v: Column, ts: Column, window: Column): Column =
    call_function("approx_window_count", v, ts, window)

  def approx_window_count(v: String, ts: String, window: Any, eps: Double): Column =
    approx_window_count(col(v), col(ts), lit(window), lit(eps))

  def approx_window_count(v: String, ts: String, window: Any): Column =
    approx_window_count(col(v), col(ts), lit(window))

  /** A mergeable window sketch (BINARY) of the group's events; see `window_sketch`. */
  def window_sketch(v: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("window_sketch", v, ts, window, eps)

  def window_sketch(v: Column, ts: Column, window: Column): Column =
    call_function("window_sketch", v, ts, window)

  def window_sketch(v: String, ts: String, window: Any, eps: Double): Column =
    window_sketch(col(v), col(ts), lit(window), lit(eps))

  /** Merges the group's window sketches into one; see `window_sketch_merge`. */
  def window_sketch_merge(sketch: Column): Column = call_function("window_sketch_merge", sketch)

  def window_sketch_merge(sketch: String): Column = window_sketch_merge(col(sketch))

  /** The sketch's count in its window ending at its largest ts. */
  def window_sketch_estimate(sketch: Column): Column =
    call_function("window_sketch_estimate", sketch)

  /** The sketch's count in its window ending at `asOf`. */
  def window_sketch_estimate(sketch: Column, asOf: Column): Column =
    call_function("window_sketch_estimate", sketch, asOf)

  /** The sketch's count in the window of length `subWindow` ending at `asOf`. */
  def window_sketch_estimate(sketch: Column, asOf: Column, subWindow: Column): Column =
    call_function("window_sketch_estimate", sketch, asOf, subWindow)

  /** STRUCT(estimate, lower, upper) of the sketch's count; see `window_sketch_bounds`. */
  def window_sketch_bounds(sketch: Column): Column =
    call_function("window_sketch_bounds", sketch)

  def window_sketch_bounds(sketch: Column, asOf: Column): Column =
    call_function("window_sketch_bounds", sketch, asOf)

  def window_sketch_bounds(sketch: Column, asOf: Column, subWindow: Column): Column =
    call_function("window_sketch_bounds", sketch, asOf, subWindow)

  /** approx_window_count with certified bounds: STRUCT(estimate, lower, upper). */
  def approx_window_count_bounds(v: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_count_bounds", v, ts, window, eps)

  def approx_window_count_bounds(v: Column, ts: Column, window: Column): Column =
    call_function("approx_window_count_bounds", v, ts, window)

  /**
   * The approximate sum of the non-negative integral `value`s in the sliding window, with
   * |result - exact| <= eps * exact; see `approx_window_sum`.
   */
  def approx_window_sum(value: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_sum", value, ts, window, eps)

  def approx_window_sum(value: Column, ts: Column, window: Column): Column =
    call_function("approx_window_sum", value, ts, window)

  def approx_window_sum(value: String, ts: String, window: Any, eps: Double): Column =
    approx_window_sum(col(value), col(ts), lit(window), lit(eps))

  /**
   * The approximate number of distinct non-NULL `x` in the sliding window (sliding
   * HyperLogLog++, relative standard error about `rsd`); see `approx_window_count_distinct`.
   */
  def approx_window_count_distinct(x: Column, ts: Column, window: Column, rsd: Column): Column =
    call_function("approx_window_count_distinct", x, ts, window, rsd)

  def approx_window_count_distinct(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_count_distinct", x, ts, window)

  def approx_window_count_distinct(x: String, ts: String, window: Any, rsd: Double): Column =
    approx_window_count_distinct(col(x), col(ts), lit(window), lit(rsd))

  /**
   * The percentile of the non-NULL `x` in the sliding window, as `percentile_approx` defines
   * it, a value of the window whose rank is within eps * n of percentage * n; `percentage` a
   * constant DOUBLE in [0, 1] or an array of them (then an array result); see
   * `approx_window_percentile`.
   */
  def approx_window_percentile(x: Column, ts: Column, window: Column, percentage: Column,
      eps: Column): Column =
    call_function("approx_window_percentile", x, ts, window, percentage, eps)

  def approx_window_percentile(x: Column, ts: Column, window: Column, percentage: Column): Column =
    call_function("approx_window_percentile", x, ts, window, percentage)

  def approx_window_percentile(x: String, ts: String, window: Any, percentage: Double,
      eps: Double): Column =
    approx_window_percentile(col(x), col(ts), lit(window), lit(percentage), lit(eps))

  def approx_window_percentile(x: String, ts: String, window: Any, percentages: Seq[Double],
      eps: Double): Column =
    approx_window_percentile(col(x), col(ts), lit(window),
      org.apache.spark.sql.functions.array(percentages.map(p => lit(p)): _*), lit(eps))

  /** A mergeable distinct-count sketch (BINARY) of the group's values; see `window_distinct_sketch`. */
  def window_distinct_sketch(x: Column, ts: Column, window: Column, rsd: Column): Column =
    call_function("window_distinct_sketch", x, ts, window, rsd)

  def window_distinct_sketch(x: Column, ts: Column, window: Column): Column =
    call_function("window_distinct_sketch", x, ts, window)

  def window_distinct_sketch(x: String, ts: String, window: Any, rsd: Double): Column =
    window_distinct_sketch(col(x), col(ts), lit(window), lit(rsd))

  /** Merges the group's distinct-count sketches into one; see `window_distinct_sketch_merge`. */
  def window_distinct_sketch_merge(sketch: Column): Column =
    call_function("window_distinct_sketch_merge", sketch)

  def window_distinct_sketch_merge(sketch: String): Column = window_distinct_sketch_merge(col(sketch))

  /** The sketch's distinct count in its window ending at its largest ts. */
  def window_distinct_sketch_estimate(sketch: Column): Column =
    call_function("window_distinct_sketch_estimate", sketch)

  /** The sketch's distinct count in its window ending at `asOf`. */
  def window_distinct_sketch_estimate(sketch: Column, asOf: Column): Column =
    call_function("window_distinct_sketch_estimate", sketch, asOf)

  /** The sketch's distinct count in the window of length `subWindow` ending at `asOf`. */
  def window_distinct_sketch_estimate(sketch: Column, asOf: Column, subWindow: Column): Column =
    call_function("window_distinct_sketch_estimate", sketch, asOf, subWindow)

  /**
   * [[approx_window_percentile]] with certified bounds: a struct (estimate, lower, upper) of
   * values of the window with lower <= exact <= upper; see `approx_window_percentile_bounds`.
   */
  def approx_window_percentile_bounds(x: Column, ts: Column, window: Column, percentage: Column,
      eps: Column): Column =
    call_function("approx_window_percentile_bounds", x, ts, window, percentage, eps)

  def approx_window_percentile_bounds(x: Column, ts: Column, window: Column,
      percentage: Column): Column =
    call_function("approx_window_percentile_bounds", x, ts, window, percentage)

  /** A mergeable percentile sketch (BINARY) of the group's values; see `window_percentile_sketch`. */
  def window_percentile_sketch(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("window_percentile_sketch", x, ts, window, eps)

  def window_percentile_sketch(x: Column, ts: Column, window: Column): Column =
    call_function("window_percentile_sketch", x, ts, window)

  def window_percentile_sketch(x: String, ts: String, window: Any, eps: Double): Column =
    window_percentile_sketch(col(x), col(ts), lit(window), lit(eps))

  /** Merges the group's percentile sketches into one; see `window_percentile_sketch_merge`. */
  def window_percentile_sketch_merge(sketch: Column): Column =
    call_function("window_percentile_sketch_merge", sketch)

  def window_percentile_sketch_merge(sketch: String): Column =
    window_percentile_sketch_merge(col(sketch))

  /** The sketch's percentile (a DOUBLE, or an array) in its window ending at its largest ts. */
  def window_percentile_sketch_estimate(sketch: Column, percentage: Column): Column =
    call_function("window_percentile_sketch_estimate", sketch, percentage)

  /** The sketch's percentile in its window ending at `asOf`. */
  def window_percentile_sketch_estimate(sketch: Column, percentage: Column, asOf: Column): Column =
    call_function("window_percentile_sketch_estimate", sketch, percentage, asOf)

  /** The sketch's percentile in the window of length `subWindow` ending at `asOf`. */
  def window_percentile_sketch_estimate(sketch: Column, percentage: Column, asOf: Column,
      subWindow: Column): Column =
    call_function("window_percentile_sketch_estimate", sketch, percentage, asOf, subWindow)

  /**
   * The average of the non-NULL `x` in the sliding window ending at the largest `ts` seen,
   * within eps times the window's standard deviation; see `approx_window_avg`.
   */
  def approx_window_avg(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_avg", x, ts, window, eps)

  def approx_window_avg(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_avg", x, ts, window)

  def approx_window_avg(x: String, ts: String, window: Any, eps: Double): Column =
    approx_window_avg(col(x), col(ts), lit(window), lit(eps))

  /** The sample variance in the sliding window, within eps relative error; see `approx_window_variance`. */
  def approx_window_variance(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_variance", x, ts, window, eps)

  def approx_window_variance(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_variance", x, ts, window)

  def approx_window_variance(x: String, ts: String, window: Any, eps: Double): Column =
    approx_window_variance(col(x), col(ts), lit(window), lit(eps))

  /** The sample variance (as `var_samp`); see `approx_window_var_samp`. */
  def approx_window_var_samp(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_var_samp", x, ts, window, eps)

  def approx_window_var_samp(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_var_samp", x, ts, window)

  /** The population variance (as `var_pop`); see `approx_window_var_pop`. */
  def approx_window_var_pop(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_var_pop", x, ts, window, eps)

  def approx_window_var_pop(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_var_pop", x, ts, window)

  /** The sample standard deviation, within eps / 2 relative error; see `approx_window_stddev`. */
  def approx_window_stddev(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_stddev", x, ts, window, eps)

  def approx_window_stddev(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_stddev", x, ts, window)

  def approx_window_stddev(x: String, ts: String, window: Any, eps: Double): Column =
    approx_window_stddev(col(x), col(ts), lit(window), lit(eps))

  /** The sample standard deviation (as `stddev_samp`); see `approx_window_stddev_samp`. */
  def approx_window_stddev_samp(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_stddev_samp", x, ts, window, eps)

  def approx_window_stddev_samp(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_stddev_samp", x, ts, window)

  /** The population standard deviation (as `stddev_pop`); see `approx_window_stddev_pop`. */
  def approx_window_stddev_pop(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_stddev_pop", x, ts, window, eps)

  def approx_window_stddev_pop(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_stddev_pop", x, ts, window)

  /** [[approx_window_avg]] with certified bounds: STRUCT(estimate, lower, upper). */
  def approx_window_avg_bounds(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_avg_bounds", x, ts, window, eps)

  def approx_window_avg_bounds(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_avg_bounds", x, ts, window)

  /** [[approx_window_stddev]] with certified bounds: STRUCT(estimate, lower, upper). */
  def approx_window_stddev_bounds(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("approx_window_stddev_bounds", x, ts, window, eps)

  def approx_window_stddev_bounds(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_stddev_bounds", x, ts, window)

  /** A mergeable moments sketch (BINARY) of the group's values; see `window_moments_sketch`. */
  def window_moments_sketch(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("window_moments_sketch", x, ts, window, eps)

  def window_moments_sketch(x: Column, ts: Column, window: Column): Column =
    call_function("window_moments_sketch", x, ts, window)

  def window_moments_sketch(x: String, ts: String, window: Any, eps: Double): Column =
    window_moments_sketch(col(x), col(ts), lit(window), lit(eps))

  /** Merges the group's moments sketches into one; see `window_moments_sketch_merge`. */
  def window_moments_sketch_merge(sketch: Column): Column =
    call_function("window_moments_sketch_merge", sketch)

  def window_moments_sketch_merge(sketch: String): Column = window_moments_sketch_merge(col(sketch))

  /**
   * One statistic of the sketch ("avg", "var_samp" or "variance", "var_pop", "stddev_samp"
   * or "stddev", "stddev_pop") in its window ending at its largest ts.
   */
  def window_moments_sketch_estimate(sketch: Column, statistic: String): Column =
    call_function("window_moments_sketch_estimate", sketch, lit(statistic))

  /** The statistic in the sketch's window ending at `asOf`. */
  def window_moments_sketch_estimate(sketch: Column, statistic: String, asOf: Column): Column =
    call_function("window_moments_sketch_estimate", sketch, lit(statistic), asOf)

  /** The statistic in the window of length `subWindow` ending at `asOf`. */
  def window_moments_sketch_estimate(sketch: Column, statistic: String, asOf: Column,
      subWindow: Column): Column =
    call_function("window_moments_sketch_estimate", sketch, lit(statistic), asOf, subWindow)

  /** STRUCT(estimate, lower, upper) of the statistic; see `window_moments_sketch_bounds`. */
  def window_moments_sketch_bounds(sketch: Column, statistic: String): Column =
    call_function("window_moments_sketch_bounds", sketch, lit(statistic))

  def window_moments_sketch_bounds(sketch: Column, statistic: String, asOf: Column): Column =
    call_function("window_moments_sketch_bounds", sketch, lit(statistic), asOf)

  def window_moments_sketch_bounds(sketch: Column, statistic: String, asOf: Column,
      subWindow: Column): Column =
    call_function("window_moments_sketch_bounds", sketch, lit(statistic), asOf, subWindow)

  /**
   * The `k` most frequent non-NULL `x` of the sliding window with certified counts:
   * ARRAY<STRUCT<item, count, lower, upper>>; see `approx_window_top_k`.
   */
  def approx_window_top_k(x: Column, ts: Column, window: Column, k: Column, eps: Column): Column =
    call_function("approx_window_top_k", x, ts, window, k, eps)

  def approx_window_top_k(x: Column, ts: Column, window: Column, k: Column): Column =
    call_function("approx_window_top_k", x, ts, window, k)

  def approx_window_top_k(x: String, ts: String, window: Any, k: Int, eps: Double): Column =
    approx_window_top_k(col(x), col(ts), lit(window), lit(k), lit(eps))

  /**
   * Up to `k` values of `x` drawn uniformly from the sliding window's non-NULL rows, in time
   * order: ARRAY of `x`'s type; see `approx_window_sample`.
   */
  def approx_window_sample(x: Column, ts: Column, window: Column, k: Column, seed: Column): Column =
    call_function("approx_window_sample", x, ts, window, k, seed)

  def approx_window_sample(x: Column, ts: Column, window: Column, k: Column): Column =
    call_function("approx_window_sample", x, ts, window, k)

  def approx_window_sample(x: String, ts: String, window: Any, k: Int, seed: Long): Column =
    approx_window_sample(col(x), col(ts), lit(window), lit(k), lit(seed))

  /** A mergeable sample sketch (BINARY) of the group's rows; see `window_sample_sketch`. */
  def window_sample_sketch(x: Column, ts: Column, window: Column, k: Column, seed: Column): Column =
    call_function("window_sample_sketch", x, ts, window, k, seed)

  def window_sample_sketch(x: Column, ts: Column, window: Column, k: Column): Column =
    call_function("window_sample_sketch", x, ts, window, k)

  def window_sample_sketch(x: String, ts: String, window: Any, k: Int, seed: Long): Column =
    window_sample_sketch(col(x), col(ts), lit(window), lit(k), lit(seed))

  /** Merges the group's sample sketches into one; see `window_sample_sketch_merge`. */
  def window_sample_sketch_merge(sketch: Column): Column =
    call_function("window_sample_sketch_merge", sketch)

  def window_sample_sketch_merge(sketch: String): Column = window_sample_sketch_merge(col(sketch))

  /** The sketch's sample (values as text) of its window ending at its largest ts. */
  def window_sample_sketch_get(sketch: Column): Column =
    call_function("window_sample_sketch_get", sketch)

  /** The sketch's sample of `k` values. */
  def window_sample_sketch_get(sketch: Column, k: Int): Column =
    call_function("window_sample_sketch_get", sketch, lit(k))

  /** The sketch's sample of `k` values of its window ending at `asOf`. */
  def window_sample_sketch_get(sketch: Column, k: Int, asOf: Column): Column =
    call_function("window_sample_sketch_get", sketch, lit(k), asOf)

  /** The sketch's sample of `k` values of the window of length `subWindow` ending at `asOf`. */
  def window_sample_sketch_get(sketch: Column, k: Int, asOf: Column, subWindow: Column): Column =
    call_function("window_sample_sketch_get", sketch, lit(k), asOf, subWindow)

  /**
   * Whether each row's `x` occurred earlier in the sliding window ending at its ts, in a
   * running frame ordered by ts: BOOLEAN; see `approx_window_seen`.
   */
  def approx_window_seen(x: Column, ts: Column, window: Column, fpp: Column): Column =
    call_function("approx_window_seen", x, ts, window, fpp)

  def approx_window_seen(x: Column, ts: Column, window: Column): Column =
    call_function("approx_window_seen", x, ts, window)

  def approx_window_seen(x: String, ts: String, window: Any, fpp: Double): Column =
    approx_window_seen(col(x), col(ts), lit(window), lit(fpp))

  /** A mergeable filter sketch (BINARY) of the group's values; see `window_filter_sketch`. */
  def window_filter_sketch(x: Column, ts: Column, window: Column, fpp: Column): Column =
    call_function("window_filter_sketch", x, ts, window, fpp)

  def window_filter_sketch(x: Column, ts: Column, window: Column): Column =
    call_function("window_filter_sketch", x, ts, window)

  def window_filter_sketch(x: String, ts: String, window: Any, fpp: Double): Column =
    window_filter_sketch(col(x), col(ts), lit(window), lit(fpp))

  /** Merges the group's filter sketches into one; see `window_filter_sketch_merge`. */
  def window_filter_sketch_merge(sketch: Column): Column =
    call_function("window_filter_sketch_merge", sketch)

  def window_filter_sketch_merge(sketch: String): Column = window_filter_sketch_merge(col(sketch))

  /** Whether `value` occurred in the sketch's window ending at its largest ts. */
  def window_filter_contains(sketch: Column, value: Column): Column =
    call_function("window_filter_contains", sketch, value)

  /** Whether `value` occurred in the sketch's window ending at `asOf`. */
  def window_filter_contains(sketch: Column, value: Column, asOf: Column): Column =
    call_function("window_filter_contains", sketch, value, asOf)

  /** Whether `value` occurred in the window of length `subWindow` ending at `asOf`. */
  def window_filter_contains(sketch: Column, value: Column, asOf: Column, subWindow: Column): Column =
    call_function("window_filter_contains", sketch, value, asOf, subWindow)

  /** A mergeable top-k sketch (BINARY) of the group's values; see `window_top_k_sketch`. */
  def window_top_k_sketch(x: Column, ts: Column, window: Column, eps: Column): Column =
    call_function("window_top_k_sketch", x, ts, window, eps)

  def window_top_k_sketch(x: Column, ts: Column, window: Column): Column =
    call_function("window_top_k_sketch", x, ts, window)

  def window_top_k_sketch(x: String, ts: String, window: Any, eps: Double): Column =
    window_top_k_sketch(col(x), col(ts), lit(window), lit(eps))

  /** Merges the group's top-k sketches into one; see `window_top_k_sketch_merge`. */
  def window_top_k_sketch_merge(sketch: Column): Column =
    call_function("window_top_k_sketch_merge", sketch)

  def window_top_k_sketch_merge(sketch: String): Column = window_top_k_sketch_merge(col(sketch))

  /** The sketch's `k` top items (as text) in its window ending at its largest ts. */
  def window_top_k_sketch_estimate(sketch: Column, k: Int): Column =
    call_function("window_top_k_sketch_estimate", sketch, lit(k))

  /** The sketch's `k` top items in its window ending at `asOf`. */
  def window_top_k_sketch_estimate(sketch: Column, k: Int, asOf: Column): Column =
    call_function("window_top_k_sketch_estimate", sketch, lit(k), asOf)

  /** The sketch's `k` top items in the window of length `subWindow` ending at `asOf`. */
  def window_top_k_sketch_estimate(sketch: Column, k: Int, asOf: Column, subWindow: Column): Column =
    call_function("window_top_k_sketch_estimate", sketch, lit(k), asOf, subWindow)
}
