package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.expressions.{Ascending, CurrentRow, SpecifiedWindowFrame,
  UnboundedPreceding, WindowExpression, WindowSpecDefinition}
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Window}
import org.apache.spark.sql.catalyst.rules.Rule

/**
 * Marks the counts and sums (`approx_window_count`, `approx_window_count_bounds`,
 * `approx_window_sum`) in running frames ordered by their own `ts` ascending
 * (`OVER (PARTITION BY k ORDER BY ts)`, RANGE or ROWS from UNBOUNDED PRECEDING to CURRENT
 * ROW): there Spark feeds each partition's rows once, in time order, and calls eval after
 * every row, so the time-ordered histogram answers in O(1). Spark knows the context only
 * at planning time, and the structure must be chosen before the first row.
 */
object OrderedWindowFrames extends Rule[LogicalPlan] {
  override def apply(plan: LogicalPlan): LogicalPlan = plan.transformUp {
    case w: Window => w.transformExpressions {
      case we @ WindowExpression(ae: AggregateExpression, spec: WindowSpecDefinition) =>
        ae.aggregateFunction match {
          case f: OrderedCountAggregate if !f.orderedInput && runsInTimeOrder(spec, f) =>
            we.copy(windowFunction = ae.copy(aggregateFunction = f.withOrderedInput))
          case _ => we
        }
    }
  }

  private def runsInTimeOrder(spec: WindowSpecDefinition, f: OrderedCountAggregate): Boolean =
    spec.frameSpecification match {
      case SpecifiedWindowFrame(_, UnboundedPreceding, CurrentRow) =>
        spec.orderSpec.headOption.exists { order =>
          order.direction == Ascending && order.child.semanticEquals(f.ts)
        }
      case _ => false
    }
}
