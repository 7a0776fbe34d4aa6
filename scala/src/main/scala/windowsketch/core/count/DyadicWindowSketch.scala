package windowsketch.core
package count

/**
 * The any-order, mergeable window count (design: shared/design/mergeable-sketch.md).
 *
 * Time is cut into dyadic nodes: node (k, lo) covers `[lo, lo + 2^k - 1]` with `lo` a
 * multiple of 2^k, for k = 0..H. Every event is counted, exactly, at one node containing
 * its timestamp; events arrive at leaves (k = 0) and [[compress]] moves counts up to an
 * ancestor where that keeps the invariant
 *
 * (I) for every internal node w holding a count: A(w) + c(w) + 1 <= 2 eps' R(w)
 *
 * where c(w) is w's count, A(w) the counts held by w's strict ancestors, R(w) the counts
 * of nodes wholly after w, and eps' = `internalEps` (2 eps unless the node cap forced it
 * up). A, c and R are sums over nodes, so inserts (in any order) and merges keep (I), and
 * the error does not grow with the number of merges.
 *
 * A query for the window `(now - window, now]` counts the nodes wholly inside it (L) and
 * the nodes straddling its left edge (X): they lie on one root-to-leaf path, so X is
 * A(w) + c(w) for the deepest of them, at most 2 eps' L - 1. The exact count is in
 * [L, L + X] and the estimate L + floor(X/2) is within ceil(X/2) <= eps' L of it.
 */
final class DyadicWindowSketch(val window: Long, val eps: Double) extends WindowCountSketch {
  ExponentialHistogram.checkParameters(window, eps)

  /** Levels 0..height; the root level spans at least the window (up to 2^62). */
  val height: Int = DyadicWindowSketch.heightFor(window)

  private var invariantEps = 2 * eps
  // Compressed nodes, sorted by (lo ascending, level descending): a pre-order walk.
  // Empty to start with, allocated on first use: GROUP BY may hold a sketch for each of
  // millions of keys, and a sketch read from bytes brings its own arrays.
  private var levels = Array.emptyIntArray
  private var los = Array.emptyLongArray
  private var counts = Array.emptyLongArray
  private var size = 0
  // Events and foreign nodes not yet compressed, in no order.
  private var pendingLevels = Array.emptyIntArray
  private var pendingLos = Array.emptyLongArray
  private var pendingCounts = Array.emptyLongArray
  private var pending = 0

  private var seenAny = false
  private var nowTs = 0L

  def hasTime: Boolean = seenAny
  def now: Long = nowTs

  /** The eps the estimate is guaranteed to: `eps`, unless the node cap had to coarsen it. */
  def effectiveEps: Double = invariantEps / 2

  /** Nodes held, compressed or not. */
  def nodeCount: Int = size + pending

  /**
   * The heap the sketch holds now: its node arrays as allocated (pending ones included),
   * and the object and array headers. O(1): a GROUP BY's table reads it after every row.
   */
  def heldBytes: Long =
    DyadicWindowSketch.ObjectBytes + DyadicWindowSketch.NodeBytes * (levels.length + pendingLevels.length)

  /** Counts `weight` at `ts`, in any order: O(1) whatever the weight, amortized. */
  def add(ts: Long, weight: Long): Unit = {
    if (weight < 0) throw new IllegalArgumentException(s"negative weight $weight")
    advanceTo(ts)
    if (weight > 0 && !isExpired(ts)) addPending(0, ts, weight)
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) { nowTs = ts; seenAny = true }

  def merge(other: WindowCountSketch): Unit = other match {
    case o: DyadicWindowSketch =>
      if (o.window != window || o.eps != eps || o.microsecondTime != microsecondTime) {
        throw new IncompatibleSketchException(this, o)
      }
      if (o.seenAny) advanceTo(o.nowTs)
      invariantEps = math.max(invariantEps, o.invariantEps)
      var i = 0
      while (i < o.size) { addPending(o.levels(i), o.los(i), o.counts(i)); i += 1 }
      i = 0
      while (i < o.pending) {
        addPending(o.pendingLevels(i), o.pendingLos(i), o.pendingCounts(i))
        i += 1
      }
    case _ => throw new IllegalArgumentException("cannot merge a time-ordered histogram")
  }

  def estimate: Long = bounds(0)
  def lowerBound: Long = bounds(1)
  def upperBound: Long = bounds(2)
  override def bounds: Array[Long] = boundsAt(nowTs, window)

  /**
   * (estimate, lower, upper) for the window `(end - length, end]`, any `length` up to
   * `window` and any `end` from `now` on: (I) does not depend on the window, so sub-windows
   * keep the same guarantee. L counts the nodes starting inside it, X those straddling its
   * left edge; the exact count is in [L, L + X].
   */
  def boundsAt(end: Long, length: Long): Array[Long] = {
    require(length > 0 && length <= window, s"sub-window $length must be in [1, $window]")
    require(!seenAny || end >= nowTs, s"the window must end at or after now ($nowTs), not $end")
    var inside = 0L
    var straddling = 0L
    def starts(ts: Long): Boolean =
      ts <= end && java.lang.Long.compareUnsigned(end - ts, length) < 0
    def visit(level: Int, lo: Long, count: Long): Unit =
      if (starts(lo)) inside = DyadicWindowSketch.plus(inside, count)
      else if (lo < end && starts(math.min(last(level, lo), end))) {
        straddling = DyadicWindowSketch.plus(straddling, count)
      }
    var i = 0
    while (i < size) { visit(levels(i), los(i), counts(i)); i += 1 }
    i = 0
    while (i < pending) { visit(pendingLevels(i), pendingLos(i), pendingCounts(i)); i += 1 }
    Array(inside + straddling / 2, inside, DyadicWindowSketch.plus(inside, straddling))
  }

  /** True if `ts` lies inside the window `(now - window, now]` (or after now). */
  private def afterEdge(ts: Long): Boolean =
    ts > nowTs || java.lang.Long.compareUnsigned(nowTs - ts, window) < 0

  private def isExpired(ts: Long): Boolean = !afterEdge(ts)

  private def last(level: Int, lo: Long): Long = lo + ((1L << level) - 1)

  private def addPending(level: Int, lo: Long, count: Long): Unit = {
    if (pending == pendingLos.length) {
      val n = math.max(4, 2 * pending)
      pendingLevels = java.util.Arrays.copyOf(pendingLevels, n)
      pendingLos = java.util.Arrays.copyOf(pendingLos, n)
      pendingCounts = java.util.Arrays.copyOf(pendingCounts, n)
    }
    pendingLevels(pending) = level
    pendingLos(pending) = lo
    pendingCounts(pending) = count
    pending += 1
    // Amortized: compress once the pending nodes outnumber the compressed ones.
    if (pending >= math.max(DyadicWindowSketch.MinPending, size)) compress()
  }

  /**
   * Folds the pending nodes in, drops what left the window and collapses every subtree
   * whose whole count can move to its root without breaking (I). Applied until the nodes
   * fit [[DyadicWindowSketch.MaxNodes]], doubling eps' each time it does not.
   */
  def compress(): Unit = {
    var n = gatherSorted()
    n = collapse(n)
    while (n > DyadicWindowSketch.MaxNodes) {
      invariantEps *= 2
      n = collapse(n)
    }
  }

  /**
   * Moves pending into the node arrays, sorted, duplicates summed, expired dropped. The
   * compressed nodes are sorted already: only the pending ones are sorted, then the two
   * runs are merged.
   */
  private def gatherSorted(): Int = {
    if (appendedInPlace()) return size
    val order = NodeOrder.sorted(pendingLevels, pendingLos, pending)
    val oldLevels = levels
    val oldLos = los
    val oldCounts = counts
    val oldSize = size
    levels = new Array[Int](oldSize + pending)
    los = new Array[Long](oldSize + pending)
    counts = new Array[Long](oldSize + pending)
    var n = 0
    var a = 0
    var b = 0
    while (a < oldSize || b < pending) {
      val fromPending = a == oldSize || (b < pending &&
        NodeOrder.before(pendingLevels(order(b)), pendingLos(order(b)), oldLevels(a), oldLos(a)))
      var lv = 0
      var lo = 0L
      var ct = 0L
      if (fromPending) {
        val j = order(b)
        lv = pendingLevels(j); lo = pendingLos(j); ct = pendingCounts(j)
        b += 1
      } else {
        lv = oldLevels(a); lo = oldLos(a); ct = oldCounts(a)
        a += 1
      }
      if (afterEdge(last(lv, lo))) {
        if (n > 0 && levels(n - 1) == lv && los(n - 1) == lo) {
          counts(n - 1) = DyadicWindowSketch.plus(counts(n - 1), ct)
        } else {
          levels(n) = lv; los(n) = lo; counts(n) = ct
          n += 1
        }
      }
    }
    pending = 0
    size = n
    n
  }

  /**
   * [[gatherSorted]] for rows in time order, the common case: the pending nodes, in
   * pre-order as they came (so nothing to sort) and distinct, all come after the
   * compressed ones, and the oldest compressed node starts inside the window (so none has
   * left it). They are appended where they lie, with no merge into fresh arrays. False,
   * changing nothing, otherwise.
   */
  private def appendedInPlace(): Boolean = {
    if (pending == 0) return size == 0 || !isExpired(los(0))
    if (size > 0 && (isExpired(los(0)) ||
        !NodeOrder.before(levels(size - 1), los(size - 1), pendingLevels(0), pendingLos(0)))) {
      return false
    }
    var i = 0
    while (i < pending) {
      if (isExpired(last(pendingLevels(i), pendingLos(i))) || (i > 0 &&
          !NodeOrder.before(pendingLevels(i - 1), pendingLos(i - 1), pendingLevels(i), pendingLos(i)))) {
        return false
      }
      i += 1
    }
    val n = size + pending
    if (levels.length < n) {
      levels = java.util.Arrays.copyOf(levels, n)
      los = java.util.Arrays.copyOf(los, n)
      counts = java.util.Arrays.copyOf(counts, n)
    }
    System.arraycopy(pendingLevels, 0, levels, size, pending)
    System.arraycopy(pendingLos, 0, los, size, pending)
    System.arraycopy(pendingCounts, 0, counts, size, pending)
    size = n
    pending = 0
    true
  }

  /** One top-down pass over the sorted nodes; returns the new node count. */
  private def collapse(n: Int): Int = {
    val prefix = new Array[Long](n + 1)
    var i = 0
    while (i < n) { prefix(i + 1) = DyadicWindowSketch.plus(prefix(i), counts(i)); i += 1 }
    // Nodes from `frozen` on are too heavy for the counts after them: a subtree starting at
    // node i holds at least c(i) and has at most the counts after i to its right, so none
    // can collapse while c(i) + 1 > eps' R(i). They are the newest, most of a small group.
    var frozen = n
    while (frozen > 0 && !(counts(frozen - 1) + 1 <= invariantEps * (prefix(n) - prefix(frozen)))) frozen -= 1
    // The output overwrites the input in place: each node written stands for one or more
    // input nodes at or after its position, and every read lies after the last write.
    written = 0
    val rootMask = -1L << height
    var a = 0
    while (a < n) {
      val rootLo = los(a) & rootMask
      val b = firstAfter(last(height, rootLo), a, n)
      visit(height, rootLo, a, b, 0L, n, frozen, prefix)
      a = b
    }
    size = written
    size
  }

  // Nodes [[collapse]] has written so far.
  private var written = 0

  private def write(level: Int, lo: Long, count: Long): Unit = {
    levels(written) = level; los(written) = lo; counts(written) = count
    written += 1
  }

  /**
   * Node (k, lo) owns the sorted range [a, b) (itself first, if it holds a count); `above`
   * is A, the counts its ancestors keep.
   */
  private def visit(k: Int, lo: Long, a: Int, b: Int, above: Long, n: Int, frozen: Int,
      prefix: Array[Long]): Unit = {
    val subtree = prefix(b) - prefix(a)
    val right = prefix(n) - prefix(b)
    if (a >= frozen) {
      // Nothing here collapses: each node stays. Skips the walk down the tree.
      var i = a
      while (i < b) { write(levels(i), los(i), counts(i)); i += 1 }
    } else if (k == 0 || above + subtree + 1 <= invariantEps * right) {
      write(k, lo, subtree)
    } else if (b - a == 1) {
      // One node: the test fails alike at every level down to its own (same subtree, right
      // and above), where it stays as it is. Skips a walk down the tree per lone node.
      write(levels(a), los(a), counts(a))
    } else {
      val holds = levels(a) == k && los(a) == lo
      val own = if (holds) counts(a) else 0L
      if (holds) write(k, lo, own)
      val start = if (holds) a + 1 else a
      val mid = lo + (1L << (k - 1))
      val m = firstAfter(mid - 1, start, b)
      if (start < m) visit(k - 1, lo, start, m, above + own, n, frozen, prefix)
      if (m < b) visit(k - 1, mid, m, b, above + own, n, frozen, prefix)
    }
  }

  private def firstAfter(ts: Long, from: Int, to: Int): Int = NodeOrder.firstAfter(los, ts, from, to)

  /** Node `i` in pre-order, for the format: valid after [[compress]], below [[nodeCount]]. */
  private[core] def levelAt(i: Int): Int = levels(i)
  private[core] def loAt(i: Int): Long = los(i)
  private[core] def countAt(i: Int): Long = counts(i)

  /** Rebuilds from decoded, validated parts (sorted nodes). */
  private[core] def restore(hasTime: Boolean, now: Long, invariant: Double, lv: Array[Int],
      lo: Array[Long], ct: Array[Long]): Unit = {
    seenAny = hasTime
    nowTs = now
    invariantEps = invariant
    levels = lv; los = lo; counts = ct; size = lv.length
    pending = 0
  }

  private[core] def invariantParameter: Double = invariantEps

  /**
   * Checks the compressed nodes: pre-order, inside the window, none after now, and (I) at
   * every internal node. Returns what is wrong, if anything. O(n log n).
   */
  def checkInvariant(): Option[String] = {
    if (pending != 0) return Some("uncompressed nodes")
    var internal = false
    var i = 0
    while (i < size) {
      val lv = levels(i)
      val lo = los(i)
      if (i > 0 && !(los(i - 1) < lo || (los(i - 1) == lo && levels(i - 1) > lv))) {
        return Some(s"nodes out of order at $i")
      }
      if (lo > nowTs || !afterEdge(last(lv, lo))) return Some(s"node $i lies outside the window")
      internal |= lv > 0
      i += 1
    }
    // (I) constrains internal nodes only: a sketch of leaves (most small ones) holds it.
    if (internal) checkInternalNodes() else None
  }

  /** (I) at every internal node of the sorted, in-window nodes. */
  private def checkInternalNodes(): Option[String] = {
    val prefix = new Array[Long](size + 1)
    var i = 0
    while (i < size) { prefix(i + 1) = prefix(i) + counts(i); i += 1 }
    // Ancestors of the current node that hold counts, outermost first, with A + c of each.
    val depths = math.min(height, size) + 1
    val stack = new Array[Int](depths)
    val aboveAndOwn = new Array[Long](depths)
    var depth = 0
    i = 0
    while (i < size) {
      val lv = levels(i)
      val lo = los(i)
      while (depth > 0 && !(los(stack(depth - 1)) <= lo &&
          last(lv, lo) <= last(levels(stack(depth - 1)), los(stack(depth - 1))))) {
        depth -= 1
      }
      val above = if (depth == 0) 0L else aboveAndOwn(depth - 1)
      if (lv > 0) {
        val right = prefix(size) - prefix(firstAfter(last(lv, lo), i + 1, size))
        if (!(above + counts(i) + 1 <= invariantEps * right)) {
          return Some(s"invariant broken at node $i (level $lv)")
        }
      }
      if (depth > height) return Some("nodes nest deeper than the tree")
      stack(depth) = i
      aboveAndOwn(depth) = above + counts(i)
      depth += 1
      i += 1
    }
    None
  }
}

object DyadicWindowSketch {
  /** The node cap: past it the sketch coarsens eps (and says so) rather than grow. */
  val MaxNodes = 4096

  private[core] def heightFor(window: Long): Int =
    math.min(62, 64 - java.lang.Long.numberOfLeadingZeros(window - 1))

  /** A node's fields: level (int), lo (long) and count (long). */
  private val NodeBytes = 20L

  /** The sketch object with its fields and the headers of its six arrays. */
  private val ObjectBytes = 160L

  /**
   * The heap a sketch's nodes take at most (array slack aside), for sizing hash
   * aggregation: the compressed nodes (O(1/eps) a level, a level per doubling of the
   * window, at most [[MaxNodes]]) and as many pending ones before a compress.
   */
  def heldBytesBound(window: Long, eps: Double): Long = {
    val levels = 1 + heightFor(window)
    val nodes = math.min(MaxNodes.toDouble, (math.ceil(1 / eps) + 2) * levels).toLong
    NodeBytes * (nodes + math.max(MinPending, nodes))
  }

  /** [[heldBytesBound]] whatever the parameters: the node cap, compressed and pending. */
  val MaxHeldBytes: Long = 2 * NodeBytes * MaxNodes

  /** Pending nodes wait for a compress until they outnumber the compressed ones, or this. */
  private val MinPending = 64

  /** Counts are sums of weights: overflowing a long is an error, never a wrap-around. */
  private def plus(a: Long, b: Long): Long =
    try Math.addExact(a, b)
    catch {
      case _: ArithmeticException =>
        throw new ArithmeticException("the sum of the window's values overflows BIGINT")
    }
}
