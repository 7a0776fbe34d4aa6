"""The Spark lines windowsketch supports, and how the jar for each is named and built.

One table serves the runtime (which bundled jar a session needs) and the offline build
(`scala/build_jar.py`: which pyspark release supplies the Scala compiler and the jars to
compile against, which shim source folders join the shared sources, which Java bytecode
level). `build.sbt` keeps the same table for sbt users; a test holds the two in step.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SparkLine:
    #: "major.minor" of the Spark releases this jar serves.
    line: str
    #: Scala binary version of that line's Spark (and of its pyspark's bundled compiler).
    scala: str
    #: Java bytecode level: Spark 3.5 still runs on Java 8; Spark 4 needs Java 17.
    java_release: int
    #: The pyspark release a release build compiles against: the line's first, so the jar
    #: uses nothing that later patch releases added.
    build_pyspark: str
    #: Source folders under scala/src/main/ compiled with the shared scala/ folder.
    shims: tuple[str, ...]

    def jar_name(self, package_version: str) -> str:
        return f"windowsketch-{package_version}-spark{self.line}_{self.scala}.jar"


LINES: tuple[SparkLine, ...] = (
    SparkLine("3.5", "2.12", 8, "3.5.0", ("scala-spark-3.5", "scala-spark-3.5-4.1")),
    SparkLine("4.0", "2.13", 17, "4.0.0", ("scala-spark-4", "scala-spark-3.5-4.1")),
    SparkLine("4.1", "2.13", 17, "4.1.0", ("scala-spark-4", "scala-spark-3.5-4.1")),
    SparkLine("4.2", "2.13", 17, "4.2.0", ("scala-spark-4", "scala-spark-4.2+")),
    SparkLine("4.3", "2.13", 17, "4.3.0", ("scala-spark-4", "scala-spark-4.2+")),
)

#: "3.5, 4.0, 4.1, 4.2 and 4.3", for messages.
SUPPORTED = ", ".join(line.line for line in LINES[:-1]) + f" and {LINES[-1].line}"


class UnsupportedSparkVersion(ValueError):
    """A Spark version outside the lines windowsketch is built for."""


def line_of(spark_version: str) -> str:
    """ "4.1.1", "3.5.0-amzn-1" or "4.1" → "4.1"."""
    match = re.match(r"\s*(\d+)\.(\d+)(?:$|[.\-+ ])", str(spark_version))
    if not match:
        raise UnsupportedSparkVersion(
            f"cannot read a Spark version from {spark_version!r}; expected one such as "
            "'3.5' or '4.1.1'")
    return f"{int(match.group(1))}.{int(match.group(2))}"


def find(spark_version: str) -> SparkLine:
    """The supported line of `spark_version`, or UnsupportedSparkVersion naming the lines."""
    wanted = line_of(spark_version)
    for line in LINES:
        if line.line == wanted:
            return line
    raise UnsupportedSparkVersion(
        f"windowsketch supports Spark {SUPPORTED}; Spark {spark_version} is not one of "
        "them. Install windowsketch beside a supported pyspark, or pass the version of "
        "the cluster's Spark (jar_path(spark_version=...), "
        "`windowsketch jar-path --spark X.Y`).")
