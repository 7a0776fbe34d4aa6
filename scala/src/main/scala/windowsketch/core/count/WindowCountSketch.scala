package windowsketch.core
package count

/**
 * A count (or a sum of non-negative weights) of events in the sliding window
 * `(now - window, now]`, where `now` is the largest timestamp seen, with `|estimate - exact| <= eps * exact` and certified bounds
 * `lowerBound <= exact <= upperBound`. For rows in time order (O(1) estimate):
 * [[ExponentialHistogram]] for counts, [[OrderedSumHistogram]] for sums; for any order and
 * merges, [[DyadicWindowSketch]].
 */
trait WindowCountSketch extends SketchAxis {
  def eps: Double
  var microsecondTime: Boolean = false
  /** Observes one row at `ts`: moves `now` forward and counts `weight` (>= 0) at `ts`. */
  def add(ts: Long, weight: Long): Unit
  /** Observes one row at `ts`: moves `now` forward and, if `isEvent`, counts it. */
  def update(ts: Long, isEvent: Boolean): Unit = add(ts, if (isEvent) 1L else 0L)
  /** Adds `other`'s events to this sketch; both must have the same window and eps. */
  def merge(other: WindowCountSketch): Unit
  def estimate: Long
  def lowerBound: Long
  def upperBound: Long
  /** (estimate, lower bound, upper bound) at once. */
  def bounds: Array[Long] = Array(estimate, lowerBound, upperBound)
}
