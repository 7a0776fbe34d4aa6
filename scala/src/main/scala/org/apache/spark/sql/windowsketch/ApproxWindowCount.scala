package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionDescription, Literal}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.trees.QuaternaryLike
import org.apache.spark.sql.types.{BooleanType, DataType, LongType}

import windowsketch.core.{DyadicWindowSketch, ExponentialHistogram, OutOfOrderEventException,
  SketchFormat, WindowCountSketch}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(v, ts, window[, eps]) - Returns the approximate number of rows whose `v` is TRUE (or 1)
      in the sliding window that ends at the largest `ts` seen (per group in GROUP BY), with
      |result - exact| <= eps * exact guaranteed, whatever the order of the rows. Over a running window frame
      (`OVER (PARTITION BY ... ORDER BY ts)`) it returns, for every row, the count in the window
      ending at that row's `ts`, in amortized O(1) time per row and O((1/eps) log N) memory.
  """,
  arguments = """
    Arguments:
      * v - BOOLEAN, or an integral column holding 0 or 1: TRUE / 1 is an event. NULL is not an
          event but its `ts` still moves the window forward.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
          Rows whose `ts` is NULL are ignored.
      * window - a constant. For an integral `ts`, a positive integer N: the window is
          (now - N, now], the last N positions. For a temporal `ts`, a positive day-time
          interval such as INTERVAL 10 MINUTES or '10 minutes': the window is
          [now - window, now].
      * eps - an optional constant relative error in [0.0001, 1); default 0.01.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(v, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, true), (2, false), (3, true), (4, true) AS t(ts, v);
       1	1
       2	1
       3	2
       4	2
      > SELECT ts, _FUNC_(status = 404, ts, INTERVAL 10 MINUTES, 0.05) OVER (ORDER BY ts) FROM VALUES (404, TIMESTAMP'2025-01-01 10:00:00'), (404, TIMESTAMP'2025-01-01 10:05:00'), (200, TIMESTAMP'2025-01-01 10:12:00') AS t(status, ts);
       2025-01-01 10:00:00	1
       2025-01-01 10:05:00	2
       2025-01-01 10:12:00	1
      > SELECT host, _FUNC_(status = 404, ts, INTERVAL 10 MINUTES) FROM VALUES ('a', 404, TIMESTAMP'2025-01-01 10:00:00'), ('a', 404, TIMESTAMP'2025-01-01 10:05:00'), ('a', 200, TIMESTAMP'2025-01-01 10:12:00'), ('b', 404, TIMESTAMP'2025-01-01 09:00:00') AS t(host, status, ts) GROUP BY host ORDER BY host;
       a	1
       b	1
  """,
  note = """
    The result is never NULL: an empty window counts 0. Rows may arrive in any order and
    partial results merge, so GROUP BY and Structured Streaming keep the guarantee; in a
    running window frame ordered by `ts` a time-ordered exponential histogram answers each
    row in O(1).
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowCount(
    v: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends TypedImperativeAggregate[WindowCountSketch]
  with QuaternaryLike[Expression] {

  def this(v: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(v, ts, window, eps, false, 0, 0)

  def this(v: Expression, ts: Expression, window: Expression) =
    this(v, ts, window, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = ApproxWindowCount.Name

  // Lazy so the constants are read once, after the checks, never during tree transforms.
  private lazy val windowLength: Long = WindowArguments.windowLength(window, ts).toOption.get
  private lazy val epsilon: Double = WindowArguments.epsValue(eps).toOption.get
  private lazy val eventIsBoolean: Boolean = v.dataType == BooleanType
  private lazy val tsType: DataType = ts.dataType

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(
      WindowArguments.checkEventType(v),
      WindowArguments.checkTimeType(ts),
      WindowArguments.windowLength(window, ts).left.getOrElse(TypeCheckSuccess),
      WindowArguments.epsValue(eps).left.getOrElse(TypeCheckSuccess)
    ).find(_.isFailure).getOrElse(TypeCheckSuccess)

  /**
   * `orderedInput` is set by [[OrderedWindowFrames]] when the aggregate runs in a running
   * frame ordered by `ts`: rows then arrive in time order and are never merged, which is
   * what the histogram needs. Everything else gets the mergeable any-order sketch.
   */
  override def createAggregationBuffer(): WindowCountSketch =
    if (orderedInput) new ExponentialHistogram(windowLength, epsilon)
    else new DyadicWindowSketch(windowLength, epsilon)

  override def update(buffer: WindowCountSketch, input: InternalRow): WindowCountSketch = {
    val time = ts.eval(input)
    if (time != null) {
      val t = WindowArguments.timeOf(time, tsType)
      try buffer.update(t, isEvent(v.eval(input)))
      catch {
        case e: OutOfOrderEventException => throw ApproxWindowCount.outOfOrder(e)
      }
    }
    buffer
  }

  private def isEvent(value: Any): Boolean = value match {
    case null => false
    case b: Boolean if eventIsBoolean => b
    case n =>
      val x = WindowArguments.integralValue(n, v.dataType)
      if (x == 0L) false
      else if (x == 1L) true
      else throw new IllegalArgumentException(
        s"${ApproxWindowCount.Name}: argument `v` must be TRUE/FALSE or 0/1, got $x " +
          "(for sums of larger values use a sum, not a count)")
  }

  override def merge(buffer: WindowCountSketch, other: WindowCountSketch): WindowCountSketch = {
    buffer.merge(other)
    buffer
  }

  override def eval(buffer: WindowCountSketch): Any = buffer.estimate

  override def serialize(buffer: WindowCountSketch): Array[Byte] =
    SketchFormat.serialize(buffer)

  override def deserialize(bytes: Array[Byte]): WindowCountSketch =
    SketchFormat.deserialize(bytes)

  override def nullable: Boolean = false

  override def defaultResult: Option[Literal] = Some(Literal(0L))

  override def dataType: DataType = LongType

  override def first: Expression = v
  override def second: Expression = ts
  override def third: Expression = window
  override def fourth: Expression = eps

  override protected def withNewChildrenInternal(
      newV: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : ApproxWindowCount = copy(v = newV, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowCount =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowCount =
    copy(inputAggBufferOffset = newOffset)
}

object ApproxWindowCount {
  val Name = "approx_window_count"

  def outOfOrder(e: OutOfOrderEventException): Throwable =
    new IllegalStateException(
      s"$Name: an event at ts=${e.ts} arrived after an event at ts=${e.newest} in a window " +
        "frame ordered by ts; please report this with the query", e)
}
