"""Many partitions on one broker: create, produce to all, restart; time and resources.

    python benchmarks/partition_load_bench.py [--topics 100] [--partitions 100]
        [--nofile SOFT:HARD] [--profile-restart OUT.svg] [--keep DIR]

Starts ``franz serve`` (loopback, fresh data dir), creates ``--topics`` topics of
``--partitions`` partitions through ``POST /v3/clusters/{id}/topics``, produces one
record to every partition (one v2 request per topic, records addressed by partition),
reads one back, stops it (SIGTERM) and starts it again. Reports the creation and
produce time, the restart time to ``GET /v3/clusters`` answering and to every topic's
last partition serving its record, and the server's RSS, open descriptors and memory
mappings after each phase (``/proc/PID``). ``--profile-restart`` records the restart
with ``py-spy record``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BINARY = "application/vnd.kafka.binary.v2+json"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _resources(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS"))
    maps = len(Path(f"/proc/{pid}/maps").read_text().splitlines())
    fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    return {"rss_mib": rss_kb / 1024, "fds": fds, "maps": maps}


class Server:
    def __init__(self, data: Path, nofile: tuple[int, int] | None, log: Path) -> None:
        self.data, self.nofile, self.log = data, nofile, log
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, profile: Path | None = None) -> float:
        """Start; seconds until ``GET /v3/clusters`` answers 200."""
        cmd = [sys.executable, "-m", "app.cli", "serve", "--data-dir", str(self.data),
               "--override", f"listeners=http://127.0.0.1:{self.port}",
               "--override", "offsets.topic.num.partitions=1"]
        if profile is not None:
            cmd = ["py-spy", "record", "-r", "200", "-f", "raw" if profile.suffix == ".raw" else "flamegraph", "-o", str(profile), "--"] + cmd
        nofile = self.nofile

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, nofile)

        out = self.log.open("ab")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                     preexec_fn=limit)
        out.close()
        deadline = t0 + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(self.log.read_text()[-3000:])
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/v3/clusters", timeout=2).status_code == 200:
                    return time.monotonic() - t0
            time.sleep(0.02)
        raise RuntimeError("not ready in 300 s")

    @property
    def pid(self) -> int:
        """The broker's pid (py-spy's child when profiling)."""
        assert self.proc is not None
        kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        with contextlib.suppress(OSError, ValueError):
            text = kids.read_text().split()
            if text and "py-spy" in Path(f"/proc/{self.proc.pid}/cmdline").read_text():
                return int(text[0])
        return self.proc.pid

    def stop(self) -> float:
        assert self.proc is not None
        t0 = time.monotonic()
        if "py-spy" in str(self.proc.args):  # stop the broker; py-spy then writes and exits
            os.kill(self.pid, signal.SIGTERM)
        else:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        return time.monotonic() - t0


def _cluster(url: str) -> str:
    return str(httpx.get(url + "/v3/clusters").json()["data"][0]["cluster_id"])


def _read_one(c: httpx.Client, url: str, topic: str, partition: int) -> bytes | None:
    r = c.get(f"{url}/topics/{topic}/partitions/{partition}/records?offset=0&count=1",
              headers={"Accept": BINARY})
    if r.status_code != 200 or not r.json():
        return None
    return base64.b64decode(r.json()[0]["value"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--nofile", help="SOFT:HARD RLIMIT_NOFILE of the server")
    ap.add_argument("--profile-restart", type=Path)
    ap.add_argument("--keep", type=Path, help="data dir to use and keep")
    args = ap.parse_args()
    nofile = tuple(int(x) for x in args.nofile.split(":")) if args.nofile else None
    work = Path(tempfile.mkdtemp(prefix="franz-pload-"))
    data = args.keep or work / "data"
    server = Server(data, nofile, work / "server.log")  # type: ignore[arg-type]
    topics = [f"load{i:03d}" for i in range(args.topics)]
    n = args.topics * args.partitions
    try:
        print(f"start (empty): {server.start():.2f} s")
        cid = _cluster(server.url)
        t0 = time.monotonic()
        with httpx.Client(timeout=300) as c:
            for t in topics:
                r = c.post(f"{server.url}/v3/clusters/{cid}/topics",
                           json={"topic_name": t, "partitions_count": args.partitions})
                assert r.status_code == 201, r.text
            created = time.monotonic() - t0
            print(f"create {n} partitions: {created:.2f} s; {_resources(server.pid)}")
            t0 = time.monotonic()
            for t in topics:
                records = [{"partition": p, "value": base64.b64encode(f"{t}/{p}".encode()).decode()}
                           for p in range(args.partitions)]
                r = c.post(f"{server.url}/topics/{t}", json={"records": records},
                           headers={"Content-Type": BINARY})
                assert r.status_code == 200, r.text
            print(f"produce to all: {time.monotonic() - t0:.2f} s; {_resources(server.pid)}")
            last = args.partitions - 1
            assert _read_one(c, server.url, topics[-1], last) == f"{topics[-1]}/{last}".encode()
        print(f"stop: {server.stop():.2f} s")
        t0 = time.monotonic()
        ready = server.start(args.profile_restart)
        print(f"restart: GET /v3/clusters after {ready:.2f} s")
        with httpx.Client(timeout=300) as c:
            for t in topics:  # every topic's last partition serves its record
                for _ in range(3000):
                    if _read_one(c, server.url, t, last) == f"{t}/{last}".encode():
                        break
                    time.sleep(0.01)
                else:
                    raise AssertionError(f"{t}-{last} does not serve its record")
        loaded = time.monotonic() - t0
        print(f"restart: all topics serving after {loaded:.2f} s; {_resources(server.pid)}")
        print(f"stop: {server.stop():.2f} s")
    finally:
        if server.proc is not None:
            server.stop()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"log: {work / 'server.log'}")


if __name__ == "__main__":
    main()
