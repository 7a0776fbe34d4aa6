"""GROUP BY plans: windowsketch's bounded sketches aggregate on SketchHashAggregateExec,
which sizes the sort fallback threshold to the heap and runs the map side on a hash table
of its own below it; anything else, or a threshold the user set, stays on Spark's own
operator."""
from __future__ import annotations

import contextlib
import struct

import numpy as np
import pytest

from conftest import exact_in_window, exact_sum

THRESHOLD = "spark.sql.objectHashAggregate.sortBased.fallbackThreshold"
TABLE_BYTES = "spark.windowsketch.groupBy.tableBytes"
STAGE_BYTES = "spark.windowsketch.groupBy.stageBytes"
# The map side's table applies rows as they come until its sketches hold 4 MB by default,
# then stages them and applies them key by key; the tests' session stages from the first.
APPLIED_AS_THEY_COME, STAGED = "1g", "0"
KEYS = 1500  # well over Spark's 128 keys a task, so Spark's operator would sort
WINDOW, EPS = 400, 0.05


@pytest.fixture(scope="module")
def keyed_events(spark):
    """Per key: bursts of events at the window edge, gaps and duplicate timestamps."""
    rng = np.random.default_rng(23)
    n = 60_000
    keys = rng.integers(0, KEYS, n)
    ts = rng.integers(0, 3000, n) // rng.choice([1, 1, 7], n) * rng.choice([1, 1, 7], n)
    events = (rng.random(n) < 0.3) | ((ts % 1000) > 990)
    rows = [(int(k), int(t), bool(e)) for k, t, e in zip(keys, ts, events)]
    df = spark.createDataFrame(rows, "k INT, ts BIGINT, v BOOLEAN").repartition(2)
    df.createOrReplaceTempView("keyed_events")
    return keys, ts, events


@contextlib.contextmanager
def setting(spark, key, value):
    """`key` set to `value` while the block runs, then as it was."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, str(value))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def fallback_threshold(spark, value):
    return setting(spark, THRESHOLD, value)


def table_bytes(spark, value):
    return setting(spark, TABLE_BYTES, value)


def stage_bytes(spark, value):
    return setting(spark, STAGE_BYTES, value)


def final_plan(df):
    """The executed plan's nodes (adaptive query stages opened), after running `df`."""
    df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    if plan.nodeName() == "AdaptiveSparkPlan":
        plan = plan.executedPlan()
    nodes, todo = [], [plan]
    while todo:
        node = todo.pop()
        nodes.append(node)
        if node.nodeName().endswith("QueryStage"):
            todo.append(node.plan())
        children = node.children()
        todo.extend(children.apply(i) for i in range(children.size()))
    return nodes


def aggregates(nodes):
    return sorted(n.nodeName() for n in nodes if "Aggregate" in n.nodeName())


QUERY = f"SELECT k, approx_window_count(v, ts, {WINDOW}, {EPS}) AS n FROM keyed_events GROUP BY k"


def test_sketch_aggregates_run_on_the_heap_sized_operator_and_never_sort(spark, keyed_events):
    nodes = final_plan(spark.sql(QUERY))
    assert aggregates(nodes) == ["SketchHashAggregate", "SketchHashAggregate"]
    for node in nodes:
        if node.nodeName() == "SketchHashAggregate":
            assert node.metrics().get("numTasksFallBacked").get().value() == 0
            assert node.metrics().get("numKeysSorted").get().value() == 0


@pytest.mark.parametrize("query", [
    "SELECT k, approx_window_sum(CAST(v AS INT) * 5, ts, 100) FROM keyed_events GROUP BY k",
    "SELECT k, window_sketch(v, ts, 100) FROM keyed_events GROUP BY k",
    "SELECT k % 3, window_sketch_merge(s) FROM "
    "(SELECT k, window_sketch(v, ts, 100) AS s FROM keyed_events GROUP BY k) GROUP BY k % 3",
    "SELECT approx_window_count(v, ts, 100), approx_window_count_bounds(v, ts, 100) "
    "FROM keyed_events",
    "SELECT k, approx_window_count_distinct(ts % 50, ts, 100) FROM keyed_events GROUP BY k",
    "SELECT k, window_distinct_sketch(ts % 50, ts, 100) FROM keyed_events GROUP BY k",
])
def test_every_bounded_sketch_aggregate_gets_the_operator(spark, keyed_events, query):
    names = aggregates(final_plan(spark.sql(query)))
    assert names and set(names) == {"SketchHashAggregate"}, names


def test_a_threshold_the_user_set_and_unbounded_aggregates_stay_on_sparks_operator(
        spark, keyed_events):
    with fallback_threshold(spark, 128):
        assert set(aggregates(final_plan(spark.sql(QUERY)))) == {"ObjectHashAggregate"}
    mixed = spark.sql(f"SELECT k, approx_window_count(v, ts, {WINDOW}), collect_list(ts) "
                      "FROM keyed_events GROUP BY k")
    assert set(aggregates(final_plan(mixed))) == {"ObjectHashAggregate"}


# A count, and a sum whose weights (0 to 9, NULL for some rows) make the sketch hold more.
SUM_QUERY = (f"SELECT k, approx_window_sum(IF(ts % 11 = 0, NULL, CAST(v AS INT) * (ts % 10)), "
             f"ts, {WINDOW}, {EPS}) AS s FROM keyed_events GROUP BY k")


def sum_weights(ts, events):
    return np.where(ts % 11 == 0, 0, events.astype(np.int64) * (ts % 10))


@pytest.mark.parametrize("stage", [APPLIED_AS_THEY_COME, STAGED])
def test_answers_equal_sparks_sorting_operator_and_the_bound_on_every_key(spark, keyed_events, stage):
    keys, ts, events = keyed_events
    for query, weights in [(QUERY, events.astype(np.int64)), (SUM_QUERY, sum_weights(ts, events))]:
        with stage_bytes(spark, stage):
            ours = dict(spark.sql(query).collect())
        with fallback_threshold(spark, 2):  # Spark's operator, sorting after two keys
            sorted_plan = spark.sql(query)
            nodes = final_plan(sorted_plan)
            assert any(n.nodeName() == "ObjectHashAggregate"
                       and n.metrics().get("numTasksFallBacked").get().value() > 0 for n in nodes)
            theirs = dict(sorted_plan.collect())
        assert ours == theirs
        assert len(ours) == KEYS
        for key, estimate in ours.items():
            own = keys == key
            exact = exact_sum(ts[own], weights[own], WINDOW)
            assert abs(estimate - exact) <= EPS * exact, (query, key, estimate, exact)


@pytest.mark.parametrize("stage", [APPLIED_AS_THEY_COME, STAGED])
def test_past_the_tables_bytes_the_rest_sorts_and_every_key_answers_as_one_sketch(spark, stage):
    """Keys whose buffers hold more heap than the table may: the table's partial results
    come out at the first row past its bytes, the rest of the task sorts on Spark's
    iterator, and each key's partial results merge into what Spark's operator gives
    (sorting past two keys), within eps of the exact count."""
    window, eps = 10**6, 0.001
    n_keys = 3000
    rng = np.random.default_rng(29)
    n = 6 * n_keys
    keys = rng.integers(0, n_keys, n)
    ts = rng.integers(0, 5000, n) * rng.choice([1, 1, 40], n)
    events = rng.random(n) < 0.4
    spark.createDataFrame([(int(k), int(t), bool(e)) for k, t, e in zip(keys, ts, events)],
                          "k INT, ts BIGINT, v BOOLEAN").repartition(2).createOrReplaceTempView("many_keys")
    # Two sketches a key; the second counts every row, so no row can go missing unseen.
    query = (f"SELECT k, approx_window_count(v, ts, {window}, {eps}), "
             f"approx_window_count(ts IS NOT NULL, ts, {window}, {eps}) FROM many_keys GROUP BY k")

    def partial_fallbacks(plan):
        nodes = final_plan(plan)
        (node,) = [n for n in nodes if n.nodeName() == "SketchHashAggregate"
                   and n.metrics().get("numOutputRows").get().value() > len(set(keys.tolist()))]
        return node.metrics().get("numTasksFallBacked").get().value()

    # A key's two sketches hold about 0.6 KB here: 256 KB is a few hundred of ~1,500 keys a task.
    with table_bytes(spark, "256k"), stage_bytes(spark, stage):
        plan = spark.sql(query)
        assert partial_fallbacks(plan) == 2
        ours = {k: (a, b) for k, a, b in plan.collect()}
    assert partial_fallbacks(spark.sql(query)) == 0  # by default the table holds them all
    with fallback_threshold(spark, 2):
        theirs = {k: (a, b) for k, a, b in spark.sql(query).collect()}
    assert ours == theirs
    assert len(ours) == len(set(keys.tolist()))
    for key, estimates in ours.items():
        own = keys == key
        for estimate, counted in zip(estimates, [events[own], np.ones(own.sum(), bool)]):
            exact = exact_in_window(ts[own], counted, window)
            assert abs(estimate - exact) <= eps * exact, (key, estimate, exact)


@pytest.mark.parametrize("value", ["lots", "0", "-5m"])
def test_a_table_size_that_is_not_a_positive_size_is_refused_by_name(spark, keyed_events, value):
    with table_bytes(spark, value), pytest.raises(Exception) as error:
        spark.sql(QUERY).collect()
    assert f"{TABLE_BYTES} must be a positive size such as 256m or 1g, got '{value}'" in str(error.value)


@pytest.mark.parametrize("value", ["lots", "-5m"])
def test_a_stage_size_that_is_not_a_size_is_refused_by_name(spark, keyed_events, value):
    with stage_bytes(spark, value), pytest.raises(Exception) as error:
        spark.sql(QUERY).collect()
    assert f"{STAGE_BYTES} must be a size of 0 or more such as 4m, got '{value}'" in str(error.value)


@pytest.mark.parametrize("stage", [APPLIED_AS_THEY_COME, STAGED])
def test_past_the_tables_keys_every_key_answers_its_exact_count(spark, stage):
    """More keys a task than the table holds (MaxTableKeys), spread over both tasks: the
    rest sorts, and every key's count equals the exact count of its window (a handful of
    rows a key: the sketch is exact), computed by Spark from the rows."""
    from windowsketch import _scala_object

    cap = _scala_object(spark, "org.apache.spark.sql.windowsketch.SketchHashAggregateExec").MaxTableKeys()
    n_keys = int(2.5 * cap)
    spark.range(4 * n_keys, numPartitions=2).selectExpr(
        f"id % {n_keys} AS k", "(id * 7919) % 50000 AS ts", "id % 3 <> 1 AS v") \
        .createOrReplaceTempView("capped_keys")
    window = 20000
    query = f"SELECT k, approx_window_count(v, ts, {window}) FROM capped_keys GROUP BY k"
    with stage_bytes(spark, stage):
        plan = spark.sql(query)
        metrics = partial_node(final_plan(plan), n_keys).metrics()
        assert metrics.get("numTasksFallBacked").get().value() == 2
        # Each task holds every key; the first `cap` stay on its table, the rest sort.
        assert metrics.get("numKeysSorted").get().value() == 2 * (n_keys - cap)
        ours = dict(plan.collect())
    exact = dict(spark.sql(f"""
        SELECT c.k, count_if(v AND ts > now - {window}) FROM capped_keys c
        JOIN (SELECT k, max(ts) AS now FROM capped_keys GROUP BY k) m ON c.k = m.k
        GROUP BY c.k""").collect())
    assert len(ours) == n_keys and ours == exact


def test_null_and_string_keys_group_as_on_sparks_operator(spark, keyed_events):
    """The table compares keys as Spark does: NULL keys form one group, strings of several
    lengths and a second column each part of the key."""
    query = (f"SELECT IF(k % 11 = 0, NULL, repeat('x', k % 13)) AS a, "
             f"IF(k % 5 = 0, NULL, k % 3) AS b, approx_window_count(v, ts, {WINDOW}, {EPS}), "
             f"window_sketch(v, ts, {WINDOW}, {EPS}) FROM keyed_events GROUP BY 1, 2")
    ours = sorted(map(tuple, spark.sql(query).collect()), key=repr)
    with fallback_threshold(spark, 2):
        theirs = sorted(map(tuple, spark.sql(query).collect()), key=repr)
    assert ours == theirs
    assert any(a is None for a, *_ in ours) and any(b is None for _, b, *_ in ours)
    assert len(ours) == 14 * 4  # 13 strings or NULL, times 0, 1, 2 or NULL


def test_fixed_width_keys_kept_inline_group_as_on_sparks_operator(spark, keyed_events):
    """Keys of fixed-width columns are kept as words in the table: NULLs in each column,
    -0.0 beside 0.0 and NaN (Spark groups them as one), a date and a decimal, each a part of
    the key, group as Spark's operator groups them."""
    query = (f"SELECT IF(k % 11 = 0, NULL, k % 13) AS a, "
             f"IF(k % 5 = 0, NULL, IF(k % 3 = 0, -0.0D, IF(k % 3 = 1, 0.0D, CAST('NaN' AS DOUBLE)))) AS b, "
             f"IF(k % 7 = 0, NULL, date_add(DATE'2024-01-01', k % 2)) AS c, CAST(k % 4 AS DECIMAL(9, 2)) AS d, "
             f"approx_window_count(v, ts, {WINDOW}, {EPS}) FROM keyed_events GROUP BY 1, 2, 3, 4")

    def groups(df):  # NaN as text, so that equal rows compare equal
        return sorted(((a, "NaN" if b != b else b, *rest) for a, b, *rest in df.collect()), key=repr)

    ours = groups(spark.sql(query))
    with fallback_threshold(spark, 2):
        theirs = groups(spark.sql(query))
    assert ours == theirs
    assert {b for _, b, *_ in ours} == {None, 0.0, "NaN"}
    assert any(a is None for a, *_ in ours) and any(c is None for _, _, c, *_ in ours)
    assert len(ours) == len({row[:4] for row in ours})


@pytest.mark.parametrize("key_type, first, second", [
    ("BIGINT", 195943271152, 486952300935),  # kept inline in the table
    ("STRING", "k0d752de", "k76753fb"),  # copied rows
])
def test_keys_of_equal_hash_stay_apart_on_the_table(spark, key_type, first, second):
    """Two keys whose rows have the same 32-bit hash (UnsafeRow.hashCode, found by a
    birthday search): the table must compare the keys, not only their hashes."""
    rows = [(first, t, True) for t in range(3)] + [(second, t, t > 0) for t in range(5)]
    spark.createDataFrame(rows, f"k {key_type}, ts BIGINT, v BOOLEAN").repartition(2, "ts") \
        .createOrReplaceTempView("colliding_keys")
    row = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.expressions.UnsafeRow(1)

    def row_hash(key):  # the key's row: 8 bytes of null bits, then the value or its offset and size
        if key_type == "BIGINT":
            data = struct.pack("<qq", 0, key)
        else:
            text = key.encode()
            data = struct.pack("<qq", 0, (16 << 32) | len(text)) + text.ljust(-(-len(text) // 8) * 8, b"\0")
        row.pointTo(bytearray(data), len(data))
        return row.hashCode()

    assert row_hash(first) == row_hash(second)
    plan = spark.sql("SELECT k, approx_window_count(v, ts, 100) FROM colliding_keys GROUP BY k")
    assert dict(plan.collect()) == {first: 3, second: 4}
    partial_node(final_plan(plan), 2)  # rows of both keys met on the map side's table


def test_a_global_aggregate_of_no_rows_still_answers_one_row(spark, keyed_events):
    rows = spark.sql(f"SELECT approx_window_count(v, ts, {WINDOW}) FROM keyed_events "
                     "WHERE k < 0").collect()
    assert [tuple(r) for r in rows] == [(0,)]


def test_the_threshold_is_the_heaps_share_never_below_sparks(spark):
    from windowsketch import _scala_object

    operator = _scala_object(spark, "org.apache.spark.sql.windowsketch.SketchHashAggregateExec")
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
    user_bytes = (runtime.maxMemory() - (300 << 20)) * 0.4 / runtime.availableProcessors()
    assert operator.fallbackThreshold(10_000, 128) == int(user_bytes / 10_000)
    assert operator.fallbackThreshold(1 << 40, 128) == 128
    assert operator.fallbackThreshold(1, 128) == min(int(user_bytes), 2**31 - 1)
    assert operator.userBytesPerTask() == int(user_bytes)


def partial_node(nodes, groups):
    """The map side's SketchHashAggregate: the one with more output rows than groups."""
    (node,) = [n for n in nodes if n.nodeName() == "SketchHashAggregate"
               and n.metrics().get("numOutputRows").get().value() > groups]
    return node


@pytest.mark.parametrize("crowded_keys", [0, 3])
def test_distinct_counts_stay_on_the_table_while_their_rows_stay_buffered(spark, crowded_keys):
    """A distinct-count sketch keeps few rows in a buffer, and the map side's table holds
    such keys; the first sketch whose window holds more rows than its buffer settles into
    registers and ends the table, and the rest of the task sorts. Either way every key's
    answer is approx_count_distinct over its window's rows, as on Spark's operator."""
    rng = np.random.default_rng(31)
    n_keys, window = 600, 1000
    rows = []
    for k in range(n_keys):
        crowded = k < crowded_keys  # about 300 distinct values inside the window
        n = 400 if crowded else int(rng.integers(1, 30))
        ts = np.sort(rng.integers(0, 3000 if not crowded else window, n))
        values = rng.integers(0, 10**6 if crowded else 20, n)
        rows += [(k, int(t), int(x)) for t, x in zip(ts, values)]
    rng.shuffle(rows)
    spark.createDataFrame(rows, "k INT, ts BIGINT, x BIGINT").repartition(2) \
        .createOrReplaceTempView("distinct_keys")
    query = f"SELECT k, approx_window_count_distinct(x, ts, {window}) FROM distinct_keys GROUP BY k"
    plan = spark.sql(query)
    fallbacks = partial_node(final_plan(plan), n_keys).metrics().get("numTasksFallBacked").get()
    assert (fallbacks.value() > 0) == (crowded_keys > 0)
    ours = dict(plan.collect())
    with fallback_threshold(spark, 2):
        assert dict(spark.sql(query).collect()) == ours
    exact = dict(spark.sql(f"""
        SELECT d.k, approx_count_distinct(x) FROM distinct_keys d
        JOIN (SELECT k, max(ts) AS now FROM distinct_keys GROUP BY k) m ON d.k = m.k
        WHERE ts > now - {window} GROUP BY d.k""").collect())
    assert ours == exact and len(ours) == n_keys


@pytest.mark.parametrize("ts", ["7", "id"])
def test_keys_from_one_partition_answer_within_every_familys_bound(spark, ts):
    """Each key's rows in one map partition, so the final side merges one partial into a
    fresh buffer (where a distinct count once kept stale sums), with every row at one time
    and in time order: every family against the exact answer over the key's rows."""
    everything = 10**9
    spark.sql(f"""
        SELECT id DIV 5000 AS k, {ts} AS ts, id % 10 < 3 AS v, id % 1000 AS b,
               CAST((id * 2654435761) % 100003 AS DOUBLE) AS x,
               CAST(floor(pow(((id * 2654435761) % 100003) / 100003.0, 4) * 50) AS INT) AS u,
               (id * 7919) % 3000 AS w
        FROM range(0, 40000, 1, 4)""").createOrReplaceTempView("one_partition_keys")
    rows = spark.sql(f"""
        SELECT k, approx_window_count(v, ts, {everything}) AS c, count_if(v) AS exact_c,
               approx_window_sum(b, ts, {everything}) AS s, sum(b) AS exact_s,
               approx_window_count_distinct(w, ts, {everything}) AS d,
               approx_count_distinct(w) AS spark_d,
               approx_window_percentile(x, ts, {everything}, 0.9) AS p,
               approx_window_stddev(x, ts, {everything}) AS sd, stddev(x) AS exact_sd,
               approx_window_avg(x, ts, {everything}) AS av, avg(x) AS exact_av,
               stddev_pop(x) AS sigma, approx_window_top_k(u, ts, {everything}, 3) AS top,
               collect_list(x) AS xs, collect_list(u) AS us
        FROM one_partition_keys GROUP BY k""").collect()
    assert len(rows) == 8
    eps = 0.01
    for r in rows:
        assert abs(r.c - r.exact_c) <= eps * r.exact_c and abs(r.s - r.exact_s) <= eps * r.exact_s
        assert r.d == r.spark_d
        xs = np.array(r.xs)
        n = len(xs)
        assert np.sum(xs < r.p) <= np.ceil((0.9 + eps) * n)
        assert np.sum(xs <= r.p) >= np.floor((0.9 - eps) * n)
        assert abs(r.sd - r.exact_sd) <= eps / 2 * r.exact_sd
        assert abs(r.av - r.exact_av) <= eps * r.sigma
        counts = np.bincount(np.array(r.us))
        assert [t.item for t in r.top] == list(np.argsort(-counts, kind="stable")[:3])
        assert all(t.lower <= counts[t.item] <= t.upper for t in r.top)
