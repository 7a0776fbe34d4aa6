package windowsketch.core

import windowsketch.core.count.{DyadicWindowSketch, ExponentialHistogram, WindowCountSketch}
import windowsketch.core.filter.SlidingFilter
import windowsketch.core.frequencies.{ItemCounts, ItemDictionary, OrderedTopK, SlidingTopK, TopKNode}
import windowsketch.core.hll.{DistinctPairs, SlidingHyperLogLog}
import windowsketch.core.moments.{MomentNodes, SlidingMoments}
import windowsketch.core.quantiles.{CompactQuantiles, QuantileNode, QuantileSummary,
  SlidingQuantiles}
import windowsketch.core.sampling.{SampledRow, SlidingSample}

/**
 * The binary format of a sketch, documented in docs/format.md. Every read is validated:
 * bytes that are truncated, corrupted, foreign or of another version raise
 * [[CorruptSketchException]], never a wrong count.
 */
object SketchFormat {
  val Magic: Byte = 0x57 // 'W'
  val Version: Byte = 1
  /** Kind byte: the time-ordered exponential histogram of event counts. */
  val KindHistogram: Byte = 1
  /** Kind byte: the mergeable dyadic sketch of event counts. */
  val KindDyadic: Byte = 2
  /** Kind byte: the sliding HyperLogLog of distinct values. */
  val KindDistinct: Byte = 3
  /** Kind byte: the percentiles' window, exact mode (every value with its time). */
  val KindQuantiles: Byte = 4
  /** Kind byte: the moments' dyadic nodes, each with its (n, mean, M2). */
  val KindMoments: Byte = 5
  /** Kind byte: the top-k dyadic nodes, each with its row count and item counts. */
  val KindTopK: Byte = 6
  /** Kind byte: the sliding HyperLogLog of kind 3, only the registers holding pairs. */
  val KindDistinctSparse: Byte = 7
  /** Kind byte: the percentiles' compact mode, dyadic nodes each with compacted values. */
  val KindQuantilesCompact: Byte = 8
  /** Kind byte: the top-k nodes of kind 6, their items written once in a dictionary. */
  val KindTopKDictionary: Byte = 9
  /** Kind byte: a sample's rows, each with its time, copies and value. */
  val KindSample: Byte = 10
  /** Kind byte: a filter's fingerprints, each with the latest time it occurred. */
  val KindFilter: Byte = 11

  /** What each kind is, as users know it: for the error when a reader gets another kind. */
  private def describeKind(kind: Byte): String = kind match {
    case KindHistogram | KindDyadic => "a count sketch (window_sketch)"
    case KindDistinct | KindDistinctSparse => "a distinct-count sketch (window_distinct_sketch)"
    case KindQuantiles | KindQuantilesCompact => "a percentile sketch (window_percentile_sketch)"
    case KindMoments => "a moments sketch (window_moments_sketch)"
    case KindTopK | KindTopKDictionary => "a top-k sketch (window_top_k_sketch)"
    case KindSample => "a sample sketch (window_sample_sketch)"
    case KindFilter => "a filter sketch (window_filter_sketch)"
    case other => throw new CorruptSketchException(s"unknown sketch kind $other")
  }

  /** Refuses a sketch of another family than `expected` (kinds of one family pass). */
  private def requireFamily(found: Byte, expected: Byte): Unit =
    if (describeKind(found) != describeKind(expected)) {
      throw new CorruptSketchException(s"${describeKind(found)} is not ${describeKind(expected)}")
    }

  private val FlagHasTime = 1
  private val FlagMicroseconds = 2

  def serialize(sketch: WindowCountSketch): Array[Byte] = sketch match {
    case h: ExponentialHistogram =>
      val out = header(KindHistogram, h, 10 * h.bucketCount)
      val sizes = h.levelSizes
      out.varint(sizes.length)
      sizes.foreach(s => out.varint(s))
      // Timestamps run newest to oldest, each stored as the (unsigned) step back from the
      // previous one, starting at now: small numbers, short varints.
      var previous = h.now
      h.foreachBucket { (newest, oldest, _) =>
        out.varint(previous - newest)
        out.varint(newest - oldest)
        previous = oldest
      }
      finish(out)
    case d: DyadicWindowSketch =>
      d.compress()
      val out = header(KindDyadic, d, 8 * d.nodeCount)
      out.long(java.lang.Double.doubleToLongBits(d.invariantParameter))
      out.varint(d.nodeCount)
      // Nodes in pre-order: lo never decreases, so each is a step forward from the last,
      // the first a step back from now.
      var previous = d.now
      var i = 0
      while (i < d.nodeCount) {
        val lo = d.loAt(i)
        out.byte(d.levelAt(i))
        out.varint(if (i == 0) previous - lo else lo - previous)
        out.varint(d.countAt(i))
        previous = lo
        i += 1
      }
      finish(out)
    case other =>
      throw new UnsupportedOperationException(
        s"${other.getClass.getSimpleName} has no binary format: it serves running window " +
          "frames only, where Spark never stores or merges a state")
  }

  private def header(kind: Byte, s: WindowCountSketch, body: Int): ByteWriter =
    header(kind, s.window, s.eps, s.hasTime, s.microsecondTime, s.now, body)

  private def header(kind: Byte, window: Long, eps: Double, hasTime: Boolean,
      microseconds: Boolean, now: Long, body: Int): ByteWriter = {
    val out = new ByteWriter(40 + body)
    out.byte(Magic)
    out.byte(Version)
    out.byte(kind)
    out.varint(window)
    out.long(java.lang.Double.doubleToLongBits(eps))
    out.byte((if (hasTime) FlagHasTime else 0) | (if (microseconds) FlagMicroseconds else 0))
    out.long(now)
    out
  }

  /**
   * A distinct-count sketch, in whichever of two kinds is shorter (kind 3 on a tie): the
   * header with `rsd` in the eps field, then
   *  - kind 3 (dense): per register, its pair count inside the window and its pairs;
   *  - kind 7 (sparse): the number of registers holding pairs inside the window, then per
   *    such register in ascending order the gap from the previous one (its index for the
   *    first, else index - previous - 1), its pair count and its pairs.
   * Pairs run newest first, each as the step back in time (from now for the first pair of
   * every register) and its rank. Counts are below 128, one byte each, so the sparse form
   * is shorter exactly when its register gaps and counts take fewer than m bytes.
   */
  def serializeDistinct(s: SlidingHyperLogLog): Array[Byte] = {
    val m = s.m
    val pairs = s.windowPairs
    var sparseBytes = ByteWriter.varintLength(pairs.held)
    var previousRegister = -1
    var k = 0
    while (k < pairs.held && sparseBytes < m) {
      sparseBytes += ByteWriter.varintLength(pairs.registers(k) - previousRegister - 1) + 1
      previousRegister = pairs.registers(k)
      k += 1
    }
    val sparse = sparseBytes < m
    val out = header(if (sparse) KindDistinctSparse else KindDistinct, s.window, s.rsd,
      s.hasTime, s.microsecondTime, s.now, 2 * m)
    if (sparse) {
      out.varint(pairs.held)
      previousRegister = -1
      k = 0
      while (k < pairs.held) {
        out.varint(pairs.registers(k) - previousRegister - 1)
        previousRegister = pairs.registers(k)
        writeDistinctPairs(out, s.now, pairs, k)
        k += 1
      }
    } else {
      k = 0
      var j = 0
      while (j < m) {
        if (k < pairs.held && pairs.registers(k) == j) {
          writeDistinctPairs(out, s.now, pairs, k)
          k += 1
        } else out.byte(0)
        j += 1
      }
    }
    finish(out)
  }

  /** The k-th held register's pair count, then its pairs newest first. */
  private def writeDistinctPairs(out: ByteWriter, now: Long, pairs: DistinctPairs, k: Int): Unit = {
    val times = pairs.times(k)
    val ranks = pairs.ranks(k)
    out.varint(pairs.until(k) - pairs.from(k))
    var previous = now
    var i = pairs.until(k) - 1
    while (i >= pairs.from(k)) {
      out.varint(previous - times(i))
      out.byte(ranks(i))
      previous = times(i)
      i -= 1
    }
  }

  /** Reads [[serializeDistinct]], validated like the count sketches. */
  def deserializeDistinct(bytes: Array[Byte]): SlidingHyperLogLog = {
    val (in, h) = readDistinctHeader(bytes)
    val s = new SlidingHyperLogLog(h.window, h.eps)
    s.microsecondTime = h.microseconds
    if (h.kind == KindDistinctSparse) {
      // A sketch of few pairs: read as merged into a fresh one, it stays a buffer of rows.
      s.beginMerge(h.window, h.eps, h.microseconds, h.now, h.hasTime)
      readDistinctBody(in, h, s.p, new MergedPairs(s))
    } else {
      readDistinctBody(in, h, s.p, new RestoredPairs(s))
      s.restore(h.now, h.hasTime)
    }
    s
  }

  /**
   * Adds the distinct-count sketch in `bytes` into `into`: what
   * `into.merge(deserializeDistinct(bytes))` does, with the same checks, without building
   * the sketch (a merge of many stored sketches of a few values each was mostly that).
   * Throws IllegalArgumentException, as merge does, for a sketch of other parameters.
   */
  def mergeDistinct(into: SlidingHyperLogLog, bytes: Array[Byte]): Unit = {
    val (in, h) = readDistinctHeader(bytes)
    into.beginMerge(h.window, h.eps, h.microseconds, h.now, h.hasTime)
    readDistinctBody(in, h, into.p, new MergedPairs(into))
  }

  /**
   * The distinct-count sketch in `bytes` with its header checked and its registers left in
   * the bytes, for one query: [[StoredDistinct.registerSumsAt]] reads them once, with the
   * checks [[deserializeDistinct]] makes, instead of building the sketch.
   */
  def readStoredDistinct(bytes: Array[Byte]): StoredDistinct = {
    val (in, h) = readDistinctHeader(bytes)
    new StoredDistinct(bytes, h, bytes.length - 4 - in.remaining)
  }

  /** [[StoredDistinct.registerSumsAt]]: the body from `bodyStart`, summed at the window. */
  private[core] def storedRegisterSums(bytes: Array[Byte], h: Header, bodyStart: Int, end: Long,
      length: Long): (Double, Int) = {
    val in = new ByteReader(bytes, bytes.length - 4) // the checksum was verified with the header
    in.skip(bodyStart)
    val p = SlidingHyperLogLog.precision(h.eps)
    val sums = new SummedPairs(end, length)
    readDistinctBody(in, h, p, sums)
    // Registers holding no pair in the window are at 0: 2^-0 = 1 each.
    val zeros = (1 << p) - sums.nonZero
    (sums.inverseSum + zeros, zeros)
  }

  private def readDistinctHeader(bytes: Array[Byte]): (ByteReader, Header) = {
    val (in, h) = readHeader(bytes)
    requireFamily(h.kind, KindDistinct)
    if (!(h.eps >= SlidingHyperLogLog.MinRsd && h.eps <= SlidingHyperLogLog.MaxRsd)) {
      throw new CorruptSketchException(s"invalid parameters window=${h.window}, rsd=${h.eps}")
    }
    (in, h)
  }

  /** What one read of a distinct-count sketch's registers does with each one's pairs. */
  private abstract class DistinctPairReader {
    /** Register j's `n` (> 0) pairs follow, newest first: `i` from n - 1 down to 0. */
    def register(j: Int, n: Int): Unit
    def pair(j: Int, i: Int, time: Long, rank: Byte): Unit
    def registerRead(j: Int, n: Int): Unit
  }

  /** Pairs merged into `s`, in the order they are read. */
  private final class MergedPairs(s: SlidingHyperLogLog) extends DistinctPairReader {
    def register(j: Int, n: Int): Unit = ()
    def pair(j: Int, i: Int, time: Long, rank: Byte): Unit = s.mergePair(j, time, rank)
    def registerRead(j: Int, n: Int): Unit = ()
  }

  /** Registers restored into a fresh `s`, each as its own arrays. */
  private final class RestoredPairs(s: SlidingHyperLogLog) extends DistinctPairReader {
    private[this] var times: Array[Long] = _
    private[this] var ranks: Array[Byte] = _
    def register(j: Int, n: Int): Unit = {
      times = new Array[Long](math.max(4, n))
      ranks = new Array[Byte](math.max(4, n))
    }
    def pair(j: Int, i: Int, time: Long, rank: Byte): Unit = { times(i) = time; ranks(i) = rank }
    def registerRead(j: Int, n: Int): Unit = s.restoreRegister(j, times, ranks, n)
  }

  /**
   * The sums of `SlidingHyperLogLog.registerSumsAt(end, length)` over the registers holding
   * pairs: each register at its oldest pair inside the window, whose rank is its largest.
   */
  private final class SummedPairs(end: Long, length: Long) extends DistinctPairReader {
    var inverseSum = 0.0
    var nonZero = 0
    private[this] var value = 0
    def register(j: Int, n: Int): Unit = value = 0
    def pair(j: Int, i: Int, time: Long, rank: Byte): Unit =
      if (java.lang.Long.compareUnsigned(end - time, length) < 0) value = rank
    def registerRead(j: Int, n: Int): Unit =
      if (value != 0) {
        inverseSum += SlidingHyperLogLog.inversePowers(value)
        nonZero += 1
      }
  }

  /** The registers of kind 3 or 7 (precision `p`), each register's pairs to `reader`. */
  private def readDistinctBody(in: ByteReader, h: Header, p: Int, reader: DistinctPairReader): Unit = {
    val m = 1 << p
    val maxRank = SlidingHyperLogLog.maxPairs(p)
    if (h.kind == KindDistinctSparse) {
      val held = in.varint()
      if (held < 0 || held > m) {
        throw new CorruptSketchException(s"invalid register count $held")
      }
      var j = -1L
      var k = 0
      while (k < held) {
        j += in.varint() + 1
        if (j < 0 || j >= m) throw new CorruptSketchException(s"invalid register $j")
        val n = in.varint()
        if (n < 1) throw new CorruptSketchException(s"invalid pair count $n in register $j")
        readDistinctPairs(in, h, maxRank, j.toInt, n, reader)
        k += 1
      }
    } else {
      var j = 0
      while (j < m) {
        val n = in.varint()
        if (n > 0) readDistinctPairs(in, h, maxRank, j, n, reader)
        else if (n < 0) throw new CorruptSketchException(s"invalid pair count $n in register $j")
        j += 1
      }
    }
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the sketch")
  }

  /** Register j's `n` (> 0) pairs, newest first: ages grow, and ranks strictly. */
  private def readDistinctPairs(in: ByteReader, h: Header, maxRank: Int, j: Int, n: Long,
      reader: DistinctPairReader): Unit = {
    if (n > maxRank || !h.hasTime) {
      throw new CorruptSketchException(s"invalid pair count $n in register $j")
    }
    val maxAge = h.now - Long.MinValue
    reader.register(j, n.toInt)
    var age = 0L
    var newerRank = 0
    var i = n.toInt - 1
    while (i >= 0) {
      val step = in.varint()
      if (i < n - 1 && step == 0) throw new CorruptSketchException(s"pairs out of order in register $j")
      age = olderAge(age, step, maxAge)
      if (java.lang.Long.compareUnsigned(age, h.window) >= 0) {
        throw new CorruptSketchException(s"a pair of register $j lies outside the window")
      }
      val rank = in.byte()
      if (rank < 1 || rank > maxRank || (i < n - 1 && rank <= newerRank)) {
        throw new CorruptSketchException(s"invalid rank $rank in register $j")
      }
      reader.pair(j, i, h.now - age, rank)
      newerRank = rank
      i -= 1
    }
    reader.registerRead(j, n.toInt)
  }

  /**
   * A percentile sketch (kind 4): the header, the number of rows in the window, then the
   * rows newest first (ties by value, in `java.lang.Double.compare` order, so equal states
   * give equal bytes), each as its step back in time (from now for the first) and its
   * value's 8 bytes.
   */
  def serializeQuantiles(s: SlidingQuantiles): Array[Byte] = {
    if (s.isCompact) return serializeCompactQuantiles(s.compact)
    val rows = new Array[(Long, Double)](s.heldCount)
    var n = 0
    s.foreachInWindow { (t, v) => rows(n) = (t, v); n += 1 }
    if (n > CompactQuantiles.exactLimit(s.eps)) {
      val compact = new SlidingQuantiles(s.window, s.eps)
      compact.microsecondTime = s.microsecondTime
      compact.merge(s)
      compact.toCompact()
      return serializeCompactQuantiles(compact.compact)
    }
    val ordered = rows.take(n).sortWith { (a, b) =>
      a._1 > b._1 || (a._1 == b._1 && java.lang.Double.compare(a._2, b._2) < 0)
    }
    val out = header(KindQuantiles, s.window, s.eps, s.hasTime, s.microsecondTime, s.now, 10 * n)
    out.varint(n)
    var previous = s.now
    ordered.foreach { case (t, v) =>
      out.varint(previous - t)
      out.long(java.lang.Double.doubleToRawLongBits(v))
      previous = t
    }
    finish(out)
  }

  /**
   * A percentile sketch in compact mode (kind 8): the header, the node count, then the
   * nodes in pre-order, each as its level, its lo (a step back from now for the first,
   * forward from the previous one after), its row count and its level count, then per
   * level its compactions, its value count and its values' 8 bytes, ascending.
   */
  def serializeCompactQuantiles(s: CompactQuantiles): Array[Byte] = {
    val nodes = s.compressedNodes
    val out = header(KindQuantilesCompact, s.window, s.eps, s.hasTime, s.microsecondTime, s.now,
      16 * nodes.size + 8 * s.retained.toInt)
    writeQuantileNodes(out, s.now, nodes)
    finish(out)
  }

  /**
   * Percentile nodes as kind 8 holds them: a varint count, then each node's level, its lo
   * (a step back from `now` for the first, forward from the previous one after), its row
   * count, its level count, then per level its compactions, its value count and its
   * values' 8 bytes, ascending (the order within a level never matters: compactions sort).
   */
  private def writeQuantileNodes(out: ByteWriter, now: Long, nodes: Seq[QuantileNode]): Unit = {
    out.varint(nodes.size)
    var previous = 0L
    var first = true
    nodes.foreach { node =>
      out.byte(node.level)
      out.varint(if (first) now - node.lo else node.lo - previous)
      out.varint(node.total)
      writeQuantileSummary(out, node.summary)
      previous = node.lo
      first = false
    }
  }

  /** A summary as nodes hold it: its level count, then per level its compactions and sorted values. */
  private[core] def writeQuantileSummary(out: ByteWriter, summary: QuantileSummary): Unit = {
    out.varint(summary.levelCount)
    var h = 0
    while (h < summary.levelCount) {
      out.varint(summary.compactionsAt(h))
      val values = summary.sortedLevel(h)
      out.varint(values.length)
      values.foreach(v => out.long(java.lang.Double.doubleToRawLongBits(v)))
      h += 1
    }
  }

  /**
   * A live key's percentile window (docs/format.md, "Live window state"): the byte 0 and the
   * exact form's bytes (kind 4), or the byte 1 and the compact mode exactly as held (now,
   * its nodes, its pending leaves), so a key resumed from it continues as one that never
   * stopped.
   */
  private[core] def writeLiveQuantiles(out: ByteWriter, s: SlidingQuantiles): Unit =
    if (!s.isCompact) {
      out.byte(0)
      val bytes = serializeQuantiles(s)
      out.varint(bytes.length)
      out.bytes(bytes)
    } else {
      out.byte(1)
      val c = s.compact
      out.byte(if (c.hasTime) 1 else 0)
      out.long(c.now)
      writeQuantileNodes(out, c.now, c.heldNodes)
      writeQuantileNodes(out, c.now, c.pendingNodes)
    }

  /**
   * Reads [[writeLiveQuantiles]] for a window and eps: the exact form as kind 4 is checked;
   * the compact mode's nodes as kind 8's, its pending leaves in time order after them,
   * each with a valid summary. Nodes and leaves that left the window since the last
   * compress are held as memory holds them (they answer nothing; the next compress drops
   * them): a state written between two compresses reads.
   */
  private[core] def readLiveQuantiles(in: ByteReader, window: Long, eps: Double,
      microseconds: Boolean): SlidingQuantiles = in.byte() match {
    case 0 =>
      val n = in.varint()
      if (n < 0 || n > in.remaining) throw new CorruptSketchException("invalid length")
      deserializeQuantiles(in.take(n.toInt))
    case 1 =>
      val length = in.remaining
      val c = new CompactQuantiles(window, eps)
      c.microsecondTime = microseconds
      val hasTime = in.byte() match {
        case 0 => false
        case 1 => true
        case other => throw new CorruptSketchException(s"unknown percentile flags $other")
      }
      val now = in.long()
      c.restore(hasTime, now, readQuantileNodes(in, now, hasTime, length))
      c.checkInvariant(leftAllowed = true).foreach(problem => throw new CorruptSketchException(problem))
      val pending = readQuantileNodes(in, now, hasTime, length)
      // Leaves are one a time, in time order; the first may share the newest node's time,
      // as when a compress came between rows of one time.
      val held = c.heldNodes
      var previous = if (held.isEmpty) Long.MinValue else held.last.lo
      var first = true
      pending.foreach { n =>
        val weight = try n.summary.weight catch { case _: ArithmeticException => -1L }
        if (n.level != 0 || n.lo < previous || (!first && n.lo == previous) || n.lo > now || n.total < 1 ||
            weight != n.total) {
          throw new CorruptSketchException("invalid pending percentile leaf")
        }
        previous = n.lo
        first = false
      }
      c.restorePending(pending)
      SlidingQuantiles.ofCompact(c)
    case other => throw new CorruptSketchException(s"unknown live percentile form $other")
  }

  /** Reads [[serializeQuantiles]] (either kind), validated like the other kinds. */
  def deserializeQuantiles(bytes: Array[Byte]): SlidingQuantiles = {
    val (in, h) = readHeader(bytes)
    requireFamily(h.kind, KindQuantiles)
    if (!(h.eps >= ExponentialHistogram.MinEps && h.eps < 1.0)) {
      throw new CorruptSketchException(s"invalid parameters window=${h.window}, eps=${h.eps}")
    }
    if (h.kind == KindQuantilesCompact) return SlidingQuantiles.ofCompact(readCompactQuantiles(in, h, bytes.length))
    val n = in.varint()
    if (n < 0 || n > SlidingQuantiles.MaxValues || (n > 0 && !h.hasTime)) {
      throw new CorruptSketchException(s"invalid row count $n")
    }
    val times = new Array[Long](math.max(16, n.toInt))
    val values = new Array[Double](math.max(16, n.toInt))
    val maxAge = h.now - Long.MinValue
    var age = 0L
    var i = n.toInt - 1
    while (i >= 0) { // newest first: stored oldest first, the order the sketch keeps
      age = olderAge(age, in.varint(), maxAge)
      if (java.lang.Long.compareUnsigned(age, h.window) >= 0) {
        throw new CorruptSketchException("a row lies outside the window")
      }
      times(i) = h.now - age
      values(i) = java.lang.Double.longBitsToDouble(in.long())
      if (i < n - 1 && times(i) == times(i + 1) &&
          java.lang.Double.compare(values(i), values(i + 1)) < 0) {
        throw new CorruptSketchException("rows out of order")
      }
      i -= 1
    }
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the sketch")
    val s = new SlidingQuantiles(h.window, h.eps)
    s.microsecondTime = h.microseconds
    s.restore(h.hasTime, h.now, times, values, n.toInt)
    s
  }

  /**
   * A moments sketch (kind 5): the header, the collapse parameter c, the node count, then
   * the nodes in pre-order, each as its level, its lo (a step back from now for the
   * first, forward from the previous one after), its count and its mean's and M2's 8 bytes.
   */
  def serializeMoments(s: SlidingMoments): Array[Byte] = writeMoments(s, s.compressedNodes)

  /**
   * An aggregation buffer's moments: the same kind, with nodes gathered but not collapsed
   * ([[SlidingMoments.gatheredNodes]]). The merge that reads it collapses them.
   */
  def serializeMomentsBuffer(s: SlidingMoments): Array[Byte] = writeMoments(s, s.gatheredNodes)

  private def writeMoments(s: SlidingMoments, nodes: MomentNodes): Array[Byte] = {
    val out = header(KindMoments, s.window, s.eps, s.hasTime, s.microsecondTime, s.now, 24 * nodes.size)
    out.long(java.lang.Double.doubleToLongBits(s.checkParameter))
    out.varint(nodes.size)
    var i = 0
    while (i < nodes.size) {
      out.byte(nodes.levels(i))
      out.varint(if (i == 0) s.now - nodes.los(i) else nodes.los(i) - nodes.los(i - 1))
      out.varint(nodes.counts(i))
      out.long(java.lang.Double.doubleToRawLongBits(nodes.means(i)))
      out.long(java.lang.Double.doubleToRawLongBits(nodes.m2s(i)))
      i += 1
    }
    finish(out)
  }

  /** Reads [[serializeMoments]], validated like the other kinds (docs/moments.md). */
  def deserializeMoments(bytes: Array[Byte]): SlidingMoments = readMoments(bytes, certified = true)

  /**
   * Reads an aggregation buffer [[serializeMomentsBuffer]] wrote in the same query: parsed
   * as any sketch, without [[SlidingMoments.checkInvariant]]'s pass over the nodes, which
   * only damaged bytes fail and took a tenth of a GROUP BY's final side.
   */
  def deserializeMomentsBuffer(bytes: Array[Byte]): SlidingMoments = readMoments(bytes, certified = false)

  private def readMoments(bytes: Array[Byte], certified: Boolean): SlidingMoments = {
    val (in, h) = readHeader(bytes)
    requireFamily(h.kind, KindMoments)
    if (!(h.eps >= ExponentialHistogram.MinEps && h.eps < 1.0)) {
      throw new CorruptSketchException(s"invalid parameters window=${h.window}, eps=${h.eps}")
    }
    val s = new SlidingMoments(h.window, h.eps)
    s.microsecondTime = h.microseconds
    val check = java.lang.Double.longBitsToDouble(in.long())
    if (!(check >= h.eps / 2 && check <= SlidingMoments.MaxCheck)) {
      throw new CorruptSketchException(s"invalid collapse parameter $check")
    }
    val n = in.varint()
    // A node takes at least 19 bytes: a count beyond that is damage, not a big sketch.
    if (n < 0 || n > bytes.length / 19 || (n > 0 && !h.hasTime)) {
      throw new CorruptSketchException(s"invalid node count $n")
    }
    val nodes = new MomentNodes(n.toInt)
    var previous = 0L
    var i = 0
    while (i < n) {
      val level = in.byte().toInt
      val lo = readNodeLo(in, i, h.now, previous)
      nodes.add(level, lo, in.varint(), java.lang.Double.longBitsToDouble(in.long()),
        java.lang.Double.longBitsToDouble(in.long()))
      previous = lo
      i += 1
    }
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the sketch")
    s.restore(h.hasTime, h.now, check, nodes)
    if (certified) s.checkInvariant().foreach(problem => throw new CorruptSketchException(problem))
    s
  }

  /**
   * A top-k sketch (kind 6): the header, the collapse parameter c, the items' type (a
   * varint length and UTF-8), the node count, then the nodes in pre-order, each as its
   * level, its lo (a step back from now for the first, forward from the previous one
   * after), its row count, its summary's error and item count, and its items in their
   * order, each as a varint length, its bytes and its count.
   */
  def serializeTopK(s: SlidingTopK): Array[Byte] = {
    s.compress()
    val nodes = (0 until s.nodeCount).map(s.node)
    val out = header(KindTopKDictionary, s.window, s.eps, s.hasTime, s.microsecondTime, s.now, 8 * s.nodeCount)
    out.long(java.lang.Double.doubleToLongBits(s.checkParameter))
    writeBytes(out, s.itemType.getBytes(java.nio.charset.StandardCharsets.UTF_8))
    writeTopKNodes(out, s.now, nodes, dictionaryOf(nodes.map(_.summary), out), 0)
    finish(out)
  }

  /**
   * The summaries' distinct items, ascending ([[ItemCounts.compare]]), written as a varint
   * count and each item's varint length and bytes; returned, with each summary item's
   * index, for [[writeItemCounts]].
   */
  private[core] def dictionaryOf(summaries: Seq[ItemCounts], out: ByteWriter): ItemDictionary = {
    val dictionary = ItemDictionary.of(summaries)
    out.varint(dictionary.items.length)
    dictionary.items.foreach(writeBytes(out, _))
    dictionary
  }

  /** Reads [[dictionaryOf]]'s items: strictly ascending, so each item once. */
  private[core] def readDictionary(in: ByteReader, length: Int): Array[Array[Byte]] = {
    val n = in.varint()
    if (n < 0 || n > length) throw new CorruptSketchException(s"invalid item count $n")
    val items = new Array[Array[Byte]](n.toInt)
    var i = 0
    while (i < n) {
      items(i) = readBytes(in, length)
      if (i > 0 && ItemCounts.compare(items(i - 1), items(i)) >= 0) {
        throw new CorruptSketchException("items out of order")
      }
      i += 1
    }
    items
  }

  /**
   * Top-k nodes as kind 9 holds them: a varint count, then each node's level, its lo (a
   * step back from `now` for the first, forward from the previous one after), its row
   * count, its summary's error and items: each item its index in the `dictionary` as a
   * step from the node's previous item's (the first's from -1), less one; then its count.
   * (Kind 6, read still, wrote each item's bytes in place of its index.) The nodes'
   * summaries are the dictionary's from its `first`-th on.
   */
  private def writeTopKNodes(out: ByteWriter, now: Long, nodes: Seq[TopKNode],
      dictionary: ItemDictionary, first: Int): Unit = {
    out.varint(nodes.size)
    var previous = 0L
    var summary = first
    nodes.foreach { node =>
      out.byte(node.level)
      out.varint(if (summary == first) now - node.lo else node.lo - previous)
      out.varint(node.total)
      writeItemCounts(out, node.summary, dictionary, summary)
      previous = node.lo
      summary += 1
    }
  }

  /** `s`, the `summary`-th of `dictionary`'s summaries: its error, size and items as index steps. */
  private[core] def writeItemCounts(out: ByteWriter, s: ItemCounts, dictionary: ItemDictionary,
      summary: Int): Unit = {
    out.varint(s.error)
    out.varint(s.size)
    var index = -1
    var i = 0
    while (i < s.size) {
      // Sorted items: each one's index lies past the one before it.
      val next = dictionary.indexOf(summary, i)
      out.varint(next - index - 1)
      index = next
      out.varint(s.counts(i))
      i += 1
    }
  }

  /**
   * Reads [[writeTopKNodes]], marking in `used` the dictionary's items read; each summary's
   * shape is checked by the caller, and with a dictionary every entry must be used (equal
   * sketches, equal bytes: [[requireUsed]]).
   */
  private def readTopKNodes(in: ByteReader, now: Long, hasTime: Boolean, capacity: Int,
      length: Int, dictionary: Array[Array[Byte]],
      used: Array[Boolean]): scala.collection.mutable.ArrayBuffer[TopKNode] = {
    val n = in.varint()
    // A node takes at least 5 bytes: a count beyond that is damage, not a big sketch.
    if (n < 0 || n > length / 5 || (n > 0 && !hasTime)) {
      throw new CorruptSketchException(s"invalid node count $n")
    }
    val nodes = new scala.collection.mutable.ArrayBuffer[TopKNode](n.toInt)
    var previous = 0L
    var i = 0
    while (i < n) {
      val level = in.byte().toInt
      val lo = readNodeLo(in, i, now, previous)
      val total = in.varint()
      nodes += new TopKNode(level, lo, total, readItemCounts(in, capacity, length, s"node $i", dictionary, used))
      previous = lo
      i += 1
    }
    nodes
  }

  private[core] def requireUsed(used: Array[Boolean]): Unit =
    if (used != null && used.contains(false)) throw new CorruptSketchException("an unused item")

  private[core] def readItemCounts(in: ByteReader, capacity: Int, length: Int, where: String,
      dictionary: Array[Array[Byte]] = null, used: Array[Boolean] = null): ItemCounts = {
    val error = in.varint()
    val size = in.varint()
    if (size < 0 || size > capacity) throw new CorruptSketchException(s"invalid item count at $where")
    val items = new Array[Array[Byte]](size.toInt)
    val counts = new Array[Long](size.toInt)
    var index = -1L
    var j = 0
    while (j < size) {
      if (dictionary == null) items(j) = readBytes(in, length)
      else {
        val step = in.varint()
        if (step < 0 || step >= dictionary.length - index - 1) {
          throw new CorruptSketchException(s"invalid item at $where")
        }
        index += step + 1
        items(j) = dictionary(index.toInt)
        used(index.toInt) = true
      }
      counts(j) = in.varint()
      j += 1
    }
    new ItemCounts(items, counts, error)
  }

  /** Reads [[serializeTopK]], validated like the other kinds (docs/top-k.md). */
  def deserializeTopK(bytes: Array[Byte]): SlidingTopK = readTopK(bytes, certified = true)

  /**
   * Reads an aggregation buffer [[serializeTopK]] wrote in the same query: parsed as any
   * sketch, without [[SlidingTopK.checkInvariant]]'s pass over the nodes, which only
   * damaged bytes fail (as [[deserializeMomentsBuffer]]).
   */
  def deserializeTopKBuffer(bytes: Array[Byte]): SlidingTopK = readTopK(bytes, certified = false)

  private def readTopK(bytes: Array[Byte], certified: Boolean): SlidingTopK = {
    val (in, h) = readHeader(bytes)
    requireFamily(h.kind, KindTopK)
    if (!(h.eps >= ExponentialHistogram.MinEps && h.eps < 1.0)) {
      throw new CorruptSketchException(s"invalid parameters window=${h.window}, eps=${h.eps}")
    }
    val s = new SlidingTopK(h.window, h.eps)
    s.microsecondTime = h.microseconds
    val check = readTopKCheck(in, h.eps)
    s.itemType = new String(readBytes(in, bytes.length), java.nio.charset.StandardCharsets.UTF_8)
    // Kind 9 holds each item once, and the nodes read share its arrays.
    val dictionary = if (h.kind == KindTopKDictionary) readDictionary(in, bytes.length) else null
    val used = if (dictionary == null) null else new Array[Boolean](dictionary.length)
    val nodes = readTopKNodes(in, h.now, h.hasTime, s.capacity, bytes.length, dictionary, used)
    requireUsed(used)
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the sketch")
    s.restore(h.hasTime, h.now, check, nodes)
    if (certified) s.checkInvariant().foreach(problem => throw new CorruptSketchException(problem))
    s
  }

  /**
   * A sample (kind 10): the header with 0.0 in the eps field, then k (varint), the seed (8
   * bytes), the values' type name, and the held rows newest first, equal times by bytes
   * ascending: each as its time's step back (from now for the first), its copies (varint)
   * and its value's length and bytes. Priorities are not written: the reader hashes them.
   */
  def serializeSample(s: SlidingSample): Array[Byte] = {
    val rows = s.heldNewestFirst
    val out = header(KindSample, s.window, 0.0, s.hasTime, s.microsecondTime, s.now,
      rows.map(_.value.length + 4).sum)
    out.varint(s.k)
    out.long(s.seed)
    writeBytes(out, s.itemType.getBytes(java.nio.charset.StandardCharsets.UTF_8))
    out.varint(rows.length)
    var previous = s.now
    rows.foreach { r =>
      out.varint(previous - r.ts)
      out.varint(r.copies)
      writeBytes(out, r.value)
      previous = r.ts
    }
    finish(out)
  }

  /**
   * Reads [[serializeSample]]'s bytes, checking every row lies in the window, times never
   * step forward, equal times come in ascending bytes, copies are positive, and that the
   * rows are exactly the window's undominated ones (as a sketch writes them).
   */
  def deserializeSample(bytes: Array[Byte]): SlidingSample = {
    val (in, h) = readHeader(bytes)
    requireFamily(h.kind, KindSample)
    val k = in.varint()
    if (h.eps != 0.0 || k < 1 || k > SlidingSample.MaxK) {
      throw new CorruptSketchException(s"invalid parameters window=${h.window}, k=$k")
    }
    val s = new SlidingSample(h.window, k.toInt, in.long())
    s.microsecondTime = h.microseconds
    s.itemType = new String(readBytes(in, bytes.length), java.nio.charset.StandardCharsets.UTF_8)
    val n = in.varint()
    if (n < 0 || n > bytes.length || (n > 0 && !h.hasTime)) throw new CorruptSketchException(s"invalid row count $n")
    val rows = new Array[SampledRow](n.toInt)
    var previous = h.now
    var total = 0L
    var i = 0
    while (i < n) {
      val step = in.varint()
      val ts = previous - step
      if (step < 0 || java.lang.Long.compareUnsigned(h.now - ts, h.window) >= 0 || ts > h.now) {
        throw new CorruptSketchException(s"row ${i + 1} lies outside the window")
      }
      val copies = in.varint()
      // Positive, and all of them together within a BIGINT (merges add them).
      if (copies < 1 || copies > Long.MaxValue - total) throw new CorruptSketchException(s"invalid copies $copies")
      total += copies
      val value = readBytes(in, bytes.length)
      if (i > 0 && step == 0 && ItemCounts.compare(rows(i - 1).value, value) >= 0) {
        throw new CorruptSketchException("rows of one time out of order")
      }
      rows(i) = new SampledRow(ts, value, SlidingSample.priority(s.seed, ts, value), copies)
      previous = ts
      i += 1
    }
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the sketch")
    s.restore(h.hasTime, h.now, rows).foreach(problem => throw new CorruptSketchException(problem))
    s
  }

  /**
   * A filter sketch (kind 11): the header with fpp in eps's place, the value type, the
   * number of fingerprints of the window, then each, ascending, as its step from the one
   * before (the first from 0) and the latest time it occurred as its step back from now.
   */
  def serializeFilter(s: SlidingFilter): Array[Byte] = {
    val (fps, ts) = s.entries
    val out = header(KindFilter, s.window, s.fpp, s.hasTime, s.microsecondTime, s.now, 8 * fps.length)
    writeBytes(out, s.itemType.getBytes(java.nio.charset.StandardCharsets.UTF_8))
    out.varint(fps.length)
    var previous = 0L
    var i = 0
    while (i < fps.length) {
      out.varint(fps(i) - previous)
      out.varint(s.now - ts(i))
      previous = fps(i)
      i += 1
    }
    finish(out)
  }

  /**
   * Reads [[serializeFilter]]'s bytes, checking fpp, that fingerprints ascend strictly and
   * fit their bits, and that every time lies in the window.
   */
  def deserializeFilter(bytes: Array[Byte]): SlidingFilter = {
    val (in, h) = readHeader(bytes)
    requireFamily(h.kind, KindFilter)
    if (!(h.eps >= SlidingFilter.MinFpp && h.eps <= SlidingFilter.MaxFpp)) {
      throw new CorruptSketchException(s"invalid parameters window=${h.window}, fpp=${h.eps}")
    }
    val s = new SlidingFilter(h.window, h.eps)
    s.microsecondTime = h.microseconds
    s.itemType = new String(readBytes(in, bytes.length), java.nio.charset.StandardCharsets.UTF_8)
    val n = in.varint()
    // Each fingerprint takes at least two bytes.
    if (n < 0 || n > bytes.length / 2) throw new CorruptSketchException(s"invalid value count $n")
    val fps = new Array[Long](n.toInt)
    val ts = new Array[Long](n.toInt)
    var previous = 0L
    var i = 0
    while (i < n) {
      val step = in.varint()
      val back = in.varint()
      if (step < 0 || (i > 0 && step == 0) || step > (Long.MaxValue >>> 2)) {
        throw new CorruptSketchException(s"fingerprint ${i + 1} is out of order")
      }
      if (back < 0) throw new CorruptSketchException(s"value ${i + 1} lies outside the window")
      fps(i) = previous + step
      ts(i) = h.now - back
      previous = fps(i)
      i += 1
    }
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the sketch")
    s.restore(h.hasTime, h.now, fps, ts).foreach(problem => throw new CorruptSketchException(problem))
    s
  }

  private def readTopKCheck(in: ByteReader, eps: Double): Double = {
    val check = java.lang.Double.longBitsToDouble(in.long())
    if (!(check >= eps / 2 && check <= SlidingTopK.MaxCheck)) {
      throw new CorruptSketchException(s"invalid collapse parameter $check")
    }
    check
  }

  /**
   * The bounded time-ordered top-k counts of a live key ([[OrderedTopK]], after its first
   * byte), exactly as held: now, the sketch's collapse parameter, the items' dictionary (as
   * kind 9), its nodes, its pending leaves, then the open rows of the newest timestamp, now
   * (their count, 0 for none; then their error and their items) (docs/format.md, "Live
   * window state").
   */
  private[core] def writeOrderedTopK(out: ByteWriter, s: SlidingTopK, openTs: Long, openRows: Long,
      openError: Long, items: Array[Array[Byte]], counts: Array[Long]): Unit = {
    out.long(s.now)
    out.long(java.lang.Double.doubleToLongBits(s.checkParameter))
    val open = new ItemCounts(items, counts, openError)
    val (compressed, pending) = (s.compressedTopKNodes, s.pendingTopKNodes)
    val dictionary = dictionaryOf((compressed ++ pending).map(_.summary) :+ open, out)
    writeTopKNodes(out, s.now, compressed, dictionary, 0)
    writeTopKNodes(out, s.now, pending, dictionary, compressed.size)
    out.varint(openRows)
    if (openRows > 0) writeItemCounts(out, open, dictionary, compressed.size + pending.size)
  }

  /**
   * Reads [[writeOrderedTopK]] into `o`: the nodes as kind 6 checks them but for those that
   * left the window since the last compress (as in [[readLiveQuantiles]]), the pending ones
   * leaves after them in time order, each a valid summary; the open rows after them, at most
   * twice the capacity items, within their count.
   */
  private[core] def readOrderedTopK(o: OrderedTopK, in: ByteReader): Unit = {
    val length = in.remaining
    val now = in.long()
    val s = new SlidingTopK(o.window, o.eps)
    s.microsecondTime = o.microsecondTime
    val check = readTopKCheck(in, o.eps)
    val dictionary = readDictionary(in, length)
    val used = new Array[Boolean](dictionary.length)
    s.restore(hasTime = true, now, check, readTopKNodes(in, now, hasTime = true, s.capacity, length, dictionary, used))
    s.checkInvariant(leftAllowed = true).foreach(problem => throw new CorruptSketchException(problem))
    val pending = readTopKNodes(in, now, hasTime = true, s.capacity, length, dictionary, used)
    var previous = if (s.nodeCount == 0) Long.MinValue else s.node(s.nodeCount - 1).lo
    var first = s.nodeCount == 0
    pending.foreach { n =>
      if (n.level != 0 || (!first && n.lo <= previous) || n.lo > now || n.total < 1 ||
          !SlidingTopK.valid(n.summary, n.total, s.capacity)) {
        throw new CorruptSketchException("invalid pending top-k leaf")
      }
      previous = n.lo
      first = false
    }
    s.restorePending(pending)
    val rows = in.varint()
    if (rows < 0) throw new CorruptSketchException("invalid open top-k rows")
    if (rows > 0) {
      val open = readItemCounts(in, 2 * s.capacity, length, "the open rows", dictionary, used)
      val ordered = (1 until open.size).forall(j => ItemCounts.compare(open.items(j - 1), open.items(j)) < 0)
      if ((!first && now <= previous) || !ordered || open.counts.exists(_ < 1) || open.error < 0 ||
          !SlidingTopK.fits(open, rows, s.capacity)) {
        throw new CorruptSketchException("invalid open top-k rows")
      }
      requireUsed(used)
      o.restoreBounded(s, rows, open.error, open.items, open.counts)
    } else {
      requireUsed(used)
      o.restoreBounded(s, 0L, 0L, Array.empty, Array.emptyLongArray)
    }
  }

  private def readCompactQuantiles(in: ByteReader, h: Header, length: Int): CompactQuantiles = {
    val s = new CompactQuantiles(h.window, h.eps)
    s.microsecondTime = h.microseconds
    val nodes = readQuantileNodes(in, h.now, h.hasTime, length)
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the sketch")
    s.restore(h.hasTime, h.now, nodes)
    s.checkInvariant().foreach(problem => throw new CorruptSketchException(problem))
    s
  }

  /** Reads [[writeQuantileNodes]]: value order and NaN checked here, the rest by the caller. */
  private def readQuantileNodes(in: ByteReader, now: Long, hasTime: Boolean,
      length: Int): scala.collection.mutable.ArrayBuffer[QuantileNode] = {
    val n = in.varint()
    // A node takes at least 4 bytes.
    if (n < 0 || n > length / 4 || (n > 0 && !hasTime)) throw new CorruptSketchException(s"invalid node count $n")
    val nodes = new scala.collection.mutable.ArrayBuffer[QuantileNode](n.toInt)
    var previous = 0L
    var i = 0
    while (i < n) {
      val level = in.byte().toInt
      val lo = readNodeLo(in, i, now, previous)
      val total = in.varint()
      nodes += new QuantileNode(level, lo, total, readQuantileSummary(in, length, s"node $i"))
      previous = lo
      i += 1
    }
    nodes
  }

  /**
   * Reads [[writeQuantileSummary]]: at most 63 levels, compactions non-negative, each level's
   * values ascending (`Double.compare`), NaN only as the canonical one; `where` names the
   * holder in a refusal.
   */
  private[core] def readQuantileSummary(in: ByteReader, length: Int, where: String): QuantileSummary = {
    val levelCount = in.varint()
    if (levelCount < 1 || levelCount > 63) throw new CorruptSketchException(s"invalid values at $where")
    val levels = new Array[Array[Double]](levelCount.toInt)
    val compactions = new Array[Long](levelCount.toInt)
    var l = 0
    while (l < levelCount) {
      compactions(l) = in.varint()
      val size = in.varint()
      if (compactions(l) < 0 || size < 0 || size > length / 8) {
        throw new CorruptSketchException(s"invalid values at $where")
      }
      val values = new Array[Double](size.toInt)
      var j = 0
      while (j < size) {
        values(j) = java.lang.Double.longBitsToDouble(in.long())
        if ((j > 0 && java.lang.Double.compare(values(j - 1), values(j)) > 0) ||
            (java.lang.Double.isNaN(values(j)) &&
              java.lang.Double.doubleToRawLongBits(values(j)) != CanonicalNaN)) {
          throw new CorruptSketchException(s"values out of order at $where")
        }
        j += 1
      }
      levels(l) = values
      l += 1
    }
    QuantileSummary.restore(levels, compactions)
  }

  /**
   * Node i's lo: a varint step back from now for the first node, forward from the previous
   * node's lo after; a step that would wrap is damage.
   */
  private def readNodeLo(in: ByteReader, i: Int, now: Long, previous: Long): Long = {
    val step = in.varint()
    val fits = if (i == 0) java.lang.Long.compareUnsigned(step, now - Long.MinValue) <= 0
      else java.lang.Long.compareUnsigned(step, Long.MaxValue - previous) <= 0
    if (!fits) throw new CorruptSketchException(s"invalid node at position $i")
    if (i == 0) now - step else previous + step
  }

  private val CanonicalNaN = java.lang.Double.doubleToRawLongBits(Double.NaN)

  private def writeBytes(out: ByteWriter, b: Array[Byte]): Unit = {
    out.varint(b.length)
    out.bytes(b)
  }

  /** A varint length, at most `limit`, and that many bytes. */
  private def readBytes(in: ByteReader, limit: Int): Array[Byte] = {
    val n = in.varint()
    if (n < 0 || n > limit) throw new CorruptSketchException(s"invalid length $n")
    in.take(n.toInt)
  }

  private[core] final case class Header(kind: Byte, window: Long, eps: Double, hasTime: Boolean,
      microseconds: Boolean, now: Long)

  /** Checks magic, version and checksum and reads the header every kind shares. */
  private def readHeader(bytes: Array[Byte]): (ByteReader, Header) = {
    if (bytes == null) throw new CorruptSketchException("the sketch is NULL")
    if (bytes.length == 0 || bytes(0) != Magic) {
      throw new CorruptSketchException("the bytes are not a windowsketch sketch (bad magic byte)")
    }
    if (bytes.length < 2 || bytes(1) != Version) {
      val version = if (bytes.length < 2) "missing" else bytes(1).toString
      throw new CorruptSketchException(
        s"format version $version is not supported (this build reads version $Version)")
    }
    // The checksum catches what structural checks cannot: a flipped bit in a timestamp.
    val in = new ByteReader(bytes, verifiedLength(bytes))
    in.skip(2) // magic and version, checked above
    val kind = in.byte()
    val window = in.varint()
    val eps = java.lang.Double.longBitsToDouble(in.long())
    if (window <= 0) throw new CorruptSketchException(s"invalid parameters window=$window, eps=$eps")
    val flags = in.byte()
    if ((flags & ~(FlagHasTime | FlagMicroseconds)) != 0) {
      throw new CorruptSketchException(s"unknown flags $flags")
    }
    val now = in.long()
    (in, Header(kind, window, eps, (flags & FlagHasTime) != 0, (flags & FlagMicroseconds) != 0, now))
  }

  private def finish(out: ByteWriter): Array[Byte] = {
    out.checksum()
    out.result()
  }

  def deserialize(bytes: Array[Byte]): WindowCountSketch = readCount(bytes, certified = true)

  /**
   * Reads an aggregation buffer [[serialize]] wrote in the same query: parsed and checked
   * as any sketch, but without the pass over a mergeable sketch's nodes that checks its
   * invariant, which only damaged bytes fail.
   */
  def deserializeBuffer(bytes: Array[Byte]): WindowCountSketch = readCount(bytes, certified = false)

  private def readCount(bytes: Array[Byte], certified: Boolean): WindowCountSketch = {
    val (in, h) = readHeader(bytes)
    requireFamily(h.kind, KindDyadic)
    if (!(h.eps >= ExponentialHistogram.MinEps && h.eps < 1.0)) {
      throw new CorruptSketchException(s"invalid parameters window=${h.window}, eps=${h.eps}")
    }
    val sketch = h.kind match {
      case KindHistogram => readHistogram(in, h.window, h.eps, h.hasTime, h.now)
      case KindDyadic => readDyadic(in, h.window, h.eps, h.hasTime, h.now, certified)
      case kind => throw new CorruptSketchException(s"unknown sketch kind $kind")
    }
    sketch.microsecondTime = h.microseconds
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the sketch")
    sketch
  }

  private def readHistogram(in: ByteReader, window: Long, eps: Double, hasTime: Boolean,
      now: Long): ExponentialHistogram = {
    val h = new ExponentialHistogram(window, eps)
    val levels = in.varint()
    if (levels < 0 || levels > ExponentialHistogram.MaxLevels || (levels > 0 && !hasTime)) {
      throw new CorruptSketchException(s"invalid level count $levels")
    }
    val sizes = new Array[Int](levels.toInt)
    var n = 0
    var level = 0
    while (level < sizes.length) {
      val size = in.varint()
      // Every level holds fewer than mergeAt buckets; those below the top at least
      // ceil(k/2), which the error bound relies on.
      val least = if (level == sizes.length - 1) 1 else h.mergeAt - 2
      if (size < least || size >= h.mergeAt) {
        throw new CorruptSketchException(s"invalid bucket count $size at level $level")
      }
      sizes(level) = size.toInt
      n += size.toInt
      level += 1
    }
    val newest = new Array[Long](n)
    val oldest = new Array[Long](n)
    // Ages (now - ts, unsigned) only grow from one timestamp to the next.
    val maxAge = now - Long.MinValue
    var age = 0L
    var b = 0
    while (b < n) {
      age = olderAge(age, in.varint(), maxAge)
      if (java.lang.Long.compareUnsigned(age, window) >= 0) {
        throw new CorruptSketchException("a bucket lies outside the window")
      }
      newest(b) = now - age
      val span = in.varint()
      if (b < sizes(0) && span != 0) {
        throw new CorruptSketchException("a single-event bucket spans more than one timestamp")
      }
      age = olderAge(age, span, maxAge)
      oldest(b) = now - age
      b += 1
    }
    h.restore(hasTime, now, sizes, newest, oldest)
    h
  }

  private def readDyadic(in: ByteReader, window: Long, eps: Double, hasTime: Boolean,
      now: Long, certified: Boolean): DyadicWindowSketch = {
    val d = new DyadicWindowSketch(window, eps)
    val invariant = java.lang.Double.longBitsToDouble(in.long())
    if (!(invariant >= 2 * eps && invariant < Double.PositiveInfinity)) {
      throw new CorruptSketchException(s"invalid invariant parameter $invariant")
    }
    val n = in.varint()
    if (n < 0 || n > DyadicWindowSketch.MaxNodes || (n > 0 && !hasTime)) {
      throw new CorruptSketchException(s"invalid node count $n")
    }
    val levels = new Array[Int](n.toInt)
    val los = new Array[Long](n.toInt)
    val counts = new Array[Long](n.toInt)
    var total = 0L
    var i = 0
    while (i < levels.length) {
      val level = in.byte().toInt
      val step = in.varint()
      val lo = if (i == 0) now - step else los(i - 1) + step
      val count = in.varint()
      val fits = if (i == 0) java.lang.Long.compareUnsigned(step, now - Long.MinValue) <= 0
        else java.lang.Long.compareUnsigned(step, Long.MaxValue - los(i - 1)) <= 0
      if (level < 0 || level > d.height || !fits || (lo & ((1L << level) - 1)) != 0) {
        throw new CorruptSketchException(s"invalid node at position $i")
      }
      if (i > 0 && lo == los(i - 1) && level >= levels(i - 1)) {
        throw new CorruptSketchException("nodes out of order")
      }
      if (count < 1 || total + count < total) {
        throw new CorruptSketchException(s"invalid count at position $i")
      }
      levels(i) = level; los(i) = lo; counts(i) = count
      total += count
      i += 1
    }
    d.restore(hasTime, now, invariant, levels, los, counts)
    if (certified) d.checkInvariant().foreach(problem => throw new CorruptSketchException(problem))
    d
  }

  /** The length of `bytes` before its trailing CRC-32, which must match. */
  private def verifiedLength(bytes: Array[Byte]): Int = {
    val n = bytes.length - 4
    if (n < 2) throw new CorruptSketchException("truncated")
    val crc = new java.util.zip.CRC32()
    crc.update(bytes, 0, n)
    var stored = 0L
    var i = n
    while (i < bytes.length) { stored = (stored << 8) | (bytes(i) & 0xFF); i += 1 }
    if (stored != crc.getValue) {
      throw new CorruptSketchException("checksum mismatch (truncated or corrupted bytes)")
    }
    n
  }

  private def olderAge(age: Long, step: Long, maxAge: Long): Long = {
    val older = age + step
    if (java.lang.Long.compareUnsigned(older, age) < 0 ||
        java.lang.Long.compareUnsigned(older, maxAge) > 0) {
      throw new CorruptSketchException("timestamps out of range")
    }
    older
  }
}

/**
 * A stored distinct-count sketch read for one query ([[SketchFormat.readStoredDistinct]]):
 * its header checked, its registers read straight from the bytes when they are summed.
 */
final class StoredDistinct private[core] (bytes: Array[Byte], header: SketchFormat.Header,
    bodyStart: Int) extends SketchAxis {
  def window: Long = header.window
  def rsd: Double = header.eps
  def microsecondTime: Boolean = header.microseconds
  def hasTime: Boolean = header.hasTime
  def now: Long = header.now

  /** `SlidingHyperLogLog.registerSums` of the sketch in the bytes. */
  def registerSums: (Double, Int) = registerSumsAt(now, window)

  /**
   * `SlidingHyperLogLog.registerSumsAt(end, length)` of the sketch in the bytes, read with
   * every check `deserializeDistinct` makes (CorruptSketchException when one fails).
   */
  def registerSumsAt(end: Long, length: Long): (Double, Int) = {
    require(!hasTime || end >= now, s"end $end is before the sketch's now $now")
    require(length > 0 && length <= window, s"length must be in (0, $window], got $length")
    SketchFormat.storedRegisterSums(bytes, header, bodyStart, end, length)
  }
}

/** Sketch bytes that cannot be read. */
final class CorruptSketchException(message: String)
  extends IllegalArgumentException(s"invalid sketch bytes: $message")

private[core] final class ByteWriter(initial: Int) {
  private[this] var buf = new Array[Byte](math.max(16, initial))
  private[this] var pos = 0

  private def ensure(n: Int): Unit =
    if (pos + n > buf.length) buf = java.util.Arrays.copyOf(buf, math.max(buf.length * 2, pos + n))

  def byte(b: Int): Unit = { ensure(1); buf(pos) = b.toByte; pos += 1 }

  def bytes(b: Array[Byte]): Unit = {
    ensure(b.length)
    System.arraycopy(b, 0, buf, pos, b.length)
    pos += b.length
  }

  def long(v: Long): Unit = {
    ensure(8)
    var i = 7
    while (i >= 0) { buf(pos) = (v >>> (8 * i)).toByte; pos += 1; i -= 1 }
  }

  /** Unsigned LEB128: seven bits a byte, low bits first. */
  def varint(v: Long): Unit = {
    ensure(10)
    var rest = v
    while ((rest & ~0x7FL) != 0) { buf(pos) = ((rest & 0x7F) | 0x80).toByte; pos += 1; rest >>>= 7 }
    buf(pos) = rest.toByte
    pos += 1
  }

  /** Appends the CRC-32 of everything written so far. */
  def checksum(): Unit = {
    val crc = new java.util.zip.CRC32()
    crc.update(buf, 0, pos)
    val value = crc.getValue
    ensure(4)
    var i = 3
    while (i >= 0) { buf(pos) = (value >>> (8 * i)).toByte; pos += 1; i -= 1 }
  }

  def result(): Array[Byte] = java.util.Arrays.copyOf(buf, pos)
}

private[core] object ByteWriter {
  /** The bytes [[ByteWriter.varint]] takes for `v`. */
  def varintLength(v: Long): Int = (64 - java.lang.Long.numberOfLeadingZeros(v | 1) + 6) / 7
}

private[core] object ByteReader {
  /**
   * A reader of `bytes` but their last four, a CRC-32 of the rest ([[ByteWriter.checksum]]):
   * bytes too short or failing it raise [[CorruptSketchException]] naming `what`.
   */
  def checked(bytes: Array[Byte], what: String): ByteReader = {
    if (bytes.length < 4) throw new CorruptSketchException(s"truncated $what")
    val body = bytes.length - 4
    val crc = new java.util.zip.CRC32()
    crc.update(bytes, 0, body)
    val stored = ((bytes(body) & 0xFFL) << 24) | ((bytes(body + 1) & 0xFFL) << 16) |
      ((bytes(body + 2) & 0xFFL) << 8) | (bytes(body + 3) & 0xFFL)
    if (stored != crc.getValue) throw new CorruptSketchException(s"$what checksum mismatch")
    new ByteReader(bytes, body)
  }
}

/** Reads `bytes` up to `end`. */
private[core] final class ByteReader(bytes: Array[Byte], end: Int) {
  private[this] var pos = 0

  def atEnd: Boolean = pos == end

  /** Bytes left to read. */
  def remaining: Int = end - pos

  def skip(n: Int): Unit = { if (pos + n > end) throw new CorruptSketchException("truncated"); pos += n }

  /** The next `n` bytes, copied. */
  def take(n: Int): Array[Byte] = {
    if (n < 0 || n > end - pos) throw new CorruptSketchException("truncated")
    val out = java.util.Arrays.copyOfRange(bytes, pos, pos + n)
    pos += n
    out
  }

  def byte(): Byte = {
    if (pos >= end) throw new CorruptSketchException("truncated")
    val b = bytes(pos)
    pos += 1
    b
  }

  def long(): Long = {
    if (end - pos < 8) throw new CorruptSketchException("truncated")
    var v = 0L
    var i = pos
    while (i < pos + 8) { v = (v << 8) | (bytes(i) & 0xFF); i += 1 }
    pos += 8
    v
  }

  def varint(): Long = {
    // One local position and one bounds check a byte: many times take four or five bytes.
    var p = pos
    var v = 0L
    var shift = 0
    var b = 0
    do {
      if (shift > 63) throw new CorruptSketchException("varint too long")
      if (p >= end) throw new CorruptSketchException("truncated")
      b = bytes(p)
      p += 1
      if (shift == 63 && (b & 0x7E) != 0) throw new CorruptSketchException("varint overflows")
      v |= (b & 0x7FL) << shift
      shift += 7
    } while (b < 0)
    pos = p
    v
  }
}
