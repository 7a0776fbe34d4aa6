"""The spark-sql shell, through `windowsketch sql`, runs every sql-examples/*.sql file."""
from __future__ import annotations

import glob
import os
import subprocess

import pytest

from conftest import ROOT, SHARED_DATA, WITH_C2
from windowsketch.demo import NASA_LOG

EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "sql-examples", "*.sql")))
# A line the shell prints before each example's output, so one shell runs them all.
MARK = "@@ sql-example "


@pytest.fixture(scope="module")
def printed(request, tmp_path_factory) -> dict[str, str]:
    """What the shell prints for each example this session runs, from one shell: a JVM and
    session per example cost a minute of CI. Each example's own temporary views replace an
    earlier one's of the same name; all of them set the same time zone."""
    chosen = [item.callspec.params["path"] for item in request.session.items
              if item.originalname == "test_sql_example_prints_expected_rows"]
    script = tmp_path_factory.mktemp("sql") / "examples.sql"
    with open(script, "w") as out:
        for path in chosen:
            out.write(f"SELECT '{MARK}{os.path.basename(path)}';\n")
            with open(path) as f:
                out.write(f.read().replace("CREATE TEMPORARY VIEW", "CREATE OR REPLACE TEMPORARY VIEW"))
            out.write("\n")
    result = subprocess.run(
        ["windowsketch", "sql", "--conf", "spark.ui.enabled=false",
         "--hivevar", f"nasa_log={NASA_LOG}",
         "--hivevar", f"retail_log={os.path.join(SHARED_DATA, 'online_retail_2010-2011.csv.gz')}",
         "-f", str(script)],
        cwd=script.parent, capture_output=True, text=True, timeout=300 * len(chosen),
        stdin=subprocess.DEVNULL, env=WITH_C2)
    assert result.returncode == 0, result.stderr[-3000:]
    outputs: dict[str, str] = {}
    name = None
    for line in result.stdout.splitlines(keepends=True):
        if line.startswith(MARK):
            name = line[len(MARK):].strip()
            outputs[name] = ""
        else:
            assert name is not None, line
            outputs[name] += line
    assert sorted(outputs) == sorted(os.path.basename(p) for p in chosen)
    return outputs


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_sql_example_prints_expected_rows(path, printed):
    expected_path = os.path.join(os.path.dirname(path), "expected",
                                 os.path.basename(path)[:-4] + ".out")
    with open(expected_path) as f:
        expected = f.read()
    assert printed[os.path.basename(path)] == expected


def test_examples_exist():
    assert len(EXAMPLES) >= 3
