package org.apache.spark.sql.windowsketch

import scala.reflect.ClassTag

import org.apache.spark.sql.SparkSession
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
    registration[ApproxWindowCountDistinct](ApproxWindowCountDistinct.Name),
    registration[ApproxWindowPercentile](ApproxWindowPercentile.Name),
    registration[ApproxWindowPercentileBounds](ApproxWindowPercentileBounds.Name),
    registration[ApproxWindowAvg]("approx_window_avg"),
    registration[ApproxWindowVarSamp]("approx_window_var_samp"),
    alias[ApproxWindowVarSamp]("approx_window_variance"),
    registration[ApproxWindowVarPop]("approx_window_var_pop"),
    registration[ApproxWindowStddevSamp]("approx_window_stddev_samp"),
    alias[ApproxWindowStddevSamp]("approx_window_stddev"),
    registration[ApproxWindowStddevPop]("approx_window_stddev_pop"),
    registration[ApproxWindowAvgBounds](ApproxWindowAvgBounds.Name),
    registration[ApproxWindowStddevBounds](ApproxWindowStddevBounds.Name),
    registration[ApproxWindowTopK](ApproxWindowTopK.Name),
    registration[ApproxWindowSample](ApproxWindowSample.Name),
    registration[ApproxWindowSeen](ApproxWindowSeen.Name),
    registration[WindowSketchAgg](WindowSketchAgg.Name),
    registration[WindowSketchMerge](WindowSketchMerge.Name),
    registration[WindowSketchEstimate](WindowSketchEstimate.Name),
    registration[WindowSketchBounds](WindowSketchBounds.Name),
    registration[WindowDistinctSketchAgg](WindowDistinctSketchAgg.Name),
    registration[WindowDistinctSketchMerge](WindowDistinctSketchMerge.Name),
    registration[WindowDistinctSketchEstimate](WindowDistinctSketchEstimate.Name),
    registration[WindowPercentileSketchAgg](WindowPercentileSketchAgg.Name),
    registration[WindowPercentileSketchMerge](WindowPercentileSketchMerge.Name),
    registration[WindowPercentileSketchEstimate](WindowPercentileSketchEstimate.Name),
    registration[WindowMomentsSketchAgg](WindowMomentsSketchAgg.Name),
    registration[WindowMomentsSketchMerge](WindowMomentsSketchMerge.Name),
    registration[WindowMomentsSketchEstimate](WindowMomentsSketchEstimate.Name),
    registration[WindowMomentsSketchBounds](WindowMomentsSketchBounds.Name),
    registration[WindowTopKSketchAgg](WindowTopKSketchAgg.Name),
    registration[WindowTopKSketchMerge](WindowTopKSketchMerge.Name),
    registration[WindowTopKSketchEstimate](WindowTopKSketchEstimate.Name),
    registration[WindowSampleSketchAgg](WindowSampleSketchAgg.Name),
    registration[WindowSampleSketchMerge](WindowSampleSketchMerge.Name),
    registration[WindowSampleSketchGet](WindowSampleSketchGet.Name),
    registration[WindowFilterSketchAgg](WindowFilterSketchAgg.Name),
    registration[WindowFilterSketchMerge](WindowFilterSketchMerge.Name),
    registration[WindowFilterContains](WindowFilterContains.Name))

  /**
   * Adds every function to a running classic session's registry, under the name that
   * functions injected by an extension get on this Spark line, and the optimizer rule.
   */
  def registerIn(spark: SparkSession): Unit = {
    val classic = ClassicSessions.of(spark).getOrElse(throw new IllegalArgumentException(
      s"windowsketch can register functions only in a classic SparkSession, not in " +
        s"${spark.getClass.getName}; for Spark Connect set " +
        "spark.sql.extensions=windowsketch.spark.WindowSketchExtensions on the server"))
    val registry = classic.sessionState.functionRegistry
    all.foreach { case (name, info, builder) =>
      registry.registerFunction(BuiltinFunctionNames.identifier(name.funcName), info, builder)
    }
    val optimizations = classic.experimental.extraOptimizations
    if (!optimizations.contains(OrderedWindowFrames)) {
      classic.experimental.extraOptimizations = optimizations :+ OrderedWindowFrames
    }
  }

  private def registration[T <: Expression : ClassTag](name: String): Registration = {
    val (info, builder) = FunctionRegistryBase.build[T](name, Some(Since))
    (FunctionIdentifier(name), info, builder)
  }

  /** Another name of a function, which names its result columns too, as Spark's aliases do. */
  private def alias[T <: Expression : ClassTag](name: String): Registration = {
    val (identifier, info, builder) = registration[T](name)
    (identifier, info, (arguments: Seq[Expression]) => {
      val expression = builder(arguments)
      expression.setTagValue(FunctionRegistry.FUNC_ALIAS, name)
      expression
    })
  }
}
