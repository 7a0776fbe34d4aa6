package windowsketch.spark

/**
 * Fails fast, naming the jar to use instead, when this jar runs on a Spark line it was not
 * compiled for: Catalyst's internal API changes between lines, and a jar of another line
 * would fail later with a NoSuchMethodError deep inside a query (or, across Scala 2.12 and
 * 2.13, not load at all). Only Java API before the check passes, so that the message gets
 * out even on the other Scala version.
 */
object SparkLineCheck {
  def requireBuiltLine(): Unit = {
    val running = org.apache.spark.SPARK_VERSION
    if (!running.equals(BuildInfo.SparkLine) && !running.startsWith(BuildInfo.SparkLine + ".")) {
      throw new IllegalStateException(
        "windowsketch's jar " + BuildInfo.JarName + " is built for Spark " +
          BuildInfo.SparkLine + " (Scala " + BuildInfo.ScalaBinaryVersion + ") but this " +
          "is Spark " + running + ". Use the windowsketch jar of this Spark line: " +
          "`windowsketch jar-path --spark " + running + "` prints its path.")
    }
  }
}
