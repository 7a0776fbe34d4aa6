package org.apache.spark.sql.windowsketch

import java.util.Locale

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.{FunctionRegistry, TypeCheckResult}
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionDescription,
  GenericInternalRow, Literal}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.trees.QuaternaryLike
import org.apache.spark.sql.errors.QueryErrorsBase
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import windowsketch.core.{CorruptSketchException, SketchFormat}
import windowsketch.core.count.OutOfOrderEventException
import windowsketch.core.moments.{MomentsWindow, OrderedMoments, SlidingMoments, WindowMoments}

/**
 * The statistics of the moments family, by the names Spark gives them: each answers
 * (estimate, lower, upper) from a window's moments, or null where Spark's function
 * answers NULL (no values; one, for the sample forms). docs/moments.md has the guarantees.
 */
sealed abstract class MomentsStatistic(val name: String) {
  def of(m: WindowMoments): Array[Double]
}

object MomentsStatistic extends QueryErrorsBase {
  case object Avg extends MomentsStatistic("avg") {
    def of(m: WindowMoments): Array[Double] = m.avg
  }
  case object VarPop extends MomentsStatistic("var_pop") {
    def of(m: WindowMoments): Array[Double] = m.variance(sample = false)
  }
  case object VarSamp extends MomentsStatistic("var_samp") {
    def of(m: WindowMoments): Array[Double] = m.variance(sample = true)
  }
  case object StddevPop extends MomentsStatistic("stddev_pop") {
    def of(m: WindowMoments): Array[Double] = m.stddev(sample = false)
  }
  case object StddevSamp extends MomentsStatistic("stddev_samp") {
    def of(m: WindowMoments): Array[Double] = m.stddev(sample = true)
  }

  /** Every name a statistic answers to, Spark's aliases included. */
  val byName: Map[String, MomentsStatistic] = Map(
    "avg" -> Avg, "mean" -> Avg, "var_pop" -> VarPop, "var_samp" -> VarSamp,
    "variance" -> VarSamp, "stddev_pop" -> StddevPop, "stddev_samp" -> StddevSamp,
    "stddev" -> StddevSamp, "std" -> StddevSamp)

  /** The constant `statistic` argument of the sketch queries, or why it is invalid. */
  def of(statistic: Expression): Either[TypeCheckResult, MomentsStatistic] = {
    val name = "statistic"
    val names = byName.keys.toSeq.sorted.map(n => s"'$n'").mkString(", ")
    if (statistic.dataType != StringType) {
      return Left(WindowArguments.typeCheckFailure(
        s"The ${toSQLId(name)} must be a constant STRING, one of $names, but " +
          s"${toSQLExpr(statistic)} has the type ${toSQLType(statistic.dataType)}"))
    }
    if (!statistic.foldable) return Left(WindowArguments.nonFoldable(name, statistic))
    statistic.eval() match {
      case null => Left(WindowArguments.unexpectedNull(name))
      case s: UTF8String => byName.get(s.toString.toLowerCase(Locale.ROOT)).toRight(
        WindowArguments.outOfRange(name, names, s"'$s'"))
    }
  }

  def bounds(answer: Array[Double]): InternalRow =
    new GenericInternalRow(Array[Any](answer(0), answer(1), answer(2)))

  val BoundsType: StructType = StructType(Seq(
    StructField("estimate", DoubleType, nullable = false),
    StructField("lower", DoubleType, nullable = false),
    StructField("upper", DoubleType, nullable = false)))
}

/**
 * What the aggregates over `(x, ts, window [, eps])` of the moments family share: the
 * argument checks, reading rows into the window's moments (the time-ordered buckets in a
 * running frame ordered by `ts`, the mergeable dyadic sketch everywhere else), merging
 * and the binary state (format kind 5). Subclasses choose the statistic and the result.
 */
abstract class MomentsAggregate
  extends TypedImperativeAggregate[MomentsWindow] with QuaternaryLike[Expression]
  with OrderedInputAggregate {

  def x: Expression
  def ts: Expression
  def window: Expression
  def eps: Expression

  // Lazy so the constants are read once, after the checks, never during tree transforms.
  private lazy val windowLength: Long = WindowArguments.windowLength(window, ts).toOption.get
  private lazy val epsilon: Double = WindowArguments.epsValue(eps).toOption.get
  private lazy val tsType: DataType = ts.dataType

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(
      MomentsAggregate.checkValueType(x),
      WindowArguments.checkTimeType(ts),
      WindowArguments.windowLength(window, ts).left.getOrElse(TypeCheckSuccess),
      WindowArguments.epsValue(eps).left.getOrElse(TypeCheckSuccess)
    ).find(_.isFailure).getOrElse(TypeCheckSuccess)

  override def createAggregationBuffer(): MomentsWindow = {
    val sketch: MomentsWindow =
      if (orderedInput) new OrderedMoments(windowLength, epsilon)
      else new SlidingMoments(windowLength, epsilon)
    sketch.microsecondTime = WindowArguments.isTemporal(tsType)
    sketch
  }

  @transient private lazy val time = new TimeArgument(ts)
  @transient private lazy val value = new NumberArgument(x)

  override def update(buffer: MomentsWindow, input: InternalRow): MomentsWindow = {
    if (!time.isNullIn(input)) {
      val t = time.of(input)
      if (value.isNullIn(input)) buffer.advanceTo(t)
      else {
        val d = value.of(input)
        if (java.lang.Double.isNaN(d) || java.lang.Double.isInfinite(d)) {
          throw new IllegalArgumentException(s"$prettyName: argument `x` must be finite, got $d")
        }
        try buffer.add(t, d)
        catch {
          case e: OutOfOrderEventException => throw new IllegalStateException(
            s"$prettyName: a row at ts=${e.ts} arrived after a row at ts=${e.newest} in a " +
              "window frame ordered by ts; please report this with the query", e)
        }
      }
    }
    buffer
  }

  override def merge(buffer: MomentsWindow, other: MomentsWindow): MomentsWindow = {
    buffer.merge(other)
    buffer
  }

  override def serialize(buffer: MomentsWindow): Array[Byte] = buffer match {
    case s: SlidingMoments => SketchFormat.serializeMomentsBuffer(s)
    case _ => throw new IllegalStateException(
      s"$prettyName: the time-ordered moments of a running frame are never stored")
  }

  override def deserialize(bytes: Array[Byte]): MomentsWindow = SketchFormat.deserializeMomentsBuffer(bytes)

  override def first: Expression = x
  override def second: Expression = ts
  override def third: Expression = window
  override def fourth: Expression = eps
}

object MomentsAggregate {
  /** Numbers, as Spark's avg, variance and stddev take them. */
  def checkValueType(x: Expression): TypeCheckResult = x.dataType match {
    case _: NumericType | NullType => TypeCheckSuccess
    case _ => WindowArguments.unexpectedType(0, "\"NUMERIC\"", x)
  }

  /** Reads a moments sketch from a column, naming the function in every error. */
  def read(bytes: Array[Byte], function: String): SlidingMoments =
    try SketchFormat.deserializeMoments(bytes)
    catch { case e: CorruptSketchException => throw SketchInput.named(function, e) }
}

/**
 * One statistic of the window as a DOUBLE, NULL where Spark's function gives NULL.
 * Aliases (approx_window_variance, approx_window_stddev) name their result columns, as
 * Spark's do; errors raised while rows are read name the function they stand for.
 */
abstract class MomentsStatisticAggregate extends MomentsAggregate {
  protected def statistic: MomentsStatistic

  override def prettyName: String =
    getTagValue(FunctionRegistry.FUNC_ALIAS).getOrElse("approx_window_" + statistic.name)

  override def eval(buffer: MomentsWindow): Any = {
    val answer = statistic.of(buffer.moments)
    if (answer == null) null else answer(0)
  }

  override def nullable: Boolean = true

  override def dataType: DataType = DoubleType
}

/** One statistic's estimate with certified bounds: STRUCT<estimate, lower, upper>. */
abstract class MomentsBoundsAggregate extends MomentsAggregate {
  protected def statistic: MomentsStatistic

  override def eval(buffer: MomentsWindow): Any = {
    val answer = statistic.of(buffer.moments)
    if (answer == null) null else MomentsStatistic.bounds(answer)
  }

  override def nullable: Boolean = true

  override def dataType: DataType = MomentsStatistic.BoundsType
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, eps]) - Returns the average of the non-NULL `x` in the sliding
      window that ends at the largest `ts` seen (per group in GROUP BY), within `eps` times
      the window's standard deviation of the exact average: an error relative to the
      values' spread, which holds for values of any sign (a window of -1s and 1s has
      average 0). Over a running window frame ordered by `ts` a row costs O(1) amortized.
  """,
  arguments = """
    Arguments:
      * x - a numeric value; NULL is skipped but its `ts` still moves the window. NaN and
          infinities are errors.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
          Rows whose `ts` is NULL are ignored.
      * window - as for approx_window_count: N positions for an integral `ts`, `(now - N, now]`;
          a positive day-time interval for a temporal `ts`, `[now - window, now]`.
      * eps - an optional constant in [0.0001, 1); default 0.01.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(x, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0) AS t(ts, x);
       1	10.0
       2	15.0
       3	30.0
       4	40.0
      > SELECT host, _FUNC_(ms, ts, INTERVAL 5 MINUTES) FROM VALUES ('a', 12, TIMESTAMP'2025-01-01 10:00:00'), ('a', 90, TIMESTAMP'2025-01-01 10:04:00'), ('a', 15, TIMESTAMP'2025-01-01 10:06:00') AS t(host, ms, ts) GROUP BY host;
       a	52.5
  """,
  note = """
    The result is a DOUBLE, NULL when the window holds no non-NULL `x`.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowAvg(
    x: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends MomentsStatisticAggregate {

  def this(x: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(x, ts, window, eps, false, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(WindowArguments.DefaultEps))

  override protected def statistic: MomentsStatistic = MomentsStatistic.Avg

  override def withOrderedInput: ApproxWindowAvg = copy(orderedInput = true)

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : ApproxWindowAvg = copy(x = newX, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowAvg =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowAvg =
    copy(inputAggBufferOffset = newOffset)
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, eps]) - Returns the sample variance (divided by n - 1, as Spark's
      var_samp and variance) of the non-NULL `x` in the sliding window that ends at the
      largest `ts` seen, within `eps` relative error. A window of equal values gives 0
      exactly. Over a running window frame ordered by `ts` a row costs O(1) amortized.
  """,
  arguments = """
    Arguments:
      * x, ts, window, eps - as for approx_window_avg.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(x, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0) AS t(ts, x);
       1	NULL
       2	50.0
       3	700.0
       4	400.0
  """,
  note = """
    NULL when the window holds fewer than two non-NULL `x`, as var_samp. The time-ordered
    form keeps about (2 / eps) buckets per doubling of the window's count.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowVarSamp(
    x: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends MomentsStatisticAggregate {

  def this(x: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(x, ts, window, eps, false, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(WindowArguments.DefaultEps))

  override protected def statistic: MomentsStatistic = MomentsStatistic.VarSamp

  override def withOrderedInput: ApproxWindowVarSamp = copy(orderedInput = true)

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : ApproxWindowVarSamp = copy(x = newX, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowVarSamp =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowVarSamp =
    copy(inputAggBufferOffset = newOffset)
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, eps]) - Returns the population variance (divided by n, as Spark's
      var_pop) of the non-NULL `x` in the sliding window that ends at the largest `ts` seen,
      within `eps` relative error. A window of equal values gives 0 exactly.
  """,
  arguments = """
    Arguments:
      * x, ts, window, eps - as for approx_window_avg.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(x, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, 10.0), (2, 20.0), (3, 60.0) AS t(ts, x);
       1	0.0
       2	25.0
       3	466.6666666666667
  """,
  note = """
    NULL when the window holds no non-NULL `x`.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowVarPop(
    x: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends MomentsStatisticAggregate {

  def this(x: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(x, ts, window, eps, false, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(WindowArguments.DefaultEps))

  override protected def statistic: MomentsStatistic = MomentsStatistic.VarPop

  override def withOrderedInput: ApproxWindowVarPop = copy(orderedInput = true)

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : ApproxWindowVarPop = copy(x = newX, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowVarPop =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowVarPop =
    copy(inputAggBufferOffset = newOffset)
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, eps]) - Returns the sample standard deviation (as Spark's
      stddev_samp and stddev) of the non-NULL `x` in the sliding window that ends at the
      largest `ts` seen, within `eps` / 2 relative error: the square root of
      approx_window_variance's bracket. A window of equal values gives 0 exactly. Over a
      running window frame ordered by `ts` a row costs O(1) amortized.
  """,
  arguments = """
    Arguments:
      * x, ts, window, eps - as for approx_window_avg.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(x, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0) AS t(ts, x);
       1	NULL
       2	7.0710678118654755
       3	26.457513110645905
       4	20.0
      > SELECT host, _FUNC_(ms, ts, INTERVAL 5 MINUTES) FROM VALUES ('a', 12, TIMESTAMP'2025-01-01 10:00:00'), ('a', 90, TIMESTAMP'2025-01-01 10:04:00'), ('a', 14, TIMESTAMP'2025-01-01 10:06:00') AS t(host, ms, ts) GROUP BY host;
       a	53.74011537017761
  """,
  note = """
    NULL when the window holds fewer than two non-NULL `x`, as stddev_samp.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowStddevSamp(
    x: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends MomentsStatisticAggregate {

  def this(x: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(x, ts, window, eps, false, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(WindowArguments.DefaultEps))

  override protected def statistic: MomentsStatistic = MomentsStatistic.StddevSamp

  override def withOrderedInput: ApproxWindowStddevSamp = copy(orderedInput = true)

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : ApproxWindowStddevSamp = copy(x = newX, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowStddevSamp =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowStddevSamp =
    copy(inputAggBufferOffset = newOffset)
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, eps]) - Returns the population standard deviation (as Spark's
      stddev_pop) of the non-NULL `x` in the sliding window that ends at the largest `ts`
      seen, within `eps` / 2 relative error. A window of equal values gives 0 exactly.
  """,
  arguments = """
    Arguments:
      * x, ts, window, eps - as for approx_window_avg.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(x, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, 10.0), (2, 20.0), (3, 20.0) AS t(ts, x);
       1	0.0
       2	5.0
       3	4.714045207910316
  """,
  note = """
    NULL when the window holds no non-NULL `x`.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowStddevPop(
    x: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends MomentsStatisticAggregate {

  def this(x: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(x, ts, window, eps, false, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(WindowArguments.DefaultEps))

  override protected def statistic: MomentsStatistic = MomentsStatistic.StddevPop

  override def withOrderedInput: ApproxWindowStddevPop = copy(orderedInput = true)

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : ApproxWindowStddevPop = copy(x = newX, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowStddevPop =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowStddevPop =
    copy(inputAggBufferOffset = newOffset)
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, eps]) - Returns approx_window_avg's estimate with certified
      bounds: a struct (estimate, lower, upper) with lower <= exact average <= upper always,
      whatever the rows' order and merges, and upper - lower <= 2 * eps * the window's
      standard deviation.
  """,
  arguments = """
    Arguments:
      * x, ts, window, eps - as for approx_window_avg.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(x, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, 10.0), (2, 20.0), (3, 60.0) AS t(ts, x);
       1	Row(estimate=10.0, lower=10.0, upper=10.0)
       2	Row(estimate=15.0, lower=15.0, upper=15.0)
       3	Row(estimate=30.0, lower=30.0, upper=30.0)
  """,
  note = """
    NULL when the window holds no non-NULL `x`.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowAvgBounds(
    x: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends MomentsBoundsAggregate {

  def this(x: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(x, ts, window, eps, false, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = ApproxWindowAvgBounds.Name

  override protected def statistic: MomentsStatistic = MomentsStatistic.Avg

  override def withOrderedInput: ApproxWindowAvgBounds = copy(orderedInput = true)

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : ApproxWindowAvgBounds = copy(x = newX, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowAvgBounds =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowAvgBounds =
    copy(inputAggBufferOffset = newOffset)
}

object ApproxWindowAvgBounds {
  val Name = "approx_window_avg_bounds"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, eps]) - Returns approx_window_stddev's estimate (the sample
      standard deviation) with certified bounds: a struct (estimate, lower, upper) with
      lower <= exact <= upper always, whatever the rows' order and merges.
  """,
  arguments = """
    Arguments:
      * x, ts, window, eps - as for approx_window_avg.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(x, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, 10.0), (2, 20.0), (3, 20.0) AS t(ts, x);
       1	NULL
       2	Row(estimate=7.0710678118654755, lower=7.0710678118654755, upper=7.0710678118654755)
       3	Row(estimate=5.773502691896257, lower=5.773502691896257, upper=5.773502691896257)
  """,
  note = """
    NULL when the window holds fewer than two non-NULL `x`.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowStddevBounds(
    x: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends MomentsBoundsAggregate {

  def this(x: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(x, ts, window, eps, false, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = ApproxWindowStddevBounds.Name

  override protected def statistic: MomentsStatistic = MomentsStatistic.StddevSamp

  override def withOrderedInput: ApproxWindowStddevBounds = copy(orderedInput = true)

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : ApproxWindowStddevBounds = copy(x = newX, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowStddevBounds =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowStddevBounds =
    copy(inputAggBufferOffset = newOffset)
}

object ApproxWindowStddevBounds {
  val Name = "approx_window_stddev_bounds"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, eps]) - Returns a mergeable sketch (BINARY) of the non-NULL `x` of
      the group with their times, for averages, variances and standard deviations in
      sliding windows later: combine sketches with window_moments_sketch_merge and read them
      with window_moments_sketch_estimate or window_moments_sketch_bounds.
  """,
  arguments = """
    Arguments:
      * x, ts, window, eps - as for approx_window_avg.
  """,
  examples = """
    Examples:
      > SELECT window_moments_sketch_estimate(_FUNC_(x, ts, 3), 'avg') FROM VALUES (1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0) AS t(ts, x);
       40.0
  """,
  note = """
    The sketch records its window, eps and time unit; only sketches that agree on all three
    merge. It keeps the exact count, mean and M2 of groups of values (dyadic time nodes),
    at most 4,096 of them; the format is in docs/format.md.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowMomentsSketchAgg(
    x: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends MomentsAggregate {

  def this(x: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(x, ts, window, eps, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = WindowMomentsSketchAgg.Name

  // A sketch is stored: it always takes the mergeable form.
  override def orderedInput: Boolean = false
  override def withOrderedInput: WindowMomentsSketchAgg = this

  // Stored, so compressed (an aggregation buffer is written without its collapse); this
  // aggregate always takes the mergeable form.
  override def eval(buffer: MomentsWindow): Any =
    SketchFormat.serializeMoments(buffer.asInstanceOf[SlidingMoments])

  override def dataType: DataType = BinaryType

  override def nullable: Boolean = false

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : WindowMomentsSketchAgg = copy(x = newX, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowMomentsSketchAgg =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowMomentsSketchAgg =
    copy(inputAggBufferOffset = newOffset)
}

object WindowMomentsSketchAgg {
  val Name = "window_moments_sketch"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch) - Merges the moments sketches of a group into one (BINARY). NULL sketches
      are skipped; a group of none gives NULL.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY sketches made by window_moments_sketch with the same window, eps and
          kind of `ts`.
  """,
  examples = """
    Examples:
      > SELECT window_moments_sketch_estimate(_FUNC_(s), 'avg') FROM (SELECT window_moments_sketch(x, ts, 3) AS s FROM VALUES (1, 10.0), (2, 20.0) AS t(ts, x) UNION ALL SELECT window_moments_sketch(x, ts, 3) FROM VALUES (3, 60.0), (4, 40.0) AS t(ts, x));
       40.0
  """,
  note = """
    Merging keeps the guarantees in any order. Sketches of different window, eps or time
    unit, and bytes that are not a moments sketch, are errors.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowMomentsSketchMerge(
    sketch: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends SketchMergeAggregate[SlidingMoments] {

  def this(sketch: Expression) = this(sketch, 0, 0)

  override def prettyName: String = WindowMomentsSketchMerge.Name

  override protected def maker: String = WindowMomentsSketchAgg.Name

  override protected def read(bytes: Array[Byte]): SlidingMoments = MomentsAggregate.read(bytes, prettyName)

  override protected def write(s: SlidingMoments): Array[Byte] = SketchFormat.serializeMoments(s)

  override protected def mergeInto(into: SlidingMoments, other: SlidingMoments): Unit = into.merge(other)

  override protected def withNewChildInternal(newChild: Expression): WindowMomentsSketchMerge =
    copy(sketch = newChild)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowMomentsSketchMerge =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowMomentsSketchMerge =
    copy(inputAggBufferOffset = newOffset)
}

object WindowMomentsSketchMerge {
  val Name = "window_moments_sketch_merge"
}

/**
 * A query of a moments sketch column: one statistic of the window ending at `as_of` and
 * `sub_window` long, as (estimate, lower, upper), or null.
 */
abstract class MomentsSketchQuery extends SketchQuery[SlidingMoments] with QuaternaryLike[Expression] {
  def statistic: Expression

  private lazy val chosen: MomentsStatistic = MomentsStatistic.of(statistic).toOption.get

  override protected def asOfIndex: Int = 2

  override protected def maker: String = WindowMomentsSketchAgg.Name

  override protected def read(bytes: Array[Byte]): SlidingMoments = MomentsAggregate.read(bytes, prettyName)

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(super.checkInputDataTypes(), MomentsStatistic.of(statistic).left.getOrElse(TypeCheckSuccess))
      .find(_.isFailure).getOrElse(TypeCheckSuccess)

  // An empty window (or one value, for the sample forms) has no answer.
  override def nullable: Boolean = true

  protected def query(input: InternalRow): Array[Double] =
    sketchAndWindow(input) match {
      case null => null
      case (s, window) =>
        val (end, length) = window.getOrElse((s.now, s.window))
        chosen.of(if (s.hasTime) s.momentsAt(end, length) else s.moments)
    }

  override def first: Expression = sketch
  override def second: Expression = statistic
  override def third: Expression = asOf
  override def fourth: Expression = subWindow
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch, statistic[, as_of[, sub_window]]) - Returns one statistic of the values of
      a moments sketch in the window of length `sub_window` (default: the sketch's window)
      ending at `as_of` (default: the sketch's largest `ts`), with the guarantee of the
      aggregate of that name, as a DOUBLE.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY, made by window_moments_sketch or window_moments_sketch_merge. NULL
          gives NULL.
      * statistic - a constant STRING: 'avg' (or 'mean'), 'var_samp' (or 'variance'),
          'var_pop', 'stddev_samp' (or 'stddev', 'std') or 'stddev_pop'.
      * as_of - where the window ends: a TIMESTAMP, TIMESTAMP_NTZ or DATE for sketches over
          time, an integral position for sketches over positions. It may not be earlier than
          the sketch's largest `ts`. NULL gives NULL; a bare NULL literal means the argument
          is not given.
      * sub_window - a constant no longer than the sketch's window: a day-time interval for
          sketches over time, a number of positions otherwise. Sub-windows keep the guarantee.
  """,
  examples = """
    Examples:
      > SELECT _FUNC_(s, 'avg'), _FUNC_(s, 'stddev', 4, 2), _FUNC_(s, 'var_pop', 5) FROM (SELECT window_moments_sketch(x, ts, 3) AS s FROM VALUES (1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0) AS t(ts, x));
       40.0	14.142135623730951	100.0
  """,
  note = """
    NULL where the aggregate of that name gives NULL: an empty window, or fewer than two
    values for the sample forms.
  """,
  group = "misc_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowMomentsSketchEstimate(
    sketch: Expression,
    statistic: Expression,
    asOf: Expression,
    subWindow: Expression)
  extends MomentsSketchQuery {

  def this(sketch: Expression, statistic: Expression, asOf: Expression) =
    this(sketch, statistic, asOf, Literal(null, NullType))

  def this(sketch: Expression, statistic: Expression) =
    this(sketch, statistic, Literal(null, NullType))

  override def prettyName: String = WindowMomentsSketchEstimate.Name

  override def dataType: DataType = DoubleType

  override def eval(input: InternalRow): Any = {
    val answer = query(input)
    if (answer == null) null else answer(0)
  }

  override protected def withNewChildrenInternal(
      newFirst: Expression, newSecond: Expression, newThird: Expression, newFourth: Expression)
    : WindowMomentsSketchEstimate =
    copy(sketch = newFirst, statistic = newSecond, asOf = newThird, subWindow = newFourth)
}

object WindowMomentsSketchEstimate {
  val Name = "window_moments_sketch_estimate"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch, statistic[, as_of[, sub_window]]) - Returns window_moments_sketch_estimate's
      estimate with certified bounds: a struct (estimate, lower, upper) with
      lower <= exact <= upper.
  """,
  arguments = """
    Arguments:
      * sketch, statistic, as_of, sub_window - as for window_moments_sketch_estimate.
  """,
  examples = """
    Examples:
      > SELECT _FUNC_(window_moments_sketch(x, ts, 3), 'stddev_pop') FROM VALUES (1, 10.0), (2, 20.0), (3, 60.0), (4, 40.0) AS t(ts, x);
       Row(estimate=16.32993161855452, lower=16.32993161855452, upper=16.32993161855452)
  """,
  group = "misc_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowMomentsSketchBounds(
    sketch: Expression,
    statistic: Expression,
    asOf: Expression,
    subWindow: Expression)
  extends MomentsSketchQuery {

  def this(sketch: Expression, statistic: Expression, asOf: Expression) =
    this(sketch, statistic, asOf, Literal(null, NullType))

  def this(sketch: Expression, statistic: Expression) =
    this(sketch, statistic, Literal(null, NullType))

  override def prettyName: String = WindowMomentsSketchBounds.Name

  override def dataType: DataType = MomentsStatistic.BoundsType

  override def eval(input: InternalRow): Any = {
    val answer = query(input)
    if (answer == null) null else MomentsStatistic.bounds(answer)
  }

  override protected def withNewChildrenInternal(
      newFirst: Expression, newSecond: Expression, newThird: Expression, newFourth: Expression)
    : WindowMomentsSketchBounds =
    copy(sketch = newFirst, statistic = newSecond, asOf = newThird, subWindow = newFourth)
}

object WindowMomentsSketchBounds {
  val Name = "window_moments_sketch_bounds"
}
