package windowsketch.core

/** Sorted runs merged pairwise, in place: a balanced tree of linear merges. */
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
}
