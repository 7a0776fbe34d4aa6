package windowsketch.core
package moments

import windowsketch.core.count.OutOfOrderEventException

/** A live key's moments, fed in time order and read at ticks ([[OrderedMoments]], [[SlicedMoments]]). */
trait LiveMomentsWindow {
  def add(ts: Long, x: Double): Unit
  def advanceTo(ts: Long): Unit
  /** True when no value lies in the window. */
  def isEmpty: Boolean
  def hasTime: Boolean
  def now: Long
  /** The window's moments, a function of what the state holds (a resumed key answers alike). */
  def momentsInOrder: WindowMoments
  /** What [[windowsketch.core.LiveSlide.answerStamp]] says of these moments. */
  def answerStamp: AnyRef = null
  private[core] def writeTo(out: ByteWriter): Unit
}

/**
 * The moments of a live window whose ticks cut time into [[TickSlices]]: the exact (n,
 * mean, M2) of each slice's rows, combined oldest first at a tick. No slice straddles a
 * tick's window, so answers are exact up to rounding (their brackets closed), in 26 bytes
 * of state a slice, where [[OrderedMoments]] keeps its certified buckets (tens of KB).
 */
final class SlicedMoments(val slices: TickSlices) extends LiveMomentsWindow {
  // Slices [0, size), oldest first: index, n, mean, M2.
  private var indexes = new Array[Long](4)
  private var counts = new Array[Long](4)
  private var means = new Array[Double](4)
  private var m2s = new Array[Double](4)
  private var size = 0
  private var seenAny = false
  private var nowTs = 0L
  // The last answer, kept while no row came and no slice left: an idle key reads it at
  // each tick until its window empties.
  private var answer: WindowMoments = null

  def hasTime: Boolean = seenAny
  def now: Long = nowTs
  def isEmpty: Boolean = size == 0
  override def answerStamp: AnyRef = answer

  def add(ts: Long, x: Double): Unit = {
    MomentsWindow.checkFinite(x)
    if (seenAny && ts < nowTs) throw new OutOfOrderEventException(ts, nowTs)
    advanceTo(ts)
    answer = null
    val slice = slices.of(ts)
    if (size == 0 || indexes(size - 1) != slice) {
      if (size == indexes.length) grow()
      indexes(size) = slice; counts(size) = 0L; means(size) = 0.0; m2s(size) = 0.0
      size += 1
    }
    // Welford's update: the pairwise combination with one value.
    val last = size - 1
    val n = counts(last) + 1
    val delta = x - means(last)
    means(last) += delta / n
    m2s(last) += delta * (x - means(last))
    counts(last) = n
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) {
      nowTs = ts
      seenAny = true
      val oldest = slices.oldestAt(ts)
      var gone = 0
      while (gone < size && indexes(gone) < oldest) gone += 1
      if (gone > 0) {
        answer = null
        size -= gone
        System.arraycopy(indexes, gone, indexes, 0, size)
        System.arraycopy(counts, gone, counts, 0, size)
        System.arraycopy(means, gone, means, 0, size)
        System.arraycopy(m2s, gone, m2s, 0, size)
      }
    }

  def momentsInOrder: WindowMoments = {
    if (answer == null) {
      val in = new Moments
      var i = 0
      while (i < size) { in.add(counts(i), means(i), m2s(i)); i += 1 }
      answer = new WindowMoments(in, new Moments)
    }
    answer
  }

  /** Whether a row was seen and now, then the slices newest first: index step back, n, mean, M2. */
  private[core] def writeTo(out: ByteWriter): Unit = {
    out.byte(if (seenAny) 1 else 0)
    out.long(nowTs)
    out.varint(size)
    var previous = slices.of(nowTs)
    var i = size - 1
    while (i >= 0) {
      out.varint(previous - indexes(i))
      previous = indexes(i)
      out.varint(counts(i))
      out.long(java.lang.Double.doubleToRawLongBits(means(i)))
      out.long(java.lang.Double.doubleToRawLongBits(m2s(i)))
      i -= 1
    }
  }

  private def grow(): Unit = {
    val n = 2 * indexes.length
    indexes = java.util.Arrays.copyOf(indexes, n)
    counts = java.util.Arrays.copyOf(counts, n)
    means = java.util.Arrays.copyOf(means, n)
    m2s = java.util.Arrays.copyOf(m2s, n)
  }
}

object SlicedMoments {
  /** Past this many slices a window's [[OrderedMoments]] are smaller: 1,024 slices are 26 KB. */
  val MostSlices = 1024

  /**
   * Reads [[SlicedMoments.writeTo]], checking what the state must be: slices strictly
   * newer than one another within the window at now, at least one value each, finite
   * moments, their counts' total a long.
   */
  private[core] def readFrom(slices: TickSlices, in: ByteReader): SlicedMoments = {
    val m = new SlicedMoments(slices)
    val hasTime = in.byte() match {
      case 0 => false
      case 1 => true
      case other => throw new CorruptSketchException(s"unknown moments flags $other")
    }
    val now = in.long()
    val n = in.varint()
    if (n < 0 || n > MostSlices || (!hasTime && n != 0)) {
      throw new CorruptSketchException(s"invalid moments slice count $n")
    }
    m.seenAny = hasTime
    m.nowTs = now
    val size = n.toInt
    m.indexes = new Array[Long](math.max(size, 4))
    m.counts = new Array[Long](m.indexes.length)
    m.means = new Array[Double](m.indexes.length)
    m.m2s = new Array[Double](m.indexes.length)
    val oldest = if (hasTime) slices.oldestAt(now) else 0L
    var previous = if (hasTime) slices.of(now) else 0L
    var total = 0L
    var i = 0
    while (i < size) {
      val step = in.varint()
      val index = previous - step
      val count = in.varint()
      val mean = java.lang.Double.longBitsToDouble(in.long())
      val m2 = java.lang.Double.longBitsToDouble(in.long())
      if (step < 0 || (i > 0 && step == 0) || index < oldest || index > previous || count < 1 ||
          count > Long.MaxValue - total || !java.lang.Double.isFinite(mean) ||
          !(m2 >= 0 && m2 < Double.PositiveInfinity)) {
        throw new CorruptSketchException(s"invalid moments slice $i")
      }
      val slot = size - 1 - i
      m.indexes(slot) = index; m.counts(slot) = count; m.means(slot) = mean; m.m2s(slot) = m2
      total += count
      previous = index
      i += 1
    }
    m.size = size
    m
  }
}
