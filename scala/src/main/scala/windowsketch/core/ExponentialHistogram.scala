package windowsketch.core

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
 * Storage is one ring of `mergeAt` slots per level, each slot a run of identical buckets
 * (newest timestamp, oldest timestamp, how many); the global order is level 0 newest to
 * oldest, then level 1, and so on, so the oldest bucket is the oldest of the top level.
 * Runs let a weight w count as w events in work that depends on the runs a level holds,
 * not on its buckets (docs/ordered-sums.md). Inserts allocate nothing once the levels exist.
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
  // Per slot: a run of `runLength` buckets, each spanning oldestTs .. newestTs.
  private[this] var newestTs: Array[Long] = Array.emptyLongArray
  private[this] var oldestTs: Array[Long] = Array.emptyLongArray
  private[this] var runLength: Array[Long] = Array.emptyLongArray
  /** Per level: ring slot of its oldest run, its runs, and its buckets. */
  private[this] var ringStart: Array[Int] = Array.emptyIntArray
  private[this] var ringRuns: Array[Int] = Array.emptyIntArray
  private[this] var levelBuckets: Array[Int] = Array.emptyIntArray

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
    while (level <= topLevel) { n += levelBuckets(level); level += 1 }
    n
  }

  /** Sum of the counts of all buckets held (the oldest may straddle the window edge). */
  def total: Long = bucketTotal

  /**
   * Observes one row: moves `now` forward to `ts` (whether or not it is an event), expires
   * buckets that left the window and counts `weight` (>= 0) events at `ts`: a sum of
   * non-negative integers is a count of unit events, and a weight w leaves exactly the
   * state w single events at `ts` would, in O(log w) work when the levels hold few runs,
   * O(k log w) at most, instead of O(w) (docs/ordered-sums.md).
   *
   * An event older than the window is dropped. An event inside the window but older than
   * the newest one already counted cannot be placed in a time-ordered histogram: it throws
   * [[OutOfOrderEventException]] rather than give a wrong count.
   */
  def add(ts: Long, weight: Long): Unit = {
    if (weight < 0L) throw new IllegalArgumentException(s"negative weight $weight")
    advanceTo(ts)
    if (weight != 0L && !isExpired(ts)) {
      if (ts < newestEventTs) throw new OutOfOrderEventException(ts, newestEventTs)
      if (weight == 1L) addNewest(ts) else addMany(ts, weight)
    }
  }

  // Scratch for addMany: the runs carried into a level, oldest first, and those its pairs
  // send to the next level. Few: a level's own runs, plus one or two per run carried in.
  // Made on the first weighted insert: counts never need them.
  private[this] var carry: RunList = null
  private[this] var next: RunList = null

  /**
   * Counts `weight` events at `ts` as `weight` calls of [[addNewest]] would, level by level.
   * A level's buckets, oldest first, are its own, then the carried ones (at level 0, one run
   * of `weight` (ts, ts) buckets). Unit inserts would merge its oldest pairs each time it
   * reaches mergeAt: so the first 2 * pairs of that sequence pair up, in order, into the
   * next level's carried buckets, and the rest stay. Pairs inside a run are a run of the
   * same buckets, so the work is per run, never per bucket.
   */
  private def addMany(ts: Long, weight: Long): Unit = {
    if (bucketTotal > Long.MaxValue - weight) {
      throw new ArithmeticException("the sum of the window's values overflows BIGINT")
    }
    if (carry == null) { carry = new RunList; next = new RunList }
    carry.clear()
    carry.push(ts, ts, weight)
    var carried = weight
    var level = 0
    while (carried > 0) {
      ensureLevel(level)
      val total = levelBuckets(level) + carried
      next.clear()
      var kept = total
      if (total >= mergeAt) {
        val pairs = 1 + (total - mergeAt) / 2 // merges unit inserts would make here
        kept = total - 2 * pairs
        pairOff(level, 2 * pairs)
      }
      // What is left of the carried runs stays, after the level's own.
      var r = 0
      while (r < carry.size) {
        if (carry.length(r) > 0) append(level, carry.newest(r), carry.oldest(r), carry.length(r))
        r += 1
      }
      levelBuckets(level) = kept.toInt
      // The pairs are the next level's carried runs.
      val pairs = next; next = carry; carry = pairs
      carried = (total - kept) / 2
      level += 1
    }
    bucketTotal += weight
    newestEventTs = ts
    // The last level reached holds buckets; no level below a top ever empties.
    topLevel = math.max(topLevel, level - 1)
    refreshEdge()
  }

  /**
   * Takes the first `count` (even) buckets of `level`'s sequence, its own runs then the
   * carried ones, and pairs them in order into the next level's carried runs. A bucket left
   * without a partner at the end of a run pairs with the first of the next run.
   */
  private def pairOff(level: Int, count: Long): Unit = {
    var remaining = count
    var waiting = false // an older bucket, ending at waitingOldest, waits for its partner
    var waitingOldest = 0L
    var r = 0 // the next carried run, once the level's own are taken
    while (remaining > 0) {
      val own = ringRuns(level) > 0
      val s = if (own) slot(level, 0) else 0
      val newest = if (own) newestTs(s) else carry.newest(r)
      val oldest = if (own) oldestTs(s) else carry.oldest(r)
      val length = if (own) runLength(s) else carry.length(r)
      val taken = math.min(length, remaining)
      remaining -= taken
      var unpaired = taken
      if (waiting) {
        next.push(newest, waitingOldest, 1)
        unpaired -= 1
        waiting = false
      }
      if (unpaired >= 2) next.push(newest, oldest, unpaired / 2)
      if ((unpaired & 1L) == 1L) { waiting = true; waitingOldest = oldest }
      if (own) {
        if (taken == length) dropRuns(level, 1) else runLength(s) = length - taken
      } else {
        carry.length(r) = length - taken
        if (taken == length) r += 1
      }
    }
  }

  /**
   * Appends `length` buckets (newest, oldest) as the newest of `level`, joining its newest
   * run if that holds the same buckets. The caller counts them in levelBuckets.
   */
  private def append(level: Int, newest: Long, oldest: Long, length: Long): Unit = {
    val runs = ringRuns(level)
    if (runs > 0) {
      val last = slot(level, runs - 1)
      if (newestTs(last) == newest && oldestTs(last) == oldest) {
        runLength(last) += length
        return
      }
    }
    appendRun(level, newest, oldest, length)
  }

  /**
   * Appends a run as the newest of `level`, without joining: what unit inserts do, where
   * buckets of equal timestamps are rare and a check per insert would cost more than it
   * saves. Equal buckets in separate runs are the same state.
   */
  private def appendRun(level: Int, newest: Long, oldest: Long, length: Long): Unit = {
    val runs = ringRuns(level)
    val s = slot(level, runs)
    newestTs(s) = newest
    oldestTs(s) = oldest
    runLength(s) = length
    ringRuns(level) = runs + 1
  }

  /** Drops the `n` (1 or 2) oldest runs of `level`. */
  private def dropRuns(level: Int, n: Int): Unit = {
    ringStart(level) = wrap(ringStart(level) + n)
    ringRuns(level) -= n
  }

  /** Counts one event at `ts`, no older than any counted. */
  private def addNewest(ts: Long): Unit = {
    appendRun(0, ts, ts, 1L)
    val size = levelBuckets(0) + 1
    levelBuckets(0) = size
    bucketTotal += 1
    newestEventTs = ts
    if (topLevel < 0) {
      topLevel = 0
      refreshEdge()
    }
    // Between rows a level holds fewer than mergeAt buckets.
    if (size == mergeAt) cascade()
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
      var i = ringRuns(level) - 1
      while (i >= 0) {
        val s = slot(level, i)
        var b = runLength(s)
        while (b > 0) { f(newestTs(s), oldestTs(s), count); b -= 1 }
        i -= 1
      }
      level += 1
    }
  }

  /** Level sizes from level 0 up, for the binary format. */
  def levelSizes: Array[Int] = java.util.Arrays.copyOf(levelBuckets, topLevel + 1)

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
    var b = 0
    var level = 0
    while (level < sizes.length) {
      ensureLevel(level)
      // The input runs newest first; a level's runs are appended oldest first.
      var i = b + sizes(level) - 1
      while (i >= b) { append(level, newest(i), oldest(i), 1L); i -= 1 }
      b += sizes(level)
      levelBuckets(level) = sizes(level)
      bucketTotal += sizes(level).toLong << level
      level += 1
    }
    topLevel = sizes.length - 1
    if (newest.nonEmpty) newestEventTs = newest(0)
    refreshEdge()
  }

  private def clear(): Unit = {
    java.util.Arrays.fill(ringRuns, 0)
    java.util.Arrays.fill(ringStart, 0)
    java.util.Arrays.fill(levelBuckets, 0)
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
      // A run's buckets share their newest timestamp, so they leave together.
      val top = topLevel
      val length = runLength(slot(top, 0))
      dropRuns(top, 1)
      levelBuckets(top) -= length.toInt
      bucketTotal -= length << top
      if (ringRuns(top) == 0) topLevel = top - 1
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
    } while (levelBuckets(level) == mergeAt)
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
    val oldest = oldestTs(older)
    var newest = newestTs(older)
    if (runLength(older) >= 2) {
      // Both from the oldest run: the merged bucket spans what each of them does.
      runLength(older) -= 2
      if (runLength(older) == 0) dropRuns(level, 1)
    } else {
      val newer = slot(level, 1)
      newest = newestTs(newer)
      if (runLength(newer) == 1) dropRuns(level, 2) // unit inserts: runs of one bucket
      else {
        runLength(newer) -= 1
        dropRuns(level, 1)
      }
    }
    levelBuckets(level) -= 2
    appendRun(level + 1, newest, oldest, 1L)
    levelBuckets(level + 1) += 1
  }

  /** Flat index of the i-th oldest bucket of `level`. */
  private def slot(level: Int, i: Int): Int = level * mergeAt + wrap(ringStart(level) + i)

  /** A ring position below 2 * mergeAt brought into [0, mergeAt), without a division. */
  private def wrap(pos: Int): Int = if (pos >= mergeAt) pos - mergeAt else pos

  private def ensureLevel(level: Int): Unit = if (level >= allocatedLevels) allocateLevels(level)

  private def allocateLevels(level: Int): Unit = {
    if (level >= ExponentialHistogram.MaxLevels) {
      throw new IllegalStateException(s"more than 2^${ExponentialHistogram.MaxLevels} events")
    }
    val levels = math.min(ExponentialHistogram.MaxLevels, math.max(4, 2 * (level + 1)))
    newestTs = java.util.Arrays.copyOf(newestTs, levels * mergeAt)
    oldestTs = java.util.Arrays.copyOf(oldestTs, levels * mergeAt)
    runLength = java.util.Arrays.copyOf(runLength, levels * mergeAt)
    ringStart = java.util.Arrays.copyOf(ringStart, levels)
    ringRuns = java.util.Arrays.copyOf(ringRuns, levels)
    levelBuckets = java.util.Arrays.copyOf(levelBuckets, levels)
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

/** Runs of equal buckets (newest, oldest, how many), oldest first: addMany's scratch. */
private final class RunList {
  var newest: Array[Long] = new Array[Long](8)
  var oldest: Array[Long] = new Array[Long](8)
  var length: Array[Long] = new Array[Long](8)
  var size = 0

  def clear(): Unit = size = 0

  /** Appends a run, joining the newest if its buckets are the same. */
  def push(n: Long, o: Long, count: Long): Unit =
    if (size > 0 && newest(size - 1) == n && oldest(size - 1) == o) length(size - 1) += count
    else {
      if (size == newest.length) {
        newest = java.util.Arrays.copyOf(newest, 2 * size)
        oldest = java.util.Arrays.copyOf(oldest, 2 * size)
        length = java.util.Arrays.copyOf(length, 2 * size)
      }
      newest(size) = n
      oldest(size) = o
      length(size) = count
      size += 1
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
