"""The ``windowsketch`` command: ``jar-path``, ``sql`` and ``demo``."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from windowsketch import EXTENSIONS_CLASS, UnsupportedSparkVersion, jar_path


def spark_sql_command(args: list[str]) -> list[str]:
    """The spark-sql shell bundled with pyspark, with windowsketch loaded, then ``args``."""
    from pyspark.find_spark_home import _find_spark_home

    shell = os.path.join(_find_spark_home(), "bin", "spark-sql")
    return [shell, "--jars", jar_path(), "--conf", f"spark.sql.extensions={EXTENSIONS_CLASS}",
            *args]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="windowsketch",
        description="Approximate sliding-window counts for Apache Spark.")
    commands = parser.add_subparsers(dest="command", required=True)
    jar = commands.add_parser(
        "jar-path", help="print the path of the bundled jar for the installed pyspark's "
                         "Spark, or for --spark X.Y")
    jar.add_argument("--spark", metavar="VERSION",
                     help="the Spark that will load the jar, such as 3.5 or 4.1.1 "
                          "(a cluster's, for --jars)")
    commands.add_parser(
        "sql", add_help=False,
        help="the spark-sql shell with windowsketch's functions; other arguments pass through")
    demo = commands.add_parser(
        "demo", help="approximate vs exact 10-minute counts over the NASA-HTTP 1995 log")
    demo.add_argument("--eps", type=float, default=0.01, help="relative error bound")
    demo.add_argument("--master", default="local[2]", help="Spark master (default local[2])")

    args, rest = parser.parse_known_args(argv)
    try:
        if args.command == "sql":
            return subprocess.call(spark_sql_command(rest))
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if args.command == "jar-path":
            print(jar_path(args.spark))
            return 0
    except (UnsupportedSparkVersion, FileNotFoundError, RuntimeError) as e:
        print(f"windowsketch: {e}", file=sys.stderr)
        return 1
    from windowsketch.demo import main as demo_main

    return demo_main(eps=args.eps, master=args.master)


if __name__ == "__main__":
    sys.exit(main())
