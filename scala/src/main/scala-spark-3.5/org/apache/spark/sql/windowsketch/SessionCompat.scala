package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.errors.QueryErrorsBase

/** Spark 3.5: every SparkSession on the JVM is a classic one. */
private[windowsketch] object ClassicSessions {
  type Session = SparkSession

  def of(spark: SparkSession): Option[Session] = Some(spark)
}

/** Spark 3.5 numbers parameters in type errors: "Parameter 1 requires ...". */
private[windowsketch] object QueryErrors extends QueryErrorsBase {
  def paramIndex(index: Int): String = (index + 1).toString
}
