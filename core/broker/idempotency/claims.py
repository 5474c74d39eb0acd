"""The records of ``__franz_idempotency`` and the in-memory entry each key gets.

Record key: the scoped key (the principal, a NUL, the client's Idempotency-Key). Value:
one JSON line, then (``done`` only) the encoded results (``results_codec``)::

    {"t": "claim", "fp": <hex fingerprint>, "pc": <partition count>, "now": <ms>,
     "at": <created ms>}
    {"t": "done", "fp": ..., "pc": ..., "now": ..., "at": ..., "claim": <claim offset>}
    <results>

A claim's producer id is made from where the claim was written, unique in the cluster
and never taken from the broker's own blocks (``producer_id_of``): its data batches
carry that producer id, epoch 0 and sequence 0 on every partition, so whichever broker
sends them again (a retry resuming a claim whose broker died) is answered by the
partition's producer state with the original offsets. The ``done`` record repeats
everything so that compaction may drop the claim.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

CLAIM = "claim"
DONE = "done"
#: Producer ids of claims: 2^62 + (partition << 40) + claim offset. The broker's own
#: producer ids come in blocks of 1000 from 0 and never get near it.
CLAIM_PRODUCER_ID_BASE = 1 << 62
_OFFSET_BITS = 40
MAX_PARTITIONS = 1 << 20


def producer_id_of(partition: int, claim_offset: int) -> int:
    if not 0 <= partition < MAX_PARTITIONS or not 0 <= claim_offset < (1 << _OFFSET_BITS):
        raise ValueError(f"no claim producer id for partition {partition} offset {claim_offset}")
    return CLAIM_PRODUCER_ID_BASE + (partition << _OFFSET_BITS) + claim_offset


@dataclass(slots=True)
class KeyEntry:
    """What the coordinator knows of one key: its request's fingerprint, the claim (its
    offset; -1 while being written), the ``done`` record's offset (-1 while the request
    is unfinished), and the claim's partition count and clock ("now" of its records).
    ``busy_until``: until when a request is taken to be working on it (memory only)."""

    fingerprint: bytes
    created_ms: int
    partition_count: int
    now_ms: int
    claim_offset: int = -1
    done_offset: int = -1
    busy_until: int = 0


def claim_value(entry: KeyEntry) -> bytes:
    return orjson.dumps({"t": CLAIM, "fp": entry.fingerprint.hex(), "pc": entry.partition_count,
                         "now": entry.now_ms, "at": entry.created_ms})


def done_value(entry: KeyEntry, results: bytes) -> bytes:
    head = orjson.dumps({"t": DONE, "fp": entry.fingerprint.hex(),
                         "pc": entry.partition_count, "now": entry.now_ms,
                         "at": entry.created_ms, "claim": entry.claim_offset})
    return head + b"\n" + results


def parse_value(value: bytes, offset: int) -> tuple[str, KeyEntry, bytes]:
    """(kind, entry as of this record, results of a ``done``); ValueError if malformed."""
    head, _, results = value.partition(b"\n")
    try:
        doc = orjson.loads(head)
        kind = doc["t"]
        entry = KeyEntry(bytes.fromhex(doc["fp"]), int(doc["at"]), int(doc["pc"]),
                         int(doc["now"]))
        if kind == CLAIM:
            entry.claim_offset = offset
        elif kind == DONE:
            entry.claim_offset = int(doc["claim"])
            entry.done_offset = offset
        else:
            raise ValueError(f"unknown record kind {kind!r}")
    except (KeyError, TypeError, orjson.JSONDecodeError) as exc:
        raise ValueError(f"malformed idempotency record at offset {offset}: {exc}") from None
    return kind, entry, results
