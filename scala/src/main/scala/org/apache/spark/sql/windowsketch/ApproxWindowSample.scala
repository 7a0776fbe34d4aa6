package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.{CatalystTypeConverters, InternalRow}
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.TypeCheckSuccess
import org.apache.spark.sql.catalyst.expressions.{Cast, Expression, ExpressionDescription,
  GenericInternalRow, Literal, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.trees.QuaternaryLike
import org.apache.spark.sql.catalyst.util.GenericArrayData
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import windowsketch.core.{CorruptSketchException, SketchFormat}
import windowsketch.core.sampling.{SampledRow, SlidingSample}

/**
 * Values as samples and filters hold them: the bytes of Spark's binary row (UnsafeRow) of
 * one field holding the value, for a value of any type GROUP BY takes. Equal values of one
 * type have equal bytes, which is what the rows' priorities and fingerprints hash.
 */
object RowValues {
  /** Every type Spark can group by: no MAP (and no VARIANT) anywhere inside. */
  def supported(t: DataType): Boolean = t match {
    case _: MapType => false
    case a: ArrayType => supported(a.elementType)
    case s: StructType => s.fields.forall(f => supported(f.dataType))
    case other => other.typeName != "variant"
  }

  def checkType(x: Expression, index: Int = 0): TypeCheckResult =
    if (supported(x.dataType)) TypeCheckSuccess
    else WindowArguments.unexpectedType(index, "a type without MAP or VARIANT inside (one GROUP BY takes)", x)

  /** A reusable decoder: the value of `t` that `bytes` hold. */
  final class Decoder(t: DataType) {
    private val row = new UnsafeRow(1)
    def apply(bytes: Array[Byte]): Any = {
      row.pointTo(bytes, bytes.length)
      // The bytes are never written again, so the value may keep pointing into them.
      row.get(0, t)
    }
  }

  /**
   * Values of `t` as external Rows hold them (a live stream's input) to a sample's bytes,
   * and from them as Spark's internal values (its output); it travels to executors and
   * makes its projection there.
   */
  final class ExternalRows(t: DataType) extends Serializable {
    @transient private lazy val toCatalyst = CatalystTypeConverters.createToCatalystConverter(t)
    @transient private lazy val project = UnsafeProjection.create(Array(t))
    @transient private lazy val decoder = new Decoder(t)
    def encode(value: Any): Array[Byte] =
      project(new GenericInternalRow(Array[Any](toCatalyst(value)))).copy().getBytes
    /** The value as Spark holds it inside a row (pointing into `bytes`). */
    // A state's bytes pass a checksum, not a parser: checked before Spark reads them.
    def decodeInternal(bytes: Array[Byte]): Any =
      if (RowBytes.wellFormed(bytes, t)) decoder(bytes)
      else throw new CorruptSketchException(s"a value is not a binary row of ${t.catalogString}")
  }

  /** The constant `k`: a positive integer up to SlidingSample.MaxK, or why it is invalid. */
  def kValue(k: Expression): Either[TypeCheckResult, Int] =
    WindowArguments.countValue(k, "k", SlidingSample.MaxK)

  /** The constant `seed`: any integer, or why it is invalid. */
  def seedValue(seed: Expression): Either[TypeCheckResult, Long] =
    WindowArguments.integralConstant(seed, "seed", "a constant integer")

  /** The type a stored sketch names, or a corrupt sketch's error. */
  def typeOf(typeName: String): DataType = {
    val t = try DataType.fromDDL(typeName) catch {
      case _: Exception => throw new CorruptSketchException(s"unknown value type $typeName")
    }
    if (!supported(t)) throw new CorruptSketchException(s"unknown value type $typeName")
    t
  }

  /** Values of a stored sketch as text, CAST(value AS STRING) with timestamps in UTC. */
  final class Text(t: DataType) {
    private val decode = new Decoder(t)
    def apply(bytes: Array[Byte]): UTF8String =
      Cast(Literal(decode(bytes), t), StringType, Some("UTC")).eval().asInstanceOf[UTF8String]
  }

  /**
   * Reads a stored sample sketch, naming `function` in every error. Its values come from a
   * column, not from this build, so each is checked to be a binary row of the sketch's type
   * whose offsets stay inside its bytes before anything reads it.
   */
  def readSample(bytes: Array[Byte], function: String): SlidingSample =
    try {
      val s = SketchFormat.deserializeSample(bytes)
      val t = typeOf(s.itemType)
      s.heldRows.foreach { r =>
        if (!RowBytes.wellFormed(r.value, t)) {
          throw new CorruptSketchException(s"a value is not a binary row of ${t.catalogString}")
        }
      }
      s
    } catch { case e: CorruptSketchException => throw SketchInput.named(function, e) }

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

/**
 * What the aggregates over `(x, ts, window, k [, seed])` of the sample family share: the
 * argument checks, reading rows into the sample, merging and the binary state (kind 10).
 */
abstract class SampleAggregate extends TypedImperativeAggregate[SlidingSample] {
  def x: Expression
  def ts: Expression
  def window: Expression
  def k: Expression
  def seed: Expression

  // Lazy so the constants are read once, after the checks, never during tree transforms.
  private lazy val windowLength: Long = WindowArguments.windowLength(window, ts).toOption.get
  protected lazy val drawn: Int = RowValues.kValue(k).toOption.get
  private lazy val seedValue: Long = RowValues.seedValue(seed).toOption.get
  private lazy val tsType: DataType = ts.dataType
  private lazy val itemType: String = x.dataType.catalogString
  @transient private lazy val encode = UnsafeProjection.create(Seq(x))

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(
      RowValues.checkType(x),
      WindowArguments.checkTimeType(ts),
      WindowArguments.windowLength(window, ts).left.getOrElse(TypeCheckSuccess),
      RowValues.kValue(k).left.getOrElse(TypeCheckSuccess),
      RowValues.seedValue(seed).left.getOrElse(TypeCheckSuccess)
    ).find(_.isFailure).getOrElse(TypeCheckSuccess)

  override def createAggregationBuffer(): SlidingSample = {
    val s = new SlidingSample(windowLength, drawn, seedValue)
    s.itemType = itemType
    s.microsecondTime = WindowArguments.isTemporal(tsType)
    s
  }

  @transient private lazy val time = new TimeArgument(ts)

  override def update(buffer: SlidingSample, input: InternalRow): SlidingSample = {
    if (!time.isNullIn(input)) {
      val t = time.of(input)
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

  override def serialize(buffer: SlidingSample): Array[Byte] = SketchFormat.serializeSample(buffer)

  override def deserialize(bytes: Array[Byte]): SlidingSample = SketchFormat.deserializeSample(bytes)

  override def nullable: Boolean = false

  override def children: Seq[Expression] = Seq(x, ts, window, k, seed)
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
  extends SampleAggregate {

  def this(x: Expression, ts: Expression, window: Expression, k: Expression, seed: Expression) =
    this(x, ts, window, k, seed, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression, k: Expression) =
    this(x, ts, window, k, Literal(0L))

  @transient private lazy val decode = new RowValues.Decoder(x.dataType)

  override def prettyName: String = ApproxWindowSample.Name

  override def eval(buffer: SlidingSample): Any = RowValues.answer(buffer.sample, decode)

  override def dataType: DataType = ArrayType(x.dataType, containsNull = false)

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

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(x, ts, window, k[, seed]) - Returns a mergeable sketch (BINARY) of the group's
      rows for samples of sliding windows later: combine sketches with
      window_sample_sketch_merge and read them with window_sample_sketch_get.
  """,
  arguments = """
    Arguments:
      * x, ts, window, k, seed - as for approx_window_sample; `k` is the largest sample the
          sketch can give.
  """,
  examples = """
    Examples:
      > SELECT window_sample_sketch_get(_FUNC_(url, ts, 3, 2)) FROM VALUES (1, '/a'), (2, '/b'), (3, '/c'), (4, '/d') AS t(ts, url);
       ['/b', '/c']
  """,
  note = """
    The sketch records its window, k, seed, time unit and value type; only sketches that
    agree on all five merge. It holds the rows of its window that fewer than k later rows
    outrank, about k * ln(n / k) of n; the format is in docs/format.md.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowSampleSketchAgg(
    x: Expression,
    ts: Expression,
    window: Expression,
    k: Expression,
    seed: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends SampleAggregate {

  def this(x: Expression, ts: Expression, window: Expression, k: Expression, seed: Expression) =
    this(x, ts, window, k, seed, 0, 0)

  def this(x: Expression, ts: Expression, window: Expression, k: Expression) =
    this(x, ts, window, k, Literal(0L))

  override def prettyName: String = WindowSampleSketchAgg.Name

  override def eval(buffer: SlidingSample): Any = serialize(buffer)

  override def dataType: DataType = BinaryType

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): WindowSampleSketchAgg =
    copy(x = newChildren(0), ts = newChildren(1), window = newChildren(2), k = newChildren(3),
      seed = newChildren(4))

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowSampleSketchAgg =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowSampleSketchAgg =
    copy(inputAggBufferOffset = newOffset)
}

object WindowSampleSketchAgg {
  val Name = "window_sample_sketch"

}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch) - Merges the sample sketches of a group into one (BINARY), the sketch one
      window_sample_sketch over all their rows would give. NULL sketches are skipped; a group
      of none gives NULL.
  """,
  arguments = """
    Arguments:
      * sketch - BINARY sketches made by window_sample_sketch with the same window, k, seed,
          kind of `ts` and type of `x`.
  """,
  examples = """
    Examples:
      > SELECT window_sample_sketch_get(_FUNC_(s)) FROM (SELECT window_sample_sketch(url, ts, 3, 2) AS s FROM VALUES (1, '/a'), (2, '/b') AS t(ts, url) UNION ALL SELECT window_sample_sketch(url, ts, 3, 2) FROM VALUES (3, '/c'), (4, '/d') AS t(ts, url));
       ['/b', '/c']
  """,
  note = """
    Any merge order gives the same bytes. Sketches of different window, k, seed, time unit
    or value type, and bytes that are not a sample sketch, are errors.
  """,
  group = "agg_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowSampleSketchMerge(
    sketch: Expression,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends SketchMergeAggregate[SlidingSample] {

  def this(sketch: Expression) = this(sketch, 0, 0)

  override def prettyName: String = WindowSampleSketchMerge.Name

  override protected def maker: String = WindowSampleSketchAgg.Name

  override protected def read(bytes: Array[Byte]): SlidingSample = RowValues.readSample(bytes, prettyName)

  override protected def write(s: SlidingSample): Array[Byte] = SketchFormat.serializeSample(s)

  override protected def mergeInto(into: SlidingSample, other: SlidingSample): Unit = into.merge(other)

  override protected def withNewChildInternal(newChild: Expression): WindowSampleSketchMerge =
    copy(sketch = newChild)

  override def withNewMutableAggBufferOffset(newOffset: Int): WindowSampleSketchMerge =
    copy(mutableAggBufferOffset = newOffset)

  override def withNewInputAggBufferOffset(newOffset: Int): WindowSampleSketchMerge =
    copy(inputAggBufferOffset = newOffset)
}

object WindowSampleSketchMerge {
  val Name = "window_sample_sketch_merge"
}

// scalastyle:off line.size.limit
@ExpressionDescription(
  usage = """
    _FUNC_(sketch[, k[, as_of[, sub_window]]]) - Returns the sample of `k` values (default:
      the sketch's k) of a sample sketch's window of length `sub_window` (default: the
      sketch's window) ending at `as_of` (default: the sketch's largest `ts`), as
      approx_window_sample draws it over exactly that window's rows, with each value as a
      STRING: CAST(value AS STRING) of the original (timestamps in UTC).
  """,
  arguments = """
    Arguments:
      * sketch - BINARY, made by window_sample_sketch or window_sample_sketch_merge. NULL
          gives NULL.
      * k - a constant positive INT, at most the sketch's k; NULL means the sketch's k.
      * as_of - where the window ends: a TIMESTAMP, TIMESTAMP_NTZ or DATE for sketches over
          time, an integral position for sketches over positions. It may not be earlier than
          the sketch's largest `ts`. NULL gives NULL; a bare NULL literal means the argument
          is not given.
      * sub_window - a constant no longer than the sketch's window: a day-time interval for
          sketches over time, a number of positions otherwise.
  """,
  examples = """
    Examples:
      > SELECT _FUNC_(s), _FUNC_(s, 1), _FUNC_(s, 2, 5), _FUNC_(s, 2, 4, 1) FROM (SELECT window_sample_sketch(code, ts, 3, 2) AS s FROM VALUES (1, 404), (2, 200), (3, 404), (4, 500) AS t(ts, code));
       ['200', '500']	['200']	['404', '500']	['500']
  """,
  note = """
    The sketch knows its values' type only when its bytes are read, so values come back as
    text: cast them back to the type of `x`. A sample of a sub-window is the one its rows
    give: uniform and exact, since every row a sub-window could draw is in the sketch.
  """,
  group = "misc_funcs",
  since = "0.1.0")
// scalastyle:on line.size.limit
case class WindowSampleSketchGet(
    sketch: Expression,
    k: Expression,
    asOf: Expression,
    subWindow: Expression)
  extends SketchQuery[SlidingSample] with QuaternaryLike[Expression] {

  def this(sketch: Expression, k: Expression, asOf: Expression) =
    this(sketch, k, asOf, Literal(null, NullType))

  def this(sketch: Expression, k: Expression) = this(sketch, k, Literal(null, NullType))

  def this(sketch: Expression) = this(sketch, Literal(null, NullType))

  private def kGiven: Boolean = k.dataType != NullType
  private lazy val drawn: Int = if (kGiven) RowValues.kValue(k).toOption.get else 0

  override def prettyName: String = WindowSampleSketchGet.Name

  override protected def asOfIndex: Int = 2

  override protected def maker: String = WindowSampleSketchAgg.Name

  override protected def read(bytes: Array[Byte]): SlidingSample = RowValues.readSample(bytes, prettyName)

  override def checkInputDataTypes(): TypeCheckResult =
    Seq(super.checkInputDataTypes(),
      if (kGiven) RowValues.kValue(k).left.getOrElse(TypeCheckSuccess) else TypeCheckSuccess)
      .find(_.isFailure).getOrElse(TypeCheckSuccess)

  override def dataType: DataType = ArrayType(StringType, containsNull = false)

  override def eval(input: InternalRow): Any =
    sketchAndWindow(input) match {
      case null => null
      case (s, window) =>
        val count = if (kGiven) drawn else s.k
        if (count > s.k) {
          throw new IllegalArgumentException(
            s"$prettyName: k $count is larger than the sketch's k (${s.k})")
        }
        val (end, length) = window.getOrElse((s.now, s.window))
        val rows = if (s.hasTime) s.sampleAt(end, length, count) else Array.empty[SampledRow]
        val text = new RowValues.Text(RowValues.typeOf(s.itemType))
        new GenericArrayData(rows.flatMap(r => Array.fill(r.copies.toInt)(text(r.value))).toArray[Any])
    }

  override def first: Expression = sketch
  override def second: Expression = k
  override def third: Expression = asOf
  override def fourth: Expression = subWindow

  override protected def withNewChildrenInternal(
      newFirst: Expression, newSecond: Expression, newThird: Expression, newFourth: Expression)
    : WindowSampleSketchGet =
    copy(sketch = newFirst, k = newSecond, asOf = newThird, subWindow = newFourth)
}

object WindowSampleSketchGet {
  val Name = "window_sample_sketch_get"
}

/**
 * Checks bytes are a binary row (UnsafeRow) of one field of a type before Spark reads them
 * with unchecked offsets: the fixed region fits, every offset and size of a variable-length
 * value (strings, binaries, long decimals, structs, arrays, intervals) stays inside its
 * parent's bytes, nested rows and arrays recursively.
 */
private[windowsketch] object RowBytes {
  def wellFormed(bytes: Array[Byte], t: DataType): Boolean =
    row(bytes, 0, bytes.length, Array(t))

  private def row(b: Array[Byte], base: Int, size: Int, fields: Array[DataType]): Boolean = {
    val bitset = ((fields.length + 63) / 64) * 8
    val fixed = bitset + 8 * fields.length
    if (size < fixed || size % 8 != 0) return false
    fields.indices.forall { i =>
      isNull(b, base, i) || UnsafeRow.isFixedLength(fields(i)) ||
        inside(b, base, size, longAt(b, base + bitset + 8 * i), fixed, fields(i))
    }
  }

  private def array(b: Array[Byte], base: Int, size: Int, element: DataType): Boolean = {
    if (size < 8) return false
    val count = longAt(b, base)
    if (count < 0 || count > size) return false
    val n = count.toInt
    val header = 8 + ((n + 63) / 64) * 8
    val fixedSize = if (UnsafeRow.isFixedLength(element)) element.defaultSize else 8
    val end = header + ((n * fixedSize + 7) / 8) * 8
    if (end > size) return false
    UnsafeRow.isFixedLength(element) || (0 until n).forall { i =>
      isNull(b, base + 8, i) || inside(b, base, size, longAt(b, base + header + 8 * i), end, element)
    }
  }

  /** A variable-length value whose (offset << 32 | size) is `slot` from `base`. */
  private def inside(b: Array[Byte], base: Int, size: Int, slot: Long, from: Int, t: DataType): Boolean = {
    val offset = slot >>> 32
    val length = slot & 0xffffffffL
    if (offset < from || offset + length > size) return false
    val at = base + offset.toInt
    t match {
      case StringType | BinaryType => true
      case _: DecimalType => length <= 16
      case CalendarIntervalType => length == 16
      case s: StructType => row(b, at, length.toInt, s.fields.map(_.dataType))
      case a: ArrayType => array(b, at, length.toInt, a.elementType)
      case _ => false
    }
  }

  private def isNull(b: Array[Byte], base: Int, i: Int): Boolean =
    (longAt(b, base + 8 * (i / 64)) & (1L << (i % 64))) != 0

  private def longAt(b: Array[Byte], i: Int): Long = {
    var v = 0L
    var j = 7
    while (j >= 0) { v = (v << 8) | (b(i + j) & 0xffL); j -= 1 }
    v
  }
}
