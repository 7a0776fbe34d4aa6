"""windowsketch: approximate sliding-window counts for Apache Spark.

The SQL functions live in a jar bundled with this package. Make them available with
:func:`configure` (before the session starts; works for Spark Connect's local server too)
or :func:`register` (on a running classic session whose classpath holds the jar)::

    from pyspark.sql import SparkSession
    import windowsketch
    spark = windowsketch.configure(SparkSession.builder).getOrCreate()
    spark.sql("SELECT approx_window_count(...) OVER (...) FROM ...")

DataFrame functions are in :mod:`windowsketch.functions`.
"""
from __future__ import annotations

import glob
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__version__ = "0.1.0"
__all__ = ["EXTENSIONS_CLASS", "__version__", "configure", "jar_path", "register"]

#: The SparkSessionExtensions class to put in ``spark.sql.extensions``.
EXTENSIONS_CLASS = "windowsketch.spark.WindowSketchExtensions"

_REGISTRAR_CLASS = "windowsketch.spark.WindowSketch"


def jar_path() -> str:
    """The absolute path of the windowsketch jar bundled with this package."""
    found = glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "jars", "*.jar"))
    if len(found) != 1:
        raise FileNotFoundError(
            "windowsketch's jar is missing from the installed package (expected one file in "
            f"{os.path.dirname(os.path.abspath(__file__))}/jars); reinstall it with "
            "`pip install windowsketch` or, from a checkout, `pip install -e .`")
    return found[0]


def _append_conf(current: str | None, value: str) -> str:
    items = [item for item in (current or "").split(",") if item]
    return ",".join(items if value in items else [*items, value])


def configure(builder: "SparkSession.Builder") -> "SparkSession.Builder":
    """Adds the bundled jar to ``spark.jars`` and the extension to ``spark.sql.extensions``.

    Call it before the session starts; it keeps jars and extensions already set on the
    builder. Returns the builder, so calls chain::

        spark = windowsketch.configure(SparkSession.builder.master("local[2]")).getOrCreate()

    For Spark Connect with a local server, ``SparkSession.builder.remote("local[2]")``,
    the same settings reach the server it starts. A remote Connect server needs them in
    its own configuration (``--jars`` and ``--conf spark.sql.extensions=...``).
    """
    options = getattr(builder, "_options", {})
    builder.config("spark.jars", _append_conf(options.get("spark.jars"), jar_path()))
    builder.config(
        "spark.sql.extensions",
        _append_conf(options.get("spark.sql.extensions"), EXTENSIONS_CLASS))
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
    _scala_object(spark, _REGISTRAR_CLASS).register(jvm_session)


def _scala_object(spark: "SparkSession", class_name: str):
    """The Scala object `class_name` from the jar, through Spark's own class loader.

    py4j's ``spark._jvm.a.b.C`` looks classes up in a loader that does not see jars
    added with ``spark.jars`` or ``--jars``; Spark's loader does.
    """
    from py4j.protocol import Py4JJavaError

    jvm = spark.sparkContext._jvm
    try:
        cls = jvm.org.apache.spark.util.Utils.classForName(class_name + "$", True, False)
    except Py4JJavaError as e:
        raise RuntimeError(
            "windowsketch's jar is not on this session's classpath; create the session with "
            "windowsketch.configure(SparkSession.builder) or start it with "
            f"--jars {jar_path()}") from e
    return cls.getField("MODULE$").get(None)
