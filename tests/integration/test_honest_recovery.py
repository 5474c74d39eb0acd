"""Honest recovery: a real ``franz serve`` restarted on a data dir damaged on purpose.

- a damaged tail with the clean-shutdown marker present: the broker starts, the tail
  is truncated at the first bad batch (Kafka's recovery), and records acknowledged
  afterwards survive the next crash;
- a partition directory that cannot be loaded (a file that cannot be opened, a segment
  below the tail with bad batches): the broker starts and serves every other partition;
  that one answers KAFKA_STORAGE_ERROR (50003), is reported offline in ``/metrics`` and
  leaderless in the v3 partition API, and its files are left as they were;
- a batch with a flipped byte in the middle of a segment: reads of it answer an error,
  never 200 with the altered record.
"""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path

import httpx
from conftest import FranzServer

BINARY = "application/vnd.kafka.binary.v2+json"
FIRST = "00000000000000000000.log"


# --- files -----------------------------------------------------------------------------

def batches(path: Path) -> list[tuple[int, int]]:
    """``(position, size)`` of each whole batch of a ``.log``."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        if pos + size > len(data):
            break
        out.append((pos, size))
        pos += size
    return out


def flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def segments(part_dir: Path) -> list[Path]:
    return sorted(part_dir.glob("*.log"))


# --- the API ---------------------------------------------------------------------------

def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def produce(c: httpx.Client, topic: str, partition: int, values: list[bytes]) -> list[int]:
    resp = c.post(f"/topics/{topic}/partitions/{partition}",
                  json={"records": [{"value": b64(v)} for v in values]},
                  headers={"Content-Type": BINARY})
    assert resp.status_code == 200, resp.text
    offsets = resp.json()["offsets"]
    assert all(o["error_code"] is None for o in offsets), resp.text
    return [o["offset"] for o in offsets]


def read(c: httpx.Client, topic: str, partition: int, offset: int = 0) -> httpx.Response:
    return c.get(f"/topics/{topic}/partitions/{partition}/records",
                 params={"offset": offset}, headers={"Accept": BINARY})


def read_all(c: httpx.Client, topic: str, partition: int) -> dict[int, bytes]:
    got: dict[int, bytes] = {}
    offset = 0
    while True:
        resp = read(c, topic, partition, offset)
        assert resp.status_code == 200, resp.text
        rows = resp.json()
        got.update({r["offset"]: base64.b64decode(r["value"]) for r in rows})
        nxt = int(resp.headers["X-Franz-Next-Offset"])
        if not rows or nxt <= offset:
            return got
        offset = nxt


def create_topic(c: httpx.Client, name: str, partitions: int, **configs: str) -> None:
    cid = c.get("/v3/clusters").json()["data"][0]["cluster_id"]
    resp = c.post(f"/v3/clusters/{cid}/topics", json={
        "topic_name": name, "partitions_count": partitions,
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
    })
    assert resp.status_code in (200, 201), resp.text


def metric(text: str, name: str, **labels: str) -> float | None:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = "^" + re.escape(name) + (r"\{" + re.escape(want) + r"\}" if labels else "") + r" (\S+)$"
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else None


def assert_storage_error(resp: httpx.Response, tp: str, data_dir: Path) -> None:
    assert resp.status_code >= 500, resp.text
    body = resp.json()
    assert body["error_code"] == 50003, resp.text
    assert tp in body["message"], resp.text
    assert str(data_dir) not in resp.text and str(data_dir.parent) not in resp.text


def new_server(tmp_path: Path) -> FranzServer:
    server = FranzServer(tmp_path / "data", ["num.partitions=2"])
    server.start()
    return server


# --- the tests -------------------------------------------------------------------------

def test_damaged_tail_behind_a_clean_marker_is_truncated(tmp_path: Path) -> None:
    server = new_server(tmp_path)
    data = server.data_dir
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            written = {p: {} for p in (0, 1)}  # type: dict[int, dict[int, bytes]]
            for p in (0, 1):
                for i in range(5):
                    values = [f"tail-{p}-{i}-{j}".encode() * 20 for j in range(2)]
                    written[p].update(zip(produce(c, "tail", p, values), values, strict=True))
            other = {o: v for v in [b"other"] for o in produce(c, "kept", 0, [v])}
        server.stop()
        assert (data / ".kafka_cleanshutdown").exists()

        # tail-0: a flipped byte in its last batch (CRC mismatch); tail-1: garbage frames
        log0 = data / "tail-0" / FIRST
        last_pos, last_size = batches(log0)[-1]
        flip_byte(log0, last_pos + last_size - 10)
        log1 = data / "tail-1" / FIRST
        with log1.open("ab") as f:
            f.write(b"\xff" * 100)

        server.start()  # the marker is there: before, tail-1 stopped the start
        with httpx.Client(base_url=server.url, timeout=30) as c:
            kept0 = {o: v for o, v in written[0].items() if o < 8}
            assert read_all(c, "tail", 0) == kept0  # the bad last batch (8, 9) is gone
            assert read_all(c, "tail", 1) == written[1]
            assert read_all(c, "kept", 0) == other
            # appends continue right after the last valid batch ...
            assert produce(c, "tail", 0, [b"acked-after"]) == [8]
            assert produce(c, "tail", 1, [b"acked-after"]) == [10]
        assert log0.stat().st_size > 0
        text = server.log_path.read_text(errors="replace")
        assert "tail-0: the active segment 0 has a damaged tail" in text
        assert "tail-1: the active segment 0 has a damaged tail" in text

        server.kill()  # ... and survive the next crash (before, recovery cut them off)
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert read_all(c, "tail", 0) == {**kept0, 8: b"acked-after"}
            assert read_all(c, "tail", 1) == {**written[1], 10: b"acked-after"}
    finally:
        server.stop()


def test_an_unloadable_partition_goes_offline_and_the_rest_is_served(tmp_path: Path) -> None:
    server = new_server(tmp_path)
    data = server.data_dir
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            create_topic(c, "mid", 1, segment_bytes="1024")
            written: dict[tuple[str, int], dict[int, bytes]] = {}
            for t, p, n in (("ok", 0, 3), ("ok", 1, 3), ("mid", 0, 12)):
                for i in range(n):
                    v = f"{t}-{p}-{i}".encode() * 20
                    written.setdefault((t, p), {}).update(zip(produce(c, t, p, [v]), [v],
                                                              strict=True))
        server.stop()

        # ok-1: its log cannot be opened at all (a directory where the file should be)
        log1 = data / "ok-1" / FIRST
        saved = log1.read_bytes()
        log1.unlink()
        log1.mkdir()
        # mid-0: a batch below the tail is corrupt and its segment's index must be rebuilt
        mid_segments = segments(data / "mid-0")
        assert len(mid_segments) >= 3
        first = mid_segments[0]
        pos, size = batches(first)[1]
        flip_byte(first, pos + size - 10)
        first.with_suffix(".index").unlink()
        damaged = first.read_bytes()

        server.start()  # before: IsADirectoryError stopped the start
        with httpx.Client(base_url=server.url, timeout=30) as c:
            for tp, topic, p in (("ok-1", "ok", 1), ("mid-0", "mid", 0)):
                assert_storage_error(read(c, topic, p), tp, data)
                resp = c.post(f"/topics/{topic}/partitions/{p}",
                              json={"records": [{"value": b64(b"x")}]},
                              headers={"Content-Type": BINARY})
                assert resp.status_code in (200, 500), resp.text
                errs = ([resp.json()] if resp.status_code == 500 else resp.json()["offsets"])
                assert {e["error_code"] for e in errs} == {50003}, resp.text
                assert all(tp in (e.get("error") or e.get("message")) for e in errs), resp.text
                assert_storage_error(c.get(f"/topics/{topic}/partitions/{p}/offsets"), tp, data)
            # every other partition is served, reads and writes
            assert read_all(c, "ok", 0) == written[("ok", 0)]
            assert produce(c, "ok", 0, [b"more"]) == [3]

            metrics = c.get("/metrics").text
            assert metric(metrics, "franz_replicamanager_offlinereplicacount") == 2.0
            assert metric(metrics, "franz_replica_offline", topic="ok", partition="1") == 1.0
            assert metric(metrics, "franz_replica_offline", topic="mid", partition="0") == 1.0
            assert metric(metrics, "franz_replica_offline", topic="ok", partition="0") is None
            assert metric(metrics, "franz_controller_offlinepartitionscount") == 2.0

            cid = c.get("/v3/clusters").json()["data"][0]["cluster_id"]
            parts = c.get(f"/v3/clusters/{cid}/topics/ok/partitions").json()["data"]
            leaders = {p["partition_id"]: p["leader"] for p in parts}
            assert leaders[1] is None and leaders[0] is not None
        text = server.log_path.read_text(errors="replace")
        assert "ok-1 is OFFLINE" in text and "mid-0 is OFFLINE" in text
        server.stop()

        # nothing of the offline partitions was changed, and they stay offline
        assert first.read_bytes() == damaged
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert_storage_error(read(c, "ok", 1), "ok-1", data)
        server.stop()

        # repaired: the partition comes back with its records
        shutil.rmtree(log1)
        log1.write_bytes(saved)
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert read_all(c, "ok", 1) == written[("ok", 1)]
            metrics = c.get("/metrics").text
            assert metric(metrics, "franz_replicamanager_offlinereplicacount") == 1.0
    finally:
        server.stop()


def test_a_flipped_byte_in_the_middle_of_a_segment_is_never_served(tmp_path: Path) -> None:
    server = new_server(tmp_path)
    data = server.data_dir
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            # 2 KB batches: index entries every few batches, so offset 4 lies below the
            # tail the loader checks (from the last index entry) and reaches the reader
            values = [b"A" * 2000 + str(i).encode() for i in range(10)]
            for v in values:
                produce(c, "flip", 0, [v])
        server.stop()
        log0 = data / "flip-0" / FIRST
        pos, size = batches(log0)[4]
        flip_byte(log0, pos + size - 20)  # inside the value of offset 4

        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as c:
            before = read(c, "flip", 0, 0)  # the batches before it are served
            assert before.status_code == 200, before.text
            assert [r["offset"] for r in before.json()] == [0, 1, 2, 3]
            assert before.headers["X-Franz-Next-Offset"] == "4"
            bad = read(c, "flip", 0, 4)
            assert bad.status_code == 500, bad.text
            body = bad.json()
            assert body["error_code"] in (50002, 50003)
            assert "flip-0" in body["message"] and "4" in body["message"]
            assert str(data) not in bad.text
            after = read(c, "flip", 0, 5)
            assert after.status_code == 200
            assert [base64.b64decode(r["value"]) for r in after.json()] == values[5:]
        assert "flip-0: the record batch at offsets 4..4 fails its CRC-32C check" in \
            server.log_path.read_text(errors="replace")
    finally:
        server.stop()
