"""The `>>>` examples in the DataFrame functions' and the sketch reader's docstrings run and
print what they show."""
from __future__ import annotations

import doctest

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


READER_DOCTESTS = [t for t in doctest.DocTestFinder().find(windowsketch.sketch) if t.examples]


def test_sketch_reader_public_names_are_documented_and_its_examples_run():
    for name in windowsketch.sketch.__all__:
        assert getattr(windowsketch.sketch, name).__doc__, name
    assert READER_DOCTESTS
    for test in READER_DOCTESTS:  # no Spark needed
        report: list[str] = []
        result = doctest.DocTestRunner().run(test, out=report.append)
        assert result.failed == 0 and result.attempted >= 4, "".join(report)
