"""The byte layout of docs/format.md as fields, for tests that damage a sketch's structure
and sign it again with a valid CRC-32, so that the checks behind the checksum are what
must catch it."""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

HISTOGRAM, DYADIC = 1, 2


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def sign(body: bytes) -> bytes:
    """`body` followed by its CRC-32 (the same as java.util.zip.CRC32), big-endian."""
    return body + struct.pack(">I", zlib.crc32(body))


@dataclass
class Layout:
    kind: int
    window: int
    eps: float
    flags: int
    now: int
    magic: int = 0x57
    version: int = 1
    # kind 1: buckets per level, then per bucket (step back to its newest, newest-oldest span)
    sizes: list[int] = field(default_factory=list)
    buckets: list[tuple[int, int]] = field(default_factory=list)
    # kind 2: invariant eps', then per node (level, step, count)
    invariant: float = 0.0
    nodes: list[tuple[int, int, int]] = field(default_factory=list)
    trailing: bytes = b""
    node_count: int | None = None  # the stored count, when it should lie

    @classmethod
    def decode(cls, data: bytes) -> "Layout":
        kind = data[2]
        window, pos = read_varint(data, 3)
        (eps,) = struct.unpack(">d", data[pos:pos + 8])
        flags = data[pos + 8]
        (now,) = struct.unpack(">q", data[pos + 9:pos + 17])
        pos += 17
        out = cls(kind, window, eps, flags, now, magic=data[0], version=data[1])
        if kind == HISTOGRAM:
            levels, pos = read_varint(data, pos)
            for _ in range(levels):
                size, pos = read_varint(data, pos)
                out.sizes.append(size)
            for _ in range(sum(out.sizes)):
                step, pos = read_varint(data, pos)
                span, pos = read_varint(data, pos)
                out.buckets.append((step, span))
        else:
            (out.invariant,) = struct.unpack(">d", data[pos:pos + 8])
            n, pos = read_varint(data, pos + 8)
            for _ in range(n):
                level = data[pos]
                step, pos = read_varint(data, pos + 1)
                count, pos = read_varint(data, pos)
                out.nodes.append((level, step, count))
        assert pos == len(data) - 4, "decode expects a valid sketch"
        return out

    def encode(self) -> bytes:
        body = bytearray([self.magic, self.version, self.kind])
        body += varint(self.window) + struct.pack(">d", self.eps)
        body += bytes([self.flags]) + struct.pack(">q", self.now)
        if self.kind == HISTOGRAM:
            body += varint(len(self.sizes)) + b"".join(varint(s) for s in self.sizes)
            for step, span in self.buckets:
                body += varint(step) + varint(span)
        else:
            body += struct.pack(">d", self.invariant)
            body += varint(len(self.nodes) if self.node_count is None else self.node_count)
            for level, step, count in self.nodes:
                body += bytes([level]) + varint(step) + varint(count)
        return sign(bytes(body) + self.trailing)


def one_bit_flips(rng, body: bytes) -> list[bytes]:
    """Signed copies of `body`, each with one random bit of one byte flipped, for every byte
    after the first two (the magic and version)."""
    damaged = []
    for at in range(2, len(body)):
        bad = bytearray(body)
        bad[at] ^= 1 << int(rng.integers(0, 8))
        damaged.append(sign(bytes(bad)))
    return damaged


def damaged_variants(rng, data: bytes, each: int = 100):
    """Bodies (sign them) of damaged copies of a real sketch: `2 * each` bit flips and as
    many overwritten bytes, every truncation (when `each` >= 100), `each` inflated varints,
    swapped byte runs and, for the mergeable kind, swapped nodes."""
    body = data[:-4]
    layout = Layout.decode(data)
    for _ in range(2 * each):
        damaged = bytearray(body)
        for bit in rng.choice(8 * len(body), size=int(rng.integers(1, 4)), replace=False):
            damaged[bit // 8] ^= 1 << (bit % 8)
        yield "flip", damaged
    for _ in range(2 * each):
        damaged = bytearray(body)
        at = int(rng.integers(3, len(body)))
        n = len(damaged[at:at + int(rng.integers(1, 5))])
        damaged[at:at + n] = rng.integers(0, 256, n).astype(np.uint8).tobytes()
        yield "overwrite", damaged
    for n in range(len(body)) if each >= 100 else rng.integers(0, len(body), each):
        yield "truncate", body[:n]
    for _ in range(each):  # a byte turned into a long run of continuation bytes
        at = int(rng.integers(3, len(body)))
        yield "inflate", body[:at] + bytes([body[at] | 0x80]) + b"\xff" * int(
            rng.integers(1, 12)) + body[at + 1:]
    for _ in range(each):
        a, b = sorted(rng.choice(np.arange(3, len(body)), size=2, replace=False))
        n = int(rng.integers(1, min(8, b - a) + 1))
        yield "swap bytes", body[:a] + body[b:b + n] + body[a + n:b] + body[a:a + n] + body[b + n:]
    if layout.kind != HISTOGRAM:
        for _ in range(each):
            swapped = Layout.decode(data)
            i, j = rng.choice(len(swapped.nodes), size=2, replace=False)
            swapped.nodes[i], swapped.nodes[j] = swapped.nodes[j], swapped.nodes[i]
            yield "swap nodes", swapped.encode()[:-4]


def compact_quantile_values(data: bytes) -> list[list[tuple[int, int, int]]]:
    """Where a kind-8 (compact percentile) sketch keeps its values: per node, per level,
    (offset of its first value, its value count, offset of the node's row total)."""
    assert data[2] == 8, "a compact percentile sketch"
    _, pos = read_varint(data, 3)
    nodes_count, pos = read_varint(data, pos + 17)
    nodes = []
    for _ in range(nodes_count):
        _, pos = read_varint(data, pos + 1)  # the level byte, then the step back
        total_at = pos
        _, pos = read_varint(data, pos)
        levels_count, pos = read_varint(data, pos)
        levels = []
        for _ in range(levels_count):
            _, pos = read_varint(data, pos)  # the level's compactions
            size, pos = read_varint(data, pos)
            levels.append((pos, size, total_at))
            pos += 8 * size
        nodes.append(levels)
    assert pos == len(data) - 4, "decode expects a valid sketch"
    return nodes
