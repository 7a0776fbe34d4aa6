"""The build's jar cache (scala/build_jar.py): the same inputs compile once, any changed
input compiles again, and the cache keeps its most recently used entries."""
from __future__ import annotations

import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "scala"))
import build_jar  # noqa: E402

sys.path.pop(0)

LINE = build_jar.lines.LINES[-1]


@pytest.fixture
def build(tmp_path, monkeypatch):
    """build_jar.build with the compiler replaced by one that writes its call number into
    the jar, against a folder of stand-in Spark jars and one stand-in source file."""
    monkeypatch.setenv("WINDOWSKETCH_BUILD_CACHE", str(tmp_path / "cache"))
    spark_jars = tmp_path / "spark-jars"
    spark_jars.mkdir()
    (spark_jars / "spark-core.jar").write_bytes(b"core")
    source = tmp_path / "Sketch.scala"
    source.write_text("object Sketch")
    monkeypatch.setattr(build_jar, "scala_sources", lambda line: [str(source)])
    compiles = []

    def compile_jar(line, jar, jars, version):
        compiles.append(jar)
        with open(jar, "w") as f:
            f.write(f"compile {len(compiles)}")

    monkeypatch.setattr(build_jar, "compile_jar", compile_jar)

    def run(out: str, version: str = "0.1.0") -> str:
        jar = str(tmp_path / out / LINE.jar_name(version))
        build_jar.build(LINE, jar, str(spark_jars), version)
        with open(jar) as f:
            return f.read()

    run.compiles, run.spark_jars, run.source = compiles, spark_jars, source
    return run


def test_the_same_inputs_compile_once(build):
    assert build("a") == "compile 1"
    assert build("b") == "compile 1"  # another checkout's jars folder, from the cache
    assert len(build.compiles) == 1


@pytest.mark.parametrize("change", ["source", "spark jars", "version"])
def test_a_changed_input_compiles_again(build, change):
    assert build("a") == "compile 1"
    if change == "source":
        build.source.write_text("object Sketch { val x = 1 }")
    elif change == "spark jars":
        (build.spark_jars / "spark-core.jar").write_bytes(b"core, patched")
    version = "0.2.0" if change == "version" else "0.1.0"
    assert build("a", version) == "compile 2"
    assert build("b", version) == "compile 2"


def test_the_cache_keeps_its_most_recently_used_jars(build, tmp_path, monkeypatch):
    monkeypatch.setattr(build_jar, "CACHED_JARS", 2)
    for n in range(3):
        build.source.write_text(f"object Sketch{n}")
        assert build("a") == f"compile {n + 1}"
    assert len(os.listdir(tmp_path / "cache" / "jars")) == 2
    build.source.write_text("object Sketch0")  # the oldest, evicted: compiled again
    assert build("a") == "compile 4"
    build.source.write_text("object Sketch2")  # kept
    assert build("a") == "compile 3"
