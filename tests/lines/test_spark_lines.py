"""windowsketch on the other supported Spark lines, each in a virtualenv of its own.

`pytest --spark-lines=all` (what CI runs) builds one release wheel, holding every line's
jar, from a clean copy of the checkout. Then, for each line other than the installed
pyspark's, in a virtualenv holding that line's pyspark from PyPI:

1. installing the wheel keeps that pyspark;
2. the suite passes there (SUITES says which parts; each parametrized test with at most
   PARAMS_PER_TEST of its cases, a different share per line; 4.0 and 4.1, which build from
   the same sources and shims, split the test functions between them, and 4.2, which
   builds from the main line's, runs one of those halves: SHARES);
3. two other lines' jars (one of the other Scala version) are refused with a message
   naming the right one, through the extension, register() or sliding_counts;
4. on 3.5 (Scala 2.12) and 4.0 (the other 2.13 shims than the main line's), installing a
   clean copy from source builds this line's jar, and the SQL quickstart, `windowsketch
   demo` and `windowsketch sql -f sql-examples/quickstart.sql` work. The release wheel
   compiles every line's jar from a clean copy, and CI's editable install the main line's
   (each from the build cache when the same inputs were compiled before: its tests are
   tests/python/test_build_jar.py).

The wheel's jar for the installed pyspark's own line runs too (the main suite tests the jar
it builds itself). All of it runs in the background from the end of collection, two lines at a time, while
the main suite runs (the work is mostly waiting: JVM start-up, pip, Spark's scheduling);
the tests here, which pytest runs last, wait for their line's results. Virtualenvs are
kept in the build cache (scala/build_jar.py) between runs.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import traceback
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from conftest import EXPECTED_SKIPS, ROOT, SPARK_LINE

sys.path.insert(0, os.path.join(ROOT, "scala"))
import build_jar  # noqa: E402

sys.path.pop(0)
from windowsketch._lines import LINES, find  # noqa: E402

# The pyspark release each line is tested on: its newest patch release, while the release
# wheel compiles against the line's first, so CI checks one jar across its line's patches.
TESTED_PYSPARK = {"3.5": "3.5.9", "4.0": "4.0.5", "4.1": "4.1.4", "4.2": "4.2.1",
                  "4.3": "4.3.0"}

# What runs where. Everything that touches Spark runs on every line. The core (Scala with
# no Spark in it), the two-executor cluster, the small-heap driver and the streaming driver
# killed with SIGKILL run on 3.5, the other Scala; the main run covers them on Scala 2.13. The demo command runs in step 4 (on 3.5
# and 4.0); the benchmark harness, mypy and the documentation site (the same sources on
# every line) are tools of the main line, not tests of a line.
_SPARK_FACING = [
    "tests/spark", "tests/python",
    "--deselect", "tests/python/test_benchmarks.py::test_quick_benchmark_writes_report_csv_and_plots",
    "--deselect", "tests/python/test_cli.py::test_demo_command_runs_end_to_end",
    "--deselect", "tests/python/test_typing.py::test_mypy_strict_is_clean_on_the_package",
    "--deselect", "tests/python/test_docs_site.py"]
_SCALA_213 = [
    "--deselect", "tests/spark/test_local_cluster.py::test_group_by_across_executor_processes",
    "--deselect", "tests/spark/test_small_heap.py",
    "--deselect", "tests/spark/test_drop_duplicates.py::test_each_row_is_delivered_exactly_once_across_a_sigkill",
    "--deselect", "tests/python/test_shell.py::test_sql_example_prints_expected_rows[retail_moving_sums.sql]"]
# pyspark 3.5's connect extra (numpy < 2) sits beside the newest pyarrow, which needs
# NumPy 2 and so does not import there: the pyarrow column helpers and the Parquet example
# (pure Python, the same on every line) are tested by the other lines.
_NO_PYARROW = [
    "--deselect", "tests/python/test_sketch.py::test_column_helpers_on_pyarrow_columns",
    "--deselect", "tests/python/test_percentile_reader.py::test_percentile_column_on_pyarrow",
    "--deselect", "tests/python/test_sample_reader.py::test_sample_column_on_pyarrow",
    "--deselect", "tests/python/test_read_stored_example.py::test_hourly_sketches_read_in_pandas_hold_their_bounds"]
SUITES = {"3.5": ["tests/core", *_SPARK_FACING, *_NO_PYARROW],
          **{line: [*_SPARK_FACING, *_SCALA_213] for line in ("4.0", "4.1", "4.2", "4.3")}}
assert set(SUITES) == set(TESTED_PYSPARK) == {line.line for line in LINES}
STEPS = ("wheel", "suite", "refused", "source")
#: The lines whose source install (step 4) runs: the other Scala, and the 2.13 line whose
#: shim folders differ from the main line's.
SOURCE_INSTALL_LINES = ("3.5", "4.0")
# Each line runs every test function, with at most this many of its parametrizations (a
# different share on each line, conftest.py); the main line runs every case.
PARAMS_PER_TEST = 1
# But for the 4.x lines beside the main one: 4.0 and 4.1 build from the same sources and
# shims (4.1 compiles 4.0's against its own Spark), so they split the test functions between
# them (conftest.function_share) and every function meets those shims once; 4.2 builds from
# 4.3's, which the main line runs in full, and runs 4.0's half. A line's suite beside the
# others costs about three times its run alone, and it is most of the matrix's work.
SHARES = {"4.0": "1/2", "4.1": "0/2", "4.2": "1/2"}
assert sorted({SHARES["4.0"], SHARES["4.1"]}) == ["0/2", "1/2"]
assert set(EXPECTED_SKIPS) == set(SUITES)

#: Per line, the suite's summary ("512 passed, 1 skipped in 250.3s"), for the report.
RESULTS: dict[str, str] = {}


def requested_lines(config) -> list[str]:
    spec = config.getoption("--spark-lines").strip()
    if spec == "all":
        lines = [line.line for line in LINES if line.line != SPARK_LINE]
    else:
        lines = [find(part).line for part in spec.split(",") if part.strip()]
    return sorted(lines, key=lambda line: -len(SUITES[line]))  # the longest first


def pytest_generate_tests(metafunc):
    if "line" in metafunc.fixturenames:
        lines = requested_lines(metafunc.config)
        if "source_install" in metafunc.function.__name__:
            lines = [line for line in lines if line in SOURCE_INSTALL_LINES]
        metafunc.parametrize("line", lines, ids=[f"spark{line}" for line in lines])


class Venv:
    """A virtualenv holding one line's pyspark (with Spark Connect's client), as a user's."""

    def __init__(self, line: str):
        self.line = line
        self.version = TESTED_PYSPARK[line]
        self.path = os.path.join(build_jar.cache_dir(), "venvs", f"pyspark-{self.version}-py"
                                 f"{sys.version_info[0]}.{sys.version_info[1]}")
        self.bin = os.path.join(self.path, "bin")
        self.python = os.path.join(self.bin, "python")
        # Spark's Python workers and the `windowsketch` command must come from here too.
        self.env = {**os.environ, "PATH": self.bin + os.pathsep + os.environ["PATH"],
                    "PYSPARK_PYTHON": self.python, "PYSPARK_DRIVER_PYTHON": self.python,
                    "VIRTUAL_ENV": self.path}
        for leak in ("PYTHONPATH", "SPARK_HOME", "WINDOWSKETCH_SPARK_LINES"):
            self.env.pop(leak, None)

    def create(self) -> None:
        if os.path.exists(self.python) and self.run(
                self.python, "-c", "import pyspark", check=False).returncode == 0:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", self.path], check=True,
                       stdin=subprocess.DEVNULL, capture_output=True)
        self.pip("install", "-q", f"pyspark[connect]=={self.version}")

    def run(self, *args, timeout=900, cwd=ROOT, check=True) -> subprocess.CompletedProcess:
        result = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                                cwd=cwd, env=self.env, stdin=subprocess.DEVNULL)
        if check:
            assert result.returncode == 0, (
                f"{' '.join(args)[:300]} failed ({result.returncode}):\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
        return result

    def pip(self, *args, timeout=1800):
        return self.run(self.python, "-m", "pip", "--disable-pip-version-check", *args,
                        timeout=timeout)

    def pyspark_version(self) -> str:
        return self.run(self.python, "-c", "import pyspark.version as v; print(v.__version__)"
                        ).stdout.strip()

    def bundled_lines(self) -> str:
        return self.run(self.python, "-c", "import windowsketch; "
                        "print(','.join(windowsketch.bundled_lines()))").stdout.strip()

    def python_script(self, script: str, cwd):
        return self.run(self.python, "-c", textwrap.dedent(script), cwd=cwd)


def clean_copy(target: str) -> str:
    """The checkout's files as a clone would have them (tracked, or new and not ignored),
    and nothing else: no built jar. A fresh one per build, since a build writes its jars
    into the source tree."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = os.path.join(ROOT, name)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(os.path.join(target, name)), exist_ok=True)
            shutil.copy2(source, os.path.join(target, name))
    return target


def build_release_wheel(work: str) -> str:
    """The release build: one wheel with every line's jar."""
    source = clean_copy(os.path.join(work, "release", "windowsketch"))
    out = os.path.join(work, "dist")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
         "-w", out, source],
        capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL,
        env={**os.environ, "WINDOWSKETCH_SPARK_LINES": "all"})
    assert result.returncode == 0, result.stderr[-5000:]
    (wheel,) = [f for f in os.listdir(out) if f.endswith(".whl")]
    return os.path.join(out, wheel)


def install_wheel(venv: Venv, wheel: str) -> None:
    before = venv.pyspark_version()
    venv.pip("install", "-q", "--force-reinstall", "--no-deps", wheel)
    venv.pip("install", "-q", f"{wheel}[test]")
    assert venv.pyspark_version() == before == venv.version, "the user's pyspark changed"
    assert venv.bundled_lines() == ",".join(line.line for line in LINES)


def run_suite(venv: Venv) -> None:
    result = venv.run(venv.python, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                      "-o", "addopts=-ra", f"--params-per-test={PARAMS_PER_TEST}",
                      *([f"--function-share={SHARES[venv.line]}"] if venv.line in SHARES else []),
                      *SUITES[venv.line], timeout=3600, check=False)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    RESULTS[venv.line] = f"pyspark {venv.version}: {summary}"
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-3000:]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary
    assert skip_count(summary) == EXPECTED_SKIPS[venv.line], result.stdout[-3000:]


def skip_count(summary: str) -> int:
    """Skipped tests in a pytest summary line ("512 passed, 1 skipped in 250.3s")."""
    found = re.search(r"(\d+) skipped", summary)
    return int(found.group(1)) if found else 0


REFUSAL_PATHS = ("extension", "register", "sliding_counts")


def refused_jars(line: str) -> list[tuple[str, str]]:
    """The (jar's line, path) pairs tried on `line`: two jars, the nearest of the other
    Scala version and the next line's (the newest's where that is the same), through paths
    that rotate with the line. Across the matrix every line's jar is refused somewhere and
    every path meets a jar of the other Scala version."""
    names = [spark_line.line for spark_line in LINES]
    scala = {spark_line.line: spark_line.scala for spark_line in LINES}
    at = names.index(line)
    other_scala = min((other for other in names if scala[other] != scala[line]),
                      key=lambda other: abs(names.index(other) - at))
    following = names[at + 1] if at + 1 < len(names) else names[at - 1]
    jars = list(dict.fromkeys([other_scala, following, names[-1]]))[:2]
    return [(jar, REFUSAL_PATHS[(at + i) % len(REFUSAL_PATHS)]) for i, jar in enumerate(jars)]


def refuse_other_lines_jars(venv: Venv, work: str) -> None:
    """A --jars mistake gets the jar to use, not a NoSuchMethodError: two other lines'
    jars (refused_jars), each in a JVM of its own."""
    for other, how in refused_jars(venv.line):
        out = venv.python_script(f"""
            from pyspark.sql import SparkSession
            import windowsketch
            from windowsketch.streaming import sliding_counts
            builder = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                       .config("spark.jars", windowsketch.jar_path("{other}")))
            if "{how}" == "extension":
                builder = builder.config("spark.sql.extensions", windowsketch.EXTENSIONS_CLASS)
            try:
                spark = builder.getOrCreate()
                if "{how}" == "sliding_counts":
                    events = spark.readStream.format("rate").load().selectExpr(
                        "value % 3 AS host", "timestamp AS ts").withWatermark("ts", "1 minute")
                    sliding_counts(events, "host", "ts", "10 minutes", "1 minute")
                else:
                    windowsketch.register(spark)
            except Exception as e:
                print("REFUSED:", type(e).__name__, e)
            else:
                print("LOADED")
            """, work).stdout
        assert "REFUSED:" in out, (other, how, out[-2000:])
        if how != "extension":  # register() and sliding_counts raise a RuntimeError
            assert "REFUSED: RuntimeError" in out, (other, how, out[-2000:])
        assert f"is built for Spark {other}" in out, (how, out[-2000:])
        assert f"but this is Spark {venv.version}" in out, out[-2000:]
        assert f"`windowsketch jar-path --spark {venv.version}`" in out, out[-2000:]
        assert "NoSuchMethodError" not in out and "ClassNotFoundException" not in out


WHEEL_JAR_SCRIPT = """
    from pyspark.sql import SparkSession
    import windowsketch
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.jars", JAR)
             .config("spark.sql.extensions", windowsketch.EXTENSIONS_CLASS).getOrCreate())
    row = spark.sql('''
      SELECT approx_window_percentile(x, ts, 3, 0.5), approx_window_count_distinct(x, ts, 3),
             window_sketch_estimate(window_sketch(x > 15, ts, 3))
      FROM VALUES (1, 30), (2, 10), (3, 20), (4, 50) AS t(ts, x)''').collect()[0]
    print("ANSWERS", list(row))
"""


def run_wheels_jar_for_the_installed_pyspark(wheel: str, work: str) -> None:
    """The release wheel's jar for the pyspark the main suite runs on (which tests the jar
    it builds itself) loads and answers: a percentile, a distinct count, a sketch column,
    and the quickstart."""
    import zipfile

    import pyspark

    line = find(pyspark.__version__)
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist()
                   if n.endswith(line.jar_name(windowsketch_version()))]
        jar = archive.extract(name, os.path.join(work, "main-line"))
    script = (textwrap.dedent(WHEEL_JAR_SCRIPT).replace("JAR", repr(jar)) +
              textwrap.dedent(QUICKSTART).replace("windowsketch.configure(SparkSession.builder",
                                                  "(SparkSession.builder"))
    result = subprocess.run([sys.executable, "-c", script], cwd=work, capture_output=True,
                            text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert "ANSWERS [20, 3, 2]" in result.stdout, result.stdout[-2000:] + result.stderr[-3000:]
    assert "QUICKSTART [1, 2, 1, 1]" in result.stdout, result.stdout[-2000:]


def windowsketch_version() -> str:
    import windowsketch

    return windowsketch.__version__


QUICKSTART = """
    import datetime
    from pyspark.sql import SparkSession
    import windowsketch

    spark = windowsketch.configure(SparkSession.builder.master("local[2]")
                                   .config("spark.ui.enabled", "false")).getOrCreate()
    t = datetime.datetime(2025, 1, 1, 10)
    spark.createDataFrame(
        [("a", t, 404), ("a", t + datetime.timedelta(minutes=5), 404),
         ("a", t + datetime.timedelta(minutes=12), 200), ("b", t, 404)],
        "host STRING, ts TIMESTAMP, status INT").createOrReplaceTempView("logs")
    rows = spark.sql('''
      SELECT host, ts,
             approx_window_count(status = 404, ts, INTERVAL 10 MINUTES) OVER (
               PARTITION BY host ORDER BY ts) AS recent_404s
      FROM logs ORDER BY host, ts''').collect()
    print("QUICKSTART", [r.recent_404s for r in rows])
"""


def install_from_source(venv: Venv, work: str) -> None:
    source = clean_copy(os.path.join(work, "source", "windowsketch"))
    venv.pip("install", "-q", "--force-reinstall", "--no-deps", source)
    assert venv.pyspark_version() == venv.version
    assert venv.bundled_lines() == venv.line  # just the installed pyspark's jar
    assert "QUICKSTART [1, 2, 1, 1]" in venv.python_script(QUICKSTART, work).stdout
    demo = venv.run("windowsketch", "demo", "--eps", "0.05", cwd=work, timeout=600).stdout
    assert "30,969 requests, 221 of them 404s" in demo and "on every row: held" in demo
    shell = venv.run("windowsketch", "sql", "--conf", "spark.ui.enabled=false", "-f",
                     os.path.join(ROOT, "sql-examples", "quickstart.sql"),
                     cwd=work, timeout=600).stdout
    with open(os.path.join(ROOT, "sql-examples", "expected", "quickstart.out")) as f:
        assert shell == f.read()


class Matrix:
    """Runs every requested line's steps in the background; tests read the outcomes."""

    def __init__(self, lines: list[str], work: str):
        self.work = work
        self.outcomes = {line: {step: Future() for step in STEPS} for line in lines}
        self.wheel = Future()
        self.main_line: Future = Future()
        self.pool = ThreadPoolExecutor(max_workers=2)
        threading.Thread(target=self._build_wheel, daemon=True).start()
        for line in lines:
            self.pool.submit(self._run_line, line)

    def _build_wheel(self) -> None:
        try:
            self.wheel.set_result(build_release_wheel(self.work))
        except BaseException as e:  # noqa: BLE001 - handed to the tests that need it
            self.wheel.set_exception(e)
            self.main_line.set_exception(e)
            return
        try:
            run_wheels_jar_for_the_installed_pyspark(self.wheel.result(), self.work)
            self.main_line.set_result(None)
        except BaseException:  # noqa: BLE001 - reported by its test
            self.main_line.set_exception(AssertionError(traceback.format_exc()))

    def _run_line(self, line: str) -> None:
        outcomes = self.outcomes[line]
        work = os.path.join(self.work, f"spark{line}")
        os.makedirs(work)
        try:
            venv = Venv(line)
            venv.create()
            steps = {"wheel": lambda: install_wheel(venv, self.wheel.result()),
                     "suite": lambda: run_suite(venv),
                     "refused": lambda: refuse_other_lines_jars(venv, work),
                     "source": lambda: install_from_source(venv, work)}
            for step in STEPS:
                if step == "source" and line not in SOURCE_INSTALL_LINES:
                    outcomes[step].set_result(None)  # no test waits for it
                    continue
                if step in ("suite", "refused") and outcomes["wheel"].exception() is not None:
                    outcomes[step].set_exception(
                        AssertionError("not run: installing the wheel failed"))
                    continue
                try:
                    steps[step]()
                    outcomes[step].set_result(None)
                except BaseException:  # noqa: BLE001 - reported by that step's test
                    outcomes[step].set_exception(AssertionError(traceback.format_exc()))
        except BaseException:  # noqa: BLE001 - the virtualenv, or a step's prerequisite
            for future in outcomes.values():
                if not future.done():
                    future.set_exception(AssertionError(traceback.format_exc()))

    def result(self, line: str, step: str) -> None:
        error = self.outcomes[line][step].exception()  # waits
        if error is not None:
            pytest.fail(str(error), pytrace=False)


_matrix: Matrix | None = None


def start(config, work: str) -> None:
    """Called by conftest once collection is done, before the first test."""
    global _matrix
    _matrix = Matrix(requested_lines(config), work)


def test_wheel_installs_beside_the_users_pyspark(line):
    _matrix.result(line, "wheel")


def test_suite_passes_on_the_line(line):
    _matrix.result(line, "suite")


def test_the_wheels_jar_for_the_installed_pyspark_answers():
    error = _matrix.main_line.exception()  # waits
    if error is not None:
        pytest.fail(str(error), pytrace=False)


def test_a_jar_of_another_line_is_refused_by_name(line):
    _matrix.result(line, "refused")


def test_source_install_builds_this_lines_jar_and_the_quickstarts_run(line):
    _matrix.result(line, "source")
