"""The spark-sql shell, through `windowsketch sql`, runs every sql-examples/*.sql file."""
from __future__ import annotations

import glob
import os
import subprocess

import pytest

from conftest import ROOT, SHARED_DATA
from windowsketch.demo import NASA_LOG

EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "sql-examples", "*.sql")))


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_sql_example_prints_expected_rows(path, tmp_path):
    expected_path = os.path.join(os.path.dirname(path), "expected",
                                 os.path.basename(path)[:-4] + ".out")
    with open(expected_path) as f:
        expected = f.read()
    result = subprocess.run(
        ["windowsketch", "sql", "--conf", "spark.ui.enabled=false",
         "--hivevar", f"nasa_log={NASA_LOG}",
         "--hivevar", f"retail_log={os.path.join(SHARED_DATA, 'online_retail_2010-2011.csv.gz')}",
         "-f", path],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == expected


def test_examples_exist():
    assert len(EXAMPLES) >= 3
