package windowsketch.core
package sampling

import windowsketch.core.frequencies.ItemCounts

/**
 * A row of a sample's window: its time, its value's bytes, its priority and how many rows
 * had exactly this time and these bytes (they share the priority and are kept together).
 */
final class SampledRow(val ts: Long, val value: Array[Byte], val priority: Long, var copies: Long)

/**
 * A uniform random sample of `k` rows of the sliding window `(now - window, now]`, rows in
 * any order, sketches mergeable (design, guarantee and proof: docs/sampling.md).
 *
 * Priority sampling over a moving window (Babcock, Datar and Motwani, SODA 2002): each row
 * has a priority, a seeded 64-bit hash of its time and value ([[SlidingSample.priority]]),
 * and the sample of a window is its `k` rows of highest rank ([[SlidingSample.rankOrder]]).
 * A row is *dominated* when `k` rows at its time or later rank above it: every window that
 * holds it holds them, so it can never be sampled and is dropped. What is left is the
 * window's rows that fewer than `k` rows dominate, O(k log(n / k)) of them in expectation,
 * the same set whatever the rows' order, the partitioning or the order of merges, so the
 * sample of every window ending at `now` or later (any sub-window) is exact.
 *
 * Rows equal in both time and value share one priority (the hash sees only those), so they
 * are held as one [[SampledRow]] with its copies and enter or leave a sample together.
 */
final class SlidingSample(val window: Long, val k: Int, val seed: Long) extends SketchAxis {
  require(window > 0, s"window must be positive: $window")
  require(k >= 1 && k <= SlidingSample.MaxK, s"k must be in [1, ${SlidingSample.MaxK}]: $k")

  var microsecondTime = false

  /** The values' type, as the aggregate names it (Spark's catalog string); kept with the bytes. */
  var itemType: String = ""

  private var seenAny = false
  private var nowTs = 0L

  // Rows held, in arrival order (time order for in-order rows), some maybe dominated or
  // expired until the next prune.
  private var rows = new Array[SampledRow](16)
  private var held = 0
  private var pruneAt = 16

  // The current window's sample as a min-heap by rank, with its rows' copies, and the
  // oldest time in it: valid until a member leaves the window or a merge. Made when a sample
  // is first asked for (a GROUP BY's partial buffers never are), then kept as rows arrive.
  private var answer: java.util.PriorityQueue[SampledRow] = null
  private var answerCopies = 0L
  private var answerOldest = Long.MaxValue
  private var answerValid = false
  // The answer as `sample` lists it, until the heap changes: a running frame reads it per row.
  private var listedAnswer: Array[SampledRow] = null

  def hasTime: Boolean = seenAny
  def now: Long = nowTs

  /** Rows held (each with its copies), dominated or expired ones included until a prune. */
  def heldCount: Int = held

  /** Moves `now` forward without a row (a row whose value is NULL). */
  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) {
      nowTs = ts
      seenAny = true
      if (answerValid && answerOldest != Long.MaxValue && !inWindow(answerOldest)) answerValid = false
    }

  /** Adds one row: its time and its value's canonical bytes. */
  def add(ts: Long, value: Array[Byte]): Unit = add(ts, value, 1L)

  private def add(ts: Long, value: Array[Byte], copies: Long): Unit = {
    advanceTo(ts)
    if (!inWindow(ts)) return
    val row = new SampledRow(ts, value, SlidingSample.priority(seed, ts, value), copies)
    append(row)
    if (answerValid) offer(row)
    if (held >= pruneAt) prune()
  }

  def merge(other: SlidingSample): Unit = {
    if (other.window != window || other.k != k || other.seed != seed ||
      other.microsecondTime != microsecondTime || other.itemType != itemType) {
      throw new IllegalArgumentException(
        s"cannot merge sample sketches of (window, k, seed, values) ($window, $k, $seed, " +
          s"${describeType(itemType)}) and (${other.window}, ${other.k}, ${other.seed}, " +
          s"${describeType(other.itemType)})" +
          (if (other.microsecondTime != microsecondTime) " on different time axes" else ""))
    }
    if (other.seenAny) advanceTo(other.nowTs)
    var i = 0
    while (i < other.held) {
      val r = other.rows(i)
      if (inWindow(r.ts)) append(new SampledRow(r.ts, r.value, r.priority, r.copies))
      i += 1
    }
    answerValid = false
    prune()
  }

  private def describeType(t: String): String = if (t.isEmpty) "unknown" else t

  /**
   * The sample of the window's rows: up to `k` values (their bytes; a row's copies may all
   * be in it), ascending by time, then by bytes ([[ItemCounts.compare]]).
   */
  def sample: Array[SampledRow] = {
    if (!answerValid) rebuildAnswer()
    if (listedAnswer == null) listedAnswer = SlidingSample.listed(answer.toArray(new Array[SampledRow](0)), k)
    listedAnswer
  }

  /**
   * The sample of the window `(end - length, end]` for any `length` up to `window` and any
   * `end` from `now` on, of at most `count` (<= k) values: exact, since the rows dropped are
   * dominated in every window that holds them.
   */
  def sampleAt(end: Long, length: Long, count: Int): Array[SampledRow] = {
    require(length > 0 && length <= window, s"sub-window $length must be in [1, $window]")
    require(!seenAny || end >= nowTs, s"the window must end at or after now ($nowTs), not $end")
    require(count >= 1 && count <= k, s"count $count must be in [1, $k]")
    val best = new java.util.PriorityQueue[SampledRow](SlidingSample.rankOrder)
    var copies = 0L
    var i = 0
    while (i < held) {
      val r = rows(i)
      if (r.ts <= end && java.lang.Long.compareUnsigned(end - r.ts, length) < 0) {
        copies = SlidingSample.offer(best, copies, r, count)
      }
      i += 1
    }
    SlidingSample.listed(best.toArray(new Array[SampledRow](0)), count)
  }

  /**
   * Drops the expired rows and the dominated ones, and joins rows equal in time and value:
   * afterwards the rows are the window's undominated ones, ascending by time, then by rank.
   */
  def prune(): Unit = {
    val inside = new Array[SampledRow](held)
    var n = 0
    var i = 0
    while (i < held) {
      if (inWindow(rows(i).ts)) { inside(n) = rows(i); n += 1 }
      i += 1
    }
    // Newest first, higher rank first within a time: each row meets every row that could
    // dominate it before itself, rows equal in time and value side by side.
    java.util.Arrays.sort(inside, 0, n, SlidingSample.newestFirst)
    val best = new java.util.PriorityQueue[SampledRow](SlidingSample.rankOrder)
    var copies = 0L
    val kept = new Array[SampledRow](n)
    var m = 0
    i = 0
    while (i < n) {
      var r = inside(i)
      var j = i + 1
      while (j < n && SlidingSample.sameRow(inside(j), r)) {
        if (r eq inside(i)) r = new SampledRow(r.ts, r.value, r.priority, r.copies)
        r.copies = Math.addExact(r.copies, inside(j).copies)
        j += 1
      }
      // Kept unless k rows ranked above it are already counted: they are at its time or later.
      if (copies < k || SlidingSample.rankOrder.compare(r, best.peek()) > 0) {
        kept(m) = r
        m += 1
        copies = SlidingSample.offer(best, copies, r, k)
      }
      i = j
    }
    rows = new Array[SampledRow](math.max(16, 2 * m))
    held = 0
    while (m > 0) { m -= 1; rows(held) = kept(m); held += 1 }
    pruneAt = math.max(16, 2 * held)
    answerValid = false
  }

  /** The held rows, newest first, equal times by bytes: what the format writes. */
  private[core] def heldNewestFirst: Array[SampledRow] = {
    prune()
    val out = java.util.Arrays.copyOf(rows, held)
    java.util.Arrays.sort(out, SlidingSample.writeOrder)
    out
  }

  /** The rows held, in no promised order. */
  def heldRows: Array[SampledRow] = java.util.Arrays.copyOf(rows, held)

  /**
   * Restores a state read from bytes (rows checked to lie in the window, in order and
   * distinct), then checks it is pruned.
   */
  private[core] def restore(hasTime: Boolean, now: Long, read: Array[SampledRow]): Option[String] = {
    seenAny = hasTime
    nowTs = now
    rows = new Array[SampledRow](math.max(16, 2 * read.length))
    held = 0
    read.foreach(append)
    // Rows read are in the window and distinct (the reader checks both): with k copies or
    // fewer in all, no row can have k dominating ones, and there is nothing to prune.
    if (read.foldLeft(0L)((sum, r) => sum + r.copies) <= k) return None
    val before = held
    prune()
    if (held != before) Some(s"${before - held} rows are expired, dominated or repeated")
    else None
  }

  private def append(row: SampledRow): Unit = {
    if (held == rows.length) rows = java.util.Arrays.copyOf(rows, 2 * held)
    rows(held) = row
    held += 1
  }

  private def offer(row: SampledRow): Unit = {
    // A member that leaves the heap later leaves this time behind: at worst an early rebuild.
    if (answerCopies < k || SlidingSample.rankOrder.compare(row, answer.peek()) > 0) {
      answerOldest = math.min(answerOldest, row.ts)
      listedAnswer = null
    }
    answerCopies = SlidingSample.offer(answer, answerCopies, row, k)
  }

  private def rebuildAnswer(): Unit = {
    listedAnswer = null
    if (answer == null) answer = new java.util.PriorityQueue[SampledRow](SlidingSample.rankOrder)
    answer.clear()
    answerCopies = 0L
    answerOldest = Long.MaxValue
    answerValid = true
    var i = 0
    while (i < held) {
      if (inWindow(rows(i).ts)) offer(rows(i))
      i += 1
    }
  }

  private def inWindow(ts: Long): Boolean =
    ts <= nowTs && java.lang.Long.compareUnsigned(nowTs - ts, window) < 0
}

object SlidingSample {
  /** The largest `k`: a sample is an answer per row, not a copy of the window. */
  val MaxK: Int = 10000

  /**
   * The row's priority: SplitMix64's finalizer chained over the seed, the time, the value's
   * bytes as little-endian 8-byte words (the last one zero-padded) and their length. The
   * Python reader computes the same.
   */
  def priority(seed: Long, ts: Long, value: Array[Byte]): Long =
    ValueHash.chain(ValueHash.mix(ValueHash.mix(seed) ^ ts), value)

  /**
   * Rank, lowest first: priority as unsigned, then time, then bytes. A total order on
   * distinct rows, so ties of priority are settled the same way everywhere.
   */
  val rankOrder: java.util.Comparator[SampledRow] = new java.util.Comparator[SampledRow] {
    def compare(a: SampledRow, b: SampledRow): Int = {
      val p = java.lang.Long.compareUnsigned(a.priority, b.priority)
      if (p != 0) p
      else if (a.ts != b.ts) java.lang.Long.compare(a.ts, b.ts)
      else ItemCounts.compare(a.value, b.value)
    }
  }

  private val newestFirst: java.util.Comparator[SampledRow] = new java.util.Comparator[SampledRow] {
    def compare(a: SampledRow, b: SampledRow): Int =
      if (a.ts != b.ts) java.lang.Long.compare(b.ts, a.ts) else rankOrder.compare(b, a)
  }

  /** Newest first, equal times by bytes ascending: the format's order. */
  private val writeOrder: java.util.Comparator[SampledRow] = new java.util.Comparator[SampledRow] {
    def compare(a: SampledRow, b: SampledRow): Int =
      if (a.ts != b.ts) java.lang.Long.compare(b.ts, a.ts) else ItemCounts.compare(a.value, b.value)
  }

  /** Oldest first, equal times by bytes ascending: the order of a sample. */
  private val sampleOrder: java.util.Comparator[SampledRow] = new java.util.Comparator[SampledRow] {
    def compare(a: SampledRow, b: SampledRow): Int =
      if (a.ts != b.ts) java.lang.Long.compare(a.ts, b.ts) else ItemCounts.compare(a.value, b.value)
  }

  private def sameRow(a: SampledRow, b: SampledRow): Boolean =
    a.ts == b.ts && a.priority == b.priority && java.util.Arrays.equals(a.value, b.value)

  /**
   * Offers `row` to the `k` highest-ranked rows in `best` (a min-heap holding `copies`
   * rows): in if fewer than `k` are held or it ranks above the lowest; the lowest leave
   * while the others still hold `k`. Returns the copies held after.
   */
  private def offer(best: java.util.PriorityQueue[SampledRow], copies: Long, row: SampledRow,
      k: Int): Long = {
    if (copies >= k && rankOrder.compare(row, best.peek()) <= 0) return copies
    best.add(row)
    var held = copies + row.copies
    while (held - best.peek().copies >= k) held -= best.poll().copies
    held
  }

  /**
   * The `k` rows a heap of the highest-ranked rows holds, as a sample lists them: rows
   * equal in time and value (held apart until a prune joins them) as one, with their copies.
   */
  private def listed(top: Array[SampledRow], k: Int): Array[SampledRow] = {
    java.util.Arrays.sort(top, rankOrder)
    // All copies of the higher ranks; the lowest may give only part of its copies.
    var left = k.toLong
    val out = new scala.collection.mutable.ArrayBuffer[SampledRow]()
    var i = top.length - 1
    while (i >= 0 && left > 0) {
      val take = math.min(left, top(i).copies)
      val r = top(i)
      if (out.nonEmpty && sameRow(out.last, r)) {
        val last = out.last
        out(out.length - 1) = new SampledRow(last.ts, last.value, last.priority, last.copies + take)
      } else {
        out += (if (take == r.copies) r else new SampledRow(r.ts, r.value, r.priority, take))
      }
      left -= take
      i -= 1
    }
    val result = out.toArray
    java.util.Arrays.sort(result, sampleOrder)
    result
  }
}
