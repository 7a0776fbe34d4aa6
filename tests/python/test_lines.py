"""Which jar serves which Spark: the lines table, jar selection, clear errors for the rest,
and the jars themselves (bytecode level, what they say they were built for)."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import zipfile

import pytest

import windowsketch
from conftest import ROOT, SPARK_LINE, function_share
from windowsketch import _lines
from windowsketch._lines import LINES, UnsupportedSparkVersion, line_of

SUPPORTED_TEXT = "3.5, 4.0, 4.1, 4.2 and 4.3"


@pytest.mark.parametrize("version, line", [
    ("4.1.1", "4.1"), ("3.5.0-amzn-1", "3.5"), ("4.3", "4.3"), ("4.0.0.dev1", "4.0"),
    ("10.12.3", "10.12"), ("3.5.9+databricks", "3.5"),
])
def test_line_of_reads_major_and_minor(version, line):
    assert line_of(version) == line


@pytest.mark.parametrize("version", ["3.4.1", "3.4", "4.4.0", "5.0", "2.4.8"])
def test_unsupported_spark_names_the_supported_lines(version):
    with pytest.raises(UnsupportedSparkVersion, match=re.escape(SUPPORTED_TEXT)) as info:
        windowsketch.jar_path(version)
    assert f"Spark {version} is not one of them" in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("version", ["", "latest", "four"])
def test_unreadable_version_says_what_it_expects(version):
    with pytest.raises(UnsupportedSparkVersion, match="cannot read a Spark version"):
        windowsketch.jar_path(version)


def test_jar_path_follows_the_installed_pyspark():
    line = _lines.find(SPARK_LINE)
    path = windowsketch.jar_path()
    assert os.path.basename(path) == f"windowsketch-{windowsketch.__version__}-spark{line.line}_{line.scala}.jar"
    assert os.path.isfile(path)
    assert SPARK_LINE in windowsketch.bundled_lines()


def test_a_line_this_installation_lacks_says_how_to_build_it(tmp_path, monkeypatch):
    only = LINES[0]
    (tmp_path / only.jar_name(windowsketch.__version__)).write_bytes(b"")
    monkeypatch.setattr(windowsketch, "_jars_dir", lambda: str(tmp_path))
    assert windowsketch.bundled_lines() == [only.line]
    assert windowsketch.jar_path(only.line).endswith(only.jar_name(windowsketch.__version__))
    with pytest.raises(FileNotFoundError, match=r"no jar for Spark 4\.3 \(it has: 3\.5;") as info:
        windowsketch.jar_path("4.3.0")
    assert "WINDOWSKETCH_SPARK_LINES=all pip install" in str(info.value)


def test_register_refuses_an_unsupported_spark_before_touching_the_jvm():
    class OldSession:
        version = "3.4.1"
        _jsparkSession = object()  # never used: the version check comes first

    with pytest.raises(UnsupportedSparkVersion, match=re.escape(SUPPORTED_TEXT)):
        windowsketch.register(OldSession())


def test_cli_jar_path_for_another_spark():
    result = subprocess.run(["windowsketch", "jar-path", "--spark", "3.4.2"],
                            capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert SUPPORTED_TEXT in result.stderr and "Traceback" not in result.stderr
    result = subprocess.run(["windowsketch", "jar-path", "--spark", SPARK_LINE + ".7"],
                            capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0 and result.stdout.strip() == windowsketch.jar_path()


@pytest.mark.parametrize("line", windowsketch.bundled_lines())
def test_bundled_jar_is_built_for_its_line(line):
    """Java 8 bytecode for Spark 3.5 (which still runs on Java 8), Java 17 for Spark 4; the
    manifest and the compiled-in BuildInfo agree with the file name."""
    spec = _lines.find(line)
    with zipfile.ZipFile(windowsketch.jar_path(line)) as jar:
        manifest = jar.read("META-INF/MANIFEST.MF").decode()
        assert f"Spark-Line: {line}\n" in manifest
        assert f"Scala-Binary-Version: {spec.scala}\n" in manifest
        classes = [n for n in jar.namelist() if n.endswith(".class")]
        assert classes
        for name in classes:
            header = jar.read(name)[:8]
            assert header[:4] == b"\xca\xfe\xba\xbe"
            assert int.from_bytes(header[6:8], "big") == spec.java_release + 44, name
        build_info = jar.read("windowsketch/spark/BuildInfo$.class")
        assert spec.jar_name(windowsketch.__version__).encode() in build_info


def test_build_sbt_builds_the_same_lines():
    """build.sbt (for sbt users) keeps its own copy of the table; the two must agree."""
    with open(os.path.join(ROOT, "build.sbt")) as f:
        sbt = f.read()
    rows = re.findall(r'"(\d+\.\d+)" -> \("([\d.]+)", "([\d.]+)", "(\d+)", Seq\(([^)]*)\)\)', sbt)
    table = {line: (spark, scala, int(release), tuple(re.findall(r'"([^"]+)"', shims)))
             for line, spark, scala, release, shims in rows}
    assert table == {
        spec.line: (spec.build_pyspark, table.get(spec.line, ("", spec.scala + ".x"))[1],
                     spec.java_release, spec.shims)
        for spec in LINES}
    for spec in LINES:
        assert table[spec.line][1].startswith(spec.scala + ".")
    assert f'getOrElse("spark.line", "{LINES[-1].line}")' in sbt


def test_every_shim_folder_exists_and_is_used():
    main = os.path.join(ROOT, "scala", "src", "main")
    folders = {f for f in os.listdir(main) if f.startswith("scala-spark-")}
    used = {shim for spec in LINES for shim in spec.shims}
    assert folders == used


def test_the_4x_lines_split_the_test_functions_evenly():
    """4.0, 4.1 and 4.2 each run one half of the Spark-facing test functions (tests/lines):
    the hash must split them, not hand one line nearly all."""
    ids = []
    for folder in ("tests/spark", "tests/python"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if name.startswith("test_") and name.endswith(".py"):
                with open(os.path.join(ROOT, folder, name)) as f:
                    tree = ast.parse(f.read())
                ids += [f"{folder}/{name}::{node.name}" for node in tree.body
                        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
    assert len(ids) > 200
    first = sum(function_share(test_id, 2) == 0 for test_id in ids)
    assert 0.4 < first / len(ids) < 0.6, (first, len(ids))
    # All of a function's cases go together.
    assert function_share(ids[0] + "[case-1]", 2) == function_share(ids[0], 2)
