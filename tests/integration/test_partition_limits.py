"""Partition budgets of a real ``franz serve``: ``max.partitions.per.topic`` and
``max.partitions.per.broker`` refuse creations and increases past them (400 / 40002,
nothing created, on disk or in the store); the open-files limit is raised at start and
bounds the budget; thousands of partitions are created without stalling other requests.
"""

from __future__ import annotations

import contextlib
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from conftest import ROOT, START_TIMEOUT_S, free_port


class LimitedServer:
    """``franz serve`` started under a given RLIMIT_NOFILE (soft, hard)."""

    def __init__(self, data_dir: Path, overrides: list[str], nofile: tuple[int, int] | None):
        self.data_dir, self.overrides, self.nofile = data_dir, overrides, nofile
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "app.cli", "serve", "--data-dir", str(self.data_dir),
               "--override", f"listeners=http://127.0.0.1:{self.port}"]
        for o in self.overrides:
            cmd += ["--override", o]
        nofile = self.nofile

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, nofile)

        log = (self.data_dir.parent / "server.log").open("ab")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                     preexec_fn=limit)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/", timeout=1).status_code == 200:
                    return
            time.sleep(0.05)
        raise AssertionError(f"not ready:\n{self.log()}")

    def log(self) -> str:
        return (self.data_dir.parent / "server.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@contextlib.contextmanager
def serving(tmp_path: Path, overrides: list[str],
            nofile: tuple[int, int] | None = None) -> Iterator[LimitedServer]:
    server = LimitedServer(tmp_path / "data", overrides, nofile)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _cluster_id(url: str) -> str:
    return str(httpx.get(url + "/v3/clusters").json()["data"][0]["cluster_id"])


def _create(url: str, topic: str, partitions: int) -> httpx.Response:
    return httpx.post(f"{url}/v3/clusters/{_cluster_id(url)}/topics", timeout=120,
                      json={"topic_name": topic, "partitions_count": partitions})


def _grow(url: str, topic: str, partitions: int) -> httpx.Response:
    return httpx.patch(f"{url}/v3/clusters/{_cluster_id(url)}/topics/{topic}", timeout=120,
                       json={"partitions_count": partitions})


def _partition_dirs(data_dir: Path, topic: str) -> list[Path]:
    return [p for p in data_dir.rglob(f"{topic}-*") if p.is_dir()]


def _topics(url: str) -> list[str]:
    return [t["topic_name"] for t in
            httpx.get(f"{url}/v3/clusters/{_cluster_id(url)}/topics").json()["data"]]


def test_per_topic_and_per_broker_maxima(tmp_path: Path) -> None:
    # internal topics: 50 offsets + 1 idempotency + 1 _schemas partitions
    with serving(tmp_path, ["max.partitions.per.topic=20", "max.partitions.per.broker=85",
                            "offsets.topic.num.partitions=50",
                            "idempotency.topic.num.partitions=1"]) as server:
        r = _create(server.url, "too-wide", 21)
        assert r.status_code == 400 and r.json()["error_code"] == 40002, r.text
        assert "max.partitions.per.topic=20" in r.json()["message"]
        assert "too-wide" not in _topics(server.url)
        assert _partition_dirs(server.data_dir, "too-wide") == []

        assert _create(server.url, "a", 20).status_code == 201
        r = _grow(server.url, "a", 21)
        assert r.status_code == 400 and "max.partitions.per.topic" in r.json()["message"], r.text
        assert len(_partition_dirs(server.data_dir, "a")) == 20
        # 52 internal partitions + 20 hosted; 20 more would pass 85
        r = _create(server.url, "b", 20)
        assert r.status_code == 400 and r.json()["error_code"] == 40002, r.text
        assert "max.partitions.per.broker" in r.json()["message"], r.text
        assert "b" not in _topics(server.url) and _partition_dirs(server.data_dir, "b") == []
        assert _create(server.url, "b", 20).status_code == 400  # still nothing half made
        assert _create(server.url, "c", 10).status_code == 201  # 82 of 85
        # produce still works on the topics that exist
        r = httpx.post(f"{server.url}/topics/a", json={"records": [{"value": "eA=="}]},
                       headers={"Content-Type": "application/vnd.kafka.binary.v2+json"})
        assert r.status_code == 200, r.text


def test_open_files_limit_raised_and_not_bounding_the_budget(tmp_path: Path) -> None:
    """Soft 256 / hard 1400: the broker raises its soft limit to 1400; partitions no
    longer hold descriptors of their own (a bounded cache of .log files), so a topic of
    600 partitions (1,800 descriptors the old way) is created, and survives a restart."""
    with serving(tmp_path, ["offsets.topic.num.partitions=1"], nofile=(256, 1400)) as server:
        assert server.proc is not None
        limits = Path(f"/proc/{server.proc.pid}/limits").read_text()
        line = next(x for x in limits.splitlines() if x.startswith("Max open files"))
        assert line.split()[3:5] == ["1400", "1400"], line
        assert _create(server.url, "wide", 600).status_code == 201
        assert len(_partition_dirs(server.data_dir, "wide")) == 600
        server.stop()
        server.start()
        assert "wide" in _topics(server.url)


def test_thousands_of_partitions_do_not_stall_other_requests(tmp_path: Path) -> None:
    with serving(tmp_path, ["offsets.topic.num.partitions=1"]) as server:
        waits: list[float] = []
        done = threading.Event()

        def probe() -> None:
            with httpx.Client(timeout=30) as c:
                while not done.is_set():
                    t0 = time.monotonic()
                    assert c.get(server.url + "/").status_code == 200
                    waits.append(time.monotonic() - t0)
                    time.sleep(0.01)

        prober = threading.Thread(target=probe)
        prober.start()
        try:
            r = _create(server.url, "many", 2000)
        finally:
            done.set()
            prober.join()
        assert r.status_code == 201, r.text
        assert len(_partition_dirs(server.data_dir, "many")) == 2000
        # the probe kept being answered during the creation (a loop blocked for the
        # whole creation answers it a handful of times: before and after)
        assert len(waits) > 20, waits


def test_affordable_partitions_follow_the_limits() -> None:
    from core.broker.controller import partition_limits as pl

    # descriptors bound nothing (unless index mappings dup them: the mmap fallback)
    files_bound = 2 if pl.HOLDS_DESCRIPTOR else 0
    assert files_bound == pl.DESCRIPTORS_PER_PARTITION
    if not files_bound:
        assert pl.affordable_partitions(open_files=256, max_map_count=10**6) == \
            (10**6 - 4096) // 2
    assert pl.affordable_partitions(open_files=10**6, max_map_count=16384 + 2000) == 7144
    assert pl.affordable_partitions(open_files=10**6, max_map_count=65530) == 30717
    assert pl.affordable_partitions(open_files=0, max_map_count=0) == 0


BINARY = "application/vnd.kafka.binary.v2+json"


def _produce_and_read_all(c: httpx.Client, url: str, topics: list[str], partitions: int,
                          *, produce: bool) -> None:
    import base64

    for t in topics:
        for p in range(partitions):
            want = [f"{t}/{p}/{i}".encode() for i in range(2)]
            if produce:
                body = {"records": [{"value": base64.b64encode(v).decode()} for v in want]}
                r = c.post(f"{url}/topics/{t}/partitions/{p}", json=body,
                           headers={"Content-Type": BINARY})
                assert r.status_code == 200, r.text
            r = c.get(f"{url}/topics/{t}/partitions/{p}/records?offset=0&count=10",
                      headers={"Accept": BINARY})
            assert r.status_code == 200, r.text
            got = [base64.b64decode(rec["value"]) for rec in r.json()]
            assert got == want, (t, p, got)


def test_far_more_partitions_than_the_open_files_limit_once_held(tmp_path: Path) -> None:
    """RLIMIT_NOFILE 256 (soft and hard): the old layout (3 descriptors per partition)
    could not host 85 partitions. 600 are created, produced to and read back, and read
    back again after a restart: all data intact, no 5xx."""
    topics = [f"t{i}" for i in range(6)]
    with serving(tmp_path, ["offsets.topic.num.partitions=1"], nofile=(256, 256)) as server:
        for t in topics:
            r = _create(server.url, t, 100)
            assert r.status_code == 201, r.text
        with httpx.Client(timeout=60) as c:
            _produce_and_read_all(c, server.url, topics, 100, produce=True)
        server.stop()
        server.start()
        with httpx.Client(timeout=60) as c:
            _produce_and_read_all(c, server.url, topics, 100, produce=False)
        assert "Traceback" not in server.log()
