package windowsketch.core

/** Sorted runs merged pairwise: a balanced tree of linear merges. */
private[core] object MergeTree {
  /**
   * The merge of `runs` (at least one), which it overwrites: neighbours merged in pairs,
   * level by level, so the tree's shape depends only on how many runs there are.
   */
  def merge[T](runs: Array[T], pair: (T, T) => T): T = {
    var n = runs.length
    while (n > 1) {
      var i = 0
      while (i < n) { runs(i / 2) = if (i + 1 < n) pair(runs(i), runs(i + 1)) else runs(i); i += 2 }
      n = (n + 1) / 2
    }
    runs(0)
  }

  /**
   * The indices 0 until n ordered by `before` (a strict order), by a stable merge sort over
   * the ascending runs they come in: merged sketches bring their nodes, and summaries their
   * items, as sorted runs, so a sort costs O(n log runs).
   */
  def sortedIndices(n: Int, before: (Int, Int) => Boolean): Array[Int] = {
    if (n < 2) return Array.range(0, n)
    // Run r is [starts(r), starts(r + 1)); starts(runs) = n.
    val starts = new Array[Int](n + 1)
    var runs = 0
    var i = 1
    while (i < n) {
      if (before(i, i - 1)) { runs += 1; starts(runs) = i }
      i += 1
    }
    runs += 1
    starts(runs) = n
    var src = new Array[Int](n)
    i = 0
    while (i < n) { src(i) = i; i += 1 }
    var dst = new Array[Int](n)
    while (runs > 1) {
      var merged = 0
      var r = 0
      while (r < runs) {
        val lo = starts(r)
        val mid = starts(math.min(r + 1, runs))
        val hi = starts(math.min(r + 2, runs))
        var a = lo
        var b = mid
        var k = lo
        while (k < hi) {
          if (b >= hi || (a < mid && !before(src(b), src(a)))) {
            dst(k) = src(a); a += 1
          } else {
            dst(k) = src(b); b += 1
          }
          k += 1
        }
        starts(merged) = lo
        merged += 1
        r += 2
      }
      starts(merged) = n
      runs = merged
      val t = src; src = dst; dst = t
    }
    src
  }
}
