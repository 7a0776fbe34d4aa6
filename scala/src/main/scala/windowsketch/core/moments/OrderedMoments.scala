package windowsketch.core
package moments

import windowsketch.core.count.{ExponentialHistogram, OutOfOrderEventException}

/**
 * The moments of the sliding window `(now - window, now]` for rows in time order (running
 * window frames ordered by `ts`), answered in O(1) after each row.
 *
 * Rows sit in buckets of consecutive rows, oldest first, each with its exact (n, mean, M2).
 * A compaction, run once the buckets have grown by half since the last one (so O(1)
 * amortized a row), walks from the newest bucket to the oldest and merges a bucket into
 * the group after it only when the group then passes [[SlidingMoments]]'s certificate
 * against R, the rows of every bucket after it: (I) n + 1 <= c n_R and (M) the sum over
 * the group of (x - mean_R)^2 <= c M2_R, with c = eps / 2 (docs/moments.md). Buckets of
 * one timestamp merge freely: they never straddle the window's edge. Only the oldest
 * bucket can straddle it, and its certificate's R lies inside the window, which gives the
 * bounds and guarantees of [[WindowMoments]] as for the dyadic sketch.
 *
 * The window's buckets are read as a two-stack queue: the older buckets carry the moments
 * of themselves and every bucket up to the split (suffixes), the newer ones one running
 * total, so the window's moments are one pairwise combination. No subtraction ever: a
 * mean of 10^9 keeps its deviation of 1.
 */
final class OrderedMoments(val window: Long, val eps: Double) extends MomentsWindow with LiveMomentsWindow {
  ExponentialHistogram.checkParameters(window, eps)

  private val check = eps / 2

  // Buckets [head, tail): first and last timestamp, n, mean, M2.
  private var firsts = new Array[Long](OrderedMoments.InitialCapacity)
  private var lasts = new Array[Long](OrderedMoments.InitialCapacity)
  private var counts = new Array[Long](OrderedMoments.InitialCapacity)
  private var means = new Array[Double](OrderedMoments.InitialCapacity)
  private var m2s = new Array[Double](OrderedMoments.InitialCapacity)
  private var head = 0
  private var tail = 0
  // Buckets [head, split) carry suffix moments up to the split; [split, tail) add to `newer`.
  private var split = 0
  private var suffixCounts = new Array[Long](OrderedMoments.InitialCapacity)
  private var suffixMeans = new Array[Double](OrderedMoments.InitialCapacity)
  private var suffixM2s = new Array[Double](OrderedMoments.InitialCapacity)
  private val newer = new Moments
  private var compactAt = OrderedMoments.MinCompaction

  private var seenAny = false
  private var nowTs = 0L

  def hasTime: Boolean = seenAny
  def now: Long = nowTs
  def effectiveEps: Double = eps

  /** Buckets held. */
  def bucketCount: Int = tail - head

  def add(ts: Long, x: Double): Unit = {
    MomentsWindow.checkFinite(x)
    if (seenAny && ts < nowTs) throw new OutOfOrderEventException(ts, nowTs)
    advanceTo(ts)
    if (tail == firsts.length) makeRoom()
    firsts(tail) = ts; lasts(tail) = ts; counts(tail) = 1L; means(tail) = x; m2s(tail) = 0.0
    tail += 1
    newer.add(1L, x, 0.0)
    if (tail - head >= compactAt) compact()
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) {
      nowTs = ts
      seenAny = true
      // Past the split the running total still holds buckets that left: a query flips first.
      while (head < tail && !inside(lasts(head))) head += 1
    }

  def merge(other: MomentsWindow): Unit =
    throw new UnsupportedOperationException("the time-ordered moments cannot merge; use SlidingMoments")

  def moments: WindowMoments = {
    val straddling = new Moments
    var start = head
    if (head < tail && !inside(firsts(head))) {
      straddling.add(counts(head), means(head), m2s(head))
      start += 1
    }
    val in = new Moments
    if (start < tail) {
      if (start >= split) flip()
      in.add(suffixCounts(start), suffixMeans(start), suffixM2s(start))
      in.add(newer.n, newer.mean, newer.m2)
    }
    new WindowMoments(in, straddling)
  }

  /** True when no value lies in the window: a bucket stays only while its newest value is in it. */
  def isEmpty: Boolean = head == tail

  /**
   * The window's moments with the buckets combined one by one, oldest first: the same
   * answer as [[moments]] up to rounding, but a function of the buckets alone, so a state
   * read back answers to the bit as one that never stopped (live windows read it once a
   * tick, not once a row).
   */
  def momentsInOrder: WindowMoments = {
    val straddling = new Moments
    val in = new Moments
    var i = head
    while (i < tail) {
      (if (i == head && !inside(firsts(i))) straddling else in).add(counts(i), means(i), m2s(i))
      i += 1
    }
    new WindowMoments(in, straddling)
  }

  private def inside(ts: Long): Boolean = java.lang.Long.compareUnsigned(nowTs - ts, window) < 0

  /**
   * The state as a live window stores it: whether a row was seen and now, when the next
   * compaction runs, then the buckets newest first (each its newest value's age, its time
   * span, n, mean and M2), so a resumed state compacts and answers as one never stopped.
   */
  private[core] def writeTo(out: ByteWriter): Unit = {
    out.byte(if (seenAny) 1 else 0)
    out.long(nowTs)
    out.varint(compactAt)
    out.varint(tail - head)
    var i = tail - 1
    while (i >= head) {
      out.varint(nowTs - lasts(i))
      out.varint(lasts(i) - firsts(i))
      out.varint(counts(i))
      out.long(java.lang.Double.doubleToRawLongBits(means(i)))
      out.long(java.lang.Double.doubleToRawLongBits(m2s(i)))
      i -= 1
    }
  }

  /** Every bucket of [head, tail) onto the suffix side; the running total starts over. */
  private def flip(): Unit = {
    val m = new Moments
    var i = tail - 1
    while (i >= head) {
      m.add(counts(i), means(i), m2s(i))
      suffixCounts(i) = m.n; suffixMeans(i) = m.mean; suffixM2s(i) = m.m2
      i -= 1
    }
    split = tail
    newer.n = 0L; newer.mean = 0.0; newer.m2 = 0.0
  }

  /**
   * Moves the buckets to the arrays' start, into arrays of the next compaction's size
   * rounded up to an eighth of its power of two: buckets never outnumber it, so memory
   * follows the buckets held, not their peak, and arrays are reused while the next
   * compaction's size stays in its class (it moves by a few percent a compaction).
   */
  private def makeRoom(): Unit = {
    val size = tail - head
    val needed = math.max(OrderedMoments.InitialCapacity, compactAt)
    val step = Integer.highestOneBit(needed) >>> 3
    val capacity = (needed + step - 1) / step * step
    def moved[T](a: Array[T], fresh: => Array[T]): Array[T] = {
      val to = if (a.length == capacity) a else fresh
      System.arraycopy(a, head, to, 0, size)
      to
    }
    firsts = moved(firsts, new Array[Long](capacity))
    lasts = moved(lasts, new Array[Long](capacity))
    counts = moved(counts, new Array[Long](capacity))
    means = moved(means, new Array[Double](capacity))
    m2s = moved(m2s, new Array[Double](capacity))
    suffixCounts = moved(suffixCounts, new Array[Long](capacity))
    suffixMeans = moved(suffixMeans, new Array[Double](capacity))
    suffixM2s = moved(suffixM2s, new Array[Double](capacity))
    split -= head
    tail = size
    head = 0
  }

  /**
   * Merges buckets, newest to oldest, where the certificate allows; then every bucket is
   * on the suffix side. Buckets end up in place from `head` on.
   */
  private def compact(): Unit = {
    val after = new Moments // R: the buckets newer than the group being built
    var w = tail - 1        // where the newest group is written; groups are written downwards
    var gFirst = firsts(w)
    var gLast = lasts(w)
    var group = new Moments
    group.add(counts(w), means(w), m2s(w))
    var candidate = new Moments // the group with the next older bucket: the group if it merges
    var i = tail - 2
    while (i >= head) {
      val oneTimestamp = firsts(i) == gLast
      // (I) on the counts first: most old buckets fail it, and it needs no arithmetic.
      val merges = (oneTimestamp || group.n + counts(i) + 1 <= check * after.n) && {
        candidate.n = group.n; candidate.mean = group.mean; candidate.m2 = group.m2
        candidate.add(counts(i), means(i), m2s(i))
        oneTimestamp || candidate.squaresAround(after.mean) <= check * after.m2
      }
      if (merges) {
        val previous = group
        group = candidate
        candidate = previous
        gFirst = firsts(i)
      } else {
        write(w, gFirst, gLast, group)
        after.add(group.n, group.mean, group.m2)
        w -= 1
        group.n = counts(i); group.mean = means(i); group.m2 = m2s(i)
        gFirst = firsts(i); gLast = lasts(i)
      }
      i -= 1
    }
    write(w, gFirst, gLast, group)
    head = w
    flip()
    compactAt = math.max(OrderedMoments.MinCompaction, (tail - head) + (tail - head) / 2)
  }

  private def write(at: Int, first: Long, last: Long, m: Moments): Unit = {
    firsts(at) = first; lasts(at) = last; counts(at) = m.n; means(at) = m.mean; m2s(at) = m.m2
  }
}

object OrderedMoments {
  private val InitialCapacity = 16
  /** Buckets held before the first compaction: below this a pass costs more than it saves. */
  private val MinCompaction = 64

  /**
   * Reads [[OrderedMoments.writeTo]], checking what the state must be: buckets in time
   * order inside the window, finite moments, fewer buckets than the next compaction, and
   * for every bucket of several timestamps the certificate against the buckets after it
   * in its state form (docs/moments.md: later rows can only add to R).
   */
  private[core] def readFrom(window: Long, eps: Double, in: ByteReader): OrderedMoments = {
    val m = new OrderedMoments(window, eps)
    val hasTime = in.byte() match {
      case 0 => false
      case 1 => true
      case other => throw new CorruptSketchException(s"unknown moments flags $other")
    }
    val now = in.long()
    val compactAt = in.varint()
    val n = in.varint()
    if (compactAt < MinCompaction || compactAt > Int.MaxValue || n < 0 || n >= compactAt ||
        (!hasTime && n != 0)) {
      throw new CorruptSketchException(s"invalid moments bucket count $n")
    }
    m.seenAny = hasTime
    m.nowTs = now
    m.compactAt = compactAt.toInt
    val size = n.toInt
    m.firsts = new Array[Long](math.max(size, InitialCapacity))
    m.lasts = new Array[Long](m.firsts.length)
    m.counts = new Array[Long](m.firsts.length)
    m.means = new Array[Double](m.firsts.length)
    m.m2s = new Array[Double](m.firsts.length)
    m.suffixCounts = new Array[Long](m.firsts.length)
    m.suffixMeans = new Array[Double](m.firsts.length)
    m.suffixM2s = new Array[Double](m.firsts.length)
    val after = new Moments
    var previousAge = 0L
    var i = 0
    while (i < size) {
      val age = in.varint()
      val span = in.varint()
      val count = in.varint()
      val mean = java.lang.Double.longBitsToDouble(in.long())
      val m2 = java.lang.Double.longBitsToDouble(in.long())
      val bucket = new Moments
      if (age < previousAge || age >= window || span < 0 || span > Long.MaxValue - age ||
          count < 1 || count > Long.MaxValue - after.n || !java.lang.Double.isFinite(mean) ||
          !(m2 >= 0 && m2 < Double.PositiveInfinity)) {
        throw new CorruptSketchException(s"invalid moments bucket $i")
      }
      bucket.add(count, mean, m2)
      if (span > 0 && !(count + 1 <= m.check * after.n &&
          bucket.squaresAround(after.mean) <= 2 * m.check * after.m2)) {
        throw new CorruptSketchException(s"moments bucket $i breaks its certificate")
      }
      previousAge = age + span
      val slot = size - 1 - i // oldest first in the arrays
      m.lasts(slot) = now - age
      m.firsts(slot) = now - age - span
      m.counts(slot) = count
      m.means(slot) = mean
      m.m2s(slot) = m2
      after.add(count, mean, m2)
      i += 1
    }
    m.tail = size
    m.flip()
    m
  }
}
