"""Compile scala/ into one jar per Spark line, offline, with each line's own Scala compiler.

No Maven repository is needed: every pyspark distribution carries scala-compiler,
scala-library, scala-reflect and every Spark jar to compile against. A line's jar is
compiled from the shared sources (src/main/scala) plus that line's shim folders
(src/main/scala-spark-*), against, in order of preference:

- the pyspark installed in the target environment, when it is of that line (a developer
  install builds just that jar, in seconds);
- the line's first release (`build_pyspark` in python/windowsketch/_lines.py), fetched
  from PyPI with `pip download` into a cache, of which only the jars are kept
  ($WINDOWSKETCH_BUILD_CACHE, default ~/.cache/windowsketch).

Each compiled jar is kept in that cache too, under a digest of everything the compile reads
(the sources, this script, the line, the version, the Spark jars' names and sizes, the
Java that runs the compiler), so that the same inputs are compiled once: a release wheel,
an editable install and a source install of one checkout on one machine share it.

setup.py calls `build_for_install` when the package is built; by hand:

    python scala/build_jar.py                  # the installed pyspark's line
    python scala/build_jar.py --lines all      # every supported line (what a release wheel holds)
    python scala/build_jar.py --lines 3.5,4.1 --out DIR
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SOURCES = os.path.join(HERE, "src", "main")
PACKAGE = os.path.join(ROOT, "python", "windowsketch")
JARS_DIR = os.path.join(PACKAGE, "jars")


def _load_lines():
    # By path: the build must not import the windowsketch package (it may be absent or
    # another version).
    spec = importlib.util.spec_from_file_location(
        "windowsketch_build_lines", os.path.join(PACKAGE, "_lines.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while it runs
    spec.loader.exec_module(module)
    return module


lines = _load_lines()


def package_version() -> str:
    with open(os.path.join(PACKAGE, "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def scala_sources(line) -> list[str]:
    folders = ["scala", *line.shims]
    return sorted(path for folder in folders
                  for path in glob.glob(os.path.join(SOURCES, folder, "**", "*.scala"),
                                        recursive=True))


def is_up_to_date(jar: str, line) -> bool:
    if not os.path.exists(jar):
        return False
    built = os.path.getmtime(jar)
    inputs = scala_sources(line) + [__file__, os.path.join(PACKAGE, "_lines.py")]
    return all(os.path.getmtime(path) <= built for path in inputs)


def installed_pyspark(python: str = sys.executable) -> tuple[str, str] | None:
    """(version, jars folder) of the pyspark that `python` imports, or None.

    `-I` makes the interpreter ignore PYTHONPATH, through which pip's isolated build
    environment hides the target environment: so this sees the pyspark that the package
    is being installed beside.
    """
    probe = ("import json, os, pyspark, pyspark.version as v; print(json.dumps("
             "[v.__version__, os.path.join(os.path.dirname(pyspark.__file__), 'jars')]))")
    try:
        out = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True,
                             timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    version, jars = json.loads(out.stdout.strip().splitlines()[-1])
    return (version, jars) if glob.glob(os.path.join(jars, "scala-compiler-*.jar")) else None


def cache_dir() -> str:
    return os.environ.get("WINDOWSKETCH_BUILD_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "windowsketch")


def downloaded_jars(pyspark_version: str) -> str:
    """The jars folder of pyspark `pyspark_version`, fetched from PyPI once and cached."""
    target = os.path.join(cache_dir(), f"pyspark-{pyspark_version}", "jars")
    if os.path.isdir(target):
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(target)) as work:
        print(f"windowsketch: fetching pyspark {pyspark_version} for its Scala compiler and "
              "Spark jars", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                        "--disable-pip-version-check", "-d", work,
                        f"pyspark=={pyspark_version}"],
                       check=True, stdin=subprocess.DEVNULL, stdout=sys.stderr)
        (archive,) = glob.glob(os.path.join(work, "pyspark-*"))
        extracted = os.path.join(work, "jars")
        os.makedirs(extracted)
        # A source distribution keeps them in pyspark-X/deps/jars/, a wheel in pyspark/jars/.
        if archive.endswith(".whl"):
            with zipfile.ZipFile(archive) as whl:
                for name in whl.namelist():
                    if re.fullmatch(r"pyspark/jars/[^/]+\.jar", name):
                        with whl.open(name) as src, \
                                open(os.path.join(extracted, os.path.basename(name)), "wb") as dst:
                            shutil.copyfileobj(src, dst)
        else:
            with tarfile.open(archive) as sdist:
                for member in sdist:
                    if member.isfile() and re.fullmatch(r"[^/]+/deps/jars/[^/]+\.jar", member.name):
                        with sdist.extractfile(member) as src, \
                                open(os.path.join(extracted, os.path.basename(member.name)), "wb") as dst:
                            shutil.copyfileobj(src, dst)
        if not glob.glob(os.path.join(extracted, "scala-compiler-*.jar")):
            raise RuntimeError(f"pyspark {pyspark_version} from PyPI holds no scala-compiler jar")
        os.replace(extracted, target)
    return target


def _build_info(line, version: str) -> str:
    return (
        "package windowsketch.spark\n\n"
        "/** Written by the build: what this jar was compiled for. */\n"
        "object BuildInfo {\n"
        f'  final val Version = "{version}"\n'
        f'  final val SparkLine = "{line.line}"\n'
        f'  final val ScalaBinaryVersion = "{line.scala}"\n'
        f'  final val JarName = "{line.jar_name(version)}"\n'
        "}\n")


#: Compiled jars kept in the build cache; past this many, the least recently used go.
CACHED_JARS = 24


def _java() -> str:
    return shutil.which("java") or os.path.join(os.environ.get("JAVA_HOME", ""), "bin", "java")


def compile_digest(line, spark_jars: str, version: str) -> str:
    """A digest of every input of `build`: equal digests compile to the same classes."""
    digest = hashlib.sha256()

    def add(part: bytes) -> None:
        digest.update(len(part).to_bytes(8, "big") + part)

    # Without the options variables, which the JVM echoes ("Picked up ...") and which do
    # not change the classes.
    quiet = {k: v for k, v in os.environ.items()
             if k not in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")}
    java = subprocess.run([_java(), "-version"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, env=quiet)
    for part in (line.line, line.scala, str(line.java_release), version, java.stderr):
        add(part.encode())
    for path in [__file__, os.path.join(PACKAGE, "_lines.py"), *scala_sources(line)]:
        add(os.path.relpath(path, ROOT).encode())
        with open(path, "rb") as f:
            add(f.read())
    for name in sorted(os.listdir(spark_jars)):
        if name.endswith(".jar"):
            add(f"{name} {os.path.getsize(os.path.join(spark_jars, name))}".encode())
    return digest.hexdigest()[:40]


def build(line, jar: str, spark_jars: str, version: str) -> None:
    """`line`'s jar from the build cache when its inputs were compiled before, else compiled."""
    cached = os.path.join(cache_dir(), "jars", compile_digest(line, spark_jars, version),
                          line.jar_name(version))
    if _copy(cached, jar):
        try:
            os.utime(os.path.dirname(cached))  # recently used: kept by the eviction below
        except FileNotFoundError:  # evicted meanwhile by another build
            pass
        print(f"windowsketch: the jar for Spark {line.line} from the build cache (compiled "
              f"before from the same inputs: {cached})", file=sys.stderr)
        return
    compile_jar(line, jar, spark_jars, version)
    _copy(jar, cached)
    _evict(os.path.join(cache_dir(), "jars"))


def _copy(source: str, target: str) -> bool:
    """Copies `source` to `target` whole or not at all; False if `source` is missing."""
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    partial = f"{target}.{os.getpid()}.partial"
    try:
        shutil.copyfile(source, partial)
    except FileNotFoundError:
        return False
    os.replace(partial, target)
    return True


def _evict(folder: str) -> None:
    """Keeps the CACHED_JARS most recently used entries of the jar cache."""
    def used(entry: str) -> float:
        try:
            return os.path.getmtime(entry)
        except FileNotFoundError:  # evicted meanwhile by another build
            return 0.0
    entries = sorted((os.path.join(folder, name) for name in os.listdir(folder)), key=used, reverse=True)
    for stale in entries[CACHED_JARS:]:
        shutil.rmtree(stale, ignore_errors=True)


def compile_jar(line, jar: str, spark_jars: str, version: str) -> None:
    """Compiles `line`'s sources against `spark_jars` with the compiler found there."""

    def one(pattern: str) -> str:
        (found,) = glob.glob(os.path.join(spark_jars, pattern))
        return found

    compiler_cp = os.pathsep.join(
        one(p) for p in ("scala-compiler-*.jar", "scala-library-*.jar", "scala-reflect-*.jar"))
    java = _java()
    with tempfile.TemporaryDirectory() as work:
        classes = os.path.join(work, "classes")
        os.makedirs(classes)
        build_info = os.path.join(work, "BuildInfo.scala")
        with open(build_info, "w") as f:
            f.write(_build_info(line, version))
        cmd = [java, "-Xss8m", "-cp", compiler_cp, "scala.tools.nsc.Main",
               "-release", str(line.java_release), "-deprecation", "-feature", "-Werror",
               "-classpath", os.path.join(spark_jars, "*"), "-d", classes,
               build_info, *scala_sources(line)]
        print(f"windowsketch: compiling the jar for Spark {line.line} (Scala {line.scala}, "
              f"Java {line.java_release} bytecode) against {spark_jars}", file=sys.stderr)
        subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL)
        os.makedirs(os.path.dirname(os.path.abspath(jar)), exist_ok=True)
        partial = jar + ".partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
            out.writestr("META-INF/MANIFEST.MF",
                         "Manifest-Version: 1.0\nImplementation-Title: windowsketch\n"
                         f"Implementation-Version: {version}\n"
                         f"Spark-Line: {line.line}\nScala-Binary-Version: {line.scala}\n\n")
            for root, _, files in sorted(os.walk(classes)):
                for name in sorted(files):
                    path = os.path.join(root, name)
                    out.write(path, os.path.relpath(path, classes))
        os.replace(partial, jar)


def build_lines(wanted, out_dir: str, version: str, installed=None) -> list[str]:
    """Builds (when stale) the jar of each line in `wanted` into `out_dir`.

    `installed`: (version, jars folder) of a pyspark to compile its own line against.
    """
    built = []
    for line in wanted:
        jar = os.path.join(out_dir, line.jar_name(version))
        if not is_up_to_date(jar, line):
            if installed and lines.line_of(installed[0]) == line.line:
                spark_jars = installed[1]
            else:
                spark_jars = downloaded_jars(line.build_pyspark)
            build(line, jar, spark_jars, version)
        built.append(jar)
    return built


def requested_lines(spec: str | None, installed) -> list:
    """`spec`: "all", "3.5,4.1", or None for the installed pyspark's line (the newest line
    when none is installed or it is unsupported: that is the pyspark pip then installs)."""
    if spec:
        if spec.strip() == "all":
            return list(lines.LINES)
        return [lines.find(part) for part in spec.split(",") if part.strip()]
    if installed:
        try:
            return [lines.find(installed[0])]
        except lines.UnsupportedSparkVersion:
            pass
    return [lines.LINES[-1]]


def build_for_install(out_dir: str = JARS_DIR) -> list[str]:
    """What `pip install` builds: the lines in $WINDOWSKETCH_SPARK_LINES ("all" for a
    release wheel), else the installed pyspark's. Jars of other lines that are still up to
    date stay (a checkout shared by several environments); stale ones go."""
    version = package_version()
    installed = installed_pyspark()
    wanted = requested_lines(os.environ.get("WINDOWSKETCH_SPARK_LINES"), installed)
    keep = set(build_lines(wanted, out_dir, version, installed))
    by_name = {line.jar_name(version): line for line in lines.LINES}
    for jar in glob.glob(os.path.join(out_dir, "*.jar")):
        line = by_name.get(os.path.basename(jar))
        if jar not in keep and (line is None or not is_up_to_date(jar, line)):
            os.remove(jar)
    return sorted(keep)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", help='"all" or a comma-separated list such as 3.5,4.1 '
                                        "(default: the installed pyspark's line)")
    parser.add_argument("--out", default=JARS_DIR, help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    installed = installed_pyspark()
    for jar in build_lines(requested_lines(args.lines, installed), args.out,
                           package_version(), installed):
        print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
