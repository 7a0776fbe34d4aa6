package windowsketch.core

/**
 * How a live window's ticks cut its time axis into slices that the window ending at every
 * tick is exactly a union of, so a family can keep one summary a slice and answer each tick
 * with no row straddling the window's edge (docs/format.md, "Tick slices").
 *
 * A live window ending at tick T (a multiple of `every`) is `(T - window, T]`. When
 * g = gcd(window, every), slices `(s g, (s + 1) g]` tile it: `window / g` of them. A time
 * window of w microseconds is w + 1 long (both ends in), so its gcd with `every` is mostly
 * 1; then g = gcd(window - 1, every) and slices `[s g, (s + 1) g)` tile `[T - window + 1, T)`,
 * and the window's newest instant T is the first of the next slice, which at the tick holds
 * only rows at T (rows after a tick enter after it is read). Where neither fits the cap
 * (an hour and 7 seconds with 1-minute ticks: g = 1 s), each tick period `(k every,
 * (k + 1) every]` is cut in two after the instant `T - window` has in it, the same for
 * every tick T: `2 floor(window / every) + 1` slices a window, of two widths (an hour and
 * 7 seconds is 121). Either way the slices a tick reads are those from [[oldestAt]]`(T)`
 * on, and a slice before the window's oldest instant can be dropped for good.
 */
final class TickSlices private (val window: Long, period: Long, split: Long, startInclusive: Boolean) {
  /** The slice holding instant `ts`: slices are numbered in time order. */
  def of(ts: Long): Long = {
    val at = if (startInclusive) ts else ts - 1
    if (split == 0) Math.floorDiv(at, period)
    else 2 * Math.floorDiv(at, period) + (if (Math.floorMod(at, period) >= split) 1 else 0)
  }

  /** The oldest slice any tick at or after `now` reads: the one holding `now - window + 1`. */
  def oldestAt(now: Long): Long = of(now - window + 1)
}

object TickSlices {
  /**
   * The slicing of windows ending at multiples of `every` into at most `most` slices, if
   * any: equal slices where they fit (as version 4's states were first written, which
   * resume with them), else two a tick period.
   */
  def apply(window: Long, every: Long, most: Int): Option[TickSlices] = {
    require(window >= 1 && every >= 1, s"window ($window) and every ($every) must be positive")
    val ending = gcd(window, every)
    val starting = gcd(window - 1, every) // gcd(0, every) = every: a window of one instant
    val (width, startInclusive, count) =
      if ((window - 1) / starting + 1 < window / ending) (starting, true, (window - 1) / starting + 1)
      else (ending, false, window / ending)
    // Where windows start within a tick period, (k every, (k + 1) every]: 0 when at its edge.
    val split = Math.floorMod(-window, every)
    if (count <= most) Some(new TickSlices(window, width, 0, startInclusive))
    else if (split != 0 && 2 * (window / every) + 1 <= most) Some(new TickSlices(window, every, split, false))
    else None
  }

  private def gcd(a: Long, b: Long): Long = if (b == 0) a else gcd(b, a % b)
}
