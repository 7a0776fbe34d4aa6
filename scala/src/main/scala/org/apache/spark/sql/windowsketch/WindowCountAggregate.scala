package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.trees.QuaternaryLike
import org.apache.spark.sql.types.{BooleanType, DataType}

import windowsketch.core.SketchFormat
import windowsketch.core.count.{DyadicWindowSketch, WindowCountSketch}

/**
 * What the aggregates over `(v, ts, window [, eps])` share: the argument checks, reading
 * rows into a sketch, merging and the binary state. Subclasses choose the result.
 */
abstract class WindowCountAggregate
  extends TypedImperativeAggregate[WindowCountSketch] with QuaternaryLike[Expression]
  with BoundedBufferAggregate with WordInputAggregate {

  def v: Expression
  def ts: Expression
  def window: Expression
  def eps: Expression

  // Lazy so the constants are read once, after the checks, never during tree transforms.
  protected lazy val windowLength: Long =
    WindowArguments.windowLength(window, ts).toOption.get
  protected lazy val epsilon: Double = WindowArguments.epsValue(eps).toOption.get
  private lazy val eventIsBoolean: Boolean = v.dataType == BooleanType
  private lazy val microsecondTime: Boolean = WindowArguments.isTemporal(ts.dataType)

  /** Which types `v` may have: events (BOOLEAN or 0/1) unless a subclass says otherwise. */
  protected def checkValueType: TypeCheckResult = WindowArguments.checkEventType(v)

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(
      checkValueType,
      WindowArguments.checkTimeType(ts),
      WindowArguments.windowLength(window, ts).left.getOrElse(TypeCheckSuccess),
      WindowArguments.epsValue(eps).left.getOrElse(TypeCheckSuccess)
    ).find(_.isFailure).getOrElse(TypeCheckSuccess)

  /** The mergeable any-order sketch, tagged with the unit of the time axis. */
  protected def labelled(sketch: WindowCountSketch): WindowCountSketch = {
    sketch.microsecondTime = microsecondTime
    sketch
  }

  override def bufferBytesBound: Long = DyadicWindowSketch.heldBytesBound(windowLength, epsilon)

  override def heldBytes(buffer: Any): Long = buffer match {
    case d: DyadicWindowSketch => d.heldBytes
    case _ => bufferBytesBound
  }

  override def createAggregationBuffer(): WindowCountSketch =
    labelled(new DyadicWindowSketch(windowLength, epsilon))

  // Arguments that are columns (most are) are read from the row without boxing.
  @transient private lazy val time = new TimeArgument(ts)
  private lazy val integralColumn: Int =
    if (eventIsBoolean) -1 else WindowArguments.columnOf(v)

  override def update(buffer: WindowCountSketch, input: InternalRow): WindowCountSketch = {
    if (!time.isNullIn(input)) buffer.add(time.of(input), weightIn(input))
    buffer
  }

  override def readWords(input: InternalRow, words: Array[Long], at: Int): Int =
    if (time.isNullIn(input)) WordInputAggregate.Skip
    else {
      words(at) = time.of(input)
      words(at + 1) = weightIn(input)
      WordInputAggregate.Apply
    }

  override def updateWords(buffer: AnyRef, tag: Int, t: Long, weight: Long): AnyRef = {
    buffer.asInstanceOf[WindowCountSketch].add(t, weight)
    buffer
  }

  private def weightIn(input: InternalRow): Long =
    if (integralColumn < 0) weightOf(v.eval(input))
    else if (input.isNullAt(integralColumn)) 0L
    else weightOfIntegral(WindowArguments.integralAt(input, integralColumn, v.dataType))

  /** What a row adds: 1 for an event, 0 otherwise (NULL included). */
  private def weightOf(value: Any): Long = value match {
    case null => 0L
    case b: Boolean if eventIsBoolean => if (b) 1L else 0L
    case n => weightOfIntegral(WindowArguments.integralValue(n, v.dataType))
  }

  /** What a non-null integral `v` adds: itself, if 0 or 1. */
  protected def weightOfIntegral(x: Long): Long =
    if (x == 0L || x == 1L) x
    else throw new IllegalArgumentException(
      s"$prettyName: argument `v` must be TRUE/FALSE or 0/1, got $x " +
        "(for sums of larger values use approx_window_sum)")

  override def merge(buffer: WindowCountSketch, other: WindowCountSketch): WindowCountSketch = {
    buffer.merge(other)
    buffer
  }

  override def serialize(buffer: WindowCountSketch): Array[Byte] =
    SketchFormat.serialize(buffer)

  override def deserialize(bytes: Array[Byte]): WindowCountSketch =
    SketchFormat.deserializeBuffer(bytes)

  override def first: Expression = v
  override def second: Expression = ts
  override def third: Expression = window
  override def fourth: Expression = eps
}
