package windowsketch.spark

import com.fasterxml.jackson.databind.ObjectMapper

import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.catalyst.expressions.GenericRow
import org.apache.spark.sql.functions.{array, col, xxhash64}
import org.apache.spark.sql.types._
import org.apache.spark.sql.windowsketch.LiveOutputEncoder

import windowsketch.core.filter.{DeduplicationState, SlidingFilter}

/**
 * De-duplication of a stream over a sliding window with bounded state: each row of the
 * events is delivered unless a row with the same values of `columns` was delivered within
 * `window` of its time (before it, or after it for a row that arrives out of order), so no
 * two delivered rows of a value lie within one window; a new value is wrongly dropped
 * with probability at most `fpp`. The events need a watermark, as Spark's
 * `dropDuplicatesWithinWatermark` does: rows at or before it are dropped as late, and a
 * value's state is forgotten a window after the watermark passes its last delivered row.
 *
 * Rows are delivered at once, in append mode, within each micro-batch earliest first. The
 * state is a [[DeduplicationState]] per bucket of the values' hash (2^10 buckets, one state
 * row each): fingerprints of `32 + ceil(log2(1 / fpp))` bits with their last delivered
 * times, about 7–10 bytes a value delivered within a window of the watermark, where
 * Spark's own keeps a state row per value (docs/filtering.md).
 */
object DropDuplicatesWithin {
  private val Name = "drop_duplicates_within"
  private val HashColumn = "__windowsketch_value_hash"
  /** The state is kept in 2^BucketBits rows, each for the values whose hash starts with its bits. */
  private val BucketBits = 10

  /**
   * @param events  a streaming DataFrame
   * @param columns the columns whose values tell duplicates apart
   * @param ts      a TIMESTAMP column carrying a watermark, or an integral column of
   *                positions (then `lateness`)
   * @param window  an interval string for a TIMESTAMP `ts` (rows within `[t - window, t +
   *                window]` of a delivered one at `t` are duplicates), a number of positions
   *                otherwise (`(t - window, t + window)`)
   * @param fpp     the probability that a new value is dropped, in [1e-9, 0.5]
   */
  def apply(
      events: DataFrame,
      columns: Seq[String],
      ts: String,
      window: String,
      fpp: Double = 0.01,
      lateness: Option[String] = None): DataFrame = {
    val in = new LiveInput(Name, events, columns, ts, window, lateness, "approx_window_seen",
      keysArg = "columns")
    if (!(fpp >= SlidingFilter.MinFpp && fpp <= SlidingFilter.MaxFpp)) {
      throw new IllegalArgumentException(
        s"$Name: `fpp` must be in [${SlidingFilter.MinFpp}, ${SlidingFilter.MaxFpp}], got $fpp")
    }
    val values = columns.map(c => col(LiveInput.quote(c)))
    columns.zip(values).foreach { case (c, value) =>
      val dataType = in.typeOf(value)
      if (holdsMap(dataType)) {
        throw new IllegalArgumentException(s"$Name: `columns` cannot hold a MAP, as GROUP BY " +
          s"cannot: $c is ${dataType.sql}")
      }
    }
    // The NULL flags tell (a, NULL) from (NULL, a), which xxhash64 alone, skipping NULLs, does not.
    val hash = xxhash64(values :+ array(values.map(_.isNull): _*): _*)
    val input = in.withTime(Seq(hash.as(HashColumn)))
    val width = events.columns.length
    val (timeIndex, hashIndex) = (input.columns.length - 2, input.columns.length - 1)
    val (axisWindow, states) = (in.window, LiveStates(Name, Seq("bucket")))
    val bucketShift = 64 - BucketBits
    in.groupsWithTimers(input, (r: Row) => (r.getLong(hashIndex) >>> bucketShift).toInt,
        Encoders.scalaInt, LiveOutputEncoder.rows(events.schema)) { (bucket, rows, bytes, upTo, out) =>
      val state = bytes.fold(new DeduplicationState(axisWindow, fpp)) { b =>
        states.read(Row(bucket), "de-duplication")(DeduplicationState.fromBytes(axisWindow, fpp, b))
      }
      // Earliest first: within a micro-batch the first delivered is the first in time.
      val batch = rows.toArray
      java.util.Arrays.sort(batch, DropDuplicatesWithin.byTime(timeIndex))
      var i = 0
      while (i < batch.length) {
        val r = batch(i)
        if (state.offer(r.getLong(timeIndex), state.fingerprint(r.getLong(hashIndex)))) {
          val values = new Array[Any](width)
          var j = 0
          while (j < width) { values(j) = r.get(j); j += 1 }
          out += new GenericRow(values)
        }
        i += 1
      }
      state.forgetUpTo(upTo)
      if (state.isEmpty) None else Some((state.toBytes, state.emptyAt))
    }
  }

  private def holdsMap(t: DataType): Boolean = t match {
    case _: MapType => true
    case a: ArrayType => holdsMap(a.elementType)
    case s: StructType => s.fields.exists(f => holdsMap(f.dataType))
    case _ => false
  }

  private def byTime(index: Int): java.util.Comparator[Row] =
    (a: Row, b: Row) => java.lang.Long.compare(a.getLong(index), b.getLong(index))

  /**
   * The operator from a JSON description, as Python and Spark Connect clients send it:
   * `{"columns": [...], "ts": ..., "window": ..., "fpp": ..., "lateness": ... or null}`.
   */
  def fromJson(events: DataFrame, json: String): DataFrame = {
    val spec = new ObjectMapper().readTree(json)
    def text(field: String): String = Option(spec.get(field)).filter(!_.isNull)
      .map(_.asText).getOrElse(throw new IllegalArgumentException(s"$Name: missing `$field`"))
    val columns = Option(spec.get("columns")).map(n => (0 until n.size).map(n.get(_).asText)).getOrElse(Nil)
    apply(events, columns, text("ts"), text("window"), text("fpp").toDouble,
      Option(spec.get("lateness")).filter(!_.isNull).map(_.asText))
  }
}
