"""One SparkSession for the whole run, with windowsketch configured, plus stream helpers."""
from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Every JVM of a test run (the session's, those of tests in their own process, the Spark
#: lines'): short-lived, over small data, so C1 alone (no C2 compile threads) and the serial
#: collector. Measured over the percentile and top-k suites: 28% less CPU, 23% less time.
#: CI keeps both cores busy with the lines beside the main suite, so CPU is its time.
SERIAL_GC = "-XX:+UseSerialGC"
TEST_JVM_OPTIONS = f"-XX:TieredStopAtLevel=1 {SERIAL_GC}"
#: The environment for a JVM that computes over hundreds of thousands of rows or more (the
#: sql-examples' exact frames, the small-heap driver): C2 too, which it pays back. A
#: JAVA_TOOL_OPTIONS of the user's own is kept, here as for every other JVM.
WITH_C2 = {**os.environ, "JAVA_TOOL_OPTIONS": os.environ.get("JAVA_TOOL_OPTIONS", SERIAL_GC)}
os.environ.setdefault("JAVA_TOOL_OPTIONS", TEST_JVM_OPTIONS)
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")


def _spark_line() -> str:
    from pyspark.version import __version__

    from windowsketch._lines import line_of

    return line_of(__version__)


#: The installed pyspark's line, "3.5" ... "4.3".
SPARK_LINE = _spark_line()


def pytest_addoption(parser):
    parser.addoption(
        "--spark-lines", default="", metavar="LINES",
        help="also run the suite on other supported Spark lines, each in a virtualenv of its "
             "own with one release wheel (tests/lines): 'all', or a list such as 3.5,4.1")
    parser.addoption(
        "--params-per-test", type=int, default=0, metavar="K",
        help="run at most K parametrizations of each test function, chosen by a hash salted "
             "with the Spark line, so each line runs a different share (the line matrix's "
             "lean runs: every test function on every line, every case on the main line, "
             "and every case of tests marked every_case everywhere); 0, the default, runs all")
    parser.addoption(
        "--function-share", default="", metavar="I/N",
        help="run only the test functions in share I of N (0 <= I < N), chosen by a hash of "
             "each function's id: the middle Spark lines, which build from the sources and "
             "shims of the lines beside them, split the suite between them; empty runs all")


def pytest_ignore_collect(collection_path, config):
    # The line matrix builds wheels and virtualenvs: only when asked for.
    if collection_path.name == "lines" and collection_path.parent.name == "tests":
        return None if config.getoption("--spark-lines") else True
    return None


def function_share(nodeid: str, count: int) -> int:
    """Which of `count` shares a test function falls in: a hash of its id without the
    case ("tests/spark/test_x.py::test_y"), so all its cases go together, on any machine."""
    return zlib.crc32(nodeid.split("[")[0].encode()) % count


def pytest_collection_modifyitems(config, items):
    # The other lines' tests only wait for results worked out in the background while
    # the rest runs (tests/lines): so they go last.
    items.sort(key=lambda item: item.path.parent.name == "lines")
    share = config.getoption("--function-share")
    if share:
        index, count = (int(part) for part in share.split("/"))
        assert 0 <= index < count, f"--function-share {share}: need 0 <= I < N"
        inside = {id(item) for item in items if function_share(item.nodeid, count) == index}
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in inside])
        items[:] = [item for item in items if id(item) in inside]
    per_test = config.getoption("--params-per-test")
    if per_test > 0:
        cases: dict[tuple, list] = {}
        for item in items:
            if item.get_closest_marker("every_case") is None:
                cases.setdefault((item.path, getattr(item, "originalname", item.name)), []).append(item)
        dropped = set()
        for group in cases.values():
            ranked = sorted(group, key=lambda item: zlib.crc32(f"{SPARK_LINE} {item.nodeid}".encode()))
            dropped.update(id(item) for item in ranked[per_test:])
        config.hook.pytest_deselected(items=[item for item in items if id(item) in dropped])
        items[:] = [item for item in items if id(item) not in dropped]


def pytest_collection_finish(session):
    matrix = sys.modules.get("test_spark_lines")
    if matrix is not None and session.config.getoption("--spark-lines"):
        matrix.start(session.config, tempfile.mkdtemp(prefix="windowsketch-lines-"))


#: Skips each line's suite may have: a skip condition that fired where it should not would
#: otherwise keep CI green. 3.5's pyspark bundles no Spark Connect server, and 3.5 has no
#: Connect relation plugin. tests/lines checks each other line's count exactly; any run
#: here fails on more.
EXPECTED_SKIPS = {"3.5": 2, "4.0": 0, "4.1": 0, "4.2": 0, "4.3": 0}


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter is not None else 0
    allowed = EXPECTED_SKIPS.get(SPARK_LINE, 0)
    if skipped > allowed and exitstatus == pytest.ExitCode.OK:
        reporter.write_line(f"FAILED: {skipped} tests skipped where Spark {SPARK_LINE} may "
                            f"skip {allowed} (conftest.EXPECTED_SKIPS)", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    matrix = sys.modules.get("test_spark_lines")
    if matrix is not None and matrix.RESULTS:
        terminalreporter.section("Spark lines")
        for line, summary in sorted(matrix.RESULTS.items()):
            terminalreporter.write_line(f"Spark {line} ({summary})")


def pytest_sessionstart(session):
    _rebuild_stale_jar()


def _rebuild_stale_jar() -> None:
    """In a source checkout (an editable install), rebuild the installed pyspark's jar if
    scala/ changed since the install built it: before any test, as some only use the jar."""
    import windowsketch

    package_dir = os.path.dirname(os.path.realpath(windowsketch.__file__))
    if package_dir != os.path.join(os.path.realpath(ROOT), "python", "windowsketch"):
        return  # an installed wheel: test its jars as they are
    sys.path.insert(0, os.path.join(ROOT, "scala"))
    try:
        import build_jar
    finally:
        sys.path.pop(0)
    installed = build_jar.installed_pyspark()
    build_jar.build_lines(build_jar.requested_lines(None, installed), build_jar.JARS_DIR,
                          windowsketch.__version__, installed)


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    import windowsketch

    builder = (SparkSession.builder.master("local[2]").appName("windowsketch-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC")
               # GROUP BY's map side stages count and sum rows from the first: the path
               # a task whose sketches outgrow the default 4 MB takes (test_group_by_plans
               # runs both paths).
               .config("spark.windowsketch.groupBy.stageBytes", "0"))
    session = windowsketch.configure(builder).getOrCreate()
    session.sparkContext.setLogLevel("OFF")
    yield session
    session.stop()


class Sketches:
    """Drives the core sketches from Python through the bulk Replay entry points."""

    def __init__(self, spark):
        from windowsketch import _scala_object

        self.replay = _scala_object(spark, "windowsketch.core.Replay")
        self.format = _scala_object(spark, "windowsketch.core.SketchFormat")
        self.throughput = _scala_object(spark, "windowsketch.core.Throughput")

    def run(self, window: int, eps: float, ts, events, with_sizes: bool = False):
        """Per row: estimate, lower, upper, seed estimate, buckets, bytes (int64 columns)."""
        packed = self.replay.run(window, float(eps), _longs(ts), _flags(events), with_sizes)
        out = np.frombuffer(bytes(packed), dtype=">i8").astype(np.int64)
        return out.reshape(len(events), self.replay.Columns())

    def run_any_order(self, window: int, eps: float, ts, weights):
        """Mergeable sketch, per row: estimate, lower, upper, nodes (int64 columns).
        `weights`: booleans for events, or non-negative integers for sums."""
        packed = self.replay.runAnyOrder(window, float(eps), _longs(ts), _longs(weights))
        out = np.frombuffer(bytes(packed), dtype=">i8").astype(np.int64)
        return out.reshape(len(weights), self.replay.AnyOrderColumns())

    def sub_windows(self, sketch, end: int, lengths):
        """(estimate, lower, upper) rows, one per sub-window length."""
        packed = self.replay.subWindows(sketch, end, _longs(lengths))
        return np.frombuffer(bytes(packed), dtype=">i8").astype(np.int64).reshape(-1, 3)

    def verdicts(self, family: str, blobs) -> list[str]:
        """Per blob, "read" or the message refusing it, read by `family`'s JVM reader, in
        one call (Replay.verdicts)."""
        blobs = [bytes(blob) for blob in blobs]
        packed = self.replay.verdicts(family, b"".join(blobs), _longs([len(b) for b in blobs]))
        return verdict_lines(packed, len(blobs))

    def refused_and_read(self, family: str, blobs) -> tuple[int, list]:
        """How many of `blobs` `family`'s reader refuses (each as invalid sketch bytes), and
        the sketches it reads from the others."""
        verdicts = self.verdicts(family, blobs)
        refusals = [verdict for verdict in verdicts if verdict != "read"]
        assert all(v.startswith("invalid sketch bytes: ") for v in refusals), refusals[:3]
        read = {"count": self.format.deserialize, "distinct": self.format.deserializeDistinct,
                "percentile": self.format.deserializeQuantiles,
                "moments": self.format.deserializeMoments, "top_k": self.format.deserializeTopK}
        return len(refusals), [read[family](blob) for blob, verdict in zip(blobs, verdicts)
                               if verdict == "read"]

    def new(self, window: int, eps: float):
        return self.replay.histogram(window, float(eps))

    def dyadic(self, window: int, eps: float, ts=(), events=()):
        sketch = self.replay.dyadic(window, float(eps))
        if len(ts):
            self.replay.insertAll(sketch, _longs(ts), _flags(events))
        return sketch

    def invariant_problem(self, sketch):
        return self.replay.invariantProblem(sketch)

    def round_trip(self, sketch):
        return self.format.deserialize(self.format.serialize(sketch))

    def size(self, sketch) -> int:
        return len(self.format.serialize(sketch))

    def buckets(self, histogram):
        flat = list(self.replay.buckets(histogram))
        return [tuple(flat[i:i + 3]) for i in range(0, len(flat), 3)]


def _longs(values) -> bytes:
    return np.asarray(values, dtype=">i8").tobytes()


def verdict_lines(packed, count: int) -> list[str]:
    """A JVM verdicts call's answer (Replay.verdicts, liveStateVerdicts, liveWindowVerdicts):
    per input, "read" or the refusal's message."""
    found = str(packed).split("\n")[:-1]
    assert len(found) == count, (len(found), count)
    return found


def _flags(values) -> bytes:
    return np.asarray(values, dtype=np.uint8).tobytes()


@pytest.fixture(scope="session")
def sketches(spark):
    return Sketches(spark)


def stable_seed(*parts) -> int:
    """A seed from test parameters that is the same in every run (hash() of a string is
    not: it depends on PYTHONHASHSEED)."""
    return zlib.crc32(repr(parts).encode())


def exact_in_window(ts, events, window: int) -> int:
    """Events with ts in (max(ts) - window, max(ts)], rows in any order."""
    ts = np.asarray(ts, dtype=np.int64)
    if len(ts) == 0:
        return 0
    now = int(ts.max())
    inside = ts > now - window if now - window >= -2**63 else np.ones(len(ts), dtype=bool)
    return int(np.sum(np.asarray(events, dtype=bool) & inside))


def exact_sum(ts, values, window: int) -> int:
    """The values of rows with ts in (max(ts) - window, max(ts)], rows in any order."""
    return int(np.sum(np.where(np.asarray(ts) > int(np.max(ts)) - window, values, 0)))


def exact_counts(ts, events, window: int) -> np.ndarray:
    """Brute force over sorted ts: events j <= i with ts_j in (ts_i - window, ts_i]."""
    ts = np.asarray(ts, dtype=np.int64)
    prefix = np.concatenate([[0], np.cumsum(np.asarray(events, dtype=np.int64))])
    # ts_i - window, where that does not wrap below the smallest long (then nothing expired).
    no_expiry = ts < np.iinfo(np.int64).min + window
    edge = np.where(no_expiry, 0, ts - np.where(no_expiry, 0, window))
    lo = np.where(no_expiry, 0, np.searchsorted(ts, edge, side="right"))
    return prefix[1:] - prefix[lo]


def error_condition(error) -> str:
    """A Spark error's class: getCondition() from Spark 4.0, getErrorClass() before."""
    return error.getCondition() if hasattr(error, "getCondition") else error.getErrorClass()


def parameter_index(position: int) -> str:
    """How Spark names the `position`-th (from 0) parameter in a type error: "first" from
    Spark 4.0, "1" in 3.5."""
    return (str(position + 1) if SPARK_LINE == "3.5"
            else ["first", "second", "third", "fourth"][position])


@contextlib.contextmanager
def local_connect_port():
    """Holds the port a local Spark Connect server binds (15002) against other test runs
    on this machine: the line matrix runs suites side by side (tests/lines)."""
    with open(os.path.join(tempfile.gettempdir(), "windowsketch-connect-15002.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_in_own_process(script: str, cwd, env=None) -> str:
    """Runs a Python script that needs its own JVM (another master, a Connect server);
    returns its standard output, failing with the end of its standard error."""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=600, cwd=cwd, stdin=subprocess.DEVNULL, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout
