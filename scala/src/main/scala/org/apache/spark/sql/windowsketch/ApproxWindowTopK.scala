package org.apache.spark.sql.windowsketch

import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets.UTF_8

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess
import org.apache.spark.sql.catalyst.expressions.{Cast, Expression, ExpressionDescription,
  GenericInternalRow, Literal}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.trees.QuaternaryLike
import org.apache.spark.sql.catalyst.util.GenericArrayData
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import windowsketch.core.{CorruptSketchException, SketchFormat}
import windowsketch.core.count.OutOfOrderEventException
import windowsketch.core.frequencies.{ItemCount, LeveledTopK, SlidingTopK, TopKWindow}

/**
 * Items as the top-k sketches hold them: a value of a supported type as canonical bytes
 * (equal values, equal bytes: -0.0 is 0.0 and every NaN one NaN, as Spark groups them),
 * back to Spark's value, and as text for sketch columns, whose item type is known only
 * when their bytes are read. docs/format.md lists the encodings.
 */
object ItemCodec {
  /** The types `approx_top_k` takes: booleans, numbers, strings, dates and timestamps. */
  def supported(t: DataType): Boolean = t match {
    case BooleanType | ByteType | ShortType | IntegerType | LongType | FloatType | DoubleType |
         StringType | DateType | TimestampType | TimestampNTZType | _: DecimalType => true
    case _ => false
  }

  def encode(value: Any, t: DataType): Array[Byte] = t match {
    case BooleanType => Array((if (value.asInstanceOf[Boolean]) 1 else 0).toByte)
    case ByteType => ordered(value.asInstanceOf[Byte].toLong)
    case ShortType => ordered(value.asInstanceOf[Short].toLong)
    case IntegerType | DateType => ordered(value.asInstanceOf[Int].toLong)
    case LongType | TimestampType | TimestampNTZType => ordered(value.asInstanceOf[Long])
    case FloatType => orderedDouble(value.asInstanceOf[Float].toDouble)
    case DoubleType => orderedDouble(value.asInstanceOf[Double])
    case _: DecimalType => value.asInstanceOf[Decimal].toJavaBigDecimal.unscaledValue.toByteArray
    case StringType => value.asInstanceOf[UTF8String].getBytes
  }

  def decode(bytes: Array[Byte], t: DataType): Any = t match {
    case BooleanType => bytes(0) != 0
    case ByteType => unordered(bytes).toByte
    case ShortType => unordered(bytes).toShort
    case IntegerType | DateType => unordered(bytes).toInt
    case LongType | TimestampType | TimestampNTZType => unordered(bytes)
    case FloatType => unorderedDouble(bytes).toFloat
    case DoubleType => unorderedDouble(bytes)
    case d: DecimalType =>
      Decimal(new java.math.BigDecimal(new java.math.BigInteger(bytes), d.scale), d.precision, d.scale)
    case StringType => UTF8String.fromBytes(bytes)
  }

  /** The item as text, as CAST(item AS STRING) gives it with timestamps in UTC. */
  def text(bytes: Array[Byte], typeName: String): UTF8String = {
    val t = try DataType.fromDDL(typeName) catch {
      case _: Exception => throw new CorruptSketchException(s"unknown item type $typeName")
    }
    if (!supported(t)) throw new CorruptSketchException(s"unknown item type $typeName")
    val size = t match {
      case BooleanType => 1
      case StringType | _: DecimalType => -1
      case _ => 8
    }
    if ((size >= 0 && bytes.length != size) || (size < 0 && t != StringType && bytes.isEmpty)) {
      throw new CorruptSketchException(s"an item does not fit its type $typeName")
    }
    val value = Literal(decode(bytes, t), t)
    Cast(value, StringType, Some("UTC")).eval().asInstanceOf[UTF8String]
  }

  /** Sign flipped, big-endian: unsigned byte order is numeric order. */
  private def ordered(x: Long): Array[Byte] = ByteBuffer.allocate(8).putLong(x ^ Long.MinValue).array()

  private def unordered(b: Array[Byte]): Long = ByteBuffer.wrap(b).getLong() ^ Long.MinValue

  private def orderedDouble(d: Double): Array[Byte] = {
    val bits = java.lang.Double.doubleToLongBits(if (d == 0.0) 0.0 else d) // -0.0 is 0.0; one NaN
    ordered(if (bits < 0) ~bits ^ Long.MinValue else bits)
  }

  private def unorderedDouble(b: Array[Byte]): Double = {
    val key = unordered(b)
    java.lang.Double.longBitsToDouble(if (key < 0) ~(key ^ Long.MinValue) else key)
  }
}

/**
 * What the aggregates over `(x, ts, window [, ...], eps)` of the top-k family share: the
 * argument checks, reading rows into the window's item counts (exact, in a running frame
 * ordered by `ts`; the mergeable sketch everywhere else), merging and the binary state
 * (format kind 6).
 */
abstract class TopKAggregate extends TypedImperativeAggregate[TopKWindow] with OrderedInputAggregate {
  def x: Expression
  def ts: Expression
  def window: Expression
  def eps: Expression

  // Lazy so the constants are read once, after the checks, never during tree transforms.
  private lazy val windowLength: Long = WindowArguments.windowLength(window, ts).toOption.get
  private lazy val epsilon: Double = WindowArguments.epsValue(eps).toOption.get
  private lazy val tsType: DataType = ts.dataType
  protected lazy val itemType: DataType = x.dataType

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(
      TopKAggregate.checkItemType(x),
      WindowArguments.checkTimeType(ts),
      WindowArguments.windowLength(window, ts).left.getOrElse(TypeCheckSuccess),
      WindowArguments.epsValue(eps).left.getOrElse(TypeCheckSuccess)
    ).find(_.isFailure).getOrElse(TypeCheckSuccess)

  override def createAggregationBuffer(): TopKWindow = {
    val sketch: TopKWindow =
      if (orderedInput) new LeveledTopK(windowLength, epsilon) else new SlidingTopK(windowLength, epsilon)
    sketch.itemType = itemType.catalogString
    sketch.microsecondTime = WindowArguments.isTemporal(tsType)
    sketch
  }

  @transient private lazy val time = new TimeArgument(ts)

  override def update(buffer: TopKWindow, input: InternalRow): TopKWindow = {
    if (!time.isNullIn(input)) {
      val t = time.of(input)
      val value = x.eval(input)
      try {
        if (value == null) buffer.advanceTo(t) else buffer.add(t, ItemCodec.encode(value, itemType))
      } catch {
        case e: OutOfOrderEventException => throw new IllegalStateException(
          s"$prettyName: a row at ts=${e.ts} arrived after a row at ts=${e.newest} in a " +
            "window frame ordered by ts; please report this with the query", e)
      }
    }
    buffer
  }

  override def merge(buffer: TopKWindow, other: TopKWindow): TopKWindow = {
    buffer.merge(other)
    buffer
  }

  override def serialize(buffer: TopKWindow): Array[Byte] = buffer match {
    case s: SlidingTopK => SketchFormat.serializeTopK(s)
    case _ => throw new IllegalStateException(
      s"$prettyName: the time-ordered item counts of a running frame are never stored")
  }

  override def deserialize(bytes: Array[Byte]): TopKWindow = SketchFormat.deserializeTopKBuffer(bytes)
}

object TopKAggregate {
  def checkItemType(x: Expression): TypeCheckResult =
    if (ItemCodec.supported(x.dataType) || x.dataType == NullType) TypeCheckSuccess
    else WindowArguments.unexpectedType(0,
      "(\"BOOLEAN\" or \"NUMERIC\" or \"STRING\" or \"DATE\" or \"TIMESTAMP\" or \"TIMESTAMP_NTZ\")", x)

  /** The constant `k`: a positive integer, or why it is invalid. */
  def kValue(k: Expression): Either[TypeCheckResult, Int] = WindowArguments.countValue(k, "k", MaxK)

  /** The most items an answer lists. */
  val MaxK: Int = SlidingTopK.MaxK

  def resultType(item: DataType): ArrayType = ArrayType(StructType(Seq(
    StructField("item", item, nullable = false),
    StructField("count", LongType, nullable = false),
    StructField("lower", LongType, nullable = false),
    StructField("upper", LongType, nullable = false))), containsNull = false)

  /** Answers as an array of (item, count, lower, upper), items made by `item`. */
  def answer(top: Array[ItemCount], item: Array[Byte] => Any): GenericArrayData = {
    val rows = new Array[Any](top.length)
    var i = 0
    while (i < top.length) {
      val c = top(i)
      rows(i) = new GenericInternalRow(Array[Any](item(c.item), c.estimate, c.lower, c.upper))
      i += 1
    }
    new GenericArrayData(rows)
  }

  /** Reads a top-k sketch from a column, naming the function in every error. */
  def read(bytes: Array[Byte], function: String): SlidingTopK =
    try SketchFormat.deserializeTopK(bytes)
    catch { case e: CorruptSketchException => throw SketchInput.named(function, e) }
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window, k[, eps]) - Returns the `k` most frequent non-NULL `x` of the
      sliding window that ends at the largest `ts` seen (per group in GROUP BY), as an array
      of structs (item, count, lower, upper) ordered by count, with lower <= exact <= upper
      for every item listed and upper - lower <= eps * n (n the window's non-NULL rows).
      Every item that occurs more than eps * n times is a candidate, and is listed unless k
      items with larger counts are. Over a running window frame ordered by `ts` the counts
      are exact (lower = count = upper) while the window holds fewer than 1,407 rows at eps
      0.01 (about 14 / eps), and bounded as above otherwise, in O((1 / eps) log n) memory.
  """,
  arguments = """
    Arguments:
      * x - a BOOLEAN, numeric, STRING, DATE, TIMESTAMP or TIMESTAMP_NTZ value, as
          approx_top_k takes; NULL is skipped but its `ts` still moves the window.
      * ts - TIMESTAMP, TIMESTAMP_NTZ, DATE or an integral type: the row's time or position.
          Rows whose `ts` is NULL are ignored.
      * window - as for approx_window_count: N positions for an integral `ts`, `(now - N, now]`;
          a positive day-time interval for a temporal `ts`, `[now - window, now]`.
      * k - a constant positive INT: how many items to list.
      * eps - an optional constant in [0.0001, 1); default 0.01.
  """,
  examples = """
    Examples:
      > SELECT ts, _FUNC_(url, ts, 3, 1) OVER (ORDER BY ts) FROM VALUES (1, '/a'), (2, '/b'), (3, '/b'), (4, '/a'), (5, '/a') AS t(ts, url);
       1	[Row(item='/a', count=1, lower=1, upper=1)]
       2	[Row(item='/a', count=1, lower=1, upper=1)]
       3	[Row(item='/b', count=2, lower=2, upper=2)]
       4	[Row(item='/b', count=2, lower=2, upper=2)]
       5	[Row(item='/a', count=2, lower=2, upper=2)]
      > SELECT host, _FUNC_(status, ts, INTERVAL 1 HOUR, 2) FROM VALUES ('a', 404, TIMESTAMP'2025-01-01 10:00:00'), ('a', 200, TIMESTAMP'2025-01-01 10:20:00'), ('a', 404, TIMESTAMP'2025-01-01 10:40:00') AS t(host, status, ts) GROUP BY host;
       a	[Row(item=404, count=2, lower=2, upper=2), Row(item=200, count=1, lower=1, upper=1)]
  """,
  note = """
    The item field has the type of `x`; an empty window gives an empty array. Ties rank by
    the larger lower bound, then by the item.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class ApproxWindowTopK(
    x: Expression,
    ts: Expression,
    window: Expression,
    k: Expression,
    eps: Expression,
    orderedInput: Boolean = false,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends TopKAggregate {

  def this(x: Expression, ts: Expression, window: Expression, k: Expression, eps: Expression) =
    this(x, ts, window, k, eps, false, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression, k: Expression) =
    this(x, ts, window, k, Literal(WindowArguments.DefaultEps))

  private lazy val listed: Int = TopKAggregate.kValue(k).toOption.get

  override def prettyName: String = ApproxWindowTopK.Name

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(super.checkInputDataTypes(), TopKAggregate.kValue(k).left.getOrElse(TypeCheckSuccess))
      .find(_.isFailure).getOrElse(TypeCheckSuccess)

  override def withOrderedInput: ApproxWindowTopK = copy(orderedInput = true)

  // A running frame's answer is often the last row's: the time-ordered counts then return
  // the same array, and its answer is not made again. It is kept in Spark's unsafe form,
  // which the window operator copies per row as bytes rather than struct by struct.
  @transient private var lastTop: Array[ItemCount] = _
  @transient private var lastAnswer: Any = _
  @transient private lazy val unsafeAnswers = new UnsafeValues(dataType)

  override def eval(buffer: TopKWindow): Any = {
    val top = buffer.top(listed)
    if (!(top eq lastTop)) {
      lastAnswer = unsafeAnswers(TopKAggregate.answer(top, ItemCodec.decode(_, itemType)))
      lastTop = top
    }
    lastAnswer
  }

  override def nullable: Boolean = false

  override def dataType: DataType = TopKAggregate.resultType(x.dataType)

  override def children: Seq[Expression] = Seq(x, ts, window, k, eps)

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): ApproxWindowTopK =
    copy(x = newChildren(0), ts = newChildren(1), window = newChildren(2), k = newChildren(3),
      eps = newChildren(4))

  override def withNewMutableAggBufferOffset(newOffset: Int): ApproxWindowTopK =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): ApproxWindowTopK =
    copy(inputAggBufferOffset = newOffset)
}

object ApproxWindowTopK {
  val Name = "approx_window_top_k"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window[, eps]) - Returns a mergeable sketch (BINARY) of the non-NULL `x` of
      the group with their times, for the most frequent items of sliding windows later:
      combine sketches with window_top_k_sketch_merge and read them with
      window_top_k_sketch_estimate.
  """,
  arguments = """
    Arguments:
      * x, ts, window, eps - as for approx_window_top_k.
  """,
  examples = """
    Examples:
      > SELECT window_top_k_sketch_estimate(_FUNC_(url, ts, 3), 1) FROM VALUES (1, '/a'), (2, '/b'), (3, '/b'), (4, '/a') AS t(ts, url);
       [Row(item='/b', count=2, lower=2, upper=2)]
  """,
  note = """
    The sketch records its window, eps, time unit and item type; only sketches that agree on
    all four merge. Each dyadic time node keeps at most ceil(2 / eps) - 1 item counts; the
    format is in docs/format.md.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowTopKSketchAgg(
    x: Expression,
    ts: Expression,
    window: Expression,
    eps: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends TopKAggregate with QuaternaryLike[Expression] {

  def this(x: Expression, ts: Expression, window: Expression, eps: Expression) =
    this(x, ts, window, eps, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression) =
    this(x, ts, window, Literal(WindowArguments.DefaultEps))

  override def prettyName: String = WindowTopKSketchAgg.Name

  // A sketch is stored: it always takes the mergeable form.
  override def orderedInput: Boolean = false
  override def withOrderedInput: WindowTopKSketchAgg = this

  override def eval(buffer: TopKWindow): Any = serialize(buffer)

  override def dataType: DataType = BinaryType

  override def nullable: Boolean = false

  override def first: Expression = x
  override def second: Expression = ts
  override def third: Expression = window
  override def fourth: Expression = eps

  override protected def withNewChildrenInternal(
      newX: Expression, newTs: Expression, newWindow: Expression, newEps: Expression)
    : WindowTopKSketchAgg = copy(x = newX, ts = newTs, window = newWindow, eps = newEps)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowTopKSketchAgg =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowTopKSketchAgg =
    copy(inputAggBufferOffset = newOffset)
}

object WindowTopKSketchAgg {
  val Name = "window_top_k_sketch"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch) - Merges the top-k sketches of a group into one (BINARY). NULL sketches are
      skipped; a group of none gives NULL.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY sketches made by window_top_k_sketch with the same window, eps, kind
          of `ts` and type of `x`.
  """,
  examples = """
    Examples:
      > SELECT window_top_k_sketch_estimate(_FUNC_(s), 1) FROM (SELECT window_top_k_sketch(url, ts, 3) AS s FROM VALUES (1, '/a'), (2, '/b') AS t(ts, url) UNION ALL SELECT window_top_k_sketch(url, ts, 3) FROM VALUES (3, '/b'), (4, '/a') AS t(ts, url));
       [Row(item='/b', count=2, lower=2, upper=2)]
  """,
  note = """
    Merging keeps the bounds in any order. Sketches of different window, eps, time unit or
    item type, and bytes that are not a top-k sketch, are errors.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowTopKSketchMerge(
    sketch: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends SketchMergeAggregate[SlidingTopK] {

  def this(sketch: Expression) = this(sketch, 0, 0)

  override def prettyName: String = WindowTopKSketchMerge.Name

  override protected def maker: String = WindowTopKSketchAgg.Name

  override protected def read(bytes: Array[Byte]): SlidingTopK = TopKAggregate.read(bytes, prettyName)

  override protected def write(s: SlidingTopK): Array[Byte] = SketchFormat.serializeTopK(s)

  override protected def mergeInto(into: SlidingTopK, other: SlidingTopK): Unit = into.merge(other)

  override protected def withNewChildInternal(newChild: Expression): WindowTopKSketchMerge =
    copy(sketch = newChild)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowTopKSketchMerge =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowTopKSketchMerge =
    copy(inputAggBufferOffset = newOffset)
}

object WindowTopKSketchMerge {
  val Name = "window_top_k_sketch_merge"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch, k[, as_of[, sub_window]]) - Returns the `k` most frequent items of a top-k
      sketch in the window of length `sub_window` (default: the sketch's window) ending at
      `as_of` (default: the sketch's largest `ts`), as approx_window_top_k lists them, with
      each item as a STRING: CAST(item AS STRING) of the original value (timestamps in UTC).
  """,
  arguments = """
    Arguments:
      * sketch - BINARY, made by window_top_k_sketch or window_top_k_sketch_merge. NULL
          gives NULL.
      * k - a constant positive INT: how many items to list.
      * as_of - where the window ends: a TIMESTAMP, TIMESTAMP_NTZ or DATE for sketches over
          time, an integral position for sketches over positions. It may not be earlier than
          the sketch's largest `ts`. NULL gives NULL; a bare NULL literal means the argument
          is not given.
      * sub_window - a constant no longer than the sketch's window: a day-time interval for
          sketches over time, a number of positions otherwise. Sub-windows keep the bounds.
  """,
  examples = """
    Examples:
      > SELECT _FUNC_(s, 2), _FUNC_(s, 1, 5), _FUNC_(s, 1, 4, 1) FROM (SELECT window_top_k_sketch(code, ts, 3) AS s FROM VALUES (1, 404), (2, 200), (3, 404), (4, 500) AS t(ts, code));
       [Row(item='200', count=1, lower=1, upper=1), Row(item='404', count=1, lower=1, upper=1)]	[Row(item='404', count=1, lower=1, upper=1)]	[Row(item='500', count=1, lower=1, upper=1)]
  """,
  note = """
    The sketch knows its items' type only when its bytes are read, so items come back as
    text: cast them back to the type of `x`.
  """,
  group = "misc_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowTopKSketchEstimate(
    sketch: Expression,
    k: Expression,
    asOf: Expression,
    subWindow: Expression)
  extends SketchQuery[SlidingTopK] with QuaternaryLike[Expression] {

  def this(sketch: Expression, k: Expression, asOf: Expression) =
    this(sketch, k, asOf, Literal(null, NullType))

  def this(sketch: Expression, k: Expression) = this(sketch, k, Literal(null, NullType))

  private lazy val listed: Int = TopKAggregate.kValue(k).toOption.get

  override def prettyName: String = WindowTopKSketchEstimate.Name

  override protected def asOfIndex: Int = 2

  override protected def maker: String = WindowTopKSketchAgg.Name

  override protected def read(bytes: Array[Byte]): SlidingTopK = TopKAggregate.read(bytes, prettyName)

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(super.checkInputDataTypes(), TopKAggregate.kValue(k).left.getOrElse(TypeCheckSuccess))
      .find(_.isFailure).getOrElse(TypeCheckSuccess)

  override def dataType: DataType = TopKAggregate.resultType(StringType)

  override def eval(input: InternalRow): Any =
    sketchAndWindow(input) match {
      case null => null
      case (s, window) =>
        val (end, length) = window.getOrElse((s.now, s.window))
        val top = if (s.hasTime) s.topAt(end, length, listed) else Array.empty[ItemCount]
        val typeName = s.itemType
        try TopKAggregate.answer(top, ItemCodec.text(_, typeName))
        catch { case e: CorruptSketchException => throw SketchInput.named(prettyName, e) }
    }

  override def first: Expression = sketch
  override def second: Expression = k
  override def third: Expression = asOf
  override def fourth: Expression = subWindow

  override protected def withNewChildrenInternal(
      newFirst: Expression, newSecond: Expression, newThird: Expression, newFourth: Expression)
    : WindowTopKSketchEstimate =
    copy(sketch = newFirst, k = newSecond, asOf = newThird, subWindow = newFourth)
}

object WindowTopKSketchEstimate {
  val Name = "window_top_k_sketch_estimate"
}
