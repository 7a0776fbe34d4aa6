package windowsketch.core

import scala.collection.mutable.ArrayBuffer

/**
 * Item counts of a group of rows, some of them exact: items (their canonical bytes, sorted
 * by [[ItemCounts.compare]]) with counts, and `error`, so that every item's true count lies
 * in `[counted, counted + error]` (an item not held counts 0). Summaries add item by item
 * and are then pruned as a Misra–Gries summary is merged (Agarwal et al., "Mergeable
 * summaries", PODS 2012): past `capacity` items, the (capacity + 1)-th largest count comes
 * off every count, the items left at 0 or less are dropped, and it is added to `error`.
 * Each prune takes it from at least capacity + 1 counts, so for a group of `total` rows
 * sum(counts) + (capacity + 1) * error <= total, and error <= total / (capacity + 1).
 */
final class ItemCounts(val items: Array[Array[Byte]], val counts: Array[Long], val error: Long) {
  def size: Int = items.length

  /** The count held for `item`, 0 if none (binary search). */
  def countOf(item: Array[Byte]): Long = {
    var low = 0
    var high = items.length - 1
    while (low <= high) {
      val mid = (low + high) >>> 1
      val c = ItemCounts.compare(items(mid), item)
      if (c == 0) return counts(mid)
      if (c < 0) low = mid + 1 else high = mid - 1
    }
    0L
  }
}

object ItemCounts {
  val Empty = new ItemCounts(new Array[Array[Byte]](0), Array.emptyLongArray, 0L)

  def single(item: Array[Byte]): ItemCounts = new ItemCounts(Array(item), Array(1L), 0L)

  /** Unsigned lexicographic order of item bytes, a prefix first: canonical, type-blind. */
  def compare(a: Array[Byte], b: Array[Byte]): Int = {
    val n = math.min(a.length, b.length)
    var i = 0
    while (i < n) {
      val c = (a(i) & 0xff) - (b(i) & 0xff)
      if (c != 0) return c
      i += 1
    }
    a.length - b.length
  }

  /**
   * The summary of several groups together: counts added item by item, errors added, then
   * pruned to `capacity` once. The result does not depend on the order of `parts`.
   */
  def sum(parts: Seq[ItemCounts], capacity: Int): ItemCounts = {
    if (parts.size == 1 && parts.head.size <= capacity) return parts.head
    val all = new ArrayBuffer[(Array[Byte], Long)](parts.iterator.map(_.size).sum)
    var error = 0L
    parts.foreach { p =>
      error = Math.addExact(error, p.error)
      var i = 0
      while (i < p.size) { all += ((p.items(i), p.counts(i))); i += 1 }
    }
    val sorted = all.sortWith((x, y) => compare(x._1, y._1) < 0)
    val items = new ArrayBuffer[Array[Byte]](sorted.size)
    val counts = new ArrayBuffer[Long](sorted.size)
    sorted.foreach { case (item, count) =>
      if (items.nonEmpty && compare(items.last, item) == 0) counts(counts.size - 1) = Math.addExact(counts.last, count)
      else { items += item; counts += count }
    }
    prune(items.toArray, counts.toArray, error, capacity)
  }

  private def prune(items: Array[Array[Byte]], counts: Array[Long], error: Long,
      capacity: Int): ItemCounts =
    if (items.length <= capacity) new ItemCounts(items, counts, error)
    else {
      val ordered = counts.clone()
      java.util.Arrays.sort(ordered)
      val cut = ordered(ordered.length - 1 - capacity) // the (capacity + 1)-th largest
      val kept = counts.indices.filter(i => counts(i) > cut)
      new ItemCounts(kept.map(i => items(i)).toArray, kept.map(i => counts(i) - cut).toArray, error + cut)
    }
}

/** A dyadic time node of [[SlidingTopK]]: `total` rows, their items' counts. */
final class TopKNode(val level: Int, val lo: Long, val total: Long, val summary: ItemCounts)
  extends DyadicNode

/**
 * One item's count in a window: `lower <= exact <= upper`, `estimate` their middle.
 */
final case class ItemCount(item: Array[Byte], estimate: Long, lower: Long, upper: Long)

/**
 * The most frequent items of the sliding window `(now - window, now]`, in any order and
 * through merges, with certified per-item bounds (proof: docs/top-k.md).
 *
 * Time is cut into dyadic nodes as in [[DyadicWindowSketch]]; each node holds its row count
 * and an [[ItemCounts]] of capacity `ceil(2 / eps) - 1`. A subtree collapses into its root
 * w only when (I) n_T + 1 <= c n_R, with T the rows of w's subtree and of its ancestors, R
 * those of the nodes wholly after w and c = eps / 2 (doubled by the node cap). A query
 * reads the nodes inside the window (L) and those straddling its start (X, one
 * root-to-leaf path): an item's count is at least its counts in L and at most those plus
 * L's errors and its counts and errors in X, a width of at most
 * n_L / (capacity + 1) + n_X <= (eps / 2 + c) n.
 */
final class SlidingTopK(val window: Long, val eps: Double) extends TopKWindow {
  ExponentialHistogram.checkParameters(window, eps)

  /** What the items are, as the caller names their type; stored with the sketch. */
  var itemType = ""
  val height: Int = DyadicWindowSketch.heightFor(window)
  /** Items a node keeps counts for. */
  val capacity: Int = SlidingTopK.capacityFor(eps)

  private var check = eps / 2
  private var nodes = new ArrayBuffer[TopKNode]()
  private var pending = new ArrayBuffer[TopKNode]()
  private var seenAny = false
  private var nowTs = 0L

  def hasTime: Boolean = seenAny
  def now: Long = nowTs

  /** The eps the bounds' width is guaranteed to: `eps`, unless the node cap coarsened it. */
  def effectiveEps: Double = 1.0 / (capacity + 1) + check

  def nodeCount: Int = nodes.size + pending.size

  /** Counts `item` at `ts`, in any order. */
  def add(ts: Long, item: Array[Byte]): Unit = {
    advanceTo(ts)
    if (afterEdge(ts)) {
      val last = if (pending.isEmpty) null else pending.last
      // Rows of one timestamp share a leaf.
      if (last != null && last.level == 0 && last.lo == ts) {
        pending(pending.size - 1) = new TopKNode(0, ts, last.total + 1,
          ItemCounts.sum(Seq(last.summary, ItemCounts.single(item)), capacity))
      } else addPending(new TopKNode(0, ts, 1L, ItemCounts.single(item)))
    }
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) { nowTs = ts; seenAny = true }

  def merge(other: TopKWindow): Unit = other match {
    case s: SlidingTopK => mergeSketch(s)
    case _ => throw new UnsupportedOperationException("the time-ordered item counts cannot merge")
  }

  private def mergeSketch(other: SlidingTopK): Unit = {
    if (other.window != window || other.eps != eps || other.microsecondTime != microsecondTime ||
        (other.itemType != itemType && other.hasTime && hasTime)) {
      throw new IllegalArgumentException(
        s"cannot merge top-k sketches of (window, eps, items) ($window, $eps, $itemType) and " +
          s"(${other.window}, ${other.eps}, ${other.itemType})" +
          (if (other.microsecondTime != microsecondTime) " on different time axes" else ""))
    }
    if (itemType.isEmpty) itemType = other.itemType
    if (other.seenAny) advanceTo(other.nowTs)
    check = math.max(check, other.check)
    (other.nodes ++ other.pending).foreach(addPending)
  }

  /** The `k` items of the window ending at now with the largest estimates. */
  def top(k: Int): Array[ItemCount] = topAt(nowTs, window, k)

  /**
   * The `k` items with the largest estimates in the window `(end - length, end]` (any
   * `length` up to `window`, any `end` from now on), each with certified bounds; ties go to
   * the larger lower bound, then to the item's bytes. Candidates are the items counted in a
   * node inside the window: an item absent from all of them occurs at most
   * n_X + L's errors <= (eps / 2 + c) n times.
   */
  def topAt(end: Long, length: Long, k: Int): Array[ItemCount] = {
    require(length > 0 && length <= window, s"sub-window $length must be in [1, $window]")
    require(!seenAny || end >= nowTs, s"the window must end at or after now ($nowTs), not $end")
    def starts(ts: Long): Boolean = ts <= end && java.lang.Long.compareUnsigned(end - ts, length) < 0
    val inside = new ArrayBuffer[ItemCounts]()
    val straddling = new ArrayBuffer[ItemCounts]()
    (nodes.iterator ++ pending.iterator).foreach { node =>
      if (starts(node.lo)) inside += node.summary
      else if (node.lo < end && starts(math.min(last(node.level, node.lo), end))) straddling += node.summary
    }
    val lower = ItemCounts.sum(inside.toSeq, Int.MaxValue)
    val straddlingCounts = ItemCounts.sum(straddling.toSeq, Int.MaxValue)
    val slack = Math.addExact(lower.error, straddlingCounts.error)
    val all = lower.items.indices.map { i =>
      val item = lower.items(i)
      val low = lower.counts(i)
      val high = Math.addExact(Math.addExact(low, slack), straddlingCounts.countOf(item))
      ItemCount(item, low + (high - low) / 2, low, high)
    }
    all.sortWith { (x, y) =>
      if (x.estimate != y.estimate) x.estimate > y.estimate
      else if (x.lower != y.lower) x.lower > y.lower
      else ItemCounts.compare(x.item, y.item) < 0
    }.take(k).toArray
  }

  private def afterEdge(ts: Long): Boolean =
    ts > nowTs || java.lang.Long.compareUnsigned(nowTs - ts, window) < 0

  private def last(level: Int, lo: Long): Long = lo + ((1L << level) - 1)

  private def addPending(node: TopKNode): Unit = {
    pending += node
    // Amortized: compress once the pending nodes outnumber the compressed ones.
    if (pending.size >= math.max(SlidingTopK.MinPending, nodes.size)) compress()
  }

  /**
   * Folds the pending nodes in (equal nodes summed, expired ones dropped) and collapses
   * every subtree (I) allows; past the node cap, doubles c and collapses again.
   */
  def compress(): Unit = {
    gatherSorted()
    collapse()
    while (nodes.size > SlidingTopK.MaxNodes && check < SlidingTopK.MaxCheck) {
      check *= 2
      collapse()
    }
  }

  private def gatherSorted(): Unit = {
    nodes = DyadicNodes.gather[TopKNode](nodes, pending, afterEdge, (previous, node) =>
      new TopKNode(node.level, node.lo, Math.addExact(previous.total, node.total),
        ItemCounts.sum(Seq(previous.summary, node.summary), capacity)))
    pending = new ArrayBuffer[TopKNode]()
  }

  private def collapse(): Unit = {
    val from = nodes
    nodes = DyadicNodes.collapse[TopKNode](from, height, check, (k, lo, a, b, rows, _) =>
      new TopKNode(k, lo, rows, ItemCounts.sum((a until b).map(from(_).summary), capacity)))
  }

  /** The compressed nodes, in pre-order (after [[compress]]). */
  def foreachNode(f: TopKNode => Unit): Unit = { compress(); nodes.foreach(f) }

  private[core] def checkParameter: Double = check

  private[core] def restore(hasTime: Boolean, now: Long, checkParameter: Double,
      restored: ArrayBuffer[TopKNode]): Unit = {
    seenAny = hasTime
    nowTs = now
    check = checkParameter
    nodes = restored
    pending = new ArrayBuffer[TopKNode]()
  }

  /**
   * Checks the compressed nodes: pre-order, inside the window, none after now, each
   * summary within its capacity, sorted, with positive counts and
   * sum(counts) + (capacity + 1) * error <= total, and (I) at every internal node.
   */
  def checkInvariant(): Option[String] = {
    if (pending.nonEmpty) return Some("uncompressed nodes")
    var total = 0L
    var i = 0
    while (i < nodes.size) {
      val node = nodes(i)
      val s = node.summary
      if (node.total < 1 || total + node.total < total || s.size > capacity || s.error < 0 ||
          s.counts.exists(_ < 1) ||
          (1 until s.size).exists(j => ItemCounts.compare(s.items(j - 1), s.items(j)) >= 0) ||
          !SlidingTopK.fits(s, node.total, capacity)) {
        return Some(s"invalid item counts at node $i")
      }
      total += node.total
      i += 1
    }
    NodeOrder.structureProblem(nodes.map(_.level).toArray, nodes.map(_.lo).toArray,
      nodes.map(_.total).toArray, height, nowTs, window, check)
  }
}

object SlidingTopK {
  /** The node cap: past it the sketch coarsens c (and says so) rather than grow. */
  val MaxNodes = 4096
  private val MinPending = 64
  /** c doubles at most up to this: (I) then lets every subtree with rows after it collapse. */
  private[core] val MaxCheck: Double = 1.0

  /** Items a node counts at eps: its summary's error is at most eps / 2 of its rows. */
  def capacityFor(eps: Double): Int = math.ceil(2 / eps).toInt - 1

  /** sum(counts) + (capacity + 1) * error <= total, without overflow. */
  private[core] def fits(s: ItemCounts, total: Long, capacity: Int): Boolean = {
    var sum = BigInt(0)
    s.counts.foreach(c => sum += c)
    sum + BigInt(capacity + 1) * s.error <= total
  }
}

/**
 * The window's item counts for rows in time order (running frames ordered by `ts`),
 * exactly: every row of the window with its item, the items' counts, and the items ordered
 * by count, so a row costs O(log d) for d distinct items and the top k are read in O(k).
 * Like the percentiles' exact mode it refuses windows of more than 2^24 rows.
 */
final class OrderedTopK(val window: Long) extends TopKWindow {
  private val rowTimes = new java.util.ArrayDeque[java.lang.Long]()
  private val rowItems = new java.util.ArrayDeque[ItemKey]()
  private val counts = new java.util.HashMap[ItemKey, java.lang.Long]()
  // Items by count descending, then by their bytes: the order of answers.
  private val ranked = new java.util.TreeSet[(Long, ItemKey)](OrderedTopK.RankOrder)
  private var seenAny = false
  private var nowTs = 0L

  def hasTime: Boolean = seenAny
  def now: Long = nowTs

  def merge(other: TopKWindow): Unit =
    throw new UnsupportedOperationException("the time-ordered item counts cannot merge; use SlidingTopK")

  def add(ts: Long, item: Array[Byte]): Unit = {
    if (seenAny && ts < nowTs) throw new OutOfOrderEventException(ts, nowTs)
    advanceTo(ts)
    if (rowTimes.size == SlidingQuantiles.MaxValues) throw new WindowTooLargeException(SlidingQuantiles.MaxValues)
    val key = new ItemKey(item)
    rowTimes.addLast(ts)
    rowItems.addLast(key)
    move(key, +1)
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) {
      nowTs = ts
      seenAny = true
      while (!rowTimes.isEmpty && java.lang.Long.compareUnsigned(nowTs - rowTimes.peekFirst(), window) >= 0) {
        rowTimes.pollFirst()
        move(rowItems.pollFirst(), -1)
      }
    }

  private def move(key: ItemKey, by: Int): Unit = {
    val before = counts.get(key)
    val was = if (before == null) 0L else before.longValue
    if (was > 0) ranked.remove((was, key))
    val now = was + by
    if (now > 0) { counts.put(key, now); ranked.add((now, key)) } else counts.remove(key)
  }

  /** True when the window holds no row with an item. */
  def isEmpty: Boolean = rowTimes.isEmpty

  /**
   * The state as a live window stores it: whether a row was seen and now, then the
   * window's rows oldest first, each its time (the first as its age from now, the others
   * as steps forward) and its item (a varint length and the bytes).
   */
  private[core] def writeTo(out: ByteWriter): Unit = {
    out.byte(if (seenAny) 1 else 0)
    out.long(nowTs)
    out.varint(rowTimes.size)
    val times = rowTimes.iterator
    val items = rowItems.iterator
    var previous = 0L
    var first = true
    while (times.hasNext) {
      val t = times.next().longValue
      out.varint(if (first) nowTs - t else t - previous)
      val item = items.next().bytes
      out.varint(item.length)
      item.foreach(b => out.byte(b))
      previous = t
      first = false
    }
  }

  /** The `k` most frequent items of the window, exact: estimate = lower = upper. */
  def top(k: Int): Array[ItemCount] = {
    val out = new ArrayBuffer[ItemCount](k)
    val it = ranked.iterator
    while (out.size < k && it.hasNext) {
      val (count, key) = it.next()
      out += ItemCount(key.bytes, count, count, count)
    }
    out.toArray
  }
}

object OrderedTopK {
  /**
   * Reads [[OrderedTopK.writeTo]]: rows in time order, each inside the window ending at
   * now, at most 2^24 of them.
   */
  private[core] def readFrom(window: Long, in: ByteReader): OrderedTopK = {
    val o = new OrderedTopK(window)
    val hasTime = in.byte() match {
      case 0 => false
      case 1 => true
      case other => throw new CorruptSketchException(s"unknown top-k flags $other")
    }
    val now = in.long()
    val n = in.varint()
    if (n < 0 || n > SlidingQuantiles.MaxValues || n > in.remaining || (!hasTime && n != 0)) {
      throw new CorruptSketchException(s"invalid top-k row count $n")
    }
    var previous = 0L
    var i = 0
    while (i < n) {
      val step = in.varint()
      val t = if (i == 0) now - step else previous + step
      if (step < 0 || (i == 0 && java.lang.Long.compareUnsigned(step, window) >= 0) ||
          (i > 0 && (t < previous || t > now))) {
        throw new CorruptSketchException(s"invalid top-k row $i")
      }
      val size = in.varint()
      if (size < 0 || size > in.remaining) throw new CorruptSketchException(s"invalid top-k row $i")
      o.add(t, Array.fill(size.toInt)(in.byte())) // in time order: each moves now up to t
      previous = t
      i += 1
    }
    if (hasTime) o.advanceTo(now)
    o
  }

  private val RankOrder: java.util.Comparator[(Long, ItemKey)] =
    new java.util.Comparator[(Long, ItemKey)] {
      def compare(x: (Long, ItemKey), y: (Long, ItemKey)): Int =
        if (x._1 != y._1) java.lang.Long.compare(y._1, x._1) else ItemCounts.compare(x._2.bytes, y._2.bytes)
    }
}

/**
 * The most frequent items of a sliding window as the top-k aggregates read them:
 * [[SlidingTopK]] in any order and through merges, [[OrderedTopK]] for rows in time order.
 */
trait TopKWindow extends SketchAxis {
  var microsecondTime: Boolean = false
  /** Observes `item` at `ts` (moving `now` forward). */
  def add(ts: Long, item: Array[Byte]): Unit
  /** Observes a row without an item at `ts`. */
  def advanceTo(ts: Long): Unit
  def merge(other: TopKWindow): Unit
  /** The `k` items of the window ending at now with the largest estimates. */
  def top(k: Int): Array[ItemCount]
}

/** An item's bytes as a hash key. */
final class ItemKey(val bytes: Array[Byte]) {
  override val hashCode: Int = java.util.Arrays.hashCode(bytes)
  override def equals(other: Any): Boolean = other match {
    case o: ItemKey => java.util.Arrays.equals(bytes, o.bytes)
    case _ => false
  }
}
