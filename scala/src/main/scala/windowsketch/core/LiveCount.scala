package windowsketch.core

/**
 * What a live count is asked: the window, the tick spacing and eps, all in the units of
 * the time axis (positions, or microseconds with the Spark layer's inclusive window already
 * mapped to `w + 1`), and optional alert thresholds.
 */
final case class LiveCountSpec(
    window: Long,
    every: Long,
    eps: Double,
    alertAbove: Option[Long] = None,
    alertBelow: Option[Long] = None) {
  ExponentialHistogram.checkParameters(window, eps)
  require(every > 0, s"every must be positive, got $every")
  def alerts: Boolean = alertAbove.isDefined || alertBelow.isDefined

  /** The first tick (a multiple of `every`) at or after `ts`. */
  def tickAtOrAfter(ts: Long): Long = {
    val down = Math.floorDiv(ts, every) * every
    if (down == ts) ts else down + every
  }
}

/**
 * An alert on certified bounds, shared by live counts and live windows. It fires on the
 * bounds, not the estimate: `above` X rises once the lower bound passes X and falls once
 * the upper bound is back at or under X (so a value hovering within eps of X cannot flap,
 * and no alert is ever false); `below` Y falls once the upper bound is under Y and rises
 * once the lower bound is back at Y or more. A new key starts at 0: below any `below`, not
 * above any `above`.
 */
final class CertifiedAlert(
    val above: Option[Long],
    val below: Option[Long],
    var isAbove: Boolean = false,
    var isBelow: Boolean = true) {
  CertifiedAlert.checkThresholds(above, below)

  /** "rise", "fall" or null: how each threshold was crossed at the last [[update]]. */
  var aboveCrossing: String = null
  var belowCrossing: String = null

  def isSet: Boolean = above.isDefined || below.isDefined

  /** Moves the alert to a tick's certified bounds. */
  def update(lower: Long, upper: Long): Unit = {
    aboveCrossing = null
    belowCrossing = null
    for (x <- above) {
      if (!isAbove && lower > x) { isAbove = true; aboveCrossing = "rise" }
      else if (isAbove && upper <= x) { isAbove = false; aboveCrossing = "fall" }
    }
    for (y <- below) {
      if (!isBelow && upper < y) { isBelow = true; belowCrossing = "fall" }
      else if (isBelow && lower >= y) { isBelow = false; belowCrossing = "rise" }
    }
  }
}

object CertifiedAlert {
  def checkThresholds(above: Option[Long], below: Option[Long]): Unit = {
    above.foreach(x => require(x >= 0, s"alert thresholds must be non-negative, got above $x"))
    below.foreach(y => require(y >= 0, s"alert thresholds must be non-negative, got below $y"))
  }
}

/** One row a live count emits: the window ending at `tick`, or an alert crossing there. */
final case class LiveRow(tick: Long, estimate: Long, lower: Long, upper: Long,
    alert: String = null, crossing: String = null)

/**
 * One key's live sliding count: for each tick T (a multiple of `every`) that the caller
 * declares final (`advance(T)`: every event at or before T has arrived), the count of
 * events in the window ending at T, with the exponential histogram's guarantee.
 *
 * Events arrive in any order up to the caller's lateness; those after the last tick wait
 * in `pending` and enter the time-ordered histogram in time order as ticks pass, so the
 * histogram only ever sees events in order. A tick where the window is empty is skipped,
 * except the first after a non-empty one (the row that tells a sink the count fell to 0);
 * once the window is empty and nothing is pending the key is finished and its state can be
 * dropped. With alert thresholds, only certified crossings are emitted (see [[CertifiedAlert]]).
 */
final class LiveCount private (
    val spec: LiveCountSpec,
    private var settled: ExponentialHistogram,
    private var lastTick: Long,
    private var hasTick: Boolean,
    private var lastWasEmpty: Boolean,
    private val alert: CertifiedAlert,
    private var pending: Array[Long],
    private var pendingSize: Int) {

  def this(spec: LiveCountSpec) =
    this(spec, new ExponentialHistogram(spec.window, spec.eps), 0L, false, true,
      new CertifiedAlert(spec.alertAbove, spec.alertBelow), new Array[Long](8), 0)

  /**
   * Adds one event at `ts`. Returns false, counting nothing, if `ts` is at or before a tick
   * already emitted: that window is final and the event is late.
   */
  def add(ts: Long): Boolean =
    if (hasTick && ts <= lastTick) false
    else {
      if (pendingSize == pending.length) pending = java.util.Arrays.copyOf(pending, 2 * pendingSize)
      pending(pendingSize) = ts
      pendingSize += 1
      true
    }

  /** True while the key has events in its window or waiting: its state must be kept. */
  def isLive: Boolean = liveFrom(0)

  /**
   * The next tick that can emit a row or finish the key, read right after [[advance]];
   * only meaningful when [[isLive]].
   */
  def nextTick: Long = dueFrom(0)

  /** Emits the rows of every tick up to `upTo` that is due, in tick order. */
  def advance(upTo: Long, emit: LiveRow => Unit): Unit = {
    java.util.Arrays.sort(pending, 0, pendingSize)
    var taken = 0
    while (liveFrom(taken) && dueFrom(taken) <= upTo) {
      val tick = dueFrom(taken)
      while (taken < pendingSize && pending(taken) <= tick) {
        settled.add(pending(taken), 1L)
        taken += 1
      }
      settled.advanceTo(tick)
      val row = LiveRow(tick, settled.estimate, settled.lowerBound, settled.upperBound)
      val empty = row.upper == 0L
      if (spec.alerts) crossings(row, emit)
      else if (!empty || !lastWasEmpty) emit(row)
      lastTick = tick
      hasTick = true
      lastWasEmpty = empty
    }
    System.arraycopy(pending, taken, pending, 0, pendingSize - taken)
    pendingSize -= taken
  }

  private def crossings(row: LiveRow, emit: LiveRow => Unit): Unit = {
    alert.update(row.lower, row.upper)
    if (alert.aboveCrossing != null) emit(row.copy(alert = "above", crossing = alert.aboveCrossing))
    if (alert.belowCrossing != null) emit(row.copy(alert = "below", crossing = alert.belowCrossing))
  }

  // Pending events are sorted during and right after advance; [0, from) are settled.
  private def liveFrom(from: Int): Boolean = from < pendingSize || (hasTick && !lastWasEmpty)

  // After an empty tick, skips the empty ones: pending events are all after the last tick.
  private def dueFrom(from: Int): Long =
    if (hasTick && !lastWasEmpty) lastTick + spec.every else spec.tickAtOrAfter(pending(from))

  /** The state as bytes (docs/format.md, "Live count state"), for a streaming state store. */
  def toBytes: Array[Byte] = {
    val sketch = SketchFormat.serialize(settled)
    val out = new ByteWriter(64 + sketch.length + 4 * pendingSize)
    out.byte(LiveCount.Version)
    out.byte((if (hasTick) 1 else 0) | (if (lastWasEmpty) 2 else 0) | (if (alert.isAbove) 4 else 0) |
      (if (alert.isBelow) 8 else 0) | (if (spec.alertAbove.isDefined) 16 else 0) |
      (if (spec.alertBelow.isDefined) 32 else 0))
    out.long(lastTick)
    // The tick spacing and thresholds the state was made under: a restart must keep them.
    out.long(spec.every)
    spec.alertAbove.foreach(out.long)
    spec.alertBelow.foreach(out.long)
    out.varint(sketch.length)
    sketch.foreach(b => out.byte(b))
    // Pending events sorted, as steps from the last tick: a byte or two each.
    java.util.Arrays.sort(pending, 0, pendingSize)
    out.varint(pendingSize)
    var previous = lastTick
    var i = 0
    while (i < pendingSize) { out.varint(pending(i) - previous); previous = pending(i); i += 1 }
    out.checksum()
    out.result()
  }
}

object LiveCount {
  /** The state's layout: 2 records `every` and the thresholds; 1, which did not, still reads. */
  val Version: Byte = 2

  private val KnownFlags = 63

  /**
   * Reads [[LiveCount.toBytes]]; damaged bytes raise [[CorruptSketchException]], a state
   * written under other parameters an IllegalArgumentException naming them.
   */
  def fromBytes(spec: LiveCountSpec, bytes: Array[Byte]): LiveCount = {
    if (bytes.length < 4) throw new CorruptSketchException("truncated live count state")
    val body = bytes.length - 4
    val crc = new java.util.zip.CRC32()
    crc.update(bytes, 0, body)
    val stored = ((bytes(body) & 0xFFL) << 24) | ((bytes(body + 1) & 0xFFL) << 16) |
      ((bytes(body + 2) & 0xFFL) << 8) | (bytes(body + 3) & 0xFFL)
    if (stored != crc.getValue) throw new CorruptSketchException("live count state checksum mismatch")
    val in = new ByteReader(bytes, body)
    val version = in.byte()
    if (version != 1 && version != Version) {
      throw new CorruptSketchException(s"unknown live count state version $version")
    }
    val flags = in.byte()
    if ((flags & ~KnownFlags) != 0 || (version == 1 && (flags & 48) != 0)) {
      throw new CorruptSketchException(s"unknown live count state flags $flags")
    }
    val hasTick = (flags & 1) != 0
    val lastWasEmpty = (flags & 2) != 0
    val lastTick = in.long()
    if (version >= 2) {
      checkParameters(spec, in.long(),
        if ((flags & 16) != 0) Some(in.long()) else None,
        if ((flags & 32) != 0) Some(in.long()) else None)
    }
    val sketchLength = in.varint()
    if (sketchLength < 0 || sketchLength > body) throw new CorruptSketchException("invalid sketch length")
    val sketch = Array.fill(sketchLength.toInt)(in.byte())
    val settled = SketchFormat.deserialize(sketch) match {
      case h: ExponentialHistogram if h.window == spec.window && h.eps == spec.eps => h
      case _ => throw new IllegalArgumentException(
        "the live count state was written for another window or eps: restart the query " +
          "from a new checkpoint after changing them")
    }
    // The histogram was last moved to the last tick, and is empty before the first.
    val consistent =
      if (hasTick) settled.hasTime && settled.now == lastTick && lastWasEmpty == (settled.upperBound == 0)
      else !settled.hasTime && lastWasEmpty && lastTick == 0L
    if (!consistent) throw new CorruptSketchException("the live count state contradicts its histogram")
    val n = in.varint()
    if (n < 0 || n > body) throw new CorruptSketchException("invalid pending count")
    val pending = Array.fill(math.max(8, n.toInt))(0L)
    var previous = lastTick
    var i = 0
    while (i < n) {
      val step = in.varint()
      // Pending events are sorted and after the last tick (the first may precede 0 before any tick).
      val next = previous + step
      val ordered = if (i == 0) !hasTick || step > 0 else step >= 0
      if (!ordered || (step > 0 && next < previous)) {
        throw new CorruptSketchException("pending events out of order")
      }
      pending(i) = next
      previous = next
      i += 1
    }
    if (!in.atEnd) throw new CorruptSketchException("trailing bytes after the live count state")
    new LiveCount(spec, settled, lastTick, hasTick, lastWasEmpty,
      new CertifiedAlert(spec.alertAbove, spec.alertBelow, (flags & 4) != 0, (flags & 8) != 0),
      pending, n.toInt)
  }

  /** Refuses a state made under another `every` or other thresholds, naming what changed. */
  private def checkParameters(spec: LiveCountSpec, every: Long, above: Option[Long],
      below: Option[Long]): Unit = {
    def shown(o: Option[Long]): String = o.fold("none")(_.toString)
    val changed = Seq(
      ("every", every.toString, spec.every.toString),
      ("alert_above", shown(above), shown(spec.alertAbove)),
      ("alert_below", shown(below), shown(spec.alertBelow))).filter { case (_, a, b) => a != b }
    if (changed.nonEmpty) {
      throw new IllegalArgumentException(
        "the live count state was written with " +
          changed.map { case (name, was, now) => s"$name $was (now $now)" }.mkString(", ") +
          ": its ticks and alerts would not continue; restart the query from a new " +
          "checkpoint after changing them")
    }
  }
}
