package windowsketch.core

import java.util.SplittableRandom

import windowsketch.core.count.{DyadicWindowSketch, ExponentialHistogram, OrderedSumHistogram}
import windowsketch.core.frequencies.{LeveledTopK, SlidingTopK}
import windowsketch.core.hll.SlidingHyperLogLog
import windowsketch.core.moments.{OrderedMoments, SlidingMoments}
import windowsketch.core.quantiles.{CompactQuantiles, SlidingQuantiles}
import windowsketch.core.sampling.SlidingSample

/**
 * Timing loops for the benchmark harness (benchmarks/run.py): streams are generated in the
 * JVM from a seed, outside the timed region, and each figure is the best of `rounds` runs
 * after one warm-up run.
 */
object Throughput {
  private def events(n: Int, p: Double, seed: Long): Array[Boolean] = {
    val rng = new SplittableRandom(seed)
    Array.fill(n)(rng.nextDouble() < p)
  }

  /** The same density as a fixed pattern (every round(1/p)-th row): a predictable branch. */
  private def periodic(n: Int, p: Double): Array[Boolean] = {
    val period = math.max(1, math.round(1 / p).toInt)
    Array.tabulate(n)(_ % period == 0)
  }

  private def shuffled(n: Int, seed: Long): Array[Long] = {
    val rng = new SplittableRandom(seed)
    val ts = Array.tabulate(n)(_.toLong)
    var i = n - 1
    while (i > 0) {
      val j = rng.nextInt(i + 1)
      val t = ts(i); ts(i) = ts(j); ts(j) = t
      i -= 1
    }
    ts
  }

  /**
   * Row i's time: i in time order, else a shuffle of 0 until rows. Only a shuffle takes an
   * array, so a window of 10^9 rows in time order costs no 8 GB of times.
   */
  private final class RowTimes(val length: Int, ordered: Boolean) {
    private val shuffledTimes = if (ordered) null else shuffled(length, 10)
    def apply(i: Int): Long = if (shuffledTimes == null) i.toLong else shuffledTimes(i)
  }

  private def best(rounds: Int)(run: => Long): Double = {
    run // warm-up
    var fastest = Long.MaxValue
    var r = 0
    while (r < rounds) { fastest = math.min(fastest, run); r += 1 }
    fastest / 1e9
  }

  private def timed(body: => Unit): Long = {
    val start = System.nanoTime()
    body
    System.nanoTime() - start
  }

  /**
   * Rows per second of the time-ordered histogram: update then estimate, as a frame does.
   * Events are random with density `p`, or with `periodic` the same density as a pattern.
   */
  def histogramRowsPerSecond(window: Long, eps: Double, p: Double, n: Int, rounds: Int,
      periodicEvents: Boolean): Double = {
    val e = if (periodicEvents) periodic(n, p) else events(n, p, 1)
    var sink = 0L
    val seconds = best(rounds) {
      timed {
        val h = new ExponentialHistogram(window, eps)
        var i = 0
        while (i < n) { h.update(i.toLong, e(i)); sink += h.estimate; i += 1 }
      }
    }
    if (sink == Long.MinValue) throw new IllegalStateException() // keeps the loop alive
    n / seconds
  }

  /** Inserts per second of the mergeable sketch, timestamps in random order. */
  def dyadicInsertsPerSecond(window: Long, eps: Double, p: Double, n: Int, rounds: Int): Double = {
    val e = events(n, p, 2)
    val ts = shuffled(n, 3)
    val seconds = best(rounds) {
      timed {
        val d = new DyadicWindowSketch(window, eps)
        var i = 0
        while (i < n) { d.update(ts(i), e(i)); i += 1 }
        d.compress()
      }
    }
    n / seconds
  }

  /** Merges per second: `parts` partial sketches of a shuffled stream folded into one. */
  def dyadicMergesPerSecond(window: Long, eps: Double, n: Int, parts: Int, rounds: Int): Double = {
    val e = events(n, 0.5, 4)
    val ts = shuffled(n, 5)
    val partials = Array.tabulate(parts) { p =>
      val d = new DyadicWindowSketch(window, eps)
      var i = p
      while (i < n) { d.update(ts(i), e(i)); i += parts }
      d.compress()
      d
    }
    val seconds = best(rounds) {
      timed {
        val acc = new DyadicWindowSketch(window, eps)
        partials.foreach(acc.merge)
        acc.compress()
      }
    }
    parts / seconds
  }

  /**
   * Serialized bytes with `n` events spread evenly over a window of `window` positions:
   * (in-order histogram, mergeable sketch in order, in shuffled order, 200-way fold of
   * serialized partials of the shuffled stream).
   */
  def stateBytes(window: Long, eps: Double, n: Int): Array[Long] = {
    val step = math.max(1L, window / n)
    val ts = shuffled(n, 6).map(_ * step)
    val inOrder = ts.sorted
    val h = new ExponentialHistogram(window, eps)
    inOrder.foreach(t => h.update(t, isEvent = true))
    val fresh = new DyadicWindowSketch(window, eps)
    inOrder.foreach(t => fresh.update(t, isEvent = true))
    val anyOrder = new DyadicWindowSketch(window, eps)
    ts.foreach(t => anyOrder.update(t, isEvent = true))
    val folded = new DyadicWindowSketch(window, eps)
    (0 until 200).foreach { p =>
      val d = new DyadicWindowSketch(window, eps)
      var i = p
      while (i < n) { d.update(ts(i), isEvent = true); i += 200 }
      folded.merge(SketchFormat.deserialize(SketchFormat.serialize(d)))
    }
    Array(h, fresh, anyOrder, folded).map(s => SketchFormat.serialize(s).length.toLong)
  }

  /**
   * Rows per second of the percentiles' window in time order, as a running frame reads it:
   * add a uniform value at the next position, then the answer at p50 and p99. The window
   * holds `window` positions, so past the exact limit the compact mode answers.
   */
  def orderedPercentileRowsPerSecond(window: Long, eps: Double, n: Int, rounds: Int): Double = {
    val rng = new SplittableRandom(8)
    val values = Array.fill(n)(rng.nextDouble())
    val ps = Array(0.5, 0.99)
    var sink = 0.0
    val seconds = best(rounds) {
      timed {
        val s = new SlidingQuantiles(window, eps)
        var i = 0
        while (i < n) { s.add(i.toLong, values(i)); sink += s.estimates(ps)(1); i += 1 }
      }
    }
    if (sink == Double.MinValue) throw new IllegalStateException()
    n / seconds
  }

  /** Items of a skewed stream over `distinct` values, 8 bytes each (distinct · u^3, u uniform). */
  private def skewedItems(count: Int, distinct: Int, rng: SplittableRandom): Array[Array[Byte]] =
    Array.fill(count) {
      val u = rng.nextDouble()
      java.nio.ByteBuffer.allocate(8).putLong((distinct * u * u * u).toLong).array()
    }

  /** The heap in use after two collections: what held structures keep alive. */
  private def usedAfterCollection(): Long = {
    val runtime = Runtime.getRuntime
    System.gc()
    System.gc()
    runtime.totalMemory() - runtime.freeMemory()
  }

  /**
   * Heap bytes one group's structure of `family` keeps alive after `rows` values at
   * positions 0, 1, 2, ... in one window of `window` positions: in time order the running
   * frames' structure (for top values [[LeveledTopK]]; live keys slice their windows), else
   * the mergeable sketch fed the same rows shuffled (GROUP BY, sketch columns). The
   * collector's used heap with `copies` held, less without, per copy. Values: uniform
   * doubles, random hashes, counts and sums of 1 to 100, items of a skewed stream over 10^4
   * values.
   *
   * Measured in a JVM of its own (the serial collector, nothing else running): in a Spark
   * driver, other threads free memory between the two readings (the context cleaner's
   * work), which took up to 0.8 MB off a figure.
   */
  def heldHeapBytes(family: String, rows: Int, window: Long, eps: Double, ordered: Boolean,
      copies: Int): Long = {
    def jarOf(c: Class[_]) = new java.io.File(c.getProtectionDomain.getCodeSource.getLocation.toURI).getPath
    val classPath = Seq(jarOf(getClass), jarOf(classOf[scala.Product])).mkString(java.io.File.pathSeparator)
    val launcher = new java.io.File(new java.io.File(System.getProperty("java.home"), "bin"), "java").getPath
    val process = new ProcessBuilder(launcher, "-XX:+UseSerialGC", "-Xmx2g", "-cp", classPath,
      "windowsketch.core.Throughput", family, rows.toString, window.toString, eps.toString,
      ordered.toString, copies.toString).redirectErrorStream(true).start()
    process.getOutputStream.close()
    // The last line: the JVM may first say it picked up JAVA_TOOL_OPTIONS.
    val output = scala.io.Source.fromInputStream(process.getInputStream, "UTF-8").getLines().toList
    val figure = output.lastOption.getOrElse("").trim
    require(process.waitFor() == 0 && figure.nonEmpty && figure.forall(_.isDigit),
      s"heap measurement failed: ${output.mkString("\n")}")
    figure.toLong
  }

  /** Prints [[heldHeapBytes]] measured in this JVM: family, rows, window, eps, ordered, copies. */
  def main(args: Array[String]): Unit = {
    val Array(family, rows, window, eps, ordered, copies) = args
    println(heldHeapBytesHere(family, rows.toInt, window.toLong, eps.toDouble, ordered.toBoolean, copies.toInt))
  }

  private def heldHeapBytesHere(family: String, rows: Int, window: Long, eps: Double,
      ordered: Boolean, copies: Int): Long = {
    val ts = new RowTimes(rows, ordered)
    val rng = new SplittableRandom(11)
    val items = skewedItems(math.min(rows, 10000), 10000, rng)
    def build(): AnyRef = {
      var i = 0
      family match {
        case "count" =>
          if (ordered) { val h = new ExponentialHistogram(window, eps); while (i < rows) { h.update(ts(i), isEvent = true); i += 1 }; h }
          else { val d = new DyadicWindowSketch(window, eps); while (i < rows) { d.update(ts(i), isEvent = true); i += 1 }; d.compress(); d }
        case "sum" =>
          val s = if (ordered) new OrderedSumHistogram(window, eps) else new DyadicWindowSketch(window, eps)
          while (i < rows) { s.add(ts(i), 1L + rng.nextInt(100)); i += 1 }
          s
        case "distinct" =>
          val s = new SlidingHyperLogLog(window, eps)
          while (i < rows) { s.add(ts(i), rng.nextLong()); i += 1 }
          s.registerSums
          s
        case "percentile" =>
          // In time order, a running frame's: its own exact limit and its answering view.
          val s = if (ordered) SlidingQuantiles.inMemoryOnly(window, eps) else new SlidingQuantiles(window, eps)
          while (i < rows) { s.add(ts(i), rng.nextDouble()); i += 1 }
          s.estimates(Array(0.5))
          s
        case "moments" =>
          val s = if (ordered) new OrderedMoments(window, eps) else new SlidingMoments(window, eps)
          while (i < rows) { s.add(ts(i), rng.nextDouble()); i += 1 }
          s
        case "top_k" =>
          val s = if (ordered) new LeveledTopK(window, eps) else new SlidingTopK(window, eps)
          while (i < rows) { s.add(ts(i), items(i % items.length)); i += 1 }
          s.top(5)
          s
        case "sample" => sampleOf(ts, items, window)
      }
    }
    val before = usedAfterCollection()
    val held = Array.fill(copies)(build())
    val after = usedAfterCollection()
    // Read after the measurement, so the structures are alive through it (Java 8 has no fence).
    val built = held.count(_ != null)
    math.max(0L, after - before) / math.max(1, built)
  }

  /** Rows a sample of k = 5 holds after a prune, one window holding `rows` rows. */
  def sampleHeldRows(rows: Int, window: Long, ordered: Boolean): Int = {
    val items = skewedItems(math.min(rows, 10000), 10000, new SplittableRandom(11))
    val s = sampleOf(new RowTimes(rows, ordered), items, window)
    s.prune()
    s.heldCount
  }

  /** A sample of k = 5 of rows at `ts`, values cycling through `items`, answered once. */
  private def sampleOf(ts: RowTimes, items: Array[Array[Byte]], window: Long): SlidingSample = {
    val s = new SlidingSample(window, 5, 0L)
    var i = 0
    while (i < ts.length) { s.add(ts(i), items(i % items.length)); i += 1 }
    s.sample
    s
  }

  /**
   * The bytes of one live key's state, as `sliding_window` stores it, with `rows` rows in
   * its window: one row a position, window `rows`, a tick every rows/10, micro-batches of
   * rows/100 with the watermark 100 rows behind the newest (those wait in the state); the
   * largest state after any batch once the window is full (it slides on for rows/5 more).
   * Values as [[heldHeapBytes]]'s; percentiles ask for p50 and p99, top values the top 5,
   * samples 5 rows. `top_k unsliced` ticks every rows/200 + 1 instead, past 128 tick slices,
   * and `moments unsliced` and `percentile unsliced` every rows/2,000 + 1, past 1,024 (from
   * 10^4 rows): they keep the in-order structures of running frames; `percentile 1000
   * slices` ticks every rows/1,000.
   */
  def liveStateBytes(family: String, rows: Int, eps: Double): Long = {
    val every = family match {
      case "top_k unsliced" => rows / 200 + 1
      case "moments unsliced" | "percentile unsliced" => rows / 2000 + 1
      case "percentile 1000 slices" => math.max(1, rows / 1000)
      case _ => math.max(1, rows / 10)
    }
    val aggregate = family match {
      case "top_k unsliced" => LiveTopKAggregate(5, eps)
      case "moments unsliced" => LiveMomentsAggregate(eps)
      case "count" => LiveCountAggregate(eps)
      case "sum" => LiveSumAggregate(eps)
      case "distinct" => LiveDistinctAggregate(eps)
      case "percentile" | "percentile unsliced" | "percentile 1000 slices" =>
        LivePercentileAggregate(eps, Seq(0.5, 0.99))
      case "moments" => LiveMomentsAggregate(eps)
      case "top_k" => LiveTopKAggregate(5, eps)
      case "sample" => LiveSampleAggregate(5, 0L)
    }
    val live = new LiveWindow(rows, every, IndexedSeq(aggregate))
    val rng = new SplittableRandom(11)
    val items = skewedItems(math.min(rows, 10000), 10000, rng)
    val (batch, lag, total) = (math.max(1, rows / 100), 100, rows + rows / 5)
    var largest = 0L
    var t = 0
    while (t < total) {
      val end = math.min(total, t + batch)
      while (t < end) {
        family match {
          case "count" => live.add(t, 0, 1L)
          case "sum" => live.add(t, 0, 1L + rng.nextInt(100))
          case "distinct" => live.add(t, 0, rng.nextLong())
          case "top_k" | "top_k unsliced" | "sample" => live.addBytes(t, 0, items(t % items.length))
          case _ => live.add(t, 0, java.lang.Double.doubleToLongBits(rng.nextDouble()))
        }
        t += 1
      }
      live.advance(t - 1 - lag, _ => ())
      if (t > rows) largest = math.max(largest, live.toBytes.length.toLong)
    }
    largest
  }

  /**
   * Heap bytes one distinct-count sketch keeps alive after `rows` random values at
   * positions 0, spacing, 2·spacing, … in time order (a GROUP BY key's rows in one task):
   * the collector's used heap with `copies` such sketches held, less without, per sketch.
   * Spark's task metrics do not see an object aggregate's buffers; this is their share.
   */
  def distinctSketchHeapBytes(rows: Int, spacing: Long, window: Long, rsd: Double,
      copies: Int): Long = {
    val rng = new SplittableRandom(7)
    val before = usedAfterCollection()
    val held = Array.fill(copies) {
      val sketch = new SlidingHyperLogLog(window, rsd)
      var i = 0
      while (i < rows) { sketch.add(i * spacing, rng.nextLong()); i += 1 }
      sketch
    }
    val after = usedAfterCollection()
    // Read after the measurement, so the sketches are alive through it (Java 8 has no fence).
    val built = held.count(_.hasTime)
    math.max(0L, after - before) / math.max(1, built)
  }
}
