"""Which partition a produced record goes to, the way Kafka's Java producer decides.

Keyed records use the default partitioner of the Java client (and of Confluent REST
Proxy, which embeds it)::

    partition = to_positive(murmur2(key)) % num_partitions

so a key lands on the same partition whether it was produced through franz or through
a Java client, and co-partitioned topics stay co-partitioned.

``murmur2`` is ``org.apache.kafka.common.utils.Utils.murmur2``: MurmurHash2, 32 bits,
seed ``0x9747b28c``, ``m = 0x5bd1e995``, ``r = 24``, over the key read as little-endian
4-byte words, then the 1-3 tail bytes, then the final avalanche; Java's signed 32-bit
int is the result. It is *not* MurmurHash3, so the ``mmh3`` package (a C murmur3) cannot
stand in for it. The C extension ``core.storage._native`` computes it (and groups a whole
request's keys by partition in one pass: ``key_partitions``); the pure-Python ``murmur2``
here is the fallback without a C compiler, tested equal to it and to Kafka's values.
aiokafka ships a ``murmur2`` too (``aiokafka.partitioner``), in pure Python per key:
partitioning 1000 keys through it took 1416 us on the test machine, the C pass (which
also groups the records by partition) 28 us.

Records without a key: the Java client (2.4+, KIP-480) sticks to one partition per
batch and switches when the batch is sent. A REST request is the natural batch here, so
:class:`UnkeyedPartitioner` gives each produce request one partition and rotates,
per topic, between requests.
"""

from __future__ import annotations

import itertools
import random
import struct
from collections.abc import Iterator, Sequence

from core.storage import native

__all__ = ["UnkeyedPartitioner", "key_partitions", "murmur2", "partition_for_key", "to_positive"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF
_SIGN32 = 0x80000000
_WRAP32 = 0x100000000

# One precompiled little-endian unsigned-word Struct per word count for keys up to
# 256 bytes (nearly all keys); longer keys build the format on the fly, which the
# struct module caches as well.
_MAX_CACHED_WORDS = 64
_WORD_STRUCTS = tuple(struct.Struct(f"<{n}I") for n in range(_MAX_CACHED_WORDS + 1))


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of ``data`` as a signed 32-bit int.

    Arithmetic is done on unsigned 32-bit values (mask after each multiply); the
    result is mapped to Java's signed range at the end. ``(h*m) ^ (k*m)`` is masked
    once because masking distributes over XOR.
    """
    m = _M
    mask = _MASK32
    length = len(data)
    h = _SEED ^ length
    words = length >> 2
    if words <= _MAX_CACHED_WORDS:
        unpacked = _WORD_STRUCTS[words].unpack_from(data)
    else:
        unpacked = struct.unpack_from(f"<{words}I", data)
    for k in unpacked:
        k = (k * m) & mask
        k ^= k >> 24
        h = ((h * m) ^ (k * m)) & mask
    tail = length & 3
    if tail:
        # Java's fall-through switch XORs the tail bytes in at shifts 16, 8, 0: the
        # same as XOR-ing the tail read as a little-endian integer.
        h ^= int.from_bytes(data[length - tail :], "little")
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - _WRAP32 if h & _SIGN32 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``; -2^31 maps to 0)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java producer's default partitioner picks for ``key``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = native.murmur2(key) if type(key) is bytes else None
    return to_positive(murmur2(key) if h is None else h) % num_partitions


def key_partitions(keys: Sequence[bytes | None], num_partitions: int) -> dict[int, list[int]]:
    """``partition_for_key`` over a column: partition -> indexes of its records in
    order, null keys under -1. One pass in C when the extension is built."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    if type(keys) is list:
        try:
            out = native.key_partitions(keys, num_partitions)
        except TypeError:  # not all bytes: the Python path below decides
            out = None
        if out is not None:
            return out
    out = {}
    for i, key in enumerate(keys):
        p = -1 if key is None else partition_for_key(key, num_partitions)
        idxs = out.get(p)
        if idxs is None:
            out[p] = [i]
        else:
            idxs.append(i)
    return out


class UnkeyedPartitioner:
    """Chooses the partition for the records without a key of one produce request.

    Choice: one partition per request (all unkeyed records of a request go together,
    as one batch, like the sticky partitioner's batch), rotating round-robin per topic
    from one request to the next. Each topic's rotation starts at a random position
    unless ``first`` is given, so brokers and restarts do not all begin on partition 0.
    The counter is taken modulo the partition count at each call, so a topic that gains
    partitions starts using them at once.

    One instance per broker, called from the event loop; ``next()`` on an
    ``itertools.count`` is atomic under the GIL, so threads may share it too.
    """

    def __init__(self, *, first: int | None = None, rng: random.Random | None = None) -> None:
        self._first = first
        self._rng = rng if rng is not None else random.Random()
        self._counters: dict[str, Iterator[int]] = {}

    def next_partition(self, topic: str, num_partitions: int) -> int:
        """The partition for the next produce request to ``topic``; advances the rotation."""
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters.setdefault(topic, itertools.count(self._start()))
        return next(counter) % num_partitions

    def _start(self) -> int:
        return self._first if self._first is not None else self._rng.randrange(_SIGN32)
