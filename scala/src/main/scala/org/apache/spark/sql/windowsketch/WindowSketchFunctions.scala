package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.{DataTypeMismatch, TypeCheckSuccess}
import org.apache.spark.sql.catalyst.expressions.{BinaryExpression, Expression,
  ExpressionDescription, Literal}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.catalyst.trees.UnaryLike
import org.apache.spark.sql.errors.QueryErrorsBase
import org.apache.spark.sql.types.{BinaryType, DataType, LongType, NullType}

import windowsketch.core.{CorruptSketchException, IncompatibleSketchException, SketchFormat,
  WindowCountSketch}

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
  def read(bytes: Array[Byte], function: String): WindowCountSketch =
    try SketchFormat.deserialize(bytes)
    catch {
      case e: CorruptSketchException =>
        throw new IllegalArgumentException(s"$function: ${e.getMessage}", e)
    }

  def checkBinary(sketch: Expression): TypeCheckResult =
    if (sketch.dataType == BinaryType || sketch.dataType == NullType) TypeCheckSuccess
    else DataTypeMismatch(
      errorSubClass = "UNEXPECTED_INPUT_TYPE",
      messageParameters = Map(
        "paramIndex" -> "first",
        "requiredType" -> "\"BINARY\" (a sketch made by window_sketch)",
        "inputSql" -> QueryErrors.toSQLExpr(sketch),
        "inputType" -> QueryErrors.toSQLType(sketch.dataType)))

  private object QueryErrors extends QueryErrorsBase
}

/** The running union of window_sketch_merge: empty until the first sketch arrives. */
final class SketchUnion(var sketch: WindowCountSketch)

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
  extends TypedImperativeAggregate[SketchUnion] with UnaryLike[Expression] {

  def this(sketch: Expression) = this(sketch, 0, 0)

  override def prettyName: String = WindowSketchMerge.Name

  override def child: Expression = sketch

  override def checkInputDataTypes(): TypeCheckResult = SketchInput.checkBinary(sketch)

  override def createAggregationBuffer(): SketchUnion = new SketchUnion(null)

  override def update(buffer: SketchUnion, input: InternalRow): SketchUnion = {
    val bytes = sketch.eval(input)
    if (bytes != null) add(buffer, SketchInput.read(bytes.asInstanceOf[Array[Byte]], prettyName))
    buffer
  }

  override def merge(buffer: SketchUnion, other: SketchUnion): SketchUnion = {
    if (other.sketch != null) add(buffer, other.sketch)
    buffer
  }

  private def add(buffer: SketchUnion, s: WindowCountSketch): Unit =
    if (buffer.sketch == null) {
      buffer.sketch = s
    } else {
      try buffer.sketch.merge(s)
      catch {
        case e: IncompatibleSketchException =>
          throw new IllegalArgumentException(s"$prettyName: ${e.getMessage}", e)
      }
    }

  override def eval(buffer: SketchUnion): Any =
    if (buffer.sketch == null) null else SketchFormat.serialize(buffer.sketch)

  // An empty union travels as zero bytes; a sketch never has fewer than 30.
  override def serialize(buffer: SketchUnion): Array[Byte] =
    if (buffer.sketch == null) Array.emptyByteArray else SketchFormat.serialize(buffer.sketch)

  override def deserialize(bytes: Array[Byte]): SketchUnion =
    new SketchUnion(if (bytes.isEmpty) null else SketchInput.read(bytes, prettyName))

  override def dataType: DataType = BinaryType

  override def nullable: Boolean = true

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

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch[, as_of]) - Returns the approximate number of events of a window sketch in
      its window ending at `as_of` (default: the sketch's largest `ts`), within the sketch's
      eps of the exact count.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY, made by window_sketch or window_sketch_merge. NULL gives NULL.
      * as_of - where the window ends: a TIMESTAMP, TIMESTAMP_NTZ or DATE for sketches over
          time, an integral position for sketches over positions. It may not be earlier than
          the sketch's largest `ts` (events after it would be counted). NULL gives NULL.
  """,
  examples = """
    Examples:
      > SELECT _FUNC_(window_sketch(v, ts, 3)), _FUNC_(window_sketch(v, ts, 3), 6) FROM VALUES (1, true), (2, false), (3, true), (4, true) AS t(ts, v);
       2	1
  """,
  group = "misc_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowSketchEstimate(sketch: Expression, asOf: Expression)
  extends BinaryExpression with CodegenFallback {

  def this(sketch: Expression) = this(sketch, Literal(null, NullType))

  override def prettyName: String = WindowSketchEstimate.Name

  override def left: Expression = sketch
  override def right: Expression = asOf

  private def asOfGiven: Boolean = asOf.dataType != NullType

  override def checkInputDataTypes(): TypeCheckResult = {
    val sketchCheck = SketchInput.checkBinary(sketch)
    if (sketchCheck.isFailure) sketchCheck
    else if (!asOfGiven || WindowArguments.isTemporal(asOf.dataType) ||
        WindowArguments.isIntegral(asOf.dataType)) TypeCheckSuccess
    else WindowArguments.checkTimeType(asOf) match {
      case DataTypeMismatch(sub, params) =>
        DataTypeMismatch(sub, params + ("paramIndex" -> "second"))
      case other => other
    }
  }

  override def nullable: Boolean = sketch.nullable || (asOfGiven && asOf.nullable)

  override def dataType: DataType = LongType

  override def eval(input: InternalRow): Any = {
    val bytes = sketch.eval(input)
    if (bytes == null) return null
    val s = SketchInput.read(bytes.asInstanceOf[Array[Byte]], prettyName)
    if (asOfGiven) {
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
      s.update(t, isEvent = false)
    }
    s.estimate
  }

  override protected def withNewChildrenInternal(
      newLeft: Expression, newRight: Expression): WindowSketchEstimate =
    copy(sketch = newLeft, asOf = newRight)
}

object WindowSketchEstimate {
  val Name = "window_sketch_estimate"
}
