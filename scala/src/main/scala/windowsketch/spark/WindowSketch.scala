package windowsketch.spark

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.windowsketch.FunctionRegistrations

/** Registration for a session that is already running (the extension is not configured). */
object WindowSketch {
  /** Registers windowsketch's SQL functions in `spark`'s function registry. */
  def register(spark: SparkSession): Unit = {
    SparkLineCheck.requireBuiltLine()
    FunctionRegistrations.registerIn(spark)
  }

  /** The SQL names of the functions [[register]] adds. */
  def functionNames: Seq[String] = FunctionRegistrations.all.map(_._1.funcName)
}
