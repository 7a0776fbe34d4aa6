package windowsketch.core
package count

/**
 * The sum of non-negative integers in the sliding window `(now - window, now]`, for rows that
 * arrive in time order, with `|estimate - exact| <= eps * exact`: what approx_window_sum uses
 * in running frames ordered by ts (docs/ordered-sums.md has the proof).
 *
 * Buckets `(newest ts, oldest ts, sum)` split the values seen into spans of time, oldest
 * first, disjoint. A bucket of one timestamp is exact. Every other bucket `b` keeps
 *
 *     sum(b) <= 2 eps * (sum of the buckets newer than b)                        (D)
 *
 * Only the oldest bucket can straddle the window's left edge, and when it does every newer
 * bucket is in the window, so answering half its sum is within eps of exact. Values enter
 * as buckets of one timestamp (values at the newest timestamp join its bucket); when the
 * arrays fill, one pass from newest to oldest merges neighbours wherever (D) allows. So a
 * value costs O(1) amortized whatever its size, and the state stays
 * O((1/eps) log(window sum)) buckets.
 *
 * It cannot merge with another state (bucket spans depend on the order seen). Its bytes
 * ([[writeTo]]) live only inside a live window's state, which is always in time order.
 */
final class OrderedSumHistogram(val window: Long, val eps: Double) extends WindowCountSketch {
  ExponentialHistogram.checkParameters(window, eps)

  // Buckets at [head, end), oldest first.
  private[this] var newestTs = new Array[Long](OrderedSumHistogram.InitialCapacity)
  private[this] var oldestTs = new Array[Long](OrderedSumHistogram.InitialCapacity)
  private[this] var sums = new Array[Long](OrderedSumHistogram.InitialCapacity)
  private[this] var head = 0
  private[this] var end = 0

  private[this] var bucketTotal = 0L
  private[this] var seenAny = false
  private[this] var nowTs = 0L
  /** 2 eps, a hair lower so that rounding the budget to a long can never exceed (D). */
  private[this] val mergeFactor = 2 * eps * (1 - 1e-9)

  def hasTime: Boolean = seenAny

  private def restore(hasTime: Boolean, now: Long, capacity: Int, first: Int, newest: Array[Long],
      oldest: Array[Long], bucketSums: Array[Long], total: Long): Unit = {
    newestTs = new Array[Long](capacity)
    oldestTs = new Array[Long](capacity)
    sums = new Array[Long](capacity)
    System.arraycopy(newest, 0, newestTs, first, newest.length)
    System.arraycopy(oldest, 0, oldestTs, first, oldest.length)
    System.arraycopy(bucketSums, 0, sums, first, bucketSums.length)
    head = first
    end = first + bucketSums.length
    bucketTotal = total
    seenAny = hasTime
    nowTs = now
  }

  def now: Long = nowTs

  /** Buckets held. */
  def bucketCount: Int = end - head

  /** The sum of all buckets held (the oldest may straddle the window's edge). */
  def total: Long = bucketTotal

  /**
   * Observes one row: moves `now` forward to `ts`, expires buckets that left the window
   * and adds `weight` (>= 0) at `ts`. A value older than the window is dropped; one inside
   * the window but older than the newest counted throws [[OutOfOrderEventException]].
   */
  def add(ts: Long, weight: Long): Unit = {
    if (weight < 0L) throw new IllegalArgumentException(s"negative weight $weight")
    advanceTo(ts)
    if (weight != 0L && !isExpired(ts)) {
      if (bucketTotal > Long.MaxValue - weight) {
        throw new ArithmeticException("the sum of the window's values overflows BIGINT")
      }
      if (end > head && ts <= newestTs(end - 1)) {
        val newest = newestTs(end - 1)
        if (ts < newest) throw new OutOfOrderEventException(ts, newest)
        // The newest bucket always has one timestamp: (D) lets nothing merge into it.
        sums(end - 1) += weight
      } else {
        if (end == sums.length) makeRoom()
        newestTs(end) = ts
        oldestTs(end) = ts
        sums(end) = weight
        end += 1
      }
      bucketTotal += weight
    }
  }

  /** Moves `now` to `ts` if it is later, and drops the buckets that left the window. */
  def advanceTo(ts: Long): Unit =
    if (ts > nowTs || !seenAny) {
      nowTs = ts
      seenAny = true
      while (head < end && isExpired(newestTs(head))) {
        bucketTotal -= sums(head)
        head += 1
      }
    }

  /** Exact unless the oldest bucket straddles the edge; then half of it, within eps. */
  def estimate: Long = if (oldestStraddles) bucketTotal - sums(head) / 2 else bucketTotal

  /** A certified lower bound: a straddling bucket's newest value (>= 1) is in the window. */
  def lowerBound: Long = if (oldestStraddles) bucketTotal - sums(head) + 1 else bucketTotal

  /** A certified upper bound: a straddling bucket's oldest value (>= 1) is not. */
  def upperBound: Long = if (oldestStraddles) bucketTotal - 1 else bucketTotal

  def merge(other: WindowCountSketch): Unit =
    throw new UnsupportedOperationException(
      "the time-ordered sum histogram cannot merge; use DyadicWindowSketch")

  /** Visits the buckets from newest to oldest as (newest ts, oldest ts, sum); for tests. */
  def foreachBucket(f: (Long, Long, Long) => Unit): Unit = {
    var i = end - 1
    while (i >= head) { f(newestTs(i), oldestTs(i), sums(i)); i -= 1 }
  }

  /**
   * The buckets newest first as (age of newest, span, sum) from `now`, for a live window's
   * state (docs/format.md, "Live window state").
   */
  private[core] def writeTo(out: ByteWriter): Unit = {
    out.byte(if (seenAny) 1 else 0)
    out.long(nowTs)
    // The capacity and the first bucket's slot decide when the next merge pass runs: a
    // resumed histogram keeps them, so it answers exactly as one that never stopped.
    out.varint(sums.length)
    out.varint(head)
    out.varint(end - head)
    var i = end - 1
    while (i >= head) {
      out.varint(nowTs - newestTs(i))
      out.varint(newestTs(i) - oldestTs(i))
      out.varint(sums(i))
      i -= 1
    }
  }

  /** now - ts >= window, with the difference taken as unsigned so it cannot overflow. */
  private def isExpired(ts: Long): Boolean =
    java.lang.Long.compareUnsigned(nowTs - ts, window) >= 0

  private def oldestStraddles: Boolean = head < end && isExpired(oldestTs(head))

  /**
   * Called when the arrays are full: merges, then grows the arrays if the buckets still
   * fill more than half of them, so the next pass is at least as many appends away as
   * this one cost.
   */
  private def makeRoom(): Unit = {
    compress()
    if (2 * (end - head) > sums.length) {
      val capacity = 2 * sums.length
      newestTs = java.util.Arrays.copyOf(newestTs, capacity)
      oldestTs = java.util.Arrays.copyOf(oldestTs, capacity)
      sums = java.util.Arrays.copyOf(sums, capacity)
    }
  }

  /**
   * One pass from newest to oldest: a bucket joins the group being built while the group's
   * sum stays within 2 eps times the sum of the groups already built (all newer), so (D)
   * holds for every group. Groups are written from the newest slot down (never over a
   * bucket not yet read), then moved to the front.
   */
  private[core] def compress(): Unit = {
    if (end == head) { head = 0; end = 0; return }
    var write = end - 1
    var groupNewest = newestTs(write)
    var groupOldest = oldestTs(write)
    var groupSum = sums(write)
    var newer = 0L
    var budget = 0L
    var read = end - 2
    while (read >= head) {
      val s = sums(read)
      if (groupSum + s <= budget) {
        groupSum += s
        groupOldest = oldestTs(read)
      } else {
        newestTs(write) = groupNewest
        oldestTs(write) = groupOldest
        sums(write) = groupSum
        write -= 1
        newer += groupSum
        budget = (mergeFactor * newer).toLong
        groupNewest = newestTs(read)
        groupOldest = oldestTs(read)
        groupSum = s
      }
      read -= 1
    }
    newestTs(write) = groupNewest
    oldestTs(write) = groupOldest
    sums(write) = groupSum
    val size = end - write
    System.arraycopy(newestTs, write, newestTs, 0, size)
    System.arraycopy(oldestTs, write, oldestTs, 0, size)
    System.arraycopy(sums, write, sums, 0, size)
    head = 0
    end = size
  }
}

object OrderedSumHistogram {
  private val InitialCapacity = 16

  /**
   * Reads [[OrderedSumHistogram.writeTo]], checking what the guarantee rests on: buckets
   * disjoint and newest first, each newest inside the window, positive sums, no overflow,
   * and (D) for every bucket spanning more than one timestamp.
   */
  private[core] def readFrom(window: Long, eps: Double, in: ByteReader): OrderedSumHistogram = {
    val h = new OrderedSumHistogram(window, eps)
    val hasTime = in.byte() match {
      case 0 => false
      case 1 => true
      case other => throw new CorruptSketchException(s"unknown sum histogram flags $other")
    }
    val now = in.long()
    val capacity = in.varint()
    if (capacity < InitialCapacity || capacity > maxCapacity(eps) || java.lang.Long.bitCount(capacity) != 1) {
      throw new CorruptSketchException(s"invalid sum histogram capacity $capacity")
    }
    val first = in.varint()
    val n = in.varint()
    if (first < 0 || n < 0 || first + n > capacity || (!hasTime && n != 0)) {
      throw new CorruptSketchException(s"invalid sum bucket count $n")
    }
    val newest = new Array[Long](n.toInt)
    val oldest = new Array[Long](n.toInt)
    val sums = new Array[Long](n.toInt)
    var previousAge = -1L
    var newer = 0L
    var i = 0
    while (i < n) {
      val age = in.varint()
      val span = in.varint()
      val sum = in.varint()
      if (age <= previousAge || age >= window || span < 0 || span > window + age || sum <= 0 ||
          sum > Long.MaxValue - newer || (span > 0 && sum > 2 * eps * newer)) {
        throw new CorruptSketchException(s"invalid sum bucket $i")
      }
      previousAge = age + span
      // Oldest first in the arrays.
      val slot = n.toInt - 1 - i
      newest(slot) = now - age
      oldest(slot) = now - age - span
      sums(slot) = sum
      newer += sum
      i += 1
    }
    h.restore(hasTime, now, capacity.toInt, first.toInt, newest, oldest, sums, newer)
    h
  }

  /**
   * The largest capacity the arrays can reach. After a merge pass, any two neighbouring
   * groups hold more than 2 eps times the sum of the newer ones, so the window sum (below
   * 2^63) bounds the groups to G = 2 log(2^63) / log(1 + 2 eps) + 2; the arrays double only
   * when a pass leaves more than half of them full, so the capacity stays below 4 G.
   */
  private[core] def maxCapacity(eps: Double): Long = {
    val groups = 2 * 63 * math.log(2) / math.log(1 + 2 * eps) + 2
    math.max(InitialCapacity.toLong, 2 * java.lang.Long.highestOneBit(math.ceil(4 * groups).toLong))
  }
}
