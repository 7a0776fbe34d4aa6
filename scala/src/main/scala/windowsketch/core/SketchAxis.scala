package windowsketch.core

/** The time axis every sketch of windowsketch has: what sketch-column queries check. */
trait SketchAxis {
  /** The window's length on the time axis: the window is `(now - window, now]`. */
  def window: Long
  /**
   * What the time axis counts, recorded so sketch columns can check a query's `as_of`:
   * false for positions (integral `ts`), true for microseconds (timestamps and dates).
   */
  def microsecondTime: Boolean
  /** True once any timestamp has been seen (an event or not). */
  def hasTime: Boolean
  /** The largest timestamp seen; only meaningful when [[hasTime]]. */
  def now: Long
}
