package windowsketch.core
package quantiles

import scala.collection.mutable.ArrayBuffer

import windowsketch.core.count.{DyadicWindowSketch, ExponentialHistogram}

/**
 * A group of rows' values, compacted as a KLL sketch compacts them (Karnin, Lang and
 * Liberty, FOCS 2016): level h holds values that each stand for 2^h rows. A level past its
 * capacity is sorted and its values paired off in order; one value of every pair, the
 * first or the second for all pairs by one coin, moves up a level (an odd one out, the
 * smallest, stays). For any x that changes the weight of the values <= x (or < x) by 0 or
 * +-2^h, by a fair coin: each compaction adds a term of mean 0 and size at most 2^h to any
 * rank estimate. The compactions done at each level are counted, so `spread` (the sum of
 * those 2^h: a certain bound on the rank error) and `variance` (the sum of their squares,
 * for Azuma's inequality) follow exactly. The weights add up to the group's row count.
 */
final class QuantileSummary private (
    // Level h's values while the summary changes; null while packed.
    private var levels: Array[Array[Double]],
    private[core] var sizes: Array[Int],
    private[core] var compactions: Array[Long]) {

  def this() = this(Array(new Array[Double](4)), Array(0), Array(0L))

  // Every level's values, level after level, each level ascending, while the summary is
  // settled (see [[pack]]); null while it changes.
  private var packed: Array[Double] = null

  def levelCount: Int = sizes.length

  /** Level h's values are `levelArray(h)` from `levelStart(h)`, `sizes(h)` of them. */
  def levelArray(h: Int): Array[Double] = if (packed != null) packed else levels(h)

  def levelStart(h: Int): Int =
    if (packed == null) 0
    else {
      var start = 0
      var l = 0
      while (l < h) { start += sizes(l); l += 1 }
      start
    }

  /** The sum of the compactions' 2^h: |estimated rank - rank| <= spread for every x. */
  def spread: Long = {
    var s = 0L
    var h = 0
    while (h < compactions.length) { s = Math.addExact(s, Math.multiplyExact(compactions(h), 1L << h)); h += 1 }
    s
  }

  /** The sum of the compactions' 4^h, level by level from level 0. */
  def variance: Double = {
    var v = 0.0
    var h = 0
    while (h < compactions.length) { v += compactions(h) * java.lang.Math.scalb(1.0, 2 * h); h += 1 }
    v
  }

  /** Values held, all levels. */
  def retained: Int = sizes.sum

  /** The rows the values stand for: sum of size(h) * 2^h. */
  def weight: Long = {
    var w = 0L
    var h = 0
    while (h < sizes.length) { w = Math.addExact(w, sizes(h).toLong << h); h += 1 }
    w
  }

  /** Adds one row's value, compacting to capacity `k` (within `budget`) when level 0 is full. */
  def insert(value: Double, k: Int, salt: Long, budget: Double): Unit = {
    append(0, value)
    if (sizes(0) > QuantileSummary.capacity(k, sizes.length - 1)) compress(k, salt, budget)
  }

  /** Takes in every value of `other`, level by level, and its compaction counts. */
  def addAll(other: QuantileSummary): Unit = {
    settledCapacity = -1
    if (other.sizes.length > sizes.length) grow(other.sizes.length)
    var h = 0
    while (h < other.sizes.length) {
      val values = other.levelArray(h)
      val from = other.levelStart(h)
      var i = 0
      while (i < other.sizes(h)) { append(h, values(from + i)); i += 1 }
      compactions(h) = Math.addExact(compactions(h), other.compactions(h))
      h += 1
    }
  }

  /**
   * Compacts every level past its capacity, lowest first: level h may hold
   * max(2, ceil(k (2/3)^(top - h))) values. A pass stops at the first compaction that
   * would take the variance past `budget` (a compaction at h adds 4^h whatever its coin).
   * The coin of a compaction mixes `salt` (the group), the level and the compactions done
   * there so far.
   */
  def compress(k: Int, salt: Long, budget: Double): Unit = {
    if (k == settledCapacity && budget < settledNeed) return
    // A compaction that opens a level lowers the capacities below it: pass again until a
    // pass compacts nothing, so a summary compressed twice is the summary compressed once.
    var compacted = true
    var need = Double.PositiveInfinity
    while (compacted) {
      compacted = false
      need = Double.PositiveInfinity
      var h = 0
      while (h < sizes.length && need == Double.PositiveInfinity) {
        if (sizes(h) > QuantileSummary.capacity(k, sizes.length - 1 - h)) {
          val after = variance + java.lang.Math.scalb(1.0, 2 * h)
          if (after > budget) need = after
          else { compact(h, salt); compacted = true }
        }
        h += 1
      }
    }
    settledCapacity = k
    settledNeed = need
  }

  // After a compress to capacity k that ended with nothing to compact below a variance of
  // `settledNeed` (infinite: nothing past capacity), a compress to k with a smaller budget
  // would do nothing: a compacting node re-checked on every compress skips the passes.
  // Any change to the values forgets it.
  private var settledCapacity = -1
  private var settledNeed = 0.0

  private def compact(h: Int, salt: Long): Unit = {
    unpack()
    val m = sizes(h)
    val a = levels(h)
    java.util.Arrays.sort(a, 0, m)
    val start = m & 1
    var i = start + QuantileSummary.coin(salt, h, compactions(h))
    while (i < m) { append(h + 1, a(i)); i += 2 }
    sizes(h) = start
    compactions(h) += 1
  }

  private def append(h: Int, value: Double): Unit = {
    unpack()
    settledCapacity = -1
    if (h >= sizes.length) grow(h + 1)
    if (sizes(h) == levels(h).length) levels(h) = java.util.Arrays.copyOf(levels(h), 2 * sizes(h))
    levels(h)(sizes(h)) = value
    sizes(h) += 1
  }

  private def grow(count: Int): Unit = {
    unpack()
    val from = sizes.length
    levels = java.util.Arrays.copyOf(levels, count)
    sizes = java.util.Arrays.copyOf(sizes, count)
    compactions = java.util.Arrays.copyOf(compactions, count)
    (from until count).foreach(l => levels(l) = new Array[Double](4))
  }

  /**
   * Holds the values in one array, each level sorted, until they change again. A settled
   * node (one compressed, not the leaf rows arrive at) then takes about what it writes: a
   * level's own array, grown by doubling to the values it once held, costs 16 bytes and
   * up to twice its values, and thousands of nodes hold a few values on each of a few levels.
   */
  def pack(): Unit =
    if (packed == null) {
      val all = new Array[Double](retained)
      var start = 0
      var h = 0
      while (h < sizes.length) {
        System.arraycopy(levels(h), 0, all, start, sizes(h))
        java.util.Arrays.sort(all, start, start + sizes(h))
        start += sizes(h)
        h += 1
      }
      packed = all
      levels = null
    }

  private def unpack(): Unit =
    if (packed != null) {
      var start = 0
      levels = Array.tabulate(sizes.length) { h =>
        val level = java.util.Arrays.copyOfRange(packed, start, start + math.max(4, sizes(h)))
        start += sizes(h)
        level
      }
      packed = null
    }

  /** A copy that shares nothing with this one. */
  def copy(): QuantileSummary =
    new QuantileSummary(
      Array.tabulate(sizes.length) { h =>
        val from = levelStart(h)
        java.util.Arrays.copyOfRange(levelArray(h), from, from + math.max(sizes(h), 4))
      }, sizes.clone(), compactions.clone())

  /** Level h's values, ascending (`Double.compare`): the order they are written in. */
  def sortedLevel(h: Int): Array[Double] = {
    val from = levelStart(h)
    val a = java.util.Arrays.copyOfRange(levelArray(h), from, from + sizes(h))
    if (packed == null) java.util.Arrays.sort(a)
    a
  }

  def compactionsAt(h: Int): Long = compactions(h)
}

object QuantileSummary {
  /** max(2, ceil(k (2/3)^depth)), in integers so that every reader computes the same. */
  def capacity(k: Int, depth: Int): Int =
    if (depth >= 30) 2
    else math.max(2L, ((k.toLong << depth) + PowersOfThree(depth) - 1) / PowersOfThree(depth)).toInt

  private val PowersOfThree = Array.iterate(1L, 30)(_ * 3)

  /** One bit of SplitMix64 over the group, the level and its compactions so far. */
  private[core] def coin(salt: Long, h: Int, done: Long): Int =
    (mix(salt ^ mix(done + h * 0x9E3779B97F4A7C15L)) >>> 63).toInt

  private[core] def mix(z0: Long): Long = {
    var z = z0
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL
    z ^ (z >>> 31)
  }

  /** Rebuilds from decoded parts: each level's values and compactions. */
  private[core] def restore(levels: Array[Array[Double]], compactions: Array[Long]): QuantileSummary =
    new QuantileSummary(levels.map(l => java.util.Arrays.copyOf(l, math.max(l.length, 4))),
      levels.map(_.length), compactions)
}

/** A dyadic time node of [[CompactQuantiles]]: its rows' values, compacted. */
final class QuantileNode(val level: Int, val lo: Long, val total: Long, val summary: QuantileSummary)
  extends DyadicNode

/**
 * A [[CompactQuantiles]]' pending nodes in arrival order. A leaf of one value (a running
 * frame's every row, in time order) is held as its time and value alone: as a node it
 * would take a node, a summary and three arrays, about 170 bytes, and a running frame holds
 * as many pending leaves as compressed nodes (thousands). It becomes a node when read.
 */
private[quantiles] final class PendingNodes {
  private var los = new Array[Long](16)
  private var values = new Array[Double](16)
  // The node at i, or null for a leaf of one value; null until a pending node is not one.
  private var held: Array[QuantileNode] = null
  private var count = 0

  def size: Int = count
  def isEmpty: Boolean = count == 0
  def nonEmpty: Boolean = count > 0
  private def heldAt(i: Int): QuantileNode = if (held == null) null else held(i)
  def level(i: Int): Int = if (heldAt(i) == null) 0 else held(i).level
  def lo(i: Int): Long = if (heldAt(i) == null) los(i) else held(i).lo

  def apply(i: Int): QuantileNode =
    if (heldAt(i) != null) held(i)
    else new QuantileNode(0, los(i), 1L, QuantileSummary.restore(Array(Array(values(i))), Array(0L)))

  def update(i: Int, node: QuantileNode): Unit = {
    if (held == null) held = new Array[QuantileNode](los.length)
    held(i) = node
  }

  def addLeaf(lo: Long, value: Double): Unit = {
    if (count == los.length) {
      los = java.util.Arrays.copyOf(los, 2 * count)
      values = java.util.Arrays.copyOf(values, 2 * count)
      if (held != null) held = java.util.Arrays.copyOf(held, 2 * count)
    }
    los(count) = lo
    values(count) = value
    if (held != null) held(count) = null
    count += 1
  }

  def +=(node: QuantileNode): Unit = {
    val s = node.summary
    if (node.level == 0 && node.total == 1 && s.levelCount == 1 && s.sizes(0) == 1 && s.compactionsAt(0) == 0) {
      addLeaf(node.lo, s.levelArray(0)(0))
    } else {
      addLeaf(node.lo, 0.0)
      update(count - 1, node)
    }
  }

  def iterator: Iterator[QuantileNode] = Iterator.range(0, count).map(apply)

  /** Every pending node as a node, for a compress. */
  def nodes: ArrayBuffer[QuantileNode] = {
    val out = new ArrayBuffer[QuantileNode](count)
    var i = 0
    while (i < count) { out += apply(i); i += 1 }
    out
  }
}

/**
 * One answer of [[CompactQuantiles]] for a window: per percentage the estimate, and
 * `lower` and `upper`, values of the window that bracket the exact percentile with
 * probability at least 1 - 10^-9 (where `hasLower` / `hasUpper` say one was found: with
 * too many straddling rows no held value qualifies). With them what the guarantee is
 * computed from: `inside` rows of the nodes wholly in the window, `straddling` rows of the
 * nodes across its start, the inside nodes' `spread` (a certain bound on their rank error)
 * and `variance`. No estimate (an empty array) when no inside node holds a value.
 */
final class CompactAnswer(val estimates: Array[Double], val lower: Array[Double],
    val upper: Array[Double], val hasLower: Array[Boolean], val hasUpper: Array[Boolean],
    val inside: Long, val straddling: Long, val spread: Long, val variance: Double) {
  /** The window's row count lies in [inside, inside + straddling]; this is the middle. */
  def count: Long = inside + straddling / 2
}

/**
 * Percentiles of the sliding window `(now - window, now]` in bounded space, in any order
 * and through merges (design, guarantee and proof: docs/percentiles.md, "Compact mode").
 *
 * Time is cut into dyadic nodes as in [[DyadicWindowSketch]]; each node holds its row count
 * and a [[QuantileSummary]] of its values. A subtree collapses into its root w only when
 * (I) n_T + 1 <= c n_R, with T the rows of w's subtree and ancestors, R those of the nodes
 * wholly after w and c = eps / 3, so the nodes straddling a window's start hold at most
 * c n rows. A node's summary is compacted towards capacity
 * k_top / 2^floor(2/3 log2(c n_R / n_w)) (old nodes, small beside the rows after them,
 * need less precision: Arasu and Manku, PODS 2004, size a block's summary by the window,
 * not by the block), but only while (B) its variance stays within [[budget]].
 *
 * A query reads the values of the nodes wholly inside the window. With probability at
 * least 1 - 2 delta (fair coins), the answer's rank is within
 * c n + sqrt(2 V ln(2 / delta)) + 1 of p n, V being the inside nodes' variance; (B) keeps
 * V <= eps^2 n^2 / 45, so that is within eps n at delta = 10^-4 (docs/percentiles.md), and
 * [[CompactAnswer]] carries what it is computed from so tests check it on every output.
 */
final class CompactQuantiles(val window: Long, val eps: Double) extends SketchAxis {
  ExponentialHistogram.checkParameters(window, eps)

  var microsecondTime = false

  /**
   * Pending nodes a compress waits for, per compressed node. The first answer after a
   * compress rebuilds the answering view (a sort of every held value), so a window
   * answered at every row and never written (a running frame's) waits for
   * [[CompactQuantiles.InMemoryPendingPerNode]] per node: a quarter of the rebuilds, for
   * up to that many pending leaves of 16 bytes each (and their values in the view). Sketches
   * that are written keep 1, as the Python reader does, so both write the same bytes.
   */
  var pendingPerNode = 1

  val height: Int = DyadicWindowSketch.heightFor(window)
  /** The straddling nodes' share of a window's rows, at most. */
  val check: Double = eps / 3
  /** The capacity of the summaries of internal nodes as large as (I) allows (before (B)). */
  val topCapacity: Int = CompactQuantiles.topCapacityFor(eps)
  /** The capacity of a leaf's summary: one timestamp's rows may be the whole window. */
  val leafCapacity: Int = CompactQuantiles.leafCapacityFor(eps)

  private var nodes = new ArrayBuffer[QuantileNode]()
  private var pending = new PendingNodes
  private var seenAny = false
  private var nowTs = 0L

  // Answers per row in time order (a running frame) read a view instead of sorting every
  // held value: the values of the compressed nodes from `viewFrom` on with their weights,
  // built at the first answer after a compress, a node's values taken out as it leaves the
  // window; with them the pending leaves' values, added as rows arrive, while every pending
  // node is a leaf of weight-1 values added in time order. `view` is null when not built.
  private var view: WeightedValues = null
  private var viewFrom = -1
  private var viewSpread = 0L
  private var viewVariance = 0.0
  private var viewStraddlers = Array.emptyIntArray
  private val pendingValues = new SortedBlocks
  private var pendingInOrder = true

  def hasTime: Boolean = seenAny
  def now: Long = nowTs

  def nodeCount: Int = nodes.size + pending.size

  /** Values held, all nodes. */
  def retained: Long = (nodes.iterator ++ pending.iterator).map(_.summary.retained.toLong).sum

  /**
   * Adds `value` at `ts`, in any order. Values rank as `java.lang.Double.compare` does;
   * every NaN is held as the canonical one, so equal states write equal bytes.
   */
  def add(ts: Long, x: Double): Unit = {
    val value = if (java.lang.Double.isNaN(x)) Double.NaN else x
    advanceTo(ts)
    if (afterEdge(ts)) {
      val lastAt = pending.size - 1
      // Rows of one timestamp share a leaf.
      if (lastAt >= 0 && pending.level(lastAt) == 0 && pending.lo(lastAt) == ts) {
        val last = pending(lastAt)
        last.summary.insert(value, leafCapacity, CompactQuantiles.salt(0, ts), budget(last.total + 1, 0L))
        pending(lastAt) = new QuantileNode(0, ts, last.total + 1, last.summary)
        notePendingValue(value, last.summary.levelCount > 1)
      } else {
        // A leaf's first value never compacts (capacities are at least 2).
        if (lastAt >= 0 && (pending.level(lastAt) != 0 || pending.lo(lastAt) > ts)) pendingInOrder = false
        notePendingValue(value, compacted = false)
        pending.addLeaf(ts, value)
        compressIfDue() // may compress, which clears them
      }
    }
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) { nowTs = ts; seenAny = true }

  def merge(other: CompactQuantiles): Unit = {
    if (other.window != window || other.eps != eps || other.microsecondTime != microsecondTime) {
      throw new IllegalArgumentException(
        s"cannot merge percentile sketches of (window, eps) ($window, $eps) and " +
          s"(${other.window}, ${other.eps})" +
          (if (other.microsecondTime != microsecondTime) " on different time axes" else ""))
    }
    if (other.seenAny) advanceTo(other.nowTs)
    (other.nodes.iterator ++ other.pending.iterator).foreach { n =>
      addPending(new QuantileNode(n.level, n.lo, n.total, n.summary.copy()))
    }
    // Foreign nodes added since the last compress wait in pending, outside the view:
    // answers sort every held value until the next compress.
    if (pending.nonEmpty) pendingInOrder = false
  }

  /**
   * The answers for the window ending at now: the same as [[answerAt]], from the view
   * while the rows came in time order, so a running frame's row costs a few binary
   * searches plus its share of the view's rebuilds.
   */
  def answer(ps: Array[Double], bounds: Boolean = true): CompactAnswer =
    if (pendingInOrder && (pending.isEmpty || afterStart(pending.lo(0)))) answerFromView(ps, bounds)
    else answerAt(ps, nowTs, window, bounds)

  /** True if `ts` (at most now) lies inside the window ending at now. */
  private def afterStart(ts: Long): Boolean = java.lang.Long.compareUnsigned(nowTs - ts, window) < 0

  private def notePendingValue(value: Double, compacted: Boolean): Unit =
    if (pendingInOrder) {
      if (compacted) pendingInOrder = false // a burst's leaf compacted
      else if (view != null) view.addExtra(value)
      else pendingValues.insert(value)
    }

  private def answerFromView(ps: Array[Double], bounds: Boolean): CompactAnswer = {
    ps.foreach(p => require(p >= 0 && p <= 1, s"percentage must be in [0, 1], got $p"))
    // The compressed nodes inside the window are a suffix: pre-order sorts them by lo.
    val from = HeldValues.firstTrue(nodes.size, i => afterStart(nodes(i).lo))
    if (view == null) buildView(from) else if (from != viewFrom) leaveView(from)
    var straddling = 0L
    viewStraddlers.foreach { i =>
      val node = nodes(i)
      if (afterStart(math.min(last(node.level, node.lo), nowTs)) && !afterStart(node.lo)) {
        straddling = Math.addExact(straddling, node.total)
      }
    }
    view.answer(ps, view.total, straddling, viewSpread, viewVariance, bounds)
  }

  /**
   * The answers for the window `(end - length, end]` (any `length` up to `window`, any
   * `end` from now on), from the values of the nodes wholly inside it ([[HeldValues]]),
   * the nodes straddling its start counted apart.
   */
  def answerAt(ps: Array[Double], end: Long, length: Long, bounds: Boolean = true): CompactAnswer = {
    require(length > 0 && length <= window, s"sub-window $length must be in [1, $window]")
    require(!seenAny || end >= nowTs, s"the window must end at or after now ($nowTs), not $end")
    ps.foreach(p => require(p >= 0 && p <= 1, s"percentage must be in [0, 1], got $p"))
    def starts(ts: Long): Boolean = ts <= end && java.lang.Long.compareUnsigned(end - ts, length) < 0
    var inside = 0L
    var straddling = 0L
    var spread = 0L
    var variance = 0.0
    val insideNodes = new ArrayBuffer[QuantileNode]()
    (nodes.iterator ++ pending.iterator).foreach { node =>
      if (starts(node.lo)) {
        insideNodes += node
        inside = Math.addExact(inside, node.total)
        spread = Math.addExact(spread, node.summary.spread)
        variance += node.summary.variance
      } else if (node.lo < end && starts(math.min(last(node.level, node.lo), end))) {
        straddling = Math.addExact(straddling, node.total)
      }
    }
    HeldValues.of(insideNodes.iterator.map(_.summary)).answer(ps, inside, straddling, spread, variance, bounds)
  }

  /**
   * The view of the compressed nodes from `from` on: their values with their weights
   * ([[HeldValues.of]]) and the pending values, then what [[leaveView]] sets.
   */
  private def buildView(from: Int): Unit = {
    view = HeldValues.of(nodes.iterator.drop(from).map(_.summary))
    var i = 0
    while (i < pendingValues.size) { view.addExtra(pendingValues.select(i)); i += 1 }
    pendingValues.clear()
    viewFrom = from
    summarizeView()
  }

  /** Takes the values of the nodes before `from` out of the view (they left the window). */
  private def leaveView(from: Int): Unit = {
    var i = viewFrom
    while (i < from) {
      val summary = nodes(i).summary
      var h = 0
      while (h < summary.levelCount) {
        val values = summary.levelArray(h)
        var j = summary.levelStart(h)
        val end = j + summary.sizes(h)
        while (j < end) { view.subtract(values(j), 1L << h); j += 1 }
        h += 1
      }
      i += 1
    }
    viewFrom = from
    summarizeView()
  }

  /**
   * The view's nodes' spread and variance, summed in node order (as [[answerAt]] sums
   * them), and the nodes before them that reach into the window.
   */
  private def summarizeView(): Unit = {
    var spread = 0L
    var variance = 0.0
    var i = viewFrom
    while (i < nodes.size) {
      val summary = nodes(i).summary
      spread = Math.addExact(spread, summary.spread)
      variance += summary.variance
      i += 1
    }
    viewSpread = spread
    viewVariance = variance
    viewStraddlers = (0 until viewFrom).filter { j =>
      afterStart(math.min(last(nodes(j).level, nodes(j).lo), nowTs))
    }.toArray
  }

  /**
   * The most variance a node of `rows` rows, with `rowsAfter` rows in nodes wholly after
   * it, may carry: eps^2 m (m + 2 r) / 45. Over the nodes inside a window these add up to
   * at most eps^2 n_L^2 / 45 (docs/percentiles.md, "Compact mode", step 4).
   */
  private[core] def budget(rows: Long, rowsAfter: Long): Double = CompactQuantiles.budgetFor(eps, rows, rowsAfter)

  private def afterEdge(ts: Long): Boolean =
    ts > nowTs || java.lang.Long.compareUnsigned(nowTs - ts, window) < 0

  private def last(level: Int, lo: Long): Long = lo + ((1L << level) - 1)

  private def addPending(node: QuantileNode): Unit = {
    pending += node
    compressIfDue()
  }

  // Amortized: compress once the pending nodes number `pendingPerNode` a compressed one.
  private def compressIfDue(): Unit =
    if (pending.size >= math.max(CompactQuantiles.MinPending, pendingPerNode * nodes.size)) compress()

  /**
   * Folds the pending nodes in (equal nodes unioned, expired ones dropped), collapses, and
   * compacts each node as far as its capacity and its variance budget allow.
   */
  def compress(): Unit = {
    gatherSorted()
    collapse()
    compactNodes()
    view = null
    pendingValues.clear()
    pendingInOrder = true
  }

  private def gatherSorted(): Unit = {
    nodes = DyadicNodes.gather[QuantileNode](nodes, pending.nodes, afterEdge, { (previous, node) =>
      previous.summary.addAll(node.summary)
      new QuantileNode(node.level, node.lo, Math.addExact(previous.total, node.total), previous.summary)
    })
    pending = new PendingNodes
  }

  /**
   * Collapses what (I) allows: a leaf, or a subtree that is one node already at its root's
   * level, stays as it is; otherwise the subtree's summaries are unioned into the root.
   */
  private def collapse(): Unit = {
    val from = nodes
    nodes = DyadicNodes.collapse[QuantileNode](from, height, check, { (k, lo, a, b, rows, _) =>
      if (k == 0 || (b - a == 1 && from(a).level == k)) from(a)
      else {
        val summary = new QuantileSummary()
        var j = a
        while (j < b) { summary.addAll(from(j).summary); j += 1 }
        new QuantileNode(k, lo, rows, summary)
      }
    })
  }

  /**
   * Compacts every node to its capacity (a leaf's, or the internal one for its rows and
   * the rows wholly after it), each compaction only while the node's variance stays within
   * its [[budget]]. Rows after a node only grow, so an old node compacts further as the
   * window fills after it.
   */
  private def compactNodes(): Unit = {
    val after = new Array[Long](nodes.size + 1)
    var i = nodes.size - 1
    while (i >= 0) { after(i) = Math.addExact(after(i + 1), nodes(i).total); i -= 1 }
    val los = nodes.map(_.lo).toArray
    i = 0
    while (i < nodes.size) {
      val node = nodes(i)
      val end = last(node.level, node.lo)
      // Usually the next node starts after this one; an ancestor of nodes after it searches.
      val next = if (i + 1 == nodes.size || los(i + 1) > end) i + 1
        else NodeOrder.firstAfter(los, end, i + 1, nodes.size)
      val rowsAfter = after(next)
      val capacity = if (node.level == 0) leafCapacity
        else CompactQuantiles.capacityFor(topCapacity, check, node.total, rowsAfter)
      node.summary.compress(capacity, CompactQuantiles.salt(node.level, node.lo), budget(node.total, rowsAfter))
      node.summary.pack()
      i += 1
    }
  }

  /** The nodes after one [[compress]], in pre-order. */
  def compressedNodes: Seq[QuantileNode] = { compress(); nodes.toSeq }

  /** The compressed nodes as held, in pre-order, and the pending ones in arrival order. */
  private[core] def heldNodes: Seq[QuantileNode] = nodes.toSeq
  private[core] def pendingNodes: Seq[QuantileNode] = pending.nodes.toSeq

  /**
   * Puts back the pending leaves of a state read exactly as held, after [[restore]]: a
   * running frame's sorted pending values follow from them, as they did when they came.
   */
  private[core] def restorePending(leaves: ArrayBuffer[QuantileNode]): Unit = {
    pending = new PendingNodes
    leaves.foreach { leaf =>
      pending += leaf
      if (leaf.summary.levelCount > 1) pendingInOrder = false
      val values = leaf.summary.levelArray(0)
      var i = leaf.summary.levelStart(0)
      while (pendingInOrder && i < leaf.summary.sizes(0)) { notePendingValue(values(i), compacted = false); i += 1 }
    }
  }

  private[core] def restore(hasTime: Boolean, now: Long, restored: ArrayBuffer[QuantileNode]): Unit = {
    seenAny = hasTime
    nowTs = now
    nodes = restored
    pending = new PendingNodes
    view = null
    pendingValues.clear()
    pendingInOrder = true
  }

  /**
   * Checks the compressed nodes: each a positive row count equal to its summary's weight,
   * then the dyadic structure and (I) ([[NodeOrder.structureProblem]]).
   */
  def checkInvariant(leftAllowed: Boolean = false): Option[String] = {
    if (pending.nonEmpty) return Some("uncompressed nodes")
    var total = 0L
    var i = 0
    while (i < nodes.size) {
      val node = nodes(i)
      val weight = try node.summary.weight catch { case _: ArithmeticException => -1L }
      if (node.total < 1 || total + node.total < total || weight != node.total) {
        return Some(s"invalid values at node $i")
      }
      total += node.total
      i += 1
    }
    NodeOrder.structureProblem(nodes.map(_.level).toArray, nodes.map(_.lo).toArray,
      nodes.map(_.total).toArray, height, nowTs, window, check, leftAllowed)
  }
}

object CompactQuantiles {
  private val MinPending = 64

  /** [[CompactQuantiles.pendingPerNode]] of a window held only in memory, answered per row. */
  val InMemoryPendingPerNode = 4
  /**
   * A node of m rows with r rows wholly after it may have variance at most
   * eps^2 m (m + 2 r) / 45: over the nodes inside a window of n_L rows these sum to at
   * most eps^2 n_L^2 / 45, so sqrt(2 V ln(2 / 10^-4)) <= 0.664 eps n_L.
   */
  private val BudgetScale = 1.0 / 45

  /** [[CompactQuantiles.budget]] at `eps`: eps^2 m (m + 2 r) / 45. */
  private[core] def budgetFor(eps: Double, rows: Long, rowsAfter: Long): Double =
    BudgetScale * eps * eps * rows.toDouble * (rows.toDouble + 2.0 * rowsAfter.toDouble)

  /**
   * k_top for eps: small enough that (B), not the capacity, decides how far the nodes that
   * matter compact (a larger one held more values in 10^5 to 10^7-row windows; smaller
   * ones held the same).
   */
  def topCapacityFor(eps: Double): Int =
    math.max(MinCapacity.toLong, math.min(1L << 16, math.ceil(TopCapacityScale / eps).toLong)).toInt

  private val TopCapacityScale = 0.25

  /**
   * A leaf's capacity: one timestamp's rows may be the whole window, and (B) allows a leaf
   * of c rows V <= eps^2 c^2 / 45; a KLL summary of c rows at capacity k has
   * V <= 2 (c / k)^2 (measured), so at 12 / eps (B) rarely refuses a leaf's compaction.
   */
  def leafCapacityFor(eps: Double): Int =
    math.max(MinCapacity.toLong, math.min(1L << 16, math.ceil(12.0 / eps).toLong)).toInt

  /** A collapsed node's capacity: k_top / 2^floor(2/3 log2(c n_R / n_w)), at least 8. */
  private[core] def capacityFor(top: Int, check: Double, rows: Long, rowsAfter: Long): Int = {
    val ratio = math.max(1L, (check * rowsAfter).toLong / math.max(rows, 1L))
    val log2 = 63 - java.lang.Long.numberOfLeadingZeros(ratio)
    math.max(MinCapacity, top >> math.min(30, 2 * log2 / 3))
  }

  private val MinCapacity = 8

  /**
   * The most values a window holds exactly: the largest power of two at most 64 / eps
   * (4,096 at eps 0.01, 512 at 0.1). There the exact form (about 10 bytes a value written,
   * 16 to 32 in memory) is no larger than the compact one, which holds about as many values
   * until its leaves (12 / eps values) compact (measured: docs/percentiles.md); past it
   * the compact form holds the window, in memory and in bytes.
   */
  def exactLimit(eps: Double): Int = {
    val target = ExactScale / eps
    var limit = 1
    while (2.0 * limit <= target && limit < SlidingQuantiles.MaxValues) limit <<= 1
    limit
  }

  private val ExactScale = 64.0

  /**
   * The most values a window held only in memory (a running frame's) keeps exactly: the
   * largest power of two at most 320 / eps, at most 2^16 (16,384 at eps 0.01). There its
   * heap (16 to 32 bytes a value) is below the compact mode's, whose nodes are objects
   * (measured: docs/percentiles.md, "Costs").
   */
  def orderedExactLimit(eps: Double): Int = {
    var limit = 1
    while (2.0 * limit <= OrderedExactScale / eps && limit < (1 << 16)) limit <<= 1
    limit
  }

  private val OrderedExactScale = 320.0

  /** Coins differ between nodes: the salt mixes the node's level and start. */
  private[core] def salt(level: Int, lo: Long): Long = QuantileSummary.mix(lo * 0x9E3779B97F4A7C15L + level)

  /**
   * The rank slack of the bounds: ceil(sqrt(2 V ln(2 * 10^9))). By Azuma's inequality a
   * rank estimate at a fixed value is off by more than it with probability at most
   * 5 * 10^-10 (the log is a literal so every reader computes the same).
   */
  private[core] def boundSlack(variance: Double): Long =
    math.ceil(math.sqrt(2 * variance * LogTwoBillion)).toLong

  private val LogTwoBillion = 21.416413017506358

  /** 1-based rank max(1, ceil(p n)) (Spark's), as a long. */
  private[core] def rank(p: Double, n: Long): Long = math.max(1L, math.ceil(p * n).toLong)
}

/**
 * What an answer reads: distinct held values ascending (`Double.compare`) with their
 * weights, and `extra` weight-1 values added as they come (a running frame's pending
 * leaves). A Fenwick tree over slots 0 .. m gives each selection in O(log m): slot s holds
 * the extras in [value s - 1, value s) and then value s (an extra after the values equal to
 * it; slot m only extras), so slots are in value order and the first slot whose prefix
 * weight reaches t holds the smallest value whose weight at or below reaches t: one of its
 * extras, found in `extra`, or its value. Every selection depends only on the multiset of
 * (value, weight), so any split into the two gives the same answers.
 */
private[core] final class WeightedValues(values: Array[Double], weights: Array[Long]) {
  private val m = values.length
  // 1-based: slot s at s + 1. Every entry is a sum of weights, at most the total: ints
  // while the total stays below 2^31 (`narrow`, half the view's heap), else longs (`wide`).
  private val slots = m + 2
  private var narrow: Array[Int] = null
  private var wide: Array[Long] = null
  private val extra = new SortedBlocks
  private var weight = 0L

  {
    val tree = new Array[Long](slots)
    var i = 0
    while (i < m) { tree(i + 1) = weights(i); weight = Math.addExact(weight, weights(i)); i += 1 }
    i = 1
    while (i < slots) {
      val parent = i + (i & -i)
      if (parent < slots) tree(parent) += tree(i)
      i += 1
    }
    if (weight < Int.MaxValue) narrow = tree.map(_.toInt) else wide = tree
  }

  /** The weight held. */
  def total: Long = weight

  /** Adds a weight-1 value. */
  def addExtra(x: Double): Unit = {
    if (narrow != null && weight + 1 >= Int.MaxValue) { wide = narrow.map(_.toLong); narrow = null }
    extra.insert(x)
    add(SlidingQuantiles.upperBound(values, m, x), 1L)
    weight += 1
  }

  /** Takes `w` off value `x`, which holds at least that. */
  def subtract(x: Double, w: Long): Unit = {
    add(HeldValues.lowerBound(values, m, x), -w)
    weight -= w
  }

  private def add(q: Int, w: Long): Unit = {
    var i = q + 1
    if (narrow != null) {
      val d = w.toInt // |w| is at most the total
      while (i < slots) { narrow(i) += d; i += i & -i }
    } else while (i < slots) { wide(i) += w; i += i & -i }
  }

  private def entry(i: Int): Long = if (narrow != null) narrow(i) else wide(i)

  /** The weight at slots 0 .. q. */
  private def prefix(q: Int): Long = {
    var sum = 0L
    var i = q + 1
    while (i > 0) { sum += entry(i); i -= i & -i }
    sum
  }

  /** The first slot whose prefix weight reaches t >= 1 (t at most the total). */
  private def firstReaching(t: Long): Int = {
    var position = 0
    var rest = t
    var step = Integer.highestOneBit(slots - 1)
    while (step > 0) {
      val next = position + step
      if (next < slots && entry(next) < rest) { position = next; rest -= entry(next) }
      step >>>= 1
    }
    position // 1-based `position + 1` is the answer's index: its 0-based position is `position`
  }

  /** The value slot s reaches `t` at: one of its extras, or its held value. */
  private def valueAt(s: Int, t: Long): Double = {
    val before = if (s == 0) 0 else extra.countBelow(values(s - 1))
    val upTo = if (s == m) extra.size else extra.countBelow(values(s))
    val rest = t - prefix(s - 1)
    if (rest <= upTo - before) extra.select((before + rest - 1).toInt) else values(s)
  }

  /** Held weight at or below `y`. */
  private def weightAtMost(y: Double): Long = {
    val s = SlidingQuantiles.upperBound(values, m, y)
    prefix(s - 1) + extra.countAtMost(y) - (if (s == 0) 0 else extra.countBelow(values(s - 1)))
  }

  /** The smallest held value whose weight at or below reaches `t` (else the largest). */
  private def smallestReaching(t: Long): Double = {
    val target = math.min(math.max(t, 1L), weight)
    val q = firstReaching(target)
    valueAt(q, target)
  }

  /**
   * The largest held value with less than `limit` weight below it, or null: the one at the
   * first slot reaching `limit` (every value before it is no larger; one after it that
   * is larger has that weight below it), or the largest when none reaches it.
   */
  private def largestBelow(limit: Long): java.lang.Double =
    if (limit <= 0) null
    else {
      val target = math.min(limit, weight)
      valueAt(firstReaching(target), target)
    }

  /**
   * Per percentage p, with t = max(1, ceil(p n_L)): the estimate is the smallest held value
   * whose weight at or below reaches t. Lower is the largest held v with
   * W(< v) + slack + X < t, upper the smallest held u with W(<= u) - slack >= the largest
   * possible target: a bound that is wrong would have a rank estimate off by more than the
   * slack at the exact percentile (docs/percentiles.md, "Bounds"). Without `bounds`, only
   * the estimates.
   */
  def answer(ps: Array[Double], inside: Long, straddling: Long, spread: Long,
      variance: Double, bounds: Boolean): CompactAnswer = {
    val estimates = new Array[Double](ps.length)
    val lower = new Array[Double](ps.length)
    val upper = new Array[Double](ps.length)
    val hasLower = new Array[Boolean](ps.length)
    val hasUpper = new Array[Boolean](ps.length)
    val slack = CompactQuantiles.boundSlack(variance)
    var j = 0
    while (weight > 0 && j < ps.length) {
      val t = CompactQuantiles.rank(ps(j), inside)
      estimates(j) = smallestReaching(t)
      if (bounds) {
        val lo = largestBelow(t - slack - straddling)
        if (lo != null) { lower(j) = lo; hasLower(j) = true }
        val highest = CompactQuantiles.rank(ps(j), inside + straddling)
        val u = smallestReaching(highest + slack)
        if (weightAtMost(u) - slack >= highest) { upper(j) = u; hasUpper(j) = true }
      }
      j += 1
    }
    new CompactAnswer(if (weight == 0) Array.emptyDoubleArray else estimates, lower, upper,
      hasLower, hasUpper, inside, straddling, spread, variance)
  }
}

private[core] object HeldValues {
  /**
   * The values of `summaries` with their weights: each level's sorted, then the levels
   * merged pairwise (O(m log levels)), equal values (in `Double.compare` order) combined.
   */
  def of(summaries: Iterator[QuantileSummary]): WeightedValues = {
    // Plain arrays throughout: a live key builds this view at every tick its window changes.
    val held = new scala.collection.mutable.ArrayBuffer[QuantileSummary]()
    summaries.foreach(held += _)
    var levels = 0
    held.foreach(summary => levels = math.max(levels, summary.levelCount))
    val sizes = new Array[Int](levels)
    held.foreach { summary => var h = 0; while (h < summary.levelCount) { sizes(h) += summary.sizes(h); h += 1 } }
    val perLevel = new Array[Array[Double]](levels)
    var h = 0
    while (h < levels) { perLevel(h) = new Array[Double](sizes(h)); sizes(h) = 0; h += 1 }
    held.foreach { summary =>
      h = 0
      while (h < summary.levelCount) {
        System.arraycopy(summary.levelArray(h), summary.levelStart(h), perLevel(h), sizes(h), summary.sizes(h))
        sizes(h) += summary.sizes(h)
        h += 1
      }
    }
    if (levels == 0) return new WeightedValues(Array.emptyDoubleArray, Array.emptyLongArray)
    val runs = new Array[(Array[Double], Array[Long])](levels)
    h = 0
    while (h < levels) {
      val values = perLevel(h)
      java.util.Arrays.sort(values)
      val weights = new Array[Long](values.length)
      java.util.Arrays.fill(weights, 1L << h)
      runs(h) = combined(values, weights, values.length)
      h += 1
    }
    val (values, weights) = MergeTree.merge(runs, mergeRuns)
    new WeightedValues(values, weights)
  }

  /** Sorted values with weights, equal neighbours combined. */
  private def combined(values: Array[Double], weights: Array[Long], n: Int): (Array[Double], Array[Long]) = {
    var distinct = 0
    var i = 0
    while (i < n) {
      if (distinct > 0 && java.lang.Double.compare(values(distinct - 1), values(i)) == 0) {
        weights(distinct - 1) += weights(i)
      } else { values(distinct) = values(i); weights(distinct) = weights(i); distinct += 1 }
      i += 1
    }
    (java.util.Arrays.copyOf(values, distinct), java.util.Arrays.copyOf(weights, distinct))
  }

  private def mergeRuns(a: (Array[Double], Array[Long]), b: (Array[Double], Array[Long])): (Array[Double], Array[Long]) = {
    val (av, aw) = a
    val (bv, bw) = b
    val values = new Array[Double](av.length + bv.length)
    val weights = new Array[Long](values.length)
    var i = 0
    var j = 0
    var k = 0
    while (i < av.length || j < bv.length) {
      if (j == bv.length || (i < av.length && java.lang.Double.compare(av(i), bv(j)) <= 0)) {
        values(k) = av(i); weights(k) = aw(i); i += 1
      } else { values(k) = bv(j); weights(k) = bw(j); j += 1 }
      k += 1
    }
    combined(values, weights, k)
  }

  /** The first i in [0, n) where `test` (false, then true) holds; n if none. */
  def firstTrue(n: Int, test: Int => Boolean): Int = {
    var low = 0
    var high = n
    while (low < high) {
      val m = (low + high) >>> 1
      if (test(m)) high = m else low = m + 1
    }
    low
  }

  /** The first index in `a(0 until n)` whose value is not below `value`. */
  def lowerBound(a: Array[Double], n: Int, value: Double): Int =
    firstTrue(n, i => java.lang.Double.compare(a(i), value) >= 0)
}
