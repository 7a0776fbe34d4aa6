package org.apache.spark.sql.windowsketch

import scala.reflect.ClassTag

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.analysis.{FunctionRegistry, FunctionRegistryBase}
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionInfo}

/**
 * Every SQL function windowsketch provides, in one place. Spark's own builder picks the
 * constructor by argument count, reports a wrong count with its WRONG_NUM_ARGS error, and
 * reads the `@ExpressionDescription` that DESCRIBE FUNCTION prints.
 */
object FunctionRegistrations {
  type Registration = (FunctionIdentifier, ExpressionInfo, Seq[Expression] => Expression)

  val Since = "0.1.0"

  val all: Seq[Registration] = Seq(
    registration[ApproxWindowCount](ApproxWindowCount.Name),
    registration[ApproxWindowCountBounds](ApproxWindowCountBounds.Name),
    registration[ApproxWindowSum](ApproxWindowSum.Name),
    registration[WindowSketchAgg](WindowSketchAgg.Name),
    registration[WindowSketchMerge](WindowSketchMerge.Name),
    registration[WindowSketchEstimate](WindowSketchEstimate.Name),
    registration[WindowSketchBounds](WindowSketchBounds.Name))

  /**
   * Adds every function to a live session's registry, under the qualified system name that
   * functions injected by an extension get.
   */
  def registerIn(registry: FunctionRegistry): Unit =
    all.foreach { case (name, info, builder) =>
      registry.registerFunction(
        FunctionRegistry.builtinFunctionIdentifier(name.funcName), info, builder)
    }

  private def registration[T <: Expression : ClassTag](name: String): Registration = {
    val (info, builder) = FunctionRegistryBase.build[T](name, Some(Since))
    (FunctionIdentifier(name), info, builder)
  }
}
