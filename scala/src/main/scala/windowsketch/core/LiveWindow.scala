package windowsketch.core

import windowsketch.core.count.{ExponentialHistogram, OrderedSumHistogram}
import windowsketch.core.frequencies.{ItemCount, LeveledTopK, LiveTopKWindow, OrderedTopK, SlicedTopK, SlidingTopK}
import windowsketch.core.hll.SlidingHyperLogLog
import windowsketch.core.moments.{LiveMomentsWindow, OrderedMoments, SlicedMoments, WindowMoments}
import windowsketch.core.quantiles.{LivePercentilesWindow, SlicedQuantiles, SlidingQuantiles}
import windowsketch.core.sampling.{SampledRow, SlidingSample}

/**
 * One family's window inside a live window: fed in time order, read at each tick.
 * Inputs are longs in the family's encoding (see [[LiveAggregate]]).
 */
trait LiveSlide {
  /** Adds one input at `ts`; `ts` never precedes an earlier add's. */
  def add(ts: Long, input: Long): Unit

  /** Adds one input given as bytes (the families whose inputs are items, not numbers). */
  def addBytes(ts: Long, input: Array[Byte]): Unit =
    throw new UnsupportedOperationException("this family takes numbers, not items")

  /** Moves the window's end to `tick` and drops what left it. */
  def advanceTo(tick: Long): Unit

  /** True when nothing of the family's inputs lies in the window ending at the last tick. */
  def isEmpty: Boolean

  /** The window's end, if it has one: the last tick. */
  def end: Option[Long]

  /**
   * The object the slide's last answer was read from, the same object for as long as the
   * answer cannot have changed (no input came, nothing left the window, or the values it is
   * read from are the same), or null where the slide keeps none: a caller that kept the
   * answer it read for this object can emit it again without reading.
   */
  def answerStamp: AnyRef = null

  private[core] def writeTo(out: ByteWriter): Unit
}

/** A slide with certified bounds on its answer (counts, sums): it can carry alerts. */
trait BoundedSlide extends LiveSlide {
  def estimate: Long
  def lower: Long
  def upper: Long

  // The bounds read last, kept as one object while they stay the same (the answer's stamp).
  private var bounds: Array[Long] = null

  override def answerStamp: AnyRef = {
    val e = estimate
    val l = lower
    val u = upper
    if (bounds == null || bounds(0) != e || bounds(1) != l || bounds(2) != u) bounds = Array(e, l, u)
    bounds
  }
}

/**
 * What one aggregate of a live window is: its family (a tag byte in the state), its
 * parameters and how to make, read and store its [[LiveSlide]]. Each family's live form
 * sits beside its structure ([[LiveCountAggregate]] etc.).
 */
abstract class LiveAggregate {
  /** The family, as users name it ("count", "sum", ...). */
  def family: String

  /** The tag that marks this family's slide in the state bytes. */
  def tag: Byte

  /** The parameters that shape the slide, written in the state so a restart keeps them. */
  def parameters: Seq[Double]

  /** A slide for windows of `window` read at multiples of `every`. */
  def newSlide(window: Long, every: Long): LiveSlide

  private[core] def readSlide(window: Long, every: Long, in: ByteReader): LiveSlide

  /** The slide as a state of version `version` wrote it (the families whose form changed). */
  private[core] def readSlide(window: Long, every: Long, in: ByteReader, version: Int): LiveSlide =
    readSlide(window, every, in)

  /** Checks one input read back from state bytes: what `add` takes from this family. */
  private[core] def validInput(input: Long): Boolean = true

  /** A pending input in the state (version 3): 8 bytes, unless the family's are smaller. */
  private[core] def writeInput(out: ByteWriter, input: Long): Unit = out.long(input)
  private[core] def readInput(in: ByteReader): Long = in.long()

  /** Its inputs are items as bytes ([[LiveSlide.addBytes]]), not numbers. */
  def takesBytes: Boolean = false

  /** Alert thresholds on the slide's certified bounds: only a [[BoundedSlide]]'s family has them. */
  def above: Option[Long] = None
  def below: Option[Long] = None

  /** How the aggregate is shown in a refusal: "count(0.01, above 30)". */
  final def describe: String = LiveAggregate.describe(family, parameters, above, below)
}

object LiveAggregate {
  private[core] def describe(family: String, parameters: Seq[Double], above: Option[Long],
      below: Option[Long]): String =
    s"$family(${(parameters.map(_.toString) ++ above.map(x => s"above $x") ++
      below.map(y => s"below $y")).mkString(", ")})"
}

/** Counts: the input is 1 per event; answers are the histogram's estimate and bounds. */
final case class LiveCountAggregate(eps: Double, override val above: Option[Long] = None,
    override val below: Option[Long] = None) extends LiveAggregate {
  CertifiedAlert.checkThresholds(above, below)
  def family: String = "count"
  def tag: Byte = LiveWindow.CountTag
  val parameters: Seq[Double] = Seq(eps)
  override private[core] def validInput(input: Long): Boolean = input == 1L
  // Every input is 1: nothing to store.
  override private[core] def writeInput(out: ByteWriter, input: Long): Unit = ()
  override private[core] def readInput(in: ByteReader): Long = 1L
  def newSlide(window: Long, every: Long): LiveCountSlide = new LiveCountSlide(new ExponentialHistogram(window, eps))
  private[core] def readSlide(window: Long, every: Long, in: ByteReader): LiveSlide = {
    val bytes = in.take(LiveWindow.length(in))
    SketchFormat.deserialize(bytes) match {
      case h: ExponentialHistogram if h.window == window && h.eps == eps => new LiveCountSlide(h)
      case _ => throw new CorruptSketchException("a live count's histogram has other parameters")
    }
  }
}

final class LiveCountSlide(val histogram: ExponentialHistogram) extends BoundedSlide {
  def estimate: Long = histogram.estimate
  def lower: Long = histogram.lowerBound
  def upper: Long = histogram.upperBound
  def add(ts: Long, input: Long): Unit = histogram.add(ts, 1L)
  def advanceTo(tick: Long): Unit = histogram.advanceTo(tick)
  def isEmpty: Boolean = histogram.upperBound == 0L
  def end: Option[Long] = if (histogram.hasTime) Some(histogram.now) else None
  private[core] def writeTo(out: ByteWriter): Unit = LiveWindow.writeBytes(out, SketchFormat.serialize(histogram))
}

/** Sums of non-negative integers: the input is the value; answers as for counts. */
final case class LiveSumAggregate(eps: Double, override val above: Option[Long] = None,
    override val below: Option[Long] = None) extends LiveAggregate {
  CertifiedAlert.checkThresholds(above, below)
  def family: String = "sum"
  def tag: Byte = LiveWindow.SumTag
  val parameters: Seq[Double] = Seq(eps)
  override private[core] def validInput(input: Long): Boolean = input > 0L
  override private[core] def writeInput(out: ByteWriter, input: Long): Unit = out.varint(input)
  override private[core] def readInput(in: ByteReader): Long = in.varint()
  def newSlide(window: Long, every: Long): LiveSumSlide = new LiveSumSlide(new OrderedSumHistogram(window, eps))
  private[core] def readSlide(window: Long, every: Long, in: ByteReader): LiveSlide =
    new LiveSumSlide(OrderedSumHistogram.readFrom(window, eps, in))
}

final class LiveSumSlide(val histogram: OrderedSumHistogram) extends BoundedSlide {
  def estimate: Long = histogram.estimate
  def lower: Long = histogram.lowerBound
  def upper: Long = histogram.upperBound
  def add(ts: Long, input: Long): Unit = histogram.add(ts, input)
  def advanceTo(tick: Long): Unit = histogram.advanceTo(tick)
  def isEmpty: Boolean = histogram.upperBound == 0L
  def end: Option[Long] = if (histogram.hasTime) Some(histogram.now) else None
  private[core] def writeTo(out: ByteWriter): Unit = histogram.writeTo(out)
}

/** Distinct values: the input is the value's 64-bit hash (Spark's, as approx_count_distinct). */
final case class LiveDistinctAggregate(rsd: Double) extends LiveAggregate {
  def family: String = "distinct"
  def tag: Byte = LiveWindow.DistinctTag
  val parameters: Seq[Double] = Seq(rsd)
  def newSlide(window: Long, every: Long): LiveDistinctSlide = new LiveDistinctSlide(new SlidingHyperLogLog(window, rsd))
  private[core] def readSlide(window: Long, every: Long, in: ByteReader): LiveSlide = {
    val s = SketchFormat.deserializeDistinct(in.take(LiveWindow.length(in)))
    if (s.window != window || s.rsd != rsd) {
      throw new CorruptSketchException("a live distinct count's sketch has other parameters")
    }
    s.resumeInOrder() // a live slide only ever sees inputs in time order
    new LiveDistinctSlide(s)
  }
}

final class LiveDistinctSlide(val sketch: SlidingHyperLogLog) extends LiveSlide {
  def add(ts: Long, input: Long): Unit = sketch.add(ts, input)
  def advanceTo(tick: Long): Unit = sketch.advanceTo(tick)
  def isEmpty: Boolean = sketch.windowIsEmpty
  def end: Option[Long] = if (sketch.hasTime) Some(sketch.now) else None

  // The register sums the estimate is read from, kept as one object while they stay the same.
  private var sums: (Double, Int) = null

  override def answerStamp: AnyRef = {
    val z = sketch.inverseSum
    val zeros = sketch.zeroRegisters
    if (sums == null || sums._1 != z || sums._2 != zeros) sums = (z, zeros)
    sums
  }

  private[core] def writeTo(out: ByteWriter): Unit =
    LiveWindow.writeBytes(out, SketchFormat.serializeDistinct(sketch))
}

/**
 * Percentiles: the input is the value's double bits; answers are the window's values at
 * `percentages`, exact while the window holds at most the exact limit values, then within
 * eps n in rank (docs/percentiles.md): where the ticks cut time into at most
 * [[SlicedQuantiles.mostSlices]] slices (1,024 at eps 0.01), a compacted summary a slice ([[SlicedQuantiles]]),
 * else the running frames' [[SlidingQuantiles]] and its compact mode. The state holds the
 * window exactly as memory does, so a key resumed from it answers as one that never stopped.
 */
final case class LivePercentileAggregate(eps: Double, percentages: Seq[Double]) extends LiveAggregate {
  require(percentages.nonEmpty && percentages.forall(p => p >= 0.0 && p <= 1.0),
    s"percentages must lie in [0, 1], got ${percentages.mkString(", ")}")
  def family: String = "percentile"
  def tag: Byte = LiveWindow.PercentileTag
  val parameters: Seq[Double] = eps +: percentages
  def newSlide(window: Long, every: Long): LivePercentileSlide =
    new LivePercentileSlide(SlicedQuantiles.slicing(window, every, eps)
      .fold[LivePercentilesWindow](new SlidingQuantiles(window, eps))(new SlicedQuantiles(_, eps)),
      percentages.toArray)
  private[core] def readSlide(window: Long, every: Long, in: ByteReader): LiveSlide =
    readSlide(window, every, in, LiveWindow.Version)
  private[core] override def readSlide(window: Long, every: Long, in: ByteReader, version: Int): LiveSlide =
    new LivePercentileSlide(LiveWindow.readForm(in, version) match {
      case LiveWindow.OrderedForm =>
        // Versions 1 and 2 wrote the sketch's bytes (kind 4, or kind 8 past the exact limit).
        val s = if (version < 3) SketchFormat.deserializeQuantiles(in.take(LiveWindow.length(in)))
          else SketchFormat.readLiveQuantiles(in, window, eps, microseconds = false)
        if (s.window != window || s.eps != eps) {
          throw new CorruptSketchException("a live percentile's window has other parameters")
        }
        if (!s.isCompact && s.heldCount > s.exactLimit) s.toCompact() // as an add past the limit would
        s
      case _ =>
        val slices = SlicedQuantiles.slicing(window, every, eps).getOrElse(LiveWindow.notSliced)
        SlicedQuantiles.readFrom(slices, eps, in, in.remaining)
    }, percentages.toArray)
}

final class LivePercentileSlide(val quantiles: LivePercentilesWindow, percentages: Array[Double])
    extends LiveSlide {
  def add(ts: Long, input: Long): Unit = quantiles.add(ts, java.lang.Double.longBitsToDouble(input))
  def advanceTo(tick: Long): Unit = quantiles.advanceTo(tick)
  def isEmpty: Boolean = quantiles.isEmpty
  def end: Option[Long] = if (quantiles.hasTime) Some(quantiles.now) else None
  /** True once the window is held in the compact mode. */
  def isCompact: Boolean = quantiles.isCompact
  /** The values at the percentages, or null for an empty window. */
  def answer: Array[Double] = quantiles.estimates(percentages)
  override def answerStamp: AnyRef = quantiles.answerStamp
  private[core] def writeTo(out: ByteWriter): Unit = {
    out.byte(if (quantiles.isInstanceOf[SlicedQuantiles]) LiveWindow.SlicedForm else LiveWindow.OrderedForm)
    quantiles.writeTo(out)
  }
}

/**
 * Averages, variances and standard deviations: the input is the value's double bits. Where
 * the ticks cut time into at most [[SlicedMoments.MostSlices]] slices the window is each
 * slice's exact moments ([[SlicedMoments]]: exact answers), else the time-ordered moments'
 * buckets ([[OrderedMoments]]), read in order at each tick.
 */
final case class LiveMomentsAggregate(eps: Double) extends LiveAggregate {
  def family: String = "moments"
  def tag: Byte = LiveWindow.MomentsTag
  val parameters: Seq[Double] = Seq(eps)
  override private[core] def validInput(input: Long): Boolean =
    java.lang.Double.isFinite(java.lang.Double.longBitsToDouble(input))
  def newSlide(window: Long, every: Long): LiveMomentsSlide = {
    ExponentialHistogram.checkParameters(window, eps) // eps is refused in either form
    new LiveMomentsSlide(TickSlices(window, every, SlicedMoments.MostSlices)
      .fold[LiveMomentsWindow](new OrderedMoments(window, eps))(new SlicedMoments(_)))
  }
  private[core] def readSlide(window: Long, every: Long, in: ByteReader): LiveSlide =
    readSlide(window, every, in, LiveWindow.Version)
  // Version 4 marks the form (0 buckets, 1 slices); earlier states hold buckets.
  private[core] override def readSlide(window: Long, every: Long, in: ByteReader, version: Int): LiveSlide =
    new LiveMomentsSlide(LiveWindow.readForm(in, version) match {
      case LiveWindow.OrderedForm => OrderedMoments.readFrom(window, eps, in)
      case _ => SlicedMoments.readFrom(LiveWindow.slicesOf(window, every, SlicedMoments.MostSlices), in)
    })
}

final class LiveMomentsSlide(val moments: LiveMomentsWindow) extends LiveSlide {
  def add(ts: Long, input: Long): Unit = moments.add(ts, java.lang.Double.longBitsToDouble(input))
  def advanceTo(tick: Long): Unit = moments.advanceTo(tick)
  def isEmpty: Boolean = moments.isEmpty
  def end: Option[Long] = if (moments.hasTime) Some(moments.now) else None
  /** The window's moments at the last tick. */
  def answer: WindowMoments = moments.momentsInOrder
  override def answerStamp: AnyRef = moments.answerStamp
  private[core] def writeTo(out: ByteWriter): Unit = {
    out.byte(if (moments.isInstanceOf[SlicedMoments]) LiveWindow.SlicedForm else LiveWindow.OrderedForm)
    moments.writeTo(out)
  }
}

/**
 * The most frequent items: the input is the item's bytes. Where the ticks cut time into at
 * most [[SlicedTopK.MostSlices]] slices the window's counts are a Misra–Gries summary a
 * slice ([[SlicedTopK]]), else the running frames' [[LeveledTopK]] (exact while the window
 * holds fewer than its `coverRecords` rows, bounded by eps otherwise; a key resumed from a
 * state before version 5 keeps [[OrderedTopK]]); the `k` most frequent are listed at each tick.
 */
final case class LiveTopKAggregate(k: Int, eps: Double = LiveTopKAggregate.DefaultEps)
    extends LiveAggregate {
  require(k >= 1 && k <= SlidingTopK.MaxK, s"k must be in [1, ${SlidingTopK.MaxK}], got $k")
  def family: String = "top_k"
  def tag: Byte = LiveWindow.TopKTag
  val parameters: Seq[Double] = Seq(k.toDouble, eps)
  override def takesBytes: Boolean = true
  def newSlide(window: Long, every: Long): LiveTopKSlide =
    new LiveTopKSlide(TickSlices(window, every, SlicedTopK.MostSlices)
      .fold[LiveTopKWindow](new LeveledTopK(window, eps))(new SlicedTopK(_, eps)), k)
  private[core] def readSlide(window: Long, every: Long, in: ByteReader): LiveSlide =
    readSlide(window, every, in, LiveWindow.Version)
  private[core] override def readSlide(window: Long, every: Long, in: ByteReader, version: Int): LiveSlide =
    new LiveTopKSlide(LiveWindow.readForm(in, version, leveled = true) match {
      case LiveWindow.LeveledForm => LeveledTopK.readFrom(window, eps, in)
      // A key resumed from a state before version 5 keeps its summaries per node to the end.
      case LiveWindow.OrderedForm => OrderedTopK.readFrom(window, eps, in)
      case _ => SlicedTopK.readFrom(LiveWindow.slicesOf(window, every, SlicedTopK.MostSlices), eps, in,
        in.remaining)
    }, k)
}

object LiveTopKAggregate {
  /** The eps of a top-k aggregate that names none, as states written before eps existed did. */
  val DefaultEps = 0.01
}

final class LiveTopKSlide(val counts: LiveTopKWindow, k: Int) extends LiveSlide {
  def add(ts: Long, input: Long): Unit =
    throw new UnsupportedOperationException("top_k takes items as bytes")
  override def addBytes(ts: Long, input: Array[Byte]): Unit = counts.add(ts, input)
  def advanceTo(tick: Long): Unit = counts.advanceTo(tick)
  def isEmpty: Boolean = counts.isEmpty
  def end: Option[Long] = if (counts.hasTime) Some(counts.now) else None
  /** The window's `k` most frequent items at the last tick, with certified bounds. */
  def answer: Array[ItemCount] = counts.top(k)
  override def answerStamp: AnyRef = counts.answerStamp
  private[core] def writeTo(out: ByteWriter): Unit = {
    out.byte(counts match {
      case _: SlicedTopK => LiveWindow.SlicedForm
      case _: LeveledTopK => LiveWindow.LeveledForm
      case _ => LiveWindow.OrderedForm
    })
    counts.writeTo(out)
  }
}

/**
 * Samples: the input is the value's bytes (Spark's binary row of it); the window's sample
 * is [[SlidingSample]]'s, drawn at each tick, so a key's samples are the ones
 * approx_window_sample draws over the same rows.
 */
final case class LiveSampleAggregate(k: Int, seed: Long) extends LiveAggregate {
  require(k >= 1 && k <= SlidingSample.MaxK, s"k must be in [1, ${SlidingSample.MaxK}], got $k")
  // The state keeps parameters as doubles: a seed must survive the trip exactly.
  require(seed.toDouble.toLong == seed && math.abs(seed) <= (1L << 53),
    s"a live sample's seed must lie in [-2^53, 2^53], got $seed")
  def family: String = "sample"
  def tag: Byte = LiveWindow.SampleTag
  val parameters: Seq[Double] = Seq(k.toDouble, seed.toDouble)
  override def takesBytes: Boolean = true
  def newSlide(window: Long, every: Long): LiveSampleSlide = new LiveSampleSlide(new SlidingSample(window, k, seed))
  private[core] def readSlide(window: Long, every: Long, in: ByteReader): LiveSlide = {
    val s = SketchFormat.deserializeSample(in.take(LiveWindow.length(in)))
    if (s.window != window || s.k != k || s.seed != seed || s.microsecondTime) {
      throw new CorruptSketchException("a live sample has other parameters")
    }
    new LiveSampleSlide(s)
  }
}

final class LiveSampleSlide(val sample: SlidingSample) extends LiveSlide {
  def add(ts: Long, input: Long): Unit =
    throw new UnsupportedOperationException("sample takes values as bytes")
  override def addBytes(ts: Long, input: Array[Byte]): Unit = sample.add(ts, input)
  def advanceTo(tick: Long): Unit = sample.advanceTo(tick)
  def isEmpty: Boolean = answer.isEmpty
  def end: Option[Long] = if (sample.hasTime) Some(sample.now) else None
  /** The window's sample at the last tick: rows with their copies, oldest first. */
  def answer: Array[SampledRow] = sample.sample
  private[core] def writeTo(out: ByteWriter): Unit =
    LiveWindow.writeBytes(out, SketchFormat.serializeSample(sample))
}

/**
 * One key's live window: several aggregates over the window ending at each tick T (a
 * multiple of `every`) that the caller declares final (`advance(T)`: every input at or
 * before T has arrived), for all aggregates at once:
 * inputs after the last tick wait in `pending`, sorted by time, and enter each slide in
 * time order; those the caller has declared final enter at once ("folded": no earlier
 * input can come, and the next tick is after them), the rest as ticks pass, so what waits
 * is the inputs after the caller's last `advance`. A tick where every slide is empty is
 * skipped, except the first after a non-empty one (the row that tells a sink the window
 * emptied); then, with nothing pending or folded, the key is finished and its state can be
 * dropped. An aggregate with thresholds has a
 * [[CertifiedAlert]], moved at every tick: `alerts(i)` (null without thresholds) tells how
 * it crossed there.
 */
final class LiveWindow private (
    val window: Long,
    val every: Long,
    val aggregates: IndexedSeq[LiveAggregate],
    val slides: Array[LiveSlide],
    val alerts: Array[CertifiedAlert],
    private var lastTick: Long,
    private var hasTick: Boolean,
    private var lastWasEmpty: Boolean,
    private var pendingTs: Array[Long],
    private var pendingAggregate: Array[Int],
    private var pendingInput: Array[Long],
    // The inputs of families that take bytes (null for the others'), beside pendingInput.
    private var pendingBytes: Array[Array[Byte]],
    private var pendingSize: Int,
    // Inputs after the last tick that are already in the slides: the first's and last's times.
    private var hasFolded: Boolean,
    private var foldedFirst: Long,
    private var foldedLast: Long) {

  def this(window: Long, every: Long, aggregates: IndexedSeq[LiveAggregate]) =
    this(window, every, aggregates, aggregates.map(_.newSlide(window, every)).toArray,
      aggregates.map(LiveWindow.newAlert(_)).toArray, 0L, false, true,
      new Array[Long](8), new Array[Int](8), new Array[Long](8), new Array[Array[Byte]](8), 0,
      false, 0L, 0L)

  /** [[add]] for a family whose inputs are bytes. */
  def addBytes(ts: Long, aggregate: Int, input: Array[Byte]): Boolean = {
    val added = add(ts, aggregate, 0L)
    if (added) pendingBytes(pendingSize - 1) = input
    added
  }

  /**
   * Adds one input of aggregate `aggregate` at `ts`. Returns false, adding nothing, if
   * `ts` is at or before a tick already emitted, or before an input already folded: the
   * caller had declared that time final and the input is late.
   */
  def add(ts: Long, aggregate: Int, input: Long): Boolean =
    if ((hasTick && ts <= lastTick) || (hasFolded && ts < foldedLast)) false
    else {
      if (pendingSize == pendingTs.length) {
        val n = 2 * pendingSize
        pendingTs = java.util.Arrays.copyOf(pendingTs, n)
        pendingAggregate = java.util.Arrays.copyOf(pendingAggregate, n)
        pendingInput = java.util.Arrays.copyOf(pendingInput, n)
        pendingBytes = java.util.Arrays.copyOf(pendingBytes, n)
      }
      pendingTs(pendingSize) = ts
      pendingAggregate(pendingSize) = aggregate
      pendingInput(pendingSize) = input
      pendingBytes(pendingSize) = null
      pendingSize += 1
      true
    }

  /** True while some aggregate has inputs in its window or waiting: keep the state. */
  def isLive: Boolean = liveFrom(0)

  /** The next tick that can emit a row or finish the key, read right after [[advance]]. */
  def nextTick: Long = dueFrom(0)

  /**
   * Emits every tick up to `upTo` that is due, in tick order: `emit(tick)` is called with
   * every slide at that tick, to be read there and then.
   */
  def advance(upTo: Long, emit: Long => Unit): Unit = {
    sortPending()
    var taken = 0
    while (liveFrom(taken) && dueFrom(taken) <= upTo) {
      val tick = dueFrom(taken)
      while (taken < pendingSize && pendingTs(taken) <= tick) { feed(taken); taken += 1 }
      var empty = true
      var i = 0
      while (i < slides.length) { slides(i).advanceTo(tick); empty &&= slides(i).isEmpty; i += 1 }
      var crossed = false
      i = 0
      while (i < slides.length) {
        slides(i) match {
          case bounded: BoundedSlide if alerts(i) != null =>
            alerts(i).update(bounded.lower, bounded.upper)
            crossed ||= alerts(i).aboveCrossing != null || alerts(i).belowCrossing != null
          case _ =>
        }
        i += 1
      }
      // An alert's crossing is a row even at an empty tick after another (the first tick
      // can be empty when `every` exceeds the window).
      if (!empty || !lastWasEmpty || crossed) emit(tick)
      lastTick = tick
      hasTick = true
      lastWasEmpty = empty
      hasFolded = false // every folded input is at or before this tick
    }
    // Final inputs whose tick is still to come (it is after upTo) enter the slides now.
    while (taken < pendingSize && pendingTs(taken) <= upTo) {
      feed(taken)
      if (!hasFolded) { hasFolded = true; foldedFirst = pendingTs(taken) }
      foldedLast = pendingTs(taken)
      taken += 1
    }
    val left = pendingSize - taken
    System.arraycopy(pendingTs, taken, pendingTs, 0, left)
    System.arraycopy(pendingAggregate, taken, pendingAggregate, 0, left)
    System.arraycopy(pendingInput, taken, pendingInput, 0, left)
    System.arraycopy(pendingBytes, taken, pendingBytes, 0, left)
    java.util.Arrays.fill(pendingBytes.asInstanceOf[Array[AnyRef]], left, pendingSize, null)
    pendingSize = left
  }

  /** Pending input `i` into its slide. */
  private def feed(i: Int): Unit = {
    val bytes = pendingBytes(i)
    if (bytes == null) slides(pendingAggregate(i)).add(pendingTs(i), pendingInput(i))
    else slides(pendingAggregate(i)).addBytes(pendingTs(i), bytes)
  }

  private def liveFrom(from: Int): Boolean =
    from < pendingSize || hasFolded || (hasTick && !lastWasEmpty)

  private def dueFrom(from: Int): Long =
    if (hasTick && !lastWasEmpty) lastTick + every
    else tickAtOrAfter(if (hasFolded) foldedFirst else pendingTs(from))

  private def tickAtOrAfter(ts: Long): Long = {
    val down = Math.floorDiv(ts, every) * every
    if (down == ts) ts else down + every
  }

  /** Sorts the pending inputs by time (stable), through a permutation of their indices. */
  private def sortPending(): Unit = {
    var sorted = true
    var i = 1
    while (sorted && i < pendingSize) { sorted = pendingTs(i - 1) <= pendingTs(i); i += 1 }
    if (sorted) return
    val order = (0 until pendingSize).sortBy(pendingTs(_)).toArray
    pendingTs = order.map(pendingTs)
    pendingAggregate = order.map(pendingAggregate)
    pendingInput = order.map(pendingInput)
    pendingBytes = order.map(pendingBytes)
  }

  /** The state as bytes (docs/format.md, "Live window state"), for a streaming state store. */
  def toBytes: Array[Byte] = {
    sortPending()
    val out = new ByteWriter(64 + 12 * pendingSize)
    out.byte(LiveWindow.Magic)
    out.byte(LiveWindow.Version)
    out.byte((if (hasTick) 1 else 0) | (if (lastWasEmpty) 2 else 0) | (if (hasFolded) 4 else 0))
    out.long(lastTick)
    out.long(window)
    out.long(every)
    if (hasFolded) { out.long(foldedFirst); out.long(foldedLast) }
    out.varint(aggregates.length)
    aggregates.indices.foreach { i =>
      val a = aggregates(i)
      out.byte(a.tag)
      out.varint(a.parameters.length)
      a.parameters.foreach(p => out.long(java.lang.Double.doubleToLongBits(p)))
      val alert = alerts(i)
      out.byte(if (alert == null) 0 else (if (alert.above.isDefined) 1 else 0) |
        (if (alert.below.isDefined) 2 else 0) | (if (alert.isAbove) 4 else 0) |
        (if (alert.below.isDefined && alert.isBelow) 8 else 0))
      if (alert != null) { alert.above.foreach(out.long); alert.below.foreach(out.long) }
    }
    slides.foreach(_.writeTo(out))
    // Pending inputs sorted, as steps from the last tick: a byte or two each.
    out.varint(pendingSize)
    var previous = lastTick
    var i = 0
    while (i < pendingSize) {
      out.varint(pendingTs(i) - previous)
      previous = pendingTs(i)
      out.varint(pendingAggregate(i))
      if (aggregates(pendingAggregate(i)).takesBytes) LiveWindow.writeBytes(out, pendingBytes(i))
      else aggregates(pendingAggregate(i)).writeInput(out, pendingInput(i))
      i += 1
    }
    out.checksum()
    out.result()
  }
}

object LiveWindow {
  /** The first byte of a live window's state: tells it from a live count's (1 or 2). */
  val Magic: Byte = 0x57
  /**
   * 5 adds top values' leveled form (the running frames' [[LeveledTopK]]); 4 marks the form
   * of a percentile's, moments' or top values' slide (slices of the ticks, or the running
   * frames' structure); 3 folds final inputs into the slides before their tick (and a
   * percentile's window is held exactly as in memory); 2 recorded each aggregate's alert
   * thresholds and states; 1, which had none. All five read.
   */
  val Version: Byte = 5

  /**
   * A slide's form from version 4: the time-ordered structure of states before version 5
   * (top values' summaries per node), one summary a tick slice, or (top values, version 5)
   * leveled counts.
   */
  private[core] val OrderedForm: Byte = 0
  private[core] val SlicedForm: Byte = 1
  private[core] val LeveledForm: Byte = 2

  /**
   * The form of a slide that has one: states before version 4 hold the ordered form; the
   * leveled form only where `leveled` (top values) and from version 5.
   */
  private[core] def readForm(in: ByteReader, version: Int, leveled: Boolean = false): Byte =
    if (version < 4) OrderedForm
    else in.byte() match {
      case form @ (OrderedForm | SlicedForm) => form
      case LeveledForm if leveled && version >= 5 => LeveledForm
      case other => throw new CorruptSketchException(s"unknown live slide form $other")
    }

  /** The slicing a sliced slide was written with: none means the state is not this query's. */
  private[core] def slicesOf(window: Long, every: Long, most: Int): TickSlices =
    TickSlices(window, every, most).getOrElse(notSliced)

  private[core] def notSliced: Nothing =
    throw new CorruptSketchException("a sliced live slide for a window its ticks do not slice")

  // Each family's tag in the state, and its name for refusals: one line per family.
  val CountTag: Byte = 1
  val SumTag: Byte = 2
  val DistinctTag: Byte = 3
  val PercentileTag: Byte = 4
  val MomentsTag: Byte = 5
  val TopKTag: Byte = 6
  val SampleTag: Byte = 7
  private val FamilyNames = Map(CountTag -> "count", SumTag -> "sum", DistinctTag -> "distinct",
    PercentileTag -> "percentile", MomentsTag -> "moments", TopKTag -> "top_k", SampleTag -> "sample")

  private[core] def newAlert(a: LiveAggregate, isAbove: Boolean = false,
      isBelow: Boolean = true): CertifiedAlert =
    if (a.above.isEmpty && a.below.isEmpty) null else new CertifiedAlert(a.above, a.below, isAbove, isBelow)

  private[core] def writeBytes(out: ByteWriter, bytes: Array[Byte]): Unit = {
    out.varint(bytes.length)
    out.bytes(bytes)
  }

  private[core] def length(in: ByteReader): Int = {
    val n = in.varint()
    if (n < 0 || n > in.remaining) throw new CorruptSketchException("invalid length")
    n.toInt
  }

  /**
   * Reads [[LiveWindow.toBytes]] for a query with `window`, `every` and `aggregates`:
   * damaged bytes raise [[CorruptSketchException]], a state written for other parameters an
   * IllegalArgumentException naming them.
   */
  def fromBytes(window: Long, every: Long, aggregates: IndexedSeq[LiveAggregate],
      bytes: Array[Byte]): LiveWindow = {
    val in = ByteReader.checked(bytes, "live window state")
    val body = bytes.length - 4
    if (in.byte() != Magic) throw new CorruptSketchException("not a live window state")
    val version = in.byte()
    if (version < 1 || version > Version) {
      throw new CorruptSketchException(s"unknown live window state version $version")
    }
    val flags = in.byte()
    if ((flags & ~(if (version >= 3) 7 else 3)) != 0) {
      throw new CorruptSketchException(s"unknown live window state flags $flags")
    }
    val hasTick = (flags & 1) != 0
    val lastWasEmpty = (flags & 2) != 0
    val hasFolded = (flags & 4) != 0
    val lastTick = in.long()
    val stateWindow = in.long()
    val stateEvery = in.long()
    val (foldedFirst, foldedLast) = if (hasFolded) (in.long(), in.long()) else (0L, 0L)
    if (hasFolded && (foldedLast < foldedFirst || (hasTick && foldedFirst <= lastTick))) {
      throw new CorruptSketchException("invalid folded inputs")
    }
    val count = in.varint()
    if (count <= 0 || count > body) throw new CorruptSketchException(s"invalid aggregate count $count")
    val written = (0 until count.toInt).map { _ =>
      val tag = in.byte()
      val n = in.varint()
      if (n < 0 || n > body) throw new CorruptSketchException("invalid parameter count")
      val stored = Seq.fill(n.toInt)(java.lang.Double.longBitsToDouble(in.long()))
      // States from before top-k had an eps (exact counts) resume at the default eps.
      val parameters = if (tag == TopKTag && stored.length == 1) stored :+ LiveTopKAggregate.DefaultEps
        else stored
      val alertFlags = if (version == 1) 0 else in.byte()
      // A state bit only beside its threshold (bit 2 with bit 0, bit 3 with bit 1).
      if ((alertFlags & ~15) != 0 || (alertFlags & ~(alertFlags << 2) & 12) != 0) {
        throw new CorruptSketchException(s"unknown live window alert flags $alertFlags")
      }
      val above = if ((alertFlags & 1) != 0) Some(in.long()) else None
      val below = if ((alertFlags & 2) != 0) Some(in.long()) else None
      WrittenAggregate(tag, parameters, above, below, (alertFlags & 4) != 0,
        below.isEmpty || (alertFlags & 8) != 0)
    }
    checkParameters(window, every, aggregates, stateWindow, stateEvery, written)
    val slides = aggregates.map(_.readSlide(window, every, in, version)).toArray
    val alerts = aggregates.zip(written).map { case (a, w) => newAlert(a, w.isAbove, w.isBelow) }.toArray
    // Every slide was last moved to the last tick (none has a time before the first) or,
    // with folded inputs, to one of theirs; with none, the last tick was empty exactly
    // when all of them were.
    def endOk(end: Option[Long]): Boolean =
      if (!hasFolded) (if (hasTick) end.contains(lastTick) else end.isEmpty)
      else end.forall(e => e <= foldedLast && (!hasTick || e >= lastTick)) && (!hasTick || end.isDefined)
    val consistent = slides.forall(s => endOk(s.end)) &&
      (if (hasTick) hasFolded || lastWasEmpty == slides.forall(_.isEmpty) else lastWasEmpty && lastTick == 0L)
    if (!consistent) throw new CorruptSketchException("the live window state contradicts its slides")
    val n = in.varint()
    if (n < 0 || n > body) throw new CorruptSketchException("invalid pending count")
    val size = math.max(8, n.toInt)
    val ts = new Array[Long](size)
    val which = new Array[Int](size)
    val inputs = new Array[Long](size)
    val items = new Array[Array[Byte]](size)
    var previous = lastTick
    var i = 0
    while (i < n) {
      val step = in.varint()
      val next = previous + step
      // Sorted, after the last tick (the first may precede 0 before any tick) and not
      // before a folded input.
      val ordered = (if (i == 0) !hasTick || step > 0 else step >= 0) && (!hasFolded || next >= foldedLast)
      if (!ordered || (step > 0 && next < previous)) {
        throw new CorruptSketchException("pending inputs out of order")
      }
      val aggregate = in.varint()
      if (aggregate < 0 || aggregate >= aggregates.length) {
        throw new CorruptSketchException(s"pending input of unknown aggregate $aggregate")
      }
      ts(i) = next
      which(i) = aggregate.toInt
      if (aggregates(which(i)).takesBytes) items(i) = in.take(length(in))
      else inputs(i) = if (version >= 3) aggregates(which(i)).readInput(in) else in.long()
      if (!aggregates(which(i)).takesBytes && !aggregates(which(i)).validInput(inputs(i))) {
        throw new CorruptSketchException(s"invalid pending input of ${aggregates(which(i)).family}")
      }
      previous = next
      i += 1
    }
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the live window state")
    new LiveWindow(window, every, aggregates, slides, alerts, lastTick, hasTick, lastWasEmpty, ts, which,
      inputs, items, n.toInt, hasFolded, foldedFirst, foldedLast)
  }

  /**
   * A window of one aggregate resumed from fields another layout recorded (a live count's
   * state of version 1 or 2): no input folded, `pendingSize` inputs at `pendingTs`, each
   * `input`.
   */
  private[core] def resumeOne(window: Long, every: Long, aggregate: LiveAggregate, slide: LiveSlide,
      alert: CertifiedAlert, lastTick: Long, hasTick: Boolean, lastWasEmpty: Boolean,
      pendingTs: Array[Long], pendingSize: Int, input: Long): LiveWindow = {
    val size = pendingTs.length
    new LiveWindow(window, every, IndexedSeq(aggregate), Array(slide), Array(alert), lastTick, hasTick,
      lastWasEmpty, pendingTs, new Array[Int](size), Array.fill(size)(input), new Array[Array[Byte]](size),
      pendingSize, false, 0L, 0L)
  }

  /** An aggregate as a state records it: family, parameters, thresholds and alert states. */
  private case class WrittenAggregate(tag: Byte, parameters: Seq[Double], above: Option[Long],
      below: Option[Long], isAbove: Boolean, isBelow: Boolean)

  /** Refuses a state made under another window, `every` or aggregate list, naming the change. */
  private def checkParameters(window: Long, every: Long, aggregates: IndexedSeq[LiveAggregate],
      stateWindow: Long, stateEvery: Long, written: Seq[WrittenAggregate]): Unit = {
    // Every key's state is read each batch: the usual case, nothing changed, compares fields;
    // only a difference (which may still describe the same, as an older tag) builds the text.
    val same = stateWindow == window && stateEvery == every && written.size == aggregates.size &&
      written.indices.forall { i =>
        val (w, a) = (written(i), aggregates(i))
        w.tag == a.tag && w.parameters == a.parameters && w.above == a.above && w.below == a.below
      }
    if (same) return
    def shown(w: WrittenAggregate): String =
      FamilyNames.get(w.tag).map(LiveAggregate.describe(_, w.parameters, w.above, w.below))
        .getOrElse(s"an unknown aggregate (tag ${w.tag})")
    val nowAggregates = aggregates.map(_.describe).mkString(", ")
    val wasAggregates = written.map(shown).mkString(", ")
    val changed = Seq(
      ("window", stateWindow.toString, window.toString),
      ("every", stateEvery.toString, every.toString),
      ("aggregates", wasAggregates, nowAggregates)).filter { case (_, a, b) => a != b }
    if (changed.nonEmpty) {
      throw new IllegalArgumentException(
        "the live window state was written with " +
          changed.map { case (name, was, now) => s"$name $was (now $now)" }.mkString(", ") +
          ": its ticks and answers would not continue; restart the query from a new " +
          "checkpoint after changing them")
    }
  }
}
