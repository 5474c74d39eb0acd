"""Many producers at once against one 3-partition topic, over real HTTP.

Every acknowledged (partition, offset) is unique, their number equals the records
sent, and reading the partitions back (the range read, and a consumer instance that
reads while the producers write) finds exactly those records with the values that
were sent, none lost, none extra. Records of one key stay in send order.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from typing import Any

import httpx
import pytest

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"

PRODUCERS = 50
REQUESTS = 20
RECORDS = 10
TOTAL = PRODUCERS * REQUESTS * RECORDS
DEADLINE_S = 60.0

Position = tuple[int, int]  # (partition, offset)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


async def _producer(
    url: str, topic: str, n: int, acked: dict[Position, str], order: dict[str, list[Position]]
) -> int:
    """Producer ``n``: ``REQUESTS`` sequential requests of ``RECORDS`` records. Even
    producers give every record the key ``p<n>`` (one partition, send order kept), odd
    ones no key (spread by the broker). Returns the number of records acknowledged."""
    key = b64(f"p{n}") if n % 2 == 0 else None
    sent = 0
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        for r in range(REQUESTS):
            values = [f"{n}-{r}-{i}" for i in range(RECORDS)]
            records = [
                {"value": b64(v)} if key is None else {"key": key, "value": b64(v)} for v in values
            ]
            resp = await http.post(
                f"/topics/{topic}", json={"records": records}, headers={"Content-Type": BINARY}
            )
            assert resp.status_code == 200, resp.text
            offsets = resp.json()["offsets"]
            assert len(offsets) == RECORDS
            for value, o in zip(values, offsets, strict=True):
                assert o["error_code"] is None, o
                pos = (o["partition"], o["offset"])
                assert pos not in acked, f"{pos} acknowledged twice: {acked[pos]!r}, {value!r}"
                acked[pos] = value
                if key is not None:
                    order.setdefault(key, []).append(pos)
                sent += 1
    return sent


async def _read_partition(http: httpx.AsyncClient, topic: str, partition: int) -> list[Any]:
    out: list[Any] = []
    offset = 0
    while True:
        resp = await http.get(
            f"/topics/{topic}/partitions/{partition}/records",
            params={"offset": offset, "max_bytes": 64 * 1024},
            headers={"Accept": BINARY},
        )
        assert resp.status_code == 200, resp.text
        out += resp.json()
        offset = int(resp.headers["X-Franz-Next-Offset"])
        if offset >= int(resp.headers["X-Franz-High-Watermark"]):
            return out


async def _consume(
    http: httpx.AsyncClient, base: str, done: asyncio.Event, seen: list[tuple[int, int, str]]
) -> None:
    """Read with a consumer instance while the producers write, then drain."""
    idle_after_done = 0
    while idle_after_done < 2:
        resp = await http.get(
            base + "/records", headers={"Accept": BINARY}, params={"timeout": 500}
        )
        assert resp.status_code == 200, resp.text
        rows = resp.json()
        seen += [(r["partition"], r["offset"], base64.b64decode(r["value"]).decode()) for r in rows]
        if done.is_set() and not rows:
            idle_after_done += 1


async def _run(url: str, topic: str, group: str) -> None:
    acked: dict[Position, str] = {}
    order: dict[str, list[Position]] = {}
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        # the topic exists before anyone writes; the consumer is in place
        resp = await http.get(f"/topics/{topic}/partitions/0/offsets")
        assert resp.status_code == 404  # fresh name
        created = await http.post(
            f"/consumers/{group}",
            json={"name": "reader", "auto.offset.reset": "earliest"},
            headers={"Content-Type": V2},
        )
        assert created.status_code == 200, created.text
        base = created.json()["base_uri"]
        first = await http.post(
            f"/topics/{topic}/partitions/0",
            json={"records": [{"value": b64("first")}]},
            headers={"Content-Type": BINARY},
        )
        assert first.status_code == 200
        acked[(0, 0)] = "first"
        resp = await http.post(
            base + "/subscription", json={"topics": [topic]}, headers={"Content-Type": V2}
        )
        assert resp.status_code == 204, resp.text

        done = asyncio.Event()
        seen: list[tuple[int, int, str]] = []
        reader = asyncio.create_task(_consume(http, base, done, seen))
        start = time.monotonic()
        counts = await asyncio.gather(
            *(_producer(url, topic, n, acked, order) for n in range(PRODUCERS))
        )
        produce_s = time.monotonic() - start
        done.set()
        await asyncio.wait_for(reader, 30)

        assert sum(counts) == TOTAL, counts
        assert len(acked) == TOTAL + 1  # + "first"; keys of a dict: all unique

        # the log holds exactly the acknowledged records, offsets dense from 0
        in_log: dict[Position, str] = {}
        for p in range(3):
            rows = await _read_partition(http, topic, p)
            assert [r["offset"] for r in rows] == list(range(len(rows))), f"gaps in {p}"
            for r in rows:
                in_log[(p, r["offset"])] = base64.b64decode(r["value"]).decode()
        assert in_log == acked
        assert {p for p, _ in acked} == {0, 1, 2}

        # keyed producers: one partition each, offsets in send order
        for key, positions in order.items():
            assert len({p for p, _ in positions}) == 1, key
            offsets = [o for _, o in positions]
            assert offsets == sorted(offsets), key

        # the consumer instance, reading during the writes, got each record once
        assert len(seen) == len(set(seen)), "the consumer got a record twice"
        assert {(p, o): v for p, o, v in seen} == acked

        assert produce_s < DEADLINE_S


@pytest.mark.timeout(120)
async def test_fifty_concurrent_producers_lose_and_duplicate_nothing(franz_url: str) -> None:
    topic = f"conc-{uuid.uuid4().hex[:12]}"
    group = f"conc-{uuid.uuid4().hex[:12]}"
    await asyncio.wait_for(_run(franz_url, topic, group), DEADLINE_S + 40)
