"""The `>>>` examples in the DataFrame functions' docstrings run and print what they show."""
from __future__ import annotations

import doctest

import pytest

import windowsketch.functions

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
