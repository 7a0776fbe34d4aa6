package windowsketch.core
package filter

/**
 * One bucket of a stream's de-duplication (`drop_duplicates_within`): for each fingerprint
 * of a value, the latest time a row of it was delivered. A row of time `ts` is delivered
 * unless a row of its fingerprint was delivered at a time after `ts - window` (before or
 * after `ts`, for rows out of order), so no two delivered rows of a value lie within the
 * window of each other; a new value is dropped for a false match with probability at most
 * `fpp` while the window holds up to 2^32 delivered values ([[SlidingFilter.fingerprintBits]]).
 *
 * Rows after the watermark are the only ones still to come, so once the watermark is at
 * `upTo` a time at or before `upTo - window` can match no future row and is forgotten
 * ([[forgetUpTo]]): memory follows the values delivered within a window (and the
 * watermark's delay) of the watermark, never the rows. `expected` sizes the table for the
 * values a state read from bytes holds.
 */
final class DeduplicationState(val window: Long, val fpp: Double, expected: Int = 0) {
  require(window > 0, s"window must be positive: $window")
  require(fpp >= SlidingFilter.MinFpp && fpp <= SlidingFilter.MaxFpp,
    s"fpp must be in [${SlidingFilter.MinFpp}, ${SlidingFilter.MaxFpp}]: $fpp")

  val fingerprintBits: Int = SlidingFilter.fingerprintBits(fpp)

  /** Times at or before it are forgotten; Long.MinValue until a watermark. */
  private var horizon = Long.MinValue
  private var newest = Long.MinValue
  private val table = new FingerprintTable(_ > horizon, expected)

  /** The fingerprint of a value whose 64-bit hash is `hash`: its top bits. */
  def fingerprint(hash: Long): Long = hash >>> (64 - fingerprintBits)

  /** Whether a row of fingerprint `fp` at `ts` is delivered; if so, it is recorded. */
  def offer(ts: Long, fp: Long): Boolean = {
    val latest = table.latest(fp)
    if (latest > horizon && latest - ts > -window) false
    else {
      table.put(fp, ts)
      if (ts > newest) newest = ts
      true
    }
  }

  /**
   * The watermark is at `upTo` (on the time axis): forgets what no later row can match
   * (the table drops it at its next rebuild, and the bytes never hold it).
   */
  def forgetUpTo(upTo: Long): Unit = {
    val forget = if (upTo < Long.MinValue + window) Long.MinValue else upTo - window
    if (forget > horizon) horizon = forget
  }

  /** Nothing is held: the bucket's state can be removed. */
  def isEmpty: Boolean = newest <= horizon

  /** The watermark at which everything held is forgotten. */
  def emptyAt: Long = newest + window

  /** Values held: delivered within a window of the watermark. */
  def size: Int = table.keptCount

  /**
   * The state as bytes (docs/format.md, "De-duplication state"): magic, version, window,
   * fpp, horizon, newest, the held fingerprints ascending as steps from the one before
   * (the first from 0), each with its time as a step back from the newest, then a CRC-32.
   */
  def toBytes: Array[Byte] = {
    val (fps, ts) = table.sortedKept
    val out = new ByteWriter(40 + 10 * fps.length)
    out.byte(DeduplicationState.Magic)
    out.byte(DeduplicationState.Version)
    out.long(window)
    out.long(java.lang.Double.doubleToLongBits(fpp))
    out.long(horizon)
    out.long(newest)
    out.varint(fps.length)
    var previous = 0L
    var i = 0
    while (i < fps.length) {
      out.varint(fps(i) - previous)
      out.varint(newest - ts(i))
      previous = fps(i)
      i += 1
    }
    out.checksum()
    out.result()
  }
}

object DeduplicationState {
  /** The first byte of a de-duplication state ('D'), apart from the live states'. */
  val Magic: Byte = 0x44
  val Version: Byte = 1

  /**
   * Reads [[DeduplicationState.toBytes]] for a query with `window` and `fpp`: damaged
   * bytes raise [[CorruptSketchException]], a state written under another window or fpp
   * an IllegalArgumentException naming them.
   */
  def fromBytes(window: Long, fpp: Double, bytes: Array[Byte]): DeduplicationState = {
    val in = ByteReader.checked(bytes, "de-duplication state")
    if (in.byte() != Magic) throw new CorruptSketchException("not a de-duplication state")
    val version = in.byte()
    if (version != Version) throw new CorruptSketchException(s"unknown de-duplication state version $version")
    val stateWindow = in.long()
    val stateFpp = java.lang.Double.longBitsToDouble(in.long())
    if (!(stateWindow > 0) || !(stateFpp >= SlidingFilter.MinFpp && stateFpp <= SlidingFilter.MaxFpp)) {
      throw new CorruptSketchException(s"invalid parameters window=$stateWindow, fpp=$stateFpp")
    }
    if (stateWindow != window || stateFpp != fpp) {
      throw new IllegalArgumentException(s"the checkpoint's state was written with window " +
        s"$stateWindow and fpp $stateFpp on the time axis, and this query has window $window " +
        s"and fpp $fpp: restart with the same ones, or from a new checkpoint")
    }
    val horizon = in.long()
    val newest = in.long()
    val n = in.varint()
    // Each held value takes at least two bytes.
    if (n < 0 || n > in.remaining / 2) throw new CorruptSketchException(s"invalid value count $n")
    val s = new DeduplicationState(window, fpp, n.toInt)
    s.horizon = horizon
    s.newest = newest
    if (n > 0 && s.newest <= s.horizon) throw new CorruptSketchException("values past the horizon")
    var previous = 0L
    var i = 0
    while (i < n) {
      val step = in.varint()
      val back = in.varint()
      val fp = previous + step
      if (step < 0 || (i > 0 && step == 0) || fp < 0 || (fp >>> s.fingerprintBits) != 0) {
        throw new CorruptSketchException(s"fingerprint ${i + 1} is out of order or range")
      }
      // A time in (horizon, newest]; the steps back are unsigned, so they are compared so.
      if (back < 0 || java.lang.Long.compareUnsigned(back, s.newest - s.horizon) >= 0) {
        throw new CorruptSketchException(s"value ${i + 1} lies outside the held times")
      }
      s.table.put(fp, s.newest - back)
      previous = fp
      i += 1
    }
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the state")
    s
  }
}
