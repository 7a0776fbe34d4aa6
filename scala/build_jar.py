"""Compile scala/src with the Scala compiler that ships inside the pyspark wheel.

No Maven repository is needed: pyspark's jars/ holds scala-compiler, scala-library,
scala-reflect and every Spark jar to compile against. Used by setup.py when the Python
package is built; run it directly to rebuild the jar while developing:

    python scala/build_jar.py python/windowsketch/jars/windowsketch.jar
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = os.path.join(HERE, "src", "main", "scala")


def pyspark_jars() -> str:
    import pyspark

    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    if not glob.glob(os.path.join(jars, "scala-compiler-*.jar")):
        raise RuntimeError(f"no scala-compiler jar in {jars}; is pyspark installed completely?")
    return jars


def scala_sources() -> list[str]:
    return sorted(glob.glob(os.path.join(SOURCES, "**", "*.scala"), recursive=True))


def is_up_to_date(jar: str) -> bool:
    if not os.path.exists(jar):
        return False
    built = os.path.getmtime(jar)
    return all(os.path.getmtime(s) <= built for s in scala_sources() + [__file__])


def build(jar: str, version: str) -> None:
    jars = pyspark_jars()

    def one(pattern: str) -> str:
        return glob.glob(os.path.join(jars, pattern))[0]

    compiler_cp = os.pathsep.join(
        one(p) for p in ("scala-compiler-*.jar", "scala-library-*.jar", "scala-reflect-*.jar"))
    java = shutil.which("java") or os.path.join(os.environ.get("JAVA_HOME", ""), "bin", "java")
    with tempfile.TemporaryDirectory() as classes:
        cmd = [java, "-Xss8m", "-cp", compiler_cp, "scala.tools.nsc.Main",
               "-release", "17", "-deprecation", "-feature", "-Werror",
               "-classpath", os.path.join(jars, "*"), "-d", classes, *scala_sources()]
        subprocess.run(cmd, check=True)
        os.makedirs(os.path.dirname(os.path.abspath(jar)), exist_ok=True)
        partial = jar + ".partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
            out.writestr("META-INF/MANIFEST.MF",
                         "Manifest-Version: 1.0\nImplementation-Title: windowsketch\n"
                         f"Implementation-Version: {version}\n\n")
            for root, _, files in os.walk(classes):
                for name in sorted(files):
                    path = os.path.join(root, name)
                    out.write(path, os.path.relpath(path, classes))
        os.replace(partial, jar)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build(sys.argv[1], version="dev")
