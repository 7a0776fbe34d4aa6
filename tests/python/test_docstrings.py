"""The `>>>` examples in the DataFrame functions' and the sketch reader's docstrings run and
print what they show."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import windowsketch.functions
import windowsketch.sketch

DOCTESTS = [t for t in doctest.DocTestFinder().find(windowsketch.functions) if t.examples]


def test_every_public_function_has_an_example():
    documented = {t.name.rsplit(".", 1)[-1] for t in DOCTESTS}
    public = {name for name in windowsketch.functions.__all__}
    assert public <= documented, public - documented


@pytest.mark.parametrize("test", DOCTESTS, ids=[t.name.rsplit(".", 1)[-1] for t in DOCTESTS])
def test_docstring_example_runs(spark, test):
    test.globs = {"spark": spark}
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    result = runner.run(test, out=report.append)
    assert result.failed == 0, "".join(report)
    assert result.attempted >= 3


# The reader is a package: the doctests of every module, each family's included.
READER_DOCTESTS = [
    t for module in [windowsketch.sketch] + [
        importlib.import_module(f"windowsketch.sketch.{m.name}")
        for m in pkgutil.iter_modules(windowsketch.sketch.__path__)]
    for t in doctest.DocTestFinder().find(module) if t.examples]


def test_sketch_reader_public_names_are_documented_and_its_examples_run():
    for name in windowsketch.sketch.__all__:
        assert getattr(windowsketch.sketch, name).__doc__, name
    assert {t.name.rsplit(".", 1)[-1] for t in READER_DOCTESTS} >= {"WindowSketch",
                                                                     "PercentileSketch"}
    for test in READER_DOCTESTS:  # no Spark needed
        report: list[str] = []
        result = doctest.DocTestRunner().run(test, out=report.append)
        assert result.failed == 0 and result.attempted >= 4, "".join(report)
