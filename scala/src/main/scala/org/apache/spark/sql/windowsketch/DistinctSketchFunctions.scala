package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionDescription, Literal}
import org.apache.spark.sql.types.{BinaryType, DataType, LongType, NullType}

import windowsketch.core.{CorruptSketchException, SketchFormat, StoredDistinct}
import windowsketch.core.hll.SlidingHyperLogLog

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, rsd]) - Returns a mergeable sketch (BINARY) of the distinct values
      of the group with the times they were seen, for distinct counts in sliding windows
      later: combine sketches with window_distinct_sketch_merge and read them with
      window_distinct_sketch_estimate, as one keeps HLL sketches per key per day.
  """,
  arguments = """
    Arguments:
      * x - a value of any type Spark can group by; NULL is not counted.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
      * window - a constant: positions for an integral `ts`, a day-time interval otherwise.
      * rsd - an optional constant relative standard deviation in [0.01, 0.39]; default 0.05.
  """,
  examples = """
    Examples:
      > SELECT window_distinct_sketch_estimate(_FUNC_(u, ts, 3)) FROM VALUES (1, 'a'), (2, 'b'), (3, 'a'), (4, 'c') AS t(ts, u);
       3
  """,
  note = """
    The sketch records its window, rsd and time unit; only sketches that agree on all three
    merge. It holds the values of its window only: at rsd 0.05 about ln(n / 512) (time, rank)
    pairs for each of its 512 registers. The format is in docs/format.md.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowDistinctSketchAgg(
    x: Expression,
    ts: Expression,
    window: Expression,
    rsd: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends DistinctAggregate {

  def this(x: Expression, ts: Expression, window: Expression, rsd: Expression) =
    this(x, ts, window, rsd, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(ApproxWindowCountDistinct.DefaultRsd))

  override def prettyName: String = WindowDistinctSketchAgg.Name

  override def eval(buffer: SlidingHyperLogLog): Any = SketchFormat.serializeDistinct(buffer)

  override def dataType: DataType = BinaryType

  override def nullable: Boolean = false

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newRsd: Expression)
    : WindowDistinctSketchAgg = copy(x = newX, ts = newTs, window = newWindow, rsd = newRsd)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowDistinctSketchAgg =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowDistinctSketchAgg =
    copy(inputAggBufferOffset = newOffset)
}

object WindowDistinctSketchAgg {
  val Name = "window_distinct_sketch"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch) - Merges the distinct-count sketches of a group into one (BINARY): exactly
      the sketch one window_distinct_sketch would have made of all their rows. NULL sketches
      are skipped; a group of none gives NULL.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY sketches made by window_distinct_sketch with the same window, rsd and
          kind of `ts`.
  """,
  examples = """
    Examples:
      > SELECT window_distinct_sketch_estimate(_FUNC_(s)) FROM (SELECT window_distinct_sketch(u, ts, 3) AS s FROM VALUES (1, 'a'), (2, 'b') AS t(ts, u) UNION ALL SELECT window_distinct_sketch(u, ts, 3) FROM VALUES (3, 'a'), (4, 'c') AS t(ts, u));
       3
  """,
  note = """
    Merging loses nothing: any merge order gives the same sketch. Sketches of different
    window, rsd or time unit, and bytes that are not a distinct-count sketch, are errors.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowDistinctSketchMerge(
    sketch: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends SketchMergeAggregate[SlidingHyperLogLog] {

  def this(sketch: Expression) = this(sketch, 0, 0)

  override def prettyName: String = WindowDistinctSketchMerge.Name

  override protected def maker: String = WindowDistinctSketchAgg.Name

  override protected def read(bytes: Array[Byte]): SlidingHyperLogLog =
    SketchInput.readDistinct(bytes, prettyName)

  override protected def write(s: SlidingHyperLogLog): Array[Byte] =
    SketchFormat.serializeDistinct(s)

  override protected def mergeInto(into: SlidingHyperLogLog, other: SlidingHyperLogLog): Unit =
    into.merge(other)

  // Most stored sketches hold a few values: building each one cost more than its merge.
  override protected def mergeBytesInto(into: SlidingHyperLogLog, bytes: Array[Byte]): Unit =
    try SketchFormat.mergeDistinct(into, bytes)
    catch { case e: IllegalArgumentException => throw failure(e) }

  override protected def withNewChildInternal(newChild: Expression): WindowDistinctSketchMerge =
    copy(sketch = newChild)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowDistinctSketchMerge =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowDistinctSketchMerge =
    copy(inputAggBufferOffset = newOffset)
}

object WindowDistinctSketchMerge {
  val Name = "window_distinct_sketch_merge"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch[, as_of[, sub_window]]) - Returns the approximate number of distinct values
      of a distinct-count sketch in the window of length `sub_window` (default: the sketch's
      window) ending at `as_of` (default: the sketch's largest `ts`): what
      approx_count_distinct with the sketch's rsd gives over that window's rows.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY, made by window_distinct_sketch or window_distinct_sketch_merge.
          NULL gives NULL.
      * as_of - where the window ends: a TIMESTAMP, TIMESTAMP_NTZ or DATE for sketches over
          time, an integral position for sketches over positions. It may not be earlier than
          the sketch's largest `ts` (values after it would be counted). NULL gives NULL;
          a bare NULL literal means the argument is not given.
      * sub_window - a constant no longer than the sketch's window: a day-time interval for
          sketches over time, a number of positions otherwise.
  """,
  examples = """
    Examples:
      > SELECT _FUNC_(s), _FUNC_(s, 5), _FUNC_(s, 4, 1) FROM (SELECT window_distinct_sketch(u, ts, 3) AS s FROM VALUES (1, 'a'), (2, 'b'), (3, 'a'), (4, 'c') AS t(ts, u));
       3	2	1
  """,
  note = """
    HyperLogLog's error is a distribution, not a bound: about 95% of answers lie within
    2 * rsd of the exact count; small windows are nearly exact (linear counting).
  """,
  group = "misc_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowDistinctSketchEstimate(sketch: Expression, asOf: Expression, subWindow: Expression)
  extends SketchQuery[StoredDistinct] with ThreeArgumentSketchQuery {

  def this(sketch: Expression, asOf: Expression) = this(sketch, asOf, Literal(null, NullType))

  def this(sketch: Expression) = this(sketch, Literal(null, NullType))

  // Sketches in a column usually share one rsd: keep the estimator of the last one.
  @transient private var estimator: DistinctEstimator = _

  override def prettyName: String = WindowDistinctSketchEstimate.Name

  override protected def maker: String = WindowDistinctSketchAgg.Name

  // One query of each stored sketch: its registers are summed straight from the bytes
  // (building the sketch was most of the estimate's cost).
  override protected def read(bytes: Array[Byte]): StoredDistinct =
    SketchInput.readStoredDistinct(bytes, prettyName)

  override def dataType: DataType = LongType

  override def eval(input: InternalRow): Any =
    sketchAndWindow(input) match {
      case null => null
      case (s, window) =>
        val (zInverse, zeros) =
          try window match {
            case None => s.registerSums
            case Some((end, length)) => s.registerSumsAt(end, length)
          } catch { case e: CorruptSketchException => throw SketchInput.named(prettyName, e) }
        if (estimator == null || estimator.rsd != s.rsd) estimator = new DistinctEstimator(s.rsd)
        estimator.estimate(zInverse, zeros)
    }

  override protected def withNewChildrenInternal(
      newFirst: Expression, newSecond: Expression, newThird: Expression)
    : WindowDistinctSketchEstimate = copy(sketch = newFirst, asOf = newSecond, subWindow = newThird)
}

object WindowDistinctSketchEstimate {
  val Name = "window_distinct_sketch_estimate"
}
