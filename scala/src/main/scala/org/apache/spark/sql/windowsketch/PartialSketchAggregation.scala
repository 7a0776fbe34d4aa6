package org.apache.spark.sql.windowsketch

import java.util.concurrent.TimeUnit.NANOSECONDS

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, JoinedRow, UnsafeProjection,
  UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.execution.metric.SQLMetric
import org.apache.spark.unsafe.Platform

/**
 * The map side of a GROUP BY (partial mode) whose aggregates are all windowsketch's, on a
 * hash table of its own while the task has at most `maxKeys` keys and they hold at most
 * `byteBudget` bytes of heap.
 *
 * Each row's grouping key is hashed once into an open-addressing table of keys (inline
 * longs when every key has the same `fixedKeyBytes`, copied rows otherwise: a probe then
 * reads a key without following a row to its bytes, which were out of cache at 10^4
 * keys), with the key's sketches beside it in one array, and the aggregates' own `update` is
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
    keyFields: Int,
    fixedKeyBytes: Int,
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
  private var keys: TableKeys = TableKeys(capacity, keyFields, fixedKeyBytes)
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
    while (emitting < capacity && !keys.filled(emitting)) emitting += 1
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
    val row = result(joined(keys.row(emitting), serialized))
    keys.clear(emitting)
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
      while (keys.filled(slot) && !(hashes(slot) == hash && keys.matches(slot, key))) {
        slot = (slot + 1) & mask
      }
      if (!keys.filled(slot) && keyCount == maxKeys) overflow = row.copy()
      else {
        val base = slot * width
        if (!keys.filled(slot)) {
          keys.put(slot, key)
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
    keys = TableKeys(capacity, keyFields, fixedKeyBytes)
    hashes = new Array[Int](capacity)
    buffers = new Array[AnyRef](capacity * width)
    slotBytes = new Array[Long](capacity)
    val mask = capacity - 1
    var old = 0
    while (old < oldHashes.length) {
      if (oldKeys.filled(old)) {
        val hash = oldHashes(old)
        var slot = (hash ^ (hash >>> 16)) & mask
        while (keys.filled(slot)) slot = (slot + 1) & mask
        oldKeys.moveTo(old, keys, slot)
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

/** The table's keys by slot. */
private[windowsketch] abstract class TableKeys {
  def filled(slot: Int): Boolean
  def matches(slot: Int, key: UnsafeRow): Boolean
  def put(slot: Int, key: UnsafeRow): Unit
  /** The key at `slot` as a row, valid until the next call. */
  def row(slot: Int): UnsafeRow
  def clear(slot: Int): Unit
  def moveTo(slot: Int, to: TableKeys, toSlot: Int): Unit
}

private[windowsketch] object TableKeys {
  /** Inline keys when every key is `fixedKeyBytes` long (0: not fixed), else copied rows. */
  def apply(capacity: Int, fields: Int, fixedKeyBytes: Int): TableKeys =
    if (fixedKeyBytes > 0) new InlineKeys(capacity, fields, fixedKeyBytes / 8)
    else new CopiedKeys(capacity)
}

/** Keys as copies of their rows (keys of variable length: strings, arrays). */
private final class CopiedKeys(capacity: Int) extends TableKeys {
  private val rows = new Array[UnsafeRow](capacity)
  def filled(slot: Int): Boolean = rows(slot) != null
  def matches(slot: Int, key: UnsafeRow): Boolean = rows(slot).equals(key)
  def put(slot: Int, key: UnsafeRow): Unit = rows(slot) = key.copy()
  def row(slot: Int): UnsafeRow = rows(slot)
  def clear(slot: Int): Unit = rows(slot) = null
  def moveTo(slot: Int, to: TableKeys, toSlot: Int): Unit =
    to.asInstanceOf[CopiedKeys].rows(toSlot) = rows(slot)
}

/**
 * Keys of one fixed length (every grouping column fixed-width: the null bits and one word a
 * field), `words` longs a slot in one array: equal rows are equal words.
 */
private final class InlineKeys(capacity: Int, fields: Int, words: Int) extends TableKeys {
  private val data = new Array[Long](capacity * words)
  private val used = new Array[Boolean](capacity)
  private val bytes = new Array[Byte](8 * words)
  private val out = new UnsafeRow(fields)
  out.pointTo(bytes, bytes.length)

  def filled(slot: Int): Boolean = used(slot)

  def matches(slot: Int, key: UnsafeRow): Boolean = {
    val base = key.getBaseObject
    val offset = key.getBaseOffset
    val at = slot * words
    var w = 0
    while (w < words && Platform.getLong(base, offset + 8L * w) == data(at + w)) w += 1
    w == words
  }

  def put(slot: Int, key: UnsafeRow): Unit = {
    assert(key.getSizeInBytes == 8 * words, s"a key of ${key.getSizeInBytes} bytes, not ${8 * words}")
    val base = key.getBaseObject
    val offset = key.getBaseOffset
    var w = 0
    while (w < words) { data(slot * words + w) = Platform.getLong(base, offset + 8L * w); w += 1 }
    used(slot) = true
  }

  def row(slot: Int): UnsafeRow = {
    var w = 0
    while (w < words) {
      Platform.putLong(bytes, Platform.BYTE_ARRAY_OFFSET + 8L * w, data(slot * words + w))
      w += 1
    }
    out
  }

  def clear(slot: Int): Unit = used(slot) = false

  def moveTo(slot: Int, to: TableKeys, toSlot: Int): Unit = {
    val into = to.asInstanceOf[InlineKeys]
    System.arraycopy(data, slot * words, into.data, toSlot * words, words)
    into.used(toSlot) = true
  }
}
