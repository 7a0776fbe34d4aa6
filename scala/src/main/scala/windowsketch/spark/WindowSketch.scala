package windowsketch.spark

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.windowsketch.FunctionRegistrations

/** Registration for a session that is already running (the extension is not configured). */
object WindowSketch {
  /** Registers windowsketch's SQL functions in `spark`'s function registry. */
  def register(spark: SparkSession): Unit = {
    val registry = spark match {
      case classic: org.apache.spark.sql.classic.SparkSession =>
        classic.sessionState.functionRegistry
      case other =>
        throw new IllegalArgumentException(
          s"windowsketch can register functions only in a classic SparkSession, not in " +
            s"${other.getClass.getName}; for Spark Connect set " +
            "spark.sql.extensions=windowsketch.spark.WindowSketchExtensions on the server")
    }
    FunctionRegistrations.registerIn(registry)
  }

  /** The SQL names of the functions [[register]] adds. */
  def functionNames: Seq[String] = FunctionRegistrations.all.map(_._1.funcName)
}
