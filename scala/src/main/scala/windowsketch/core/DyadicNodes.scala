package windowsketch.core

import scala.collection.mutable.ArrayBuffer

/** A dyadic time node of the sketches whose nodes carry a summary (top-k, percentiles). */
trait DyadicNode {
  def level: Int
  def lo: Long
  def total: Long
}

/**
 * The node arithmetic those sketches share: `gather` folds pending nodes into the sorted
 * ones, `collapse` collapses every subtree (I) n_T + 1 <= check n_R allows. How summaries
 * combine is the family's (`combine`, `fold`).
 */
private[core] object DyadicNodes {
  private def last(level: Int, lo: Long): Long = lo + ((1L << level) - 1)

  /**
   * The nodes and the pending ones (sorted, stably) merged in pre-order, equal nodes
   * combined, nodes whose last time fails `inWindow` dropped (and passed to `dropped`).
   */
  def gather[N <: DyadicNode](nodes: ArrayBuffer[N], pending: ArrayBuffer[N],
      inWindow: Long => Boolean, combine: (N, N) => N, dropped: N => Unit = (_: N) => ()): ArrayBuffer[N] = {
    // Stable: equal nodes keep their order. Rows in time order bring them sorted already.
    val inOrder = (1 until pending.size).forall(i =>
      !NodeOrder.before(pending(i).level, pending(i).lo, pending(i - 1).level, pending(i - 1).lo))
    val sortedPending = if (inOrder) pending else pending.sortBy(n => (n.lo, -n.level))
    val out = new ArrayBuffer[N](nodes.size + pending.size)
    var a = 0
    var b = 0
    while (a < nodes.size || b < sortedPending.size) {
      val fromPending = a == nodes.size || (b < sortedPending.size &&
        NodeOrder.before(sortedPending(b).level, sortedPending(b).lo, nodes(a).level, nodes(a).lo))
      val node = if (fromPending) { b += 1; sortedPending(b - 1) } else { a += 1; nodes(a - 1) }
      if (inWindow(last(node.level, node.lo))) {
        if (out.nonEmpty && out.last.level == node.level && out.last.lo == node.lo) {
          out(out.size - 1) = combine(out.last, node)
        } else out += node
      } else dropped(node)
    }
    out
  }

  /**
   * One top-down pass over the sorted nodes: each maximal subtree, at node (k, lo) over
   * nodes [a, b), that (I) allows (or a leaf) becomes `fold(k, lo, a, b, rows, rowsAfter)`.
   */
  def collapse[N <: DyadicNode](nodes: ArrayBuffer[N], height: Int, check: Double,
      fold: (Int, Long, Int, Int, Long, Long) => N): ArrayBuffer[N] = {
    // after(i): the rows of nodes [i, size).
    val after = new Array[Long](nodes.size + 1)
    val los = new Array[Long](nodes.size) // unboxed, for the searches
    var i = nodes.size - 1
    while (i >= 0) { after(i) = Math.addExact(after(i + 1), nodes(i).total); los(i) = nodes(i).lo; i -= 1 }
    // Grown as nodes come: sized for the input, the buffer the sketch keeps would hold room
    // for every pending leaf that collapsed (20,000 slots for 4,000 nodes in a running frame).
    val out = new ArrayBuffer[N]()

    def visit(k: Int, lo: Long, a: Int, b: Int, above: Long): Unit = {
      val subtree = after(a) - after(b)
      if (check * after(a + 1) < 2) {
        // (I) needs c R >= 2 (every node holds a row), and no subtree within [a, b) has more
        // than the rows after a + 1 to its right: each node stays as it is (a leaf within
        // its capacity, as every leaf is, folds to itself).
        var i = a
        while (i < b) { out += nodes(i); i += 1 }
      } else if (k == 0 || subtree + above + 1 <= check * after(b)) {
        out += fold(k, lo, a, b, subtree, after(b))
      } else if (b - a == 1) {
        out += nodes(a) // (I) fails alike at every level down to its own, where it stays
      } else {
        val holds = nodes(a).level == k && nodes(a).lo == lo
        if (holds) out += nodes(a)
        val start = if (holds) a + 1 else a
        val below = if (holds) above + nodes(a).total else above
        val mid = lo + (1L << (k - 1))
        val m = NodeOrder.firstAfter(los, mid - 1, start, b)
        if (start < m) visit(k - 1, lo, start, m, below)
        if (m < b) visit(k - 1, mid, m, b, below)
      }
    }

    val rootMask = -1L << height
    var a = 0
    while (a < nodes.size) {
      val rootLo = nodes(a).lo & rootMask
      val b = NodeOrder.firstAfter(los, last(height, rootLo), a, nodes.size)
      visit(height, rootLo, a, b, 0L)
      a = b
    }
    out
  }
}

/** Pre-order of dyadic nodes, (lo ascending, level descending): sorting and searching. */
private[core] object NodeOrder {
  /** The indices of the n nodes in pre-order ([[MergeTree.sortedIndices]]). */
  def sorted(levels: Array[Int], los: Array[Long], n: Int): Array[Int] =
    MergeTree.sortedIndices(n, (x, y) => before(levels(x), los(x), levels(y), los(y)))

  /** The first index in [from, to) whose lo is greater than `ts` (binary search). */
  def firstAfter(los: Array[Long], ts: Long, from: Int, to: Int): Int = {
    var low = from
    var high = to
    while (low < high) {
      val m = (low + high) >>> 1
      if (los(m) > ts) high = m else low = m + 1
    }
    low
  }

  /**
   * What is wrong with nodes (level, lo, rows) of a sketch whose subtrees collapse under
   * (I) n_T + 1 <= check n_R (top-k, compact percentiles), if anything: pre-order, aligned,
   * inside the window of `now` and none after it, nested within the tree, and (I) at every
   * internal node. With `leftAllowed`, nodes wholly before the window pass too: a live
   * state holds those that left it since the last compress (they answer nothing, and the
   * next compress drops them) exactly as memory does.
   */
  def structureProblem(levels: Array[Int], los: Array[Long], totals: Array[Long], height: Int,
      now: Long, window: Long, check: Double, leftAllowed: Boolean = false): Option[String] = {
    val n = levels.length
    def last(level: Int, lo: Long): Long = lo + ((1L << level) - 1)
    val after = new Array[Long](n + 1)
    var i = n - 1
    while (i >= 0) { after(i) = after(i + 1) + totals(i); i -= 1 }
    val stack = new Array[Int](height + 2)
    val withAbove = new Array[Long](height + 2)
    var depth = 0
    i = 0
    while (i < n) {
      val (level, lo) = (levels(i), los(i))
      if (i > 0 && !before(levels(i - 1), los(i - 1), level, lo)) return Some(s"nodes out of order at $i")
      if (level < 0 || level > height || (lo & ((1L << level) - 1)) != 0) return Some(s"invalid node at $i")
      val edge = last(level, lo)
      if (lo > now || !(leftAllowed || edge > now || java.lang.Long.compareUnsigned(now - edge, window) < 0)) {
        return Some(s"node $i lies outside the window")
      }
      while (depth > 0 && !(edge <= last(levels(stack(depth - 1)), los(stack(depth - 1))))) depth -= 1
      if (depth > height) return Some("nodes nest deeper than the tree")
      val t = (if (depth == 0) 0L else withAbove(depth - 1)) + totals(i)
      if (level > 0 && !(t + 1 <= check * after(firstAfter(los, edge, i + 1, n)))) {
        return Some(s"invariant broken at node $i (level $level)")
      }
      stack(depth) = i
      withAbove(depth) = t
      depth += 1
      i += 1
    }
    None
  }

  /** Pre-order: node (level x, lo x) comes before node (level y, lo y). */
  def before(levelX: Int, loX: Long, levelY: Int, loY: Long): Boolean =
    loX < loY || (loX == loY && levelX > levelY)
}
