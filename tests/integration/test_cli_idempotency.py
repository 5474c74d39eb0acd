"""``franz produce`` with Idempotency-Key (enable.idempotence), run as the real
executable against the shared server (conftest's ``franz_server``) through a small TCP
proxy written here: the proxy reads each HTTP/1.1 request, keeps what it saw (method,
path, headers, body), forwards it to franz and, for the produce requests it is told to,
closes the producer's connection instead of returning franz's answer. A dropped answer
must neither lose nor duplicate a line; what the topic holds is read back directly from
franz, not through the proxy."""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx
import pytest
from conftest import ROOT
from test_cli import CLI_ENV, Result, franz_command

BINARY = "application/vnd.kafka.binary.v2+json"
KEY = "idempotency-key"


def produce(url: str, topic: str, *args: str, stdin: bytes) -> Result:
    """``franz produce --topic TOPIC ARGS`` at ``url`` with ``stdin``."""
    proc = subprocess.run([*franz_command(), "produce", "--bootstrap-server", url, "--topic",
                           topic, *args], input=stdin, capture_output=True, cwd=ROOT,
                          timeout=120, check=False, env=CLI_ENV)
    return Result(proc.returncode, proc.stdout.decode(errors="replace"),
                  proc.stderr.decode(errors="replace"), proc.stdout)


@dataclass
class Seen:
    """A request the proxy forwarded."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def produce(self) -> bool:
        return self.method == "POST" and self.path.startswith("/topics/")


async def _read_message(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, str], bytes] | None:
    """One HTTP/1.1 message (request or answer): its head, headers and body as sent
    (Content-Length or chunked); None when the peer closed before a new one."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    headers = {}
    for line in head[:-4].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line[:-2].split(b";")[0], 16)
            parts.append(size_line + await reader.readexactly(size + 2))
            if size == 0:
                break
        body = b"".join(parts)
    else:
        body = b""
    return head, headers, body


class Proxy:
    """127.0.0.1:``port`` -> franz at ``upstream``, one upstream connection per client
    connection, on an asyncio loop in a thread of its own.

    ``drop``: which produce requests lose their answer: ``none``; ``first`` (forwarded,
    franz's answer read in full, then the producer's connection closed: the request was
    written, the producer cannot know); ``first-early`` (the producer's connection closed
    as soon as the request is forwarded, franz still working on it); ``all``."""

    def __init__(self, upstream: str, drop: str = "none") -> None:
        assert drop in ("none", "first", "first-early", "all")
        host_port = upstream.removeprefix("http://")
        self.upstream_host, _, port = host_port.rpartition(":")
        self.upstream_port = int(port)
        self.drop = drop
        self.seen: list[Seen] = []
        self.dropped = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def produces(self) -> list[Seen]:
        return [s for s in self.seen if s.produce]

    def __enter__(self) -> Proxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _drops(self, seen: Seen) -> bool:
        if not seen.produce or self.drop == "none":
            return False
        return self.drop == "all" or self.dropped == 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_reader, up_writer = await asyncio.open_connection(self.upstream_host,
                                                             self.upstream_port)
        try:
            while True:
                request = await _read_message(reader)
                if request is None:
                    return
                head, headers, body = request
                method, path = head.split(b" ", 2)[:2]
                seen = Seen(method.decode(), path.decode(), headers, body)
                self.seen.append(seen)
                up_writer.write(head + body)
                await up_writer.drain()
                drop = self._drops(seen)
                if drop:
                    self.dropped += 1
                    if self.drop == "first-early":
                        writer.close()  # before franz answers; franz finishes undisturbed
                answer = await _read_message(up_reader)
                if answer is None or drop:
                    return
                writer.write(answer[0] + answer[2])
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            for w in (writer, up_writer):
                w.close()
                with contextlib.suppress(Exception):
                    await w.wait_closed()
            self._tasks.discard(task)


def topic_values(client: httpx.Client, topic: str) -> list[bytes]:
    """Every record value of ``topic``, read from franz (all partitions)."""
    cid = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
    base = f"/v3/clusters/{cid}/topics/{topic}/partitions"
    values: list[bytes] = []
    for p in client.get(base).json()["data"]:
        pid = p["partition_id"]
        ends = client.get(f"{base}/{pid}/offset").json()
        offset, end = ends["earliest_offset"], ends["latest_offset"]
        while offset < end:
            r = client.get(f"/topics/{topic}/partitions/{pid}/records",
                           params={"offset": offset, "count": 1000}, headers={"Accept": BINARY})
            assert r.status_code == 200, r.text
            values += [base64.b64decode(row["value"]) for row in r.json()]
            offset = int(r.headers["X-Franz-Next-Offset"])
    return values


def wait_for_values(client: httpx.Client, topic: str, count: int,
                    deadline_s: float = 15.0) -> list[bytes]:
    """``topic_values`` once it holds ``count`` records (acks=0 writes after answering)."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            values = topic_values(client, topic)
        except (KeyError, httpx.HTTPError):  # the topic is not there yet
            values = []
        if len(values) >= count or time.monotonic() > end:
            return values
        time.sleep(0.1)


def assert_exactly_once(values: list[bytes], lines: list[str]) -> None:
    counts = collections.Counter(values)
    assert sorted(counts) == sorted(ln.encode() for ln in lines), counts
    assert set(counts.values()) == {1}, [v for v, n in counts.items() if n > 1]


def keys_of(seen: list[Seen]) -> list[str | None]:
    return [s.headers.get(KEY) for s in seen]


def _uuid4(text: str | None) -> Any:
    assert text is not None
    return uuid.UUID(text).version


LINES = [f"line-{i}" for i in range(10)]
STDIN = ("\n".join(LINES) + "\n").encode()


@pytest.mark.parametrize("drop", ["first", "first-early"])
def test_a_dropped_answer_is_retried_with_the_same_key_and_written_once(
        franz_url: str, client: httpx.Client, topic: str, drop: str) -> None:
    with Proxy(franz_url, drop) as proxy:
        # 10 lines, 4 per request: lines 1-4 (dropped, then retried), 5-8, 9-10
        r = produce(proxy.url, topic, "--batch-size", "4", stdin=STDIN)
    assert (r.code, r.out) == (0, ""), r
    assert "franz produce: lines 1-4: cannot reach franz" in r.err, r.err
    assert "retrying with the same Idempotency-Key (retry 1 of " in r.err, r.err
    assert "Traceback" not in r.err
    assert proxy.dropped == 1
    posts = proxy.produces
    keys = keys_of(posts)
    assert all(_uuid4(k) == 4 for k in keys), keys
    # the first request went out again (more than once if franz was still on it: 409),
    # each time with its key and its bytes; then one request per further batch
    distinct = list(dict.fromkeys(keys))
    assert len(distinct) == 3, keys
    first = [s for s in posts if s.headers[KEY] == distinct[0]]
    assert len(first) >= 2 and len({s.body for s in first}) == 1
    assert len({(s.path, s.headers["content-type"]) for s in first}) == 1
    assert [keys.count(k) for k in distinct[1:]] == [1, 1]
    assert len({s.body for s in posts}) == 3
    assert_exactly_once(topic_values(client, topic), LINES)


def test_retries_are_bounded(franz_url: str, client: httpx.Client, topic: str) -> None:
    """Every answer lost: the producer gives up after its retries (1 + 5 attempts, all
    with one key) with exit code 2; the first attempt wrote the lines, the retries got
    franz's remembered answer (also lost) and wrote nothing."""
    t0 = time.monotonic()
    with Proxy(franz_url, "all") as proxy:
        r = produce(proxy.url, topic, stdin=b"a\nb\nc\n")
    took = time.monotonic() - t0
    assert r.code == 2 and r.out == "", r
    attempts = len(proxy.produces)
    assert attempts == 6, keys_of(proxy.produces)
    assert len(set(keys_of(proxy.produces))) == 1
    assert len({s.body for s in proxy.produces}) == 1
    assert r.err.count("retrying with the same Idempotency-Key") == 5, r.err
    assert f"lines 1-3 may not have been written: {attempts} attempts in " in r.err, r.err
    assert took < 60
    assert_exactly_once(topic_values(client, topic), ["a", "b", "c"])


@pytest.mark.parametrize("args", [("--no-idempotence",), ("--acks", "0")],
                         ids=["no-idempotence", "acks-0"])
def test_no_key_without_idempotence_or_with_acks_0(
        franz_url: str, client: httpx.Client, topic: str, args: tuple[str, ...]) -> None:
    with Proxy(franz_url) as proxy:
        r = produce(proxy.url, topic, "--batch-size", "4", *args, stdin=STDIN)
    assert (r.code, r.out, r.err) == (0, "", ""), r
    assert len(proxy.produces) == 3
    assert keys_of(proxy.produces) == [None] * 3
    assert_exactly_once(wait_for_values(client, topic, len(LINES)), LINES)


def test_no_idempotence_sends_once(franz_url: str, client: httpx.Client, topic: str) -> None:
    """Without a key a retry could write the lines twice: the lost answer ends the run
    (exit 2), nothing is sent again."""
    with Proxy(franz_url, "first") as proxy:
        r = produce(proxy.url, topic, "--batch-size", "4", "--no-idempotence", stdin=STDIN)
    assert r.code == 2 and r.out == "", r
    assert "cannot reach franz" in r.err and "retrying" not in r.err, r.err
    assert keys_of(proxy.produces) == [None]
    assert_exactly_once(topic_values(client, topic), LINES[:4])
