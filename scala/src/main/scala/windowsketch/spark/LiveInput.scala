package windowsketch.spark

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{Column, DataFrame, Encoder, Encoders, Row}
import org.apache.spark.sql.catalyst.{CatalystTypeConverters, InternalRow}
import org.apache.spark.sql.catalyst.expressions.GenericRow
import org.apache.spark.sql.catalyst.util.IntervalUtils
import org.apache.spark.sql.functions.{col, expr}
import org.apache.spark.sql.streaming.{GroupState, GroupStateTimeout, OutputMode}
import org.apache.spark.sql.types._
import org.apache.spark.sql.windowsketch.InternalRowEncoder

import windowsketch.core.CorruptSketchException

/**
 * What every live operator (`sliding_counts`, `sliding_window`, `drop_duplicates_within`)
 * does with its events before and after its state: checks the arguments, puts the events
 * on one time axis (microseconds, or positions read as milliseconds so that Spark's
 * watermark tracks them) and runs `flatMapGroupsWithState` with one event-time timer per
 * group. The keyed operators ([[run]]) turn `window_end` back into a TIMESTAMP.
 *
 * The input rows [[run]]'s state function sees are the key columns, the watermarked column,
 * the time (a LONG) and then the operator's own columns, from index `firstExtra`.
 * `forTables` names what to use instead on a table; `keysArg` names the argument `keys` come from.
 */
private[spark] final class LiveInput(
    name: String,
    events: DataFrame,
    keys: Seq[String],
    ts: String,
    windowArg: String,
    lateness: Option[String],
    forTables: String,
    keysArg: String = "key") {
  import LiveInput._

  if (!events.isStreaming) {
    throw new IllegalArgumentException(
      s"$name needs a streaming DataFrame; for a table, use $forTables in a window frame " +
        "(OVER (PARTITION BY key ORDER BY ts)).")
  }
  require(keys.nonEmpty, s"$name: `$keysArg` must name at least one column")
  private val tsField = events.schema.find(_.name == ts).getOrElse(throw new IllegalArgumentException(
    s"$name: `ts` names no column of the events: $ts (columns: ${events.columns.mkString(", ")})"))
  val onPositions: Boolean = tsField.dataType match {
    case TimestampType => false
    case ByteType | ShortType | IntegerType | LongType => true
    case other => throw new IllegalArgumentException(
      s"$name: `ts` must be a TIMESTAMP column with a watermark or an integral column of " +
        s"positions, but $ts is ${other.sql}")
  }
  /** The window on the time axis: `[T - window, T]` in microseconds is `w + 1` of them. */
  val window: Long = if (onPositions) positions("window", windowArg) else micros("window", windowArg) + 1

  /** A span such as `every` on the time axis: positions, or microseconds. */
  def span(what: String, value: String): Long =
    if (onPositions) positions(what, value) else micros(what, value)

  private val (timed, timeExpr) = if (onPositions) {
    val delay = positions("lateness", lateness.getOrElse(throw new IllegalArgumentException(
      s"$name: an integral `ts` needs `lateness`, the number of positions an event may " +
        "arrive behind the largest position seen")), allowZero = true)
    val withTime = events.withColumn(PositionTimeColumn, expr(s"timestamp_millis(${quote(ts)})"))
      .withWatermark(PositionTimeColumn, s"$delay milliseconds")
    (withTime, col(ts).cast(LongType))
  } else {
    if (lateness.isDefined) {
      throw new IllegalArgumentException(s"$name: `lateness` is for an integral `ts`; for a " +
        s"TIMESTAMP `ts`, set the watermark on the events: events.withWatermark('$ts', delay)")
    }
    if (!tsField.metadata.contains(WatermarkKey)) {
      throw new IllegalArgumentException(s"$name: the events need a watermark on `ts` ($ts), " +
        s"which says when a tick's window is final: events.withWatermark('$ts', '1 minute')")
    }
    (events, expr(s"unix_micros(${quote(ts)})"))
  }

  private val keyFields = keys.map { k =>
    timed.schema.find(_.name == k).getOrElse(throw new IllegalArgumentException(
      s"$name: `$keysArg` names no column of the events: $k (columns: ${events.columns.mkString(", ")})"))
  }
  val keySchema: StructType = StructType(keyFields.map(_.copy(nullable = true)))
  val keyCount: Int = keys.length
  /** Where the operator's own columns start in each input row. */
  val firstExtra: Int = keyCount + 2
  val timeIndex: Int = keyCount + 1
  /** What the state function needs to name a key in errors; serializable, unlike this. */
  val states: LiveStates = LiveStates(name, keys)

  /** The type of a column of the events (or an expression over them), for checks. */
  def typeOf(column: Column): DataType = timed.select(column).schema.head.dataType

  /**
   * Runs the state function per key; `outFields` follow the key columns and `window_end`.
   * `step(key, rows, state, upTo, out)` gets the time every tick at or before `upTo` is
   * final at, adds the key's output rows to `out` as internal rows (Spark's values, see
   * [[InternalRowEncoder]]; [[outputKeys]] gives the key's) and returns its next timer
   * (None: the key is finished, its state removed).
   */
  def run(extra: Seq[Column], outFields: Seq[StructField])(
      step: (Row, Iterator[Row], Option[Array[Byte]], Long, ArrayBuffer[InternalRow]) => Option[(Array[Byte], Long)])
      : DataFrame = {
    val input = timed.select(keys.map(col) ++ Seq(watermarked, timeExpr.as(TimeColumn)) ++ extra: _*)
    // window_end is the tick on the axis: positions, or a TIMESTAMP's microseconds.
    val outSchema = StructType(keySchema.fields ++
      Seq(StructField("window_end", if (onPositions) LongType else TimestampType, nullable = false)) ++ outFields)
    val n = keyCount
    groupsWithTimers(input, (r: Row) => new GenericRow(keyPrefix(r, n, 0)): Row,
      Encoders.row(keySchema), InternalRowEncoder(outSchema))(step)
  }

  /** The key columns' values as [[run]]'s output rows hold them. */
  val outputKeys: OutputKeys = new OutputKeys(keySchema)

  /**
   * The events with the time (a LONG) and `extra` after their own columns, as the rows a
   * state function of [[groupsWithTimers]] sees: the time comes just before `extra` (after
   * the watermarked positions' column, for an integral `ts`).
   */
  def withTime(extra: Seq[Column]): DataFrame =
    timed.select(events.columns.toSeq.map(c => col(quote(c))) ++
      (if (onPositions) Seq(watermarked) else Nil) ++ Seq(timeExpr.as(TimeColumn)) ++ extra: _*)

  /**
   * Runs `step` per group of `groupOf`: it gets the group, its rows, its state, the time
   * every row at or before which is final (the watermark on the time axis) and a buffer for
   * its output rows, and returns the group's new state and the time (on the axis) at which
   * its timer fires, or None to remove its state.
   */
  def groupsWithTimers[K, U](input: DataFrame, groupOf: Row => K, groupEncoder: Encoder[K],
      outEncoder: Encoder[U])(
      step: (K, Iterator[Row], Option[Array[Byte]], Long, ArrayBuffer[U]) => Option[(Array[Byte], Long)])
      : DataFrame = {
    val toAxis: Long => Long = if (onPositions) identity else Math.multiplyExact(_, 1000L)
    // A timeout fires once the watermark (ms) is past it; a tick is due once toAxis(wm) reaches it.
    val timerFor: Long => Long =
      if (onPositions) _ - 1 else tick => Math.floorDiv(tick + 999, 1000L) - 1
    input
      .groupByKey(groupOf)(groupEncoder)
      .flatMapGroupsWithState(OutputMode.Append, GroupStateTimeout.EventTimeTimeout) {
        (group: K, rows: Iterator[Row], state: GroupState[Array[Byte]]) =>
          val emitted = ArrayBuffer.empty[U]
          step(group, rows, if (state.exists) Some(state.get) else None,
              toAxis(state.getCurrentWatermarkMs()), emitted) match {
            case Some((bytes, nextTick)) =>
              state.update(bytes)
              state.setTimeoutTimestamp(timerFor(nextTick))
            case None => state.remove()
          }
          emitted.iterator
      }(Encoders.BINARY, outEncoder)
      .toDF()
  }

  // The watermarked column stays in the input: Spark finds the query's watermark there,
  // for the event-time timeouts and to drop late rows.
  private def watermarked: Column = col(if (onPositions) PositionTimeColumn else ts)

  private def micros(what: String, value: String): Long = {
    val interval = Option(IntervalUtils.safeStringToInterval(
      org.apache.spark.unsafe.types.UTF8String.fromString(value)))
    interval.filter(i => i.months == 0).map(i => i.days * 86400000000L + i.microseconds) match {
      case Some(us) if us > 0 => us
      case _ => throw new IllegalArgumentException(
        s"$name: `$what` must be a positive day-time interval such as '10 minutes', got '$value'")
    }
  }

  private def positions(what: String, value: String, allowZero: Boolean = false): Long =
    scala.util.Try(value.trim.toLong).toOption.filter(p => p > 0 || (allowZero && p == 0)) match {
      case Some(p) => p
      case None => throw new IllegalArgumentException(
        s"$name: `$what` must be a ${if (allowZero) "non-negative" else "positive"} number of " +
          s"positions for an integral `ts`, got '$value'")
    }
}

/** Reads a key's state inside the state function, naming the operator and the key. */
private[spark] final case class LiveStates(name: String, keys: Seq[String]) {
  /**
   * `read` of a key's state bytes: bytes that do not decode stop the query with an error
   * naming windowsketch's state and the key (never a wrong row); a state written under
   * other parameters, with one naming the operator and what changed.
   */
  def read[S](key: Row, what: String)(read: => S): S =
    try read
    catch {
      case e: CorruptSketchException => throw new IllegalStateException(
        s"$name: the $what state of key (${describe(key)}) in the state store does not " +
          s"decode (${e.getMessage}): the checkpoint is damaged or was written by another " +
          "operator; restart the query from a new checkpoint", e)
      case e: IllegalArgumentException => throw new IllegalArgumentException(s"$name: ${e.getMessage}", e)
    }

  private def describe(key: Row): String =
    keys.zip(key.toSeq).map { case (k, v) => s"$k=$v" }.mkString(", ")
}

private[spark] object LiveInput {
  /** The watermark metadata key Spark puts on an event-time column (EventTimeWatermark.delayKey). */
  private val WatermarkKey = "spark.watermarkDelayMs"
  private val TimeColumn = "__windowsketch_time"
  private val PositionTimeColumn = "__windowsketch_position_time"

  def quote(name: String): String = "`" + name.replace("`", "``") + "`"

  /**
   * The first `keyCount` fields of `row` in an array with room for `tail` more, to be
   * wrapped in a GenericRow: built straight into one array, as it is once per event (the
   * key), where Seq concatenation showed up in the operator's profile.
   */
  def keyPrefix(row: Row, keyCount: Int, tail: Int): Array[Any] = {
    val values = new Array[Any](keyCount + tail)
    var i = 0
    while (i < keyCount) { values(i) = row.get(i); i += 1 }
    values
  }
}

/** A key's columns as Spark's internal values, which the live operators' output rows begin with. */
private[spark] final class OutputKeys(keySchema: StructType) extends Serializable {
  private val toInternal = CatalystTypeConverters.createToCatalystConverter(keySchema)

  /** The key's values, converted once a key: each of its rows copies them ([[row]]). */
  def of(key: Row): Array[Any] = toInternal(key).asInstanceOf[InternalRow].toSeq(keySchema).toArray

  /** An output row's values: the key's, then room for `tail` more. */
  def row(key: Array[Any], tail: Int): Array[Any] = {
    val values = new Array[Any](key.length + tail)
    System.arraycopy(key, 0, values, 0, key.length)
    values
  }
}
