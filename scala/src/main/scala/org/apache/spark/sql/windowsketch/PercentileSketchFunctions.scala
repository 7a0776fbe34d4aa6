package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionDescription, Literal}
import org.apache.spark.sql.catalyst.trees.QuaternaryLike
import org.apache.spark.sql.types.{BinaryType, DataType, DoubleType, NullType}

import windowsketch.core.SketchFormat
import windowsketch.core.quantiles.SlidingQuantiles

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, eps]) - Returns a mergeable sketch (BINARY) of the non-NULL `x` of
      the group with their times, for percentiles in sliding windows later: combine sketches
      with window_percentile_sketch_merge and read them with
      window_percentile_sketch_estimate, as one keeps KLL sketches per key per day.
  """,
  arguments = """
    Arguments:
      * x - a numeric, DATE, TIMESTAMP, TIMESTAMP_NTZ or ANSI interval value, kept as the
          double it is ranked by; NULL is skipped but its `ts` still moves the window.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
      * window - a constant: positions for an integral `ts`, a day-time interval otherwise.
      * eps - an optional constant rank error in [0.0001, 1); default 0.01.
  """,
  examples = """
    Examples:
      > SELECT window_percentile_sketch_estimate(_FUNC_(ms, ts, 3), 0.5) FROM VALUES (1, 30), (2, 10), (3, 20), (4, 50) AS t(ts, ms);
       20.0
  """,
  note = """
    The sketch records its window, eps and time unit; only sketches that agree on all three
    merge. A window of at most the exact limit (the largest power of two at most 64 / eps:
    4,096 values at eps 0.01) is held and written exactly, every value with its time (about
    10 bytes a value), and answers exactly; a larger one in the compact form (format kind 8,
    about 440 KB at 10^6 values and 1.1 MB at 10^9 at eps 0.01), whose answers are within
    eps * n in rank with probability at least 1 - 2 * 10^-4 (docs/percentiles.md). The
    format is in docs/format.md.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowPercentileSketchAgg(
    x: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends PercentileAggregate with QuaternaryLike[Expression] {

  def this(x: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(x, ts, window, eps, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = WindowPercentileSketchAgg.Name

  override def eval(buffer: SlidingQuantiles): Any = SketchFormat.serializeQuantiles(buffer)

  override def dataType: DataType = BinaryType

  override def nullable: Boolean = false

  override def first: Expression = x
  override def second: Expression = ts
  override def third: Expression = window
  override def fourth: Expression = eps

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : WindowPercentileSketchAgg = copy(x = newX, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowPercentileSketchAgg =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowPercentileSketchAgg =
    copy(inputAggBufferOffset = newOffset)
}

object WindowPercentileSketchAgg {
  val Name = "window_percentile_sketch"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch) - Merges the percentile sketches of a group into one (BINARY): the sketch
      one window_percentile_sketch would have made of all their rows. NULL sketches are
      skipped; a group of none gives NULL.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY sketches made by window_percentile_sketch with the same window, eps
          and kind of `ts`.
  """,
  examples = """
    Examples:
      > SELECT window_percentile_sketch_estimate(_FUNC_(s), 0.5) FROM (SELECT window_percentile_sketch(ms, ts, 3) AS s FROM VALUES (1, 30), (2, 10) AS t(ts, ms) UNION ALL SELECT window_percentile_sketch(ms, ts, 3) FROM VALUES (3, 20), (4, 50) AS t(ts, ms));
       20.0
  """,
  note = """
    While the merged window holds at most the exact limit (the largest power of two at
    most 64/eps: 4,096 values at eps 0.01), merging loses nothing: any merge order gives
    the sketch window_percentile_sketch makes of all the rows. Past it the merge is
    compact: its bounds hold in any merge order, its bytes may depend on the order. Sketches
    of different window, eps or time unit, and bytes that are not a percentile sketch, are
    errors.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowPercentileSketchMerge(
    sketch: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends SketchMergeAggregate[SlidingQuantiles] {

  def this(sketch: Expression) = this(sketch, 0, 0)

  override def prettyName: String = WindowPercentileSketchMerge.Name

  override protected def maker: String = WindowPercentileSketchAgg.Name

  override protected def read(bytes: Array[Byte]): SlidingQuantiles =
    SketchInput.readQuantiles(bytes, prettyName)

  override protected def write(s: SlidingQuantiles): Array[Byte] =
    SketchFormat.serializeQuantiles(s)

  override protected def mergeInto(into: SlidingQuantiles, other: SlidingQuantiles): Unit =
    into.merge(other)

  override protected def withNewChildInternal(newChild: Expression): WindowPercentileSketchMerge =
    copy(sketch = newChild)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowPercentileSketchMerge =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowPercentileSketchMerge =
    copy(inputAggBufferOffset = newOffset)
}

object WindowPercentileSketchMerge {
  val Name = "window_percentile_sketch_merge"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch, percentage[, as_of[, sub_window]]) - Returns the percentile of the values of
      a percentile sketch in the window of length `sub_window` (default: the sketch's window)
      ending at `as_of` (default: the sketch's largest `ts`), as approx_window_percentile
      defines it, as a DOUBLE (an array of them for an array `percentage`). NULL when that
      window holds no value.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY, made by window_percentile_sketch or window_percentile_sketch_merge.
          NULL gives NULL.
      * percentage - a constant DOUBLE in [0, 1], or a constant ARRAY of them.
      * as_of - where the window ends: a TIMESTAMP, TIMESTAMP_NTZ or DATE for sketches over
          time, an integral position for sketches over positions. It may not be earlier than
          the sketch's largest `ts` (values after it would be counted). NULL gives NULL;
          a bare NULL literal means the argument is not given.
      * sub_window - a constant no longer than the sketch's window: a day-time interval for
          sketches over time, a number of positions otherwise.
  """,
  examples = """
    Examples:
      > SELECT _FUNC_(s, 0.5), _FUNC_(s, array(0.0, 1.0), 5), _FUNC_(s, 0.5, 4, 1) FROM (SELECT window_percentile_sketch(ms, ts, 3) AS s FROM VALUES (1, 30), (2, 10), (3, 20), (4, 50) AS t(ts, ms));
       20.0	[20.0, 50.0]	50.0
  """,
  note = """
    The sketch keeps values as the doubles they are ranked by: cast the answer back to the
    type of `x` (for a TIMESTAMP, timestamp_micros(CAST(answer AS BIGINT))).
  """,
  group = "misc_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowPercentileSketchEstimate(
    sketch: Expression,
    percentage: Expression,
    asOf: Expression,
    subWindow: Expression)
  extends SketchQuery[SlidingQuantiles] with PercentagesArgument with QuaternaryLike[Expression] {

  def this(sketch: Expression, percentage: Expression, asOf: Expression) =
    this(sketch, percentage, asOf, Literal(null, NullType))

  def this(sketch: Expression, percentage: Expression) =
    this(sketch, percentage, Literal(null, NullType))

  override def prettyName: String = WindowPercentileSketchEstimate.Name

  override protected def asOfIndex: Int = 2

  override protected def maker: String = WindowPercentileSketchAgg.Name

  override protected def read(bytes: Array[Byte]): SlidingQuantiles =
    SketchInput.readQuantiles(bytes, prettyName)

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(super.checkInputDataTypes(), checkPercentages).find(_.isFailure).getOrElse(TypeCheckSuccess)

  override def dataType: DataType = resultType(DoubleType)

  // An empty window has no percentile.
  override def nullable: Boolean = true

  override def eval(input: InternalRow): Any =
    sketchAndWindow(input) match {
      case null => null
      case (s, window) =>
        val (end, length) = window.getOrElse((s.now, s.window))
        val answers = if (s.hasTime) s.quantilesAt(percentages, end, length) else null
        if (answers == null) null else answer(answers.map(a => a: Any))
    }

  override def first: Expression = sketch
  override def second: Expression = percentage
  override def third: Expression = asOf
  override def fourth: Expression = subWindow

  override protected def withNewChildrenInternal(
      newFirst: Expression, newSecond: Expression, newThird: Expression, newFourth: Expression)
    : WindowPercentileSketchEstimate =
    copy(sketch = newFirst, percentage = newSecond, asOf = newThird, subWindow = newFourth)
}

object WindowPercentileSketchEstimate {
  val Name = "window_percentile_sketch_estimate"
}
