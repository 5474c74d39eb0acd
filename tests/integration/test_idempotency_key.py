"""Idempotency-Key on produce (issue 15, docs/delivery.md), against real servers.

The central case: a client whose answer was lost (a TCP proxy in the test forwards the
request, lets the server answer, and cuts the connection instead of passing the answer
on) sends the request again with the same key: it gets the original offsets and the
topic holds one copy, also when the server restarted between the two tries.
"""

from __future__ import annotations

import base64
import concurrent.futures
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import orjson
import pytest

if TYPE_CHECKING:
    from conftest import FranzServer

BINARY = "application/vnd.kafka.binary.v2+json"
HEADERS = {"Content-Type": BINARY}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _body(values: list[str], *, keyed: bool = False) -> bytes:
    records: list[dict[str, Any]] = []
    for i, v in enumerate(values):
        record = {"value": _b64(v)}
        if keyed:
            record["key"] = _b64(f"k{i % 17}")
        records.append(record)
    return orjson.dumps({"records": records})


def _post(client: httpx.Client, topic: str, body: bytes, key: str | None, *,
          path: str = "", **params: Any) -> httpx.Response:
    headers = dict(HEADERS)
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(f"/topics/{topic}{path}", content=body, headers=headers, params=params)


def _all_values(client: httpx.Client, topic: str) -> list[str]:
    """Every record's value in the topic (every partition, from the start)."""
    out = []
    resp = client.get(f"/topics/{topic}")
    assert resp.status_code == 200, resp.text
    for p in resp.json()["partitions"]:
        offset = 0
        while True:
            r = client.get(f"/topics/{topic}/partitions/{p['partition']}/records",
                           params={"offset": offset, "count": 10000})
            assert r.status_code == 200, r.text
            rows = r.json()
            if not rows:
                break
            out += [base64.b64decode(row["value"]).decode() for row in rows]
            offset = rows[-1]["offset"] + 1
    return out


class AnswerCutter:
    """A TCP proxy on 127.0.0.1 for one HTTP/1.1 exchange per connection: it forwards
    the request, reads the server's whole answer, then closes the client's connection
    without sending it (``cut`` True), or passes it on."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.cut = True
        self.exchanges = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                self._exchange(conn)

    @staticmethod
    def _read_message(sock: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return head + b"\r\n\r\n" + rest

    def _exchange(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        request = self._read_message(conn)
        if not request:
            return
        with socket.create_connection(("127.0.0.1", self.upstream_port), timeout=30) as up:
            up.sendall(request)
            answer = self._read_message(up)
        self.exchanges += 1
        if not self.cut:
            conn.sendall(answer)


@pytest.fixture
def cutter(franz_server: FranzServer) -> Iterator[AnswerCutter]:
    proxy = AnswerCutter(franz_server.port)
    yield proxy
    proxy.close()


def test_retry_after_a_lost_answer_gets_the_original_offsets(
        client: httpx.Client, topic: str, cutter: AnswerCutter) -> None:
    body = _body([f"v{i}" for i in range(50)])
    key = str(uuid.uuid4())
    # the server answers; the client never hears it
    with httpx.Client(base_url=cutter.url, timeout=30) as through_proxy, \
            pytest.raises(httpx.TransportError):
        _post(through_proxy, topic, body, key, path="/partitions/0")
    assert cutter.exchanges == 1
    retry = _post(client, topic, body, key, path="/partitions/0")
    assert retry.status_code == 200, retry.text
    assert [o["offset"] for o in retry.json()["offsets"]] == list(range(50))
    assert _all_values(client, topic) == [f"v{i}" for i in range(50)]
    # a third try answers the same, byte for byte
    assert _post(client, topic, body, key, path="/partitions/0").content == retry.content
    # without the key, the same body is written again (at least once, as before)
    plain = _post(client, topic, body, None, path="/partitions/0")
    assert plain.json()["offsets"][0]["offset"] == 50


def test_retry_after_a_restart_gets_the_original_answer(restartable_server: FranzServer) -> None:
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    body = _body([f"v{i}" for i in range(200)], keyed=True)  # keyed: both partitions
    key = "order-4711"
    proxy = AnswerCutter(restartable_server.port)
    try:
        with httpx.Client(base_url=proxy.url, timeout=30) as through_proxy, \
                pytest.raises(httpx.TransportError):
            _post(through_proxy, topic, body, key)
    finally:
        proxy.close()
    restartable_server.restart()
    with httpx.Client(base_url=restartable_server.url, timeout=30) as client:
        first = _post(client, topic, body, key)
        assert first.status_code == 200, first.text
        offsets = first.json()["offsets"]
        assert {o["partition"] for o in offsets} == {0, 1}
        per_partition: dict[int, list[int]] = {}
        for o in offsets:
            per_partition.setdefault(o["partition"], []).append(o["offset"])
        assert all(v == list(range(len(v))) for v in per_partition.values()), per_partition
        assert sorted(_all_values(client, topic)) == sorted(f"v{i}" for i in range(200))
        restartable_server.restart()
        with httpx.Client(base_url=restartable_server.url, timeout=30) as again:
            assert _post(again, topic, body, key).content == first.content


def test_same_key_other_request_is_422_and_writes_nothing(
        client: httpx.Client, topic: str) -> None:
    key = str(uuid.uuid4())
    assert _post(client, topic, _body(["a"]), key).status_code == 200
    other = _post(client, topic, _body(["b"]), key)
    assert other.status_code == 422, other.text
    assert other.json()["error_code"] == 422
    assert "different request" in other.json()["message"]
    # another partition, another content type: another request too
    assert _post(client, topic, _body(["a"]), key, path="/partitions/1").status_code == 422
    assert client.post(f"/topics/{topic}", content=orjson.dumps({"records": [{"value": "a"}]}),
                       headers={"Content-Type": "application/vnd.kafka.json.v2+json",
                                "Idempotency-Key": key}).status_code == 422
    assert _all_values(client, topic) == ["a"]


def test_keys_are_independent_and_optional(client: httpx.Client, topic: str) -> None:
    for i in range(3):
        assert _post(client, topic, _body(["same"]), f"k-{i}", path="/partitions/0").json()[
            "offsets"][0]["offset"] == i
    assert _all_values(client, topic) == ["same"] * 3


@pytest.mark.parametrize(("value", "reason"), [
    ("x" * 256, "at most 255"),
    ("caf\u00e9", "printable ASCII"),
    ('"a\\"b"', "escapes"),
    ('""', "empty"),
])
def test_bad_keys_are_400_and_write_nothing(client: httpx.Client, topic: str, value: str,
                                            reason: str) -> None:
    resp = client.post(f"/topics/{topic}", content=_body(["a"]),
                       headers={**HEADERS, "Idempotency-Key": value.encode("utf-8")})
    assert resp.status_code == 400, resp.text
    assert reason in resp.json()["message"]
    assert client.get(f"/topics/{topic}").status_code == 404  # not even auto-created


def test_quoted_key_is_the_bare_key(client: httpx.Client, topic: str) -> None:
    body = _body(["q"])
    first = _post(client, topic, body, '"quoted-1"')
    assert _post(client, topic, body, "quoted-1").content == first.content
    assert _all_values(client, topic) == ["q"]


def test_acks_0_with_a_key_is_400(client: httpx.Client, topic: str) -> None:
    resp = _post(client, topic, _body(["a"]), "k", acks="0")
    assert resp.status_code == 400 and "acks" in resp.json()["message"]


def test_concurrent_requests_with_one_key_write_once(client: httpx.Client, topic: str,
                                                     franz_url: str) -> None:
    body = _body([f"c{i}" for i in range(20000)])
    key = str(uuid.uuid4())

    def send(_: int) -> httpx.Response:
        with httpx.Client(base_url=franz_url, timeout=60) as c:
            return _post(c, topic, body, key, path="/partitions/0")

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(send, range(6)))
    statuses = sorted(a.status_code for a in answers)
    assert set(statuses) <= {200, 409}, statuses
    ok = [a for a in answers if a.status_code == 200]
    assert ok and all(a.content == ok[0].content for a in ok)
    for a in answers:
        if a.status_code == 409:
            assert a.json()["error_code"] == 409
    # a 409 means "retry later": the retry gets the answer
    assert _post(client, topic, body, key, path="/partitions/0").content == ok[0].content
    assert len(_all_values(client, topic)) == 20000


def test_a_retriable_failure_is_resumed_by_the_retry(client: httpx.Client, topic: str,
                                                     franz_url: str) -> None:
    """acks=all with min.insync.replicas above the replication factor: NOT_ENOUGH_REPLICAS
    (retriable) for every record; the key is released, not answered, so the retry after
    the operator fixed the config writes the records, once."""
    cid = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
    resp = client.post(f"/v3/clusters/{cid}/topics", json={
        "topic_name": topic, "partitions_count": 1,
        "configs": [{"name": "min.insync.replicas", "value": "2"}]})
    assert resp.status_code == 201, resp.text
    body, key = _body(["r1", "r2"]), str(uuid.uuid4())
    failed = _post(client, topic, body, key, acks="all")
    assert failed.status_code == 200
    assert {o["error_code"] for o in failed.json()["offsets"]} == {50003}
    resp = client.post(f"/v3/clusters/{cid}/topics/{topic}/configs:alter", json={
        "data": [{"name": "min.insync.replicas", "value": "1"}]})
    assert resp.status_code == 204, resp.text
    ok = _post(client, topic, body, key, acks="all")
    assert [o["offset"] for o in ok.json()["offsets"]] == [0, 1]
    assert _post(client, topic, body, key, acks="all").content == ok.content
    assert _all_values(client, topic) == ["r1", "r2"]


def test_v3_produce_and_batch_with_a_key(client: httpx.Client, topic: str) -> None:
    cid = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
    url = f"/v3/clusters/{cid}/topics/{topic}/records"
    body = b'{"value":{"type":"STRING","data":"s1"}}{"value":{"type":"STRING","data":"s2"}}'
    headers = {"Content-Type": "application/json", "Idempotency-Key": "v3-a"}
    first = client.post(url, content=body, headers=headers)
    assert first.status_code == 200, first.text
    again = client.post(url, content=body, headers=headers)
    assert again.content == first.content
    other = client.post(url, content=b'{"value":{"type":"STRING","data":"s3"}}', headers=headers)
    assert other.status_code == 422 and other.json()["error_code"] == 422

    def chunks() -> Iterator[bytes]:
        yield b'{"value":{"type":"STRING","data":"s4"}}'

    streamed = client.post(url, content=chunks(), headers={**headers, "Idempotency-Key": "v3-b"})
    assert streamed.status_code == 400 and "Content-Length" in streamed.json()["message"]

    batch = orjson.dumps({"entries": [{"id": "a", "value": {"type": "STRING", "data": "b1"}},
                                      {"id": "b", "value": {"type": "STRING", "data": "b2"}}]})
    bh = {"Content-Type": "application/json", "Idempotency-Key": "v3-batch"}
    b1 = client.post(url + ":batch", content=batch, headers=bh)
    assert b1.status_code == 207, b1.text
    assert client.post(url + ":batch", content=batch, headers=bh).content == b1.content
    assert _all_values(client, topic) == ["s1", "s2", "b1", "b2"]


def test_openapi_documents_the_header(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    for path in ("/topics/{topic}", "/topics/{topic}/partitions/{partition}",
                 "/v3/clusters/{cluster_id}/topics/{topic_name}/records"):
        params = doc["paths"][path]["post"]["parameters"]
        header = [p for p in params if p["in"] == "header"]
        assert [p["name"] for p in header] == ["Idempotency-Key"], path
        assert "409" in doc["paths"][path]["post"]["responses"], path
