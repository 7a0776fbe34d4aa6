package windowsketch.core

import windowsketch.core.count.ExponentialHistogram

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
 * It is a [[LiveWindow]] of one count aggregate, so its tick rules are that window's:
 * events the caller has declared final enter the histogram at once and only those after
 * the caller's last `advance` wait. A tick where the window is empty is skipped, except the
 * first after a non-empty one (the row that tells a sink the count fell to 0); once the
 * window is empty and nothing waits the key is finished and its state can be dropped.
 * With alert thresholds, only certified crossings are emitted (see [[CertifiedAlert]]).
 */
final class LiveCount private (val spec: LiveCountSpec, private val live: LiveWindow) {

  def this(spec: LiveCountSpec) =
    this(spec, new LiveWindow(spec.window, spec.every, LiveCount.aggregates(spec)))

  /**
   * Adds one event at `ts`. Returns false, counting nothing, if `ts` is at or before a tick
   * already emitted, or before an event already folded: that time is final and the event
   * is late.
   */
  def add(ts: Long): Boolean = live.add(ts, 0, 1L)

  /** True while the key has events in its window or waiting: its state must be kept. */
  def isLive: Boolean = live.isLive

  /**
   * The next tick that can emit a row or finish the key, read right after [[advance]];
   * only meaningful when [[isLive]].
   */
  def nextTick: Long = live.nextTick

  /** Emits the rows of every tick up to `upTo` that is due, in tick order. */
  def advance(upTo: Long, emit: LiveRow => Unit): Unit =
    live.advance(upTo, { tick =>
      val slide = live.slides(0).asInstanceOf[LiveCountSlide]
      val row = LiveRow(tick, slide.estimate, slide.lower, slide.upper)
      val alert = live.alerts(0)
      if (alert == null) emit(row)
      else {
        if (alert.aboveCrossing != null) emit(row.copy(alert = "above", crossing = alert.aboveCrossing))
        if (alert.belowCrossing != null) emit(row.copy(alert = "below", crossing = alert.belowCrossing))
      }
    })

  /** The state as bytes: a live window's (docs/format.md, "Live count state"). */
  def toBytes: Array[Byte] = live.toBytes
}

object LiveCount {
  /** The last layout of its own (2 records `every` and the thresholds; 1 did not): both read. */
  val Version: Byte = 2

  private val KnownFlags = 63

  private def aggregates(spec: LiveCountSpec): IndexedSeq[LiveAggregate] =
    IndexedSeq(LiveCountAggregate(spec.eps, spec.alertAbove, spec.alertBelow))

  /**
   * Reads [[LiveCount.toBytes]], or a state of versions 1 and 2, which live counts wrote in
   * a layout of their own; damaged bytes raise [[CorruptSketchException]], a state written
   * under other parameters an IllegalArgumentException naming them.
   */
  def fromBytes(spec: LiveCountSpec, bytes: Array[Byte]): LiveCount =
    if (bytes.nonEmpty && bytes(0) == LiveWindow.Magic) {
      new LiveCount(spec, LiveWindow.fromBytes(spec.window, spec.every, aggregates(spec), bytes))
    } else fromOwnLayout(spec, bytes)

  private def fromOwnLayout(spec: LiveCountSpec, bytes: Array[Byte]): LiveCount = {
    val in = ByteReader.checked(bytes, "live count state")
    val body = bytes.length - 4
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
    val sketch = in.take(sketchLength.toInt)
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
    val aggregate = aggregates(spec).head
    new LiveCount(spec, LiveWindow.resumeOne(spec.window, spec.every, aggregate,
      new LiveCountSlide(settled), LiveWindow.newAlert(aggregate, (flags & 4) != 0, (flags & 8) != 0),
      lastTick, hasTick, lastWasEmpty, pending, n.toInt, 1L))
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
