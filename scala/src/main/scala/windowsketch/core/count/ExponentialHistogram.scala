package windowsketch.core
package count

/**
 * The exponential histogram of Datar, Gionis, Indyk and Motwani, as in Meijer's
 * article: an approximate count of the events in the sliding window `(now - window, now]`
 * with `|estimate - exact| <= eps * exact`, for events that arrive in time order.
 *
 * Buckets hold 2^level events each. With `k = ceil(1/eps)`, when `ceil(k/2) + 2` buckets
 * share a level the two oldest merge into one bucket of the next level, cascading. A
 * bucket expires once its newest event leaves the window.
 *
 * Unlike the seed, each bucket also keeps the timestamp of its oldest event. The oldest
 * surviving bucket is the only one that can straddle the window's left edge; knowing both
 * its ends tells whether it does, so the sketch gives certified bounds and an estimate
 * that is exact unless it straddles, and within `count/2 - 1` of the truth when it does
 * (the seed's `ceil(total - last/2)` can break its own bound for eps < 0.5).
 *
 * Storage is two flat arrays of timestamps, one ring of `mergeAt` slots per level; the
 * global order is level 0 newest to oldest, then level 1, and so on, so the oldest bucket
 * is the oldest of the top level. Inserts allocate nothing once the levels exist.
 *
 * `window` is in the caller's units of `ts` (positions or microseconds); the Spark layer
 * maps an inclusive time window `[now - w, now]` to `window = w + 1`.
 */
final class ExponentialHistogram(val window: Long, val eps: Double)
  extends WindowCountSketch {
  ExponentialHistogram.checkParameters(window, eps)

  /** Buckets per level, as in the seed: k = ceil(1/eps). */
  val k: Int = math.ceil(1.0 / eps).toInt
  /** A level is merged when this many buckets share it. */
  val mergeAt: Int = (k + 1) / 2 + 2

  private[this] var allocatedLevels = 0
  private[this] var newestTs: Array[Long] = Array.emptyLongArray
  private[this] var oldestTs: Array[Long] = Array.emptyLongArray
  /** Ring slot of each level's oldest bucket, and each level's bucket count. */
  private[this] var ringStart: Array[Int] = Array.emptyIntArray
  private[this] var ringSize: Array[Int] = Array.emptyIntArray

  private var topLevel = -1
  private[this] var bucketTotal = 0L
  private var seenAny = false
  private var nowTs = 0L
  /** The newest event counted: an event older than it, still in the window, cannot be placed. */
  private[this] var newestEventTs = Long.MinValue
  /**
   * The oldest bucket, the only one that can straddle the window's edge, cached so that
   * expiry and the estimate cost one comparison per row: its newest and oldest timestamps
   * and half its count (0 when it holds one event, which cannot straddle, or when empty).
   */
  private[this] var edgeNewest = 0L
  private[this] var edgeOldest = 0L
  private[this] var edgeHalfCount = 0L

  ensureLevel(0)

  /** True once any timestamp has been seen (an event or not). */
  def hasTime: Boolean = seenAny

  /** The largest timestamp seen; only meaningful when [[hasTime]]. */
  def now: Long = nowTs

  /** Number of buckets held. */
  def bucketCount: Int = {
    var n = 0
    var level = 0
    while (level <= topLevel) { n += ringSize(level); level += 1 }
    n
  }

  /** Sum of the counts of all buckets held (the oldest may straddle the window edge). */
  def total: Long = bucketTotal

  /**
   * Observes one row: moves `now` forward to `ts` (whether or not it is an event), expires
   * buckets that left the window and, if `weight` is 1, counts one event at `ts`.
   *
   * An event older than the window is dropped. An event inside the window but older than
   * the newest one already counted cannot be placed in a time-ordered histogram: it throws
   * [[OutOfOrderEventException]] rather than give a wrong count.
   */
  def add(ts: Long, weight: Long): Unit = {
    if ((weight & ~1L) != 0L) {
      throw new IllegalArgumentException(
        s"the time-ordered histogram counts events of weight 1, got weight $weight")
    }
    advanceTo(ts)
    if (weight != 0L && !isExpired(ts)) {
      if (ts < newestEventTs) throw new OutOfOrderEventException(ts, newestEventTs)
      addNewest(ts)
    }
  }

  /** Counts one event at `ts`, no older than any counted. */
  private def addNewest(ts: Long): Unit = {
    val size = ringSize(0)
    // Free: a level holds fewer than mergeAt buckets between rows.
    val free = wrap(ringStart(0) + size)
    newestTs(free) = ts
    oldestTs(free) = ts
    ringSize(0) = size + 1
    bucketTotal += 1
    newestEventTs = ts
    if (topLevel < 0) {
      topLevel = 0
      refreshEdge()
    }
    if (size + 1 == mergeAt) cascade()
  }

  /** Moves `now` to `ts` if it is later, and expires what left the window. */
  def advanceTo(ts: Long): Unit = {
    if (ts > nowTs || !seenAny) {
      nowTs = ts
      seenAny = true
      if (isExpired(edgeNewest) && topLevel >= 0) expire()
    }
  }

  /** The estimate: exact unless the oldest bucket straddles the window edge. */
  def estimate: Long =
    if (isExpired(edgeOldest)) bucketTotal - edgeHalfCount else bucketTotal

  /** A certified lower bound of the exact count. */
  def lowerBound: Long =
    if (oldestStraddles) bucketTotal - 2 * edgeHalfCount + 1 else bucketTotal

  /** A certified upper bound of the exact count. */
  def upperBound: Long =
    if (oldestStraddles) bucketTotal - 1 else bucketTotal

  /**
   * The estimate the seed's article computes, `ceil(total - last/2)`, kept for comparison
   * in tests and benchmarks only.
   */
  def seedEstimate: Long = bucketTotal - edgeHalfCount

  /**
   * A time-ordered histogram cannot merge: its bucket edges depend on the order it saw.
   * It serves running window frames, where Spark never merges; everything else uses
   * [[DyadicWindowSketch]].
   */
  def merge(other: WindowCountSketch): Unit =
    throw new UnsupportedOperationException(
      "the time-ordered exponential histogram cannot merge; use DyadicWindowSketch")

  /**
   * Visits the buckets from newest to oldest as (newest timestamp, oldest timestamp,
   * count); used by the binary format and by tests.
   */
  def foreachBucket(f: (Long, Long, Long) => Unit): Unit = {
    var level = 0
    while (level <= topLevel) {
      val count = 1L << level
      var i = ringSize(level) - 1
      while (i >= 0) {
        val s = slot(level, i)
        f(newestTs(s), oldestTs(s), count)
        i -= 1
      }
      level += 1
    }
  }

  /** Level sizes from level 0 up, for the binary format. */
  def levelSizes: Array[Int] = java.util.Arrays.copyOf(ringSize, topLevel + 1)

  /**
   * Rebuilds the state from decoded parts. `sizes(level)` buckets per level; `newest` and
   * `oldest` list the buckets from newest to oldest. The caller has validated them.
   */
  private[core] def restore(
      hasTime: Boolean, now: Long, sizes: Array[Int], newest: Array[Long],
      oldest: Array[Long]): Unit = {
    clear()
    seenAny = hasTime
    nowTs = now
    if (sizes.length > allocatedLevels) allocateLevels(sizes.length - 1, sizes.length) // once, as held
    var b = 0
    var level = 0
    while (level < sizes.length) {
      // Within a level, ring index 0 is the oldest; the input runs newest first.
      var i = sizes(level) - 1
      while (i >= 0) {
        val s = slot(level, i)
        newestTs(s) = newest(b)
        oldestTs(s) = oldest(b)
        b += 1
        i -= 1
      }
      ringStart(level) = 0
      ringSize(level) = sizes(level)
      bucketTotal += sizes(level).toLong << level
      level += 1
    }
    topLevel = sizes.length - 1
    if (newest.nonEmpty) newestEventTs = newest(0)
    refreshEdge()
  }

  private def clear(): Unit = {
    java.util.Arrays.fill(ringSize, 0)
    java.util.Arrays.fill(ringStart, 0)
    topLevel = -1
    bucketTotal = 0L
    newestEventTs = Long.MinValue
    refreshEdge()
  }

  /** now - ts >= window, with the difference taken as unsigned so it cannot overflow. */
  private def isExpired(ts: Long): Boolean =
    java.lang.Long.compareUnsigned(nowTs - ts, window) >= 0

  private def oldestStraddles: Boolean = edgeHalfCount != 0L && isExpired(edgeOldest)

  /** Drops the oldest buckets while their newest event is out of the window. */
  private def expire(): Unit = {
    do {
      val top = topLevel
      ringStart(top) = wrap(ringStart(top) + 1)
      ringSize(top) -= 1
      bucketTotal -= 1L << top
      if (ringSize(top) == 0) {
        ringStart(top) = 0
        topLevel = top - 1
      }
      refreshEdge()
    } while (topLevel >= 0 && isExpired(edgeNewest))
  }

  /** Re-reads the cached oldest bucket after the oldest bucket changed. */
  private def refreshEdge(): Unit =
    if (topLevel >= 0) {
      val s = topLevel * mergeAt + ringStart(topLevel)
      edgeNewest = newestTs(s)
      edgeOldest = oldestTs(s)
      edgeHalfCount = (1L << topLevel) >> 1
    } else {
      edgeHalfCount = 0L
    }

  /** Merges the two oldest buckets of each full level into the next level, cascading. */
  private def cascade(): Unit = {
    var level = 0
    do {
      mergeOldestPair(level)
      level += 1
    } while (ringSize(level) == mergeAt)
    // A merge at the top level made a new top: the oldest bucket is the merged one.
    if (level > topLevel) {
      topLevel = level
      refreshEdge()
    }
  }

  /** Moves the two oldest buckets of `level` into one, the newest of `level + 1`. */
  private def mergeOldestPair(level: Int): Unit = {
    ensureLevel(level + 1)
    val older = slot(level, 0)
    val newer = slot(level, 1)
    val up = slot(level + 1, ringSize(level + 1))
    newestTs(up) = newestTs(newer)
    oldestTs(up) = oldestTs(older)
    ringSize(level + 1) += 1
    ringStart(level) = wrap(ringStart(level) + 2)
    ringSize(level) -= 2
  }

  /** Flat index of the i-th oldest bucket of `level`. */
  private def slot(level: Int, i: Int): Int = level * mergeAt + wrap(ringStart(level) + i)

  /** A ring position below 2 * mergeAt brought into [0, mergeAt), without a division. */
  private def wrap(pos: Int): Int = if (pos >= mergeAt) pos - mergeAt else pos

  // Levels grow by doubling from one: a live key's histogram is made or read back every
  // micro-batch, and most hold a few events (four levels up front were most of that cost).
  private def ensureLevel(level: Int): Unit =
    if (level >= allocatedLevels) allocateLevels(level, math.max(level + 1, 2 * level))

  /** Room for levels up to `level`, allocating `wanted` levels (at most MaxLevels). */
  private def allocateLevels(level: Int, wanted: Int): Unit = {
    if (level >= ExponentialHistogram.MaxLevels) {
      throw new IllegalStateException(s"more than 2^${ExponentialHistogram.MaxLevels} events")
    }
    val levels = math.min(ExponentialHistogram.MaxLevels, wanted)
    newestTs = java.util.Arrays.copyOf(newestTs, levels * mergeAt)
    oldestTs = java.util.Arrays.copyOf(oldestTs, levels * mergeAt)
    ringStart = java.util.Arrays.copyOf(ringStart, levels)
    ringSize = java.util.Arrays.copyOf(ringSize, levels)
    allocatedLevels = levels
  }
}

object ExponentialHistogram {
  /** Bucket counts are powers of two below 2^62, so the total fits a long. */
  val MaxLevels = 62
  /** Below this eps a window's buckets would outnumber the events of most windows. */
  val MinEps = 1e-4

  def checkParameters(window: Long, eps: Double): Unit = {
    require(window > 0, s"window must be positive, got $window")
    require(eps >= MinEps && eps < 1.0, s"eps must be in [$MinEps, 1), got $eps")
  }
}

/** An interesting event arrived older than one already counted. */
final class OutOfOrderEventException(val ts: Long, val newest: Long)
  extends IllegalArgumentException(
    s"an event at ts=$ts arrived after an event at ts=$newest; this version counts events " +
      "that arrive in ascending time order only")

/** Two sketches of different window, eps or time axis. */
final class IncompatibleSketchException(a: WindowCountSketch, b: WindowCountSketch)
  extends IllegalArgumentException(
    s"cannot combine sketches of different parameters: ${IncompatibleSketchException.describe(a)}" +
      s" versus ${IncompatibleSketchException.describe(b)}")

object IncompatibleSketchException {
  private def describe(s: WindowCountSketch): String =
    s"window=${s.window} ${if (s.microsecondTime) "microseconds" else "positions"}, eps=${s.eps}"
}
