"""DESCRIBE FUNCTION documents every function, and its examples print what they claim."""
from __future__ import annotations

import re

import pytest

FUNCTIONS = ["approx_window_count", "approx_window_count_bounds", "approx_window_sum",
             "approx_window_count_distinct", "approx_window_percentile",
             "approx_window_percentile_bounds",
             "window_sketch", "window_sketch_merge", "window_sketch_estimate",
             "window_sketch_bounds", "window_distinct_sketch", "window_distinct_sketch_merge",
             "window_distinct_sketch_estimate", "window_percentile_sketch",
             "window_percentile_sketch_merge", "window_percentile_sketch_estimate",
             "approx_window_avg", "approx_window_variance", "approx_window_var_samp",
             "approx_window_var_pop", "approx_window_stddev", "approx_window_stddev_samp",
             "approx_window_stddev_pop", "approx_window_avg_bounds", "approx_window_stddev_bounds",
             "window_moments_sketch", "window_moments_sketch_merge",
             "window_moments_sketch_estimate", "window_moments_sketch_bounds",
             "approx_window_top_k", "window_top_k_sketch", "window_top_k_sketch_merge",
             "window_top_k_sketch_estimate", "approx_window_sample", "window_sample_sketch",
             "window_sample_sketch_merge", "window_sample_sketch_get", "approx_window_seen",
             "window_filter_sketch", "window_filter_sketch_merge", "window_filter_contains"]


def test_every_registered_function_is_described_here(spark):
    from windowsketch import _scala_object

    registrations = _scala_object(
        spark, "org.apache.spark.sql.windowsketch.FunctionRegistrations").all()
    names = {registrations.apply(i)._1().funcName() for i in range(registrations.size())}
    assert names == set(FUNCTIONS)


def describe(spark, name: str) -> str:
    return "\n".join(r[0] for r in spark.sql(f"DESCRIBE FUNCTION EXTENDED {name}").collect())


@pytest.mark.parametrize("name", FUNCTIONS)
def test_describe_shows_usage_arguments_and_examples(spark, name):
    text = describe(spark, name)
    for part in (f"Function: {name}", "Usage:", "Arguments:", "Examples:", "Since: 0.1.0"):
        assert part in text
    assert "No example" not in text


def examples(text: str):
    """(sql, expected output lines) for each '> SELECT ...;' in an Examples block."""
    block = re.split(r"\n\s*(?:Note|Since|Group):", text.split("Examples:", 1)[1])[0]
    for chunk in re.split(r"\n\s*> ", "\n" + block)[1:]:
        sql, *expected = [line.strip() for line in chunk.strip().splitlines()]
        yield sql.rstrip(";"), [line for line in expected if line]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_documented_examples_print_what_they_claim(spark, name):
    found = list(examples(describe(spark, name)))
    assert found
    for sql, expected in found:
        got = ["\t".join("NULL" if v is None else str(v).lower() if isinstance(v, bool)
                          else str(v) for v in row)
               for row in spark.sql(sql).collect()]
        assert got == [re.sub(r"\s*\t\s*", "\t", line) for line in expected], sql
