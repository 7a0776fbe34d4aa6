package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.{DataTypeMismatch, TypeCheckSuccess}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, Cast, Expression}
import org.apache.spark.sql.catalyst.util.IntervalUtils
import org.apache.spark.sql.errors.QueryErrorsBase
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.{CalendarInterval, UTF8String}

import windowsketch.core.count.ExponentialHistogram
import windowsketch.core.hll.SlidingHyperLogLog

/**
 * The argument rules shared by the windowsketch aggregates (docs: semantics.md):
 * which types `v` and `ts` may have, how `ts` maps to a long, and how the constant
 * `window` and `eps` are read and checked. Each check answers with one of Spark's
 * DATATYPE_MISMATCH error classes naming the argument.
 */
private[windowsketch] object WindowArguments extends QueryErrorsBase {
  val DefaultEps = 0.01
  private val MicrosPerDay = 86400L * 1000 * 1000

  def isIntegral(t: DataType): Boolean = t match {
    case ByteType | ShortType | IntegerType | LongType => true
    case _ => false
  }

  def isTemporal(t: DataType): Boolean = t match {
    case TimestampType | TimestampNTZType | DateType => true
    case _ => false
  }

  def checkEventType(v: Expression): TypeCheckResult =
    if (v.dataType == BooleanType || v.dataType == NullType || isIntegral(v.dataType)) {
      TypeCheckSuccess
    } else {
      unexpectedType(0, "(\"BOOLEAN\" or an integral type holding 0 or 1)", v)
    }

  def checkTimeType(ts: Expression, index: Int = 1): TypeCheckResult =
    if (isTemporal(ts.dataType) || isIntegral(ts.dataType)) TypeCheckSuccess
    else unexpectedType(index, "(\"TIMESTAMP\" or \"TIMESTAMP_NTZ\" or \"DATE\" or an integral type)", ts)

  /** Converts a non-null `ts` value of a checked type to the core's long time axis. */
  def timeOf(value: Any, tsType: DataType): Long =
    if (tsType == DateType) value.asInstanceOf[Int] * MicrosPerDay
    else integralValue(value, tsType) // timestamps are longs of microseconds

  /** A point of the time axis for messages: an instant for microseconds, else a position. */
  def describeTime(t: Long, microseconds: Boolean): String =
    if (!microseconds) t.toString
    else java.time.Instant.EPOCH
      .plusSeconds(Math.floorDiv(t, 1000000L))
      .plusNanos(Math.floorMod(t, 1000000L) * 1000L).toString

  /** A non-null value of an integral (or microsecond timestamp) type as a long. */
  def integralValue(value: Any, t: DataType): Long = t match {
    case ByteType => value.asInstanceOf[Byte].toLong
    case ShortType => value.asInstanceOf[Short].toLong
    case IntegerType => value.asInstanceOf[Int].toLong
    case _ => value.asInstanceOf[Long]
  }

  /**
   * The input column an argument reads once bound, or -1 for any other expression. Reading
   * the column from the row takes no boxed value, which `eval` returns on every row.
   */
  def columnOf(e: Expression): Int = e match {
    case b: BoundReference => b.ordinal
    case _ => -1
  }

  /** [[timeOf]] of column `ordinal` of `row`, non-null, without boxing. */
  def timeAt(row: InternalRow, ordinal: Int, tsType: DataType): Long =
    if (tsType == DateType) row.getInt(ordinal) * MicrosPerDay else integralAt(row, ordinal, tsType)

  /** [[integralValue]] of column `ordinal` of `row`, non-null, without boxing. */
  def integralAt(row: InternalRow, ordinal: Int, t: DataType): Long = t match {
    case ByteType => row.getByte(ordinal).toLong
    case ShortType => row.getShort(ordinal).toLong
    case IntegerType => row.getInt(ordinal).toLong
    case _ => row.getLong(ordinal)
  }

  /**
   * The window as the core's length on the time axis, or the reason it is invalid.
   * Integral `ts`: N positions, `(now - N, now]`. Temporal `ts`: a day-time interval `w`,
   * `[now - w, now]` in microseconds, which is the half-open window of length `w + 1`.
   */
  def windowLength(
      window: Expression, ts: Expression, name: String = "window",
      tsName: String = "ts"): Either[TypeCheckResult, Long] = {
    val temporal = isTemporal(ts.dataType)
    val typeOk = window.dataType match {
      case _: DayTimeIntervalType | CalendarIntervalType | StringType => temporal
      case t => isIntegral(t) && !temporal
    }
    if (!typeOk) {
      val hint =
        if (temporal) "; for the last N rows use an integral position as `ts`, e.g. row_number()"
        else "; for a time window use a TIMESTAMP `ts`"
      return Left(badWindow(ts, window, s"has the type ${toSQLType(window.dataType)}", hint,
        name, tsName))
    }
    if (!window.foldable) return Left(nonFoldable(name, window))
    val value = window.eval()
    if (value == null) return Left(unexpectedNull(name))
    val length: Option[Long] = (window.dataType, value) match {
      case (_: DayTimeIntervalType, micros: Long) => Some(micros)
      case (CalendarIntervalType, ci: CalendarInterval) => dayTimeMicros(ci)
      case (StringType, s: UTF8String) =>
        Option(IntervalUtils.safeStringToInterval(s)).flatMap(dayTimeMicros)
      case (t, n) => Some(integralValue(n, t))
    }
    length match {
      case Some(n) if n > 0 =>
        Right(if (temporal) { if (n == Long.MaxValue) n else n + 1 } else n)
      case _ if temporal =>
        Left(badWindow(ts, window, "is not a positive day-time interval",
          "; months and years have no fixed length", name, tsName))
      case _ => Left(outOfRange(name, "(0, 9223372036854775807]", window.sql))
    }
  }

  private def badWindow(ts: Expression, window: Expression, problem: String, hint: String,
      name: String, tsName: String): TypeCheckResult = {
    val expected =
      if (isTemporal(ts.dataType)) {
        "a positive day-time interval such as INTERVAL 10 MINUTES or '10 minutes'"
      } else "a positive integer, the number of positions in the window"
    DataTypeMismatch(
      errorSubClass = "TYPE_CHECK_FAILURE_WITH_HINT",
      messageParameters = Map(
        "msg" -> (s"The ${toSQLId(name)} must be $expected when ${toSQLId(tsName)} has the " +
          s"type ${toSQLType(ts.dataType)}, but ${toSQLExpr(window)} $problem"),
        "hint" -> hint))
  }

  /** Months have no fixed length in microseconds, so a window may not use them. */
  private def dayTimeMicros(ci: CalendarInterval): Option[Long] =
    if (ci.months != 0) None
    else scala.util.Try(Math.addExact(Math.multiplyExact(ci.days.toLong, MicrosPerDay),
      ci.microseconds)).toOption

  /**
   * A constant of an integral type, not NULL, as a long, or why it is not one: `what` is
   * what the argument must be ("a constant positive INT").
   */
  def integralConstant(e: Expression, name: String, what: String): Either[TypeCheckResult, Long] = {
    if (!isIntegral(e.dataType)) {
      return Left(typeCheckFailure(s"The ${toSQLId(name)} must be $what, but ${toSQLExpr(e)} " +
        s"has the type ${toSQLType(e.dataType)}"))
    }
    if (!e.foldable) return Left(nonFoldable(name, e))
    val value = e.eval()
    if (value == null) Left(unexpectedNull(name)) else Right(integralValue(value, e.dataType))
  }

  /** A constant positive INT of at most `most` (a k), or why it is not one. */
  def countValue(e: Expression, name: String, most: Int): Either[TypeCheckResult, Int] =
    integralConstant(e, name, "a constant positive INT").flatMap { n =>
      if (n >= 1 && n <= most) Right(n.toInt) else Left(outOfRange(name, s"[1, $most]", n.toString))
    }

  def epsValue(eps: Expression): Either[TypeCheckResult, Double] =
    constantIn(eps, "eps", ExponentialHistogram.MinEps, 1.0, s"[${ExponentialHistogram.MinEps}, 1)",
      upperIncluded = false)

  /** The distinct count's relative standard deviation: HyperLogLog++ with p from 4 to 14. */
  def rsdValue(rsd: Expression): Either[TypeCheckResult, Double] =
    constantIn(rsd, "rsd", SlidingHyperLogLog.MinRsd, SlidingHyperLogLog.MaxRsd,
      s"[${SlidingHyperLogLog.MinRsd}, ${SlidingHyperLogLog.MaxRsd}]", upperIncluded = true)

  /** A numeric constant in [lowest, upper) (or [lowest, upper]), or why it is not one. */
  def constantIn(e: Expression, name: String, lowest: Double, upper: Double,
      range: String, upperIncluded: Boolean): Either[TypeCheckResult, Double] = {
    if (!e.dataType.isInstanceOf[NumericType] && e.dataType != NullType) {
      return Left(typeCheckFailure(s"The ${toSQLId(name)} must be a numeric constant in $range, " +
        s"but ${toSQLExpr(e)} has the type ${toSQLType(e.dataType)}"))
    }
    if (!e.foldable) return Left(nonFoldable(name, e))
    val value = Cast(e, DoubleType).eval()
    if (value == null) return Left(unexpectedNull(name))
    val x = value.asInstanceOf[Double]
    if (x >= lowest && (x < upper || (upperIncluded && x == upper))) Right(x)
    else Left(outOfRange(name, range, x.toString))
  }

  def unexpectedType(index: Int, required: String, e: Expression): TypeCheckResult =
    DataTypeMismatch(
      errorSubClass = "UNEXPECTED_INPUT_TYPE",
      messageParameters = Map(
        "paramIndex" -> QueryErrors.paramIndex(index),
        "requiredType" -> required,
        "inputSql" -> toSQLExpr(e),
        "inputType" -> toSQLType(e.dataType)))

  /** Spark's TYPE_CHECK_FAILURE_WITH_HINT with `msg` and no hint. */
  def typeCheckFailure(msg: String): TypeCheckResult =
    DataTypeMismatch(
      errorSubClass = "TYPE_CHECK_FAILURE_WITH_HINT",
      messageParameters = Map("msg" -> msg, "hint" -> ""))

  def nonFoldable(name: String, e: Expression): TypeCheckResult =
    DataTypeMismatch(
      errorSubClass = "NON_FOLDABLE_INPUT",
      messageParameters = Map(
        "inputName" -> toSQLId(name),
        "inputType" -> toSQLType(e.dataType),
        "inputExpr" -> toSQLExpr(e)))

  def unexpectedNull(name: String): TypeCheckResult =
    DataTypeMismatch(
      errorSubClass = "UNEXPECTED_NULL",
      messageParameters = Map("exprName" -> toSQLId(name)))

  def outOfRange(name: String, range: String, current: String): TypeCheckResult =
    DataTypeMismatch(
      errorSubClass = "VALUE_OUT_OF_RANGE",
      messageParameters = Map(
        "exprName" -> toSQLId(name),
        "valueRange" -> range,
        "currentValue" -> current))
}

/**
 * An argument of each input row, read from its column without boxing where it is one
 * once bound (most are; `eval` boxes every value: a tenth of a GROUP BY map side's
 * samples), else evaluated once a row. Ask [[isNullIn]] first, then the value, of the
 * same row. One instance a bound aggregate: a task's own copy, so the evaluated value is
 * its own.
 */
private[windowsketch] abstract class RowArgument(e: Expression) {
  protected val column: Int = WindowArguments.columnOf(e)
  protected val dataType: DataType = e.dataType
  protected var evaluated: Any = null

  def isNullIn(row: InternalRow): Boolean =
    if (column >= 0) row.isNullAt(column)
    else {
      evaluated = e.eval(row)
      evaluated == null
    }
}

/** `ts` on the core's time axis ([[WindowArguments.timeOf]]). */
private[windowsketch] final class TimeArgument(ts: Expression) extends RowArgument(ts) {
  def of(row: InternalRow): Long =
    if (column >= 0) WindowArguments.timeAt(row, column, dataType)
    else WindowArguments.timeOf(evaluated, dataType)
}

/** A numeric `x` as a double ([[ApproxWindowPercentile.toDouble]]). */
private[windowsketch] final class NumberArgument(x: Expression) extends RowArgument(x) {
  def of(row: InternalRow): Double =
    if (column >= 0) ApproxWindowPercentile.doubleAt(row, column, dataType)
    else ApproxWindowPercentile.toDouble(evaluated, dataType)
}
