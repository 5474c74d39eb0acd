"""Long-poll reads (design.md §10): answer as soon as data arrives, no spurious empty
first read after subscribe, wait up to the timeout when there is nothing."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from conftest import V2Client

BINARY = "application/vnd.kafka.binary.v2+json"


def _consumer(v2: V2Client, group: str, **config: Any) -> str:
    return str(v2.create_consumer(group, **config)["base_uri"])


async def test_read_returns_as_soon_as_a_record_arrives(
    v2: V2Client, franz_url: str, group: str, topic: str
) -> None:
    v2.produce_values(topic, ["old"], partition=0)
    base = _consumer(
        v2, group, **{"consumer.request.timeout.ms": 20000, "auto.offset.reset": "latest"}
    )
    v2.post(base + "/subscription", {"topics": [topic]})
    assert v2.records(base, timeout=300) == []  # at the end: nothing yet
    async with httpx.AsyncClient(base_url=franz_url, timeout=60) as ac:

        async def read() -> tuple[float, list[dict[str, Any]]]:
            start = time.monotonic()
            resp = await ac.get(
                base + "/records", headers={"Accept": BINARY}, params={"timeout": 15000}
            )
            assert resp.status_code == 200, resp.text
            return time.monotonic() - start, resp.json()

        async def produce_later() -> float:
            await asyncio.sleep(0.5)
            resp = await ac.post(
                f"/topics/{topic}/partitions/0",
                json={"records": [{"value": v2.b64("new")}]},
                headers={"Content-Type": BINARY},
            )
            assert resp.status_code == 200
            return time.monotonic()

        (elapsed, records), _ = await asyncio.gather(read(), produce_later())
    assert [v2.unb64(r["value"]) for r in records] == [b"new"]
    assert 0.4 < elapsed < 5.0, elapsed  # woke on the append, not at the 15 s timeout


def test_no_empty_first_read_after_subscribe(v2: V2Client, group: str, topic: str) -> None:
    v2.produce_values(topic, ["a", "b"], partition=0)
    v2.produce_values(topic, ["c"], partition=2)
    base = _consumer(v2, group, **{"auto.offset.reset": "earliest"})
    v2.post(base + "/subscription", {"topics": [topic]})
    first = v2.records(base, timeout=5000)
    assert first, "the first read after subscribe came back empty"
    rest = v2.read_until(base, 3 - len(first)) if len(first) < 3 else []
    assert sorted(v2.unb64(r["value"]) for r in first + rest) == [b"a", b"b", b"c"]


def test_first_read_with_default_settings_is_quick(v2: V2Client, group: str, topic: str) -> None:
    v2.produce_values(topic, ["a"], partition=1)
    base = _consumer(v2, group, **{"auto.offset.reset": "earliest"})
    v2.post(base + "/subscription", {"topics": [topic]})
    start = time.monotonic()
    got = v2.records(base)
    assert len(got) == 1 and time.monotonic() - start < 0.9  # not the 1 s request timeout


def test_empty_read_waits_for_the_timeout(v2: V2Client, group: str, topic: str) -> None:
    v2.produce_values(topic, ["a"], partition=0)
    base = _consumer(v2, group, **{"consumer.request.timeout.ms": 5000})
    v2.post(base + "/assignments", {"partitions": [{"topic": topic, "partition": 0}]})
    v2.post(base + "/positions/end", {"partitions": [{"topic": topic, "partition": 0}]})
    start = time.monotonic()
    assert v2.records(base, timeout=700) == []
    assert 0.6 <= time.monotonic() - start < 4.0
    start = time.monotonic()
    assert v2.records(base, timeout=60000) == []  # the query can only shorten the wait
    assert 4.5 <= time.monotonic() - start < 9.0
