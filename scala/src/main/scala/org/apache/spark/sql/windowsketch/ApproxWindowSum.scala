package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.{DataTypeMismatch, TypeCheckSuccess}
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionDescription, Literal}
import org.apache.spark.sql.errors.QueryErrorsBase
import org.apache.spark.sql.types.{DataType, LongType, NullType}

import windowsketch.core.count.{OrderedSumHistogram, WindowCountSketch}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(value, ts, window[, eps]) - Returns the approximate sum of the non-negative integral
      `value`s in the sliding window that ends at the largest `ts` seen, with
      |result - exact| <= eps * exact guaranteed. Works in window frames (a moving sum per
      row), GROUP BY and streaming alike. In a running frame ordered by `ts` a value costs
      O(1) amortized to add and the sum O(1) to read; elsewhere O(1) to add, however large.
  """,
  arguments = """
    Arguments:
      * value - TINYINT, SMALLINT, INT or BIGINT, at least 0. NULL adds nothing but its `ts`
          still moves the window forward. A negative value is a runtime error naming it.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
      * window - as for approx_window_count: positions for an integral `ts`, a day-time
          interval otherwise.
      * eps - an optional constant relative error in [0.0001, 1); default 0.01.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(qty, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, 5), (2, 0), (3, 100), (4, 7) AS t(ts, qty);
       1	5
       2	5
       3	105
       4	107
  """,
  note = """
    For decimal amounts, sum an integral count of the smallest unit, such as
    CAST(price * 100 AS BIGINT) for cents, and divide the result.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowSum(
    value: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends OrderedCountAggregate with QueryErrorsBase {

  def this(value: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(value, ts, window, eps, false, 0, 0)

  def this(value: Expression, ts: Expression, window: Expression) =
    this(value, ts, window, Literal(WindowArguments.DefaultEps))

  override def v: Expression = value

  override def prettyName: String = ApproxWindowSum.Name

  override def withOrderedInput: ApproxWindowSum = copy(orderedInput = true)

  override protected def timeOrderedBuffer(): WindowCountSketch =
    new OrderedSumHistogram(windowLength, epsilon)

  override protected def checkValueType: TypeCheckResult =
    if (WindowArguments.isIntegral(value.dataType) || value.dataType == NullType) {
      TypeCheckSuccess
    } else {
      DataTypeMismatch(
        errorSubClass = "TYPE_CHECK_FAILURE_WITH_HINT",
        messageParameters = Map(
          "msg" -> (s"The ${toSQLId("value")} must be of an integral type (TINYINT, SMALLINT, " +
            s"INT or BIGINT), but ${toSQLExpr(value)} has the type ${toSQLType(value.dataType)}"),
          "hint" -> ("; for decimal amounts sum an integral count of the smallest unit, e.g. " +
            "CAST(price * 100 AS BIGINT) for cents")))
    }

  override protected def weightOfIntegral(n: Long): Long =
    if (n >= 0) n
    else throw new IllegalArgumentException(
      s"$prettyName: argument `value` must be non-negative, got $n")

  override def eval(buffer: WindowCountSketch): Any = buffer.estimate

  override def nullable: Boolean = false

  override def defaultResult: Option[Literal] = Some(Literal(0L))

  override def dataType: DataType = LongType

  override protected def withNewChildrenInternal(
      newValue: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : ApproxWindowSum = copy(value = newValue, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowSum =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowSum =
    copy(inputAggBufferOffset = newOffset)
}

object ApproxWindowSum {
  val Name = "approx_window_sum"
}
