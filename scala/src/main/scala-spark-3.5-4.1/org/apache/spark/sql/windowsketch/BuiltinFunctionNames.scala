package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.FunctionIdentifier

/** Spark 3.5 – 4.1 keep built-in and extension functions under their bare names. */
private[windowsketch] object BuiltinFunctionNames {
  def identifier(name: String): FunctionIdentifier = FunctionIdentifier(name)
}
