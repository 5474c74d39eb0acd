"""A v2 produce honours Accept as Confluent REST Proxy does: an Accept the answer cannot
be written in is 406 with Confluent's error body, and nothing is written (the end
offsets do not move, an unknown topic is not auto-created)."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.conftest import BINARY, V2, V2Client

RECORDS = {"records": [{"value": "S2Fma2E="}, {"key": "a2V5", "value": "Y29uZmx1ZW50"}]}


def _ends(client: httpx.Client, topic: str) -> list[int]:
    parts = client.get(f"/topics/{topic}/partitions").json()
    return [client.get(f"/topics/{topic}/partitions/{p['partition']}/offsets").json()["end_offset"]
            for p in parts]


@pytest.mark.parametrize("accept", ["text/html", "text/plain, image/png",
                                    "application/xml;q=1, application/json;q=0"])
@pytest.mark.parametrize("path", ["/topics/{topic}", "/topics/{topic}/partitions/0"])
def test_an_unacceptable_accept_is_406_and_writes_nothing(
        client: httpx.Client, v2: V2Client, topic: str, accept: str, path: str) -> None:
    v2.produce_values(topic, ["before"])
    ends = _ends(client, topic)
    r = client.post(path.format(topic=topic), json=RECORDS,
                    headers={"Content-Type": BINARY, "Accept": accept})
    assert v2.error_of(r, 406, 406) == "HTTP 406 Not Acceptable"
    assert _ends(client, topic) == ends


def test_a_406_does_not_create_the_topic(client: httpx.Client, v2: V2Client, topic: str) -> None:
    r = client.post(f"/topics/{topic}", json=RECORDS,
                    headers={"Content-Type": BINARY, "Accept": "text/html"})
    v2.error_of(r, 406, 406)
    v2.error_of(client.get(f"/topics/{topic}"), 404, 40401)


@pytest.mark.parametrize(("accept", "answered_in"), [
    (None, V2),
    ("*/*", V2),
    (V2, V2),
    ("application/vnd.kafka.binary.v2+json", V2),
    ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", V2),  # a browser
    ("application/json", "application/json"),
])
def test_acceptable_answers(client: httpx.Client, topic: str, accept: str | None,
                            answered_in: str) -> None:
    headers = {"Content-Type": BINARY} | ({"Accept": accept} if accept else {})
    request = client.build_request("POST", f"/topics/{topic}", json=RECORDS, headers=headers)
    if accept is None:
        del request.headers["accept"]
    r = client.send(request)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == answered_in
    offsets = r.json()["offsets"]
    assert len(offsets) == 2 and all(o["error_code"] is None for o in offsets), offsets


def test_the_406_is_in_the_openapi_document(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    for path in ("/topics/{topic}", "/topics/{topic}/partitions/{partition}"):
        responses = doc["paths"][path]["post"]["responses"]
        assert responses["406"]["content"][V2]["example"]["error_code"] == 406
        assert set(responses["200"]["content"]) == {V2, "application/json"}
