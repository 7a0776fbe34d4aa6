package windowsketch.core
package frequencies

import scala.collection.mutable.ArrayBuffer

import windowsketch.core.count.{DyadicWindowSketch, ExponentialHistogram, OutOfOrderEventException}
import windowsketch.core.quantiles.SlidingQuantiles

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
    // Eight bytes at a time as unsigned big-endian longs: numeric items are eight bytes
    // that differ in their last ones.
    while (i + 8 <= n) {
      val x = bigEndianLong(a, i)
      val y = bigEndianLong(b, i)
      if (x != y) return java.lang.Long.compareUnsigned(x, y)
      i += 8
    }
    while (i < n) {
      val c = (a(i) & 0xff) - (b(i) & 0xff)
      if (c != 0) return c
      i += 1
    }
    a.length - b.length
  }

  /**
   * The item's bytes hashed with every bit mixed ([[ValueHash.chain]]), folded to an int for
   * open-addressing tables. `Arrays.hashCode` gives the eight-byte encodings of 0 … 999 only
   * 349 distinct hashes (31·b + c repeats), so tables keyed by it probed long runs of equal
   * hashes.
   */
  def hash(a: Array[Byte]): Int = { val h = ValueHash.chain(0L, a); (h ^ (h >>> 32)).toInt }

  private def bigEndianLong(a: Array[Byte], i: Int): Long =
    ((a(i) & 0xffL) << 56) | ((a(i + 1) & 0xffL) << 48) | ((a(i + 2) & 0xffL) << 40) |
      ((a(i + 3) & 0xffL) << 32) | ((a(i + 4) & 0xffL) << 24) | ((a(i + 5) & 0xffL) << 16) |
      ((a(i + 6) & 0xffL) << 8) | (a(i + 7) & 0xffL)

  /**
   * The order answers break ties in, by the items' values: [[compare]] for every encoding
   * but DECIMAL's, the unscaled value in minimal two's complement (a fixed scale per type).
   */
  def valueOrder(itemType: String): java.util.Comparator[Array[Byte]] =
    if (itemType.startsWith("decimal")) SignedOrder else ByteOrder

  /** [[compare]] as a comparator: the order summaries and dictionaries keep items in. */
  private[core] val ByteOrder: java.util.Comparator[Array[Byte]] = (a, b) => compare(a, b)
  private val SignedOrder: java.util.Comparator[Array[Byte]] = (a, b) => compareSigned(a, b)

  /** Minimal two's-complement big-endian integers by value: sign, then length, then bytes. */
  private def compareSigned(a: Array[Byte], b: Array[Byte]): Int = {
    val negative = a(0) < 0
    if (negative != (b(0) < 0)) { if (negative) -1 else 1 }
    else if (a.length != b.length) { if (negative) b.length - a.length else a.length - b.length }
    else compare(a, b)
  }

  /**
   * The summary of several groups together: counts added item by item, errors added, then
   * pruned to `capacity` once. The result does not depend on the order of `parts`.
   */
  def sum(parts: Seq[ItemCounts], capacity: Int): ItemCounts = {
    val runs = new Array[ItemCounts](parts.size)
    var n = 0
    parts.foreach { p => runs(n) = p; n += 1 }
    sumInPlace(runs, capacity)
  }

  /** [[sum]] of the summaries in `runs`, which it overwrites. */
  private[core] def sumInPlace(runs: Array[ItemCounts], capacity: Int): ItemCounts = {
    if (runs.length == 1 && runs(0).size <= capacity) return runs(0)
    var error = 0L
    runs.foreach(p => error = Math.addExact(error, p.error))
    // Each part's items are sorted and distinct (every summary's invariant, checked where
    // one is read): merge them in pairs, a balanced tree of linear merges, in place. Many
    // parts (an answer over a window's nodes) are added in a hash table instead, and only
    // their distinct items sorted: the tree compared and copied every item log2(parts) times.
    val all = if (runs.isEmpty) Empty
      else if (runs.length > HashedParts) hashedUnion(runs)
      else MergeTree.merge(runs, merged)
    prune(all.items, all.counts, error, capacity)
  }

  /** Summaries past which [[sumInPlace]] and [[ItemDictionary.of]] use a hash table. */
  private[core] val HashedParts = 8

  /** [[merged]] of all of `runs` at once: equal items' counts added in open addressing. */
  private def hashedUnion(runs: Array[ItemCounts]): ItemCounts = {
    var total = 0
    runs.foreach(r => total += r.size)
    val table = new ItemSlots(total)
    val sums = new Array[Long](table.slots)
    runs.foreach { r =>
      var i = 0
      while (i < r.size) {
        val at = table.slotOf(r.items(i))
        sums(at) = Math.addExact(sums(at), r.counts(i))
        i += 1
      }
    }
    val sorted = table.sortedSlots
    new ItemCounts(sorted.map(at => table.items(at)), sorted.map(at => sums(at)), 0L)
  }

  /** The sorted union of two summaries' sorted items, equal items' counts added (error 0). */
  private def merged(a: ItemCounts, b: ItemCounts): ItemCounts = {
    val items = new Array[Array[Byte]](a.size + b.size)
    val counts = new Array[Long](a.size + b.size)
    var i = 0
    var j = 0
    var n = 0
    while (i < a.size || j < b.size) {
      val c = if (i == a.size) 1 else if (j == b.size) -1
        else if (a.items(i) eq b.items(j)) 0 else compare(a.items(i), b.items(j)) // interned items: one array
      if (c <= 0) {
        items(n) = a.items(i)
        counts(n) = if (c == 0) Math.addExact(a.counts(i), b.counts(j)) else a.counts(i)
        i += 1
        if (c == 0) j += 1
      } else {
        items(n) = b.items(j)
        counts(n) = b.counts(j)
        j += 1
      }
      n += 1
    }
    new ItemCounts(java.util.Arrays.copyOf(items, n), java.util.Arrays.copyOf(counts, n), 0L)
  }

  /**
   * Prunes counts still being kept in a hash table, past `capacity` items, as [[prune]]
   * does: the (capacity + 1)-th largest count comes off every count (an item at or below
   * it leaves). `taken(item, amount)` hears what came off each item. Returns the cut, for
   * the caller's error.
   */
  private[core] def pruneCounting(counts: java.util.HashMap[ItemKey, java.lang.Long], capacity: Int,
      taken: (ItemKey, Long) => Unit): Long = {
    val values = new Array[Long](counts.size)
    var i = 0
    val it = counts.values.iterator
    while (it.hasNext) { values(i) = it.next().longValue; i += 1 }
    java.util.Arrays.sort(values)
    val cut = values(values.length - 1 - capacity)
    val entries = counts.entrySet.iterator
    while (entries.hasNext) {
      val e = entries.next()
      val c = e.getValue.longValue
      taken(e.getKey, math.min(c, cut))
      if (c <= cut) entries.remove() else e.setValue(c - cut)
    }
    cut
  }

  private[core] def prune(items: Array[Array[Byte]], counts: Array[Long], error: Long,
      capacity: Int): ItemCounts =
    if (items.length <= capacity) new ItemCounts(items, counts, error)
    else {
      val ordered = counts.clone()
      java.util.Arrays.sort(ordered)
      val cut = ordered(ordered.length - 1 - capacity) // the (capacity + 1)-th largest
      val keptItems = new Array[Array[Byte]](capacity)
      val keptCounts = new Array[Long](capacity)
      var n = 0
      var i = 0
      while (i < counts.length) {
        if (counts(i) > cut) { keptItems(n) = items(i); keptCounts(n) = counts(i) - cut; n += 1 }
        i += 1
      }
      new ItemCounts(java.util.Arrays.copyOf(keptItems, n), java.util.Arrays.copyOf(keptCounts, n), error + cut)
    }
}

/**
 * Distinct items in open addressing, for adding or indexing many summaries' items at once:
 * a merge of their sorted runs compares and copies every item once per level of its tree.
 * Holds up to `capacity` distinct items, at most half full.
 */
private[core] final class ItemSlots(capacity: Int) {
  val slots: Int = Integer.highestOneBit(math.max(1, capacity)) * 4
  private val mask = slots - 1
  val items = new Array[Array[Byte]](slots)
  private val firstSeen = new Array[Int](capacity) // filled slots, in the order their items came
  private var distinct = 0

  /** The slot of `item`, which it takes if no equal item has one yet. */
  def slotOf(item: Array[Byte]): Int = {
    var at = ItemCounts.hash(item) & mask
    while (items(at) != null && !((items(at) eq item) || java.util.Arrays.equals(items(at), item))) {
      at = (at + 1) & mask
    }
    if (items(at) == null) { items(at) = item; firstSeen(distinct) = at; distinct += 1 }
    at
  }

  /** The filled slots, ascending by their items ([[ItemCounts.compare]]). */
  def sortedSlots: Array[Int] = {
    val order = MergeTree.sortedIndices(distinct,
      (x, y) => ItemCounts.compare(items(firstSeen(x)), items(firstSeen(y))) < 0)
    order.map(firstSeen)
  }
}

/**
 * The distinct items of some summaries, ascending by [[ItemCounts.compare]], with each
 * summary item's index among them: a sketch's dictionary and what its summaries write in
 * place of their items. One merge of the summaries' sorted runs finds both, so no item is
 * searched for; a sketch's summaries share its interned arrays, which compare equal
 * without reading their bytes.
 */
final class ItemDictionary private (val items: Array[Array[Byte]], indexes: Array[Int],
    offsets: Array[Int]) {
  /** The index in [[items]] of item `i` of the `summary`-th summary given to [[ItemDictionary.of]]. */
  def indexOf(summary: Int, i: Int): Int = indexes(offsets(summary) + i)
}

object ItemDictionary {
  def of(summaries: Seq[ItemCounts]): ItemDictionary = {
    val parts = summaries.toArray
    val offsets = new Array[Int](parts.length + 1)
    var s = 0
    while (s < parts.length) { offsets(s + 1) = offsets(s) + parts(s).size; s += 1 }
    val total = offsets(parts.length)
    if (parts.length > ItemCounts.HashedParts) return hashed(parts, offsets, total)
    val all = new Array[Array[Byte]](total)
    s = 0
    while (s < parts.length) { System.arraycopy(parts(s).items, 0, all, offsets(s), parts(s).size); s += 1 }
    val order = MergeTree.sortedIndices(total, (x, y) => less(all(x), all(y)))
    val distinct = new Array[Array[Byte]](total)
    val indexes = new Array[Int](total)
    var n = 0
    var k = 0
    while (k < total) {
      val item = all(order(k))
      if (n == 0 || less(distinct(n - 1), item)) { distinct(n) = item; n += 1 }
      indexes(order(k)) = n - 1
      k += 1
    }
    new ItemDictionary(java.util.Arrays.copyOf(distinct, n), indexes, offsets)
  }

  /** [[of]] for many summaries: each item's slot in a hash table, then the distinct ones sorted. */
  private def hashed(parts: Array[ItemCounts], offsets: Array[Int], total: Int): ItemDictionary = {
    val table = new ItemSlots(total)
    val slotOfEntry = new Array[Int](total)
    var s = 0
    while (s < parts.length) {
      var i = 0
      while (i < parts(s).size) { slotOfEntry(offsets(s) + i) = table.slotOf(parts(s).items(i)); i += 1 }
      s += 1
    }
    val sorted = table.sortedSlots
    val indexOfSlot = new Array[Int](table.slots)
    var k = 0
    while (k < sorted.length) { indexOfSlot(sorted(k)) = k; k += 1 }
    new ItemDictionary(sorted.map(at => table.items(at)), slotOfEntry.map(at => indexOfSlot(at)), offsets)
  }

  private def less(a: Array[Byte], b: Array[Byte]): Boolean = (a ne b) && ItemCounts.compare(a, b) < 0
}

/**
 * A restructure of [[SlidingTopK]]'s nodes: `summary` (of a node starting at `lo`) made
 * from `replaced` by [[ItemCounts.sum]], or, when `summary` is null, an expired node's
 * `replaced` summary dropped.
 */
final class SummaryChange(val replaced: Seq[ItemCounts], val summary: ItemCounts, val lo: Long)

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
      val shared = intern(item)
      val last = if (pending.isEmpty) null else pending.last
      // Rows of one timestamp share a leaf.
      if (last != null && last.level == 0 && last.lo == ts) {
        val both = Seq(last.summary, ItemCounts.single(shared))
        pending(pending.size - 1) = new TopKNode(0, ts, last.total + 1, made(both, ItemCounts.sum(both, capacity), ts))
      } else addPending(new TopKNode(0, ts, 1L, ItemCounts.single(shared)))
    }
  }

  // The bytes of items seen lately, so that nodes counting the same item share one array
  // (each row's item comes as a new one): memory holds a frequent item once, not once per
  // node. Cleared when it passes a few capacities, so it stays bounded too.
  private val recentItems = new java.util.HashMap[ItemKey, Array[Byte]]()

  private def intern(item: Array[Byte]): Array[Byte] = {
    val key = new ItemKey(item)
    val held = recentItems.get(key)
    if (held != null) held
    else {
      if (recentItems.size >= 4 * capacity) recentItems.clear()
      recentItems.put(key, item)
      item
    }
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) { nowTs = ts; seenAny = true }

  /**
   * Adds the rows of one timestamp at once, as their summary (at most `capacity` items,
   * within the node bound): the time-ordered counts ([[OrderedTopK]]) count a timestamp's
   * rows exactly and hand them over when time moves on.
   */
  private[core] def addLeaf(ts: Long, rows: Long, counts: ItemCounts): Unit = {
    advanceTo(ts)
    if (afterEdge(ts)) {
      val last = if (pending.isEmpty) null else pending.last
      if (last != null && last.level == 0 && last.lo == ts) {
        val both = Seq(last.summary, counts)
        pending(pending.size - 1) = new TopKNode(0, ts, last.total + rows, made(both, ItemCounts.sum(both, capacity), ts))
      } else addPending(new TopKNode(0, ts, rows, counts))
    }
  }

  // The summaries restructures made since the log was last taken, each after the ones it
  // replaced, and the summaries of expired nodes dropped: the time-ordered counts read
  // this change log rather than rescan every node ([[OrderedTopK]]). Off (null) elsewhere.
  private var changes: ArrayBuffer[SummaryChange] = null

  /** Starts logging changes (none logged before). */
  private[core] def logChanges(): Unit = changes = new ArrayBuffer[SummaryChange]()

  /** The changes logged since the last call, oldest first; the log starts again empty. */
  private[core] def takeChanges(): ArrayBuffer[SummaryChange] = {
    val taken = changes
    changes = new ArrayBuffer[SummaryChange]()
    taken
  }

  private[core] def hasChanges: Boolean = changes != null && changes.nonEmpty

  /** `summary`, logged as made from `parts` for a node starting at `lo`. */
  private def made(parts: Seq[ItemCounts], summary: ItemCounts, lo: Long): ItemCounts = {
    if (changes != null && !(parts.size == 1 && (parts.head eq summary))) {
      changes += new SummaryChange(parts, summary, lo)
    }
    summary
  }

  /** The nodes in pre-order, then the pending ones in arrival order: `i` from 0 to [[nodeCount]]. */
  private[core] def node(i: Int): TopKNode = if (i < nodes.size) nodes(i) else pending(i - nodes.size)

  private[core] def compressedTopKNodes: Seq[TopKNode] = nodes.toSeq
  private[core] def pendingTopKNodes: Seq[TopKNode] = pending.toSeq

  /** Puts back leaves read as pending ([[SketchFormat.readOrderedTopK]]), after [[restore]]. */
  private[core] def restorePending(leaves: ArrayBuffer[TopKNode]): Unit = pending = leaves

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
   * the larger lower bound, then to the item's value. Candidates are the items counted in a
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
    // The first k in the answer's order (a total order: items are distinct), not a sort of all.
    val best = new OrderedTopK.FirstK(k, answerOrder, lower.size)
    var i = 0
    while (i < lower.size) {
      val low = lower.counts(i)
      val high = Math.addExact(Math.addExact(low, slack), straddlingCounts.countOf(lower.items(i)))
      best.offer(ItemCount(lower.items(i), low + (high - low) / 2, low, high))
      i += 1
    }
    best.result
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
    nodes = DyadicNodes.gather[TopKNode](nodes, pending, afterEdge, { (previous, node) =>
      val both = Seq(previous.summary, node.summary)
      new TopKNode(node.level, node.lo, Math.addExact(previous.total, node.total),
        made(both, ItemCounts.sum(both, capacity), node.lo))
    }, node => if (changes != null) changes += new SummaryChange(Seq(node.summary), null, node.lo))
    pending = new ArrayBuffer[TopKNode]()
  }

  private def collapse(): Unit = {
    val from = nodes
    nodes = DyadicNodes.collapse[TopKNode](from, height, check, { (k, lo, a, b, rows, _) =>
      val node = from(a)
      if (b - a == 1 && node.level == k && node.summary.size <= capacity) node // as it was
      else {
        val parts = (a until b).map(from(_).summary)
        new TopKNode(k, lo, rows, made(parts, ItemCounts.sum(parts, capacity), lo))
      }
    })
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
  def checkInvariant(leftAllowed: Boolean = false): Option[String] = {
    if (pending.nonEmpty) return Some("uncompressed nodes")
    var total = 0L
    var i = 0
    while (i < nodes.size) {
      val node = nodes(i)
      if (node.total < 1 || total + node.total < total || !SlidingTopK.valid(node.summary, node.total, capacity)) {
        return Some(s"invalid item counts at node $i")
      }
      total += node.total
      i += 1
    }
    NodeOrder.structureProblem(nodes.map(_.level).toArray, nodes.map(_.lo).toArray,
      nodes.map(_.total).toArray, height, nowTs, window, check, leftAllowed)
  }
}

object SlidingTopK {
  /** The most items an answer lists (SQL's `k`, a live top_k's). */
  val MaxK = 100000

  /** The node cap: past it the sketch coarsens c (and says so) rather than grow. */
  val MaxNodes = 4096
  private val MinPending = 64
  /** c doubles at most up to this: (I) then lets every subtree with rows after it collapse. */
  private[core] val MaxCheck: Double = 1.0

  /** Items a node counts at eps: its summary's error is at most eps / 2 of its rows. */
  def capacityFor(eps: Double): Int = math.ceil(2 / eps).toInt - 1

  /**
   * A summary of `total` rows as nodes hold it: at most `capacity` items, sorted and
   * distinct, positive counts, a non-negative error and sum(counts) + (capacity + 1) * error
   * <= total.
   */
  private[core] def valid(s: ItemCounts, total: Long, capacity: Int): Boolean = valid(s, total, capacity, capacity)

  /** [[valid]] for a summary still counting, which may hold up to `most` items. */
  private[core] def valid(s: ItemCounts, total: Long, capacity: Int, most: Int): Boolean =
    s.size <= most && s.error >= 0 && s.counts.forall(_ >= 1) &&
      (1 until s.size).forall(j => ItemCounts.compare(s.items(j - 1), s.items(j)) < 0) &&
      fits(s, total, capacity)

  /** sum(counts) + (capacity + 1) * error <= total, without overflow. */
  private[core] def fits(s: ItemCounts, total: Long, capacity: Int): Boolean = {
    var sum = BigInt(0)
    s.counts.foreach(c => sum += c)
    sum + BigInt(capacity + 1) * s.error <= total
  }
}

/**
 * The most frequent items of the window for rows in time order (running frames ordered by
 * `ts`, live keys), in memory set by eps (docs/top-k.md, "In time order").
 *
 * While the window holds at most [[exactLimit]] rows it holds them all: counts are exact
 * (lower = estimate = upper), a row costs O(log d) for d distinct items and the top k are
 * read in O(k). Past that it turns bounded for good: the rows of the newest timestamp are
 * counted exactly (pruned as a Misra–Gries summary past 2 capacity items) and handed to a
 * [[SlidingTopK]] as a leaf when time moves on. Answers are the sketch's own
 * ([[SlidingTopK.topAt]] over its nodes and the newest timestamp's counts): lower counts are
 * kept up to date as rows arrive, as nodes leave the window and, when the sketch
 * restructures, by the difference of the summaries it replaced; the last answer is kept and
 * rows that only raise counts update it, any other change recomputes it.
 */
final class OrderedTopK(val window: Long, val eps: Double) extends LiveTopKWindow {
  ExponentialHistogram.checkParameters(window, eps)

  /** The most rows held exactly; one more turns the counts bounded. */
  val exactLimit: Int = OrderedTopK.exactLimit(eps)

  // Exact mode: every row of the window, oldest first.
  private val rowTimes = new java.util.ArrayDeque[java.lang.Long]()
  private val rowItems = new java.util.ArrayDeque[ItemKey]()
  // Per item its count (exact mode) or lower bound (bounded: its counts in the sketch's
  // nodes inside the window and in the newest timestamp's rows); in exact mode also the
  // items by count descending (ties in the order items first came: answers sort ties).
  private val counts = new java.util.HashMap[ItemKey, OrderedTopK.Count]()
  private val ranked = new java.util.TreeSet[OrderedTopK.Count](OrderedTopK.ByCount)
  // The counted items by their bytes' identity: the sketch's summaries share the arrays
  // `counts` holds, so reading a summary needs no hash of its items.
  private val byArray = new java.util.IdentityHashMap[Array[Byte], OrderedTopK.Count]()
  private var nextId = 0L
  private var seenAny = false
  private var nowTs = 0L

  // Bounded mode: the sketch, and the rows of the newest timestamp (now) apart.
  private var sketch: SlidingTopK = null
  private var openTs = 0L
  private val open = new java.util.HashMap[ItemKey, java.lang.Long]()
  private var openRows = 0L
  private var openError = 0L
  // What `counts` holds besides the open rows: the summaries it added (by identity), the
  // sketch's first node inside the window, their errors and the open rows' error, and the
  // nodes before the window reaching into it (the straddling path, at most the tree's
  // height). The sketch logs its restructures for them ([[SlidingTopK.takeChanges]]).
  private val viewed = new java.util.IdentityHashMap[ItemCounts, java.lang.Boolean]()
  private var insideFrom = 0
  private var insideError = 0L
  private val straddlers = new ArrayBuffer[TopKNode]()
  // The most the straddlers add to an item's upper bound (their errors and largest counts),
  // -1 until computed for the current straddlers.
  private var straddlingMost = -1L
  // The last answer, for `answeredK` items, valid unless a count fell, the slack or the
  // straddling path changed; `raised` the items whose counts rose since.
  private var answer: Array[ItemCount] = null
  private var answeredK = 0
  private var answerValid = false
  private val raised = new ArrayBuffer[OrderedTopK.Count]()

  def hasTime: Boolean = seenAny
  def now: Long = nowTs

  /** True once the counts are bounded by eps rather than exact. */
  def isBounded: Boolean = sketch != null

  /** The eps the bounds' width is guaranteed to (exact mode: `eps`). */
  def effectiveEps: Double = if (sketch == null) eps else sketch.effectiveEps

  def merge(other: TopKWindow): Unit =
    throw new UnsupportedOperationException("the time-ordered item counts cannot merge; use SlidingTopK")

  def add(ts: Long, item: Array[Byte]): Unit = {
    if (seenAny && ts < nowTs) throw new OutOfOrderEventException(ts, nowTs)
    advanceTo(ts)
    val key = new ItemKey(item)
    if (sketch == null) {
      if (rowTimes.size < exactLimit) {
        rowTimes.addLast(ts)
        rowItems.addLast(move(key, 1L))
        return
      }
      toBounded()
    }
    openTs = ts
    openRows += 1
    open.merge(move(key, 1L), 1L, OrderedTopK.Plus)
    if (open.size > 2 * sketch.capacity) pruneOpen()
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) {
      nowTs = ts
      seenAny = true
      if (sketch == null) {
        while (!rowTimes.isEmpty && java.lang.Long.compareUnsigned(nowTs - rowTimes.peekFirst(), window) >= 0) {
          rowTimes.pollFirst()
          move(rowItems.pollFirst(), -1L)
        }
      } else {
        flushOpen()
        sketch.advanceTo(ts)
      }
    }

  /** True when the window holds no row with an item. */
  def isEmpty: Boolean =
    if (sketch == null) rowTimes.isEmpty
    else { syncView(); counts.isEmpty && openRows == 0 && straddlers.isEmpty }

  /**
   * The `k` items of the window ending at now with the largest estimates, ties to the larger
   * lower bound, then to the item's value: exact counts in exact mode, the sketch's
   * certified bounds after.
   */
  def top(k: Int): Array[ItemCount] =
    if (sketch == null) {
      // Counts descending: the k-th count and every tie of it, then the answer's order.
      val best = new OrderedTopK.FirstK(k, answerOrder, ranked.size)
      val it = ranked.iterator
      var searching = true
      while (searching && it.hasNext) {
        val c = it.next()
        if (best.size >= k && c.count < best.last.estimate) searching = false
        else best.offer(ItemCount(c.key.bytes, c.count, c.count, c.count))
      }
      best.result
    } else {
      syncView()
      if (!answerValid || answeredK != k) {
        val best = new OrderedTopK.FirstK(k, answerOrder, counts.size)
        val all = counts.values.iterator
        while (all.hasNext) offer(best, all.next(), k)
        answer = best.result
        answeredK = k
        answerValid = true
      } else if (raised.nonEmpty) {
        val best = new OrderedTopK.FirstK(k, answerOrder, answer.length + raised.size)
        var i = 0
        while (i < answer.length) {
          if (!wasRaised(answer(i).item)) best.offer(answer(i))
          i += 1
        }
        i = 0
        while (i < raised.length) {
          if (raised(i).count > 0) offer(best, raised(i), k)
          i += 1
        }
        // An answer that did not change stays the same array, so callers may reuse what
        // they made of it (a running frame's row answer, mostly).
        val ranked = best.result
        if (!OrderedTopK.sameAnswer(ranked, answer)) answer = ranked
      }
      raised.clear()
      answer
    }

  /** Whether `item`'s count rose since the last answer. */
  private def wasRaised(item: Array[Byte]): Boolean = {
    var i = 0
    while (i < raised.length && !java.util.Arrays.equals(raised(i).key.bytes, item)) i += 1
    i < raised.length
  }

  /** `c`'s answer into `best`, kept to the `k` first. */
  private def offer(best: OrderedTopK.FirstK, c: OrderedTopK.Count, k: Int): Unit = {
    val low = c.count
    // Its estimate is at most low + (insideError + straddlingWidth) / 2: an item that cannot
    // reach the k-th listed estimate is not listed, whatever the straddlers count for it.
    if (best.size >= k && low + Math.addExact(insideError, straddlingWidth()) / 2 < best.last.estimate) return
    var high = Math.addExact(low, insideError)
    straddlers.foreach { n => high = Math.addExact(high, Math.addExact(n.summary.error, n.summary.countOf(c.key.bytes))) }
    best.offer(ItemCount(c.key.bytes, low + (high - low) / 2, low, high))
  }

  private def straddlingWidth(): Long = {
    if (straddlingMost < 0) {
      var most = 0L
      straddlers.foreach(n => most = Math.addExact(most, Math.addExact(n.summary.error,
        if (n.summary.size == 0) 0L else n.summary.counts.max)))
      straddlingMost = most
    }
    straddlingMost
  }

  /** The exact rows, grouped by time, become the sketch's leaves; the newest stays open. */
  private def toBounded(): Unit = {
    sketch = new SlidingTopK(window, eps)
    sketch.logChanges()
    sketch.microsecondTime = microsecondTime
    sketch.itemType = itemType
    ranked.clear()
    val times = rowTimes.iterator
    val items = rowItems.iterator
    while (times.hasNext) {
      val t = times.next().longValue
      if (openRows > 0 && t != openTs) flushOpen()
      openTs = t
      openRows += 1
      open.merge(items.next(), 1L, OrderedTopK.Plus)
      if (open.size > 2 * sketch.capacity) pruneOpen()
    }
    rowTimes.clear()
    rowItems.clear()
    if (openRows > 0 && openTs != nowTs) flushOpen()
    sketch.advanceTo(nowTs)
    rebuildView()
  }

  /**
   * Prunes the open rows' counts to the sketch's capacity as a Misra–Gries summary is
   * pruned: the (capacity + 1)-th largest count comes off every count and is added to the
   * error (so counts + (capacity + 1) error stays within the rows).
   */
  private def pruneOpen(): Unit = {
    if (open.size <= sketch.capacity) return
    val cut = ItemCounts.pruneCounting(open, sketch.capacity, (key, amount) => move(key, -amount))
    openError += cut
    insideError += cut
  }

  /**
   * Hands the open rows to the sketch as a leaf. Their counts stay in `counts`: the leaf's
   * summary is marked as read before the sketch takes it, so a restructure it triggers
   * takes it out again as it does any summary it replaces.
   */
  private def flushOpen(): Unit =
    if (openRows > 0) {
      if (open.size > sketch.capacity) pruneOpen()
      val keys = open.keySet.toArray(new Array[ItemKey](0))
      java.util.Arrays.sort(keys, OrderedTopK.KeyOrder)
      val leaf = new ItemCounts(keys.map(_.bytes), keys.map(k => open.get(k).longValue), openError)
      viewed.put(leaf, java.lang.Boolean.TRUE)
      val rows = openRows
      open.clear()
      openRows = 0
      openError = 0
      sketch.addLeaf(openTs, rows, leaf)
      // Read a restructure now: `viewed` must not keep the summaries it replaced alive.
      if (sketch.hasChanges) readChanges()
    }

  /**
   * Brings `counts` up to the window ending at now: after the sketch restructured, by the
   * difference of the summaries it replaced and its new ones; nodes that left the window
   * come off; `straddlers` keeps those before the window still reaching into it.
   */
  private def syncView(): Unit = {
    if (sketch.hasChanges) readChanges()
    var i = insideFrom
    while (i < sketch.nodeCount && !inWindow(sketch.node(i).lo)) {
      val n = sketch.node(i)
      if (viewed.remove(n.summary) != null) {
        addCounts(n.summary, -1L)
        insideError -= n.summary.error
      }
      if (reaches(n)) { straddlers += n; straddlingMost = -1L }
      answerValid = false
      i += 1
    }
    insideFrom = i
    var kept = 0
    i = 0
    while (i < straddlers.size) {
      if (reaches(straddlers(i))) { straddlers(kept) = straddlers(i); kept += 1 }
      i += 1
    }
    if (kept < straddlers.size) {
      straddlers.remove(kept, straddlers.size - kept)
      straddlingMost = -1L
      answerValid = false
    }
  }

  /**
   * Reads the sketch's restructures: each summary it made inside the window replaces those
   * it was made from, and the summaries of nodes now before the window come off. A sum
   * that pruned nothing (its error is its parts') changes no count, so it only swaps the
   * summaries; the rest add up into one net change per item, applied once.
   */
  private def readChanges(): Unit = {
    val delta = new java.util.HashMap[ItemKey, java.lang.Long]()
    val errorBefore = insideError
    val log = sketch.takeChanges()
    var c = 0
    while (c < log.size) {
      val change = log(c)
      val inside = change.summary != null && inWindow(change.lo)
      if (inside && change.summary.error == change.replaced.iterator.map(_.error).sum &&
          change.replaced.forall(viewed.containsKey)) {
        change.replaced.foreach(viewed.remove)
      } else {
        change.replaced.foreach { s => if (viewed.remove(s) != null) { addTo(delta, s, -1L); insideError -= s.error } }
        if (inside) { addTo(delta, change.summary, 1L); insideError = Math.addExact(insideError, change.summary.error) }
      }
      if (inside) viewed.put(change.summary, java.lang.Boolean.TRUE)
      c += 1
    }
    val from = firstInside()
    val before = straddlers.toList
    straddlers.clear()
    straddlingMost = -1L
    var i = 0
    while (i < from) {
      val n = sketch.node(i)
      if (viewed.remove(n.summary) != null) { addTo(delta, n.summary, -1L); insideError -= n.summary.error }
      if (reaches(n)) straddlers += n
      i += 1
    }
    insideFrom = from
    val moves = delta.entrySet.iterator
    while (moves.hasNext) { val e = moves.next(); if (e.getValue.longValue != 0L) move(e.getKey, e.getValue.longValue) }
    if (insideError != errorBefore || straddlers.toList != before) answerValid = false
  }

  /** The sketch's first node inside the window: nodes are in pre-order then in arrival order, by lo. */
  private def firstInside(): Int = {
    var from = 0
    var to = sketch.nodeCount
    while (from < to) {
      val m = (from + to) >>> 1
      if (inWindow(sketch.node(m).lo)) to = m else from = m + 1
    }
    from
  }

  private def addTo(delta: java.util.HashMap[ItemKey, java.lang.Long], s: ItemCounts, sign: Long): Unit = {
    var j = 0
    while (j < s.size) { delta.merge(keyOf(s.items(j)), sign * s.counts(j), OrderedTopK.Plus); j += 1 }
  }

  /** `bytes` as a key: the counted item's own key when `bytes` are its array. */
  private def keyOf(bytes: Array[Byte]): ItemKey = {
    val c = byArray.get(bytes)
    if (c != null) c.key else new ItemKey(bytes)
  }

  /** `counts` from nothing: the open rows, then every inside node. */
  private def rebuildView(): Unit = {
    counts.clear()
    byArray.clear()
    viewed.clear()
    straddlers.clear()
    straddlingMost = -1L
    sketch.takeChanges()
    insideError = openError
    val o = open.entrySet.iterator
    while (o.hasNext) { val e = o.next(); move(e.getKey, e.getValue.longValue) }
    insideFrom = firstInside()
    var i = 0
    while (i < sketch.nodeCount) {
      val n = sketch.node(i)
      if (i >= insideFrom) {
        viewed.put(n.summary, java.lang.Boolean.TRUE)
        addCounts(n.summary, 1L)
        insideError = Math.addExact(insideError, n.summary.error)
      } else if (reaches(n)) straddlers += n
      i += 1
    }
    answerValid = false
  }

  private def addCounts(s: ItemCounts, sign: Long): Unit = {
    var j = 0
    while (j < s.size) { move(keyOf(s.items(j)), sign * s.counts(j)); j += 1 }
  }

  /** A node before the window's start whose times reach into the window. */
  private def reaches(n: TopKNode): Boolean = inWindow(math.min(n.lo + ((1L << n.level) - 1), nowTs))

  private def inWindow(ts: Long): Boolean =
    ts <= nowTs && java.lang.Long.compareUnsigned(nowTs - ts, window) < 0

  /**
   * Moves `key`'s count by `by`; returns the key as `counts` holds it. Exact mode keeps the
   * ranking; bounded mode notes a rise for the last answer, and a fall voids it.
   */
  private def move(key: ItemKey, by: Long): ItemKey = {
    var c = counts.get(key)
    if (c == null) {
      if (by <= 0) return key
      c = new OrderedTopK.Count(key, 0L, nextId)
      nextId += 1
      counts.put(key, c)
      byArray.put(key.bytes, c)
    } else if (sketch == null) ranked.remove(c)
    c.count += by
    if (c.count <= 0) { counts.remove(key); byArray.remove(c.key.bytes) }
    if (sketch == null) { if (c.count > 0) ranked.add(c) }
    else if (by < 0) answerValid = false
    else if (answerValid) {
      raised += c
      // Past as many rises as items, recomputing the answer costs no more than updating it.
      if (raised.size > math.max(64, counts.size)) { answerValid = false; raised.clear() }
    }
    c.key
  }

  /**
   * The state as a live window stores it. Exact mode: whether a row was seen and now, then
   * the window's rows oldest first, each its time (the first as its age from now, the
   * others as steps forward) and its item (a varint length and the bytes). Bounded mode:
   * the byte 2, then the sketch's nodes, its pending leaves and the open rows exactly as
   * held, so a key resumed from them continues as one that never stopped
   * ([[SketchFormat.writeOrderedTopK]]).
   */
  private[core] def writeTo(out: ByteWriter): Unit =
    if (sketch != null) {
      out.byte(OrderedTopK.BoundedTag)
      val keys = open.keySet.toArray(new Array[ItemKey](0))
      java.util.Arrays.sort(keys, OrderedTopK.KeyOrder)
      SketchFormat.writeOrderedTopK(out, sketch, openTs, openRows, openError,
        keys.map(_.bytes), keys.map(k => open.get(k).longValue))
    } else {
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
        out.bytes(item)
        previous = t
        first = false
      }
    }

  /** Loads a bounded state ([[SketchFormat.readOrderedTopK]]'s parts, checked there). */
  private[core] def restoreBounded(s: SlidingTopK, rows: Long, error: Long,
      items: Array[Array[Byte]], itemCounts: Array[Long]): Unit = {
    sketch = s
    sketch.logChanges()
    seenAny = s.hasTime
    nowTs = s.now
    openTs = s.now
    openRows = rows
    openError = error
    items.indices.foreach(i => open.put(new ItemKey(items(i)), itemCounts(i)))
    rebuildView()
  }
}

object OrderedTopK {
  /** The same items with the same counts and bounds, in the same order. */
  private[core] def sameAnswer(a: Array[ItemCount], b: Array[ItemCount]): Boolean = {
    var same = a.length == b.length
    var i = 0
    while (same && i < a.length) {
      same = a(i).estimate == b(i).estimate && a(i).lower == b(i).lower &&
        a(i).upper == b(i).upper && java.util.Arrays.equals(a(i).item, b(i).item)
      i += 1
    }
    same
  }

  /**
   * The `k` first items offered, in `order`. A small k keeps them in a sorted array (a live
   * key's tick asks for a few of a dozen items, where a tree's nodes cost more than the
   * answer); past [[ArrayLimit]] a tree, whose inserts stay O(log k) when ties arrive in
   * any order. An item after the last of k full is passed over with one comparison; one
   * equal to a kept one is kept once.
   */
  private[core] final class FirstK(k: Int, order: java.util.Comparator[ItemCount], most: Int) {
    private val tree = if (k > ArrayLimit) new java.util.TreeSet[ItemCount](order) else null
    private val array = if (tree == null) new Array[ItemCount](math.min(k, most)) else null
    private var n = 0

    def size: Int = if (tree != null) tree.size else n
    def last: ItemCount = if (tree != null) tree.last else array(n - 1)

    def offer(a: ItemCount): Unit =
      if (size < k || order.compare(a, last) < 0) {
        if (tree != null) {
          tree.add(a)
          if (tree.size > k) tree.pollLast()
        } else {
          var low = 0
          var high = n
          while (low < high) {
            val mid = (low + high) >>> 1
            if (order.compare(array(mid), a) < 0) low = mid + 1 else high = mid
          }
          // An item offered twice (raised twice since the last answer) is kept once, as a
          // set keeps it; otherwise, when full, the last makes way.
          if (low == n || order.compare(array(low), a) != 0) {
            System.arraycopy(array, low, array, low + 1, (if (n < k) n else n - 1) - low)
            array(low) = a
            if (n < k) n += 1
          }
        }
      }

    def result: Array[ItemCount] =
      if (tree != null) tree.toArray(new Array[ItemCount](0))
      else if (n == array.length) array else java.util.Arrays.copyOf(array, n)
  }

  /** The largest k [[FirstK]] keeps in an array. */
  private val ArrayLimit = 32

  /** The first byte of a bounded live state; an exact one starts with 0 or 1. */
  private[core] val BoundedTag: Byte = 2

  /**
   * The most rows the exact mode holds: the largest power of two at most 8 / eps (512 at eps
   * 0.01). A row held costs about 60 bytes beside its item, the bounded form a few KB
   * (docs/top-k.md).
   */
  def exactLimit(eps: Double): Int = {
    var limit = 1
    while (2.0 * limit <= ExactScale / eps && limit < (1 << 24)) limit <<= 1
    limit
  }

  private val ExactScale = 8.0

  /**
   * Reads [[OrderedTopK.writeTo]]: exact rows in time order, each inside the window ending
   * at now (more than the exact limit turn it bounded, as they would have then), or a
   * bounded state.
   */
  private[core] def readFrom(window: Long, eps: Double, in: ByteReader): OrderedTopK = {
    val o = new OrderedTopK(window, eps)
    val hasTime = in.byte() match {
      case 0 => false
      case 1 => true
      case BoundedTag => SketchFormat.readOrderedTopK(o, in); return o
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
      o.add(t, in.take(size.toInt)) // in time order: each moves now up to t
      previous = t
      i += 1
    }
    if (hasTime) o.advanceTo(now)
    o
  }

  /** An item's count in [[OrderedTopK]]: `id` orders equal counts, in the order items came. */
  private final class Count(val key: ItemKey, var count: Long, val id: Long)

  private val ByCount: java.util.Comparator[Count] = (x, y) =>
    if (x.count != y.count) java.lang.Long.compare(y.count, x.count) else java.lang.Long.compare(x.id, y.id)

  private val Plus: java.util.function.BiFunction[java.lang.Long, java.lang.Long, java.lang.Long] =
    (a, b) => java.lang.Long.valueOf(a.longValue + b.longValue)

  private val KeyOrder: java.util.Comparator[ItemKey] =
    (a, b) => ItemCounts.compare(a.bytes, b.bytes)

  /** How answers list: estimate descending, then lower bound, then the item's value. */
  def answerOrder(itemType: String): java.util.Comparator[ItemCount] = {
    val items = ItemCounts.valueOrder(itemType)
    (x, y) =>
      if (x.estimate != y.estimate) java.lang.Long.compare(y.estimate, x.estimate)
      else if (x.lower != y.lower) java.lang.Long.compare(y.lower, x.lower)
      else items.compare(x.item, y.item)
  }
}

/**
 * The most frequent items of a sliding window as the top-k aggregates read them:
 * [[SlidingTopK]] in any order and through merges, [[OrderedTopK]] for rows in time order.
 */
trait TopKWindow extends SketchAxis {
  var microsecondTime: Boolean = false
  private var items = ""
  private var order = OrderedTopK.answerOrder("")
  /** The items' type (a catalog string, stored with a sketch): answers break ties by its values' order. */
  def itemType: String = items
  def itemType_=(name: String): Unit =
    if (name != items) { items = name; order = OrderedTopK.answerOrder(name) }
  /** How answers list: estimate descending, then lower bound, then the item's value. */
  protected def answerOrder: java.util.Comparator[ItemCount] = order
  /** Observes `item` at `ts` (moving `now` forward). */
  def add(ts: Long, item: Array[Byte]): Unit
  /** Observes a row without an item at `ts`. */
  def advanceTo(ts: Long): Unit
  def merge(other: TopKWindow): Unit
  /** The `k` items of the window ending at now with the largest estimates. */
  def top(k: Int): Array[ItemCount]
}

/** A live key's item counts, fed in time order and read at ticks ([[OrderedTopK]], [[SlicedTopK]]). */
trait LiveTopKWindow extends TopKWindow {
  /** True when the window holds no row with an item. */
  def isEmpty: Boolean
  /** True once the counts are bounded by eps rather than exact. */
  def isBounded: Boolean
  /** What [[windowsketch.core.LiveSlide.answerStamp]] says of [[top]]'s answer. */
  def answerStamp: AnyRef = null
  private[core] def writeTo(out: ByteWriter): Unit
}

/** An item's bytes as a hash key. */
final class ItemKey(val bytes: Array[Byte]) {
  override val hashCode: Int = ItemCounts.hash(bytes)
  override def equals(other: Any): Boolean = other match {
    case o: ItemKey => java.util.Arrays.equals(bytes, o.bytes)
    case _ => false
  }
}
