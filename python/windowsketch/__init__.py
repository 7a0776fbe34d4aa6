"""windowsketch: approximate sliding-window counts for Apache Spark.

The SQL functions live in jars bundled with this package, one per supported Spark line
(3.5 with Scala 2.12; 4.0 to 4.3 with Scala 2.13); the right one is picked from the running
Spark's version. Make them available with :func:`configure` (before the session starts;
works for Spark Connect's local server too) or :func:`register` (on a running classic
session whose classpath holds the jar)::

    from pyspark.sql import SparkSession
    import windowsketch
    spark = windowsketch.configure(SparkSession.builder).getOrCreate()
    spark.sql("SELECT approx_window_count(...) OVER (...) FROM ...")

DataFrame functions are in :mod:`windowsketch.functions`.
"""
from __future__ import annotations

import glob
import os
from typing import TYPE_CHECKING, Any

from windowsketch._lines import LINES, SUPPORTED, UnsupportedSparkVersion, find

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__version__ = "0.1.0"
__all__ = ["CONNECT_RELATION_PLUGIN", "EXTENSIONS_CLASS", "UnsupportedSparkVersion", "__version__",
           "bundled_lines",
           "configure", "jar_path", "register"]

#: The SparkSessionExtensions class to put in ``spark.sql.extensions``.
EXTENSIONS_CLASS = "windowsketch.spark.WindowSketchExtensions"

#: The Spark Connect relation plugin (Spark 4) that builds live operators for Connect
#: clients, for ``spark.connect.extensions.relation.classes``.
CONNECT_RELATION_PLUGIN = "org.apache.spark.sql.windowsketch.SlidingWindowRelationPlugin"

_REGISTRAR_CLASS = "windowsketch.spark.WindowSketch"
_LINE_CHECK_CLASS = "windowsketch.spark.SparkLineCheck"


def _jars_dir() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "jars")


def bundled_lines() -> list[str]:
    """The Spark lines ("3.5", "4.1", ...) this installation holds a jar for."""
    return [line.line for line in LINES
            if os.path.isfile(os.path.join(_jars_dir(), line.jar_name(__version__)))]


def _local_spark_version() -> str:
    try:
        from pyspark.version import __version__ as version
    except ImportError as e:
        raise RuntimeError(
            "pyspark is not installed here, so windowsketch cannot tell which Spark's jar "
            "you need: pass spark_version, such as jar_path(spark_version='3.5')") from e
    return version


def jar_path(spark_version: str | None = None) -> str:
    """The absolute path of the bundled jar for a Spark line.

    Parameters
    ----------
    spark_version : str, optional
        The Spark that will load the jar, as ``"3.5"`` or ``"4.1.1"``: give it for a
        cluster whose Spark is not the local pyspark (``spark-submit --jars``, a cluster
        library). Default: the installed pyspark's version.

    Raises
    ------
    UnsupportedSparkVersion
        (a ValueError) for a Spark outside the supported lines, naming them.
    FileNotFoundError
        when this installation holds no jar for that line (a source install builds only
        the jar of the pyspark it was installed beside), saying how to get it.
    """
    line = find(_local_spark_version() if spark_version is None else spark_version)
    path = os.path.join(_jars_dir(), line.jar_name(__version__))
    if not os.path.isfile(path):
        have = ", ".join(bundled_lines()) or "none"
        raise FileNotFoundError(
            f"this windowsketch installation has no jar for Spark {line.line} (it has: "
            f"{have}; expected {path}). A source install builds the jar of the pyspark "
            "installed beside it: reinstall windowsketch where that pyspark is installed, "
            "or build every line's jar with WINDOWSKETCH_SPARK_LINES=all pip install .")
    return path


def _append_conf(current: str | None, value: str) -> str:
    items = [item for item in (current or "").split(",") if item]
    return ",".join(items if value in items else [*items, value])


def configure(builder: "SparkSession.Builder") -> "SparkSession.Builder":
    """Adds the bundled jar to ``spark.jars`` and the extension to ``spark.sql.extensions``.

    Call it before the session starts; it keeps jars and extensions already set on the
    builder. Returns the builder, so calls chain::

        spark = windowsketch.configure(SparkSession.builder.master("local[2]")).getOrCreate()

    For Spark Connect with a local server, ``SparkSession.builder.remote("local[2]")``,
    the same settings reach the server it starts. On Spark 4 it also adds the Connect
    relation plugin that serves :func:`windowsketch.streaming.sliding_window` to Connect
    clients (``spark.connect.extensions.relation.classes``). A remote Connect server needs
    these in its own configuration (``--jars``, ``--conf spark.sql.extensions=...`` and
    ``--conf spark.connect.extensions.relation.classes=...``).
    """
    options = getattr(builder, "_options", {})
    builder.config("spark.jars", _append_conf(options.get("spark.jars"), jar_path()))
    builder.config(
        "spark.sql.extensions",
        _append_conf(options.get("spark.sql.extensions"), EXTENSIONS_CLASS))
    if find(_local_spark_version()).line != "3.5":  # 3.5's plugin interface is another
        builder.config("spark.connect.extensions.relation.classes", _append_conf(
            options.get("spark.connect.extensions.relation.classes"), CONNECT_RELATION_PLUGIN))
    return builder


def register(spark: "SparkSession") -> None:
    """Registers windowsketch's SQL functions in a running classic SparkSession.

    The jar must already be on the session's classpath (``spark.jars`` or ``--jars``
    when it started); otherwise this raises a RuntimeError that says so. Spark Connect
    sessions cannot register functions from the client: configure the server instead.
    """
    jvm_session = getattr(spark, "_jsparkSession", None)
    if jvm_session is None:
        raise RuntimeError(
            "windowsketch.register() needs a classic SparkSession; for Spark Connect start "
            "the server with the jar and spark.sql.extensions="
            f"{EXTENSIONS_CLASS} (windowsketch.configure(builder) does this for "
            "builder.remote('local[...]'))")
    find(spark.version)  # an unsupported Spark: say so before touching the JVM
    _require_built_line(spark)
    _scala_object(spark, _REGISTRAR_CLASS).register(jvm_session)


def _require_built_line(spark: "SparkSession") -> None:
    """Raises a RuntimeError naming the jar to use when the session's windowsketch jar was
    built for another Spark line, before any class of it that Spark's API reaches loads
    (those would fail with a NoSuchMethodError, or not load across Scala versions)."""
    from py4j.protocol import Py4JJavaError

    try:
        _scala_object(spark, _LINE_CHECK_CLASS).requireBuiltLine()
    except Py4JJavaError as e:
        raise RuntimeError(str(e.java_exception.getMessage())) from None


def _scala_object(spark: "SparkSession", class_name: str) -> Any:
    """The Scala object `class_name` from the jar, through Spark's own class loader.

    py4j's ``spark._jvm.a.b.C`` looks classes up in a loader that does not see jars
    added with ``spark.jars`` or ``--jars``; Spark's loader does.
    """
    from py4j.protocol import Py4JJavaError

    jvm: Any = spark.sparkContext._jvm
    try:
        cls = jvm.org.apache.spark.util.Utils.classForName(class_name + "$", True, False)
    except Py4JJavaError as e:
        raise RuntimeError(
            "windowsketch's jar is not on this session's classpath; create the session with "
            "windowsketch.configure(SparkSession.builder) or start it with "
            f"--jars {jar_path(spark.version)}") from e
    return cls.getField("MODULE$").get(None)
