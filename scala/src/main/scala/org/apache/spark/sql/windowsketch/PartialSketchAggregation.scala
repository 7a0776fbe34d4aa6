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
 * Each row's grouping key is hashed once into an open-addressing table ([[TableSlots]]:
 * a slot's hash, heap and key in one run of longs when every key has the same
 * `fixedKeyBytes`, so a probe reads one cache line where copied rows' bytes missed cache
 * at 10^4 keys), with the key's sketches beside it in one array, and the aggregates' own `update` is
 * called on them: no map entries, buffer rows or per-row closures, which were most of
 * Spark's object hash aggregation's time at 10^4 keys (JDK Flight Recorder). Past `maxKeys`
 * keys, rows of keys on the table still go into it and the others go to `rest` (Spark's
 * own iterator, which sorts them). Once the keys and their buffers hold more than
 * `byteBudget` (each buffer's [[BoundedBufferAggregate.heldBytes]], read after its row or
 * its staged rows), or
 * a [[CompactBufferAggregate]]'s buffer is no longer compact (its bytes are counted at the
 * compact bound), every row after goes to `rest`. The table's partial results are emitted
 * once `rest` has read the input; `keysSorted` counts the keys `rest` emits. Once the
 * buffers hold more than `stageFromBytes` and every aggregate is a [[WordInputAggregate]],
 * rows wait in a stage and go into their buffers key by key (see `applyStaged`). Partial
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
    stageFromBytes: Long,
    rest: Iterator[InternalRow] => Iterator[InternalRow],
    numOutputRows: SQLMetric,
    aggTime: SQLMetric,
    keysSorted: SQLMetric) extends Iterator[InternalRow] {
  import PartialSketchAggregation._

  private val width = functions.length
  private val compact = functions.map {
    case c: CompactBufferAggregate => c
    case _ => null
  }
  // The operator is planned only where every aggregate is one.
  private val sized = functions.map(_.asInstanceOf[BoundedBufferAggregate])
  private var capacity = InitialCapacity
  private var keys = new TableSlots(capacity, keyFields, fixedKeyBytes)
  private var buffers = new Array[AnyRef](capacity * width)
  private var heldBytes = 0L // keys and buffers
  private var keyCount = 0
  private var aggregated = false
  private var emitting = 0 // the next table slot to look at once aggregated
  private var overflow: InternalRow = null // the first row of a key past maxKeys
  private var full = false // past the byte budget or a compact bound: the rest go to `rest`
  private var tail: Iterator[InternalRow] = null
  private val serialized = new GenericInternalRow(width)
  private val joined = new JoinedRow
  // Once the buffers hold more than `stageFromBytes` and every aggregate reads its
  // row as words, rows wait in a stage to be applied: each row's slot, and per aggregate a
  // tag and two words. They are applied grouped by slot (a stable counting sort) once the
  // stage holds `stageRows` rows, before the table grows, and at the end.
  private val wordInput: Array[WordInputAggregate] =
    if (functions.forall(_.isInstanceOf[WordInputAggregate])) {
      functions.map(_.asInstanceOf[WordInputAggregate])
    } else null
  private var staging = false
  private var stageRows = 0
  private var staged = 0
  private var stageSlots: Array[Int] = null
  private var stageTags: Array[Byte] = null
  private var stageWords: Array[Long] = null
  private var stageOrder: Array[Int] = null
  private var slotStarts: Array[Int] = null
  if (wordInput != null && stageFromBytes == 0) startStaging()

  override def hasNext: Boolean = {
    if (!aggregated) aggregate()
    while (emitting < capacity && !keys.filled(emitting)) emitting += 1
    if (emitting < capacity) true
    else {
      keys = null
      buffers = null
      stageSlots = null
      stageOrder = null
      stageTags = null
      stageWords = null
      slotStarts = null
      tail.hasNext
    }
  }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException("no more groups")
    if (emitting >= capacity) {
      keysSorted += 1 // a key of `rest`'s, which emits each of its keys once
      return tail.next()
    }
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
   * heap held passes the budget or a buffer outgrows its compact bound; then hands what is
   * left to `rest`, which aggregates it as it is made, so the table is complete after.
   */
  private def aggregate(): Unit = {
    aggregated = true
    val start = System.nanoTime()
    while (overflow == null && !full && input.hasNext) {
      val row = input.next()
      val key = groupingKey(row)
      val hash = key.hashCode
      var slot = slotOf(key, hash)
      if (!keys.filled(slot) && keyCount == maxKeys) overflow = row.copy()
      else {
        if (!keys.filled(slot)) {
          if (2 * (keyCount + 1) > capacity) {
            grow()
            slot = slotOf(key, hash)
          }
          insert(slot, key, hash)
        }
        accept(slot, row)
      }
    }
    tail = if (overflow != null || (full && input.hasNext)) rest(new RowsOffTable(overflow))
      else Iterator.empty
    applyStaged() // the input has ended, or `rest` has read it
    aggTime += NANOSECONDS.toMillis(System.nanoTime() - start)
  }

  /** The slot that holds `key`, or the empty one where it would go. */
  private def slotOf(key: UnsafeRow, hash: Int): Int = {
    var slot = home(hash)
    while (keys.filled(slot) && !keys.matches(slot, hash, key)) slot = (slot + 1) & (capacity - 1)
    slot
  }

  /** Where a key of `hash` is looked for first. */
  private def home(hash: Int): Int = (hash ^ (hash >>> 16)) & (capacity - 1)

  private def insert(slot: Int, key: UnsafeRow, hash: Int): Unit = {
    keys.put(slot, hash, key)
    heldBytes += KeyObjectBytes + key.getSizeInBytes
    val base = slot * width
    var i = 0
    while (i < width) { buffers(base + i) = functions(i).createAggregationBuffer(); i += 1 }
    keyCount += 1
  }

  /** `row` into its key's buffers at `slot`, now or once the stage is full. */
  private def accept(slot: Int, row: InternalRow): Unit =
    if (!staging) {
      val base = slot * width
      var i = 0
      while (i < width) {
        buffers(base + i) = functions(i).update(buffers(base + i), row)
        i += 1
      }
      account(slot)
    } else {
      val at = staged * width
      var i = 0
      while (i < width) {
        stageTags(at + i) = wordInput(i).readWords(row, stageWords, 2 * (at + i)).toByte
        i += 1
      }
      stageSlots(staged) = slot
      staged += 1
      if (staged == stageRows) applyStaged()
    }

  /** The heap the buffers at `slot` hold now; past the budget or a compact bound, `full`. */
  private def account(slot: Int): Unit = {
    val base = slot * width
    var bytes = 0L
    var i = 0
    while (i < width) {
      if (compact(i) != null && !compact(i).isCompact(buffers(base + i))) full = true
      bytes += sized(i).heldBytes(buffers(base + i))
      i += 1
    }
    heldBytes += bytes - keys.bytes(slot)
    keys.setBytes(slot, bytes)
    if (heldBytes > byteBudget) full = true
    if (!staging && wordInput != null && heldBytes > stageFromBytes) startStaging()
  }

  private def startStaging(): Unit = {
    staging = true
    sizeStage()
  }

  /**
   * Applies the staged rows key by key, each key's in the order they came: a stable
   * counting sort by slot, so a key's sketch and the arrays it appends to are read from
   * memory once per run of its rows. At 10^4 keys a row applied as it came missed cache on
   * the sketch and its arrays (JDK Flight Recorder: most of the time the map side spent).
   */
  private def applyStaged(): Unit = if (staged > 0) {
    java.util.Arrays.fill(slotStarts, 0)
    var r = 0
    while (r < staged) { slotStarts(stageSlots(r) + 1) += 1; r += 1 }
    var slot = 0
    while (slot < capacity) { slotStarts(slot + 1) += slotStarts(slot); slot += 1 }
    r = 0
    while (r < staged) {
      val at = stageSlots(r)
      stageOrder(slotStarts(at)) = r
      slotStarts(at) += 1
      r += 1
    }
    var k = 0
    while (k < staged) {
      val slot = stageSlots(stageOrder(k))
      val base = slot * width
      do {
        val row = stageOrder(k) * width
        var i = 0
        while (i < width) {
          val tag = stageTags(row + i)
          if (tag != WordInputAggregate.Skip) {
            buffers(base + i) = wordInput(i).updateWords(buffers(base + i), tag,
              stageWords(2 * (row + i)), stageWords(2 * (row + i) + 1))
          }
          i += 1
        }
        k += 1
      } while (k < staged && stageSlots(stageOrder(k)) == slot)
      account(slot)
    }
    staged = 0
  }

  /**
   * Stage arrays for the table's capacity: eight rows a slot, so that sorting a stage by
   * slot costs O(rows) and a key's sketch, cold in cache at each visit, takes more rows a
   * visit (26 at 10^4 keys, against 6.5 at two rows a slot: best of six alternating
   * processes, sums 1.84 to 1.60 s, counts 1.34 to 1.18 s); at most [[MaxStageRows]],
   * never below two rows a slot or [[MinStageRows]].
   */
  private def sizeStage(): Unit = {
    stageRows = math.max(MinStageRows, math.max(2 * capacity, math.min(MaxStageRows, 8 * capacity)))
    stageSlots = new Array[Int](stageRows)
    stageOrder = new Array[Int](stageRows)
    stageTags = new Array[Byte](stageRows * width)
    stageWords = new Array[Long](2 * stageRows * width)
    slotStarts = new Array[Int](capacity + 1)
  }

  /**
   * The input left once the table holds `maxKeys` keys (`first`: the row of the key past
   * them) or is full: while it is not full, a row of a key on the table still goes into the
   * table, and only the others pass to `rest` (past 65,536 keys a task, most rows of a GROUP
   * BY over 10^5 keys are of keys on the table); once it is full, every row passes.
   */
  private final class RowsOffTable(first: InternalRow) extends Iterator[InternalRow] {
    private var waiting: InternalRow = first

    override def hasNext: Boolean = {
      while (waiting == null && input.hasNext) {
        val row = input.next()
        if (full) waiting = row
        else {
          val key = groupingKey(row)
          val hash = key.hashCode
          val slot = slotOf(key, hash)
          if (keys.filled(slot)) accept(slot, row) else waiting = row
        }
      }
      if (waiting == null) applyStaged() // the input has ended
      waiting != null
    }

    // `rest` reads each row before it asks for the next, so the input's row needs no copy.
    override def next(): InternalRow = {
      if (!hasNext) throw new NoSuchElementException("no more rows")
      val row = waiting
      waiting = null
      row
    }
  }

  private def grow(): Unit = {
    applyStaged() // staged rows name the old table's slots
    val oldKeys = keys
    val oldBuffers = buffers
    val oldCapacity = capacity
    capacity *= 2
    keys = new TableSlots(capacity, keyFields, fixedKeyBytes)
    buffers = new Array[AnyRef](capacity * width)
    var old = 0
    while (old < oldCapacity) {
      if (oldKeys.filled(old)) {
        var slot = home(oldKeys.hash(old))
        while (keys.filled(slot)) slot = (slot + 1) & (capacity - 1)
        oldKeys.moveTo(old, keys, slot)
        System.arraycopy(oldBuffers, old * width, buffers, slot * width, width)
      }
      old += 1
    }
    if (staging) sizeStage()
  }
}

private[windowsketch] object PartialSketchAggregation {
  private val InitialCapacity = 1024
  private val MinStageRows = 4096
  // The stage's size at the table's key cap before (25 bytes a row with one aggregate: 6.5 MB).
  private val MaxStageRows = 1 << 18
  /** A copied key's UnsafeRow object and its byte array's header, beside the key's bytes. */
  private val KeyObjectBytes = 56L
}

/**
 * The table's slots: for each, whether it holds a key, the key's hash, the heap its buffers
 * held after its last row, and the key. A slot is one run of longs: a tag (the hash and a
 * bit that says the slot is filled), the heap, then the key's words when every key has one
 * fixed length (every grouping column fixed-width: the null bits and one word a field;
 * equal rows are equal words), so a probe reads one cache line. Other keys are copied rows.
 */
private[windowsketch] final class TableSlots(capacity: Int, fields: Int, fixedKeyBytes: Int) {
  private val words = fixedKeyBytes / 8
  private val stride = 2 + words
  private val data = new Array[Long](capacity * stride)
  private val copied = if (words == 0) new Array[UnsafeRow](capacity) else null
  // The row an inline key is read back into, valid until the next read.
  private val keyBytes = new Array[Byte](fixedKeyBytes)
  private val out = new UnsafeRow(fields)
  out.pointTo(keyBytes, keyBytes.length)

  private def tagOf(hash: Int): Long = (hash & 0xFFFFFFFFL) | TableSlots.Filled

  def filled(slot: Int): Boolean = data(slot * stride) != 0L
  def hash(slot: Int): Int = data(slot * stride).toInt
  def bytes(slot: Int): Long = data(slot * stride + 1)
  def setBytes(slot: Int, held: Long): Unit = data(slot * stride + 1) = held

  /** Whether the filled `slot` holds `key`, whose hash is `hash`. */
  def matches(slot: Int, hash: Int, key: UnsafeRow): Boolean = {
    val at = slot * stride
    if (data(at) != tagOf(hash)) false
    else if (words == 0) copied(slot).equals(key)
    else {
      val base = key.getBaseObject
      val offset = key.getBaseOffset
      var w = 0
      while (w < words && Platform.getLong(base, offset + 8L * w) == data(at + 2 + w)) w += 1
      w == words
    }
  }

  def put(slot: Int, hash: Int, key: UnsafeRow): Unit = {
    val at = slot * stride
    data(at) = tagOf(hash)
    data(at + 1) = 0L
    if (words == 0) copied(slot) = key.copy()
    else {
      assert(key.getSizeInBytes == fixedKeyBytes, s"a key of ${key.getSizeInBytes} bytes, not $fixedKeyBytes")
      val base = key.getBaseObject
      val offset = key.getBaseOffset
      var w = 0
      while (w < words) { data(at + 2 + w) = Platform.getLong(base, offset + 8L * w); w += 1 }
    }
  }

  /** The key at `slot` as a row, valid until the next call. */
  def row(slot: Int): UnsafeRow =
    if (words == 0) copied(slot)
    else {
      var w = 0
      while (w < words) {
        Platform.putLong(keyBytes, Platform.BYTE_ARRAY_OFFSET + 8L * w, data(slot * stride + 2 + w))
        w += 1
      }
      out
    }

  def clear(slot: Int): Unit = {
    data(slot * stride) = 0L
    if (words == 0) copied(slot) = null
  }

  def moveTo(slot: Int, to: TableSlots, toSlot: Int): Unit = {
    System.arraycopy(data, slot * stride, to.data, toSlot * stride, stride)
    if (words == 0) to.copied(toSlot) = copied(slot)
  }
}

private object TableSlots {
  private val Filled = 1L << 32
}
