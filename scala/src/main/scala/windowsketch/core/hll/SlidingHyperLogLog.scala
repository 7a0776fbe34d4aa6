package windowsketch.core
package hll

/**
 * Distinct values in the sliding window `(now - window, now]`: a HyperLogLog whose
 * registers each keep their list of future possible maxima (Chabchoub and Hebrail, 2010):
 * the (time, rank) pairs that no other pair of the register beats on both a later-or-equal
 * time and a greater-or-equal rank. Sorted by time, ranks strictly decrease, so a window
 * starting at s reads each register as the rank of its oldest pair inside the window:
 * exactly the register HyperLogLog would hold over that window's values.
 *
 * Values arrive as 64-bit hashes (the Spark layer uses Spark's own, as HyperLogLog++ does):
 * the top `p` bits choose the register, the rank is one more than the leading zeros of the
 * rest. Rows may come in any order, and two sketches merge register by register into what
 * one sketch fed both would hold. While rows come in time order (a running frame), the
 * sum over registers of 2^-value and the count of zero registers are kept up to date, with
 * a heap of registers by their oldest pair's time for expiry, so the estimate costs O(1)
 * amortized per row (O(log m) when a register's oldest pair changes); after the first row
 * out of order, or a merge, they are recomputed when asked (O(pairs)).
 *
 * A register's pairs live in a slot it gets with its first pair; slots grow with the
 * registers in use. A sketch of a few values (a GROUP BY key of ten rows) thus costs two
 * bytes a register plus its pairs, not the ~20 bytes a register of per-register arrays,
 * and the sums, merges and bytes run over its slots, not over every register.
 *
 * Before that, rows wait in a buffer of (time, register, rank) in arrival order, until
 * something reads the registers or more rows stay inside the window than the buffer holds:
 * a GROUP BY key whose window holds a few rows then costs two short arrays and no register
 * table. Settling replays the buffer into the registers, which then hold the pairs they
 * would hold had every row gone there: a register's pairs inside the window depend only on
 * the window's rows, and a row the buffer dropped had left the window.
 */
final class SlidingHyperLogLog(val window: Long, val rsd: Double) extends SketchAxis {
  require(window > 0, s"window must be positive, got $window")
  require(rsd >= SlidingHyperLogLog.MinRsd && rsd <= SlidingHyperLogLog.MaxRsd,
    s"rsd must be in [${SlidingHyperLogLog.MinRsd}, ${SlidingHyperLogLog.MaxRsd}], got $rsd")

  val p: Int = SlidingHyperLogLog.precision(rsd)
  val m: Int = 1 << p
  /** What the time axis counts, as for the count sketches: positions or microseconds. */
  var microsecondTime: Boolean = false

  // Rows not yet in the registers, in arrival order: each one's time, and its register and
  // rank as register << 8 | rank. Allocated with the first row; null once settled.
  private var pendingTimes: Array[Long] = null
  private var pendingCodes: Array[Int] = null
  private var pendingCount = 0
  private var settled = false

  // The register table, allocated when the buffer settles. Register j's slot plus one, 0
  // while it has never held a pair (m <= 2^14 fits a Char).
  private var slotOf: Array[Char] = _
  private var slotCount = 0
  // Per slot: its register, and its pairs in time order from `starts(s)` to `ends(s)`
  // (exclusive). Grown by doubling, up to m slots.
  private var slotRegister: Array[Int] = _
  private var times: Array[Array[Long]] = _
  private var ranks: Array[Array[Byte]] = _
  private var starts: Array[Int] = _
  private var ends: Array[Int] = _

  private var seenAny = false
  private var nowTs = 0L
  /** True while every row has come in time order: the running sums below are current. */
  private var ordered = true
  private var zInverse: Double = m.toDouble
  private var zeros: Int = m
  // While ordered: a min-heap of the slots that hold pairs, keyed by their oldest pair's
  // time, so expiry finds the next register to change in O(1) and fixes it in O(log m);
  // m entries at most, whatever the window holds.
  private var heap: Array[Int] = _
  private var heapKeys: Array[Long] = _ // each entry's oldest time, next to it for speed
  // Per slot, its heap position plus one; 0: not in the heap.
  private var heapPosition: Array[Int] = _
  private var heapSize = 0

  def hasTime: Boolean = seenAny
  def now: Long = nowTs
  /**
   * True while the rows wait in the buffer: the sketch then holds at most
   * [[SlidingHyperLogLog.bufferedBytesBound]].
   */
  def isBuffered: Boolean = !settled

  /**
   * True while the running register sums are current: every row came in time order, or
   * [[resumeInOrder]] took the order up again. Reads then cost O(1), not O(registers).
   */
  def isInOrder: Boolean = ordered

  /** Counts a value with hash `hash` at `ts`. */
  def add(ts: Long, hash: Long): Unit = {
    val j = (hash >>> (64 - p)).toInt
    val rank = (java.lang.Long.numberOfLeadingZeros((hash << p) | (1L << (p - 1))) + 1).toByte
    if (settled) addToRegisters(j, ts, rank) else addPending(j, ts, rank)
  }

  private def addPending(j: Int, ts: Long, rank: Byte): Unit = {
    if (!seenAny || ts > nowTs) { nowTs = ts; seenAny = true }
    if (isExpired(ts)) return
    if (pendingTimes == null) {
      pendingTimes = new Array[Long](SlidingHyperLogLog.PendingInitial)
      pendingCodes = new Array[Int](SlidingHyperLogLog.PendingInitial)
    } else if (pendingCount == pendingTimes.length) {
      dropExpiredPending()
      // Still over half full: grow, or past the buffer's limit settle. Either way the next
      // compaction is at least as many rows away as this one freed or added: O(1) a row.
      if (2 * pendingCount > pendingTimes.length) {
        if (pendingTimes.length >= SlidingHyperLogLog.pendingLimit(m)) {
          settle()
          addToRegisters(j, ts, rank)
          return
        }
        pendingTimes = java.util.Arrays.copyOf(pendingTimes, 2 * pendingTimes.length)
        pendingCodes = java.util.Arrays.copyOf(pendingCodes, pendingTimes.length)
      }
    }
    pendingTimes(pendingCount) = ts
    pendingCodes(pendingCount) = j << 8 | rank
    pendingCount += 1
  }

  private def dropExpiredPending(): Unit = {
    var kept = 0
    var i = 0
    while (i < pendingCount) {
      if (!isExpired(pendingTimes(i))) {
        pendingTimes(kept) = pendingTimes(i)
        pendingCodes(kept) = pendingCodes(i)
        kept += 1
      }
      i += 1
    }
    pendingCount = kept
  }

  /**
   * Moves the buffered rows into the registers (allocating them) by replaying them in
   * arrival order, then `now`. Every read of the registers, and every merge, settles first.
   */
  private def settle(): Unit = if (!settled) {
    settled = true
    slotOf = new Array[Char](m)
    slotRegister = new Array[Int](4)
    times = new Array[Array[Long]](4)
    ranks = new Array[Array[Byte]](4)
    starts = new Array[Int](4)
    ends = new Array[Int](4)
    heap = new Array[Int](8)
    heapKeys = new Array[Long](8)
    heapPosition = new Array[Int](4)
    val (now, hasTime) = (nowTs, seenAny)
    nowTs = 0L
    seenAny = false
    var i = 0
    while (i < pendingCount) {
      val code = pendingCodes(i)
      addToRegisters(code >>> 8, pendingTimes(i), code.toByte)
      i += 1
    }
    pendingTimes = null
    pendingCodes = null
    pendingCount = 0
    if (hasTime) advanceTo(now)
  }

  private def addToRegisters(j: Int, ts: Long, rank: Byte): Unit = {
    if (ordered && (!seenAny || ts >= nowTs)) {
      advanceTo(ts)
      if (!isExpired(ts)) appendNewest(j, ts, rank)
    } else {
      ordered = false
      advanceTo(ts)
      if (!isExpired(ts)) insert(j, ts, rank)
    }
  }

  /** Moves `now` to `ts` if it is later; while ordered, expires what left the window. */
  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) {
      nowTs = ts
      seenAny = true
      if (ordered && settled) expireOldest()
    }

  /** Adds `other`'s pairs; both must have the same window and precision. */
  def merge(other: SlidingHyperLogLog): Unit = {
    beginMerge(other.window, other.rsd, other.microsecondTime, other.nowTs, other.seenAny)
    if (other.settled) {
      var s = 0
      while (s < other.slotCount) {
        val j = other.slotRegister(s)
        var i = other.starts(s)
        while (i < other.ends(s)) { mergePair(j, other.times(s)(i), other.ranks(s)(i)); i += 1 }
        s += 1
      }
    } else {
      var i = 0
      while (i < other.pendingCount) {
        val code = other.pendingCodes(i)
        mergePair(code >>> 8, other.pendingTimes(i), code.toByte)
        i += 1
      }
    }
  }

  /** A merge's start, from the other sketch's parameters and now; then [[mergePair]]s. */
  private[core] def beginMerge(otherWindow: Long, otherRsd: Double, otherMicroseconds: Boolean,
      otherNow: Long, otherHasTime: Boolean): Unit = {
    if (otherWindow != window || otherRsd != rsd || otherMicroseconds != microsecondTime) {
      throw new IllegalArgumentException(
        s"cannot merge distinct-count sketches with different parameters: window $window, " +
          s"rsd $rsd and window $otherWindow, rsd $otherRsd")
    }
    if (settled) ordered = false
    if (otherHasTime) advanceTo(otherNow)
  }

  /**
   * One pair of a merged sketch, in any order (into the buffer while there is one). Pairs
   * inserted out of time order leave the running sums stale, so a merge ends the order:
   * the buffer may have settled within this merge with its replayed rows all in order.
   */
  private[core] def mergePair(j: Int, ts: Long, rank: Byte): Unit =
    if (!isExpired(ts)) {
      if (settled) {
        ordered = false
        insert(j, ts, rank)
      } else addPending(j, ts, rank)
    }

  /**
   * (sum over registers of 2^-value, number of zero registers) for the window ending at
   * `now`: what HyperLogLog's estimate is computed from.
   */
  def registerSums: (Double, Int) = {
    currentSums()
    (zInverse, zeros)
  }

  /** [[registerSums]]' first part, read without a tuple (a live key reads it every tick). */
  def inverseSum: Double = { currentSums(); zInverse }

  /** [[registerSums]]' second part, the registers at 0, read without a tuple. */
  def zeroRegisters: Int = { currentSums(); zeros }

  private def currentSums(): Unit = {
    settle()
    if (!ordered) recompute()
  }

  /**
   * [[registerSums]] for the window `(end - length, end]`, any `end` at or after `now` and
   * `length` up to the window: each register read at its oldest pair inside it, O(pairs).
   * What the sketch would hold had it seen only that window's values.
   */
  def registerSumsAt(end: Long, length: Long): (Double, Int) = {
    require(!seenAny || end >= nowTs, s"end $end is before the sketch's now $nowTs")
    require(length > 0 && length <= window, s"length must be in (0, $window], got $length")
    settle()
    var z = (m - slotCount).toDouble // registers that never held a pair: value 0
    var v = m - slotCount
    var s = 0
    while (s < slotCount) {
      var i = starts(s)
      while (i < ends(s) && java.lang.Long.compareUnsigned(end - times(s)(i), length) >= 0) i += 1
      val value = if (i < ends(s)) ranks(s)(i).toInt else 0
      z += SlidingHyperLogLog.inversePowers(value)
      if (value == 0) v += 1
      s += 1
    }
    (z, v)
  }

  /** The register values of the window ending at `now`, for tests and other estimators. */
  def registerValues: Array[Int] = {
    settle()
    val out = new Array[Int](m)
    var s = 0
    while (s < slotCount) {
      val i = firstInWindow(s)
      out(slotRegister(s)) = if (i < ends(s)) ranks(s)(i) else 0
      s += 1
    }
    out
  }

  /** True when no register holds a pair inside the window ending at `now`. */
  def windowIsEmpty: Boolean = zeroRegisters == m

  /**
   * Takes up the running sums and the expiry heap again, so rows that come in time order
   * from here on cost O(1) amortized, as if they always had (a live key's sketch read back
   * from its state, where each tick would otherwise recompute every register). Answers are
   * unchanged: the sums are exact.
   */
  def resumeInOrder(): Unit = {
    // A buffered sketch replays its pairs in the buffer's order, not in time order: settle
    // first, or the first read after the next add would leave it out of order for good.
    settle()
    if (!ordered) resumeSums()
  }

  private def resumeSums(): Unit = {
    recompute()
    heapSize = 0
    java.util.Arrays.fill(heapPosition, 0)
    var s = 0
    while (s < slotCount) { if (starts(s) < ends(s)) headChanged(s); s += 1 }
    ordered = true
  }

  /** Pairs held inside the window, a measure of the state's size. */
  def pairCount: Int = {
    settle()
    var n = 0
    var s = 0
    while (s < slotCount) { n += ends(s) - firstInWindow(s); s += 1 }
    n
  }

  /**
   * The pairs inside the window, register by register, for the binary format: from the
   * registers, or from the buffer without settling it (a GROUP BY key's sketch is written
   * once, so its register table would be garbage at once).
   */
  private[core] def windowPairs: DistinctPairs =
    if (settled) {
      val pairs = new DistinctPairs(slotCount)
      var j = 0
      while (j < m) {
        val s = slotOf(j) - 1
        if (s >= 0) {
          val first = firstInWindow(s)
          if (first < ends(s)) pairs.add(j, times(s), ranks(s), first, ends(s))
        }
        j += 1
      }
      pairs
    } else pendingPairs

  /**
   * A register's pairs from its buffered rows: the latest time of each rank, then from the
   * highest rank down each one later than every pair kept before it (a pair no row beats
   * on both a later-or-equal time and a greater-or-equal rank), so oldest first.
   */
  private def pendingPairs: DistinctPairs = {
    // Rows inside the window as register << 16 | row, sorted: grouped by register.
    val order = new Array[Int](pendingCount)
    var n = 0
    var i = 0
    while (i < pendingCount) {
      if (!isExpired(pendingTimes(i))) { order(n) = (pendingCodes(i) >>> 8) << 16 | i; n += 1 }
      i += 1
    }
    java.util.Arrays.sort(order, 0, n)
    val pairs = new DistinctPairs(n)
    val pairTimes = new Array[Long](n)
    val pairRanks = new Array[Byte](n)
    var kept = 0
    val latest = new Array[Long](SlidingHyperLogLog.maxPairs(p) + 1)
    val seen = new Array[Boolean](latest.length)
    var k = 0
    while (k < n) {
      val j = order(k) >>> 16
      var highest = 0
      while (k < n && (order(k) >>> 16) == j) {
        val row = order(k) & 0xFFFF
        val rank = pendingCodes(row) & 0xFF
        if (!seen(rank) || pendingTimes(row) > latest(rank)) latest(rank) = pendingTimes(row)
        seen(rank) = true
        highest = math.max(highest, rank)
        k += 1
      }
      val first = kept
      var rank = highest
      while (rank >= 1) {
        if (seen(rank)) {
          if (kept == first || latest(rank) > pairTimes(kept - 1)) {
            pairTimes(kept) = latest(rank)
            pairRanks(kept) = rank.toByte
            kept += 1
          }
          seen(rank) = false
        }
        rank -= 1
      }
      pairs.add(j, pairTimes, pairRanks, first, kept)
    }
    pairs
  }

  /** Outside the window ending at now (`ts` is never after now here). */
  private def isExpired(ts: Long): Boolean =
    java.lang.Long.compareUnsigned(nowTs - ts, window) >= 0

  /** The index of slot s's oldest pair inside the window (`ends(s)` if none). */
  private def firstInWindow(s: Int): Int = {
    var i = starts(s)
    while (i < ends(s) && isExpired(times(s)(i))) i += 1
    i
  }

  private def recompute(): Unit = {
    var z = (m - slotCount).toDouble
    var v = m - slotCount
    var s = 0
    while (s < slotCount) {
      dropExpired(s)
      val value = if (starts(s) < ends(s)) ranks(s)(starts(s)).toInt else 0
      z += SlidingHyperLogLog.inversePowers(value)
      if (value == 0) v += 1
      s += 1
    }
    zInverse = z
    zeros = v
  }

  private def value(s: Int): Int = if (starts(s) < ends(s)) ranks(s)(starts(s)) else 0

  private def setValue(s: Int, before: Int): Unit = {
    val after = value(s)
    if (after != before) {
      // Powers of two: these sums are exact, so updating them matches a fresh sum.
      zInverse += SlidingHyperLogLog.inversePowers(after) - SlidingHyperLogLog.inversePowers(before)
      if (before == 0) zeros -= 1
      if (after == 0) zeros += 1
    }
  }

  /** Drops slot s's pairs that left the window (they are its oldest). */
  private def dropExpired(s: Int): Unit = {
    val t = times(s)
    while (starts(s) < ends(s) && isExpired(t(starts(s)))) starts(s) += 1
  }

  private def expireOldest(): Unit =
    while (heapSize > 0 && isExpired(heapKeys(0))) {
      val s = heap(0)
      val before = value(s)
      dropExpired(s)
      setValue(s, before)
      headChanged(s)
    }

  /** Register j's slot, made with its first pair. */
  private def slotFor(j: Int): Int = {
    val existing = slotOf(j) - 1
    if (existing >= 0) existing
    else {
      val s = slotCount
      if (s == slotRegister.length) {
        val size = math.min(m, 2 * s)
        slotRegister = java.util.Arrays.copyOf(slotRegister, size)
        times = java.util.Arrays.copyOf(times, size)
        ranks = java.util.Arrays.copyOf(ranks, size)
        starts = java.util.Arrays.copyOf(starts, size)
        ends = java.util.Arrays.copyOf(ends, size)
        heapPosition = java.util.Arrays.copyOf(heapPosition, size)
      }
      slotRegister(s) = j
      slotOf(j) = (s + 1).toChar
      slotCount += 1
      s
    }
  }

  /** In time order: the new pair is the newest, and beats the tail pairs it out-ranks. */
  private def appendNewest(j: Int, ts: Long, rank: Byte): Unit = {
    val s = slotFor(j)
    val last = ends(s) - 1
    if (last >= starts(s) && times(s)(last) == ts && ranks(s)(last) >= rank) return
    val before = value(s)
    while (ends(s) > starts(s) && ranks(s)(ends(s) - 1) <= rank) ends(s) -= 1
    place(s, ends(s), ts, rank)
    setValue(s, before)
    if (ends(s) - starts(s) == 1) headChanged(s) // the new pair is the register's oldest
  }

  /** Any order: inserts (ts, rank) unless a pair at or after ts has a rank at least as high. */
  private def insert(j: Int, ts: Long, rank: Byte): Unit = {
    val s = slotFor(j)
    val t = times(s)
    var lo = starts(s)
    var hi = ends(s)
    while (lo < hi) { // the first pair at or after ts
      val mid = (lo + hi) >>> 1
      if (t(mid) < ts) lo = mid + 1 else hi = mid
    }
    if (lo < ends(s) && ranks(s)(lo) >= rank) return
    // Beaten by the new pair: the one at ts (lower rank), and the older ones with rank <= it.
    var keepUntil = lo
    while (keepUntil > starts(s) && ranks(s)(keepUntil - 1) <= rank) keepUntil -= 1
    val dropAfter = if (lo < ends(s) && times(s)(lo) == ts) lo + 1 else lo
    val removed = dropAfter - keepUntil
    if (removed > 0) {
      System.arraycopy(times(s), dropAfter, times(s), keepUntil, ends(s) - dropAfter)
      System.arraycopy(ranks(s), dropAfter, ranks(s), keepUntil, ends(s) - dropAfter)
      ends(s) -= removed
    }
    place(s, keepUntil, ts, rank)
  }

  /** Puts a pair at position i of slot s, shifting the later ones right. */
  private def place(s: Int, i: Int, ts: Long, rank: Byte): Unit = {
    if (times(s) == null) {
      times(s) = new Array[Long](4)
      ranks(s) = new Array[Byte](4)
    }
    if (ends(s) == times(s).length) {
      // Room first by dropping the gap left at the front by expiry, then by growing.
      val live = ends(s) - starts(s)
      val size = if (starts(s) > live) times(s).length else 2 * times(s).length
      val newTimes = new Array[Long](size)
      val newRanks = new Array[Byte](size)
      System.arraycopy(times(s), starts(s), newTimes, 0, live)
      System.arraycopy(ranks(s), starts(s), newRanks, 0, live)
      val shift = starts(s)
      times(s) = newTimes
      ranks(s) = newRanks
      starts(s) = 0
      ends(s) = live
      return place(s, i - shift, ts, rank)
    }
    System.arraycopy(times(s), i, times(s), i + 1, ends(s) - i)
    System.arraycopy(ranks(s), i, ranks(s), i + 1, ends(s) - i)
    times(s)(i) = ts
    ranks(s)(i) = rank
    ends(s) += 1
  }

  /** Slot s's oldest pair changed (or it has none left): its place in the heap too. */
  private def headChanged(s: Int): Unit = {
    val at = heapPosition(s) - 1
    if (starts(s) >= ends(s)) {
      if (at >= 0) {
        heapSize -= 1
        heapPosition(s) = 0
        if (at < heapSize) {
          heap(at) = heap(heapSize)
          heapKeys(at) = heapKeys(heapSize)
          heapPosition(heap(at)) = at + 1
          siftDown(siftUp(at))
        }
      }
    } else if (at < 0) {
      if (heapSize == heap.length) {
        heap = java.util.Arrays.copyOf(heap, math.min(m, 2 * heap.length))
        heapKeys = java.util.Arrays.copyOf(heapKeys, heap.length)
      }
      heap(heapSize) = s
      heapKeys(heapSize) = times(s)(starts(s))
      heapPosition(s) = heapSize + 1
      heapSize += 1
      siftUp(heapSize - 1)
    } else {
      heapKeys(at) = times(s)(starts(s))
      siftDown(siftUp(at))
    }
  }

  /** Moves the entry at `at` up while it is older than its parent; returns where it ends. */
  private def siftUp(at: Int): Int = {
    var i = at
    while (i > 0 && heapKeys(i) < heapKeys((i - 1) / 2)) {
      swap(i, (i - 1) / 2)
      i = (i - 1) / 2
    }
    i
  }

  private def siftDown(at: Int): Unit = {
    var i = at
    var done = false
    while (!done) {
      val left = 2 * i + 1
      var oldest = i
      if (left < heapSize && heapKeys(left) < heapKeys(oldest)) oldest = left
      if (left + 1 < heapSize && heapKeys(left + 1) < heapKeys(oldest)) oldest = left + 1
      if (oldest == i) done = true
      else { swap(i, oldest); i = oldest }
    }
  }

  private def swap(a: Int, b: Int): Unit = {
    val t = heap(a)
    heap(a) = heap(b)
    heap(b) = t
    val k = heapKeys(a)
    heapKeys(a) = heapKeys(b)
    heapKeys(b) = k
    heapPosition(heap(a)) = a + 1
    heapPosition(heap(b)) = b + 1
  }

  /** For the binary format: register j's pairs, read from bytes (`j` has no slot yet). */
  private[core] def restoreRegister(j: Int, t: Array[Long], r: Array[Byte], n: Int): Unit = {
    settle()
    val s = slotFor(j)
    times(s) = t
    ranks(s) = r
    starts(s) = 0
    ends(s) = n
  }

  /** For the binary format: restores a state read from bytes (any order from then on). */
  private[core] def restore(now: Long, hasTime: Boolean): Unit = {
    settle()
    nowTs = now
    seenAny = hasTime
    ordered = false
  }
}

/**
 * Registers holding pairs inside the window, ascending, each with its pairs oldest first:
 * `times(k)(from(k) until until(k))` and the same range of `ranks(k)`.
 */
private[core] final class DistinctPairs(capacity: Int) {
  var held = 0
  val registers = new Array[Int](capacity)
  val times = new Array[Array[Long]](capacity)
  val ranks = new Array[Array[Byte]](capacity)
  val from = new Array[Int](capacity)
  val until = new Array[Int](capacity)

  def add(register: Int, t: Array[Long], r: Array[Byte], start: Int, end: Int): Unit = {
    registers(held) = register
    times(held) = t
    ranks(held) = r
    from(held) = start
    until(held) = end
    held += 1
  }
}

object SlidingHyperLogLog {
  /** From 16,384 registers (p = 14) to 16 (p = 4, HyperLogLog++'s least). */
  val MinRsd = 0.01
  val MaxRsd = 0.39
  /** Ranks are 1 .. 65 - p, strictly decreasing along a register's pairs. */
  def maxPairs(p: Int): Int = 65 - p

  private val PendingInitial = 8

  /** Heap bytes of a sketch at precision p while its rows are buffered, at most: the
   * object and two buffers at their limit. */
  def bufferedBytesBound(p: Int): Long = 256L + 12L * pendingLimit(1 << p) + 64L
  /** Buffered rows at most: m / 8 rows of 12 bytes are under the register index's 2·m. */
  private def pendingLimit(m: Int): Int = math.max(16, m / 8)

  /** HyperLogLog++'s precision for `rsd`, as Spark's approx_count_distinct chooses it. */
  def precision(rsd: Double): Int = {
    // Remembered for the last rsd: each stored sketch read needs it, and two logs cost
    // about as much as reading a small sketch's header.
    val last = lastPrecision
    if (last.rsd == rsd) last.p
    else {
      val p = math.ceil(2.0 * math.log(1.106 / rsd) / math.log(2.0)).toInt
      lastPrecision = new RsdPrecision(rsd, p)
      p
    }
  }

  // Immutable, so threads that see another thread's entry see it whole.
  private final class RsdPrecision(val rsd: Double, val p: Int)
  private var lastPrecision = new RsdPrecision(Double.NaN, 0)

  def alphaM2(p: Int): Double = {
    val m = (1 << p).toDouble
    p match {
      case 4 => 0.673 * m * m
      case 5 => 0.697 * m * m
      case 6 => 0.709 * m * m
      case _ => (0.7213 / (1.0 + 1.079 / m)) * m * m
    }
  }

  private[core] val inversePowers: Array[Double] = Array.tabulate(66)(r => math.pow(2.0, -r))
}
