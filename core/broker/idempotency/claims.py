"""The records of ``__franz_idempotency`` and the in-memory entry each key gets.

Record key: the scoped key (the principal, a NUL, the client's Idempotency-Key). Value:
one JSON line, then (``done`` only) the encoded results (``results_codec``)::

    {"t": "claim", "fp": <hex fingerprint>, "pc": <partition count>, "now": <ms>,
     "at": <created ms>, "pid": <producer id>, "ep": <producer epoch>}
    {"t": "done", ...the same...}
    <results>

A key's producer id is made from the key itself (``producer_id_for``: 2^62 + the
coordinator partition << 52 + 52 bits of the key's BLAKE2b, the next free value when
another live key of the partition has it), so it is unique among live keys, never one of
the brokers' own (blocks of 1000 from 0), and the same whenever the key is claimed
again, also by a coordinator that never saw the first claim; its producer epoch is the
number of the retention window the claim falls in (``producer_epoch_for``), so a key
used again after it expired starts afresh. The request's data batches carry both and
sequence 0 on every partition, so whichever broker sends them
again (a retry resuming an unfinished request) is answered by each partition's producer
state with the original offsets. The ``done`` record repeats everything, so compaction
may drop the claim.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container
from dataclasses import dataclass

import orjson

CLAIM = "claim"
DONE = "done"
#: Producer ids of claims: 2^62 + (partition << 40) + claim offset. The broker's own
#: producer ids come in blocks of 1000 from 0 and never get near it.
#: Producer ids of Idempotency-Keys: 2^62 + (partition << 52) + 52 bits of the key's
#: hash. The brokers' own producer ids come in blocks of 1000 from 0, far below.
CLAIM_PRODUCER_ID_BASE = 1 << 62
_HASH_BITS = 52
_HASH_MASK = (1 << _HASH_BITS) - 1
MAX_PARTITIONS = 1 << 10
MAX_EPOCH = 32767


def producer_epoch_for(created_ms: int, retention_ms: int) -> int:
    """The producer epoch of a key claimed at ``created_ms``: the number of the
    ``retention_ms`` window it falls in (mod 2^15). A key claimed again after it expired
    (``retention_ms`` later at least) gets the next epoch, so the partitions' producer
    state, which may still hold the first request's batches under the same producer id,
    takes the new request's batches as new (a higher epoch from sequence 0) instead of
    as duplicates of the old ones."""
    return (created_ms // max(1, retention_ms)) % (MAX_EPOCH + 1)


def producer_id_for(partition: int, key: bytes, taken: Container[int] = ()) -> int:
    """The producer id of ``key`` in coordinator partition ``partition``: from the key's
    hash, moved on to the next value not in ``taken`` (other live keys' ids)."""
    if not 0 <= partition < MAX_PARTITIONS:
        raise ValueError(f"no producer id for idempotency partition {partition}")
    h = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") & _HASH_MASK
    base = CLAIM_PRODUCER_ID_BASE + (partition << _HASH_BITS)
    while base + h in taken:
        h = (h + 1) & _HASH_MASK
    return base + h


@dataclass(slots=True)
class KeyEntry:
    """What the coordinator knows of one key: its request's fingerprint, when it was
    claimed, the claim's partition count and clock ("now" of its records), its producer
    id, and the ``done`` record's offset (-1 while the request is unfinished or its
    record is not written yet).
    ``busy_until``: until when a request is taken to be working on it; ``results``: the
    answer of a finished request whose ``done`` record is not written yet (memory
    only, both)."""

    fingerprint: bytes
    created_ms: int
    partition_count: int
    now_ms: int
    producer_id: int
    producer_epoch: int
    done_offset: int = -1
    busy_until: int = 0
    results: bytes | None = None


def _head(kind: str, entry: KeyEntry) -> bytes:
    return orjson.dumps({"t": kind, "fp": entry.fingerprint.hex(), "pc": entry.partition_count,
                         "now": entry.now_ms, "at": entry.created_ms,
                         "pid": entry.producer_id, "ep": entry.producer_epoch})


def claim_value(entry: KeyEntry) -> bytes:
    return _head(CLAIM, entry)


def done_value(entry: KeyEntry, results: bytes) -> bytes:
    return _head(DONE, entry) + b"\n" + results


def parse_value(value: bytes, offset: int) -> tuple[str, KeyEntry, bytes]:
    """(kind, entry as of this record, results of a ``done``); ValueError if malformed."""
    head, _, results = value.partition(b"\n")
    try:
        doc = orjson.loads(head)
        kind = doc["t"]
        entry = KeyEntry(bytes.fromhex(doc["fp"]), int(doc["at"]), int(doc["pc"]),
                         int(doc["now"]), int(doc["pid"]), int(doc["ep"]))
        if kind == DONE:
            entry.done_offset = offset
        elif kind != CLAIM:
            raise ValueError(f"unknown record kind {kind!r}")
    except (KeyError, TypeError, orjson.JSONDecodeError) as exc:
        raise ValueError(f"malformed idempotency record at offset {offset}: {exc}") from None
    return kind, entry, results
