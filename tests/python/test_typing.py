"""The package's type hints are complete and visible: `mypy --strict` is clean on
python/windowsketch against the oldest Python it supports (3.10, pyproject's
requires-python: no newer syntax or standard-library API slips in), and the package ships
the PEP 561 marker that makes users' type checkers read its hints."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT

import windowsketch


def test_mypy_strict_is_clean_on_the_package():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-version",
         "3.10", os.path.join("python", "windowsketch")],
        cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_requires_python_is_the_version_mypy_checks():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert 'requires-python = ">=3.10"' in f.read()


def test_package_ships_the_py_typed_marker():
    package = os.path.dirname(os.path.abspath(windowsketch.__file__))
    assert os.path.isfile(os.path.join(package, "py.typed"))
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert '"py.typed"' in f.read(), "package data must carry the marker into wheels"
