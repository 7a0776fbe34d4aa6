package org.apache.spark.sql.windowsketch

import java.util.concurrent.TimeUnit.NANOSECONDS

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, JoinedRow, UnsafeProjection,
  UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.execution.metric.SQLMetric

/**
 * The map side of a GROUP BY (partial mode) whose aggregates are all windowsketch's, on a
 * hash table of its own while the task has at most `maxKeys` keys and they hold at most
 * `byteBudget` bytes of heap.
 *
 * Each row's grouping key is hashed once into an open-addressing table of copied keys,
 * with the key's sketches beside it in one array, and the aggregates' own `update` is
 * called on them: no map entries, buffer rows or per-row closures, which were most of
 * Spark's object hash aggregation's time at 10^4 keys (JDK Flight Recorder). A row with a
 * key past `maxKeys` ends the table: its partial results are emitted, and that row and the
 * rest of the input go to `rest` (Spark's own iterator, which sorts them). So does a row
 * after which the keys and their buffers hold more than `byteBudget` (each buffer's
 * [[BoundedBufferAggregate.heldBytes]], read after its row), or a
 * [[CompactBufferAggregate]]'s buffer is no longer compact (its bytes are counted at the
 * compact bound): the rows after it go to `rest`. Partial
 * aggregation allows a key's partial results to come out in several rows: the final side
 * merges them into what one sketch of all its rows would hold.
 */
private[windowsketch] final class PartialSketchAggregation(
    input: Iterator[InternalRow],
    groupingKey: UnsafeProjection,
    functions: Array[TypedImperativeAggregate[AnyRef]],
    result: UnsafeProjection,
    maxKeys: Int,
    byteBudget: Long,
    rest: Iterator[InternalRow] => Iterator[InternalRow],
    numOutputRows: SQLMetric,
    aggTime: SQLMetric) extends Iterator[InternalRow] {
  import PartialSketchAggregation._

  private val width = functions.length
  private val compact = functions.map {
    case c: CompactBufferAggregate => c
    case _ => null
  }
  // The operator is planned only where every aggregate is one.
  private val sized = functions.map(_.asInstanceOf[BoundedBufferAggregate])
  private var capacity = InitialCapacity
  private var hashes = new Array[Int](capacity)
  private var keys = new Array[UnsafeRow](capacity)
  private var buffers = new Array[AnyRef](capacity * width)
  private var slotBytes = new Array[Long](capacity) // the heap a key's buffers held after its last row
  private var heldBytes = 0L // keys and buffers
  private var keyCount = 0
  private var aggregated = false
  private var emitting = 0 // the next table slot to look at once aggregated
  private var overflow: InternalRow = null // the first row of a key past maxKeys
  private var full = false // past the byte budget or a compact bound: the rest go to `rest`
  private var tail: Iterator[InternalRow] = null
  private val serialized = new GenericInternalRow(width)
  private val joined = new JoinedRow

  override def hasNext: Boolean = {
    if (!aggregated) aggregate()
    while (emitting < capacity && keys(emitting) == null) emitting += 1
    if (emitting < capacity) true
    else {
      if (tail == null) {
        keys = null
        buffers = null
        slotBytes = null
        val start = System.nanoTime() // Spark's iterator aggregates as it is made
        tail = if (overflow != null) rest(Iterator.single(overflow) ++ input)
          else if (full && input.hasNext) rest(input)
          else Iterator.empty
        aggTime += NANOSECONDS.toMillis(System.nanoTime() - start)
      }
      tail.hasNext
    }
  }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException("no more groups")
    if (emitting >= capacity) return tail.next()
    val base = emitting * width
    var i = 0
    while (i < width) {
      serialized.update(i, functions(i).serialize(buffers(base + i)))
      buffers(base + i) = null // the sketch is bytes now: let it go
      i += 1
    }
    val row = result(joined(keys(emitting), serialized))
    keys(emitting) = null
    emitting += 1
    numOutputRows += 1
    row
  }

  /**
   * Reads input rows into the table until the input ends, a key past `maxKeys` comes, the
   * heap held passes the budget or a buffer outgrows its compact bound.
   */
  private def aggregate(): Unit = {
    aggregated = true
    val start = System.nanoTime()
    while (overflow == null && !full && input.hasNext) {
      val row = input.next()
      val key = groupingKey(row)
      val hash = key.hashCode
      val mask = capacity - 1
      var slot = (hash ^ (hash >>> 16)) & mask
      while (keys(slot) != null && !(hashes(slot) == hash && keys(slot).equals(key))) {
        slot = (slot + 1) & mask
      }
      if (keys(slot) == null && keyCount == maxKeys) overflow = row.copy()
      else {
        val base = slot * width
        if (keys(slot) == null) {
          keys(slot) = key.copy()
          hashes(slot) = hash
          heldBytes += KeyObjectBytes + key.getSizeInBytes
          var i = 0
          while (i < width) { buffers(base + i) = functions(i).createAggregationBuffer(); i += 1 }
          keyCount += 1
        }
        var bytes = 0L
        var i = 0
        while (i < width) {
          buffers(base + i) = functions(i).update(buffers(base + i), row)
          if (compact(i) != null && !compact(i).isCompact(buffers(base + i))) full = true
          bytes += sized(i).heldBytes(buffers(base + i))
          i += 1
        }
        heldBytes += bytes - slotBytes(slot)
        slotBytes(slot) = bytes
        if (heldBytes > byteBudget) full = true
        if (2 * keyCount > capacity) grow()
      }
    }
    aggTime += NANOSECONDS.toMillis(System.nanoTime() - start)
  }

  private def grow(): Unit = {
    val oldKeys = keys
    val oldHashes = hashes
    val oldBuffers = buffers
    val oldBytes = slotBytes
    capacity *= 2
    keys = new Array[UnsafeRow](capacity)
    hashes = new Array[Int](capacity)
    buffers = new Array[AnyRef](capacity * width)
    slotBytes = new Array[Long](capacity)
    val mask = capacity - 1
    var old = 0
    while (old < oldKeys.length) {
      if (oldKeys(old) != null) {
        val hash = oldHashes(old)
        var slot = (hash ^ (hash >>> 16)) & mask
        while (keys(slot) != null) slot = (slot + 1) & mask
        keys(slot) = oldKeys(old)
        hashes(slot) = hash
        slotBytes(slot) = oldBytes(old)
        System.arraycopy(oldBuffers, old * width, buffers, slot * width, width)
      }
      old += 1
    }
  }
}

private[windowsketch] object PartialSketchAggregation {
  private val InitialCapacity = 1024
  /** A copied key's UnsafeRow object and its byte array's header, beside the key's bytes. */
  private val KeyObjectBytes = 56L
}
