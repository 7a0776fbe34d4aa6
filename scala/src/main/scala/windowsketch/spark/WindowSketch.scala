package windowsketch.spark

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.windowsketch.{FunctionRegistrations, OrderedWindowFrames}

/** Registration for a session that is already running (the extension is not configured). */
object WindowSketch {
  /** Registers windowsketch's SQL functions in `spark`'s function registry. */
  def register(spark: SparkSession): Unit = {
    val classic = spark match {
      case classic: org.apache.spark.sql.classic.SparkSession => classic
      case other =>
        throw new IllegalArgumentException(
          s"windowsketch can register functions only in a classic SparkSession, not in " +
            s"${other.getClass.getName}; for Spark Connect set " +
            "spark.sql.extensions=windowsketch.spark.WindowSketchExtensions on the server")
    }
    FunctionRegistrations.registerIn(classic.sessionState.functionRegistry)
    val optimizations = classic.experimental.extraOptimizations
    if (!optimizations.contains(OrderedWindowFrames)) {
      classic.experimental.extraOptimizations = optimizations :+ OrderedWindowFrames
    }
  }

  /** The SQL names of the functions [[register]] adds. */
  def functionNames: Seq[String] = FunctionRegistrations.all.map(_._1.funcName)
}
