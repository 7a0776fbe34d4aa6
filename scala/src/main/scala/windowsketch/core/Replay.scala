package windowsketch.core

import java.nio.ByteBuffer

import windowsketch.core.count.{DyadicWindowSketch, ExponentialHistogram, OrderedSumHistogram,
  WindowCountSketch}
import windowsketch.core.filter.{DeduplicationState, SlidingFilter}
import windowsketch.core.frequencies.{ItemCount, LeveledTopK, OrderedTopK, SlicedTopK, SlidingTopK, TopKWindow}
import windowsketch.core.hll.SlidingHyperLogLog
import windowsketch.core.moments.{MomentsWindow, OrderedMoments, SlicedMoments, SlidingMoments, WindowMoments}
import windowsketch.core.quantiles.{CompactAnswer, CompactQuantiles, SlicedQuantiles, SlidingQuantiles}

/**
 * Runs a whole stream through a histogram in one call and reports every row, for tests,
 * the demo and benchmarks driven from Python over py4j (one call per row would measure
 * py4j, not the sketch). Streams travel as packed big-endian arrays.
 */
object Replay {
  /** Longs reported per row by [[run]]. */
  val Columns = 6

  /**
   * @param timestamps one big-endian long per row
   * @param events     one byte per row: 1 an event, 0 not
   * @param withSizes  also serialize the state after each row that changed it (slower)
   * @return per row: estimate, lower bound, upper bound, the seed's estimate, bucket count
   *         and serialized bytes (0 unless `withSizes`), as big-endian longs
   */
  def run(window: Long, eps: Double, timestamps: Array[Byte], events: Array[Byte],
      withSizes: Boolean): Array[Byte] = {
    require(timestamps.length == 8 * events.length, "one 8-byte timestamp per event byte")
    val h = new ExponentialHistogram(window, eps)
    val in = ByteBuffer.wrap(timestamps)
    val out = ByteBuffer.allocate(8 * Columns * events.length)
    var bytes = 0L
    var i = 0
    while (i < events.length) {
      h.update(in.getLong(), events(i) != 0)
      if (withSizes) bytes = SketchFormat.serialize(h).length
      out.putLong(h.estimate).putLong(h.lowerBound).putLong(h.upperBound)
        .putLong(h.seedEstimate).putLong(h.bucketCount).putLong(if (withSizes) bytes else 0L)
      i += 1
    }
    out.array()
  }


  /** Longs reported per row by [[runAnyOrder]]. */
  val AnyOrderColumns = 4

  /**
   * Like [[run]] for the mergeable sketch, rows in any order, each with a weight (1 for an
   * event, 0 for none, any non-negative value for sums).
   * @return per row: estimate, lower bound, upper bound and node count
   */
  def runAnyOrder(window: Long, eps: Double, timestamps: Array[Byte],
      weights: Array[Byte]): Array[Byte] = {
    val d = new DyadicWindowSketch(window, eps)
    val out = ByteBuffer.allocate(8 * AnyOrderColumns * (timestamps.length / 8))
    addWeighted(d, timestamps, weights) {
      out.putLong(d.estimate).putLong(d.lowerBound).putLong(d.upperBound).putLong(d.nodeCount)
    }
    out.array()
  }

  /** Longs reported per row by [[runOrderedSums]]. */
  val OrderedSumColumns = 4

  /**
   * Like [[runAnyOrder]] for the time-ordered sum histogram, rows in time order, each with a
   * non-negative weight: per row, estimate, lower bound, upper bound and bucket count.
   */
  def runOrderedSums(window: Long, eps: Double, timestamps: Array[Byte],
      weights: Array[Byte]): Array[Byte] = {
    val h = new OrderedSumHistogram(window, eps)
    val out = ByteBuffer.allocate(8 * OrderedSumColumns * (timestamps.length / 8))
    addWeighted(h, timestamps, weights) {
      out.putLong(h.estimate).putLong(h.lowerBound).putLong(h.upperBound).putLong(h.bucketCount)
    }
    out.array()
  }

  /** The time-ordered sum histogram after a whole stream of weights, for its buckets. */
  def orderedSums(window: Long, eps: Double, timestamps: Array[Byte],
      weights: Array[Byte]): OrderedSumHistogram = {
    val h = new OrderedSumHistogram(window, eps)
    addWeighted(h, timestamps, weights)(())
    h
  }

  /** Feeds rows of (timestamp, weight), big-endian longs, to `sketch`, after each row `row`. */
  private def addWeighted(sketch: WindowCountSketch, timestamps: Array[Byte],
      weights: Array[Byte])(row: => Unit): Unit = {
    require(timestamps.length == weights.length, "one 8-byte weight per 8-byte timestamp")
    val in = ByteBuffer.wrap(timestamps)
    val w = ByteBuffer.wrap(weights)
    while (in.hasRemaining) {
      sketch.add(in.getLong(), w.getLong())
      row
    }
  }

  /** Compresses `h` (the pass its inserts run when its arrays fill); returns its buckets. */
  def compressedSums(h: OrderedSumHistogram): Array[Long] = {
    h.compress()
    sumBuckets(h)
  }

  /** The buckets of `h`, newest first, as (newest ts, oldest ts, sum) triples. */
  def sumBuckets(h: OrderedSumHistogram): Array[Long] = {
    val out = Array.newBuilder[Long]
    h.foreachBucket { (newest, oldest, sum) => out += newest; out += oldest; out += sum }
    out.result()
  }

  /** Feeds a whole stream to `sketch`. */
  def insertAll(sketch: WindowCountSketch, timestamps: Array[Byte], events: Array[Byte]): Unit = {
    require(timestamps.length == 8 * events.length, "one 8-byte timestamp per event byte")
    val in = ByteBuffer.wrap(timestamps)
    var i = 0
    while (i < events.length) { sketch.update(in.getLong(), events(i) != 0); i += 1 }
  }

  /** (estimate, lower, upper) for each sub-window length, of the window ending at `end`. */
  def subWindows(sketch: DyadicWindowSketch, end: Long, lengths: Array[Byte]): Array[Byte] = {
    val in = ByteBuffer.wrap(lengths)
    val out = ByteBuffer.allocate(3 * lengths.length)
    while (in.hasRemaining) sketch.boundsAt(end, in.getLong()).foreach(b => out.putLong(b))
    out.array()
  }

  /**
   * Reads each of `blobs` (concatenated, their lengths as big-endian longs) with the reader
   * of `family` ("count", "distinct", "percentile", "moments" or "top_k"): per blob, "read"
   * or the refusal's message, one per line. The format tests' thousands of damaged inputs
   * in one call; an exception other than a refusal propagates, here and in the live ones.
   */
  def verdicts(family: String, blobs: Array[Byte], lengths: Array[Byte]): String = {
    val reader: Array[Byte] => Any = family match {
      case "count" => SketchFormat.deserialize
      case "distinct" => SketchFormat.deserializeDistinct
      case "stored distinct" => SketchFormat.readStoredDistinct(_).registerSums
      case "percentile" => SketchFormat.deserializeQuantiles
      case "moments" => SketchFormat.deserializeMoments
      case "top_k" => SketchFormat.deserializeTopK
      case "filter" => SketchFormat.deserializeFilter
      case other => throw new IllegalArgumentException(s"no sketch reader for family $other")
    }
    verdictsOf(blobs, lengths, _.isInstanceOf[CorruptSketchException])(reader(_))
  }

  /**
   * Resumes a live count from each of `states` (concatenated, their lengths as big-endian
   * longs) and drives it on as [[liveState]] does: per state "read" or the refusal's
   * message (damaged bytes, or parameters that differ), one per line.
   */
  def liveStateVerdicts(window: Long, every: Long, eps: Double, alertAbove: Long, alertBelow: Long,
      states: Array[Byte], lengths: Array[Byte], timestamps: Array[Byte], upTo: Long): String =
    verdictsOf(states, lengths, _.isInstanceOf[IllegalArgumentException])(
      liveState(window, every, eps, alertAbove, alertBelow, _, timestamps, upTo))

  /** [[liveStateVerdicts]] for live windows, driven on as [[liveWindowState]] does. */
  def liveWindowVerdicts(window: Long, every: Long, aggregates: String, states: Array[Byte],
      lengths: Array[Byte], inputs: Array[Byte], upTo: Long): String =
    verdictsOf(states, lengths, _.isInstanceOf[IllegalArgumentException])(
      liveWindowState(window, every, aggregates, _, inputs, upTo))

  /**
   * Resumes a de-duplication bucket from each of `states` and offers it `hashes` (at time
   * `ts`, then the watermark at `upTo`): per state "read" or the refusal's message.
   */
  def deduplicationVerdicts(window: Long, fpp: Double, states: Array[Byte], lengths: Array[Byte],
      ts: Long, hashes: Array[Byte], upTo: Long): String =
    verdictsOf(states, lengths, _.isInstanceOf[IllegalArgumentException]) { bytes =>
      deduplicate(window, fpp, bytes, longs(hashes).map(_ => ts), hashes, Array(hashes.length / 8L), Array(upTo))
    }

  private def verdictsOf(blobs: Array[Byte], lengths: Array[Byte], refusal: Throwable => Boolean)(
      read: Array[Byte] => Any): String = {
    val sizes = ByteBuffer.wrap(lengths)
    var from = 0
    val out = new StringBuilder
    while (sizes.hasRemaining) {
      val until = from + sizes.getLong().toInt
      val verdict =
        try { read(java.util.Arrays.copyOfRange(blobs, from, until)); "read" }
        catch { case e: Throwable if refusal(e) => e.getMessage.replace('\n', ' ') }
      out.append(verdict).append('\n')
      from = until
    }
    out.toString
  }

  /**
   * A de-duplication bucket driven as `drop_duplicates_within` drives it: from `state` (no
   * bytes: a new one), batch `b` is the rows up to `ends(b)` (times and 64-bit hashes, in
   * the order given), each offered, then the watermark moves to `upTo(b)` and the state
   * goes through its bytes. Returns per row 1 if delivered, else 0, then per batch the
   * values held and the state's bytes, then the final state's bytes (longs, then bytes).
   */
  def deduplicate(window: Long, fpp: Double, state: Array[Byte], timestamps: Array[Byte],
      hashes: Array[Byte], ends: Array[Byte], upTo: Array[Byte]): Array[Byte] =
    deduplicate(window, fpp, state, longs(timestamps), hashes, longs(ends), longs(upTo))

  private def deduplicate(window: Long, fpp: Double, state: Array[Byte], ts: Array[Long],
      hashBytes: Array[Byte], ends: Array[Long], upTo: Array[Long]): Array[Byte] = {
    val hashes = longs(hashBytes)
    var s = if (state.isEmpty) new DeduplicationState(window, fpp)
      else DeduplicationState.fromBytes(window, fpp, state)
    val out = ByteBuffer.allocate(8 * (ts.length + 2 * ends.length))
    val perBatch = out.duplicate()
    perBatch.position(8 * ts.length)
    var bytes = s.toBytes
    var from = 0
    ends.indices.foreach { b =>
      while (from < ends(b)) {
        out.putLong(if (s.offer(ts(from), s.fingerprint(hashes(from)))) 1L else 0L)
        from += 1
      }
      s.forgetUpTo(upTo(b))
      bytes = s.toBytes
      perBatch.putLong(s.size).putLong(bytes.length)
      s = DeduplicationState.fromBytes(window, fpp, bytes)
    }
    out.array() ++ bytes
  }

  private def longs(bytes: Array[Byte]): Array[Long] = {
    val out = new Array[Long](bytes.length / 8)
    ByteBuffer.wrap(bytes).asLongBuffer().get(out)
    out
  }

  /** Compresses `sketch` and checks its invariant: null if it holds, else the problem. */
  def invariantProblem(sketch: DyadicWindowSketch): String = {
    sketch.compress()
    sketch.checkInvariant().orNull
  }

  /** A new histogram, for callers that cannot reach constructors (py4j with spark.jars). */
  def histogram(window: Long, eps: Double): ExponentialHistogram =
    new ExponentialHistogram(window, eps)

  /** A new mergeable sketch, likewise. */
  def dyadic(window: Long, eps: Double): DyadicWindowSketch = new DyadicWindowSketch(window, eps)

  /** The buckets of `h`, newest first, as (newest ts, oldest ts, count) triples. */
  def buckets(h: ExponentialHistogram): Array[Long] = {
    val out = Array.newBuilder[Long]
    h.foreachBucket { (newest, oldest, count) => out += newest; out += oldest; out += count }
    out.result()
  }

  /** Longs reported per emitted row, and per batch, by [[runLive]]. */
  val LiveRowColumns = 7
  val LiveBatchColumns = 4

  /**
   * One key's [[LiveCount]] over micro-batches, as the streaming operator drives it: batch
   * `b` adds the timestamps up to `batchEnds(b)` (exclusive index), then emits every tick up
   * to `upTo(b)`; with `throughBytes` the state is written and read back between batches.
   * A negative threshold means none.
   * @return two packed arrays: per emitted row (batch, tick, estimate, lower, upper, alert:
   *         0 none, 1 above, 2 below, crossing: 0 none, 1 rise, -1 fall); per batch (1 if
   *         the key is still live, its next tick or 0, state bytes, events refused as late)
   */
  def runLive(window: Long, every: Long, eps: Double, alertAbove: Long, alertBelow: Long,
      timestamps: Array[Byte], batchEnds: Array[Byte], upTo: Array[Byte],
      throughBytes: Boolean): Array[Array[Byte]] = {
    val spec = LiveCountSpec(window, every, eps, Some(alertAbove).filter(_ >= 0),
      Some(alertBelow).filter(_ >= 0))
    val ts = ByteBuffer.wrap(timestamps)
    val ends = ByteBuffer.wrap(batchEnds)
    val marks = ByteBuffer.wrap(upTo)
    val batches = batchEnds.length / 8
    val rows = new java.io.ByteArrayOutputStream()
    val rowOut = new java.io.DataOutputStream(rows)
    val perBatch = ByteBuffer.allocate(8 * LiveBatchColumns * batches)
    var live = new LiveCount(spec)
    var b = 0
    while (b < batches) {
      val end = ends.getLong()
      var refused = 0L
      while (ts.position() < 8 * end) if (!live.add(ts.getLong())) refused += 1
      live.advance(marks.getLong(), { row =>
        Seq(b.toLong, row.tick, row.estimate, row.lower, row.upper,
          row.alert match { case "above" => 1L; case "below" => 2L; case _ => 0L },
          row.crossing match { case "rise" => 1L; case "fall" => -1L; case _ => 0L })
          .foreach(rowOut.writeLong)
      })
      val state = live.toBytes
      perBatch.putLong(if (live.isLive) 1L else 0L).putLong(if (live.isLive) live.nextTick else 0L)
        .putLong(state.length.toLong).putLong(refused)
      if (throughBytes) live = LiveCount.fromBytes(spec, state)
      b += 1
    }
    Array(rows.toByteArray, perBatch.array())
  }

  /**
   * A live count's state bytes after adding `timestamps` (big-endian longs) and emitting every
   * tick up to `upTo`, with the state read from `state` first when it is not empty. A
   * negative threshold means none. @return the state bytes, then the emitted rows packed as
   * in [[runLive]] (batch 0).
   */
  def liveState(window: Long, every: Long, eps: Double, alertAbove: Long, alertBelow: Long,
      state: Array[Byte], timestamps: Array[Byte], upTo: Long): Array[Array[Byte]] = {
    val spec = LiveCountSpec(window, every, eps, Some(alertAbove).filter(_ >= 0),
      Some(alertBelow).filter(_ >= 0))
    val live = if (state.isEmpty) new LiveCount(spec) else LiveCount.fromBytes(spec, state)
    val ts = ByteBuffer.wrap(timestamps)
    while (ts.hasRemaining) live.add(ts.getLong())
    val rows = new java.io.ByteArrayOutputStream()
    val rowOut = new java.io.DataOutputStream(rows)
    live.advance(upTo, { row =>
      Seq(0L, row.tick, row.estimate, row.lower, row.upper,
        row.alert match { case "above" => 1L; case "below" => 2L; case _ => 0L },
        row.crossing match { case "rise" => 1L; case "fall" => -1L; case _ => 0L })
        .foreach(rowOut.writeLong)
    })
    Array(live.toBytes, rows.toByteArray)
  }

  /**
   * Drives a live window as a streaming key would between two restarts: reads `state` (a new
   * window if empty), adds the inputs (big-endian time, aggregate index and input, one long
   * each), advances to `upTo`. `aggregates` is `family:parameter[:percentage...]`, comma
   * separated (`count:0.01,percentile:0.01:0.5:0.99`, `top_k:k:eps`, `sample:k:seed`), a count or sum with thresholds
   * `count:0.01:above=30:below=5`. @return the state bytes, then one line per emitted
   * tick: the tick and each slide's answer, `|`-separated, an alert's crossings after its
   * answer (`,above rise`).
   */
  def liveWindowState(window: Long, every: Long, aggregates: String, state: Array[Byte],
      inputs: Array[Byte], upTo: Long): Array[AnyRef] = {
    val live = liveWindowOf(window, every, aggregates, state)
    val in = ByteBuffer.wrap(inputs)
    while (in.hasRemaining) {
      val (ts, i, input) = (in.getLong(), in.getLong().toInt, in.getLong())
      if (live.aggregates(i).takesBytes) live.addBytes(ts, i, ByteBuffer.allocate(8).putLong(input).array())
      else live.add(ts, i, input)
    }
    val lines = new StringBuilder
    live.advance(upTo, { tick =>
      lines ++= tick.toString
      live.slides.indices.foreach { i =>
        lines += '|'
        lines ++= (live.slides(i) match {
          case s: LiveCountSlide => s"${s.histogram.estimate},${s.histogram.lowerBound},${s.histogram.upperBound}"
          case s: LiveSumSlide => s"${s.histogram.estimate},${s.histogram.lowerBound},${s.histogram.upperBound}"
          case s: LiveDistinctSlide => s.sketch.registerSums.toString
          case s: LivePercentileSlide => Option(s.answer).fold("null")(_.mkString(","))
          case s: LiveTopKSlide =>
            s.answer.map(c => s"${ByteBuffer.wrap(c.item).getLong()}:${c.estimate}:${c.lower}:${c.upper}").mkString(",")
          case s: LiveMomentsSlide =>
            val m = s.answer
            Seq(m.avg, m.variance(true)).map(a => Option(a).fold("null")(_.mkString(","))).mkString(";")
          case s: LiveSampleSlide =>
            s.answer.map(r => s"${r.ts}:${ByteBuffer.wrap(r.value).getLong()}x${r.copies}").mkString(",")
        })
        Option(live.alerts(i)).foreach { alert =>
          Option(alert.aboveCrossing).foreach(c => lines ++= s",above $c")
          Option(alert.belowCrossing).foreach(c => lines ++= s",below $c")
        }
      }
      lines += '\n'
    })
    Array(live.toBytes, lines.toString)
  }

  /**
   * Each slide's form in a live window state (as [[liveWindowState]] names the aggregates):
   * "exact" or "bounded" for percentiles and top values (compact mode, bounded counts),
   * after "sliced " where they keep a summary a tick slice; "sliced" for moments kept so,
   * "-" otherwise, comma-separated.
   */
  def liveSlideForms(window: Long, every: Long, aggregates: String, state: Array[Byte]): String =
    liveWindowOf(window, every, aggregates, state).slides.map {
      case s: LivePercentileSlide =>
        val form = if (s.isCompact) "bounded" else "exact"
        if (s.quantiles.isInstanceOf[SlicedQuantiles]) s"sliced $form" else form
      case s: LiveTopKSlide =>
        val form = if (s.counts.isBounded) "bounded" else "exact"
        if (s.counts.isInstanceOf[SlicedTopK]) s"sliced $form" else form
      case s: LiveMomentsSlide => if (s.moments.isInstanceOf[SlicedMoments]) "sliced" else "-"
      case _ => "-"
    }.mkString(",")

  private def liveWindowOf(window: Long, every: Long, aggregates: String, state: Array[Byte]): LiveWindow = {
    val specs = aggregates.split(",").toIndexedSeq.map { a =>
      val parts = a.split(":")
      val p = parts(1).toDouble
      def threshold(name: String) = parts.collectFirst { case t if t.startsWith(s"$name=") => t.drop(name.length + 1).toLong }
      parts(0) match {
        case "count" => LiveCountAggregate(p, threshold("above"), threshold("below"))
        case "sum" => LiveSumAggregate(p, threshold("above"), threshold("below"))
        case "distinct" => LiveDistinctAggregate(p)
        case "percentile" => LivePercentileAggregate(p, parts.drop(2).map(_.toDouble).toSeq)
        case "moments" => LiveMomentsAggregate(p)
        case "top_k" => LiveTopKAggregate(p.toInt, parts.lift(2).map(_.toDouble).getOrElse(LiveTopKAggregate.DefaultEps))
        case "sample" => LiveSampleAggregate(p.toInt, parts.lift(2).map(_.toLong).getOrElse(0L))
      }
    }
    if (state.isEmpty) new LiveWindow(window, every, specs)
    else LiveWindow.fromBytes(window, every, specs, state)
  }

  /** A live count's parameters, a new live count and one read from bytes, for py4j callers. */
  def liveSpec(window: Long, every: Long, eps: Double): LiveCountSpec =
    LiveCountSpec(window, every, eps)
  def liveCount(spec: LiveCountSpec): LiveCount = new LiveCount(spec)
  def liveFromBytes(spec: LiveCountSpec, bytes: Array[Byte]): LiveCount = LiveCount.fromBytes(spec, bytes)

  /** A new distinct-count sketch, for py4j callers. */
  def distinct(window: Long, rsd: Double): SlidingHyperLogLog = new SlidingHyperLogLog(window, rsd)

  /** Adds rows (big-endian timestamps and 64-bit value hashes) to a distinct-count sketch. */
  def addDistinct(sketch: SlidingHyperLogLog, timestamps: Array[Byte], hashes: Array[Byte]): Unit = {
    val t = ByteBuffer.wrap(timestamps)
    val h = ByteBuffer.wrap(hashes)
    while (t.hasRemaining) sketch.add(t.getLong(), h.getLong())
  }

  /**
   * Feeds rows one by one and reports, after each, the register values of the window ending
   * at now, as bytes (m per row): what the brute-force tests compare with a HyperLogLog
   * built over exactly the window's values.
   */
  def distinctRegistersPerRow(window: Long, rsd: Double, timestamps: Array[Byte],
      hashes: Array[Byte]): Array[Byte] = {
    val s = new SlidingHyperLogLog(window, rsd)
    val t = ByteBuffer.wrap(timestamps)
    val h = ByteBuffer.wrap(hashes)
    val out = ByteBuffer.allocate(timestamps.length / 8 * (s.m + 12))
    while (t.hasRemaining) {
      s.add(t.getLong(), h.getLong())
      s.registerValues.foreach(v => out.put(v.toByte))
      val (z, zeros) = s.registerSums
      out.putDouble(z).putInt(zeros)
    }
    out.array()
  }

  def distinctRegisters(sketch: SlidingHyperLogLog): Array[Byte] = sketch.registerValues.map(_.toByte)

  /**
   * Percentiles of every row's window: rows in the given order (any), one sketch. `values`
   * holds a big-endian double per row, `present` a byte per row (0: the value is NULL, the
   * row only moves `now`). Per row: the window's count, then each percentage's answer, as
   * big-endian doubles.
   */
  def quantilesPerRow(window: Long, timestamps: Array[Byte], values: Array[Byte],
      present: Array[Byte], percentageBytes: Array[Byte]): Array[Byte] = {
    val percentages = doubles(percentageBytes)
    val s = new SlidingQuantiles(window, 0.01)
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(values)
    val out = ByteBuffer.allocate(present.length * 8 * (1 + percentages.length))
    var i = 0
    while (i < present.length) {
      val ts = t.getLong()
      val value = v.getDouble()
      if (present(i) != 0) s.add(ts, value) else s.advanceTo(ts)
      out.putDouble(s.count.toDouble)
      percentages.foreach(p => out.putDouble(s.quantile(p)))
      i += 1
    }
    out.array()
  }

  /**
   * The time-ordered counts' answer for `k` after each row ([[LeveledTopK]] if `leveled`,
   * else [[OrderedTopK]]), kept up incrementally, and the answer ranked anew from all their
   * counts (a second copy fed the same rows, asked for `k + 1` first so its answer is made
   * again). As big-endian longs: the rows whose answer
   * was the previous row's array (kept since nothing in it changed), then per row the kept
   * answer as [[topKPerRow]] writes one, then per row the answer ranked anew.
   */
  def orderedTopKAnsweredAnew(window: Long, eps: Double, k: Int, leveled: Boolean, timestamps: Array[Byte],
      items: Array[Byte], present: Array[Byte]): Array[Byte] = {
    def counts(): TopKWindow = if (leveled) new LeveledTopK(window, eps) else new OrderedTopK(window, eps)
    val kept = counts()
    val anew = counts()
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(items)
    val rowBytes = 8 * (1 + 4 * k)
    val out = ByteBuffer.allocate(8 + 2 * present.length * rowBytes)
    var reused = 0L
    var previous: Array[ItemCount] = null
    var i = 0
    while (i < present.length) {
      val ts = t.getLong()
      val item = v.getLong()
      Seq(kept, anew).foreach { s => if (present(i) != 0) s.add(ts, itemBytes(item)) else s.advanceTo(ts) }
      val answer = kept.top(k)
      if (answer eq previous) reused += 1
      previous = answer
      anew.top(k + 1)
      out.position(8 + i * rowBytes)
      putTop(out, answer, k)
      out.position(8 + (present.length + i) * rowBytes)
      putTop(out, anew.top(k), k)
      i += 1
    }
    out.putLong(0, reused)
    out.array()
  }

  /**
   * Rows split into partial sketches by `parts` (a byte per row, the partial's number),
   * each fed in the given order, then merged in a linear fold as Spark merges partial
   * aggregates: the window's count and each percentage's answer, as big-endian doubles.
   */
  def quantilesMerged(window: Long, timestamps: Array[Byte], values: Array[Byte],
      present: Array[Byte], parts: Array[Byte], percentageBytes: Array[Byte]): Array[Byte] = {
    val percentages = doubles(percentageBytes)
    val partials = scala.collection.mutable.TreeMap.empty[Int, SlidingQuantiles]
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(values)
    var i = 0
    while (i < present.length) {
      val s = partials.getOrElseUpdate(parts(i).toInt, new SlidingQuantiles(window, 0.01))
      val ts = t.getLong()
      val value = v.getDouble()
      if (present(i) != 0) s.add(ts, value) else s.advanceTo(ts)
      i += 1
    }
    val total = new SlidingQuantiles(window, 0.01)
    partials.values.foreach(total.merge)
    val out = ByteBuffer.allocate(8 * (1 + percentages.length))
    out.putDouble(total.count.toDouble)
    percentages.foreach(p => out.putDouble(total.quantile(p)))
    out.array()
  }

  /**
   * The compact percentiles ([[CompactQuantiles]]) of the rows, split into partial sketches
   * by `parts` (a byte per row) fed in the given order, each compressing at `pendingPerNode`
   * ([[CompactQuantiles.pendingPerNode]]). With `everyRow`, one partial only, an answer
   * after every row; otherwise the partials merged in a linear fold, one answer.
   * Each answer: inside rows, straddling rows, spread, variance, then per percentage the
   * estimate (NaN for none), lower, 1 if lower is certified, upper and 1 if upper is
   * certified, as big-endian doubles.
   */
  def compactQuantiles(window: Long, eps: Double, timestamps: Array[Byte], values: Array[Byte],
      present: Array[Byte], parts: Array[Byte], percentageBytes: Array[Byte],
      everyRow: Boolean, pendingPerNode: Int): Array[Byte] = {
    val percentages = doubles(percentageBytes)
    val answers = if (everyRow) present.length else 1
    val out = ByteBuffer.allocate(8 * answers * (4 + 5 * percentages.length))
    val partials = compactPartials(window, eps, pendingPerNode, timestamps, values, present, parts,
      if (everyRow) s => putCompact(out, s.answer(percentages), percentages) else _ => ())
    if (!everyRow) putCompact(out, mergedCompact(window, eps, partials).answer(percentages), percentages)
    out.array()
  }

  /**
   * The rows split, fed and merged as [[compactQuantiles]] does, then the answers for the
   * windows `(end - length, end]` of each pair of `ends` and `lengths` (big-endian longs)
   * ([[CompactQuantiles.answerAt]]), in its answer format.
   */
  def compactSubWindows(window: Long, eps: Double, timestamps: Array[Byte], values: Array[Byte],
      present: Array[Byte], parts: Array[Byte], percentageBytes: Array[Byte], ends: Array[Byte],
      lengths: Array[Byte]): Array[Byte] = {
    val percentages = doubles(percentageBytes)
    val total = mergedCompact(window, eps,
      compactPartials(window, eps, 1, timestamps, values, present, parts, _ => ()))
    val (e, l) = (ByteBuffer.wrap(ends), ByteBuffer.wrap(lengths))
    val out = ByteBuffer.allocate(ends.length * (4 + 5 * percentages.length))
    while (e.hasRemaining) putCompact(out, total.answerAt(percentages, e.getLong(), l.getLong()), percentages)
    out.array()
  }

  private def compactPartials(window: Long, eps: Double, pendingPerNode: Int, timestamps: Array[Byte],
      values: Array[Byte], present: Array[Byte], parts: Array[Byte],
      afterRow: CompactQuantiles => Unit): Iterable[CompactQuantiles] = {
    val partials = scala.collection.mutable.TreeMap.empty[Int, CompactQuantiles]
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(values)
    var i = 0
    while (i < present.length) {
      val s = partials.getOrElseUpdate(parts(i).toInt, {
        val partial = new CompactQuantiles(window, eps)
        partial.pendingPerNode = pendingPerNode
        partial
      })
      val ts = t.getLong()
      val value = v.getDouble()
      if (present(i) != 0) s.add(ts, value) else s.advanceTo(ts)
      afterRow(s)
      i += 1
    }
    partials.values
  }

  /** The partials folded linearly, as Spark merges partial aggregates. */
  private def mergedCompact(window: Long, eps: Double, partials: Iterable[CompactQuantiles]): CompactQuantiles = {
    val total = new CompactQuantiles(window, eps)
    partials.foreach(total.merge)
    total
  }

  private def putCompact(out: ByteBuffer, a: CompactAnswer, percentages: Array[Double]): Unit = {
    def flag(b: Boolean): Double = if (b) 1.0 else 0.0
    out.putDouble(a.inside.toDouble).putDouble(a.straddling.toDouble)
      .putDouble(a.spread.toDouble).putDouble(a.variance)
    percentages.indices.foreach { j =>
      out.putDouble(if (a.estimates.isEmpty) Double.NaN else a.estimates(j))
        .putDouble(a.lower(j)).putDouble(flag(a.hasLower(j)))
        .putDouble(a.upper(j)).putDouble(flag(a.hasUpper(j)))
    }
  }

  /**
   * Rows in the given order into a compact percentile sketch, answering after each row
   * both from its view (what a running frame reads) and by sorting every held value: the
   * number of rows where any field of the two answers differs. The sketch compresses at
   * `pendingPerNode` ([[CompactQuantiles.pendingPerNode]]).
   */
  def compactViewDisagreements(window: Long, eps: Double, pendingPerNode: Int, timestamps: Array[Byte],
      values: Array[Byte], present: Array[Byte], percentageBytes: Array[Byte]): Int = {
    val ps = doubles(percentageBytes)
    val s = new CompactQuantiles(window, eps)
    s.pendingPerNode = pendingPerNode
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(values)
    def bits(a: Array[Double]): Seq[Long] = a.toSeq.map(java.lang.Double.doubleToRawLongBits)
    def fields(a: CompactAnswer): Seq[Any] = Seq(bits(a.estimates),
      bits(a.lower.indices.map(j => if (a.hasLower(j)) a.lower(j) else 0.0).toArray),
      bits(a.upper.indices.map(j => if (a.hasUpper(j)) a.upper(j) else 0.0).toArray),
      a.hasLower.toSeq, a.hasUpper.toSeq, a.inside, a.straddling, a.spread,
      java.lang.Double.doubleToRawLongBits(a.variance))
    var differ = 0
    var i = 0
    while (i < present.length) {
      val ts = t.getLong()
      val value = v.getDouble()
      if (present(i) != 0) s.add(ts, value) else s.advanceTo(ts)
      if (fields(s.answer(ps)) != fields(s.answerAt(ps, s.now, window))) differ += 1
      i += 1
    }
    differ
  }

  /**
   * `rows` rows in time order, one a position, values from a fixed-seed generator (uniform,
   * or a slow increasing drift with noise when `drift`), into a compact percentile sketch
   * of window `window`: its values held, nodes, the window's inside rows, straddling
   * rows and variance at the end (rounded), and the sketch's bytes, as longs.
   */
  def compactState(window: Long, eps: Double, rows: Long, drift: Boolean): Array[Long] = {
    val s = new CompactQuantiles(window, eps)
    var x = 0x2545F4914F6CDD1DL
    var i = 0L
    while (i < rows) {
      x ^= x << 13; x ^= x >>> 7; x ^= x << 17
      val noise = (x >>> 11).toDouble / (1L << 53)
      s.add(i, if (drift) i.toDouble + rows * 0.01 * noise else noise)
      i += 1
    }
    val bytes = SketchFormat.serializeCompactQuantiles(s).length.toLong
    val a = s.answer(Array(0.5))
    Array(s.retained, s.nodeCount.toLong, a.inside, a.straddling, math.round(a.variance), bytes)
  }

  /**
   * False positives of a filter holding `distinct` values (BIGINT rows of 0 until
   * `distinct`, one window) over `absent` values it never saw (the BIGINT rows after them).
   */
  def filterFalsePositives(distinct: Int, absent: Int, fpp: Double): Long = {
    def row(v: Long): Array[Byte] = {
      val b = ByteBuffer.allocate(16).order(java.nio.ByteOrder.LITTLE_ENDIAN)
      b.putLong(0L).putLong(v)
      b.array()
    }
    val f = new SlidingFilter(1L << 40, fpp)
    var i = 0
    while (i < distinct) { f.add(i.toLong, f.fingerprint(row(i))); i += 1 }
    var positives = 0L
    i = 0
    while (i < absent) { if (f.containsAt(f.fingerprint(row(distinct.toLong + i)), f.now, f.window)) positives += 1; i += 1 }
    positives
  }

  /** A percentile sketch of these rows (any order), for format tests. */
  def quantileSketch(window: Long, eps: Double, microseconds: Boolean, timestamps: Array[Byte],
      values: Array[Byte]): SlidingQuantiles = {
    val s = new SlidingQuantiles(window, eps)
    s.microsecondTime = microseconds
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(values)
    while (t.hasRemaining) s.add(t.getLong(), v.getDouble())
    s
  }

  /** The count of a percentile sketch, then each percentage's answer. */
  def quantilesOf(s: SlidingQuantiles, percentageBytes: Array[Byte]): Array[Double] =
    s.count.toDouble +: doubles(percentageBytes).map(s.quantile)

  /** Doubles reported per answer by [[momentsPerRow]] and [[momentsMerged]]. */
  val MomentsWidth: Int = 2 + 3 * 5

  /**
   * The window's moments after each row, rows in the given order, one sketch: the
   * time-ordered [[OrderedMoments]] if `ordered` (rows must then be in time order), else
   * [[SlidingMoments]] (any order). `values` a big-endian double per row, `present` a byte
   * per row (0: NULL). Per row, as big-endian doubles: the count's lower and upper bounds,
   * then (estimate, lower, upper) of avg, var_pop, var_samp, stddev_pop and stddev_samp
   * (NaN where Spark answers NULL), then the nodes (buckets) held, the effective eps and 1
   * if the sketch's invariant holds (checked for SlidingMoments only).
   */
  def momentsPerRow(window: Long, eps: Double, ordered: Boolean, timestamps: Array[Byte],
      values: Array[Byte], present: Array[Byte]): Array[Byte] = {
    val s: MomentsWindow = if (ordered) new OrderedMoments(window, eps) else new SlidingMoments(window, eps)
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(values)
    val out = ByteBuffer.allocate(present.length * 8 * (MomentsWidth + 3))
    var i = 0
    while (i < present.length) {
      val ts = t.getLong()
      val value = v.getDouble()
      if (present(i) != 0) s.add(ts, value) else s.advanceTo(ts)
      putMoments(out, s.moments)
      s match {
        case sliding: SlidingMoments =>
          out.putDouble(sliding.nodeCount.toDouble)
          out.putDouble(sliding.effectiveEps)
          // A check costs O(n log n): every 16th row and the last.
          out.putDouble(if (i % 16 != 15 && i != present.length - 1) 1.0
            else { sliding.compress(); if (sliding.checkInvariant().isEmpty) 1.0 else 0.0 })
        case o: OrderedMoments =>
          out.putDouble(o.bucketCount.toDouble)
          out.putDouble(o.effectiveEps)
          out.putDouble(1.0)
      }
      i += 1
    }
    out.array()
  }

  /**
   * Rows split into partial sketches by `parts` (a byte per row), each fed in the given
   * order, folded linearly as Spark merges partial aggregates, then the window ending at
   * `end` of each length in `lengths`: [[MomentsWidth]] doubles each, as [[momentsPerRow]].
   */
  def momentsMerged(window: Long, eps: Double, timestamps: Array[Byte], values: Array[Byte],
      present: Array[Byte], parts: Array[Byte], end: Long, lengths: Array[Byte]): Array[Byte] = {
    val partials = scala.collection.mutable.TreeMap.empty[Int, SlidingMoments]
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(values)
    var i = 0
    while (i < present.length) {
      val s = partials.getOrElseUpdate(parts(i).toInt, new SlidingMoments(window, eps))
      val ts = t.getLong()
      val value = v.getDouble()
      if (present(i) != 0) s.add(ts, value) else s.advanceTo(ts)
      i += 1
    }
    val total = new SlidingMoments(window, eps)
    partials.values.foreach(total.merge)
    momentsAnswers(total, end, lengths)
  }

  /** The moments of `s`'s window ending at `end` of each length in `lengths`, as [[momentsMerged]]. */
  def momentsAnswers(s: SlidingMoments, end: Long, lengths: Array[Byte]): Array[Byte] = {
    val l = ByteBuffer.wrap(lengths)
    val out = ByteBuffer.allocate(lengths.length * MomentsWidth)
    while (l.hasRemaining) putMoments(out, s.momentsAt(end, l.getLong()))
    out.array()
  }

  /** A moments sketch of these rows (any order), for format tests. */
  def momentsSketch(window: Long, eps: Double, microseconds: Boolean, timestamps: Array[Byte],
      values: Array[Byte]): SlidingMoments = {
    val s = new SlidingMoments(window, eps)
    s.microsecondTime = microseconds
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(values)
    while (t.hasRemaining) s.add(t.getLong(), v.getDouble())
    s
  }

  /**
   * The top `k` items of the window after each row, rows in the given order: the exact
   * time-ordered counts if `ordered` (rows must then be in time order), else the sketch
   * [[SlidingTopK]]. `items` a big-endian long per row (the item is its 8 bytes), `present`
   * a byte per row (0: NULL). Per row, as big-endian longs: how many items are listed
   * (m <= k), then k entries of (item, estimate, lower, upper), the last k - m zeros, then
   * the effective eps's bits and 1 if the sketch's invariant holds (checked every 16th row
   * and on the last, for the sketch only; for the time-ordered counts, 1 while exact and 2
   * once bounded).
   */
  def topKPerRow(window: Long, eps: Double, k: Int, ordered: Boolean, timestamps: Array[Byte],
      items: Array[Byte], present: Array[Byte]): Array[Byte] = {
    val sketch = if (ordered) null else new SlidingTopK(window, eps)
    val exact = if (ordered) new OrderedTopK(window, eps) else null
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(items)
    val out = ByteBuffer.allocate(present.length * 8 * (3 + 4 * k))
    var i = 0
    while (i < present.length) {
      val ts = t.getLong()
      val item = itemBytes(v.getLong())
      if (ordered) { if (present(i) != 0) exact.add(ts, item) else exact.advanceTo(ts) }
      else { if (present(i) != 0) sketch.add(ts, item) else sketch.advanceTo(ts) }
      putTop(out, if (ordered) exact.top(k) else sketch.top(k), k)
      out.putLong(java.lang.Double.doubleToLongBits(if (ordered) exact.effectiveEps else sketch.effectiveEps))
      out.putLong(if (ordered) (if (exact.isBounded) 2L else 1L)
        else if (i % 16 != 15 && i != present.length - 1) 1L
        else { sketch.compress(); if (sketch.checkInvariant().isEmpty) 1L else 0L })
      i += 1
    }
    out.array()
  }

  /**
   * The running frames' leveled counts ([[LeveledTopK]]) over rows in time order, as
   * [[topKPerRow]] lays them out (per row the listed items, eps's bits, then 1 if the
   * answer was exact and 2 if not), then the most levels and the most counters and records
   * held on any row.
   */
  def leveledTopKPerRow(window: Long, eps: Double, k: Int, timestamps: Array[Byte],
      items: Array[Byte], present: Array[Byte]): Array[Byte] = {
    val s = new LeveledTopK(window, eps)
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(items)
    val out = ByteBuffer.allocate(present.length * 8 * (3 + 4 * k) + 16)
    var levels = 0L
    var held = 0L
    var i = 0
    while (i < present.length) {
      val ts = t.getLong()
      val item = itemBytes(v.getLong())
      if (present(i) != 0) s.add(ts, item) else s.advanceTo(ts)
      putTop(out, s.top(k), k)
      out.putLong(java.lang.Double.doubleToLongBits(eps))
      out.putLong(if (s.isExact) 1L else 2L)
      levels = math.max(levels, s.levelCount.toLong)
      held = math.max(held, s.heldEntries)
      i += 1
    }
    out.putLong(levels)
    out.putLong(held)
    out.array()
  }

  /**
   * Rows split into partial sketches by `parts` (a byte per row), each fed in the given
   * order, folded linearly as Spark merges partial aggregates, then the top `k` of the
   * window ending at `end` of each length in `lengths`, as [[topKPerRow]] gives them.
   */
  def topKMerged(window: Long, eps: Double, k: Int, timestamps: Array[Byte], items: Array[Byte],
      present: Array[Byte], parts: Array[Byte], end: Long, lengths: Array[Byte]): Array[Byte] = {
    val partials = scala.collection.mutable.TreeMap.empty[Int, SlidingTopK]
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(items)
    var i = 0
    while (i < present.length) {
      val s = partials.getOrElseUpdate(parts(i).toInt, new SlidingTopK(window, eps))
      val ts = t.getLong()
      val item = itemBytes(v.getLong())
      if (present(i) != 0) s.add(ts, item) else s.advanceTo(ts)
      i += 1
    }
    val total = new SlidingTopK(window, eps)
    partials.values.foreach(total.merge)
    topKAnswers(total, end, lengths, k)
  }

  /** The top `k` of `s`'s windows ending at `end` of each length in `lengths`. */
  def topKAnswers(s: SlidingTopK, end: Long, lengths: Array[Byte], k: Int): Array[Byte] = {
    val l = ByteBuffer.wrap(lengths)
    val out = ByteBuffer.allocate(lengths.length / 8 * 8 * (3 + 4 * k))
    while (l.hasRemaining) {
      putTop(out, s.topAt(end, l.getLong(), k), k)
      out.putLong(java.lang.Double.doubleToLongBits(s.effectiveEps))
      s.compress()
      out.putLong(if (s.checkInvariant().isEmpty) 1L else 0L)
    }
    out.array()
  }

  /** A top-k sketch of these rows (any order; items as longs), for format tests. */
  def topKSketch(window: Long, eps: Double, microseconds: Boolean, timestamps: Array[Byte],
      items: Array[Byte]): SlidingTopK = {
    val s = new SlidingTopK(window, eps)
    s.microsecondTime = microseconds
    s.itemType = "bigint"
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(items)
    while (t.hasRemaining) s.add(t.getLong(), itemBytes(v.getLong()))
    s
  }

  private def itemBytes(item: Long): Array[Byte] = ByteBuffer.allocate(8).putLong(item).array()

  private def putTop(out: ByteBuffer, top: Array[ItemCount], k: Int): Unit = {
    out.putLong(top.length.toLong)
    top.foreach { c =>
      out.putLong(ByteBuffer.wrap(c.item).getLong())
      out.putLong(c.estimate)
      out.putLong(c.lower)
      out.putLong(c.upper)
    }
    (top.length until k).foreach(_ => (0 until 4).foreach(_ => out.putLong(0L)))
  }

  /** The time-ordered moments of these rows (in time order) as a live window stores them. */
  def orderedMomentsState(window: Long, eps: Double, timestamps: Array[Byte],
      values: Array[Byte]): Array[Byte] = {
    val s = new OrderedMoments(window, eps)
    val t = ByteBuffer.wrap(timestamps)
    val v = ByteBuffer.wrap(values)
    while (t.hasRemaining) s.add(t.getLong(), v.getDouble())
    val out = new ByteWriter(64)
    s.writeTo(out)
    out.result()
  }

  /**
   * A live window's time-ordered moments read back from `state` ([[orderedMomentsState]]),
   * then the window's answers ending at its now, as [[momentsAnswers]] gives them.
   */
  def orderedMomentsAnswers(window: Long, eps: Double, state: Array[Byte]): Array[Byte] = {
    val s = OrderedMoments.readFrom(window, eps, new ByteReader(state, state.length))
    val out = ByteBuffer.allocate(MomentsWidth * 8)
    putMoments(out, s.momentsInOrder)
    out.array()
  }

  private def putMoments(out: ByteBuffer, m: WindowMoments): Unit = {
    out.putDouble(m.countLower.toDouble)
    out.putDouble(m.countUpper.toDouble)
    Seq(m.avg, m.variance(false), m.variance(true), m.stddev(false), m.stddev(true)).foreach { a =>
      if (a == null) (0 until 3).foreach(_ => out.putDouble(Double.NaN)) else a.foreach(x => out.putDouble(x))
    }
  }

  private def doubles(bytes: Array[Byte]): Array[Double] = {
    val out = new Array[Double](bytes.length / 8)
    ByteBuffer.wrap(bytes).asDoubleBuffer().get(out)
    out
  }
}
