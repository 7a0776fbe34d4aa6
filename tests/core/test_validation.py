"""The checks behind the checksum. Every damaged sketch here carries a valid CRC-32, so the
structural checks of docs/format.md ("Validation on read") are all that stands between bad
bytes and a wrong count: each named check has a case that only it catches, and a fuzz test
requires any damage to end in CorruptSketchException or in a sketch whose answers are
consistent, never another exception."""
from __future__ import annotations

import numpy as np
import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from sketch_layout import Layout, damaged_variants, sign

CORRUPT = "windowsketch.core.CorruptSketchException"
WINDOW = 1000


def histogram_bytes(sketches) -> bytes:
    h = sketches.new(WINDOW, 0.1)
    ts = np.arange(3000)
    sketches.replay.insertAll(h, ts.astype(">i8").tobytes(), np.ones(3000, np.uint8).tobytes())
    return bytes(sketches.format.serialize(h))


def dyadic_bytes(sketches) -> bytes:
    rng = np.random.default_rng(41)
    ts = rng.permutation(np.arange(0, 6000, 2))
    events = rng.random(len(ts)) < 0.4
    return bytes(sketches.format.serialize(sketches.dyadic(WINDOW, 0.1, ts, events)))


def read(sketches, data: bytes):
    """("ok", answers) or ("corrupt", message); any other exception fails the test."""
    try:
        sketch = sketches.format.deserialize(data)
    except (Py4JJavaError, CapturedException) as e:
        # pyspark converts some JVM exceptions on the way out; the JVM object is kept
        thrown = e.java_exception if isinstance(e, Py4JJavaError) else e._origin
        name = thrown.getClass().getName()
        if name == CORRUPT:
            return "corrupt", str(thrown.getMessage())
        raise AssertionError(f"{name}: {thrown.getMessage()}") from None
    return "ok", sketch


def assert_consistent(sketches, sketch) -> None:
    """What a sketch that passed validation must do: bounds that order, a byte round trip,
    and, for the mergeable kind, sub-window queries and a merge."""
    est, lower, upper = sketch.estimate(), sketch.lowerBound(), sketch.upperBound()
    assert 0 <= lower <= est <= upper, (est, lower, upper)
    again = sketches.format.serialize(sketch)
    assert bytes(sketches.format.serialize(sketches.format.deserialize(again))) == bytes(again)
    if sketch.getClass().getSimpleName() == "DyadicWindowSketch":
        window = sketch.window()  # damage may have changed it and still be valid
        for e, lo, up in sketches.sub_windows(sketch, sketch.now(), [1, window // 3, window]):
            assert 0 <= lo <= e <= up
        merged = sketches.dyadic(window, sketch.eps())
        getattr(merged, "microsecondTime_$eq")(sketch.microsecondTime())
        merged.merge(sketch)
        assert merged.lowerBound() <= merged.estimate() <= merged.upperBound()


def histogram_merge_at(layout: Layout) -> int:
    return (int(np.ceil(1 / layout.eps)) + 1) // 2 + 2


def first_internal(layout: Layout) -> int:
    return next(i for i, (level, _, _) in enumerate(layout.nodes) if level > 0)


def starts(layout: Layout) -> list[int]:
    """Each node's `lo`: the first a step back from now, the others steps forward."""
    out = []
    for i, (_, step, _) in enumerate(layout.nodes):
        out.append(layout.now - step if i == 0 else out[-1] + step)
    return out


def shift_lo(layout: Layout, i: int, by: int) -> None:
    """Moves node i's start by `by` and keeps every later node where it was."""
    level, step, count = layout.nodes[i]
    layout.nodes[i] = (level, step - by if i == 0 else step + by, count)
    if i + 1 < len(layout.nodes):
        nl, ns, nc = layout.nodes[i + 1]
        layout.nodes[i + 1] = (nl, ns - by, nc)


def _histogram_cases():
    def more_levels_than_62(h): h.sizes += [1] * 61
    def levels_without_time(h): h.flags &= ~1
    def short_lower_level(h): h.sizes[0] = histogram_merge_at(h) - 3
    def full_top_level(h): h.sizes[-1] = histogram_merge_at(h)
    def single_event_spanning_time(h): h.buckets[0] = (h.buckets[0][0], 1)
    def bucket_outside_window(h): h.buckets[-1] = (h.buckets[-1][0] + WINDOW, h.buckets[-1][1])
    def step_past_the_start_of_time(h): h.buckets[0] = (2**64 - 1, 0)
    return [
        (more_levels_than_62, "invalid level count"),
        (levels_without_time, "invalid level count"),
        (short_lower_level, "invalid bucket count"),
        (full_top_level, "invalid bucket count"),
        (single_event_spanning_time, "single-event bucket spans more than one timestamp"),
        (bucket_outside_window, "a bucket lies outside the window"),
        (step_past_the_start_of_time, "timestamps out of range"),
    ]


def _dyadic_cases():
    def invariant_below_2_eps(d): d.invariant = d.eps
    def huge_node_count(d): d.node_count = 2**40
    def nodes_without_time(d): d.flags &= ~1
    def level_above_the_root(d):  # aligned to its level, so only the height check sees it
        shift_lo(d, 0, -(starts(d)[0] % 2048))
        d.nodes[0] = (11, *d.nodes[0][1:])
    def misaligned_node(d): shift_lo(d, first_internal(d), 1)
    def duplicate_node(d): d.nodes.insert(1, (d.nodes[0][0], 0, 1))
    def zero_count(d): d.nodes[-1] = (*d.nodes[-1][:2], 0)
    def node_before_the_window(d): shift_lo(d, 0, -4096)
    def node_after_now(d): d.nodes.append((0, d.now + 5 - starts(d)[-1], 1))
    def invariant_broken(d):
        i = first_internal(d)
        d.nodes[i] = (*d.nodes[i][:2], d.nodes[i][2] * 1000)
    return [
        (invariant_below_2_eps, "invalid invariant parameter"),
        (huge_node_count, "invalid node count"),
        (nodes_without_time, "invalid node count"),
        (level_above_the_root, "invalid node at position 0"),
        (misaligned_node, "invalid node at position"),
        (duplicate_node, "nodes out of order"),
        (zero_count, "invalid count at position"),
        (node_before_the_window, "lies outside the window"),
        (node_after_now, "lies outside the window"),
        (invariant_broken, "invariant broken at node"),
    ]


def _either_kind_cases():
    def trailing_byte(s): s.trailing = b"\x00"
    def zero_window(s): s.window = 0
    def eps_out_of_range(s): s.eps = 1.0
    def unknown_flag(s): s.flags |= 4
    def unknown_kind(s): s.kind = 99
    return [
        (trailing_byte, "trailing bytes after the sketch"),
        (zero_window, "invalid parameters"),
        (eps_out_of_range, "invalid parameters"),
        (unknown_flag, "unknown flags"),
        (unknown_kind, "unknown sketch kind 99"),
    ]


CASES = ([("histogram", f, m) for f, m in _histogram_cases() + _either_kind_cases()]
         + [("dyadic", f, m) for f, m in _dyadic_cases() + _either_kind_cases()])


@pytest.fixture(scope="module")
def real(sketches):
    return {"histogram": histogram_bytes(sketches), "dyadic": dyadic_bytes(sketches)}


def test_real_sketches_read_back(sketches, real):
    for data in real.values():
        kind, sketch = read(sketches, data)
        assert kind == "ok" and sketch.estimate() > 0
        assert Layout.decode(data).encode() == data  # the test's layout is the format's


@pytest.mark.parametrize("kind, damage, message", CASES,
                         ids=[f"{k}-{f.__name__}" for k, f, _ in CASES])
def test_each_structural_check_catches_its_damage(sketches, real, kind, damage, message):
    layout = Layout.decode(real[kind])
    damage(layout)
    outcome, detail = read(sketches, layout.encode())
    assert outcome == "corrupt", f"{damage.__name__} was read as a sketch"
    assert message in detail and detail.startswith("invalid sketch bytes: "), detail


@pytest.mark.parametrize("kind", ["histogram", "dyadic"])
def test_any_damage_is_rejected_or_reads_as_a_consistent_sketch(sketches, real, kind):
    rng = np.random.default_rng(1313 if kind == "histogram" else 1414)
    outcomes: dict[str, list[int]] = {}
    variants = [(how, sign(bytes(body))) for how, body in damaged_variants(rng, real[kind])]
    verdicts = sketches.verdicts("count", [data for _, data in variants])
    for (how, data), verdict in zip(variants, verdicts):
        if verdict == "read":
            outcome, sketch = read(sketches, data)
            assert outcome == "ok"
            assert_consistent(sketches, sketch)
        else:
            assert verdict.startswith("invalid sketch bytes: "), verdict
        tally = outcomes.setdefault(how, [0, 0])
        tally[verdict != "read"] += 1
    print(f"\n{kind}: (read, rejected) per damage: {outcomes}")
    # The structure does catch most damage on its own: every truncation, most flips.
    assert outcomes["truncate"][0] == 0
    assert outcomes["flip"][1] > outcomes["flip"][0]
