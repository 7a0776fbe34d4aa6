package windowsketch.core
package frequencies

import scala.collection.mutable.ArrayBuffer

import windowsketch.core.count.{ExponentialHistogram, OutOfOrderEventException}

/**
 * The most frequent items of the window for rows in time order (a running frame ordered by
 * `ts`, a live key whose ticks do not slice its window) in O((1/eps)·log n) counters and
 * records, not the O((1/eps²)·log n) of summaries per node (proof: docs/top-k.md,
 * "Running frames: leveled counts").
 *
 * Level l has granularity g = 2^l and runs a Misra–Gries table of `capacity` counters: a
 * row adds 1 to its item's counter; a counter that reaches g leaves the table as a
 * *record* (the item and the row's time); a new item finding the table full takes 1 off
 * every counter instead (a decrement step, itself counted, and every g steps a record of
 * no item). Each level keeps its records inside the window, at most `queueCapacity`; one
 * more drops the oldest, and the level cannot answer while a dropped record is inside the
 * window. Level 0 (g = 1) records every row, so it answers exactly.
 *
 * An item's count f in the window, with v = its counter + g · its records inside the
 * window and D̂ = the decrement counter + g · the records of no item inside it, lies in
 * [v − (g − 1), v + D̂]. A level answers within eps · n when the one below it holds at
 * least `coverRecords` records of the window; the lowest that can answer always can.
 * The top level has never made a record; when it would, it first copies itself as the
 * next level up, which is then the state that level would have had from the first row.
 */
final class LeveledTopK(val window: Long, val eps: Double) extends LiveTopKWindow {
  import LeveledTopK._

  ExponentialHistogram.checkParameters(window, eps)

  /** Counters a level's table holds: 1 / (capacity + 1) <= eps / 2. */
  val capacity: Int = SlidingTopK.capacityFor(eps)
  /** Records of the window in the level below past which a level's answer is within eps·n. */
  val coverRecords: Int = LeveledTopK.coverRecords(eps)
  /** Records a level holds; past them it drops its oldest. */
  val queueCapacity: Int = coverRecords + coverRecords / 8 + 1

  // Level 0 is never the top: it records every row, and level 1 has counted each from the first.
  private val levels = ArrayBuffer(new Level(0), new Level(1))
  private val interned = new ItemTable()
  private var seenAny = false
  private var nowTs = 0L

  // The level answering, its records counted in each item's `inWindow`, and the last answer
  // (for `answeredK` items), valid until a count falls or the bounds' slack changes;
  // `raised` the items whose counts rose since.
  private var answering = 0
  private var answer: Array[ItemCount] = null
  private var answeredK = 0
  private var answerValid = false
  private var answerGeneration = 0L
  private val raised = new ArrayBuffer[Item]()

  def hasTime: Boolean = seenAny
  def now: Long = nowTs

  /** Levels held: at most log2 of the largest count or decrement count so far, plus 2. */
  def levelCount: Int = levels.size

  /** Whether the last answer was exact (the level of granularity 1 answered). */
  def isExact: Boolean = answering == 0

  /** True once an answer came from a level above 0, with bounds rather than exact counts. */
  def isBounded: Boolean = !isExact

  /** True when the window holds no row with an item: level 0 holds the newest rows' records. */
  def isEmpty: Boolean = levels(0).held == 0

  /** Counters and records held over all levels: what memory is made of, beside the items. */
  def heldEntries: Long = levels.foldLeft(0L)((sum, level) => sum + level.size + level.held)

  def merge(other: TopKWindow): Unit =
    throw new UnsupportedOperationException("the time-ordered item counts cannot merge; use SlidingTopK")

  def add(ts: Long, item: Array[Byte]): Unit = {
    if (seenAny && ts < nowTs) throw new OutOfOrderEventException(ts, nowTs)
    advanceTo(ts)
    val it = intern(item)
    // A level the top forks while counting this row has counted it already.
    val top = levels.size - 1
    var l = 0
    while (l <= top) {
      levels(l).count(it, l == top)
      l += 1
    }
    release(it) // the reference `intern` took
  }

  def advanceTo(ts: Long): Unit =
    if (!seenAny || ts > nowTs) {
      nowTs = ts
      seenAny = true
      levels.foreach(_.expire())
    }

  /**
   * The `k` items with the largest estimates, ties to the larger lower bound, then to the
   * item's value: the answering level's bounds, exact at level 0.
   */
  def top(k: Int): Array[ItemCount] = {
    chooseLevel()
    val level = levels(answering)
    if (!answerValid || answeredK != k) {
      answerGeneration += 1
      val best = new OrderedTopK.FirstK(k, answerOrder, level.size + level.held)
      level.foreachCandidate(it => offer(best, level, it))
      setAnswer(best.result, k)
    } else if (raised.nonEmpty) {
      val best = new OrderedTopK.FirstK(k, answerOrder, answer.length + raised.size)
      answer.foreach(c => if (!raised.exists(r => r.bytes eq c.item)) best.offer(c))
      raised.foreach(it => offer(best, level, it))
      val ranked = best.result
      // An unchanged answer stays the same array: a running frame reuses the row it made.
      if (!OrderedTopK.sameAnswer(ranked, answer)) { answerGeneration += 1; setAnswer(ranked, k) }
    }
    raised.clear()
    answer
  }

  /** Lists only items counted at least once for certain, as the sketch lists those it counted. */
  private def offer(best: OrderedTopK.FirstK, level: Level, it: Item): Unit = {
    val c = level.bounds(it)
    if (c.lower > 0) best.offer(c)
  }

  private def setAnswer(ranked: Array[ItemCount], k: Int): Unit = {
    answer = ranked
    answeredK = k
    answerValid = true
    ranked.foreach(c => interned.find(c.item).listedIn = answerGeneration)
  }

  /**
   * Keeps the answering level while it may answer, else takes the lowest that may: levels
   * move only when the window's rows change by about an eighth, not at every record.
   */
  private def chooseLevel(): Unit =
    if (!mayAnswer(answering)) {
      var l = 0
      while (!mayAnswer(l)) l += 1
      levels(answering).countInWindow(-1)
      answering = l
      levels(l).countInWindow(1)
      answerValid = false
    }

  private def mayAnswer(l: Int): Boolean =
    !levels(l).lostInWindow && (l == 0 || levels(l - 1).lostInWindow || levels(l - 1).held >= coverRecords)

  private def inWindow(ts: Long): Boolean = java.lang.Long.compareUnsigned(nowTs - ts, window) < 0

  /**
   * A live key's state: a byte (1: it has a time), now (8 bytes), the answering level, the
   * items once, ascending (a varint count, then each item's varint length and bytes), the
   * level count, and per level its decrement counter, its table (varint size, then per
   * counter the item's index as a step from the previous one's less one, and the counter),
   * whether it dropped a record (a byte; then the dropped record's age from now) and its
   * records oldest first (varint count, then per record 0 for no item or the item's index
   * plus 1, and its time, the first as its age from now, the others as steps forward).
   */
  private[core] def writeTo(out: ByteWriter): Unit = {
    out.byte(if (seenAny) 1 else 0)
    out.long(nowTs)
    out.varint(answering)
    val items = interned.items
    java.util.Arrays.sort(items, ItemOrder)
    val index = new java.util.IdentityHashMap[Item, Integer]()
    out.varint(items.length)
    items.indices.foreach { i =>
      index.put(items(i), i)
      out.varint(items(i).bytes.length)
      out.bytes(items(i).bytes)
    }
    out.varint(levels.size)
    levels.foreach(_.writeTo(out, index))
  }

  private def restore(hasTime: Boolean, now: Long, answeringLevel: Int, restored: Seq[Level],
      items: Array[Item]): Unit = {
    seenAny = hasTime
    nowTs = now
    levels.clear()
    levels ++= restored
    items.foreach(interned.add)
    answering = answeringLevel
    levels(answering).countInWindow(1)
  }

  private def intern(bytes: Array[Byte]): Item = {
    var it = interned.find(bytes)
    if (it == null) { it = Item.of(bytes); interned.add(it) }
    it.refs += 1
    it
  }

  private def release(it: Item): Unit = {
    it.refs -= 1
    if (it.refs == 0) interned.remove(it)
  }

  /** One level: its Misra–Gries table (open addressing), decrement counter and records. */
  private final class Level(val index: Int) {
    val g: Long = 1L << index
    // The table: items and counters (1 <= counter < g) by linear probing.
    private var keys = new Array[Item](8)
    private var counters = new Array[Long](8)
    var size = 0
    // Decrement steps since the last record of no item (< g).
    var decrements = 0L
    // The records inside the window, oldest first, in a ring; a null item: g decrements.
    private var items = new Array[Item](8)
    private var times = new Array[Long](8)
    private var first = 0
    var held = 0
    private var noItemHeld = 0
    // The newest record dropped to keep `queueCapacity`, if any.
    private var dropped = false
    private var droppedTs = 0L

    def lostInWindow: Boolean = dropped && inWindow(droppedTs)

    private def isAnswering: Boolean = levels(answering) eq this

    def count(it: Item, isTop: Boolean): Unit = {
      val slot = find(it)
      if (keys(slot) != null) {
        counters(slot) += 1
        if (counters(slot) == g) {
          if (isTop) fork()
          removeAt(slot)
          record(it)
          release(it)
        } else if (isAnswering) raise(it)
      } else if (g == 1) {
        record(it)
      } else if (size < capacity) {
        it.refs += 1
        keys(slot) = it
        counters(slot) = 1
        size += 1
        if (2 * size > keys.length) resize(2 * keys.length)
        if (isAnswering) raise(it)
      } else {
        decrementAll()
        decrements += 1
        if (decrements == g) {
          if (isTop) fork()
          decrements = 0
          record(null)
        }
        if (isAnswering) answerValid = false
      }
    }

    def writeTo(out: ByteWriter, index: java.util.IdentityHashMap[Item, Integer]): Unit = {
      out.varint(decrements)
      val held = keys.indices.filter(keys(_) != null).sortBy(i => index.get(keys(i)).intValue)
      out.varint(held.size)
      var previous = -1
      held.foreach { i =>
        val at = index.get(keys(i)).intValue
        out.varint(at - previous - 1)
        out.varint(counters(i))
        previous = at
      }
      out.byte(if (dropped) 1 else 0)
      if (dropped) out.varint(nowTs - droppedTs)
      out.varint(this.held)
      var before = 0L
      var i = 0
      while (i < this.held) {
        val it = items(at(i))
        out.varint(if (it == null) 0 else index.get(it).intValue + 1)
        out.varint(if (i == 0) nowTs - times(at(i)) else times(at(i)) - before)
        before = times(at(i))
        i += 1
      }
    }

    /** Loads a table, decrement counter and records read from a state, each item's references counted. */
    def restore(tableItems: Seq[Item], tableCounters: Seq[Long], decrementCount: Long,
        recordItems: Seq[Item], recordTimes: Seq[Long], droppedAt: Option[Long]): Unit = {
      decrements = decrementCount
      tableItems.indices.foreach { i =>
        val it = tableItems(i)
        it.refs += 1
        val slot = find(it)
        keys(slot) = it
        counters(slot) = tableCounters(i)
        size += 1
        if (2 * size > keys.length) resize(2 * keys.length)
      }
      recordItems.indices.foreach { i =>
        if (held == items.length) growRing()
        items(at(held)) = recordItems(i)
        times(at(held)) = recordTimes(i)
        held += 1
        if (recordItems(i) == null) noItemHeld += 1 else recordItems(i).refs += 1
      }
      droppedAt.foreach { t => dropped = true; droppedTs = t }
    }

    private def raise(it: Item): Unit =
      if (answerValid) {
        raised += it
        // Unread answers (a caller that reads rarely) are ranked anew, not from a long list.
        if (raised.length > MaxRaised) { answerValid = false; raised.clear() }
      }

    /** The counter `it` holds, 0 if none. */
    def counter(it: Item): Long = { val slot = find(it); if (keys(slot) == null) 0L else counters(slot) }

    /** `it`'s bounds at this level. */
    def bounds(it: Item): ItemCount = {
      val v = counter(it) + g * it.inWindow
      val lower = math.max(0L, v - (g - 1))
      val upper = v + decrements + g * noItemHeld
      ItemCount(it.bytes, lower + (upper - lower) / 2, lower, upper)
    }

    /** Each item with a counter or a record inside the window, once or more. */
    def foreachCandidate(f: Item => Unit): Unit = {
      keys.foreach(it => if (it != null) f(it))
      var i = 0
      while (i < held) {
        val it = items(at(i))
        if (it != null && it.inWindow > 0) f(it)
        i += 1
      }
    }

    /** Adds `sign` to the `inWindow` of each record's item (the level starts or stops answering). */
    def countInWindow(sign: Int): Unit = {
      var i = 0
      while (i < held) {
        val it = items(at(i))
        if (it != null) it.inWindow += sign
        i += 1
      }
    }

    private def record(it: Item): Unit = {
      if (held == queueCapacity) dropOldest()
      else if (held == items.length) growRing()
      val i = at(held)
      items(i) = it
      times(i) = nowTs
      held += 1
      if (it == null) noItemHeld += 1 // after a decrement step, which already made the answer stale
      else {
        it.refs += 1
        if (isAnswering) { it.inWindow += 1; raise(it) }
      }
    }

    /** The ring's slot of the i-th record held, oldest first. */
    private def at(i: Int): Int = { val j = first + i; if (j >= items.length) j - items.length else j }

    private def dropOldest(): Unit = {
      dropped = true
      droppedTs = times(first)
      removeOldest()
    }

    /** Removes the records that left the window. */
    def expire(): Unit = while (held > 0 && !inWindow(times(first))) removeOldest()

    private def removeOldest(): Unit = {
      val it = items(first)
      items(first) = null
      first = at(1)
      held -= 1
      if (it == null) { noItemHeld -= 1; if (isAnswering) answerValid = false }
      else {
        if (isAnswering) {
          it.inWindow -= 1
          if (it.listedIn == answerGeneration) answerValid = false
        }
        release(it)
      }
    }

    private def growRing(): Unit = {
      val n = math.min(2 * items.length, queueCapacity)
      val newItems = new Array[Item](n)
      val newTimes = new Array[Long](n)
      var i = 0
      while (i < held) {
        newItems(i) = items(at(i))
        newTimes(i) = times(at(i))
        i += 1
      }
      items = newItems
      times = newTimes
      first = 0
    }

    /** The next level up as it would be had it counted from the first row: this one's table. */
    private def fork(): Unit = {
      val next = new Level(index + 1)
      next.keys = keys.clone()
      next.counters = counters.clone()
      next.size = size
      next.decrements = decrements
      keys.foreach(it => if (it != null) it.refs += 1)
      levels += next
    }

    /** The slot holding `it`, or the empty slot where it would go. */
    private def find(it: Item): Int = {
      val mask = keys.length - 1
      var i = it.slot & mask
      while (keys(i) != null && !(keys(i) eq it)) i = (i + 1) & mask
      i
    }

    /** Empties `slot`, moving later entries of its probe run back (no tombstones). */
    private def removeAt(slot: Int): Unit = {
      val mask = keys.length - 1
      var hole = slot
      var i = (slot + 1) & mask
      while (keys(i) != null) {
        val home = keys(i).slot & mask
        // Move the entry into the hole unless its home lies cyclically in (hole, i].
        if (((i - home) & mask) >= ((i - hole) & mask)) {
          keys(hole) = keys(i)
          counters(hole) = counters(i)
          hole = i
        }
        i = (i + 1) & mask
      }
      keys(hole) = null
      counters(hole) = 0L
      size -= 1
    }

    /** Takes 1 off every counter, dropping those at 0. */
    private def decrementAll(): Unit = {
      val oldKeys = keys
      val oldCounters = counters
      keys = new Array[Item](oldKeys.length)
      counters = new Array[Long](oldKeys.length)
      size = 0
      var i = 0
      while (i < oldKeys.length) {
        val it = oldKeys(i)
        if (it != null) {
          if (oldCounters(i) > 1) {
            val slot = find(it)
            keys(slot) = it
            counters(slot) = oldCounters(i) - 1
            size += 1
          } else release(it)
        }
        i += 1
      }
    }

    private def resize(n: Int): Unit = {
      val oldKeys = keys
      val oldCounters = counters
      keys = new Array[Item](n)
      counters = new Array[Long](n)
      var i = 0
      while (i < oldKeys.length) {
        if (oldKeys(i) != null) {
          val slot = find(oldKeys(i))
          keys(slot) = oldKeys(i)
          counters(slot) = oldCounters(i)
        }
        i += 1
      }
    }
  }
}

object LeveledTopK {
  private val MaxRaised = 64

  private val ItemOrder: java.util.Comparator[Item] = (a, b) => ItemCounts.compare(a.bytes, b.bytes)

  /** Reads [[LeveledTopK.writeTo]], refusing any state a key could not have held. */
  private[core] def readFrom(window: Long, eps: Double, in: ByteReader): LeveledTopK = {
    def corrupt(what: String) = new CorruptSketchException(s"invalid leveled top-k state: $what")
    val o = new LeveledTopK(window, eps)
    val hasTime = in.byte() match {
      case 0 => false
      case 1 => true
      case other => throw corrupt(s"flags $other")
    }
    val now = in.long()
    o.nowTs = now
    val answeringLevel = in.varint()
    val count = in.varint()
    if (count < 0 || count > in.remaining) throw corrupt("item count")
    val items = new Array[Item](count.toInt)
    items.indices.foreach { i =>
      val length = in.varint()
      if (length < 0 || length > in.remaining) throw corrupt("item length")
      items(i) = Item.of(in.take(length.toInt))
      if (i > 0 && ItemCounts.compare(items(i - 1).bytes, items(i).bytes) >= 0) throw corrupt("items out of order")
    }
    val levelCount = in.varint()
    if (levelCount < 2 || levelCount > MaxLevels || answeringLevel < 0 || answeringLevel >= levelCount ||
        (!hasTime && (levelCount != 2 || answeringLevel != 0 || count != 0))) {
      throw corrupt("levels")
    }
    def item(index: Long): Item = {
      if (index < 0 || index >= items.length) throw corrupt("item index")
      items(index.toInt)
    }
    val levels = (0 until levelCount.toInt).map { l =>
      val level = new o.Level(l)
      val g = level.g
      val decrements = in.varint()
      val tableSize = in.varint()
      if (decrements < 0 || decrements >= g || tableSize < 0 || tableSize > o.capacity || (l == 0 && tableSize != 0)) {
        throw corrupt(s"level $l's table")
      }
      var previous = -1L
      val tableItems = new ArrayBuffer[Item]()
      val tableCounters = new ArrayBuffer[Long]()
      (0L until tableSize).foreach { _ =>
        val step = in.varint()
        val counter = in.varint()
        if (step < 0 || counter < 1 || counter >= g) throw corrupt(s"level $l's counters")
        previous += step + 1
        tableItems += item(previous)
        tableCounters += counter
      }
      val droppedAt = in.byte() match {
        case 0 => None
        case 1 =>
          val age = in.varint()
          if (age < 0) throw corrupt(s"level $l's dropped record")
          Some(now - age)
        case _ => throw corrupt(s"level $l's dropped record")
      }
      val held = in.varint()
      // Records of g rows each count at most a long's rows: their sums cannot overflow.
      if (held < 0 || held > o.queueCapacity || held > in.remaining || (held + 1) > Long.MaxValue / g / 2) {
        throw corrupt(s"level $l's records")
      }
      val recordItems = new ArrayBuffer[Item]()
      val recordTimes = new ArrayBuffer[Long]()
      var before = 0L
      (0L until held).foreach { i =>
        val at = in.varint()
        val step = in.varint()
        val t = if (i == 0) now - step else before + step
        val outside = if (i == 0) java.lang.Long.compareUnsigned(step, window) >= 0 else t < before
        if (step < 0 || outside || t > now || (l == 0 && at == 0) || droppedAt.exists(_ > t)) {
          throw corrupt(s"level $l's records")
        }
        recordItems += (if (at == 0) null else item(at - 1))
        recordTimes += t
        before = t
      }
      if (l == levelCount - 1 && (held > 0 || droppedAt.nonEmpty)) throw corrupt("the top level made a record")
      level.restore(tableItems.toSeq, tableCounters.toSeq, decrements, recordItems.toSeq, recordTimes.toSeq, droppedAt)
      level
    }
    if (items.exists(_.refs == 0)) throw corrupt("an item no level holds")
    o.restore(hasTime, now, answeringLevel.toInt, levels, items)
    o
  }

  /** Levels at most: granularities up to 2^62, past any count a long holds. */
  private val MaxLevels = 63

  /**
   * The records of the window a level must hold for the level above to answer within eps·n:
   * then n > (coverRecords − m − 2)·(g/2)·(m + 1)/(m + 2) for the level above's g, so its
   * 3g <= eps·n / 2 (docs/top-k.md).
   */
  def coverRecords(eps: Double): Int = {
    val m = SlidingTopK.capacityFor(eps)
    math.ceil(12.0 / eps * (m + 2) / (m + 1)).toInt + m + 2
  }

  /**
   * An interned item (one object per distinct bytes, compared by identity): its bytes, its
   * hash, how many counters and records hold it, its records in the answering level.
   */
  private final class Item(val bytes: Array[Byte], val slot: Int) {
    var refs = 0
    var inWindow = 0
    var listedIn = -1L
  }

  private object Item {
    def of(bytes: Array[Byte]): Item = new Item(bytes, ItemCounts.hash(bytes))
  }

  /** The interned items by their bytes: open addressing, removals shift entries back (no tombstones). */
  private final class ItemTable {
    private var slots = new Array[Item](16)
    private var count = 0

    def items: Array[Item] = slots.filter(_ != null)

    /** The item of these bytes, or null. */
    def find(bytes: Array[Byte]): Item = {
      val h = ItemCounts.hash(bytes)
      val mask = slots.length - 1
      var i = h & mask
      while (slots(i) != null && !(slots(i).slot == h && java.util.Arrays.equals(slots(i).bytes, bytes))) i = (i + 1) & mask
      slots(i)
    }

    /** Adds an item whose bytes the table does not hold. */
    def add(it: Item): Unit = {
      if (2 * (count + 1) > slots.length) {
        val old = slots
        slots = new Array[Item](2 * old.length)
        old.foreach(o => if (o != null) slots(freeSlot(o)) = o)
      }
      slots(freeSlot(it)) = it
      count += 1
    }

    private def freeSlot(it: Item): Int = {
      val mask = slots.length - 1
      var i = it.slot & mask
      while (slots(i) != null) i = (i + 1) & mask
      i
    }

    def remove(it: Item): Unit = {
      val mask = slots.length - 1
      var hole = it.slot & mask
      while (!(slots(hole) eq it)) hole = (hole + 1) & mask
      var i = (hole + 1) & mask
      while (slots(i) != null) {
        val home = slots(i).slot & mask
        if (((i - home) & mask) >= ((i - hole) & mask)) {
          slots(hole) = slots(i)
          hole = i
        }
        i = (i + 1) & mask
      }
      slots(hole) = null
      count -= 1
    }
  }
}
