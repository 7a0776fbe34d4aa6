package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.errors.QueryErrorsBase

/** Spark 4 splits SparkSession into the API and the classic (JVM) implementation. */
private[windowsketch] object ClassicSessions {
  type Session = org.apache.spark.sql.classic.SparkSession

  def of(spark: SparkSession): Option[Session] = spark match {
    case classic: Session => Some(classic)
    case _ => None
  }
}

/** Spark 4 names parameters in type errors: "The first parameter requires ...". */
private[windowsketch] object QueryErrors extends QueryErrorsBase {
  def paramIndex(index: Int): String = ordinalNumber(index)
}
