package windowsketch.core
package frequencies

import scala.collection.mutable.ArrayBuffer

import windowsketch.core.count.{ExponentialHistogram, OutOfOrderEventException}

/**
 * The most frequent items of a live window whose ticks cut time into [[TickSlices]]: each
 * slice's item counts, a Misra–Gries summary ([[ItemCounts]]: counts + (capacity + 1)
 * error <= the slice's rows, with `capacity = ceil(1 / eps) - 1`). The newest slice counts
 * its rows in a hash table. While the slices hold at most [[exactLimit]] counters together
 * nothing is pruned and counts are exact; past it the newest slice is pruned to capacity
 * each time it holds more than 2 capacity items (O(1) amortized a row) and every other
 * slice to capacity. No slice straddles a tick's window, so an item's count there lies
 * between its counts summed over the slices and that plus their errors, a width of at most
 * sum(rows) / (capacity + 1) <= eps n. State is at most capacity counters a slice (or the
 * exact limit), where [[OrderedTopK]] keeps ~2/eps a dyadic node.
 */
final class SlicedTopK(val slices: TickSlices, val eps: Double) extends LiveTopKWindow {
  val window: Long = slices.window
  ExponentialHistogram.checkParameters(window, eps)
  val capacity: Int = SlicedTopK.capacityFor(eps)
  /** The counters held before any is pruned: the running frames' exact limit (512 at eps 0.01). */
  val exactLimit: Int = OrderedTopK.exactLimit(eps)

  // Closed slices, oldest first; the newest (open) slice apart, counted in `open`.
  private val closed = new java.util.ArrayDeque[SlicedTopK.Slice]()
  private var openIndex = 0L
  private var openRows = 0L
  private var openError = 0L
  private val open = new java.util.HashMap[ItemKey, java.lang.Long]()
  // The closed slices' counters together.
  private var closedCounters = 0L
  private var seenAny = false
  private var nowTs = 0L
  // The last answer, kept while no row came and no slice left: an idle key reads it at
  // each tick until its window empties.
  private var answer: Array[ItemCount] = null
  private var answeredK = 0
  private var answerOrdered: java.util.Comparator[ItemCount] = null
  // The closed slices' counts summed (no pruning), or null until an answer needs them.
  private var closedSum: ItemCounts = null

  def hasTime: Boolean = seenAny
  def now: Long = nowTs
  def isEmpty: Boolean = closed.isEmpty && openRows == 0
  override def answerStamp: AnyRef = answer
  /** True once some slice's counts were pruned: answers are bounded, not exact. */
  def isBounded: Boolean = openError > 0 || closedSummaries.exists(_.error > 0)

  def merge(other: TopKWindow): Unit =
    throw new UnsupportedOperationException("a live window's sliced counts cannot merge")

  def add(ts: Long, item: Array[Byte]): Unit = {
    if (seenAny && ts < nowTs) throw new OutOfOrderEventException(ts, nowTs)
    advanceTo(ts)
    answer = null
    val slice = slices.of(ts)
    if (openRows > 0 && openIndex != slice) close()
    openIndex = slice
    openRows += 1
    open.merge(new ItemKey(item), 1L, SlicedTopK.Plus)
    if (open.size > 2 * capacity && closedCounters + open.size > exactLimit) pruneOpen()
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) {
      nowTs = ts
      seenAny = true
      val oldest = slices.oldestAt(ts)
      while (!closed.isEmpty && closed.peekFirst().index < oldest) {
        closedCounters -= closed.pollFirst().summary.size
        answer = null
        closedSum = null
      }
      if (openRows > 0 && openIndex < oldest) { open.clear(); openRows = 0L; openError = 0L; answer = null }
    }

  /**
   * The `k` items of the window with the largest estimates (the middle of their bounds),
   * ties to the larger lower bound, then to the item's value.
   */
  def top(k: Int): Array[ItemCount] = {
    if (answer == null || answeredK != k || answerOrdered != answerOrder) {
      answer = topOf(k)
      answeredK = k
      answerOrdered = answerOrder
    }
    answer
  }

  private def topOf(k: Int): Array[ItemCount] = {
    // Rows of the open slice leave the closed ones' sum as it was: it is kept until a slice
    // closes or leaves. Sums add counts exactly, so the parts' grouping changes nothing.
    if (closedSum == null) {
      val parts = new Array[ItemCounts](closed.size)
      var i = 0
      closed.forEach { s => parts(i) = s.summary; i += 1 }
      closedSum = ItemCounts.sumInPlace(parts, Int.MaxValue)
    }
    val all = if (openRows == 0) closedSum else {
      val both = new Array[ItemCounts](2)
      both(0) = closedSum
      both(1) = openSummary
      ItemCounts.sumInPlace(both, Int.MaxValue)
    }
    val answers = new Array[ItemCount](all.size)
    var i = 0
    while (i < all.size) {
      val low = all.counts(i)
      val high = Math.addExact(low, all.error)
      answers(i) = ItemCount(all.items(i), low + (high - low) / 2, low, high)
      i += 1
    }
    java.util.Arrays.sort(answers, answerOrder)
    java.util.Arrays.copyOf(answers, math.min(k, answers.length))
  }

  private def closedSummaries: Seq[ItemCounts] = {
    val out = new ArrayBuffer[ItemCounts](closed.size + 1)
    closed.forEach(s => out += s.summary)
    out.toSeq
  }

  /** The open slice's counts as a summary: its items sorted. */
  private def openSummary: ItemCounts = {
    val keys = open.keySet.toArray(new Array[ItemKey](0))
    java.util.Arrays.sort(keys, SlicedTopK.KeyOrder)
    val items = new Array[Array[Byte]](keys.length)
    val counts = new Array[Long](keys.length)
    var i = 0
    while (i < keys.length) { items(i) = keys(i).bytes; counts(i) = open.get(keys(i)).longValue; i += 1 }
    new ItemCounts(items, counts, openError)
  }

  /**
   * The open slice joins the closed ones; past the exact limit every closed slice is
   * pruned to capacity (each once: a pruned slice stays within it).
   */
  private def close(): Unit = {
    closed.addLast(new SlicedTopK.Slice(openIndex, openRows, openSummary))
    closedSum = null
    closedCounters += open.size
    open.clear()
    openRows = 0L
    openError = 0L
    if (closedCounters > exactLimit) {
      val it = closed.iterator
      while (it.hasNext) {
        val slice = it.next()
        if (slice.summary.size > capacity) {
          val pruned = ItemCounts.prune(slice.summary.items, slice.summary.counts, slice.summary.error, capacity)
          closedCounters -= slice.summary.size - pruned.size
          slice.summary = pruned
        }
      }
    }
  }

  /** Prunes the open counts to capacity as a Misra–Gries summary is pruned, the cut added to the error. */
  private def pruneOpen(): Unit = openError += ItemCounts.pruneCounting(open, capacity, (_, _) => ())

  /**
   * Whether a row was seen and now, the slices' distinct items once (ascending), then the
   * slices newest first: index step back, rows, and the summary (error, items as dictionary
   * steps, counts).
   */
  private[core] def writeTo(out: ByteWriter): Unit = {
    out.byte(if (seenAny) 1 else 0)
    out.long(nowTs)
    val held = new ArrayBuffer[SlicedTopK.Slice](closed.size + 1)
    closed.forEach(s => held += s)
    if (openRows > 0) held += new SlicedTopK.Slice(openIndex, openRows, openSummary)
    val dictionary = SketchFormat.dictionaryOf(held.map(_.summary).toSeq, out)
    out.varint(held.size)
    var previous = slices.of(nowTs)
    var i = held.size - 1
    while (i >= 0) {
      val s = held(i)
      out.varint(previous - s.index)
      previous = s.index
      out.varint(s.rows)
      SketchFormat.writeItemCounts(out, s.summary, dictionary, i)
      i -= 1
    }
  }
}

object SlicedTopK {
  /** Past this many slices a window's [[OrderedTopK]] is smaller. */
  val MostSlices = 128

  /** Counters a slice: its rows / (capacity + 1) <= eps times them, the width of an item's bounds. */
  def capacityFor(eps: Double): Int = math.ceil(1 / eps).toInt - 1

  private[frequencies] final class Slice(val index: Long, val rows: Long, var summary: ItemCounts)

  private val Plus: java.util.function.BiFunction[java.lang.Long, java.lang.Long, java.lang.Long] =
    (a, b) => java.lang.Long.valueOf(a.longValue + b.longValue)

  private val KeyOrder: java.util.Comparator[ItemKey] = (a, b) => ItemCounts.compare(a.bytes, b.bytes)

  /**
   * Reads [[SlicedTopK.writeTo]], checking what the state must be: slices strictly newer
   * than one another within the window at now, each a valid summary of its rows, every
   * dictionary item used, the rows' total a long, and the pruning rule kept: past the exact
   * limit every closed slice within capacity, and the newest within twice it.
   */
  private[core] def readFrom(slices: TickSlices, eps: Double, in: ByteReader, length: Int): SlicedTopK = {
    val s = new SlicedTopK(slices, eps)
    val hasTime = in.byte() match {
      case 0 => false
      case 1 => true
      case other => throw new CorruptSketchException(s"unknown top-k flags $other")
    }
    val now = in.long()
    val dictionary = SketchFormat.readDictionary(in, length)
    val used = new Array[Boolean](dictionary.length)
    val n = in.varint()
    if (n < 0 || n > MostSlices || (!hasTime && n != 0)) {
      throw new CorruptSketchException(s"invalid top-k slice count $n")
    }
    s.seenAny = hasTime
    s.nowTs = now
    val most = math.max(2 * s.capacity, s.exactLimit)
    val oldest = if (hasTime) slices.oldestAt(now) else 0L
    var previous = if (hasTime) slices.of(now) else 0L
    var total = 0L
    val read = new ArrayBuffer[Slice](n.toInt)
    var i = 0
    while (i < n) {
      val step = in.varint()
      val index = previous - step
      val rows = in.varint()
      val summary = SketchFormat.readItemCounts(in, most, length, s"slice $i", dictionary, used)
      if (step < 0 || (i > 0 && step == 0) || index < oldest || index > previous || rows < 1 ||
          rows > Long.MaxValue - total || !SlidingTopK.valid(summary, rows, s.capacity, most)) {
        throw new CorruptSketchException(s"invalid top-k slice $i")
      }
      read += new Slice(index, rows, summary)
      total += rows
      previous = index
      i += 1
    }
    SketchFormat.requireUsed(used)
    read.reverseIterator.foreach(s.closed.addLast)
    if (!s.closed.isEmpty) {
      val newest = s.closed.pollLast()
      s.openIndex = newest.index
      s.openRows = newest.rows
      s.openError = newest.summary.error
      newest.summary.items.indices.foreach(j =>
        s.open.put(new ItemKey(newest.summary.items(j)), newest.summary.counts(j)))
    }
    s.closed.forEach(slice => s.closedCounters += slice.summary.size)
    // read(0) is the newest slice, the open one.
    val pruned = s.closedCounters <= s.exactLimit || read.drop(1).forall(_.summary.size <= s.capacity)
    if (!pruned || (s.open.size > 2 * s.capacity && s.closedCounters + s.open.size > s.exactLimit)) {
      throw new CorruptSketchException("a sliced top-k past its exact limit with unpruned slices")
    }
    s
  }
}
