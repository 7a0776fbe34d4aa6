package windowsketch.spark

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import org.apache.spark.sql.{Column, DataFrame, Row}
import org.apache.spark.sql.catalyst.CatalystTypeConverters
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, UnsafeArrayData}
import org.apache.spark.sql.catalyst.util.GenericArrayData
import org.apache.spark.sql.functions.{col, lit, when, xxhash64}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import org.apache.spark.sql.windowsketch.{DistinctEstimator, ItemCodec, RowValues, UnsafeValues}

import windowsketch.core._

/**
 * One aggregate of [[SlidingWindow]]: a family applied to a column, named in the output.
 * Build them with [[LiveColumn.count]], [[LiveColumn.sum]], [[LiveColumn.distinct]],
 * [[LiveColumn.percentile]], [[LiveColumn.moments]], [[LiveColumn.topK]] and [[LiveColumn.sample]];
 * rename with [[as]]; add
 * alerts to a count or sum with
 * [[alertAbove]] and [[alertBelow]].
 */
final case class LiveColumn private (
    family: String,
    input: Column,
    name: String,
    eps: Double,
    percentages: Seq[Double] = Nil,
    singlePercentage: Boolean = false,
    above: Option[Long] = None,
    below: Option[Long] = None,
    k: Int = 0,
    seed: Long = 0L) {
  /** The same aggregate, named `alias` in the output (by default, its family's name). */
  def as(alias: String): LiveColumn = copy(name = alias)

  /**
   * An alert on the certified bounds: the struct gains a field `above`, "rise" at the tick
   * where the lower bound passes `threshold` and "fall" where the upper bound is back at or
   * under it, NULL at other ticks (so no alert is false, and none flaps).
   */
  def alertAbove(threshold: Long): LiveColumn = copy(above = Some(threshold))

  /**
   * An alert on the certified bounds: the struct gains a field `below`, "fall" at the tick
   * where the upper bound goes under `threshold` and "rise" where the lower bound is back at
   * or over it, NULL at other ticks. A new key starts at 0, under it.
   */
  def alertBelow(threshold: Long): LiveColumn = copy(below = Some(threshold))
}

object LiveColumn {
  /** Events where `v` is true, with certified bounds: STRUCT(estimate, lower, upper). */
  def count(v: Column, eps: Double = 0.01): LiveColumn = LiveColumn("count", v, "count", eps)

  /** The sum of non-negative integral `x`, with certified bounds: STRUCT(estimate, lower, upper). */
  def sum(x: Column, eps: Double = 0.01): LiveColumn = LiveColumn("sum", x, "sum", eps)

  /** Distinct non-NULL values of `x`, as approx_count_distinct with `rsd` gives them: BIGINT. */
  def distinct(x: Column, rsd: Double = 0.05): LiveColumn = LiveColumn("distinct", x, "distinct", rsd)

  /** The value of numeric `x` at `percentage`, as percentile_approx defines it: DOUBLE. */
  def percentile(x: Column, percentage: Double, eps: Double): LiveColumn =
    LiveColumn("percentile", x, "percentile", eps, Seq(percentage), singlePercentage = true)

  /** The values of numeric `x` at `percentages`: ARRAY<DOUBLE>. */
  def percentile(x: Column, percentages: Seq[Double], eps: Double): LiveColumn =
    LiveColumn("percentile", x, "percentile", eps, percentages)

  def percentile(x: Column, percentage: Double): LiveColumn = percentile(x, percentage, 0.01)

  /**
   * Average, variances and standard deviations of numeric `x`, with the guarantees of
   * approx_window_avg, _variance and _stddev (exact where the ticks cut the window into at
   * most 1,024 slices of gcd(window, every), or two a tick period): STRUCT(avg, var_pop, var_samp, stddev_pop,
   * stddev_samp), each DOUBLE, NULL as Spark's.
   */
  def moments(x: Column, eps: Double = 0.01): LiveColumn = LiveColumn("moments", x, "moments", eps)

  /**
   * The `k` most frequent values of `x` (BOOLEAN, numeric, STRING, DATE or TIMESTAMP), with
   * certified bounds: ARRAY<STRUCT<item, count, lower, upper>>, ordered by count, ties by the
   * larger lower bound, then by item; exact (count = lower = upper) while a key holds at
   * most 2^floor(log2(8 / eps)) counters (one per distinct value of each tick slice), then
   * upper - lower <= eps * n (past 128 tick slices, the running frames' leveled counts:
   * exact below about 14 / eps rows).
   */
  def topK(x: Column, k: Int, eps: Double = 0.01): LiveColumn = LiveColumn("top_k", x, "top_k", eps, k = k)

  /**
   * Up to `k` values of `x` (any type GROUP BY takes: a struct samples whole rows) drawn
   * uniformly from the window's non-NULL rows, oldest first, as approx_window_sample draws
   * them over the same rows with the same `seed` (within [-2^53, 2^53]): ARRAY of `x`'s type.
   */
  def sample(x: Column, k: Int, seed: Long = 0L): LiveColumn =
    LiveColumn("sample", x, "sample", 0.0, k = k, seed = seed)
}

/**
 * Live sliding aggregates on a stream, several per key in one state: for each key and each
 * tick T (a multiple of `every`) once the watermark has passed T, one row with every
 * aggregate over the window ending at T, final because every row at or before T that is
 * not late has arrived. The tick rules are `sliding_counts`': a key emits while some
 * aggregate's window holds inputs, then one last row (counts and sums 0, distinct 0,
 * percentiles and moments NULL, top-k empty), and its state is dropped once nothing of it
 * is pending.
 *
 * Each family brings its in-order structure from `windowsketch.core` (the exponential
 * histogram, the sum histogram, the sliding HyperLogLog, the percentiles' window, the
 * moments' buckets) and its
 * guarantee with it; see [[LiveColumn]] for the output types.
 */
object SlidingWindow {
  private val Name = "sliding_window"

  /** A family's part on the Spark side: its input column, its state and its output. */
  private sealed trait Family extends Serializable {
    /** Its answer has certified bounds (a [[BoundedSlide]]): it can carry alerts. */
    def bounded: Boolean = false
    def aggregate(c: LiveColumn): LiveAggregate
    /** The input as a column the state function reads (NULL: no input for this row). */
    def input(c: LiveColumn, dataType: DataType): Column
    /** The input of row `r` at `i` (not NULL) in the slide's encoding. */
    def encode(r: Row, i: Int): Long
    /** Its inputs are items, given to the slide as bytes by [[encodeBytes]]. */
    def takesBytes: Boolean = false
    def encodeBytes(c: LiveColumn, dataType: DataType): (Row, Int) => Array[Byte] = null
    def outputType(c: LiveColumn, dataType: DataType): DataType
    /** Reads the aggregate's answer off its slide (and alert, if any) at a tick, as Spark's internal value. */
    def reader(c: LiveColumn, dataType: DataType): (LiveSlide, CertifiedAlert) => Any
  }

  /** Counts and sums: STRUCT(estimate, lower, upper), then a crossing field per threshold. */
  private trait BoundedFamily extends Family {
    override def bounded: Boolean = true
    def outputType(c: LiveColumn, dataType: DataType): DataType = StructType(
      Seq("estimate", "lower", "upper").map(StructField(_, LongType, nullable = false)) ++
        c.above.map(_ => StructField("above", StringType)) ++ c.below.map(_ => StructField("below", StringType)))
    def reader(c: LiveColumn, dataType: DataType): (LiveSlide, CertifiedAlert) => Any = {
      val (above, below) = (c.above.isDefined, c.below.isDefined)
      val read: (LiveSlide, CertifiedAlert) => Any = {
        case (s: BoundedSlide, alert) =>
          val values = new Array[Any](3 + (if (above) 1 else 0) + (if (below) 1 else 0))
          values(0) = s.estimate
          values(1) = s.lower
          values(2) = s.upper
          if (above) values(3) = UTF8String.fromString(alert.aboveCrossing)
          if (below) values(values.length - 1) = UTF8String.fromString(alert.belowCrossing)
          new GenericInternalRow(values)
      }
      read
    }
  }

  private object CountFamily extends BoundedFamily {
    def aggregate(c: LiveColumn): LiveAggregate = LiveCountAggregate(c.eps, c.above, c.below)
    def input(c: LiveColumn, dataType: DataType): Column = {
      if (dataType != BooleanType) refuse(c, s"must be BOOLEAN (which rows are events), got ${dataType.sql}")
      when(c.input, lit(1L))
    }
    def encode(r: Row, i: Int): Long = 1L
  }

  private object SumFamily extends BoundedFamily {
    def aggregate(c: LiveColumn): LiveAggregate = LiveSumAggregate(c.eps, c.above, c.below)
    def input(c: LiveColumn, dataType: DataType): Column = dataType match {
      // A 0 adds nothing: no input, so it keeps no key alive.
      case ByteType | ShortType | IntegerType | LongType => when(c.input =!= 0, c.input.cast(LongType))
      case other => refuse(c, s"must be an integral column (non-negative values), got ${other.sql}")
    }
    def encode(r: Row, i: Int): Long = {
      val v = r.getLong(i)
      if (v < 0) throw new IllegalArgumentException(s"$Name: sum takes non-negative values, got $v")
      v
    }
  }

  private object DistinctFamily extends Family {
    def aggregate(c: LiveColumn): LiveAggregate = LiveDistinctAggregate(c.eps)
    // Spark's own hash and seed, as approx_count_distinct: the same registers.
    def input(c: LiveColumn, dataType: DataType): Column = when(c.input.isNotNull, xxhash64(c.input))
    def encode(r: Row, i: Int): Long = r.getLong(i)
    def outputType(c: LiveColumn, dataType: DataType): DataType = LongType
    def reader(c: LiveColumn, dataType: DataType): (LiveSlide, CertifiedAlert) => Any = {
      val estimator = new DistinctEstimator(c.eps)
      val read: (LiveSlide, CertifiedAlert) => Any = {
        case (s: LiveDistinctSlide, _) =>
          if (s.isEmpty) 0L
          else { val (zInverse, zeros) = s.sketch.registerSums; estimator.estimate(zInverse, zeros) }
      }
      read
    }
  }

  private object PercentileFamily extends Family {
    def aggregate(c: LiveColumn): LiveAggregate = LivePercentileAggregate(c.eps, c.percentages)
    def input(c: LiveColumn, dataType: DataType): Column = dataType match {
      case _: NumericType => c.input.cast(DoubleType)
      case other => refuse(c, s"must be numeric, got ${other.sql}")
    }
    def encode(r: Row, i: Int): Long = java.lang.Double.doubleToRawLongBits(r.getDouble(i))
    def outputType(c: LiveColumn, dataType: DataType): DataType =
      if (c.singlePercentage) DoubleType else ArrayType(DoubleType, containsNull = false)
    def reader(c: LiveColumn, dataType: DataType): (LiveSlide, CertifiedAlert) => Any = {
      val single = c.singlePercentage
      val read: (LiveSlide, CertifiedAlert) => Any = {
        case (s: LivePercentileSlide, _) =>
          val values = s.answer
          if (values == null) null else if (single) values(0) else UnsafeArrayData.fromPrimitiveArray(values)
      }
      read
    }
  }

  private object MomentsFamily extends Family {
    private val Statistics = Seq("avg", "var_pop", "var_samp", "stddev_pop", "stddev_samp")
    def aggregate(c: LiveColumn): LiveAggregate = LiveMomentsAggregate(c.eps)
    def input(c: LiveColumn, dataType: DataType): Column = dataType match {
      case _: NumericType => c.input.cast(DoubleType)
      case other => refuse(c, s"must be numeric, got ${other.sql}")
    }
    def encode(r: Row, i: Int): Long = {
      val d = r.getDouble(i)
      if (java.lang.Double.isNaN(d) || java.lang.Double.isInfinite(d)) {
        throw new IllegalArgumentException(s"$Name: moments take finite values, got $d")
      }
      java.lang.Double.doubleToRawLongBits(d)
    }
    def outputType(c: LiveColumn, dataType: DataType): DataType = StructType(Statistics.map(StructField(_, DoubleType)))
    def reader(c: LiveColumn, dataType: DataType): (LiveSlide, CertifiedAlert) => Any = {
      val read: (LiveSlide, CertifiedAlert) => Any = {
        case (s: LiveMomentsSlide, _) =>
          val m = s.answer
          def estimate(a: Array[Double]): Any = if (a == null) null else a(0)
          new GenericInternalRow(Array[Any](estimate(m.avg), estimate(m.variance(false)),
            estimate(m.variance(true)), estimate(m.stddev(false)), estimate(m.stddev(true))))
      }
      read
    }
  }

  private object TopKFamily extends Family {
    def aggregate(c: LiveColumn): LiveAggregate = LiveTopKAggregate(c.k, c.eps)
    def input(c: LiveColumn, dataType: DataType): Column = {
      if (!ItemCodec.supported(dataType)) {
        refuse(c, s"must be BOOLEAN, numeric, STRING, DATE or TIMESTAMP, got ${dataType.sql}")
      }
      c.input
    }
    def encode(r: Row, i: Int): Long = throw new UnsupportedOperationException("top_k takes items")
    override def takesBytes: Boolean = true
    override def encodeBytes(c: LiveColumn, dataType: DataType): (Row, Int) => Array[Byte] = {
      val toCatalyst = CatalystTypeConverters.createToCatalystConverter(dataType)
      (r, i) => ItemCodec.encode(toCatalyst(r.get(i)), dataType)
    }
    def outputType(c: LiveColumn, dataType: DataType): DataType = ArrayType(StructType(
      StructField("item", dataType, nullable = false) +:
        Seq("count", "lower", "upper").map(StructField(_, LongType, nullable = false))), containsNull = false)
    def reader(c: LiveColumn, dataType: DataType): (LiveSlide, CertifiedAlert) => Any = {
      val itemType = dataType
      val read: (LiveSlide, CertifiedAlert) => Any = {
        case (s: LiveTopKSlide, _) =>
          s.counts.itemType = itemType.catalogString // ties listed by the items' values
          new GenericArrayData(s.answer.map(a => new GenericInternalRow(
            Array[Any](ItemCodec.decode(a.item, itemType), a.estimate, a.lower, a.upper))): Array[Any])
      }
      read
    }
  }

  private object SampleFamily extends Family {
    def aggregate(c: LiveColumn): LiveAggregate = LiveSampleAggregate(c.k, c.seed)
    def input(c: LiveColumn, dataType: DataType): Column = {
      if (!RowValues.supported(dataType)) {
        refuse(c, s"must be of a type GROUP BY takes (no MAP inside), got ${dataType.sql}")
      }
      c.input
    }
    def encode(r: Row, i: Int): Long = throw new UnsupportedOperationException("sample takes values")
    override def takesBytes: Boolean = true
    override def encodeBytes(c: LiveColumn, dataType: DataType): (Row, Int) => Array[Byte] = {
      val rows = new RowValues.ExternalRows(dataType)
      (r, i) => rows.encode(r.get(i))
    }
    def outputType(c: LiveColumn, dataType: DataType): DataType = ArrayType(dataType, containsNull = false)
    def reader(c: LiveColumn, dataType: DataType): (LiveSlide, CertifiedAlert) => Any = {
      val rows = new RowValues.ExternalRows(dataType)
      val read: (LiveSlide, CertifiedAlert) => Any = {
        case (s: LiveSampleSlide, _) =>
          new GenericArrayData(s.answer.flatMap(r => Array.fill[Any](r.copies.toInt)(rows.decodeInternal(r.value))))
      }
      read
    }
  }

  private val Families: Map[String, Family] = Map(
    "count" -> CountFamily, "sum" -> SumFamily, "distinct" -> DistinctFamily,
    "percentile" -> PercentileFamily, "moments" -> MomentsFamily, "top_k" -> TopKFamily,
    "sample" -> SampleFamily)

  private def refuse(c: LiveColumn, problem: String): Nothing =
    throw new IllegalArgumentException(s"$Name: ${c.family} `${c.name}`: its column $problem")

  /**
   * @param events     a streaming DataFrame with the key columns, `ts` and the aggregates' inputs
   * @param keys       the key columns
   * @param ts         a TIMESTAMP column carrying a watermark, or an integral column of
   *                   positions (then `lateness`)
   * @param window     an interval string for a TIMESTAMP `ts` (inclusive `[T - window, T]`),
   *                   a number of positions otherwise (`(T - window, T]`)
   * @param every      the tick spacing, in the same units as `window`
   * @param aggregates the aggregates, each named by its `name` in the output
   */
  def apply(
      events: DataFrame,
      keys: Seq[String],
      ts: String,
      window: String,
      every: String,
      aggregates: Seq[LiveColumn],
      lateness: Option[String] = None): DataFrame = {
    val in = new LiveInput(Name, events, keys, ts, window, lateness,
      "the approx_window_* functions")
    require(aggregates.nonEmpty, s"$Name: give at least one aggregate")
    val taken = (keys :+ "window_end").toSet
    aggregates.groupBy(_.name).collect { case (name, same) if same.size > 1 || taken(name) => name }
      .headOption.foreach { name =>
        throw new IllegalArgumentException(s"$Name: two output columns are named `$name`: " +
          "give each aggregate its own name with .alias(...)")
      }
    val families = aggregates.map(c => Families.getOrElse(c.family, throw new IllegalArgumentException(
      s"$Name: unknown aggregate family ${c.family} (known: ${Families.keys.toSeq.sorted.mkString(", ")})")))
    aggregates.zip(families).foreach { case (c, f) =>
      if ((c.above.isDefined || c.below.isDefined) && !f.bounded) {
        throw new IllegalArgumentException(s"$Name: ${c.family} `${c.name}`: alerts fire on " +
          "certified bounds, which only count and sum have")
      }
    }
    val inputs = aggregates.zip(families).map { case (c, f) => f.input(c, in.typeOf(c.input)) }
    val (axisWindow, axisEvery) = (in.window, in.span("every", every))
    val specs = aggregates.zip(families).map { case (c, f) =>
      // A slide made now checks the parameters here, not in the first micro-batch.
      try { val a = f.aggregate(c); a.newSlide(axisWindow, axisEvery); a }
      catch { case e: IllegalArgumentException => throw new IllegalArgumentException(
        s"$Name: ${c.family} `${c.name}`: ${e.getMessage.stripPrefix("requirement failed: ")}") }
    }.toIndexedSeq
    val types = aggregates.map(c => in.typeOf(c.input))
    val outFields = aggregates.zip(families).zip(types).map { case ((c, f), t) =>
      StructField(c.name, f.outputType(c, t))
    }
    val itemEncoders = aggregates.zip(families).zip(types).map { case ((c, f), t) =>
      if (f.takesBytes) f.encodeBytes(c, t) else null
    }.toArray
    val (time, first, states, count, outputKeys) =
      (in.timeIndex, in.firstExtra, in.states, aggregates.length, in.outputKeys)
    val familyArray = families.toArray
    val readers = aggregates.zip(families).zip(types).map { case ((c, f), t) => f.reader(c, t) }.toArray
    val unsafeAnswers = outFields.map(f => new UnsafeValues(f.dataType)).toArray
    in.run(inputs, outFields) { (key, rows, bytes, upTo, out) =>
      val live = bytes.fold(new LiveWindow(axisWindow, axisEvery, specs)) { b =>
        states.read(key, "live window")(LiveWindow.fromBytes(axisWindow, axisEvery, specs, b))
      }
      rows.foreach { r =>
        val t = r.getLong(time)
        var i = 0
        while (i < count) {
          if (!r.isNullAt(first + i)) {
            if (itemEncoders(i) != null) live.addBytes(t, i, itemEncoders(i)(r, first + i))
            else live.add(t, i, familyArray(i).encode(r, first + i))
          }
          i += 1
        }
      }
      val keyValues = outputKeys.of(key)
      val n = keyValues.length
      // Each family's last answer and the object it was read from: an idle key's answers
      // stay the same from tick to tick until a slice leaves its window, and are emitted
      // again without being read, in Spark's unsafe form, which each output row copies as
      // bytes. An alert's crossing is read at every tick.
      val stamps = new Array[AnyRef](readers.length)
      val answers = new Array[Any](readers.length)
      live.advance(upTo, { tick =>
        val values = outputKeys.row(keyValues, 1 + readers.length)
        values(n) = tick
        var i = 0
        while (i < readers.length) {
          val slide = live.slides(i)
          val stamp = slide.answerStamp
          if (stamp == null || (stamp ne stamps(i)) || live.alerts(i) != null) {
            val answer = readers(i)(slide, live.alerts(i))
            stamps(i) = slide.answerStamp
            answers(i) = if (stamps(i) == null || live.alerts(i) != null) answer else unsafeAnswers(i)(answer)
          }
          values(n + 1 + i) = answers(i)
          i += 1
        }
        out += new GenericInternalRow(values)
      })
      if (live.isLive) Some((live.toBytes, live.nextTick)) else None
    }
  }

  /**
   * The operator from a JSON description, as Python and Spark Connect clients send it:
   * `{"key": [...], "ts": ..., "window": ..., "every": ..., "lateness": ... or null,
   * "aggregates": [{"family", "name", "input" (a column of `events`), "eps",
   * "percentages" (for percentile), "single" (one percentage: a DOUBLE result), "above" and
   * "below" (alert thresholds of a count or sum, or null), "k" (for top_k and sample),
   * "seed" (for sample)}]}`.
   */
  def fromJson(events: DataFrame, json: String): DataFrame = {
    val spec = new ObjectMapper().readTree(json)
    def text(node: JsonNode, field: String): String = Option(node.get(field)).filter(!_.isNull)
      .map(_.asText).getOrElse(throw new IllegalArgumentException(s"$Name: missing `$field`"))
    // By index: one source for Scala 2.12 and 2.13, whose Java converters differ.
    def items(node: JsonNode): Seq[JsonNode] = if (node == null) Nil else (0 until node.size).map(node.get)
    def threshold(node: JsonNode, field: String): Option[Long] =
      Option(node.get(field)).filter(!_.isNull).map(_.asText.toLong)
    val aggregates = items(spec.get("aggregates")).map { a =>
      LiveColumn(text(a, "family"), col(text(a, "input")), text(a, "name"), text(a, "eps").toDouble,
        items(a.get("percentages")).map(_.asDouble),
        Option(a.get("single")).exists(_.asBoolean), threshold(a, "above"), threshold(a, "below"),
        Option(a.get("k")).filter(!_.isNull).map(_.asInt).getOrElse(0),
        Option(a.get("seed")).filter(!_.isNull).map(_.asLong).getOrElse(0L))
    }
    apply(events, items(spec.get("key")).map(_.asText), text(spec, "ts"),
      text(spec, "window"), text(spec, "every"), aggregates,
      Option(spec.get("lateness")).filter(!_.isNull).map(_.asText))
  }
}
