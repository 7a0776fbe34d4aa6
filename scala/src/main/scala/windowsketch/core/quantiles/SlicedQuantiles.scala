package windowsketch.core
package quantiles

import windowsketch.core.count.{ExponentialHistogram, OutOfOrderEventException}

/** A live key's percentiles, fed in time order and read at ticks ([[SlidingQuantiles]], [[SlicedQuantiles]]). */
trait LivePercentilesWindow {
  def add(ts: Long, x: Double): Unit
  def advanceTo(ts: Long): Unit
  def hasTime: Boolean
  def now: Long
  /** True when no value lies in the window. */
  def isEmpty: Boolean
  /** True once values are summarized rather than held. */
  def isCompact: Boolean
  /** Each percentage's answer for the window ending at now; null when it holds no value. */
  def estimates(ps: Array[Double]): Array[Double]
  /** What [[windowsketch.core.LiveSlide.answerStamp]] says of these estimates. */
  def answerStamp: AnyRef = null
  private[core] def writeTo(out: ByteWriter): Unit
}

/**
 * The percentiles of a live window whose ticks cut time into [[TickSlices]]: each slice's
 * values in a [[QuantileSummary]] (docs/percentiles.md, "Live windows").
 *
 * While the slices hold at most [[exactLimit]] values together nothing is compacted and
 * the answers are `percentile_approx`'s over the window's rows. Past it, for good, each
 * slice compacts as the compact mode's nodes do, only while its variance stays within the
 * budget eps^2 m (m + 2 r) / 45 for its m rows and the r rows of the slices after it: the
 * newest slice as rows come, the others each time a slice closes (r only grows, so an old
 * slice compacts further as the window fills after it). No slice straddles a tick's
 * window, so the compact mode's proof holds with no straddling rows: the slices' variances
 * add up to at most eps^2 n^2 / 45, and every answer's rank is within eps n of p n with
 * probability at least 1 - 2 10^-4.
 */
final class SlicedQuantiles(val slices: TickSlices, val eps: Double) extends LivePercentilesWindow {
  val window: Long = slices.window
  ExponentialHistogram.checkParameters(window, eps)
  /** The values held before any is compacted: the compact mode's exact limit (4,096 at eps 0.01). */
  val exactLimit: Int = CompactQuantiles.exactLimit(eps)
  private val leafCapacity = CompactQuantiles.leafCapacityFor(eps)
  private val topCapacity = CompactQuantiles.topCapacityFor(eps)

  // Slices oldest first; the newest still takes rows.
  private val held = new java.util.ArrayDeque[SlicedQuantiles.Slice]()
  private var heldValues = 0L
  private var compacting = false
  private var seenAny = false
  private var nowTs = 0L
  // The held values with their weights, kept while no row came and no slice left: an idle
  // key reads them at each tick until its window empties.
  private var view: WeightedValues = null
  private var viewRows = 0L
  private var viewSpread = 0L
  private var viewVariance = 0.0

  def hasTime: Boolean = seenAny
  def now: Long = nowTs
  def isEmpty: Boolean = held.isEmpty
  def isCompact: Boolean = compacting

  def add(ts: Long, x: Double): Unit = {
    if (seenAny && ts < nowTs) throw new OutOfOrderEventException(ts, nowTs)
    advanceTo(ts)
    val value = if (java.lang.Double.isNaN(x)) Double.NaN else x // one NaN: equal states, equal bytes
    val index = slices.of(ts)
    if (held.isEmpty || held.peekLast().index != index) {
      held.addLast(new SlicedQuantiles.Slice(index, 0L, new QuantileSummary()))
      if (compacting) compactClosed()
    }
    val slice = held.peekLast()
    slice.rows += 1
    view = null
    val before = slice.summary.retained
    if (compacting) {
      slice.summary.insert(value, leafCapacity, salt(slice), budget(slice.rows, 0L))
    } else slice.summary.insert(value, Int.MaxValue, 0L, 0.0) // level 0 only: never compacts
    heldValues += slice.summary.retained - before
    if (!compacting && heldValues > exactLimit) {
      compacting = true
      compactClosed()
      compactNewest()
    }
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) {
      nowTs = ts
      seenAny = true
      val oldest = slices.oldestAt(ts)
      while (!held.isEmpty && held.peekFirst().index < oldest) {
        heldValues -= held.pollFirst().summary.retained
        view = null
      }
    }

  override def answerStamp: AnyRef = view

  def estimates(ps: Array[Double]): Array[Double] = {
    if (view == null) {
      viewRows = 0L
      viewSpread = 0L
      viewVariance = 0.0
      held.forEach { s => viewRows += s.rows; viewSpread += s.summary.spread; viewVariance += s.summary.variance }
      view = HeldValues.of(new SlicedQuantiles.Summaries(held))
    }
    val answer = view.answer(ps, viewRows, 0L, viewSpread, viewVariance, bounds = false)
    if (answer.estimates.isEmpty) null else answer.estimates
  }

  /** The slices before the newest, each to its capacity within its budget against the rows after it. */
  private def compactClosed(): Unit = {
    var after = 0L
    val it = held.descendingIterator
    var newest = true
    while (it.hasNext) {
      val s = it.next()
      if (!newest) {
        val before = s.summary.retained
        s.summary.compress(CompactQuantiles.capacityFor(topCapacity, eps / 3, s.rows, after),
          salt(s), budget(s.rows, after))
        heldValues += s.summary.retained - before
      }
      newest = false
      after += s.rows
    }
  }

  private def compactNewest(): Unit = {
    val s = held.peekLast()
    val before = s.summary.retained
    s.summary.compress(leafCapacity, salt(s), budget(s.rows, 0L))
    heldValues += s.summary.retained - before
  }

  private def budget(rows: Long, rowsAfter: Long): Double = CompactQuantiles.budgetFor(eps, rows, rowsAfter)

  private def salt(s: SlicedQuantiles.Slice): Long = CompactQuantiles.salt(0, s.index)

  /**
   * Whether a row was seen and now, whether it compacts, then the slices newest first: index
   * step back, rows, the summary as a compact node's.
   */
  private[core] def writeTo(out: ByteWriter): Unit = {
    out.byte((if (seenAny) 1 else 0) | (if (compacting) 2 else 0))
    out.long(nowTs)
    out.varint(held.size)
    var previous = slices.of(nowTs)
    val it = held.descendingIterator
    while (it.hasNext) {
      val s = it.next()
      out.varint(previous - s.index)
      previous = s.index
      out.varint(s.rows)
      SketchFormat.writeQuantileSummary(out, s.summary)
    }
  }
}

object SlicedQuantiles {
  /**
   * The slices every window was cut into at most before [[mostSlices]]: tried first, so
   * states written then resume with their slicing.
   */
  val FirstMostSlices = 128

  /**
   * Past this many slices a window at eps is smaller in [[SlidingQuantiles]]' compact
   * mode: 16 per power of two in 1/eps, from 128 to 4,096 (1,024 at eps 0.01, 256 at 0.05;
   * measured in docs/percentiles.md, "Live windows").
   */
  def mostSlices(eps: Double): Int =
    if (!(eps > 0.0)) FirstMostSlices // refused by the constructor
    else {
      val inverse = math.min(4096.0, math.ceil(1.0 / eps)).toLong
      math.max(FirstMostSlices.toLong, math.min(4096L, 16L * java.lang.Long.highestOneBit(inverse))).toInt
    }

  /** How a live window's ticks slice it for percentiles at eps, if within [[mostSlices]]. */
  def slicing(window: Long, every: Long, eps: Double): Option[TickSlices] =
    TickSlices(window, every, FirstMostSlices).orElse(TickSlices(window, every, mostSlices(eps)))

  private[quantiles] final class Slice(val index: Long, var rows: Long, val summary: QuantileSummary)

  private final class Summaries(slices: java.util.ArrayDeque[Slice]) extends Iterator[QuantileSummary] {
    private val it = slices.iterator
    def hasNext: Boolean = it.hasNext
    def next(): QuantileSummary = it.next().summary
  }

  /**
   * Reads [[SlicedQuantiles.writeTo]], checking what the state must be: slices strictly
   * newer than one another within the window at now, at most [[mostSlices]], each summary's
   * weight its row count and its variance within its budget against the rows after it;
   * before compacting, no compaction and at most the exact limit values.
   */
  private[core] def readFrom(slices: TickSlices, eps: Double, in: ByteReader, length: Int): SlicedQuantiles = {
    val q = new SlicedQuantiles(slices, eps)
    val flags = in.byte()
    if ((flags & ~3) != 0) throw new CorruptSketchException(s"unknown percentile flags $flags")
    val hasTime = (flags & 1) != 0
    val now = in.long()
    val n = in.varint()
    if (n < 0 || n > mostSlices(eps) || (!hasTime && n != 0)) {
      throw new CorruptSketchException(s"invalid percentile slice count $n")
    }
    q.seenAny = hasTime
    q.nowTs = now
    q.compacting = (flags & 2) != 0
    val oldest = if (hasTime) slices.oldestAt(now) else 0L
    var previous = if (hasTime) slices.of(now) else 0L
    var after = 0L
    var i = 0
    while (i < n) {
      val step = in.varint()
      val index = previous - step
      val rows = in.varint()
      val summary = SketchFormat.readQuantileSummary(in, length, s"slice $i")
      val weight = try { summary.spread; summary.weight } catch { case _: ArithmeticException => -1L }
      if (step < 0 || (i > 0 && step == 0) || index < oldest || index > previous || rows < 1 ||
          rows > Long.MaxValue - after || weight != rows ||
          (q.compacting && summary.variance > CompactQuantiles.budgetFor(eps, rows, after)) ||
          (!q.compacting && (summary.levelCount > 1 || summary.compactionsAt(0) > 0))) {
        throw new CorruptSketchException(s"invalid percentile slice $i")
      }
      q.held.addFirst(new Slice(index, rows, summary))
      q.heldValues += summary.retained
      after += rows
      previous = index
      i += 1
    }
    if (!q.compacting && q.heldValues > q.exactLimit) {
      throw new CorruptSketchException("an exact percentile window past its limit")
    }
    q
  }
}
