package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess
import org.apache.spark.sql.catalyst.expressions.{Cast, Expression, ExpressionDescription,
  Literal, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.optimizer.NormalizeFloatingNumbers
import org.apache.spark.sql.catalyst.trees.QuaternaryLike
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.Platform

import windowsketch.core.{CorruptSketchException, SketchFormat}
import windowsketch.core.filter.SlidingFilter

/** What the filter family's functions share: fpp, fingerprints of values, reading sketches. */
object FilterValues {
  /** The default false-positive probability. */
  val DefaultFpp: Double = 0.01

  /** The constant `fpp`: in [SlidingFilter.MinFpp, SlidingFilter.MaxFpp], or why it is not. */
  def fppValue(fpp: Expression): Either[TypeCheckResult, Double] =
    WindowArguments.constantIn(fpp, "fpp", SlidingFilter.MinFpp, SlidingFilter.MaxFpp,
      s"[${SlidingFilter.MinFpp}, ${SlidingFilter.MaxFpp}]", upperIncluded = true)

  /**
   * A projection to the bytes a fingerprint hashes: the binary row of `x`, with -0.0 as 0.0
   * and every NaN as one NaN (inside structs and arrays too), since GROUP BY and Spark's
   * de-duplication take those as equal.
   */
  def projection(x: Expression): UnsafeProjection =
    UnsafeProjection.create(Seq(NormalizeFloatingNumbers.normalize(x)))

  /**
   * The fingerprint of a projected value's binary row, hashed where the projection wrote
   * it: a per-row copy of its bytes (`getBytes`) would cost more than the hash.
   */
  def fingerprint(filter: SlidingFilter, row: UnsafeRow): Long = row.getBaseObject match {
    case bytes: Array[Byte] =>
      filter.fingerprint(bytes, (row.getBaseOffset - Platform.BYTE_ARRAY_OFFSET).toInt, row.getSizeInBytes)
    case _ => filter.fingerprint(row.getBytes)
  }

  /** Reads a stored filter sketch, naming `function` in every error. */
  def read(bytes: Array[Byte], function: String): SlidingFilter =
    try {
      val s = SketchFormat.deserializeFilter(bytes)
      RowValues.typeOf(s.itemType)
      s
    } catch { case e: CorruptSketchException => throw SketchInput.named(function, e) }
}

/**
 * What the aggregates over `(x, ts, window [, fpp])` of the filter family share: the
 * argument checks and reading rows as fingerprints.
 */
abstract class FilterAggregate[B <: AnyRef] extends TypedImperativeAggregate[B] {
  def x: Expression
  def ts: Expression
  def window: Expression
  def fpp: Expression

  // Lazy so the constants are read once, after the checks, never during tree transforms.
  private lazy val windowLength: Long = WindowArguments.windowLength(window, ts).toOption.get
  private lazy val fppValue: Double = FilterValues.fppValue(fpp).toOption.get
  private lazy val tsType: DataType = ts.dataType
  private lazy val itemType: String = x.dataType.catalogString
  @transient private lazy val encode = FilterValues.projection(x)
  @transient private lazy val time = new TimeArgument(ts)

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(
      RowValues.checkType(x),
      WindowArguments.checkTimeType(ts),
      WindowArguments.windowLength(window, ts).left.getOrElse(TypeCheckSuccess),
      FilterValues.fppValue(fpp).left.getOrElse(TypeCheckSuccess)
    ).find(_.isFailure).getOrElse(TypeCheckSuccess)

  protected def newFilter(): SlidingFilter = {
    val s = new SlidingFilter(windowLength, fppValue)
    s.itemType = itemType
    s.microsecondTime = WindowArguments.isTemporal(tsType)
    s
  }

  /**
   * Feeds one row to `filter`: a NULL `ts` is ignored, a NULL `x` only moves time. With
   * `answer`, returns whether the value occurred before it in the window (1 or 0; -1 for
   * a NULL `x` or `ts`), else records it and returns -1.
   */
  protected def feed(filter: SlidingFilter, input: InternalRow, answer: Boolean): Int = {
    if (time.isNullIn(input)) return -1
    val t = time.of(input)
    val row = encode(input)
    if (row.isNullAt(0)) { filter.advanceTo(t); return -1 }
    val fp = FilterValues.fingerprint(filter, row)
    if (!answer) { filter.add(t, fp); -1 }
    else if (filter.seenThenAdd(t, fp)) 1
    else 0
  }

  override def children: Seq[Expression] = Seq(x, ts, window, fpp)
}

/** A running frame's state: the filter of the rows so far, and the answer for the last one. */
final class SeenRows(val filter: SlidingFilter) {
  /** True, false, or null for a row whose `x` or `ts` is NULL. */
  var answer: Any = null
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, fpp]) - Returns, for each row of a running frame ordered by `ts`,
      whether its value `x` occurred earlier in the sliding window that ends at the row's
      `ts`: at an earlier `ts` of the window, or at the same `ts` in an earlier row of the
      frame's order. A value of the window is always found; one that is not there is
      reported seen with probability at most `fpp`. `count_if(NOT seen)` counts first
      occurrences, and `WHERE NOT seen` de-duplicates. Memory is a fingerprint and a time
      per distinct value of the window, never its rows.
  """,
  arguments = """
    Arguments:
      * x - a value of any type GROUP BY takes (no MAP inside), for example struct(user, url);
          -0.0 and 0.0, and all NaNs, are one value, as in GROUP BY. NULL gives NULL and is
          not recorded, but its `ts` still moves the window.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
          Rows whose `ts` is NULL give NULL and are ignored.
      * window - as for approx_window_count: N positions for an integral `ts`, `(now - N, now]`;
          a positive day-time interval for a temporal `ts`, `[now - window, now]`.
      * fpp - an optional constant in [1.0E-9, 0.5] (default 0.01): the most probability that
          a value absent from the window is reported seen, with up to 2^32 distinct values in
          the window.
  """,
  examples = """
    Examples:
      > SELECT ts, user, _FUNC_(user, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, 'a'), (2, 'b'), (3, 'a'), (5, 'b'), (7, 'a') AS t(ts, user);
       1	a	false
       2	b	false
       3	a	true
       5	b	false
       7	a	false
  """,
  note = """
    It answers per row, so it runs only in a running frame ordered by `ts` ascending:
    OVER (PARTITION BY ... ORDER BY ts [, tie-breakers]), RANGE or ROWS from UNBOUNDED
    PRECEDING to CURRENT ROW, taken as ROWS so that each row of one `ts` gets its own answer;
    order ties by another column to make that order deterministic. Elsewhere (GROUP BY,
    other frames) use window_filter_sketch and window_filter_contains.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowSeen(
    x: Expression,
    ts: Expression,
    window: Expression,
    fpp: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends FilterAggregate[SeenRows] with OrderedInputAggregate {

  def this(x: Expression, ts: Expression, window: Expression, fpp: Expression) =
    this(x, ts, window, fpp, false, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(FilterValues.DefaultFpp))

  override def prettyName: String = ApproxWindowSeen.Name

  override def withOrderedInput: ApproxWindowSeen = copy(orderedInput = true)

  override def answersPerRow: Boolean = true

  override def createAggregationBuffer(): SeenRows = {
    if (!orderedInput) {
      throw new IllegalArgumentException(
        s"$prettyName answers for each row of a running frame ordered by its ts: use it as " +
          s"$prettyName(...) OVER (PARTITION BY ... ORDER BY ts); in GROUP BY or other frames " +
          "use window_filter_sketch and window_filter_contains")
    }
    new SeenRows(newFilter())
  }

  override def update(buffer: SeenRows, input: InternalRow): SeenRows = {
    buffer.answer = feed(buffer.filter, input, answer = true) match {
      case -1 => null
      case seen => seen == 1
    }
    buffer
  }

  override def merge(buffer: SeenRows, other: SeenRows): SeenRows =
    throw new IllegalStateException(s"$prettyName never merges: a running frame feeds one buffer")

  override def eval(buffer: SeenRows): Any = buffer.answer

  override def serialize(buffer: SeenRows): Array[Byte] = SketchFormat.serializeFilter(buffer.filter)

  override def deserialize(bytes: Array[Byte]): SeenRows = new SeenRows(SketchFormat.deserializeFilter(bytes))

  override def nullable: Boolean = true

  override def dataType: DataType = BooleanType

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): ApproxWindowSeen =
    copy(x = newChildren(0), ts = newChildren(1), window = newChildren(2), fpp = newChildren(3))

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowSeen =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowSeen =
    copy(inputAggBufferOffset = newOffset)
}

object ApproxWindowSeen {
  val Name = "approx_window_seen"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, fpp]) - Returns a mergeable filter sketch (BINARY) of the group's
      values for membership questions later: combine sketches with window_filter_sketch_merge
      and ask them with window_filter_contains.
  """,
  arguments = """
    Arguments:
      * x, ts, window, fpp - as for approx_window_seen.
  """,
  examples = """
    Examples:
      > SELECT window_filter_contains(s, 'a'), window_filter_contains(s, 'b'), window_filter_contains(s, 'c') FROM (SELECT _FUNC_(user, ts, 3) AS s FROM VALUES (1, 'a'), (2, 'b'), (5, 'a') AS t(ts, user));
       true	false	false
  """,
  note = """
    The sketch records its window, fpp, time unit and value type; only sketches that agree
    on all four merge. It holds a fingerprint and the latest time of each distinct value of
    its window, 32 + ceil(log2(1 / fpp)) bits and a time each; the format is in
    docs/format.md.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowFilterSketchAgg(
    x: Expression,
    ts: Expression,
    window: Expression,
    fpp: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends FilterAggregate[SlidingFilter] {

  def this(x: Expression, ts: Expression, window: Expression, fpp: Expression) =
    this(x, ts, window, fpp, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(FilterValues.DefaultFpp))

  override def prettyName: String = WindowFilterSketchAgg.Name

  override def createAggregationBuffer(): SlidingFilter = newFilter()

  override def update(buffer: SlidingFilter, input: InternalRow): SlidingFilter = {
    feed(buffer, input, answer = false)
    buffer
  }

  override def merge(buffer: SlidingFilter, other: SlidingFilter): SlidingFilter = {
    buffer.merge(other)
    buffer
  }

  override def eval(buffer: SlidingFilter): Any = serialize(buffer)

  override def serialize(buffer: SlidingFilter): Array[Byte] = SketchFormat.serializeFilter(buffer)

  override def deserialize(bytes: Array[Byte]): SlidingFilter = SketchFormat.deserializeFilter(bytes)

  override def nullable: Boolean = false

  override def dataType: DataType = BinaryType

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): WindowFilterSketchAgg =
    copy(x = newChildren(0), ts = newChildren(1), window = newChildren(2), fpp = newChildren(3))

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowFilterSketchAgg =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowFilterSketchAgg =
    copy(inputAggBufferOffset = newOffset)
}

object WindowFilterSketchAgg {
  val Name = "window_filter_sketch"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch) - Merges the filter sketches of a group into one (BINARY), the sketch one
      window_filter_sketch over all their rows would give. NULL sketches are skipped; a group
      of none gives NULL.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY sketches made by window_filter_sketch with the same window, fpp, kind
          of `ts` and type of `x`.
  """,
  examples = """
    Examples:
      > SELECT window_filter_contains(_FUNC_(s), 'a') FROM (SELECT window_filter_sketch(user, ts, 3) AS s FROM VALUES (1, 'a') AS t(ts, user) UNION ALL SELECT window_filter_sketch(user, ts, 3) FROM VALUES (2, 'b') AS t(ts, user));
       true
  """,
  note = """
    Any merge order gives the same bytes. Sketches of different window, fpp, time unit or
    value type, and bytes that are not a filter sketch, are errors.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowFilterSketchMerge(
    sketch: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends SketchMergeAggregate[SlidingFilter] {

  def this(sketch: Expression) = this(sketch, 0, 0)

  override def prettyName: String = WindowFilterSketchMerge.Name

  override protected def maker: String = WindowFilterSketchAgg.Name

  override protected def read(bytes: Array[Byte]): SlidingFilter = FilterValues.read(bytes, prettyName)

  override protected def write(s: SlidingFilter): Array[Byte] = SketchFormat.serializeFilter(s)

  override protected def mergeInto(into: SlidingFilter, other: SlidingFilter): Unit = into.merge(other)

  override protected def withNewChildInternal(newChild: Expression): WindowFilterSketchMerge =
    copy(sketch = newChild)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowFilterSketchMerge =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowFilterSketchMerge =
    copy(inputAggBufferOffset = newOffset)
}

object WindowFilterSketchMerge {
  val Name = "window_filter_sketch_merge"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch, value[, as_of[, sub_window]]) - Returns whether `value` occurred in a
      filter sketch's window of length `sub_window` (default: the sketch's window) ending at
      `as_of` (default: the sketch's largest `ts`). A value of that window is always found;
      one that is not there is reported with probability at most the sketch's fpp.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY, made by window_filter_sketch or window_filter_sketch_merge. NULL
          gives NULL.
      * value - a value of the type the sketch's `x` had; a narrower number is widened (an
          INT asked of a BIGINT sketch), any other type is an error. NULL gives NULL.
      * as_of - where the window ends: a TIMESTAMP, TIMESTAMP_NTZ or DATE for sketches over
          time, an integral position for sketches over positions. It may not be earlier than
          the sketch's largest `ts`. NULL gives NULL; a bare NULL literal means the argument
          is not given.
      * sub_window - a constant no longer than the sketch's window: a day-time interval for
          sketches over time, a number of positions otherwise.
  """,
  examples = """
    Examples:
      > SELECT _FUNC_(s, 'a'), _FUNC_(s, 'a', 5), _FUNC_(s, 'b', 4, 1), _FUNC_(s, 'c') FROM (SELECT window_filter_sketch(user, ts, 3) AS s FROM VALUES (1, 'a'), (3, 'a'), (4, 'b') AS t(ts, user));
       true	true	true	false
  """,
  note = """
    The value's type must be the sketch's value type or a number that widens to it: a sketch
    knows its type only when its bytes are read, so another type is an error at run time,
    not a silent false.
  """,
  group = "misc_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowFilterContains(
    sketch: Expression,
    value: Expression,
    asOf: Expression,
    subWindow: Expression)
  extends SketchQuery[SlidingFilter] with QuaternaryLike[Expression] {

  def this(sketch: Expression, value: Expression, asOf: Expression) =
    this(sketch, value, asOf, Literal(null, NullType))

  def this(sketch: Expression, value: Expression) = this(sketch, value, Literal(null, NullType))

  @transient private lazy val encode = FilterValues.projection(value)
  // A numeric value widened to a sketch's numeric type (an INT asked of a BIGINT sketch):
  // the projection for the last type met, since the type is known only from the bytes.
  @transient private var widened: (String, UnsafeProjection) = null

  override def prettyName: String = WindowFilterContains.Name

  override protected def asOfIndex: Int = 2

  override protected def maker: String = WindowFilterSketchAgg.Name

  // The last sketch read, with its bytes: a filter holds every distinct value of its
  // window, so asking one sketch of many values (a join, a literal) reads it once, not per row.
  @transient private var lastBytes: Array[Byte] = null
  @transient private var lastSketch: SlidingFilter = null

  override protected def read(bytes: Array[Byte]): SlidingFilter = {
    if (lastBytes == null || !((lastBytes eq bytes) || java.util.Arrays.equals(lastBytes, bytes))) {
      lastSketch = FilterValues.read(bytes, prettyName)
      lastBytes = bytes.clone()
    }
    lastSketch
  }

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(super.checkInputDataTypes(),
      if (value.dataType == NullType) TypeCheckSuccess else RowValues.checkType(value, 1))
      .find(_.isFailure).getOrElse(TypeCheckSuccess)

  override def nullable: Boolean = true

  override def dataType: DataType = BooleanType

  override def eval(input: InternalRow): Any = {
    if (value.eval(input) == null) return null
    sketchAndWindow(input) match {
      case null => null
      case (s, window) =>
        val row = encodeAs(s.itemType)(input)
        val (end, length) = window.getOrElse((s.now, s.window))
        s.hasTime && s.containsAt(FilterValues.fingerprint(s, row), end, length)
    }
  }

  /** The projection giving `value`'s bytes as a value of the sketch's type, or the error. */
  private def encodeAs(itemType: String): UnsafeProjection = {
    if (value.dataType.catalogString == itemType) return encode
    if (widened != null && widened._1 == itemType) return widened._2
    val target = RowValues.typeOf(itemType)
    val numeric = value.dataType.isInstanceOf[NumericType] && target.isInstanceOf[NumericType]
    if (!numeric || !Cast.canUpCast(value.dataType, target)) {
      throw new IllegalArgumentException(
        s"$prettyName: the sketch holds values of type $itemType, but `value` is of type " +
          s"${value.dataType.catalogString}: cast it to $itemType")
    }
    widened = (itemType, FilterValues.projection(Cast(value, target)))
    widened._2
  }

  override def first: Expression = sketch
  override def second: Expression = value
  override def third: Expression = asOf
  override def fourth: Expression = subWindow

  override protected def withNewChildrenInternal(
      newFirst: Expression, newSecond: Expression, newThird: Expression, newFourth: Expression)
    : WindowFilterContains =
    copy(sketch = newFirst, value = newSecond, asOf = newThird, subWindow = newFourth)
}

object WindowFilterContains {
  val Name = "window_filter_contains"
}
