package windowsketch.core
package moments

import windowsketch.core.count.{DyadicWindowSketch, ExponentialHistogram}

/**
 * The count, mean and M2 (the sum of squared deviations from the mean) of the values in
 * the sliding window `(now - window, now]`, in any order and through merges, for averages,
 * variances and standard deviations (proof: docs/moments.md).
 *
 * Time is cut into dyadic nodes as in [[DyadicWindowSketch]]; each node holds the exact
 * (n, mean, M2) of the values it absorbed, combined by the pairwise formula ([[Moments]]).
 * A subtree collapses into its root w only when, with T the values of w's subtree and of
 * w's ancestors and R those of the nodes wholly after w,
 *
 *   (I) n_T + 1 <= c n_R      (M) sum over T of (x - mean_R)^2 <= c M2_R
 *
 * with c = eps / 2 (doubled by the node cap, as the count sketch's). A query reads the
 * nodes inside the window (L) exactly and the nodes straddling its start (X, one
 * root-to-leaf path) as a whole: n_X <= c n_L and sum over X of (x - mean_L)^2 <= 2c M2_L,
 * which certifies the brackets of [[WindowMoments]] and bounds their width: the variance
 * and standard deviation within eps relative error, the mean within eps times the
 * window's population standard deviation. A window of equal values answers variance 0
 * exactly.
 */
final class SlidingMoments(val window: Long, val eps: Double) extends MomentsWindow {
  ExponentialHistogram.checkParameters(window, eps)

  /** Levels 0..height; the root level spans at least the window. */
  val height: Int = DyadicWindowSketch.heightFor(window)

  private var check = eps / 2
  // Nodes in pre-order: the compressed ones, then `appended` nodes that came after them in
  // pre-order (rows in time order, merged sketches' sorted nodes), each added as it came,
  // equal ones not yet combined. Nodes that came out of order wait in `pending`. A compress
  // folds both in; as the appended nodes are already where the sort would put them, rows in
  // time order are neither copied to pending nor sorted.
  private var nodes = new MomentNodes(0)
  private var appended = 0
  private var pending = new MomentNodes(0)
  private var seenAny = false
  private var nowTs = 0L

  def hasTime: Boolean = seenAny
  def now: Long = nowTs

  /** The eps the answers are guaranteed to: `eps`, unless the node cap had to coarsen it. */
  def effectiveEps: Double = 2 * check

  /** Nodes held, compressed or not. */
  def nodeCount: Int = nodes.size + pending.size

  /** Adds the value `x` at `ts`, in any order: O(1) amortized. */
  def add(ts: Long, x: Double): Unit = {
    MomentsWindow.checkFinite(x)
    advanceTo(ts)
    if (afterEdge(ts)) addNode(0, ts, 1L, x, 0.0)
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) { nowTs = ts; seenAny = true }

  def merge(other: MomentsWindow): Unit = other match {
    case s: SlidingMoments => mergeSketch(s)
    case _ => throw new UnsupportedOperationException("the time-ordered moments cannot merge")
  }

  private def mergeSketch(other: SlidingMoments): Unit = {
    if (other.window != window || other.eps != eps || other.microsecondTime != microsecondTime) {
      throw new IllegalArgumentException(
        s"cannot merge moments sketches of (window, eps) ($window, $eps) and " +
          s"(${other.window}, ${other.eps})" +
          (if (other.microsecondTime != microsecondTime) " on different time axes" else ""))
    }
    if (other.seenAny) advanceTo(other.nowTs)
    check = math.max(check, other.check)
    if (nodes.size == 0 && pending.size == 0) {
      // Nothing here to order them against: the other's nodes as they are (an aggregation's
      // final side starts from an empty sketch).
      nodes = other.nodes.copy
      appended = other.appended
      pending = other.pending.copy
      compressIfDue()
    } else {
      addSorted(other.nodes)
      var i = 0
      while (i < other.pending.size) { addNode(other.pending, i); i += 1 }
    }
  }

  /**
   * Adds nodes in pre-order (equal ones allowed), as [[addNode]] would one by one: once
   * one comes after the nodes held, so do the rest, and they are appended in runs that
   * end where [[compressIfDue]] would compress.
   */
  private def addSorted(from: MomentNodes): Unit = {
    var i = 0
    while (i < from.size) {
      if (appends(from.levels(i), from.los(i))) {
        val due = math.max(SlidingMoments.MinPending, nodes.size - appended) - appended
        val run = math.min(due, from.size - i)
        nodes.append(from, i, run)
        appended += run
        i += run
        compressIfDue()
      } else {
        addNode(from, i)
        i += 1
      }
    }
  }

  private def addNode(from: MomentNodes, i: Int): Unit =
    addNode(from.levels(i), from.los(i), from.counts(i), from.means(i), from.m2s(i))

  /** Whether node (level, lo) goes at the end of `nodes`: nothing pending, and it is not before the last. */
  private def appends(level: Int, lo: Long): Boolean = {
    val last = nodes.size - 1
    pending.size == 0 && (last < 0 || !NodeOrder.before(level, lo, nodes.levels(last), nodes.los(last)))
  }

  /** The window `(now - window, now]`'s moments. */
  def moments: WindowMoments = momentsAt(nowTs, window)

  /**
   * The moments of the window `(end - length, end]`, any `length` up to `window` and any
   * `end` from `now` on: the invariants do not depend on the window, so sub-windows keep
   * the guarantee.
   */
  def momentsAt(end: Long, length: Long): WindowMoments = {
    require(length > 0 && length <= window, s"sub-window $length must be in [1, $window]")
    require(!seenAny || end >= nowTs, s"the window must end at or after now ($nowTs), not $end")
    val inside = new Moments
    val straddling = new Moments
    def starts(ts: Long): Boolean = ts <= end && java.lang.Long.compareUnsigned(end - ts, length) < 0
    Seq(nodes, pending).foreach { from =>
      var i = 0
      while (i < from.size) {
        val lo = from.los(i)
        val into = if (starts(lo)) inside
          else if (lo < end && starts(math.min(last(from.levels(i), lo), end))) straddling
          else null
        if (into != null) into.add(from.counts(i), from.means(i), from.m2s(i))
        i += 1
      }
    }
    new WindowMoments(inside, straddling)
  }

  private def afterEdge(ts: Long): Boolean =
    ts > nowTs || java.lang.Long.compareUnsigned(nowTs - ts, window) < 0

  private def last(level: Int, lo: Long): Long = lo + ((1L << level) - 1)

  private def addNode(level: Int, lo: Long, n: Long, mean: Double, m2: Double): Unit = {
    if (appends(level, lo)) {
      nodes.add(level, lo, n, mean, m2)
      appended += 1
    } else pending.add(level, lo, n, mean, m2)
    compressIfDue()
  }

  /** Amortized: compresses once the nodes not compressed outnumber the compressed ones. */
  private def compressIfDue(): Unit =
    if (appended + pending.size >= math.max(SlidingMoments.MinPending, nodes.size - appended)) compress()

  /**
   * Folds the pending nodes in, drops what left the window and collapses every subtree
   * that (I) and (M) allow; past the node cap, doubles c and collapses again.
   */
  def compress(): Unit = {
    gatherSorted()
    collapse()
    while (nodes.size > SlidingMoments.MaxNodes && check < SlidingMoments.MaxCheck) {
      check *= 2
      collapse()
    }
  }

  /** Pending nodes into the compressed ones, in pre-order, duplicates combined, expired dropped. */
  private def gatherSorted(): Unit = {
    if (pending.size == 0) { combineInPlace(); return }
    val order = NodeOrder.sorted(pending.levels, pending.los, pending.size)
    val out = new MomentNodes(nodes.size + pending.size)
    var a = 0
    var b = 0
    while (a < nodes.size || b < pending.size) {
      val fromPending = a == nodes.size || (b < pending.size &&
        NodeOrder.before(pending.levels(order(b)), pending.los(order(b)), nodes.levels(a), nodes.los(a)))
      val from = if (fromPending) pending else nodes
      val i = if (fromPending) { b += 1; order(b - 1) } else { a += 1; a - 1 }
      val level = from.levels(i)
      val lo = from.los(i)
      if (afterEdge(last(level, lo))) {
        val n = out.size
        if (n > 0 && out.levels(n - 1) == level && out.los(n - 1) == lo) {
          out.combineLast(from.counts(i), from.means(i), from.m2s(i))
        } else {
          out.add(level, lo, from.counts(i), from.means(i), from.m2s(i))
        }
      }
    }
    nodes = out
    appended = 0
    pending = new MomentNodes(0)
  }

  /** [[gatherSorted]] with nothing pending: the nodes are sorted, so it works in place. */
  private def combineInPlace(): Unit = {
    var kept = 0
    var i = 0
    while (i < nodes.size) {
      val level = nodes.levels(i)
      val lo = nodes.los(i)
      if (afterEdge(last(level, lo))) {
        if (kept > 0 && nodes.levels(kept - 1) == level && nodes.los(kept - 1) == lo) {
          nodes.combineInto(kept - 1, nodes.counts(i), nodes.means(i), nodes.m2s(i))
        } else {
          nodes.set(kept, level, lo, nodes.counts(i), nodes.means(i), nodes.m2s(i))
          kept += 1
        }
      }
      i += 1
    }
    nodes.size = kept
    appended = 0
  }

  /** One top-down pass over the sorted nodes. */
  private def collapse(): Unit = {
    // (I) needs c n_R >= 2: with fewer values in all, every node stays (a small group's).
    var total = 0L
    var i = 0
    while (i < nodes.size) { total += nodes.counts(i); i += 1 }
    if (check * total < 2) return
    val after = nodes.suffixMoments
    val out = new MomentNodes(nodes.size)
    val rootMask = -1L << height
    var a = 0
    while (a < nodes.size) {
      val rootLo = nodes.los(a) & rootMask
      val b = nodes.firstAfter(last(height, rootLo), a, nodes.size)
      visit(height, rootLo, a, b, new Moments, after, out)
      a = b
    }
    nodes = out
  }

  /**
   * Node (k, lo) owns the sorted range [a, b) (itself first, if it holds values); `above`
   * holds the values its ancestors keep.
   */
  private def visit(k: Int, lo: Long, a: Int, b: Int, above: Moments, after: SuffixMoments,
      out: MomentNodes): Unit = {
    // (I) needs c n_R >= 2 (n_T >= 1), and every subtree within [a, b) has at most the
    // values after a + 1 after it: below that, nothing here collapses and each node stays.
    if (check * after.counts(a + 1) < 2) {
      var i = a
      while (i < b) { out.add(nodes.levels(i), nodes.los(i), nodes.counts(i), nodes.means(i), nodes.m2s(i)); i += 1 }
      return
    }
    // (I) first, on exact counts: the subtree's moments are summed only where it can pass.
    val count = after.counts(a) - after.counts(b)
    val subtree = if (k == 0 || count + above.n + 1 <= check * after.counts(b)) nodes.range(a, b) else null
    if (k == 0 || (subtree != null && collapsible(subtree, above, after, b))) {
      out.add(k, lo, subtree.n, subtree.mean, subtree.m2)
    } else if (b - a == 1) {
      // One node: (I) and (M) fail alike at every level down to its own, where it stays.
      out.add(nodes.levels(a), nodes.los(a), nodes.counts(a), nodes.means(a), nodes.m2s(a))
    } else {
      val holds = nodes.levels(a) == k && nodes.los(a) == lo
      val below = above.copy
      if (holds) {
        out.add(k, lo, nodes.counts(a), nodes.means(a), nodes.m2s(a))
        below.add(nodes.counts(a), nodes.means(a), nodes.m2s(a))
      }
      val start = if (holds) a + 1 else a
      val mid = lo + (1L << (k - 1))
      val m = nodes.firstAfter(mid - 1, start, b)
      if (start < m) visit(k - 1, lo, start, m, below, after, out)
      if (m < b) visit(k - 1, mid, m, b, below, after, out)
    }
  }

  /** (I) and (M) for T = `subtree` and `above`, R = the nodes from `b` on. */
  private def collapsible(subtree: Moments, above: Moments, after: SuffixMoments, b: Int): Boolean = {
    val t = subtree.copy
    t.add(above.n, above.mean, above.m2)
    val (rn, rMean, rM2) = (after.counts(b), after.means(b), after.m2s(b))
    t.n + 1 <= check * rn && t.squaresAround(rMean) <= check * rM2
  }

  /** The nodes after a [[compress]], in pre-order: for the writer, which reads them unboxed. */
  private[core] def compressedNodes: MomentNodes = { compress(); nodes }

  /**
   * The nodes in pre-order, pending ones folded in and expired ones dropped, but nothing
   * collapsed: valid sketch bytes (the internal nodes are earlier compresses', whose
   * certificates later inserts and merges keep: docs/moments.md), at most twice what a
   * compress leaves, without its pass over the tree.
   */
  private[core] def gatheredNodes: MomentNodes = { gatherSorted(); nodes }

  private[core] def checkParameter: Double = check

  /** Rebuilds from decoded parts (sorted nodes); [[checkInvariant]] validates them. */
  private[core] def restore(hasTime: Boolean, now: Long, checkParameter: Double,
      restored: MomentNodes): Unit = {
    seenAny = hasTime
    nowTs = now
    check = checkParameter
    nodes = restored
    appended = 0
    pending = new MomentNodes(0)
  }

  /**
   * Checks the compressed nodes: pre-order, inside the window, none after now, and at
   * every internal node (I) and the state form of (M), which merges and later values
   * keep with 2c (docs/moments.md). Returns what is wrong, if anything.
   */
  def checkInvariant(): Option[String] = {
    if (pending.size != 0 || appended != 0) return Some("uncompressed nodes")
    var total = 0L
    var i = 0
    while (i < nodes.size) {
      val (n, mean, m2) = (nodes.counts(i), nodes.means(i), nodes.m2s(i))
      if (n < 1 || total + n < total || !java.lang.Double.isFinite(mean) ||
          !(m2 >= 0 && m2 < Double.PositiveInfinity)) {
        return Some(s"invalid moments at node $i")
      }
      total += n
      i += 1
    }
    val after = nodes.suffixMoments
    // Ancestors of the current node, outermost first, with their values and all above them.
    val stack = new Array[Int](height + 2)
    val withAbove = Array.fill(height + 2)(new Moments)
    var depth = 0
    i = 0
    while (i < nodes.size) {
      val level = nodes.levels(i)
      val lo = nodes.los(i)
      if (i > 0 && !NodeOrder.before(nodes.levels(i - 1), nodes.los(i - 1), level, lo)) {
        return Some(s"nodes out of order at $i")
      }
      if (level < 0 || level > height || (lo & ((1L << level) - 1)) != 0) return Some(s"invalid node at $i")
      if (lo > nowTs || !afterEdge(last(level, lo))) return Some(s"node $i lies outside the window")
      while (depth > 0 && !(last(level, lo) <= last(nodes.levels(stack(depth - 1)), nodes.los(stack(depth - 1))))) {
        depth -= 1
      }
      if (depth > height) return Some("nodes nest deeper than the tree")
      val t = if (depth == 0) new Moments else withAbove(depth - 1).copy
      t.add(nodes.counts(i), nodes.means(i), nodes.m2s(i))
      if (level > 0) {
        val b = nodes.firstAfter(last(level, lo), i + 1, nodes.size)
        if (!(t.n + 1 <= check * after.counts(b) &&
            t.squaresAround(after.means(b)) <= 2 * check * after.m2s(b))) {
          return Some(s"invariant broken at node $i (level $level)")
        }
      }
      stack(depth) = i
      withAbove(depth) = t
      depth += 1
      i += 1
    }
    None
  }
}

/**
 * The moments of a sliding window as the moments aggregates read them: [[SlidingMoments]]
 * in any order and through merges, [[OrderedMoments]] for rows in time order.
 */
trait MomentsWindow extends SketchAxis {
  def eps: Double
  var microsecondTime: Boolean = false
  /** The eps the answers are guaranteed to. */
  def effectiveEps: Double
  /** Observes a value at `ts` (moving `now` forward). */
  def add(ts: Long, x: Double): Unit
  /** Observes a row without a value at `ts`: moves `now` forward. */
  def advanceTo(ts: Long): Unit
  def merge(other: MomentsWindow): Unit
  /** The window `(now - window, now]`'s moments. */
  def moments: WindowMoments
}

object MomentsWindow {
  def checkFinite(x: Double): Unit =
    if (java.lang.Double.isNaN(x) || java.lang.Double.isInfinite(x)) {
      throw new IllegalArgumentException(s"a value must be finite, got $x")
    }
}

object SlidingMoments {
  /** The node cap: past it the sketch coarsens eps (and says so) rather than grow. */
  val MaxNodes = 4096
  /** Pending nodes wait for a compress until they outnumber the compressed ones, or this. */
  private val MinPending = 64
  /**
   * The cap doubles c at most up to this: a node whose later values are all equal keeps
   * (M) false for any c, so the cap is a target, not a promise, for such streams.
   */
  private[core] val MaxCheck: Double = 1 << 20
}

/**
 * The exact count, mean and M2 of a set of values, combined pairwise (Chan, Golub and
 * LeVeque, 1979), as Spark's central-moment aggregates combine partial results: no
 * cancellation at large means, and equal values keep M2 at exactly 0.
 */
final class Moments {
  var n = 0L
  var mean = 0.0
  var m2 = 0.0

  def add(otherN: Long, otherMean: Double, otherM2: Double): Unit =
    if (otherN > 0) {
      if (n == 0) { n = otherN; mean = otherMean; m2 = otherM2 }
      else {
        val total = Math.addExact(n, otherN)
        val delta = otherMean - mean
        val share = otherN.toDouble / total
        mean += delta * share
        m2 += otherM2 + delta * delta * n.toDouble * share
        n = total
      }
    }

  /** The sum of (x - center)^2 over the values. */
  def squaresAround(center: Double): Double = {
    val d = mean - center
    m2 + n * d * d
  }

  def copy: Moments = { val c = new Moments; c.add(n, mean, m2); c }
}

/**
 * What a window's moments certify: the values of the nodes inside it (L) exactly, those of
 * the nodes straddling its start (X) as a whole; the window holds L and an unknown part of
 * X. Each answer is (estimate, lower, upper), the estimate the middle of the certified
 * bracket; null where Spark's function answers NULL (no values; one, for the sample forms).
 */
final class WindowMoments(val inside: Moments, val straddling: Moments) {
  /** The sum over X of (x - mean_L)^2: the most any part of X adds to M2 about L's mean. */
  val spread: Double = if (inside.n == 0) 0.0 else straddling.squaresAround(inside.mean)

  def countLower: Long = inside.n
  def countUpper: Long = inside.n + straddling.n

  /** The mean: a part of X of k values moves it by at most sqrt(k spread) / (n_L + k). */
  def avg: Array[Double] =
    if (inside.n == 0) null
    else {
      val k = math.min(straddling.n, inside.n).toDouble
      val shift = math.sqrt(k * spread) / (inside.n + k)
      Array(inside.mean, inside.mean - shift, inside.mean + shift)
    }

  /** M2 / (n - 1) for the sample variance, M2 / n for the population's. */
  def variance(sample: Boolean): Array[Double] = {
    val d = if (sample) 1L else 0L
    if (inside.n <= d) null
    else {
      val lower = inside.m2 / (countUpper - d)
      val upper = (inside.m2 + spread) / (inside.n - d)
      Array(lower + (upper - lower) / 2, lower, upper)
    }
  }

  def stddev(sample: Boolean): Array[Double] = {
    val v = variance(sample)
    if (v == null) null
    else {
      val (lower, upper) = (math.sqrt(v(1)), math.sqrt(v(2)))
      Array(lower + (upper - lower) / 2, lower, upper)
    }
  }
}

/** Dyadic nodes with their moments, in parallel arrays. */
private[core] final class MomentNodes(capacity: Int) {
  var levels = new Array[Int](capacity)
  var los = new Array[Long](capacity)
  var counts = new Array[Long](capacity)
  var means = new Array[Double](capacity)
  var m2s = new Array[Double](capacity)
  var size = 0

  def add(level: Int, lo: Long, n: Long, mean: Double, m2: Double): Unit = {
    if (size == levels.length) grow(size + 1)
    set(size, level, lo, n, mean, m2)
    size += 1
  }

  /** Appends `from`'s nodes [start, start + count). */
  def append(from: MomentNodes, start: Int, count: Int): Unit = {
    if (size + count > levels.length) grow(size + count)
    System.arraycopy(from.levels, start, levels, size, count)
    System.arraycopy(from.los, start, los, size, count)
    System.arraycopy(from.counts, start, counts, size, count)
    System.arraycopy(from.means, start, means, size, count)
    System.arraycopy(from.m2s, start, m2s, size, count)
    size += count
  }

  private def grow(needed: Int): Unit = {
    val grown = math.max(needed, math.max(4, 2 * size))
    levels = java.util.Arrays.copyOf(levels, grown)
    los = java.util.Arrays.copyOf(los, grown)
    counts = java.util.Arrays.copyOf(counts, grown)
    means = java.util.Arrays.copyOf(means, grown)
    m2s = java.util.Arrays.copyOf(m2s, grown)
  }

  def set(i: Int, level: Int, lo: Long, n: Long, mean: Double, m2: Double): Unit = {
    levels(i) = level; los(i) = lo; counts(i) = n; means(i) = mean; m2s(i) = m2
  }

  def copy: MomentNodes = {
    val c = new MomentNodes(size)
    c.append(this, 0, size)
    c
  }

  /** Combines values into the last node. */
  def combineLast(n: Long, mean: Double, m2: Double): Unit = combineInto(size - 1, n, mean, m2)

  /** Combines values into node i. */
  def combineInto(i: Int, n: Long, mean: Double, m2: Double): Unit = {
    val m = range(i, i + 1)
    m.add(n, mean, m2)
    counts(i) = m.n; means(i) = m.mean; m2s(i) = m.m2
  }

  /** The moments of nodes [a, b). */
  def range(a: Int, b: Int): Moments = {
    val m = new Moments
    var i = a
    while (i < b) { m.add(counts(i), means(i), m2s(i)); i += 1 }
    m
  }

  /** The moments of nodes [i, size), for every i in [0, size]. */
  def suffixMoments: SuffixMoments = {
    val s = new SuffixMoments(size + 1)
    val m = new Moments
    var i = size - 1
    while (i >= 0) {
      m.add(counts(i), means(i), m2s(i))
      s.counts(i) = m.n; s.means(i) = m.mean; s.m2s(i) = m.m2
      i -= 1
    }
    s
  }

  /** The first index in [from, to) whose lo is greater than `ts` (binary search). */
  def firstAfter(ts: Long, from: Int, to: Int): Int = NodeOrder.firstAfter(los, ts, from, to)
}

private[core] final class SuffixMoments(n: Int) {
  val counts = new Array[Long](n)
  val means = new Array[Double](n)
  val m2s = new Array[Double](n)
}
