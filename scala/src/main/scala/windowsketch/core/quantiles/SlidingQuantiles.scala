package windowsketch.core
package quantiles

import windowsketch.core.count.ExponentialHistogram

/**
 * Percentiles of a sliding window (design and guarantees: docs/percentiles.md).
 *
 * In exact mode it holds every non-NULL value of the window with its time, so each answer is the value
 * Spark's `percentile_approx` gives over exactly the window's rows (rank error 0, which is
 * within any eps). Rows come in any order and sketches merge; the window is
 * `(now - window, now]`, `now` being the largest time seen, as for the count sketches.
 *
 * Two paths, one state:
 *  - in time order (a running frame ordered by `ts`) the values of the window are kept
 *    sorted as rows arrive and leave ([[SortedBlocks]]), so a row costs amortized
 *    O(log n + n / 32768) and a query O(log n);
 *  - once a row has arrived out of order or a sketch has been merged in, the ring is no
 *    longer in time order, so whenever `now` moves the sorted view is dropped and rebuilt
 *    on the next query (a sort of the window's values). Rows that do not move `now` (a
 *    descending frame's) still go straight into the view: O(log n) each.
 *
 * Past [[CompactQuantiles.exactLimit]] values (4,096 at eps 0.01; and whenever a compact
 * sketch is merged in) it turns into the compact mode ([[CompactQuantiles]]) for good: a
 * summary of the window with a stated rank error instead of its rows, so memory is set by
 * eps, not by the window (docs/percentiles.md, "Compact mode").
 */
final class SlidingQuantiles(val window: Long, val eps: Double,
    /** The most values held exactly; one more turns the sketch compact. */
    val exactLimit: Int) extends SketchAxis with LivePercentilesWindow {
  ExponentialHistogram.checkParameters(window, eps)

  def this(window: Long, eps: Double) = this(window, eps, CompactQuantiles.exactLimit(eps))

  var microsecondTime = false

  /** The compact mode's [[CompactQuantiles.pendingPerNode]]. */
  var compactPendingPerNode = 1

  // Every row not yet expired, in arrival order: a ring of (time, value).
  private var times = Array.emptyLongArray
  private var values = Array.emptyDoubleArray
  private var head = 0
  private var held = 0

  // The values of the window, ascending; valid only while `sortedValid`.
  private val sorted = new SortedBlocks
  private var sortedValid = true
  // True while every held row arrived in time order: then the ring's head is its oldest.
  private var inOrder = true

  private var seenAny = false
  private var nowTs = 0L

  // The compact mode: once set, it holds the window and the fields above stay empty.
  private var compactWindow: CompactQuantiles = null

  def hasTime: Boolean = if (compactWindow != null) compactWindow.hasTime else seenAny
  def now: Long = if (compactWindow != null) compactWindow.now else nowTs

  /** True once the window is held as a summary rather than as its rows. */
  def isCompact: Boolean = compactWindow != null

  /** The compact mode's summary (null in exact mode). */
  def compact: CompactQuantiles = compactWindow

  /** Rows held, including expired ones a merge or an out-of-order row left behind. */
  def heldCount: Int = held

  /** True when the window holds no value. */
  def isEmpty: Boolean = count == 0L

  /** The state a live key keeps ([[SketchFormat.writeLiveQuantiles]]). */
  private[core] def writeTo(out: ByteWriter): Unit = SketchFormat.writeLiveQuantiles(out, this)

  /** Moves `now` forward without a value (a row whose value is NULL). */
  def advanceTo(ts: Long): Unit =
    if (compactWindow != null) compactWindow.advanceTo(ts)
    else if (!seenAny || ts > nowTs) {
      nowTs = ts
      seenAny = true
      // Out of order the ring's head need not be its oldest row: rebuild on the next query.
      if (inOrder) expireInOrder() else sortedValid = false
    }

  /**
   * Adds `value` at time `ts`, in any order. Values rank in Spark's order for doubles
   * (`java.lang.Double.compare`: -0.0 before 0.0, NaN after everything).
   */
  def add(ts: Long, value: Double): Unit = {
    if (compactWindow != null) { compactWindow.add(ts, value); return }
    val ordered = !seenAny || ts >= nowTs
    advanceTo(ts)
    if (!inWindow(ts)) return
    if (held >= exactLimit) {
      if (!inOrder) compactExpired() // out of order, expired rows may still be held
      if (held >= exactLimit) { toCompact(); compactWindow.add(ts, value); return }
    }
    // Behind now: the window is the same, so the view takes the row; only the ring's order
    // is lost, which matters when now next moves.
    if (!ordered) inOrder = false
    append(ts, value)
    if (sortedValid) sorted.insert(value)
  }

  def merge(other: SlidingQuantiles): Unit = {
    if (other.window != window || other.eps != eps || other.microsecondTime != microsecondTime) {
      throw new IllegalArgumentException(
        s"cannot merge percentile sketches of (window, eps) ($window, $eps) and " +
          s"(${other.window}, ${other.eps})" +
          (if (other.microsecondTime != microsecondTime) " on different time axes" else ""))
    }
    if (compactWindow == null && other.compactWindow == null) {
      if (other.seenAny) advanceTo(other.nowTs)
      compactExpired()
      // The union's rows in the merged window decide, so a reader counting them (the
      // Python reader) switches at the same merge.
      var incoming = 0
      other.foreachInWindow((t, _) => if (inWindow(t)) incoming += 1)
      if (held.toLong + incoming <= exactLimit) { appendInWindow(other); return }
    }
    toCompact()
    if (other.compactWindow != null) compactWindow.merge(other.compactWindow)
    else {
      if (other.seenAny) compactWindow.advanceTo(other.nowTs)
      other.replayInto(compactWindow)
    }
  }

  /** Adds `other`'s rows that lie in this window (exact mode, `now` already merged). */
  private def appendInWindow(other: SlidingQuantiles): Unit = {
    var i = 0
    while (i < other.held) {
      val j = other.slot(i)
      if (inWindow(other.times(j))) append(other.times(j), other.values(j))
      i += 1
    }
    if (other.held > 0) { inOrder = false; sortedValid = false }
  }

  /**
   * The number of non-NULL values in the window; in compact mode the middle of the range
   * the summary certifies (0 only for an empty window).
   */
  def count: Long =
    if (compactWindow != null) compactWindow.answer(Array.emptyDoubleArray).count
    else { ensureSorted(); sorted.size }

  /**
   * Each percentage's answer for the window ending at now, with its bounds: the exact
   * percentile three times in exact mode, [[CompactAnswer]]'s in compact mode. Null when
   * the window holds no value.
   */
  def answers(ps: Array[Double]): CompactAnswer =
    if (compactWindow != null) compactWindow.answer(ps)
    else {
      ensureSorted()
      if (sorted.size == 0) null
      else {
        val exact = ps.map(quantile)
        val found = Array.fill(ps.length)(true)
        new CompactAnswer(exact, exact, exact, found, found, sorted.size, 0L, 0L, 0.0)
      }
    }

  /**
   * Each percentage's answer for the window ending at now, without bounds ([[answers]]'
   * estimates, cheaper in compact mode); null when the window holds no value.
   */
  def estimates(ps: Array[Double]): Array[Double] =
    if (compactWindow != null) {
      val a = compactWindow.answer(ps, bounds = false)
      if (a.estimates.isEmpty) null else a.estimates
    } else {
      ensureSorted()
      if (sorted.size == 0) null else ps.map(quantile)
    }

  /** The compact mode from here on: the window's rows go into a [[CompactQuantiles]]. */
  def toCompact(): Unit =
    if (compactWindow == null) {
      val c = new CompactQuantiles(window, eps)
      c.microsecondTime = microsecondTime
      c.pendingPerNode = compactPendingPerNode
      if (seenAny) c.advanceTo(nowTs)
      replayInto(c)
      compactWindow = c
      times = Array.emptyLongArray
      values = Array.emptyDoubleArray
      head = 0
      held = 0
      sorted.clear()
    }

  /**
   * Adds the window's rows to `c` in time order, equal times by value, so the summary
   * depends on the rows only (not on the order they came in): the Python reader replays
   * them alike.
   */
  private def replayInto(c: CompactQuantiles): Unit = {
    val rows = new Array[Long](held)
    val rowValues = new Array[Double](held)
    var n = 0
    foreachInWindow { (t, v) => rows(n) = t; rowValues(n) = v; n += 1 }
    SlidingQuantiles.inTimeOrder(rows, rowValues, n).foreach(i => c.add(rows(i), rowValues(i)))
  }

  /**
   * Spark's percentile of the window's values: the value at 1-based rank ceil(p n) of the
   * ascending values (the smallest for p = 0), as `percentile_approx` answers when its
   * summary holds every value. NaN when the window holds no value.
   */
  def quantile(p: Double): Double = {
    require(p >= 0 && p <= 1, s"percentage must be in [0, 1], got $p")
    if (compactWindow != null) {
      val a = compactWindow.answer(Array(p))
      return if (a.estimates.isEmpty) Double.NaN else a.estimates(0)
    }
    ensureSorted()
    if (sorted.size == 0) Double.NaN
    else sorted.select(SlidingQuantiles.rankIndex(p, sorted.size))
  }

  /**
   * Spark's percentiles (as [[quantile]]) of the values in the sub-window
   * `(end - length, end]`, for a sketch column queried at `end >= now`; null when that
   * sub-window holds no value. A sort of the sub-window's values.
   */
  def quantilesAt(ps: Array[Double], end: Long, length: Long): Array[Double] = {
    if (compactWindow != null) {
      val a = compactWindow.answerAt(ps, end, length)
      return if (a.estimates.isEmpty) null else a.estimates
    }
    val inside = new Array[Double](held)
    var n = 0
    foreachInWindow { (t, v) =>
      if (java.lang.Long.compareUnsigned(end - t, length) < 0) { inside(n) = v; n += 1 }
    }
    if (n == 0) return null
    java.util.Arrays.sort(inside, 0, n)
    ps.map(p => inside(SlidingQuantiles.rankIndex(p, n)))
  }

  /**
   * Loads a state read from bytes: rows in time order (ascending), all in the window of
   * `now`. The sorted view is built on the first query.
   */
  def restore(hasTime: Boolean, now: Long, rowTimes: Array[Long], rowValues: Array[Double],
      n: Int): Unit = {
    seenAny = hasTime
    nowTs = now
    times = rowTimes
    values = rowValues
    head = 0
    held = n
    inOrder = true
    sortedValid = false
  }

  /** The rows held with times in the window, in arrival order: for formats and tests. */
  def foreachInWindow(f: (Long, Double) => Unit): Unit = {
    var i = 0
    while (i < held) {
      val j = slot(i)
      if (inWindow(times(j))) f(times(j), values(j))
      i += 1
    }
  }

  private def slot(i: Int): Int = {
    val j = head + i
    if (j >= times.length) j - times.length else j
  }

  /** True if `ts` lies in `(now - window, now]` (or after now). */
  private def inWindow(ts: Long): Boolean =
    ts > nowTs || java.lang.Long.compareUnsigned(nowTs - ts, window) < 0

  private def append(ts: Long, value: Double): Unit = {
    if (held == times.length) grow()
    val j = slot(held)
    times(j) = ts
    values(j) = value
    held += 1
  }

  private def grow(): Unit = {
    // Out of order, expired rows wait here until a query compacts them: compact first.
    if (!inOrder && held > 0) compactExpired()
    if (held < times.length) return
    val n = math.max(16, 2 * times.length)
    val t = new Array[Long](n)
    val v = new Array[Double](n)
    var i = 0
    while (i < held) { val j = slot(i); t(i) = times(j); v(i) = values(j); i += 1 }
    times = t
    values = v
    head = 0
  }

  /** In time order the ring's head is its oldest row: pop what left the window. */
  private def expireInOrder(): Unit =
    while (held > 0 && !inWindow(times(head))) {
      if (sortedValid) sorted.remove(values(head))
      head = if (head + 1 == times.length) 0 else head + 1
      held -= 1
    }

  /** Drops expired rows held after an out-of-order row or a merge, keeping arrival order. */
  private def compactExpired(): Unit = {
    var kept = 0
    var i = 0
    val t = new Array[Long](times.length)
    val v = new Array[Double](times.length)
    while (i < held) {
      val j = slot(i)
      if (inWindow(times(j))) { t(kept) = times(j); v(kept) = values(j); kept += 1 }
      i += 1
    }
    times = t
    values = v
    head = 0
    held = kept
  }

  private def ensureSorted(): Unit =
    if (!sortedValid) {
      compactExpired()
      val ascending = new Array[Double](held)
      var i = 0
      while (i < held) { ascending(i) = values(slot(i)); i += 1 }
      java.util.Arrays.sort(ascending)
      sorted.load(ascending, held)
      sortedValid = true
      // In-order rows that follow keep this view (inserted as they come) until `now` moves.
    }
}

object SlidingQuantiles {
  /**
   * A window held only in memory and answered at every row (a running frame ordered by
   * its time): exact to [[CompactQuantiles.orderedExactLimit]], then compact, compressing
   * at [[CompactQuantiles.InMemoryPendingPerNode]].
   */
  def inMemoryOnly(window: Long, eps: Double): SlidingQuantiles = {
    val s = new SlidingQuantiles(window, eps, CompactQuantiles.orderedExactLimit(eps))
    s.compactPendingPerNode = CompactQuantiles.InMemoryPendingPerNode
    s
  }

  /**
   * The most rows the exact form's bytes may hold: the exact limit was once 16 / eps^2 (up
   * to 2^24), and bytes written then keep reading.
   */
  val MaxValues: Int = 1 << 24

  /** A sketch in compact mode holding `summary` (read from bytes). */
  def ofCompact(summary: CompactQuantiles): SlidingQuantiles = {
    val s = new SlidingQuantiles(summary.window, summary.eps)
    s.microsecondTime = summary.microsecondTime
    s.compactWindow = summary
    s
  }

  /** The indices of the n rows by time, then value (`Double.compare`). */
  private def inTimeOrder(times: Array[Long], values: Array[Double], n: Int): Array[Int] = {
    val boxed = Array.range(0, n).map(Int.box)
    java.util.Arrays.sort(boxed, new java.util.Comparator[Integer] {
      def compare(a: Integer, b: Integer): Int = {
        val c = java.lang.Long.compare(times(a), times(b))
        if (c != 0) c else java.lang.Double.compare(values(a), values(b))
      }
    })
    boxed.map(_.intValue)
  }

  /** The 0-based index of Spark's percentile among n ascending values: ceil(p n) - 1. */
  def rankIndex(p: Double, n: Int): Int = math.max(math.ceil(p * n).toLong - 1, 0L).toInt

  /** The first index in `a(0 until n)` whose value is greater than `value`. */
  private[core] def upperBound(a: Array[Double], n: Int, value: Double): Int = {
    var lo = 0
    var hi = n
    while (lo < hi) {
      val mid = (lo + hi) >>> 1
      if (java.lang.Double.compare(a(mid), value) <= 0) lo = mid + 1 else hi = mid
    }
    lo
  }
}

/**
 * A multiset of doubles in `java.lang.Double.compare` order, kept as sorted blocks of at
 * most [[SortedBlocks.Capacity]] values with a Fenwick tree over the block sizes: insert
 * and remove cost a binary search over the blocks' largest values and a move of at most
 * one block, the k-th value O(log n). A block that fills splits in two and one that empties
 * goes: no block is empty, and a FIFO window keeps them about half full.
 */
private[core] final class SortedBlocks {
  import SortedBlocks.Capacity

  private var blocks = new Array[Array[Double]](8)
  private var sizes = new Array[Int](8)
  private var largest = new Array[Double](8) // each block's last value, for the search
  private var fenwick = new Array[Int](9)    // 1-based prefix sums of `sizes`
  private var blockCount = 0
  private var total = 0

  def size: Int = total

  /** Empties it and lets its blocks go: an insert after allocates its own. */
  def clear(): Unit = {
    java.util.Arrays.fill(blocks.asInstanceOf[Array[AnyRef]], 0, blockCount, null)
    blockCount = 0
    total = 0
  }

  /** Replaces the contents with `sorted(0 until n)`, ascending. */
  def load(sorted: Array[Double], n: Int): Unit = {
    clear()
    var from = 0
    while (from < n) {
      val m = math.min(Capacity / 2, n - from)
      val block = new Array[Double](Capacity)
      System.arraycopy(sorted, from, block, 0, m)
      insertBlock(blockCount, block, m)
      from += m
    }
    total = n
    rebuildFenwick()
  }

  def insert(value: Double): Unit = {
    if (blockCount == 0) {
      insertBlock(0, new Array[Double](Capacity), 0)
      rebuildFenwick()
    }
    val b = math.min(firstBlockNotBelow(value), blockCount - 1)
    val block = blocks(b)
    val at = SlidingQuantiles.upperBound(block, sizes(b), value)
    System.arraycopy(block, at, block, at + 1, sizes(b) - at)
    block(at) = value
    sizes(b) += 1
    largest(b) = block(sizes(b) - 1)
    total += 1
    if (sizes(b) == Capacity) split(b) else addToFenwick(b, 1)
  }

  /** Removes one copy of `value`, which must be present. */
  def remove(value: Double): Unit = {
    val b = firstBlockNotBelow(value)
    val block = blocks(b)
    val at = SlidingQuantiles.upperBound(block, sizes(b), value) - 1
    System.arraycopy(block, at + 1, block, at, sizes(b) - at - 1)
    sizes(b) -= 1
    total -= 1
    if (sizes(b) == 0) {
      System.arraycopy(blocks, b + 1, blocks, b, blockCount - b - 1)
      System.arraycopy(sizes, b + 1, sizes, b, blockCount - b - 1)
      System.arraycopy(largest, b + 1, largest, b, blockCount - b - 1)
      blockCount -= 1
      rebuildFenwick()
    } else {
      largest(b) = block(sizes(b) - 1)
      addToFenwick(b, -1)
    }
  }

  /** The value at 0-based rank `k` < size. */
  def select(k: Int): Double = {
    // Fenwick descent: the block holding rank k, and k's offset in it.
    var position = 0
    var rest = k
    var step = Integer.highestOneBit(math.max(1, blockCount))
    while (step > 0) {
      val next = position + step
      if (next <= blockCount && fenwick(next) <= rest) {
        position = next
        rest -= fenwick(next)
      }
      step >>>= 1
    }
    blocks(position)(rest)
  }

  /** How many values are at most `value` (`Double.compare` order). */
  def countAtMost(value: Double): Int = {
    val b = firstBlockAbove(value)
    if (b == blockCount) total else prefix(b) + SlidingQuantiles.upperBound(blocks(b), sizes(b), value)
  }

  /** How many values are below `value`. */
  def countBelow(value: Double): Int = {
    val b = firstBlockNotBelow(value)
    if (b == blockCount) total else prefix(b) + HeldValues.lowerBound(blocks(b), sizes(b), value)
  }

  /** The sizes of blocks [0, b). */
  private def prefix(b: Int): Int = {
    var sum = 0
    var i = b
    while (i > 0) { sum += fenwick(i); i -= i & -i }
    sum
  }

  /** The first block whose largest value is > `value` (blockCount if none). */
  private def firstBlockAbove(value: Double): Int = {
    var lo = 0
    var hi = blockCount
    while (lo < hi) {
      val mid = (lo + hi) >>> 1
      if (java.lang.Double.compare(largest(mid), value) <= 0) lo = mid + 1 else hi = mid
    }
    lo
  }

  /** The first block whose largest value is >= `value` (blockCount if none). */
  private def firstBlockNotBelow(value: Double): Int = {
    var lo = 0
    var hi = blockCount
    while (lo < hi) {
      val mid = (lo + hi) >>> 1
      if (java.lang.Double.compare(largest(mid), value) < 0) lo = mid + 1 else hi = mid
    }
    lo
  }

  private def split(b: Int): Unit = {
    val block = blocks(b)
    val half = Capacity / 2
    val upper = new Array[Double](Capacity)
    System.arraycopy(block, half, upper, 0, Capacity - half)
    sizes(b) = half
    largest(b) = block(half - 1)
    insertBlock(b + 1, upper, Capacity - half)
    rebuildFenwick()
  }

  private def insertBlock(at: Int, block: Array[Double], n: Int): Unit = {
    if (blockCount == blocks.length) {
      val grown = 2 * blocks.length
      blocks = java.util.Arrays.copyOf(blocks, grown)
      sizes = java.util.Arrays.copyOf(sizes, grown)
      largest = java.util.Arrays.copyOf(largest, grown)
    }
    System.arraycopy(blocks, at, blocks, at + 1, blockCount - at)
    System.arraycopy(sizes, at, sizes, at + 1, blockCount - at)
    System.arraycopy(largest, at, largest, at + 1, blockCount - at)
    blocks(at) = block
    sizes(at) = n
    if (n > 0) largest(at) = block(n - 1)
    blockCount += 1
  }

  private def rebuildFenwick(): Unit = {
    if (fenwick.length < blockCount + 1) fenwick = new Array[Int](blocks.length + 1)
    java.util.Arrays.fill(fenwick, 0, blockCount + 1, 0)
    var i = 1
    while (i <= blockCount) {
      fenwick(i) += sizes(i - 1)
      val parent = i + (i & -i)
      if (parent <= blockCount) fenwick(parent) += fenwick(i)
      i += 1
    }
  }

  private def addToFenwick(b: Int, delta: Int): Unit = {
    var i = b + 1
    while (i <= blockCount) { fenwick(i) += delta; i += i & -i }
  }
}

private[core] object SortedBlocks {
  /** Values a block holds at most: small enough that moving one is cheap. */
  val Capacity = 256
}
