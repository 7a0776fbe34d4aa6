package windowsketch.spark

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.catalyst.util.IntervalUtils
import org.apache.spark.sql.functions.{col, expr, lit}
import org.apache.spark.sql.streaming.{GroupState, GroupStateTimeout, OutputMode}
import org.apache.spark.sql.types._

import windowsketch.core.{LiveCount, LiveCountSpec, LiveRow}

/**
 * Live sliding counts on a stream: for each key and each tick T (a multiple of `every`)
 * once the watermark has passed T, the approximate count of events in the window ending at
 * T, final because every event at or before T that is not late has arrived. A key's state
 * is dropped once its window is empty and nothing is pending, after one last row with 0.
 *
 * Built on `flatMapGroupsWithState` with event-time timeouts, which every supported Spark
 * line has in the same form; a key needs one timer (its next tick), and the per-key state
 * is one [[LiveCount]] in bytes. Output mode Append: rows are final.
 */
object SlidingCounts {
  private val Name = "sliding_counts"
  /** The watermark metadata key Spark puts on an event-time column (EventTimeWatermark.delayKey). */
  private val WatermarkKey = "spark.watermarkDelayMs"
  private val TimeColumn = "__windowsketch_time"
  private val PositionTimeColumn = "__windowsketch_position_time"
  private val EventColumn = "__windowsketch_event"

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
    if (!events.isStreaming) {
      throw new IllegalArgumentException(
        s"$Name needs a streaming DataFrame; for a table, use approx_window_count in a window " +
          "frame (OVER (PARTITION BY key ORDER BY ts)).")
    }
    require(keys.nonEmpty, s"$Name: `key` must name at least one column")
    val tsField = events.schema.find(_.name == ts).getOrElse(throw new IllegalArgumentException(
      s"$Name: `ts` names no column of the events: $ts (columns: ${events.columns.mkString(", ")})"))
    val onPositions = tsField.dataType match {
      case TimestampType => false
      case ByteType | ShortType | IntegerType | LongType => true
      case other => throw new IllegalArgumentException(
        s"$Name: `ts` must be a TIMESTAMP column with a watermark or an integral column of " +
          s"positions, but $ts is ${other.sql}")
    }
    val spec = LiveCountSpec(
      window = if (onPositions) positions("window", window) else micros("window", window) + 1,
      every = if (onPositions) positions("every", every) else micros("every", every),
      eps = eps, alertAbove = alertAbove, alertBelow = alertBelow)

    // The time axis the operator runs on: microseconds, or positions read as milliseconds
    // so that Spark's watermark (a TIMESTAMP in milliseconds) can track them.
    val (timed, timeExpr) = if (onPositions) {
      val delay = positions("lateness", lateness.getOrElse(throw new IllegalArgumentException(
        s"$Name: an integral `ts` needs `lateness`, the number of positions an event may " +
          "arrive behind the largest position seen")), allowZero = true)
      val withTime = events.withColumn(PositionTimeColumn, expr(s"timestamp_millis(${quote(ts)})"))
        .withWatermark(PositionTimeColumn, s"$delay milliseconds")
      (withTime, col(ts).cast(LongType))
    } else {
      if (lateness.isDefined) {
        throw new IllegalArgumentException(s"$Name: `lateness` is for an integral `ts`; for a " +
          s"TIMESTAMP `ts`, set the watermark on the events: events.withWatermark('$ts', delay)")
      }
      if (!tsField.metadata.contains(WatermarkKey)) {
        throw new IllegalArgumentException(s"$Name: the events need a watermark on `ts` ($ts), " +
          s"which says when a tick's window is final: events.withWatermark('$ts', '1 minute')")
      }
      (events, expr(s"unix_micros(${quote(ts)})"))
    }

    val keyFields = keys.map { k =>
      timed.schema.find(_.name == k).getOrElse(throw new IllegalArgumentException(
        s"$Name: `key` names no column of the events: $k (columns: ${events.columns.mkString(", ")})"))
    }
    // The watermarked column stays in the input: Spark finds the query's watermark there,
    // for the event-time timeouts and to drop late rows.
    val watermarked = col(if (onPositions) PositionTimeColumn else ts)
    // Rows that are not events stay in the stream (a filter would be pushed below the
    // watermark, and a quiet key's count must still decay as other rows move time on).
    val eventFlag = isEvent.map(c => col(c).cast(BooleanType)).getOrElse(lit(true))
    val input = timed.select(keys.map(col) ++ Seq(watermarked, timeExpr.as(TimeColumn),
      eventFlag.as(EventColumn)): _*)
    val keySchema = StructType(keyFields.map(_.copy(nullable = true)))
    val n = keys.length
    val alerts = if (spec.alerts) Seq(StructField("alert", StringType), StructField("crossing", StringType)) else Nil
    val outSchema = StructType(keySchema.fields ++ Seq(
      StructField("window_end", LongType, nullable = false),
      StructField("estimate", LongType, nullable = false),
      StructField("lower", LongType, nullable = false),
      StructField("upper", LongType, nullable = false)) ++ alerts)
    val finalUpTo: Long => Long = if (onPositions) identity else Math.multiplyExact(_, 1000L)
    // A timeout fires once the watermark (ms) is past it; a tick is due once finalUpTo(wm) reaches it.
    val timerFor: Long => Long =
      if (onPositions) _ - 1 else tick => Math.floorDiv(tick + 999, 1000L) - 1

    val counted = input
      .groupByKey((r: Row) => Row.fromSeq((0 until n).map(r.get)))(Encoders.row(keySchema))
      .flatMapGroupsWithState(OutputMode.Append, GroupStateTimeout.EventTimeTimeout) {
        (key: Row, rows: Iterator[Row], state: GroupState[Array[Byte]]) =>
          val live = if (state.exists) LiveCount.fromBytes(spec, state.get) else new LiveCount(spec)
          rows.foreach(r => if (!r.isNullAt(n + 2) && r.getBoolean(n + 2)) live.add(r.getLong(n + 1)))
          val out = ArrayBuffer.empty[Row]
          live.advance(finalUpTo(state.getCurrentWatermarkMs()), row => out += toRow(key, row, spec.alerts))
          if (live.isLive) {
            state.update(live.toBytes)
            state.setTimeoutTimestamp(timerFor(live.nextTick))
          } else {
            state.remove()
          }
          out.iterator
      }(Encoders.BINARY, Encoders.row(outSchema))
      .toDF()
    if (onPositions) counted
    else counted.withColumn("window_end", expr("timestamp_micros(window_end)"))
  }

  /** For Python over py4j: Java types, nulls for what is not given. */
  def fromPython(events: DataFrame, keys: java.util.List[String], ts: String, window: String,
      every: String, eps: Double, alertAbove: java.lang.Long, alertBelow: java.lang.Long,
      lateness: String, isEvent: String): DataFrame = {
    val scalaKeys = (0 until keys.size).map(keys.get)
    apply(events, scalaKeys, ts, window, every, eps, Option(alertAbove).map(_.longValue),
      Option(alertBelow).map(_.longValue), Option(lateness), Option(isEvent))
  }

  private def toRow(key: Row, row: LiveRow, alerts: Boolean): Row = {
    val counts = Seq(row.tick, row.estimate, row.lower, row.upper)
    Row.fromSeq(key.toSeq ++ counts ++ (if (alerts) Seq(row.alert, row.crossing) else Nil))
  }

  private def quote(name: String): String = "`" + name.replace("`", "``") + "`"

  private def micros(name: String, value: String): Long = {
    val interval = Option(IntervalUtils.safeStringToInterval(
      org.apache.spark.unsafe.types.UTF8String.fromString(value)))
    interval.filter(i => i.months == 0).map(i => i.days * 86400000000L + i.microseconds) match {
      case Some(us) if us > 0 => us
      case _ => throw new IllegalArgumentException(
        s"$Name: `$name` must be a positive day-time interval such as '10 minutes', got '$value'")
    }
  }

  private def positions(name: String, value: String, allowZero: Boolean = false): Long =
    scala.util.Try(value.trim.toLong).toOption.filter(p => p > 0 || (allowZero && p == 0)) match {
      case Some(p) => p
      case None => throw new IllegalArgumentException(
        s"$Name: `$name` must be a ${if (allowZero) "non-negative" else "positive"} number of " +
          s"positions for an integral `ts`, got '$value'")
    }
}
