package windowsketch.core

/**
 * The 64-bit hashes the sample and the filter families take of a value's bytes (Spark's
 * binary row of one field): SplitMix64's finalizer chained over a start, the bytes as
 * little-endian 8-byte words (the last one zero-padded) and their length. The Python
 * reader computes the same (`windowsketch.sketch._base.value_hash`).
 */
object ValueHash {
  /** Chains `value`'s words and length onto `start`. */
  def chain(start: Long, value: Array[Byte]): Long = chain(start, value, 0, value.length)

  /** [[chain]] of the `length` bytes of `bytes` from `from`. */
  def chain(start: Long, bytes: Array[Byte], from: Int, length: Int): Long = {
    var h = start
    val end = from + length
    var i = from
    while (i + 8 <= end) {
      var w = 0L
      var b = 7
      while (b >= 0) { w = (w << 8) | (bytes(i + b) & 0xffL); b -= 1 }
      h = mix(h ^ w)
      i += 8
    }
    if (i < end) {
      var w = 0L
      var b = end - 1
      while (b >= i) { w = (w << 8) | (bytes(b) & 0xffL); b -= 1 }
      h = mix(h ^ w)
    }
    mix(h ^ length)
  }

  /** SplitMix64's step: the golden-ratio increment, then its finalizer. */
  def mix(x: Long): Long = {
    var z = x + 0x9E3779B97F4A7C15L
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL
    z ^ (z >>> 31)
  }
}
