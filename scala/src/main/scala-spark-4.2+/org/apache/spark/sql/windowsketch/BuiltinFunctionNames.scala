package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry

/**
 * Spark 4.2 qualifies built-in and extension functions as `system.builtin.<name>`; a
 * function registered under its bare name is not found.
 */
private[windowsketch] object BuiltinFunctionNames {
  def identifier(name: String): FunctionIdentifier =
    FunctionRegistry.builtinFunctionIdentifier(name)
}
