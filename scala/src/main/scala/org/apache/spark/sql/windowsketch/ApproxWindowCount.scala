package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionDescription,
  GenericInternalRow, Literal}
import org.apache.spark.sql.types.{DataType, LongType, StructField, StructType}

import windowsketch.core.count.{ExponentialHistogram, OutOfOrderEventException, WindowCountSketch}

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
  extends OrderedCountAggregate {

  def this(v: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(v, ts, window, eps, false, 0, 0)

  def this(v: Expression, ts: Expression, window: Expression) =
    this(v, ts, window, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = ApproxWindowCount.Name

  override def withOrderedInput: ApproxWindowCount = copy(orderedInput = true)

  override def eval(buffer: WindowCountSketch): Any = buffer.estimate

  override def nullable: Boolean = false

  override def defaultResult: Option[Literal] = Some(Literal(0L))

  override def dataType: DataType = LongType

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
}

/**
 * A count (or sum) that can run on the time-ordered histogram: in a running frame ordered
 * by `ts`, [[OrderedWindowFrames]] sets `orderedInput`, as rows then arrive in time order
 * and are never merged. Everything else gets the mergeable any-order sketch.
 */
abstract class OrderedCountAggregate extends WindowCountAggregate with OrderedInputAggregate {
  def withOrderedInput: OrderedCountAggregate

  /** The time-ordered structure for running frames: the count's exponential histogram. */
  protected def timeOrderedBuffer(): WindowCountSketch =
    new ExponentialHistogram(windowLength, epsilon)

  override def createAggregationBuffer(): WindowCountSketch =
    if (orderedInput) labelled(timeOrderedBuffer())
    else super.createAggregationBuffer()

  override def update(buffer: WindowCountSketch, input: InternalRow): WindowCountSketch =
    try super.update(buffer, input)
    catch {
      case e: OutOfOrderEventException =>
        throw new IllegalStateException(
          s"$prettyName: an event at ts=${e.ts} arrived after an event at ts=${e.newest} in " +
            "a window frame ordered by ts; please report this with the query", e)
    }
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(v, ts, window[, eps]) - Returns approx_window_count's estimate with certified
      bounds: a struct (estimate, lower, upper) with lower <= exact <= upper always and
      |estimate - exact| <= eps * exact.
  """,
  arguments = """
    Arguments:
      * v, ts, window, eps - as for approx_window_count.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(v, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, true), (2, false), (3, true), (4, true) AS t(ts, v);
       1	Row(estimate=1, lower=1, upper=1)
       2	Row(estimate=1, lower=1, upper=1)
       3	Row(estimate=2, lower=2, upper=2)
       4	Row(estimate=2, lower=2, upper=2)
  """,
  note = """
    The bounds are exact whenever the sketch can tell, and their width is what the
    estimate could be off by: a width of 0 means the estimate is exact.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowCountBounds(
    v: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends OrderedCountAggregate {

  def this(v: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(v, ts, window, eps, false, 0, 0)

  def this(v: Expression, ts: Expression, window: Expression) =
    this(v, ts, window, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = ApproxWindowCountBounds.Name

  override def withOrderedInput: ApproxWindowCountBounds = copy(orderedInput = true)

  override def eval(buffer: WindowCountSketch): Any = Bounds.row(buffer.bounds)

  override def nullable: Boolean = false

  override def defaultResult: Option[Literal] = Some(Bounds.zero)

  override def dataType: DataType = Bounds.Type

  override protected def withNewChildrenInternal(
      newV: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : ApproxWindowCountBounds = copy(v = newV, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowCountBounds =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowCountBounds =
    copy(inputAggBufferOffset = newOffset)
}

object ApproxWindowCountBounds {
  val Name = "approx_window_count_bounds"
}

/** The STRUCT<estimate, lower, upper> the bounds functions return. */
private[windowsketch] object Bounds {
  val Type: StructType = StructType(Seq(
    StructField("estimate", LongType, nullable = false),
    StructField("lower", LongType, nullable = false),
    StructField("upper", LongType, nullable = false)))

  def row(bounds: Array[Long]): InternalRow =
    new GenericInternalRow(Array[Any](bounds(0), bounds(1), bounds(2)))

  val zero: Literal = Literal(row(Array(0L, 0L, 0L)), Type)
}
