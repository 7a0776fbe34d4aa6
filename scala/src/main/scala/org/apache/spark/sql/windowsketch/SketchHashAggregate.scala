package org.apache.spark.sql.windowsketch

import java.util.concurrent.TimeUnit.NANOSECONDS

import org.apache.spark.SparkEnv
import org.apache.spark.network.util.JavaUtils
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, BindReferences, Expression,
  MutableProjection, NamedExpression, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Partial,
  TypedImperativeAggregate}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan}
import org.apache.spark.sql.execution.aggregate.{BaseAggregateExec, ObjectAggregationIterator,
  ObjectHashAggregateExec}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.sql.internal.SQLConf

/** An aggregate whose buffer's heap size has a bound known when the query is planned. */
trait BoundedBufferAggregate {
  def bufferBytesBound: Long

  /**
   * The heap `buffer` holds now, read in O(1) after each of its rows: the map side's table
   * sums it over its keys. Most buffers hold far less than the bound, which is the default.
   */
  def heldBytes(buffer: Any): Long = bufferBytesBound
}

/**
 * An aggregate whose row is read as two words (the time and a value or weight), so the
 * map side's table may read rows into columns and apply them later, grouped by key in
 * arrival order: a key's sketch is then touched once per run of its rows, not once per
 * row ([[PartialSketchAggregation]]). Applying a row's words must leave the buffer as
 * `update` with that row would.
 */
trait WordInputAggregate {
  /**
   * Reads `input`'s arguments into `words(at)` and `words(at + 1)` and returns the tag to
   * apply them with, or [[WordInputAggregate.Skip]] when the row changes nothing. Bad
   * input throws here, as `update` would.
   */
  def readWords(input: InternalRow, words: Array[Long], at: Int): Int

  /** The row read by [[readWords]] (its tag and two words) into `buffer`. */
  def updateWords(buffer: AnyRef, tag: Int, first: Long, second: Long): AnyRef
}

object WordInputAggregate {
  /** [[WordInputAggregate.readWords]]'s tag for a row that changes nothing. */
  val Skip: Int = 0

  /** The tag for a row to apply, for an aggregate whose rows need no other. */
  val Apply: Int = 1
}

/**
 * An aggregate whose buffer stays under [[bufferBytesBound]] only while it is compact (a
 * distinct-count sketch's buffer of rows), and may then grow far past it: our own table
 * ends at the first buffer that is not compact, and Spark's iterator keeps Spark's own
 * key threshold.
 */
trait CompactBufferAggregate extends BoundedBufferAggregate {
  def isCompact(buffer: Any): Boolean
}

/**
 * Object hash aggregation for plans whose aggregates are all windowsketch's bounded
 * sketches, with a sort fallback threshold sized to the heap.
 *
 * `ObjectHashAggregateExec` switches to sorting the rest of a task's input once its hash
 * map holds `spark.sql.objectHashAggregate.sortBased.fallbackThreshold` keys (128): a
 * guard for buffers that can grow without bound (collect_list). A GROUP BY over 10^4 keys
 * then sorts nearly every row, and that sort was a quarter of approx_window_count's time.
 * Our buffers are bounded, so each task may keep as many keys as fit its share of Spark's
 * user memory at that bound. The map side (partial mode) runs on a hash table of our own
 * ([[PartialSketchAggregation]]) while its keys and the heap their buffers hold now fit
 * that share (`spark.windowsketch.groupBy.tableBytes` when set) and number at most
 * [[SketchHashAggregateExec.MaxTableKeys]]: buffers hold far less than their bound until
 * their windows hold many rows. Past it, and in the other modes, it runs on Spark's
 * iterator, with the same metrics and output.
 * A [[CompactBufferAggregate]]'s bound holds only while its buffers are compact, so with
 * one in the plan Spark's iterator keeps Spark's own threshold.
 */
case class SketchHashAggregateExec(
    requiredChildDistributionExpressions: Option[Seq[Expression]],
    isStreaming: Boolean,
    numShufflePartitions: Option[Int],
    groupingExpressions: Seq[NamedExpression],
    aggregateExpressions: Seq[AggregateExpression],
    aggregateAttributes: Seq[Attribute],
    initialInputBufferOffset: Int,
    resultExpressions: Seq[NamedExpression],
    child: SparkPlan,
    bytesPerKey: Long,
    minFallbackThreshold: Int,
    tableBytes: Long,
    stageFromBytes: Long)
  extends BaseAggregateExec {

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "numOutputRows" -> SQLMetrics.createMetric(sparkContext, "number of output rows"),
    "aggTime" -> SQLMetrics.createTimingMetric(sparkContext, "time in aggregation build"),
    "spillSize" -> SQLMetrics.createSizeMetric(sparkContext, "spill size"),
    "numTasksFallBacked" -> SQLMetrics.createMetric(sparkContext, "number of sort fallback tasks"),
    "numKeysSorted" -> SQLMetrics.createMetric(sparkContext, "number of keys sorted past the table"))

  /** Whether the map side runs on our own table: grouped, partial, no FILTER or DISTINCT. */
  private def onOwnTable: Boolean = groupingExpressions.nonEmpty &&
    aggregateExpressions.forall { e =>
      e.mode == Partial && e.filter.isEmpty && !e.isDistinct &&
        e.aggregateFunction.isInstanceOf[TypedImperativeAggregate[_]]
    }

  override protected def doExecute(): RDD[InternalRow] = {
    val numOutputRows = longMetric("numOutputRows")
    val aggTime = longMetric("aggTime")
    val spillSize = longMetric("spillSize")
    val fallbacks = longMetric("numTasksFallBacked")
    val ownTable = onOwnTable
    val boundWhileCompact = aggregateExpressions.exists(
      _.aggregateFunction.isInstanceOf[CompactBufferAggregate])
    child.execute().mapPartitionsWithIndexInternal { (partition, rows) =>
      val start = System.nanoTime()
      val hasInput = rows.hasNext
      val heapKeys = SketchHashAggregateExec.fallbackThreshold(bytesPerKey, minFallbackThreshold)
      val maxKeys = if (boundWhileCompact) minFallbackThreshold else heapKeys
      def sparks(input: Iterator[InternalRow], threshold: Int) =
        new ObjectAggregationIterator(partition, child.output,
          groupingExpressions, aggregateExpressions, aggregateAttributes,
          initialInputBufferOffset, resultExpressions,
          (expressions, schema) => MutableProjection.create(expressions, schema),
          inputAttributes, input, threshold, numOutputRows, spillSize, fallbacks)
      val output =
        if (!hasInput && groupingExpressions.nonEmpty) Iterator.empty
        else if (ownTable) {
          // Past the table, what is left sorts as soon as Spark's iterator sees a new key.
          val budget = if (tableBytes > 0) tableBytes else SketchHashAggregateExec.userBytesPerTask
          ownPartialTable(partition, rows, budget, sparks(_, 1))
        } else {
          val aggregation = sparks(rows, maxKeys)
          if (hasInput) aggregation
          else {
            numOutputRows += 1
            Iterator.single[InternalRow](aggregation.outputForEmptyGroupingKeyWithoutInput())
          }
        }
      aggTime += NANOSECONDS.toMillis(System.nanoTime() - start)
      output
    }
  }

  private def ownPartialTable(partition: Int, rows: Iterator[InternalRow], budget: Long,
      rest: Iterator[InternalRow] => Iterator[InternalRow]): Iterator[InternalRow] = {
    val groupingKey = UnsafeProjection.create(groupingExpressions, inputAttributes)
    groupingKey.initialize(partition)
    val functions = aggregateExpressions.map { e =>
      BindReferences.bindReference(e.aggregateFunction, inputAttributes)
        .asInstanceOf[TypedImperativeAggregate[AnyRef]]
    }.toArray
    // A partial aggregate's output is its key and its serialized buffers, by position.
    val bufferTypes = aggregateExpressions.flatMap(_.aggregateFunction.aggBufferAttributes)
      .map(_.dataType)
    val result =
      UnsafeProjection.create((groupingExpressions.map(_.dataType) ++ bufferTypes).toArray)
    val keyTypes = groupingExpressions.map(_.dataType)
    val fixedKeyBytes = if (keyTypes.forall(UnsafeRow.isFixedLength)) {
      UnsafeRow.calculateBitSetWidthInBytes(keyTypes.length) + 8 * keyTypes.length
    } else 0
    new PartialSketchAggregation(rows, groupingKey, keyTypes.length, fixedKeyBytes, functions, result,
      SketchHashAggregateExec.MaxTableKeys, budget, stageFromBytes, rest,
      longMetric("numOutputRows"), longMetric("aggTime"), longMetric("numKeysSorted"))
  }

  override def simpleString(maxFields: Int): String =
    s"SketchHashAggregate(keys=${groupingExpressions.mkString("[", ", ", "]")}, " +
      s"functions=${aggregateExpressions.mkString("[", ", ", "]")}, " +
      s"output=${output.mkString("[", ", ", "]")}, bytesPerKey=$bytesPerKey)"

  override protected def withNewChildInternal(newChild: SparkPlan): SketchHashAggregateExec =
    copy(child = newChild)
}

object SketchHashAggregateExec {
  /**
   * Keys our own table holds at most, whatever the heap allows: with many more, a row's
   * probe misses cache on the table's arrays, the key and the sketch, and sorting is
   * faster (distinct counts over 10^7 rows: 10^6 keys a task all on the table 7.1 s
   * against 3.4 s sorting). At 10^5 keys a task, 65,536 on the table beat 16,384 (the
   * cap before) once keys were kept inline and sketches sized by their heap: best task
   * CPU seconds 1.72 against 2.28 for counts, 2.87 against 3.36 for distinct counts; the
   * same at 10^6 keys a task (5.64 against 5.81).
   */
  val MaxTableKeys: Int = 1 << 16

  /** What Spark keeps back from the heap before its memory fractions (UnifiedMemoryManager). */
  private val ReservedHeapBytes = 300L << 20

  /**
   * Keys a task keeps in its hash map before sorting: as many as fit its share of Spark's
   * user memory at `bytesPerKey`, and never fewer than Spark's own threshold. User memory is
   * the heap outside `spark.memory.fraction` (after the reserved 300 MB): where Spark's
   * memory model puts user data structures, as object aggregation buffers are; each core
   * running a task gets an equal share.
   */
  def fallbackThreshold(bytesPerKey: Long, sparkThreshold: Int): Int = {
    val keys = userBytesPerTask / math.max(1L, bytesPerKey)
    math.max(sparkThreshold.toLong, math.min(keys, Int.MaxValue.toLong)).toInt
  }

  /** A task's share of Spark's user memory (see [[fallbackThreshold]]). */
  def userBytesPerTask: Long = {
    val runtime = Runtime.getRuntime
    val managedFraction = Option(SparkEnv.get)
      .map(_.conf.getDouble("spark.memory.fraction", 0.6)).getOrElse(0.6)
    val userBytes = (runtime.maxMemory - ReservedHeapBytes) * (1 - managedFraction)
    (userBytes / math.max(1, runtime.availableProcessors)).toLong
  }

  /**
   * The heap the map side's table may hold a task, keys and buffers, in Spark's byte
   * notation ("256m"): by default the task's share of user memory.
   */
  val TableBytesKey = "spark.windowsketch.groupBy.tableBytes"

  /** [[TableBytesKey]]'s value as bytes: a positive size, or an error naming the setting. */
  def tableBytes(value: String): Long = {
    val bytes = byteSize(value)
    if (bytes <= 0) {
      throw new IllegalArgumentException(
        s"$TableBytesKey must be a positive size such as 256m or 1g, got '$value'")
    }
    bytes
  }

  /**
   * The heap the table's sketches hold past which rows of count and sum aggregates wait in
   * a stage and go into their sketches grouped by key ([[PartialSketchAggregation]]), in
   * Spark's byte notation: 0 stages every row.
   */
  val StageBytesKey = "spark.windowsketch.groupBy.stageBytes"

  /**
   * While the sketches fit a core's caches, a row applied as it comes finds its sketch
   * there and staging costs more than it saves (counts over 100 keys); past them it misses
   * cache on the sketch and its arrays: sums over 10^4 keys a task, best task CPU 5.6 s
   * applying each row as it came, 3.8 s staged.
   */
  val DefaultStageBytes: Long = 4L << 20

  /** [[StageBytesKey]]'s value as bytes: a size of 0 or more, or an error naming it. */
  def stageBytes(value: String): Long = {
    val bytes = byteSize(value)
    if (bytes < 0) {
      throw new IllegalArgumentException(
        s"$StageBytesKey must be a size of 0 or more such as 4m, got '$value'")
    }
    bytes
  }

  /** A size in Spark's byte notation, or -1 when `value` is not one. */
  private def byteSize(value: String): Long =
    try JavaUtils.byteStringAsBytes(value.trim) catch {
      case _: NumberFormatException => -1L
    }
}

/**
 * Plans windowsketch's GROUP BY aggregates on [[SketchHashAggregateExec]]: an
 * `ObjectHashAggregateExec` all of whose functions are bounded sketches, when the user has
 * not set the fallback threshold (a setting of theirs is kept as it is).
 */
object SketchHashAggregates extends Rule[SparkPlan] {
  private val thresholdKey = SQLConf.OBJECT_AGG_SORT_BASED_FALLBACK_THRESHOLD.key

  override def apply(plan: SparkPlan): SparkPlan =
    if (conf.contains(thresholdKey)) plan
    else {
      val tableBytes = conf.getConfString(SketchHashAggregateExec.TableBytesKey, null) match {
        case null => 0L // a task's share of user memory
        case set => SketchHashAggregateExec.tableBytes(set)
      }
      val stageBytes = conf.getConfString(SketchHashAggregateExec.StageBytesKey, null) match {
        case null => SketchHashAggregateExec.DefaultStageBytes
        case set => SketchHashAggregateExec.stageBytes(set)
      }
      plan.transformUp {
        case a: ObjectHashAggregateExec if a.aggregateExpressions.nonEmpty &&
            a.aggregateExpressions.forall(_.aggregateFunction.isInstanceOf[BoundedBufferAggregate]) =>
          val bytesPerKey = a.aggregateExpressions.map(
            _.aggregateFunction.asInstanceOf[BoundedBufferAggregate].bufferBytesBound).sum
          SketchHashAggregateExec(a.requiredChildDistributionExpressions, a.isStreaming,
            a.numShufflePartitions, a.groupingExpressions, a.aggregateExpressions,
            a.aggregateAttributes, a.initialInputBufferOffset, a.resultExpressions, a.child,
            bytesPerKey, conf.objectAggSortBasedFallbackThreshold, tableBytes, stageBytes)
      }
    }
}

/** Applies [[SketchHashAggregates]] to every physical plan, before columnar transitions. */
object SketchHashAggregateRule extends ColumnarRule {
  override def preColumnarTransitions: Rule[SparkPlan] = SketchHashAggregates
}
