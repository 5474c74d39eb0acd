"""Admin operations at once on a standalone broker (the SQL catalog): a creation of
thousands of partitions beside topic creations, config changes, partition increases and
deletions from other clients; none fails with a server error ("database is locked")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from conftest import FranzServer


def test_concurrent_admin_operations_never_fail_with_5xx(tmp_path: Path) -> None:
    server = FranzServer(tmp_path / "data", ["offsets.topic.num.partitions=1"])
    server.start()
    try:
        _run_against(server.url)
    finally:
        server.stop()


def _run_against(url: str) -> None:
    cid = httpx.get(url + "/v3/clusters").json()["data"][0]["cluster_id"]
    topics = f"{url}/v3/clusters/{cid}/topics"

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=180) as c:
            async def small(i: int) -> list[httpx.Response]:
                out = [await c.post(topics, json={"topic_name": f"s{i}", "partitions_count": 2})]
                out.append(await c.post(f"{topics}/s{i}/configs:alter", json={
                    "data": [{"name": "retention.ms", "value": str(60000 + i)}]}))
                out.append(await c.patch(f"{topics}/s{i}", json={"partitions_count": 4}))
                out.append(await c.get(f"{topics}/s{i}/partitions"))
                out.append(await c.delete(f"{topics}/s{i}"))
                return out

            big = c.post(topics, json={"topic_name": "big", "partitions_count": 2000})
            results = await asyncio.gather(big, *(small(i) for i in range(16)))
            flat = [results[0]]
            for group in results[1:]:
                flat += group
            return flat

    answers = asyncio.run(run())
    errors = [(r.request.method, r.request.url.path, r.status_code, r.text[:200])
              for r in answers if r.status_code >= 500]
    assert errors == [], errors
    assert answers[0].status_code == 201, answers[0].text
    statuses = sorted({r.status_code for r in answers})
    assert set(statuses) <= {200, 201, 204}, statuses
