package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.{DataTypeMismatch, TypeCheckSuccess}
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionDescription, Literal}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.catalyst.trees.{TernaryLike, UnaryLike}
import org.apache.spark.sql.types.{BinaryType, DataType, LongType, NullType}

import windowsketch.core.{CorruptSketchException, SketchAxis, SketchFormat, StoredDistinct}
import windowsketch.core.count.{DyadicWindowSketch, WindowCountSketch}
import windowsketch.core.hll.SlidingHyperLogLog
import windowsketch.core.quantiles.SlidingQuantiles

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(v, ts, window[, eps]) - Returns a mergeable sketch (BINARY) of the events of the
      group, for counts in sliding windows later: combine sketches with window_sketch_merge and
      read them with window_sketch_estimate, as one keeps HLL sketches per key per day.
  """,
  arguments = """
    Arguments:
      * v - BOOLEAN, or an integral column holding 0 or 1: TRUE / 1 is an event.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
      * window - a constant: positions for an integral `ts`, a day-time interval otherwise.
      * eps - an optional constant relative error in [0.0001, 1); default 0.01.
  """,
  examples = """
    Examples:
      > SELECT window_sketch_estimate(_FUNC_(v, ts, 3)) FROM VALUES (1, true), (2, false), (3, true), (4, true) AS t(ts, v);
       2
  """,
  note = """
    The sketch records its window, eps and time unit; only sketches that agree on all three
    merge. Its size stays near the time-ordered histogram's: about 4 KB at window 10^9 and
    eps 0.01, whatever the row order and the number of merges. The format is in docs/format.md.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowSketchAgg(
    v: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends WindowCountAggregate {

  def this(v: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(v, ts, window, eps, 0, 0)

  def this(v: Expression, ts: Expression, window: Expression) =
    this(v, ts, window, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = WindowSketchAgg.Name

  override def eval(buffer: WindowCountSketch): Any = SketchFormat.serialize(buffer)

  override def dataType: DataType = BinaryType

  override def nullable: Boolean = false

  override protected def withNewChildrenInternal(
      newV: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : WindowSketchAgg = copy(v = newV, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowSketchAgg =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowSketchAgg =
    copy(inputAggBufferOffset = newOffset)
}

object WindowSketchAgg {
  val Name = "window_sketch"
}

/** Reads sketch bytes from a column, naming the function in every error. */
private[windowsketch] object SketchInput {
  // Called per row: a try in each, no by-name closure to allocate.
  def read(bytes: Array[Byte], function: String): WindowCountSketch =
    try SketchFormat.deserialize(bytes)
    catch { case e: CorruptSketchException => throw named(function, e) }

  def readDistinct(bytes: Array[Byte], function: String): SlidingHyperLogLog =
    try SketchFormat.deserializeDistinct(bytes)
    catch { case e: CorruptSketchException => throw named(function, e) }

  def readStoredDistinct(bytes: Array[Byte], function: String): StoredDistinct =
    try SketchFormat.readStoredDistinct(bytes)
    catch { case e: CorruptSketchException => throw named(function, e) }

  def readQuantiles(bytes: Array[Byte], function: String): SlidingQuantiles =
    try SketchFormat.deserializeQuantiles(bytes)
    catch { case e: CorruptSketchException => throw named(function, e) }

  def named(function: String, e: CorruptSketchException): IllegalArgumentException =
    new IllegalArgumentException(s"$function: ${e.getMessage}", e)

  def checkBinary(sketch: Expression, maker: String): TypeCheckResult =
    if (sketch.dataType == BinaryType || sketch.dataType == NullType) TypeCheckSuccess
    else DataTypeMismatch(
      errorSubClass = "UNEXPECTED_INPUT_TYPE",
      messageParameters = Map(
        "paramIndex" -> QueryErrors.paramIndex(0),
        "requiredType" -> ("\"BINARY\" (a sketch made by " + maker + ")"),
        "inputSql" -> QueryErrors.toSQLExpr(sketch),
        "inputType" -> QueryErrors.toSQLType(sketch.dataType)))
}

/** The running union of a sketch-merge aggregate: empty (null) until the first sketch. */
final class SketchUnion[S <: AnyRef](var sketch: S)

/**
 * What window_sketch_merge and window_distinct_sketch_merge share: the union of a group's
 * sketch column, NULLs skipped, every error naming the function. Subclasses read, merge
 * and write their kind of sketch.
 */
abstract class SketchMergeAggregate[S <: AnyRef]
  extends TypedImperativeAggregate[SketchUnion[S]] with UnaryLike[Expression] {

  def sketch: Expression

  /** The aggregate that makes this kind of sketch, for messages. */
  protected def maker: String
  protected def read(bytes: Array[Byte]): S
  protected def write(s: S): Array[Byte]
  /** Adds `other` into `into`; throws IllegalArgumentException if they cannot merge. */
  protected def mergeInto(into: S, other: S): Unit
  /**
   * Adds the sketch in `bytes` into `into`: [[mergeInto]] of what [[read]] gives, unless a
   * family reads the bytes straight into the union (errors through [[failure]]).
   */
  protected def mergeBytesInto(into: S, bytes: Array[Byte]): Unit = add(into, read(bytes))

  override def child: Expression = sketch

  override def checkInputDataTypes(): TypeCheckResult = SketchInput.checkBinary(sketch, maker)

  override def createAggregationBuffer(): SketchUnion[S] = new SketchUnion[S](null.asInstanceOf[S])

  override def update(buffer: SketchUnion[S], input: InternalRow): SketchUnion[S] = {
    val bytes = sketch.eval(input).asInstanceOf[Array[Byte]]
    if (bytes != null) {
      if (buffer.sketch == null) buffer.sketch = read(bytes)
      else mergeBytesInto(buffer.sketch, bytes)
    }
    buffer
  }

  override def merge(buffer: SketchUnion[S], other: SketchUnion[S]): SketchUnion[S] = {
    if (other.sketch != null) {
      if (buffer.sketch == null) buffer.sketch = other.sketch
      else add(buffer.sketch, other.sketch)
    }
    buffer
  }

  private def add(into: S, s: S): Unit =
    try mergeInto(into, s)
    catch {
      case e: IllegalArgumentException => throw failure(e)
      case e: UnsupportedOperationException => throw failure(e)
    }

  /** A merge's error, naming the function (bytes that are not a sketch read as such). */
  protected final def failure(e: RuntimeException): IllegalArgumentException =
    new IllegalArgumentException(s"$prettyName: ${e.getMessage}", e)

  override def eval(buffer: SketchUnion[S]): Any =
    if (buffer.sketch == null) null else write(buffer.sketch)

  // An empty union travels as zero bytes; a sketch never has fewer than 30.
  override def serialize(buffer: SketchUnion[S]): Array[Byte] =
    if (buffer.sketch == null) Array.emptyByteArray else write(buffer.sketch)

  override def deserialize(bytes: Array[Byte]): SketchUnion[S] =
    new SketchUnion[S](if (bytes.isEmpty) null.asInstanceOf[S] else read(bytes))

  override def dataType: DataType = BinaryType

  override def nullable: Boolean = true
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch) - Merges the window sketches of a group into one (BINARY), as if one
      window_sketch had seen all their events. NULL sketches are skipped; a group of none
      gives NULL.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY sketches made by window_sketch with the same window, eps and kind of `ts`.
  """,
  examples = """
    Examples:
      > SELECT window_sketch_estimate(_FUNC_(s)) FROM (SELECT window_sketch(v, ts, 3) AS s FROM VALUES (1, true), (2, false) AS t(ts, v) UNION ALL SELECT window_sketch(v, ts, 3) FROM VALUES (3, true), (4, true) AS t(ts, v));
       2
  """,
  note = """
    The error of the merged sketch does not grow with the number of merges. Sketches of
    different window, eps or time unit, and bytes that are not a sketch, are errors.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowSketchMerge(
    sketch: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends SketchMergeAggregate[WindowCountSketch] with BoundedBufferAggregate {

  def this(sketch: Expression) = this(sketch, 0, 0)

  // The sketches' parameters are in their bytes, unknown until they are read.
  override def bufferBytesBound: Long = DyadicWindowSketch.MaxHeldBytes

  override def heldBytes(buffer: Any): Long = buffer.asInstanceOf[SketchUnion[WindowCountSketch]].sketch match {
    case d: DyadicWindowSketch => d.heldBytes
    case null => 0L // no sketch read yet
    case _ => bufferBytesBound
  }

  override def prettyName: String = WindowSketchMerge.Name

  override protected def maker: String = WindowSketchAgg.Name

  override protected def read(bytes: Array[Byte]): WindowCountSketch =
    SketchInput.read(bytes, prettyName)

  override protected def write(s: WindowCountSketch): Array[Byte] = SketchFormat.serialize(s)

  // Different parameters, or bytes of the time-ordered kind, which cannot merge.
  override protected def mergeInto(into: WindowCountSketch, other: WindowCountSketch): Unit =
    into.merge(other)

  override protected def withNewChildInternal(newChild: Expression): WindowSketchMerge =
    copy(sketch = newChild)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowSketchMerge =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowSketchMerge =
    copy(inputAggBufferOffset = newOffset)
}

object WindowSketchMerge {
  val Name = "window_sketch_merge"
}

/**
 * A query of a sketch column: the window ending at `as_of` (default: the sketch's largest
 * ts) and `sub_window` long (default: the sketch's window). Arguments left out are NULL
 * literals of type NULL, which is what the shorter SQL forms pass.
 */
abstract class SketchQuery[S <: SketchAxis] extends Expression with CodegenFallback {
  def sketch: Expression
  def asOf: Expression
  def subWindow: Expression

  /** The aggregate that makes this kind of sketch, for messages. */
  protected def maker: String
  protected def read(bytes: Array[Byte]): S

  override def foldable: Boolean = children.forall(_.foldable)

  private def asOfGiven: Boolean = asOf.dataType != NullType
  private def subWindowGiven: Boolean = subWindow.dataType != NullType

  private lazy val subWindowLength: Long =
    WindowArguments.windowLength(subWindow, asOf, "sub_window", "as_of").toOption.get

  /** The 0-based position of `as_of` among the arguments, for errors naming it. */
  protected def asOfIndex: Int = 1

  override def checkInputDataTypes(): TypeCheckResult = {
    val asOfCheck =
      if (!asOfGiven) TypeCheckSuccess else WindowArguments.checkTimeType(asOf, index = asOfIndex)
    val subWindowCheck =
      if (!subWindowGiven) TypeCheckSuccess
      else if (!asOfGiven) WindowArguments.unexpectedType(
        asOfIndex, "(\"TIMESTAMP\" or \"TIMESTAMP_NTZ\" or \"DATE\" or an integral type)", asOf)
      else WindowArguments.windowLength(subWindow, asOf, "sub_window", "as_of")
        .left.getOrElse(TypeCheckSuccess)
    Seq(SketchInput.checkBinary(sketch, maker), asOfCheck, subWindowCheck)
      .find(_.isFailure).getOrElse(TypeCheckSuccess)
  }

  override def nullable: Boolean = sketch.nullable || (asOfGiven && asOf.nullable)

  /**
   * The row's sketch with the window asked of it: `Some((end, length))` on the sketch's
   * time axis, checked against the sketch, or None when `as_of` is not given (the window
   * ending at the sketch's `now`). Null when the sketch or `as_of` is NULL.
   */
  protected def sketchAndWindow(input: InternalRow): (S, Option[(Long, Long)]) = {
    val bytes = sketch.eval(input)
    if (bytes == null) return null
    val s = read(bytes.asInstanceOf[Array[Byte]])
    if (!asOfGiven) return (s, None)
    val end = asOf.eval(input)
    if (end == null) return null
    val temporal = WindowArguments.isTemporal(asOf.dataType)
    if (temporal != s.microsecondTime) {
      throw new IllegalArgumentException(
        s"$prettyName: the sketch counts ${if (s.microsecondTime) "time" else "positions"}" +
          s" but as_of is of type ${asOf.dataType.sql}")
    }
    val t = WindowArguments.timeOf(end, asOf.dataType)
    if (s.hasTime && t < s.now) {
      throw new IllegalArgumentException(
        s"$prettyName: as_of (${WindowArguments.describeTime(t, temporal)}) is earlier than " +
          s"the sketch's latest ts (${WindowArguments.describeTime(s.now, temporal)}); the " +
          "sketch cannot leave out events after as_of")
    }
    val length = if (subWindowGiven) subWindowLength else s.window
    if (length > s.window) {
      throw new IllegalArgumentException(
        s"$prettyName: sub_window ${subWindow.sql} is longer than the sketch's window")
    }
    (s, Some((t, length)))
  }
}

/** A query of a sketch column whose arguments are (sketch[, as_of[, sub_window]]). */
trait ThreeArgumentSketchQuery extends TernaryLike[Expression] { self: SketchQuery[_] =>
  override def first: Expression = sketch
  override def second: Expression = asOf
  override def third: Expression = subWindow
}

/** Queries of count sketches (window_sketch): (estimate, lower, upper) in the window. */
abstract class CountSketchQuery extends SketchQuery[WindowCountSketch]
  with ThreeArgumentSketchQuery {
  override protected def maker: String = WindowSketchAgg.Name

  override protected def read(bytes: Array[Byte]): WindowCountSketch =
    SketchInput.read(bytes, prettyName)

  /** (estimate, lower, upper) of the sketch in the queried window, or null. */
  protected def query(input: InternalRow): Array[Long] =
    sketchAndWindow(input) match {
      case null => null
      case (s, None) => s.bounds
      case (d: DyadicWindowSketch, Some((t, length))) => d.boundsAt(t, length)
      case (other, Some((t, length))) if length == other.window =>
        other.update(t, isEvent = false)
        other.bounds
      case _ => throw new IllegalArgumentException(
        s"$prettyName: sub-window queries need a sketch made by window_sketch")
    }
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch[, as_of[, sub_window]]) - Returns the approximate number of events
      of a window sketch in the window of length `sub_window` (default: the sketch's window)
      ending at `as_of` (default: the sketch's largest `ts`), within the sketch's eps of the
      exact count.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY, made by window_sketch or window_sketch_merge. NULL gives NULL.
      * as_of - where the window ends: a TIMESTAMP, TIMESTAMP_NTZ or DATE for sketches over
          time, an integral position for sketches over positions. It may not be earlier than
          the sketch's largest `ts` (events after it would be counted). NULL gives NULL;
          a bare NULL literal means the argument is not given.
      * sub_window - a constant no longer than the sketch's window: a day-time interval for
          sketches over time, a number of positions otherwise. Any sub-window keeps the
          sketch's relative error guarantee.
  """,
  examples = """
    Examples:
      > SELECT _FUNC_(window_sketch(v, ts, 3)), _FUNC_(window_sketch(v, ts, 3), 6), _FUNC_(window_sketch(v, ts, 3), 4, 1) FROM VALUES (1, true), (2, false), (3, true), (4, true) AS t(ts, v);
       2	1	1
  """,
  group = "misc_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowSketchEstimate(sketch: Expression, asOf: Expression, subWindow: Expression)
  extends CountSketchQuery {

  def this(sketch: Expression, asOf: Expression) = this(sketch, asOf, Literal(null, NullType))

  def this(sketch: Expression) = this(sketch, Literal(null, NullType))

  override def prettyName: String = WindowSketchEstimate.Name

  override def dataType: DataType = LongType

  override def eval(input: InternalRow): Any = {
    val bounds = query(input)
    if (bounds == null) null else bounds(0)
  }

  override protected def withNewChildrenInternal(
      newFirst: Expression, newSecond: Expression, newThird: Expression)
    : WindowSketchEstimate = copy(sketch = newFirst, asOf = newSecond, subWindow = newThird)
}

object WindowSketchEstimate {
  val Name = "window_sketch_estimate"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch[, as_of[, sub_window]]) - Returns window_sketch_estimate's estimate with
      certified bounds: a struct (estimate, lower, upper) with lower <= exact <= upper.
  """,
  arguments = """
    Arguments:
      * sketch, as_of, sub_window - as for window_sketch_estimate.
  """,
  examples = """
    Examples:
      > SELECT _FUNC_(window_sketch(v, ts, 3)) FROM VALUES (1, true), (2, false), (3, true), (4, true) AS t(ts, v);
       Row(estimate=2, lower=2, upper=2)
  """,
  group = "misc_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowSketchBounds(sketch: Expression, asOf: Expression, subWindow: Expression)
  extends CountSketchQuery {

  def this(sketch: Expression, asOf: Expression) = this(sketch, asOf, Literal(null, NullType))

  def this(sketch: Expression) = this(sketch, Literal(null, NullType))

  override def prettyName: String = WindowSketchBounds.Name

  override def dataType: DataType = Bounds.Type

  override def eval(input: InternalRow): Any = {
    val bounds = query(input)
    if (bounds == null) null else Bounds.row(bounds)
  }

  override protected def withNewChildrenInternal(
      newFirst: Expression, newSecond: Expression, newThird: Expression)
    : WindowSketchBounds = copy(sketch = newFirst, asOf = newSecond, subWindow = newThird)
}

object WindowSketchBounds {
  val Name = "window_sketch_bounds"
}
