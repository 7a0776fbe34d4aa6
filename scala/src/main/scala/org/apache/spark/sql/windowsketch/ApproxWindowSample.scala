package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionDescription, Literal,
  UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.util.GenericArrayData
import org.apache.spark.sql.errors.QueryErrorsBase
import org.apache.spark.sql.types._

import windowsketch.core.{SampledRow, SketchFormat, SlidingSample}

/**
 * Values as a sample holds them: the bytes of Spark's binary row (UnsafeRow) of one field
 * holding the value, for a value of any type a sample takes. Equal values of one type have
 * equal bytes, which is what the rows' priorities hash.
 */
object SampleValues extends QueryErrorsBase {
  /** Every type Spark can group by: no MAP (and no VARIANT) anywhere inside. */
  def supported(t: DataType): Boolean = t match {
    case _: MapType => false
    case a: ArrayType => supported(a.elementType)
    case s: StructType => s.fields.forall(f => supported(f.dataType))
    case other => other.typeName != "variant"
  }

  def checkType(x: Expression): TypeCheckResult =
    if (supported(x.dataType)) TypeCheckSuccess
    else WindowArguments.unexpectedType(0, "a type without MAP or VARIANT inside (one GROUP BY takes)", x)

  /** A reusable decoder: the value of `t` that `bytes` hold. */
  final class Decoder(t: DataType) {
    private val row = new UnsafeRow(1)
    def apply(bytes: Array[Byte]): Any = {
      row.pointTo(bytes, bytes.length)
      // The bytes are never written again, so the value may keep pointing into them.
      row.get(0, t)
    }
  }

  /** The constant `k`: a positive integer up to SlidingSample.MaxK, or why it is invalid. */
  def kValue(k: Expression): Either[TypeCheckResult, Int] = {
    val name = "k"
    if (!WindowArguments.isIntegral(k.dataType)) {
      return Left(WindowArguments.typeCheckFailure(s"The ${toSQLId(name)} must be a constant " +
        s"positive INT, but ${toSQLExpr(k)} has the type ${toSQLType(k.dataType)}"))
    }
    if (!k.foldable) return Left(WindowArguments.nonFoldable(name, k))
    val value = k.eval()
    if (value == null) return Left(WindowArguments.unexpectedNull(name))
    val n = WindowArguments.integralValue(value, k.dataType)
    if (n >= 1 && n <= SlidingSample.MaxK) Right(n.toInt)
    else Left(WindowArguments.outOfRange(name, s"[1, ${SlidingSample.MaxK}]", n.toString))
  }

  /** The constant `seed`: any integer, or why it is invalid. */
  def seedValue(seed: Expression): Either[TypeCheckResult, Long] = {
    val name = "seed"
    if (!WindowArguments.isIntegral(seed.dataType)) {
      return Left(WindowArguments.typeCheckFailure(s"The ${toSQLId(name)} must be a constant " +
        s"integer, but ${toSQLExpr(seed)} has the type ${toSQLType(seed.dataType)}"))
    }
    if (!seed.foldable) return Left(WindowArguments.nonFoldable(name, seed))
    val value = seed.eval()
    if (value == null) return Left(WindowArguments.unexpectedNull(name))
    Right(WindowArguments.integralValue(value, seed.dataType))
  }

  def answer(rows: Array[SampledRow], decode: Decoder): GenericArrayData = {
    val copies = rows.foldLeft(0L)(_ + _.copies).toInt
    val values = new Array[Any](copies)
    var i = 0
    rows.foreach { r =>
      val value = decode(r.value)
      var c = 0L
      while (c < r.copies) { values(i) = value; i += 1; c += 1 }
    }
    new GenericArrayData(values)
  }
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window, k[, seed]) - Returns up to `k` values of `x` drawn uniformly at
      random, without replacement, from the non-NULL rows of the sliding window that ends at
      the largest `ts` seen (per group in GROUP BY), in time order: every set of k rows of
      the window is equally likely, and a window of at most k rows gives them all. The draw
      is a seeded hash of each row's `ts` and `x`, so the same rows give the same sample in
      every frame, partitioning and merge order; rows equal in both `ts` and `x` are drawn
      together. Memory is about k * ln(n / k) rows of the window's n, in expectation.
  """,
  arguments = """
    Arguments:
      * x - a value of any type GROUP BY takes (no MAP inside), for example
          struct(url, status) to sample whole rows; NULL is skipped but its `ts` still moves
          the window.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
          Rows whose `ts` is NULL are ignored.
      * window - as for approx_window_count: N positions for an integral `ts`, `(now - N, now]`;
          a positive day-time interval for a temporal `ts`, `[now - window, now]`.
      * k - a constant INT in [1, 10000]: how many values to draw.
      * seed - an optional constant integer (default 0): another seed draws another sample.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(url, ts, 3, 2) OVER (ORDER BY ts) FROM VALUES (1, '/a'), (2, '/b'), (3, '/c'), (4, '/d') AS t(ts, url);
       1	['/a']
       2	['/a', '/b']
       3	['/b', '/c']
       4	['/b', '/c']
      > SELECT host, _FUNC_(status, ts, INTERVAL 1 HOUR, 5) FROM VALUES ('a', 404, TIMESTAMP'2025-01-01 10:00:00'), ('a', 200, TIMESTAMP'2025-01-01 10:20:00'), ('b', 500, TIMESTAMP'2025-01-01 10:40:00') AS t(host, status, ts) GROUP BY host ORDER BY host;
       a	[404, 200]
       b	[500]
  """,
  note = """
    The array has the type of `x`; an empty window gives an empty array.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowSample(
    x: Expression,
    ts: Expression,
    window: Expression,
    k: Expression,
    seed: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends TypedImperativeAggregate[SlidingSample] {

  def this(x: Expression, ts: Expression, window: Expression, k: Expression, seed: Expression) =
    this(x, ts, window, k, seed, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression, k: Expression) =
    this(x, ts, window, k, Literal(0L))

  // Lazy so the constants are read once, after the checks, never during tree transforms.
  private lazy val windowLength: Long = WindowArguments.windowLength(window, ts).toOption.get
  private lazy val drawn: Int = SampleValues.kValue(k).toOption.get
  private lazy val seedValue: Long = SampleValues.seedValue(seed).toOption.get
  private lazy val tsType: DataType = ts.dataType
  @transient private lazy val encode = UnsafeProjection.create(Seq(x))
  @transient private lazy val decode = new SampleValues.Decoder(x.dataType)

  override def prettyName: String = ApproxWindowSample.Name

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(
      SampleValues.checkType(x),
      WindowArguments.checkTimeType(ts),
      WindowArguments.windowLength(window, ts).left.getOrElse(TypeCheckSuccess),
      SampleValues.kValue(k).left.getOrElse(TypeCheckSuccess),
      SampleValues.seedValue(seed).left.getOrElse(TypeCheckSuccess)
    ).find(_.isFailure).getOrElse(TypeCheckSuccess)

  override def createAggregationBuffer(): SlidingSample = {
    val s = new SlidingSample(windowLength, drawn, seedValue)
    s.itemType = x.dataType.catalogString
    s.microsecondTime = WindowArguments.isTemporal(tsType)
    s
  }

  override def update(buffer: SlidingSample, input: InternalRow): SlidingSample = {
    val time = ts.eval(input)
    if (time != null) {
      val t = WindowArguments.timeOf(time, tsType)
      val row = encode(input)
      // A copy: the projection's row is reused, and its bytes may be the array it writes to.
      if (row.isNullAt(0)) buffer.advanceTo(t) else buffer.add(t, row.copy().getBytes)
    }
    buffer
  }

  override def merge(buffer: SlidingSample, other: SlidingSample): SlidingSample = {
    buffer.merge(other)
    buffer
  }

  override def eval(buffer: SlidingSample): Any = SampleValues.answer(buffer.sample, decode)

  override def serialize(buffer: SlidingSample): Array[Byte] = SketchFormat.serializeSample(buffer)

  override def deserialize(bytes: Array[Byte]): SlidingSample = SketchFormat.deserializeSample(bytes)

  override def nullable: Boolean = false

  override def dataType: DataType = ArrayType(x.dataType, containsNull = false)

  override def children: Seq[Expression] = Seq(x, ts, window, k, seed)

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): ApproxWindowSample =
    copy(x = newChildren(0), ts = newChildren(1), window = newChildren(2), k = newChildren(3),
      seed = newChildren(4))

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowSample =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowSample =
    copy(inputAggBufferOffset = newOffset)
}

object ApproxWindowSample {
  val Name = "approx_window_sample"
}
