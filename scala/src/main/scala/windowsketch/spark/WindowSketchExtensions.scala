package windowsketch.spark

import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.windowsketch.{FunctionRegistrations, OrderedWindowFrames,
  SketchHashAggregateRule}

/**
 * Registers windowsketch's SQL functions in every session of a Spark application:
 * `spark.sql.extensions=windowsketch.spark.WindowSketchExtensions` (the spark-sql shell,
 * the Thrift server, a Spark Connect server, or any builder before the session starts).
 */
class WindowSketchExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    SparkLineCheck.requireBuiltLine()
    FunctionRegistrations.all.foreach(extensions.injectFunction)
    extensions.injectOptimizerRule(_ => OrderedWindowFrames)
    extensions.injectColumnar(_ => SketchHashAggregateRule)
  }
}
