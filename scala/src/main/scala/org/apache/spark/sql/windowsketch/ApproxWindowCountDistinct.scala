package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionDescription, Literal,
  XxHash64Function}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.trees.QuaternaryLike
import org.apache.spark.sql.catalyst.util.HyperLogLogPlusPlusHelper
import org.apache.spark.sql.types.{DataType, LongType}

import windowsketch.core.SketchFormat
import windowsketch.core.hll.SlidingHyperLogLog

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, rsd]) - Returns the approximate number of distinct non-NULL `x` in
      the sliding window that ends at the largest `ts` seen (per group in GROUP BY). A
      HyperLogLog++ whose registers remember when they got their values (sliding
      HyperLogLog): over a window that holds every row it gives approx_count_distinct's
      answer, and its relative standard error is about `rsd`. Over a running window frame
      ordered by `ts` each row costs O(1), or O(log m) when a register's oldest value changes.
  """,
  arguments = """
    Arguments:
      * x - a value of any type Spark can group by; NULL is not counted but its `ts` still
          moves the window forward.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
          Rows whose `ts` is NULL are ignored.
      * window - as for approx_window_count: N positions for an integral `ts`, `(now - N, now]`;
          a positive day-time interval for a temporal `ts`, `[now - window, now]`.
      * rsd - an optional constant relative standard deviation in [0.01, 0.39]; default 0.05,
          as approx_count_distinct.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(u, ts, 3) OVER (ORDER BY ts) FROM VALUES (1, 'a'), (2, 'b'), (3, 'a'), (4, 'c'), (5, 'c') AS t(ts, u);
       1	1
       2	2
       3	2
       4	3
       5	2
      > SELECT page, _FUNC_(user, ts, INTERVAL 30 MINUTES) FROM VALUES ('home', 1, TIMESTAMP'2025-01-01 10:00:00'), ('home', 2, TIMESTAMP'2025-01-01 10:20:00'), ('home', 1, TIMESTAMP'2025-01-01 10:40:00') AS t(page, user, ts) GROUP BY page;
       home	2
  """,
  note = """
    HyperLogLog's error is a distribution, not a bound: about 68% of answers lie within
    rsd of the exact count and about 95% within 2 * rsd; small windows are nearly exact
    (linear counting). The result is never NULL: an empty window counts 0.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowCountDistinct(
    x: Expression,
    ts: Expression,
    window: Expression,
    rsd: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends DistinctAggregate {

  def this(x: Expression, ts: Expression, window: Expression, rsd: Expression) =
    this(x, ts, window, rsd, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(ApproxWindowCountDistinct.DefaultRsd))

  private lazy val estimator = new DistinctEstimator(relativeSd)

  override def prettyName: String = ApproxWindowCountDistinct.Name

  // From the two sums the sketch keeps, so a running frame pays O(1) here.
  override def eval(buffer: SlidingHyperLogLog): Any = {
    val (zInverse, zeros) = buffer.registerSums
    estimator.estimate(zInverse, zeros)
  }

  override def nullable: Boolean = false

  override def defaultResult: Option[Literal] = Some(Literal(0L))

  override def dataType: DataType = LongType

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newRsd: Expression)
    : ApproxWindowCountDistinct = copy(x = newX, ts = newTs, window = newWindow, rsd = newRsd)

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowCountDistinct =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowCountDistinct =
    copy(inputAggBufferOffset = newOffset)
}

/**
 * What the aggregates over `(x, ts, window [, rsd])` share: the argument checks, reading
 * rows into a sliding HyperLogLog with Spark's own hash, merging and the binary state.
 * Subclasses choose the result.
 */
abstract class DistinctAggregate
  extends TypedImperativeAggregate[SlidingHyperLogLog] with QuaternaryLike[Expression]
  with CompactBufferAggregate {

  def x: Expression
  def ts: Expression
  def window: Expression
  def rsd: Expression

  // Lazy so the constants are read once, after the checks, never during tree transforms.
  private lazy val windowLength: Long = WindowArguments.windowLength(window, ts).toOption.get
  protected lazy val relativeSd: Double = WindowArguments.rsdValue(rsd).toOption.get
  private lazy val tsType: DataType = ts.dataType
  private lazy val valueType: DataType = x.dataType

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(
      WindowArguments.checkTimeType(ts),
      WindowArguments.windowLength(window, ts).left.getOrElse(TypeCheckSuccess),
      WindowArguments.rsdValue(rsd).left.getOrElse(TypeCheckSuccess)
    ).find(_.isFailure).getOrElse(TypeCheckSuccess)

  // A GROUP BY key whose window holds a few rows keeps them in the sketch's buffer, and the
  // map side's own table holds such keys; the first sketch to settle ends the table.
  override def bufferBytesBound: Long =
    SlidingHyperLogLog.bufferedBytesBound(SlidingHyperLogLog.precision(relativeSd))
  override def isCompact(buffer: Any): Boolean =
    buffer.asInstanceOf[SlidingHyperLogLog].isBuffered

  override def createAggregationBuffer(): SlidingHyperLogLog = {
    val sketch = new SlidingHyperLogLog(windowLength, relativeSd)
    sketch.microsecondTime = WindowArguments.isTemporal(tsType)
    sketch
  }

  @transient private lazy val time = new TimeArgument(ts)

  override def update(buffer: SlidingHyperLogLog, input: InternalRow): SlidingHyperLogLog = {
    if (!time.isNullIn(input)) {
      val t = time.of(input)
      val value = x.eval(input)
      // Spark's own hash and seed, as approx_count_distinct: the same registers.
      if (value != null) buffer.add(t, XxHash64Function.hash(value, valueType, 42L))
      else buffer.advanceTo(t)
    }
    buffer
  }

  override def merge(buffer: SlidingHyperLogLog, other: SlidingHyperLogLog): SlidingHyperLogLog = {
    buffer.merge(other)
    buffer
  }

  override def serialize(buffer: SlidingHyperLogLog): Array[Byte] =
    SketchFormat.serializeDistinct(buffer)

  override def deserialize(bytes: Array[Byte]): SlidingHyperLogLog =
    SketchFormat.deserializeDistinct(bytes)

  override def first: Expression = x
  override def second: Expression = ts
  override def third: Expression = window
  override def fourth: Expression = rsd
}

/**
 * HyperLogLog++'s estimate as Spark's `approx_count_distinct` makes it at precision `rsd`:
 * the same choice between linear counting and the bias-corrected raw estimate, with
 * Spark's tables, from a sketch's two register sums.
 */
final class DistinctEstimator(val rsd: Double) extends Serializable {
  private val helper = new HyperLogLogPlusPlusHelper(rsd)
  private val p = SlidingHyperLogLog.precision(rsd)
  private val m = (1 << p).toDouble
  private val alphaM2 = SlidingHyperLogLog.alphaM2(p)

  def estimate(zInverse: Double, zeros: Int): Long = {
    val raw = alphaM2 / zInverse
    def corrected = if (raw < 5.0 * m) raw - helper.estimateBias(raw) else raw
    val estimate =
      if (zeros > 0) {
        val linear = m * math.log(m / zeros)
        // Spark's query takes linear counting below its threshold or when raw <= 2.5 m.
        if (linear <= HyperLogLogPlusPlusHelper.THRESHOLDS(p - 4) || raw <= 2.5 * m) linear
        else corrected
      } else corrected
    math.round(estimate)
  }
}

object ApproxWindowCountDistinct {
  val Name = "approx_window_count_distinct"
  val DefaultRsd = 0.05
}
