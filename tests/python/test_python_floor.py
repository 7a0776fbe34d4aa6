"""The oldest Python README promises (3.10) runs the pure-Python sketch reader: its
doctests pass and every golden file of every kind reads and writes back byte for byte,
under a real 3.10 interpreter with pyspark made unimportable (a `legacy_` percentile file,
compacted again when written, writes back its rewrite). (mypy checks the whole
package against 3.10: tests/python/test_typing.py.)"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess

from conftest import ROOT
from golden_sketches import SKETCHES

SCRIPT = """
import sys
sys.modules["pyspark"] = None  # the reader needs no Spark
assert sys.version_info[:2] == (3, 10), sys.version
import doctest, glob, importlib, pkgutil
import windowsketch.sketch as reader
modules = [reader] + [importlib.import_module(f"windowsketch.sketch.{m.name}")
                      for m in pkgutil.iter_modules(reader.__path__)]
failed = attempted = 0
for module in modules:
    result = doctest.testmod(module)
    failed, attempted = failed + result.failed, attempted + result.attempted
files = sorted(glob.glob("tests/golden/*.bin") + glob.glob("tests/golden/percentile/*.bin"))
rewritten = {REWRITTEN}  # an earlier build's file -> the file the same rows write today
for path in files:
    data = open(path, "rb").read()
    if "/legacy_" in path:  # compacted again when written: the rewrite is what writes back
        data = reader.WindowSketch.from_bytes(data).to_bytes()
    written = data if "/legacy_" in path else open(rewritten.get(path, path), "rb").read()
    assert reader.WindowSketch.from_bytes(data).to_bytes() == written, path
print("READER", failed, attempted, len(files))
"""


REWRITTEN = {f"tests/golden/{name}.bin": f"tests/golden/{golden.rewritten_as}.bin"
             for name, golden in SKETCHES.items() if golden.rewritten_as}
assert REWRITTEN, "the golden file of an earlier build is read too"


def python_3_10() -> str:
    """A Python 3.10 interpreter: on PATH, or one pyenv installed (its shims answer only
    for the global version)."""
    candidates = [shutil.which("python3.10") or ""] + sorted(glob.glob(os.path.join(
        os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")), "versions", "3.10.*",
        "bin", "python3.10")))
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True,
                                        stdin=subprocess.DEVNULL).returncode == 0:
            return candidate
    raise AssertionError("README promises Python 3.10 but this machine has no 3.10 "
                         "interpreter to check it with (pyenv install 3.10)")


def test_the_sketch_reader_runs_on_python_3_10():
    result = subprocess.run(
        [python_3_10(), "-c", SCRIPT.replace("{REWRITTEN}", repr(REWRITTEN))], cwd=ROOT, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")})
    assert result.returncode == 0, result.stdout + result.stderr
    failed, attempted, files = (int(x) for x in result.stdout.split("READER")[1].split())
    assert failed == 0 and attempted >= 9 and files >= 14, result.stdout
