package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.expressions.{Ascending, CurrentRow, Expression, RowFrame,
  SpecifiedWindowFrame, UnboundedPreceding, WindowExpression, WindowSpecDefinition}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, AggregateFunction}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Window}
import org.apache.spark.sql.catalyst.rules.Rule

/**
 * An aggregate with a time-ordered form for running frames: rows arrive in `ts` order and
 * are never merged, so a structure answering in O(1) after each row can replace the
 * mergeable sketch (the counts' exponential histogram, the sums' histogram, the moments'
 * buckets).
 */
trait OrderedInputAggregate extends AggregateFunction {
  def ts: Expression
  def orderedInput: Boolean

  /** This aggregate with `orderedInput` set. */
  def withOrderedInput: AggregateFunction

  /**
   * True for an answer about the frame's last row (not its rows as a set): a RANGE frame
   * is then run as ROWS, so each row of one `ts` gets its own answer.
   */
  def answersPerRow: Boolean = false
}

/**
 * Marks the aggregates with a time-ordered form ([[OrderedInputAggregate]]) in running
 * frames ordered by their own `ts` ascending (`OVER (PARTITION BY k ORDER BY ts)`, RANGE or
 * ROWS from UNBOUNDED PRECEDING to CURRENT ROW): there Spark feeds each partition's rows
 * once, in time order, and calls eval after every row. Spark knows the context only at
 * planning time, and the structure must be chosen before the first row.
 */
object OrderedWindowFrames extends Rule[LogicalPlan] {
  override def apply(plan: LogicalPlan): LogicalPlan = plan.transformUp {
    case w: Window => w.transformExpressions {
      case we @ WindowExpression(ae: AggregateExpression, spec: WindowSpecDefinition) =>
        ae.aggregateFunction match {
          case f: OrderedInputAggregate if !f.orderedInput && runsInTimeOrder(spec, f) =>
            val frame = if (f.answersPerRow) spec.copy(frameSpecification =
              SpecifiedWindowFrame(RowFrame, UnboundedPreceding, CurrentRow)) else spec
            we.copy(windowFunction = ae.copy(aggregateFunction = f.withOrderedInput), windowSpec = frame)
          case _ => we
        }
    }
  }

  private def runsInTimeOrder(spec: WindowSpecDefinition, f: OrderedInputAggregate): Boolean =
    spec.frameSpecification match {
      case SpecifiedWindowFrame(_, UnboundedPreceding, CurrentRow) =>
        spec.orderSpec.headOption.exists { order =>
          order.direction == Ascending && order.child.semanticEquals(f.ts)
        }
      case _ => false
    }
}
