package windowsketch.spark

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.functions.{col, lit}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import windowsketch.core.{LiveCount, LiveCountSpec, LiveRow}

/**
 * Live sliding counts on a stream: for each key and each tick T (a multiple of `every`)
 * once the watermark has passed T, the approximate count of events in the window ending at
 * T, final because every event at or before T that is not late has arrived. A key's state
 * is dropped once its window is empty and nothing is pending, after one last row with 0.
 *
 * Built on `flatMapGroupsWithState` with event-time timeouts, which every supported Spark
 * line has in the same form; a key needs one timer (its next tick), and the per-key state
 * is one [[LiveCount]] in bytes: its histogram and the events after the watermark.
 * Output mode Append: rows are final.
 */
object SlidingCounts {
  private val Name = "sliding_counts"

  /**
   * @param events      a streaming DataFrame with the key columns and `ts`
   * @param ts          a TIMESTAMP column carrying a watermark, or an integral column of
   *                    positions (then `lateness` says how far behind the largest position
   *                    an event may arrive)
   * @param window      an interval string for a TIMESTAMP `ts` (inclusive `[T - window, T]`),
   *                    a number of positions otherwise (`(T - window, T]`)
   * @param every       the tick spacing, in the same units as `window`
   * @param isEvent     a BOOLEAN column saying which rows to count (NULL: not an event);
   *                    by default every row
   */
  def apply(
      events: DataFrame,
      keys: Seq[String],
      ts: String,
      window: String,
      every: String,
      eps: Double,
      alertAbove: Option[Long] = None,
      alertBelow: Option[Long] = None,
      lateness: Option[String] = None,
      isEvent: Option[String] = None): DataFrame = {
    val in = new LiveInput(Name, events, keys, ts, window, lateness, "approx_window_count")
    val spec = LiveCountSpec(in.window, in.span("every", every), eps, alertAbove, alertBelow)
    // Rows that are not events stay in the stream (a filter would be pushed below the
    // watermark, and a quiet key's count must still decay as other rows move time on).
    val eventFlag = isEvent.map(c => col(c).cast(BooleanType)).getOrElse(lit(true))
    val alerts = if (spec.alerts) Seq(StructField("alert", StringType), StructField("crossing", StringType)) else Nil
    val counts = Seq("estimate", "lower", "upper").map(StructField(_, LongType, nullable = false))
    val (time, flag, states, outputKeys) = (in.timeIndex, in.firstExtra, in.states, in.outputKeys)
    in.run(Seq(eventFlag), counts ++ alerts) { (key, rows, bytes, upTo, out) =>
      val live = bytes.fold(new LiveCount(spec))(b => states.read(key, "live count")(LiveCount.fromBytes(spec, b)))
      rows.foreach(r => if (!r.isNullAt(flag) && r.getBoolean(flag)) live.add(r.getLong(time)))
      val keyValues = outputKeys.of(key)
      live.advance(upTo, row => out += toRow(outputKeys, keyValues, row, spec.alerts))
      if (live.isLive) Some((live.toBytes, live.nextTick)) else None
    }
  }

  /** For Python over py4j: Java types, nulls for what is not given. */
  def fromPython(events: DataFrame, keys: java.util.List[String], ts: String, window: String,
      every: String, eps: Double, alertAbove: java.lang.Long, alertBelow: java.lang.Long,
      lateness: String, isEvent: String): DataFrame = {
    val scalaKeys = (0 until keys.size).map(keys.get)
    apply(events, scalaKeys, ts, window, every, eps, Option(alertAbove).map(_.longValue),
      Option(alertBelow).map(_.longValue), Option(lateness), Option(isEvent))
  }

  private def toRow(keys: OutputKeys, key: Array[Any], row: LiveRow, alerts: Boolean): InternalRow = {
    val n = key.length
    val values = keys.row(key, if (alerts) 6 else 4)
    values(n) = row.tick
    values(n + 1) = row.estimate
    values(n + 2) = row.lower
    values(n + 3) = row.upper
    if (alerts) { values(n + 4) = UTF8String.fromString(row.alert); values(n + 5) = UTF8String.fromString(row.crossing) }
    new GenericInternalRow(values)
  }
}
