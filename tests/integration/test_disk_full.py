"""A full disk: a real ``franz serve`` whose data dir is a small tmpfs mounted by the
test, produced to until the file system refuses (ENOSPC).

The broker must stay up, answer the produces it cannot write with a clean storage
error (KAFKA_STORAGE_ERROR, 50003) naming the partition and never the data path, keep
serving reads, pick up again once space is freed, and have every acknowledged record
after a restart. Before the index reservation the process died with SIGBUS at the
first index page it touched on the full disk (a roll writes the last time-index entry
of the segment it closes: with ``log.index.interval.bytes`` above ``segment.bytes`` that
entry is the first of its file, on a page that has no block yet).

Needs root (mount); skipped otherwise.
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import FranzServer

BINARY = "application/vnd.kafka.binary.v2+json"
DISK = "8m"
SEGMENT_BYTES = 65536

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mounting a tmpfs needs root"
)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of ``DISK`` mounted at ``<tmp>/data`` (the server's log file stays
    outside it, beside it)."""
    mnt = tmp_path / "data"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def server(small_disk: Path) -> Iterator[FranzServer]:
    srv = FranzServer(small_disk, [
        "num.partitions=2",
        f"log.segment.bytes={SEGMENT_BYTES}",
        "log.index.interval.bytes=1048576",  # no index entry inside a segment: see above
    ])
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _fill(path: Path, leave: int) -> Path:
    """A filler file taking all but about ``leave`` bytes of the file system."""
    filler = path / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        chunk = b"\0" * 65536
        while _free(path) > leave + len(chunk):
            os.write(fd, chunk)
    finally:
        os.close(fd)
    return filler


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _produce(c: httpx.Client, topic: str, partition: int, values: list[bytes]) -> httpx.Response:
    return c.post(f"/topics/{topic}/partitions/{partition}",
                  json={"records": [{"value": _b64(v)} for v in values]},
                  headers={"Content-Type": BINARY})


class Checker:
    """Classifies produce answers and checks that no error body leaks the data path."""

    def __init__(self, data_dir: Path) -> None:
        self.forbidden = [str(data_dir), str(data_dir.resolve()), str(data_dir.parent)]
        self.acked: dict[tuple[str, int], dict[int, bytes]] = {}
        self.errors: list[str] = []

    def clean(self, text: str) -> None:
        for path in self.forbidden:
            assert path not in text, f"an answer names the data path: {text}"

    def produce(self, c: httpx.Client, topic: str, partition: int, values: list[bytes]) -> bool:
        """True when written (acknowledged), False when refused for lack of space."""
        resp = _produce(c, topic, partition, values)
        self.clean(resp.text)
        body = resp.json()
        if resp.status_code == 200 and all(o["error_code"] is None for o in body["offsets"]):
            acked = self.acked.setdefault((topic, partition), {})
            for o, v in zip(body["offsets"], values, strict=True):
                acked[o["offset"]] = v
            return True
        if resp.status_code == 200:  # per-record errors
            codes = {o["error_code"] for o in body["offsets"]}
            messages = [o["error"] for o in body["offsets"]]
        else:
            assert resp.status_code >= 500, resp.text
            codes, messages = {body["error_code"]}, [body["message"]]
        assert codes == {50003}, resp.text
        assert all(f"{topic}-{partition}" in m for m in messages), resp.text
        self.errors.extend(messages)
        return False


def _read_all(c: httpx.Client, topic: str, partition: int) -> dict[int, bytes]:
    got: dict[int, bytes] = {}
    offset = 0
    while True:
        resp = c.get(f"/topics/{topic}/partitions/{partition}/records",
                     params={"offset": offset}, headers={"Accept": BINARY})
        assert resp.status_code == 200, resp.text
        rows = resp.json()
        for r in rows:
            got[r["offset"]] = base64.b64decode(r["value"])
        nxt = int(resp.headers["X-Franz-Next-Offset"])
        if not rows or nxt <= offset:
            return got
        offset = nxt


def test_a_full_disk_refuses_writes_cleanly_and_keeps_serving(
    server: FranzServer, small_disk: Path
) -> None:
    check = Checker(small_disk)
    topic = f"full-{uuid.uuid4().hex[:6]}"
    targets = [(topic, 0), (topic, 1)]
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for t, p in targets:
            assert check.produce(c, t, p, [f"first-{p}-{i}".encode() for i in range(5)])
        filler = _fill(small_disk, leave=512 * 1024)

        # produce until every partition has been refused, then keep going with sizes that
        # roll segments (30 KB) and that fit the slack of a page (100 B)
        refused: set[tuple[str, int]] = set()
        rounds = 0
        while refused != set(targets) and rounds < 400:
            for t, p in targets:
                values = [os.urandom(1024) for _ in range(8)]
                if not check.produce(c, t, p, values):
                    refused.add((t, p))
                assert server.proc is not None and server.proc.poll() is None, server.log_tail()
            rounds += 1
        assert refused == set(targets), "the disk never filled up"
        for i in range(60):
            size = (100, 5000, 30000)[i % 3]
            for t, p in targets:
                check.produce(c, t, p, [os.urandom(size)])
                assert server.proc is not None and server.proc.poll() is None, \
                    f"the broker died on a full disk:\n{server.log_tail()}"
        assert check.errors and all("No space left on device" in m for m in check.errors)

        # reads, metadata and metrics go on
        for t, p in targets:
            first = _read_all(c, t, p)
            assert first == check.acked[(t, p)]
        assert c.get("/topics").status_code == 200
        metrics = c.get("/metrics")
        assert metrics.status_code == 200 and "franz_replicamanager_partitioncount" in metrics.text

        # space comes back: writes work again, without a restart
        filler.unlink()
        for t, p in targets:
            assert check.produce(c, t, p, [b"after-" + str(p).encode()])
        assert server.proc is not None and server.proc.poll() is None

    server.restart()  # every acknowledged record is there, nothing else
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for t, p in targets:
            assert _read_all(c, t, p) == check.acked[(t, p)]
            assert check.produce(c, t, p, [b"after-restart"])
