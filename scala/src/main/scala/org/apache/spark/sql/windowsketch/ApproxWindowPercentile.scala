package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess
import org.apache.spark.sql.catalyst.expressions.{Cast, Expression, ExpressionDescription,
  GenericInternalRow, Literal}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.util.{ArrayData, GenericArrayData}
import org.apache.spark.sql.errors.QueryErrorsBase
import org.apache.spark.sql.types._

import windowsketch.core.SketchFormat
import windowsketch.core.quantiles.{CompactQuantiles, SlidingQuantiles}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window, percentage[, eps]) - Returns the percentile of the non-NULL `x` in
      the sliding window that ends at the largest `ts` seen (per group in GROUP BY), as
      percentile_approx defines it: the smallest value of the window such that at least
      `percentage` of the window's values are less than or equal to it. When `percentage`
      is an array, returns the array of those percentiles. The answer is a value of the
      window whose rank is within `eps` * n of `percentage` * n (n the window's non-NULL
      values). Exact (rank error 0) while the window holds at most the exact limit, the
      largest power of two at most 64 / eps (4,096 values at eps 0.01; in a running frame
      ordered by `ts`, 320 / eps, at most 65,536: 16,384 at eps 0.01); past it, in every
      frame and in GROUP BY, a compact summary set by eps (about 440 KB at 10^6 values,
      1.1 MB at 10^9, eps 0.01) meets the bound with probability at least 1 - 2 * 10^-4 per
      answer (docs/percentiles.md). Over a running window frame ordered by `ts` a row costs
      amortized O(log n) in exact mode and a few binary searches past it.
  """,
  arguments = """
    Arguments:
      * x - a numeric, DATE, TIMESTAMP, TIMESTAMP_NTZ or ANSI interval value, as
          percentile_approx takes; NULL is skipped but its `ts` still moves the window.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
          Rows whose `ts` is NULL are ignored.
      * window - as for approx_window_count: N positions for an integral `ts`, `(now - N, now]`;
          a positive day-time interval for a temporal `ts`, `[now - window, now]`.
      * percentage - a constant DOUBLE in [0, 1], or a constant ARRAY of them.
      * eps - an optional constant rank error in [0.0001, 1); default 0.01.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(ms, ts, 3, 0.5) OVER (ORDER BY ts) FROM VALUES (1, 30), (2, 10), (3, 20), (4, 50), (5, 40) AS t(ts, ms);
       1	30
       2	10
       3	20
       4	20
       5	40
      > SELECT host, _FUNC_(ms, ts, INTERVAL 5 MINUTES, array(0.5, 0.99)) FROM VALUES ('a', 12, TIMESTAMP'2025-01-01 10:00:00'), ('a', 90, TIMESTAMP'2025-01-01 10:04:00'), ('a', 15, TIMESTAMP'2025-01-01 10:06:00') AS t(host, ms, ts) GROUP BY host;
       a	[15, 90]
  """,
  note = """
    The result has the type of `x` (an array of it for an array `percentage`) and is NULL
    when the window holds no non-NULL `x`. Values are ranked as doubles, as
    percentile_approx ranks them.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowPercentile(
    x: Expression,
    ts: Expression,
    window: Expression,
    percentage: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends PercentileAggregate with PercentagesArgument with OrderedInputAggregate {

  def this(x: Expression, ts: Expression, window: Expression, percentage: Expression,
      eps: Expression) = this(x, ts, window, percentage, eps, false, 0, 0)

  override def withOrderedInput: ApproxWindowPercentile = copy(orderedInput = true)

  override protected def heldInMemoryOnly: Boolean = orderedInput

  def this(x: Expression, ts: Expression, window: Expression, percentage: Expression) =
    this(x, ts, window, percentage, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = ApproxWindowPercentile.Name

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(super.checkInputDataTypes(), checkPercentages).find(_.isFailure).getOrElse(TypeCheckSuccess)

  override def eval(buffer: SlidingQuantiles): Any = {
    val estimates = buffer.estimates(percentages)
    if (estimates == null) null
    else answer(estimates.map(v => ApproxWindowPercentile.fromDouble(v, valueType)))
  }

  override def nullable: Boolean = true

  override def dataType: DataType = resultType(x.dataType)

  override def children: Seq[Expression] = Seq(x, ts, window, percentage, eps)

  override protected def withNewChildrenInternal(
      newChildren: IndexedSeq[Expression]): ApproxWindowPercentile =
    copy(x = newChildren(0), ts = newChildren(1), window = newChildren(2),
      percentage = newChildren(3), eps = newChildren(4))

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowPercentile =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowPercentile =
    copy(inputAggBufferOffset = newOffset)
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window, percentage[, eps]) - Returns approx_window_percentile's answer with
      bounds: a struct (estimate, lower, upper) of values of the window with
      lower <= exact <= upper, the exact percentile being percentile_approx's over exactly
      the window's rows. An array `percentage` gives an array of such structs. In exact mode
      lower = estimate = upper. In compact mode the bounds hold with probability at least
      1 - 10^-9, and a bound no held value can vouch for is NULL (docs/percentiles.md).
  """,
  arguments = """
    Arguments:
      * x, ts, window, percentage, eps - as for approx_window_percentile.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(ms, ts, 3, 0.5) OVER (ORDER BY ts) FROM VALUES (1, 30), (2, 10), (3, 20) AS t(ts, ms);
       1	Row(estimate=30, lower=30, upper=30)
       2	Row(estimate=10, lower=10, upper=10)
       3	Row(estimate=20, lower=20, upper=20)
  """,
  note = """
    The fields have the type of `x`; the result is NULL when the window holds no non-NULL `x`;
    `lower` or `upper` alone may be NULL in compact mode.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowPercentileBounds(
    x: Expression,
    ts: Expression,
    window: Expression,
    percentage: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends PercentileAggregate with PercentagesArgument with OrderedInputAggregate {

  def this(x: Expression, ts: Expression, window: Expression, percentage: Expression,
      eps: Expression) = this(x, ts, window, percentage, eps, false, 0, 0)

  override def withOrderedInput: ApproxWindowPercentileBounds = copy(orderedInput = true)

  override protected def heldInMemoryOnly: Boolean = orderedInput

  def this(x: Expression, ts: Expression, window: Expression, percentage: Expression) =
    this(x, ts, window, percentage, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = ApproxWindowPercentileBounds.Name

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(super.checkInputDataTypes(), checkPercentages).find(_.isFailure).getOrElse(TypeCheckSuccess)

  // Exact mode: the exact percentile three times. Compact mode: a bound no held value
  // meets is NULL.
  override def eval(buffer: SlidingQuantiles): Any = {
    val a = buffer.answers(percentages)
    if (a == null || a.estimates.isEmpty) null
    else answer(percentages.indices.map { j =>
      def bound(v: Double, found: Boolean): Any =
        if (found) ApproxWindowPercentile.fromDouble(v, valueType) else null
      new GenericInternalRow(Array[Any](ApproxWindowPercentile.fromDouble(a.estimates(j), valueType),
        bound(a.lower(j), a.hasLower(j)), bound(a.upper(j), a.hasUpper(j))))
    }.toArray[Any])
  }

  override def nullable: Boolean = true

  override def dataType: DataType = resultType(ApproxWindowPercentileBounds.structOf(x.dataType))

  override def children: Seq[Expression] = Seq(x, ts, window, percentage, eps)

  override protected def withNewChildrenInternal(
      newChildren: IndexedSeq[Expression]): ApproxWindowPercentileBounds =
    copy(x = newChildren(0), ts = newChildren(1), window = newChildren(2),
      percentage = newChildren(3), eps = newChildren(4))

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowPercentileBounds =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowPercentileBounds =
    copy(inputAggBufferOffset = newOffset)
}

object ApproxWindowPercentileBounds {
  val Name = "approx_window_percentile_bounds"

  def structOf(t: DataType): StructType = StructType(Seq(
    StructField("estimate", t, nullable = false),
    StructField("lower", t, nullable = true),
    StructField("upper", t, nullable = true)))
}

/**
 * What the aggregates over `(x, ts, window, ..., eps)` of the percentile family share: the
 * argument checks, reading rows into a [[SlidingQuantiles]], merging and the binary state
 * (format kind 4). Subclasses choose the result.
 */
abstract class PercentileAggregate extends TypedImperativeAggregate[SlidingQuantiles] {
  def x: Expression
  def ts: Expression
  def window: Expression
  def eps: Expression

  // Lazy so the constants are read once, after the checks, never during tree transforms.
  private lazy val windowLength: Long = WindowArguments.windowLength(window, ts).toOption.get
  private lazy val epsilon: Double = WindowArguments.epsValue(eps).toOption.get
  private lazy val tsType: DataType = ts.dataType
  protected lazy val valueType: DataType = x.dataType

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(
      ApproxWindowPercentile.checkValueType(x),
      WindowArguments.checkTimeType(ts),
      WindowArguments.windowLength(window, ts).left.getOrElse(TypeCheckSuccess),
      WindowArguments.epsValue(eps).left.getOrElse(TypeCheckSuccess)
    ).find(_.isFailure).getOrElse(TypeCheckSuccess)

  /**
   * True in a running frame ordered by `ts` ([[OrderedWindowFrames]]): the window is held
   * only in memory, never written, and stays exact while its heap is below the compact
   * mode's ([[CompactQuantiles.orderedExactLimit]]).
   */
  protected def heldInMemoryOnly: Boolean = false

  override def createAggregationBuffer(): SlidingQuantiles = {
    val sketch = if (heldInMemoryOnly) SlidingQuantiles.inMemoryOnly(windowLength, epsilon)
      else new SlidingQuantiles(windowLength, epsilon)
    sketch.microsecondTime = WindowArguments.isTemporal(tsType)
    sketch
  }

  @transient private lazy val time = new TimeArgument(ts)
  @transient private lazy val value = new NumberArgument(x)

  override def update(buffer: SlidingQuantiles, input: InternalRow): SlidingQuantiles = {
    if (!time.isNullIn(input)) {
      val t = time.of(input)
      if (value.isNullIn(input)) buffer.advanceTo(t) else buffer.add(t, value.of(input))
    }
    buffer
  }

  override def merge(buffer: SlidingQuantiles, other: SlidingQuantiles): SlidingQuantiles = {
    buffer.merge(other)
    buffer
  }

  override def serialize(buffer: SlidingQuantiles): Array[Byte] =
    SketchFormat.serializeQuantiles(buffer)

  override def deserialize(bytes: Array[Byte]): SlidingQuantiles =
    SketchFormat.deserializeQuantiles(bytes)
}

/**
 * A constant `percentage` argument: one DOUBLE in [0, 1] (one answer) or an array of them
 * (an array of answers, in the array's order).
 */
trait PercentagesArgument { self: Expression =>
  def percentage: Expression

  protected lazy val percentages: Array[Double] =
    ApproxWindowPercentile.percentagesOf(percentage).toOption.get
  private lazy val returnsArray: Boolean = percentage.dataType.isInstanceOf[ArrayType]

  protected def checkPercentages: TypeCheckResult =
    ApproxWindowPercentile.percentagesOf(percentage).left.getOrElse(TypeCheckSuccess)

  /** The result type for answers of type `element`. */
  protected def resultType(element: DataType): DataType =
    if (percentage.dataType.isInstanceOf[ArrayType]) ArrayType(element, containsNull = false)
    else element

  /** One answer per percentage, as the result: the answer itself, or their array. */
  protected def answer(perPercentage: Array[Any]): Any =
    if (returnsArray) new GenericArrayData(perPercentage) else perPercentage(0)
}

object ApproxWindowPercentile extends QueryErrorsBase {
  val Name = "approx_window_percentile"

  /** The types percentile_approx ranks: numbers, dates, timestamps and ANSI intervals. */
  def checkValueType(x: Expression): TypeCheckResult = x.dataType match {
    case _: NumericType | DateType | TimestampType | TimestampNTZType | NullType |
         _: YearMonthIntervalType | _: DayTimeIntervalType => TypeCheckSuccess
    case _ => WindowArguments.unexpectedType(0,
      "(\"NUMERIC\" or \"DATE\" or \"TIMESTAMP\" or \"TIMESTAMP_NTZ\" or \"INTERVAL YEAR TO MONTH\" or \"INTERVAL DAY TO SECOND\")", x)
  }

  /** A non-null value of a checked type as the double it is ranked by. */
  def toDouble(value: Any, t: DataType): Double = t match {
    case DateType | _: YearMonthIntervalType | IntegerType => value.asInstanceOf[Int].toDouble
    case TimestampType | TimestampNTZType | _: DayTimeIntervalType | LongType =>
      value.asInstanceOf[Long].toDouble
    case ByteType => value.asInstanceOf[Byte].toDouble
    case ShortType => value.asInstanceOf[Short].toDouble
    case FloatType => value.asInstanceOf[Float].toDouble
    case DoubleType => value.asInstanceOf[Double]
    case _: DecimalType => value.asInstanceOf[Decimal].toDouble
  }

  /** [[toDouble]] of column `ordinal` of `row`, non-null, without boxing. */
  def doubleAt(row: InternalRow, ordinal: Int, t: DataType): Double = t match {
    case DateType | _: YearMonthIntervalType | IntegerType => row.getInt(ordinal).toDouble
    case TimestampType | TimestampNTZType | _: DayTimeIntervalType | LongType =>
      row.getLong(ordinal).toDouble
    case ByteType => row.getByte(ordinal).toDouble
    case ShortType => row.getShort(ordinal).toDouble
    case FloatType => row.getFloat(ordinal).toDouble
    case DoubleType => row.getDouble(ordinal)
    case d: DecimalType => row.getDecimal(ordinal, d.precision, d.scale).toDouble
  }

  /** The answer back in the type of `x`, as percentile_approx converts it. */
  def fromDouble(d: Double, t: DataType): Any = t match {
    case DateType | _: YearMonthIntervalType | IntegerType => d.toInt
    case TimestampType | TimestampNTZType | _: DayTimeIntervalType | LongType => d.toLong
    case ByteType => d.toByte
    case ShortType => d.toShort
    case FloatType => d.toFloat
    case DoubleType => d
    case _: DecimalType => Decimal(d) // Spark's writers set the column's precision and scale
  }

  /**
   * The constant percentages, each in [0, 1]: one for a numeric `percentage`, the array's
   * for an array; or the reason they are invalid.
   */
  def percentagesOf(percentage: Expression): Either[TypeCheckResult, Array[Double]] = {
    val name = "percentage"
    val arrayOfNumbers = percentage.dataType match {
      case ArrayType(_: NumericType, _) => true
      case _ => false
    }
    if (!percentage.dataType.isInstanceOf[NumericType] && !arrayOfNumbers) {
      return Left(WindowArguments.typeCheckFailure(
        s"The ${toSQLId(name)} must be a constant DOUBLE in [0, 1] or an ARRAY of them, but " +
          s"${toSQLExpr(percentage)} has the type ${toSQLType(percentage.dataType)}"))
    }
    if (!percentage.foldable) return Left(WindowArguments.nonFoldable(name, percentage))
    val values: Option[Array[Any]] =
      if (arrayOfNumbers) {
        Option(Cast(percentage, ArrayType(DoubleType)).eval()).map { a =>
          val array = a.asInstanceOf[ArrayData]
          Array.tabulate[Any](array.numElements())(i =>
            if (array.isNullAt(i)) null else array.getDouble(i))
        }
      } else Option(Cast(percentage, DoubleType).eval()).map(v => Array[Any](v))
    values match {
      case None => Left(WindowArguments.unexpectedNull(name))
      case Some(ps) if ps.isEmpty || ps.contains(null) => Left(WindowArguments.typeCheckFailure(
        s"The ${toSQLId(name)} must hold at least one percentage and no NULL, but it is " +
          s"${toSQLExpr(percentage)}"))
      case Some(ps) =>
        val doubles = ps.map(_.asInstanceOf[Double])
        doubles.find(p => !(p >= 0.0 && p <= 1.0)) match {
          case Some(bad) => Left(WindowArguments.outOfRange(name, "[0.0, 1.0]", bad.toString))
          case None => Right(doubles)
        }
    }
  }
}
