package windowsketch.core
package filter

/**
 * Fingerprints with the latest time of each: an open-addressing table (linear probing) of
 * 16-byte slots, what [[SlidingFilter]] and [[DeduplicationState]] hold. An entry is kept
 * while `keep(time)`; entries that stopped being kept stay until the table rebuilds, at
 * three quarters full, with the kept ones at most three eighths full. So the slots follow
 * the kept entries, never every fingerprint ever put.
 */
private[filter] final class FingerprintTable(keep: Long => Boolean, expected: Int = 0) {
  // keys(i) is a fingerprint plus one (0: a free slot; a fingerprint has at most 62 bits).
  private var keys = new Array[Long](FingerprintTable.slotsFor(expected))
  private var times = new Array[Long](keys.length)
  private var used = 0

  /** Slots of the table: 16 bytes each. */
  def slots: Int = keys.length

  /** The latest time held for `fp` (kept or not yet dropped), or Long.MinValue if none. */
  def latest(fp: Long): Long = {
    val i = find(fp)
    if (i < 0) Long.MinValue else times(i)
  }

  /** Holds `ts` for `fp` unless a later time is held. */
  def put(fp: Long, ts: Long): Unit = {
    val key = fp + 1
    val mask = keys.length - 1
    var i = FingerprintTable.slotOf(fp) & mask
    while (keys(i) != 0) {
      if (keys(i) == key) { if (ts > times(i)) times(i) = ts; return }
      i = (i + 1) & mask
    }
    keys(i) = key
    times(i) = ts
    used += 1
    if (4L * used > 3L * keys.length) rebuild()
  }

  /** Calls `f(fp, time)` for every kept entry, in table order. */
  def foreachKept(f: (Long, Long) => Unit): Unit = {
    var i = 0
    while (i < keys.length) {
      if (keys(i) != 0 && keep(times(i))) f(keys(i) - 1, times(i))
      i += 1
    }
  }

  /** The kept entries: fingerprints ascending, and their times. */
  def sortedKept: (Array[Long], Array[Long]) = {
    val order = new Array[Long](used)
    var n = 0
    foreachKept { (fp, _) => order(n) = fp; n += 1 }
    val fps = java.util.Arrays.copyOf(order, n)
    java.util.Arrays.sort(fps)
    (fps, fps.map(fp => times(find(fp))))
  }

  def keptCount: Int = {
    var n = 0
    foreachKept { (_, _) => n += 1 }
    n
  }

  /** Drops what is no longer kept now (a rebuild at its own size or smaller). */
  def rebuild(): Unit = {
    val oldKeys = keys
    val oldTimes = times
    val size = FingerprintTable.slotsFor(keptCount)
    keys = new Array[Long](size)
    times = new Array[Long](size)
    used = 0
    var i = 0
    while (i < oldKeys.length) {
      if (oldKeys(i) != 0 && keep(oldTimes(i))) put(oldKeys(i) - 1, oldTimes(i))
      i += 1
    }
  }

  private def find(fp: Long): Int = {
    val key = fp + 1
    val mask = keys.length - 1
    var i = FingerprintTable.slotOf(fp) & mask
    while (keys(i) != 0) {
      if (keys(i) == key) return i
      i = (i + 1) & mask
    }
    -1
  }
}

private[filter] object FingerprintTable {
  private val MinSlots = 16

  /** Slots for `entries`: a power of two, at most three eighths full. */
  private def slotsFor(entries: Int): Int = {
    var size = MinSlots
    while (3L * size < 8L * entries) size <<= 1
    size
  }

  // Fingerprints are a hash's top bits: their low bits are as uniform as any.
  private def slotOf(fp: Long): Int = (fp ^ (fp >>> 29)).toInt
}
