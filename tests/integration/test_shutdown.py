"""SIGTERM stops franz in order: the log is flushed and marked clean, so the next start
skips recovery, and the process exits 0."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
from conftest import FranzServer

BINARY = "application/vnd.kafka.binary.v2+json"


def test_sigterm_is_an_orderly_shutdown(tmp_path: Path) -> None:
    server = FranzServer(tmp_path / "data")
    server.start()
    try:
        resp = httpx.post(f"{server.url}/topics/shutdown", headers={"Content-Type": BINARY},
                          json={"records": [{"value": "aGk="}]}, timeout=10)
        assert resp.status_code == 200
        assert server.proc is not None
        proc = server.proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, server.log_tail()
        server.proc = None
        data = tmp_path / "data"
        assert (data / ".kafka_cleanshutdown").exists(), server.log_tail()
        # Everything was fsynced: the recovery point of the partition is its log end.
        entries = (data / "recovery-point-offset-checkpoint").read_text().splitlines()[2:]
        assert "shutdown 0 1" in entries
        server.start()
        got = httpx.get(f"{server.url}/topics/shutdown/partitions/0/offsets", timeout=10).json()
        assert got["end_offset"] == 1
    finally:
        server.kill()
