package windowsketch.core

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
 * It cannot merge with another state (bucket spans depend on the order seen) and has no
 * binary format: it lives inside a running window frame only.
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
}
