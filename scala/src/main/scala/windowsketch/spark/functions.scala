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
}
