"""``group.max.size`` (Kafka's, KIP-389) on a real broker: a consumer group takes at most
that many REST consumer instances; one more is refused 409 / 40903 and changes nothing,
and a member leaving makes room again.

Why it is bounded by default (1000, Kafka's is 2^31-1): every join rewrites the whole
group's record on the event loop, so one join cost ~6 ms at 500 members and ~30 ms at
2,000, and a client creating instances in one group slowed every request of the broker.
"""

from __future__ import annotations

import uuid

import httpx
from conftest import GROUP_MAX_SIZE, FranzServer

V2 = "application/vnd.kafka.v2+json"


def test_a_group_takes_at_most_group_max_size_instances(limits_server: FranzServer) -> None:
    group = f"g-{uuid.uuid4().hex[:10]}"
    with httpx.Client(base_url=limits_server.url, timeout=30,
                      headers={"Content-Type": V2}) as http:
        names = [f"c{i}" for i in range(GROUP_MAX_SIZE)]
        for name in names:
            resp = http.post(f"/consumers/{group}", json={"name": name})
            assert resp.status_code == 200, resp.text
        refused = http.post(f"/consumers/{group}", json={"name": "one-more"})
        assert refused.status_code == 409, refused.text
        body = refused.json()
        assert body["error_code"] == 40903
        assert f"already has {GROUP_MAX_SIZE} members" in body["message"]
        assert "group.max.size" in body["message"]
        # nothing changed: the refused instance does not exist, the others do
        resp = http.get(f"/consumers/{group}/instances/one-more/subscription")
        assert resp.status_code == 404
        for name in names:
            resp = http.get(f"/consumers/{group}/instances/{name}/subscription")
            assert resp.status_code == 200, resp.text
        # another group is not affected
        other = http.post(f"/consumers/{group}-other", json={"name": "one-more"})
        assert other.status_code == 200, other.text
        # a member leaving makes room
        assert http.delete(f"/consumers/{group}/instances/c0").status_code == 204
        resp = http.post(f"/consumers/{group}", json={"name": "one-more"})
        assert resp.status_code == 200, resp.text
