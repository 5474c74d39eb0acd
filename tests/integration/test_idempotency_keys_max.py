"""``idempotency.keys.max`` on a real broker: a produce with a new Idempotency-Key past
the broker's live keys is 429 / 429 and writes nothing (v2 and v3); a retry with a key
already held still gets its first answer; produce without a key goes on.

Without the cap a client sending a new key per request grew the coordinator by ~300
bytes a request for a whole ``idempotency.key.retention.ms`` (a day): ~130 GB a day at
5,000 requests/s.
"""

from __future__ import annotations

import base64
import uuid

import httpx
from conftest import IDEMPOTENCY_KEYS_MAX, FranzServer

BINARY = "application/vnd.kafka.binary.v2+json"


def _body(text: str) -> dict[str, list[dict[str, str]]]:
    return {"records": [{"value": base64.b64encode(text.encode()).decode()}]}


def _end(http: httpx.Client, topic: str) -> int:
    resp = http.get(f"/topics/{topic}/partitions/0/offsets")
    assert resp.status_code == 200, resp.text
    return int(resp.json()["end_offset"])


def test_idempotency_keys_max(limits_server: FranzServer) -> None:
    topic = f"keys-{uuid.uuid4().hex[:10]}"
    with httpx.Client(base_url=limits_server.url, timeout=30) as http:
        url = f"/topics/{topic}/partitions/0"
        first: list[dict[str, object]] = []
        for i in range(IDEMPOTENCY_KEYS_MAX):
            resp = http.post(url, json=_body(f"r{i}"), headers={
                "Content-Type": BINARY, "Idempotency-Key": f"key-{i}"})
            assert resp.status_code == 200, resp.text
            first.append(resp.json())
        before = _end(http, topic)
        refused = http.post(url, json=_body("new"), headers={
            "Content-Type": BINARY, "Idempotency-Key": "one-key-too-many"})
        assert refused.status_code == 429, refused.text
        assert refused.json()["error_code"] == 429
        assert f"idempotency.keys.max={IDEMPOTENCY_KEYS_MAX}" in refused.json()["message"]
        cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        v3 = http.post(f"/v3/clusters/{cluster}/topics/{topic}/records",
                       json={"value": {"type": "STRING", "data": "new"}},
                       headers={"Idempotency-Key": "another-new-key"})
        assert v3.status_code == 429, v3.text
        assert _end(http, topic) == before  # nothing written
        # a key already held answers as before, writing nothing
        again = http.post(url, json=_body("r0"), headers={
            "Content-Type": BINARY, "Idempotency-Key": "key-0"})
        assert again.status_code == 200 and again.json() == first[0]
        # produce without a key is not affected
        plain = http.post(url, json=_body("plain"), headers={"Content-Type": BINARY})
        assert plain.status_code == 200, plain.text
        assert _end(http, topic) == before + 1
