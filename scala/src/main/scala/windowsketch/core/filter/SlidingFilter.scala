package windowsketch.core
package filter

/**
 * Has a value occurred in the sliding window `(now - window, now]`? Rows in any order,
 * filters mergeable (design, guarantee and proof: docs/filtering.md).
 *
 * Each value is held as its fingerprint, the top [[fingerprintBits]] bits of a 64-bit
 * hash of its bytes ([[fingerprint]]), with the latest time it occurred. A
 * value of the window is always found (no false negatives, at any window edge: times are
 * exact); a value that is not there is found only if its fingerprint equals one of the d
 * distinct fingerprints of the window, probability at most d / 2^bits, which is at most
 * `fpp` for d up to 2^32 ([[SlidingFilter.fingerprintBits]]).
 *
 * The fingerprints of a window and their latest times are a function of its rows, so any
 * order, partitioning or merge order gives the same filter and the same bytes. Memory is
 * a table of (fingerprint, time) pairs: the distinct values of the window, plus those that
 * left it since the table last rebuilt, never the window's rows.
 */
final class SlidingFilter(val window: Long, val fpp: Double) extends SketchAxis {
  require(window > 0, s"window must be positive: $window")
  require(fpp >= SlidingFilter.MinFpp && fpp <= SlidingFilter.MaxFpp,
    s"fpp must be in [${SlidingFilter.MinFpp}, ${SlidingFilter.MaxFpp}]: $fpp")

  var microsecondTime = false

  /** The values' type, as the aggregate names it (Spark's catalog string); kept with the bytes. */
  var itemType: String = ""

  val fingerprintBits: Int = SlidingFilter.fingerprintBits(fpp)

  private var seenAny = false
  private var nowTs = 0L

  // Entries that left the window stay until a rebuild, which keeps only the window's.
  private val table = new FingerprintTable(inWindow)

  def hasTime: Boolean = seenAny
  def now: Long = nowTs

  /** Slots of the table: the filter's memory is 16 bytes each. */
  def slots: Int = table.slots

  /** The fingerprint of a value's bytes. */
  def fingerprint(value: Array[Byte]): Long = fingerprint(value, 0, value.length)

  /** The fingerprint of the value whose bytes are the `length` bytes of `bytes` from `from`. */
  def fingerprint(bytes: Array[Byte], from: Int, length: Int): Long =
    ValueHash.chain(SlidingFilter.HashStart, bytes, from, length) >>> (64 - fingerprintBits)

  /** Moves `now` forward without a value (a row whose value is NULL). */
  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) { nowTs = ts; seenAny = true }

  /** Records that a value of fingerprint `fp` occurred at `ts` (any order). */
  def add(ts: Long, fp: Long): Unit = {
    advanceTo(ts)
    if (inWindow(ts)) table.put(fp, ts)
  }

  /**
   * For rows in time order (a running frame): whether a value of fingerprint `fp` occurred
   * in the window ending at `ts` before this row, then records this row.
   */
  def seenThenAdd(ts: Long, fp: Long): Boolean = {
    advanceTo(ts)
    val seen = containsAt(fp, nowTs, window)
    if (inWindow(ts)) table.put(fp, ts)
    seen
  }

  /**
   * Whether a value of fingerprint `fp` occurred in the window `(end - length, end]`, for
   * any `length` up to `window` and any `end` from `now` on: the latest time it occurred
   * is held, and no time held is after `now`.
   */
  def containsAt(fp: Long, end: Long, length: Long): Boolean = {
    require(length > 0 && length <= window, s"sub-window $length must be in [1, $window]")
    require(!seenAny || end >= nowTs, s"the window must end at or after now ($nowTs), not $end")
    val latest = table.latest(fp)
    latest != Long.MinValue && java.lang.Long.compareUnsigned(end - latest, length) < 0
  }

  def merge(other: SlidingFilter): Unit = {
    if (other.window != window || other.fpp != fpp || other.microsecondTime != microsecondTime ||
      other.itemType != itemType) {
      throw new IllegalArgumentException(
        s"cannot merge filter sketches of (window, fpp, values) ($window, $fpp, " +
          s"${describeType(itemType)}) and (${other.window}, ${other.fpp}, " +
          s"${describeType(other.itemType)})" +
          (if (other.microsecondTime != microsecondTime) " on different time axes" else ""))
    }
    if (other.seenAny) advanceTo(other.nowTs)
    other.table.foreachKept((fp, ts) => if (inWindow(ts)) table.put(fp, ts))
  }

  private def describeType(t: String): String = if (t.isEmpty) "unknown" else t

  /** The window's fingerprints ascending, with their latest times: what the format writes. */
  def entries: (Array[Long], Array[Long]) = table.sortedKept

  /** Distinct fingerprints of the window. */
  def distinct: Int = table.keptCount

  /**
   * Restores a filter from its format: `now`, then fingerprints strictly ascending, each
   * below 2^bits, with times in the window. Returns the problem if they are not.
   */
  private[core] def restore(hasTime: Boolean, now: Long, fps: Array[Long], ts: Array[Long]): Option[String] = {
    seenAny = hasTime
    nowTs = if (hasTime) now else 0L
    if (!hasTime && fps.nonEmpty) return Some("values without a time")
    var i = 0
    while (i < fps.length) {
      if (fps(i) < 0 || (fps(i) >>> fingerprintBits) != 0) return Some(s"fingerprint ${i + 1} is out of range")
      if (i > 0 && fps(i) <= fps(i - 1)) return Some("fingerprints out of order")
      if (ts(i) > nowTs || !inWindow(ts(i))) return Some(s"value ${i + 1} lies outside the window")
      table.put(fps(i), ts(i))
      i += 1
    }
    None
  }

  private def inWindow(ts: Long): Boolean =
    ts <= nowTs && java.lang.Long.compareUnsigned(nowTs - ts, window) < 0
}

object SlidingFilter {
  /** The fpp range: past 1/2 a filter answers little; below 2^-30 fingerprints pass 62 bits. */
  val MinFpp: Double = 1e-9
  val MaxFpp: Double = 0.5

  /** Seeds the fingerprints' hash, apart from the sample's priorities. */
  private val Seed = 0x7365656E66696C74L // "seenfilt"

  /**
   * Bits per fingerprint: 32 + ceil(log2(1 / fpp)), so that d distinct values in a window
   * give a false positive with probability at most d / 2^bits <= fpp while d <= 2^32.
   */
  def fingerprintBits(fpp: Double): Int = {
    var extra = 0
    while (java.lang.Math.scalb(1.0, -extra) > fpp) extra += 1
    32 + extra
  }

  /** Where a fingerprint's hash ([[ValueHash.chain]]) starts: the filter's seed, mixed. */
  private val HashStart = ValueHash.mix(Seed)
}
