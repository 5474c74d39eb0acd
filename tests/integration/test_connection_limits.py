"""Connection and request-size limits of real ``franz serve`` processes
(docs/connection-limits.md): idle connections closed after ``connections.max.idle.ms``
(a long-poll is not idle), at most ``max.connections`` per listener (the next gets a
503 and is closed, and is accepted again once one closes), request heads over 64 KiB or
100 headers answered 431, bodies over ``request.body.max.bytes`` (every route but
produce) or ``max.request.size`` (produce) answered 413 without being buffered."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import FranzServer

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
IDLE_MS = 500
MAX_CONNECTIONS = 5
BODY_MAX = 1048576  # request.body.max.bytes, the default
PRODUCE_MAX = 3_000_000  # max.request.size of the limits server


def _start(tmp: Path, overrides: list[str]) -> FranzServer:
    server = FranzServer(tmp / "data", overrides)
    server.start()
    return server


@pytest.fixture(scope="module")
def idle_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    server = _start(tmp_path_factory.mktemp("idle"), [f"connections.max.idle.ms={IDLE_MS}"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def crowded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    server = _start(tmp_path_factory.mktemp("crowded"), [f"max.connections={MAX_CONNECTIONS}"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def limits_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    server = _start(tmp_path_factory.mktemp("sizes"), [f"max.request.size={PRODUCE_MAX}"])
    yield server
    server.stop()


# --- raw HTTP/1.1 over sockets: what a client sees, byte for byte ----------------------


def _connect(server: FranzServer, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One answer with a Content-Length (status, headers, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    length = int(headers["content-length"])
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed inside an answer"
        rest += chunk
    return status, headers, rest[:length]


def _get(sock: socket.socket, path: str = "/") -> int:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: franz\r\n\r\n".encode())
    return _read_answer(sock)[0]


def _served_connection(server: FranzServer, deadline_s: float = 5.0) -> socket.socket:
    """A connection the server accepted and served (retried while it refuses: it sees
    connections closed by an earlier test a moment after they are)."""
    deadline = time.monotonic() + deadline_s
    while True:
        sock = _connect(server)
        status = _get(sock)
        if status == 200:
            return sock
        sock.close()
        assert status == 503 and time.monotonic() < deadline, status
        time.sleep(0.05)


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed the connection (EOF or reset), None if it is
    still open after ``seconds``."""
    start = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - start


def _is_closed(sock: socket.socket, wait: float = 2.0) -> bool:
    return _closed_within(sock, wait) is not None


def _error(answer: tuple[int, dict[str, str], bytes], status: int) -> str:
    code, headers, body = answer
    assert code == status, (code, body)
    doc = json.loads(body)
    assert doc["error_code"] == status, doc
    assert isinstance(doc["message"], str) and doc["message"]
    return str(doc["message"])


def _send_body(sock: socket.socket, head: bytes, body_size: int, *, chunked: bool) -> threading.Thread:
    """Send ``head`` then a body of ``body_size`` bytes from another thread (the server
    may answer, and stop reading, before it is all sent)."""
    sock.sendall(head)

    def send() -> None:
        piece = b"x" * 65536
        left = body_size
        try:
            while left > 0:
                n = min(len(piece), left)
                sock.sendall(b"%x\r\n%b\r\n" % (n, piece[:n]) if chunked else piece[:n])
                left -= n
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server closed after answering

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def _post_raw(server: FranzServer, path: str, body_size: int, *, chunked: bool = False,
              content_type: str = V2) -> tuple[int, dict[str, str], bytes]:
    sock = _connect(server, timeout=30)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {body_size}"
    head = (f"POST {path} HTTP/1.1\r\nHost: franz\r\nContent-Type: {content_type}\r\n"
            f"{framing}\r\n\r\n").encode()
    with sock:
        sender = _send_body(sock, head, body_size, chunked=chunked)
        answer = _read_answer(sock)
        assert answer[1].get("connection") == "close", answer[1]
        assert _is_closed(sock, 10.0)  # nothing more is read: the connection ends
        sender.join(10)
    return answer


def _rss_mib(server: FranzServer) -> float:
    assert server.proc is not None
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


# --- connections.max.idle.ms ------------------------------------------------------------


def test_a_connection_that_never_sends_is_closed_when_idle(idle_server: FranzServer) -> None:
    with _connect(idle_server) as sock:
        after = _closed_within(sock, 5.0)
    assert after is not None, "an idle connection with no request stayed open"
    assert IDLE_MS / 1000 * 0.8 < after < IDLE_MS / 1000 + 1.5, after


def test_a_connection_is_closed_when_idle_after_an_answer(idle_server: FranzServer) -> None:
    with _connect(idle_server) as sock:
        assert _get(sock) == 200
        time.sleep(IDLE_MS / 1000 / 3)
        assert _get(sock) == 200  # still open: less than the idle time passed
        after = _closed_within(sock, 5.0)
    assert after is not None and after < IDLE_MS / 1000 + 1.5, after


def test_a_stalled_request_head_is_closed_when_idle(idle_server: FranzServer) -> None:
    with _connect(idle_server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: fr")
        after = _closed_within(sock, 5.0)
    assert after is not None and after < IDLE_MS / 1000 + 1.5, after


def test_a_client_that_keeps_sending_is_not_idle(idle_server: FranzServer) -> None:
    """A head trickling in, each piece within the idle time, is never cut."""
    with _connect(idle_server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n")
        for i in range(6):  # 6 x 0.6 idle time: more than the idle time in all
            time.sleep(IDLE_MS / 1000 * 0.6)
            sock.sendall(b"X-%d: y\r\n" % i)
        sock.sendall(b"Host: franz\r\n\r\n")
        assert _read_answer(sock)[0] == 200


def test_a_long_poll_longer_than_the_idle_time_is_not_cut(idle_server: FranzServer) -> None:
    group, topic = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    transport = httpx.HTTPTransport(retries=0)
    with httpx.Client(base_url=idle_server.url, timeout=30, transport=transport) as http:
        resp = http.post(f"/topics/{topic}", json={"records": [{"value": "AA=="}]},
                         headers={"Content-Type": BINARY})
        assert resp.status_code == 200, resp.text
        resp = http.post(f"/consumers/{group}", headers={"Content-Type": V2},
                         json={"format": "binary", "auto.offset.reset": "latest",
                               "consumer.request.timeout.ms": 10000})
        base = resp.json()["base_uri"]
        assert http.post(base + "/subscription", json={"topics": [topic]},
                         headers={"Content-Type": V2}).status_code == 204
        wait_ms = IDLE_MS * 4
        start = time.monotonic()
        resp = http.get(base + "/records", params={"timeout": wait_ms},
                        headers={"Accept": BINARY})
        elapsed = time.monotonic() - start
        assert resp.status_code == 200 and resp.json() == [], resp.text
        assert elapsed > wait_ms / 1000 * 0.9, elapsed  # it waited, on the same connection
        assert http.delete(base, headers={"Content-Type": V2}).status_code == 204


# --- max.connections ------------------------------------------------------------------


def test_connections_past_max_connections_are_refused_then_accepted_again(
    crowded_server: FranzServer,
) -> None:
    held = [_served_connection(crowded_server) for _ in range(MAX_CONNECTIONS)]
    try:
        with _connect(crowded_server) as extra:
            extra.sendall(b"GET / HTTP/1.1\r\nHost: franz\r\n\r\n")
            answer = _read_answer(extra)
            assert "max.connections=5" in _error(answer, 503)
            assert answer[1]["connection"] == "close"
            assert answer[1]["content-type"] == "application/json"
            assert _is_closed(extra)
        for sock in held:  # the open ones keep working
            assert _get(sock) == 200
        held.pop().close()
        held.append(_served_connection(crowded_server))  # accepted again, once it is seen
        with _connect(crowded_server) as extra:  # full again: the next one is refused
            extra.sendall(b"GET / HTTP/1.1\r\nHost: franz\r\n\r\n")
            _error(_read_answer(extra), 503)
    finally:
        for sock in held:
            sock.close()


def test_a_refused_connection_does_not_read_the_body(crowded_server: FranzServer) -> None:
    held = [_served_connection(crowded_server) for _ in range(MAX_CONNECTIONS)]
    try:
        answer = _post_raw(crowded_server, "/consumers/g", 50 * 1024 * 1024)
        _error(answer, 503)
    finally:
        for sock in held:
            sock.close()


# --- request heads ----------------------------------------------------------------------


def test_a_head_over_64_kib_is_431(limits_server: FranzServer) -> None:
    with _connect(limits_server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: franz\r\nX-Big: " + b"a" * (70 * 1024)
                     + b"\r\n\r\n")
        answer = _read_answer(sock)
        assert "65536 bytes" in _error(answer, 431)
        assert answer[1]["connection"] == "close"
        assert _is_closed(sock)
    with _connect(limits_server) as sock:  # within the limit: served
        sock.sendall(b"GET / HTTP/1.1\r\nHost: franz\r\nX-Big: " + b"a" * (60 * 1024)
                     + b"\r\n\r\n")
        assert _read_answer(sock)[0] == 200
    with _connect(limits_server) as sock:  # a long URL counts too
        sock.sendall(b"GET /?" + b"a" * (70 * 1024) + b" HTTP/1.1\r\nHost: franz\r\n\r\n")
        _error(_read_answer(sock), 431)


def test_more_than_100_headers_is_431(limits_server: FranzServer) -> None:
    def head(count: int) -> bytes:
        return (b"GET / HTTP/1.1\r\nHost: franz\r\n"
                + b"".join(b"X-%d: y\r\n" % i for i in range(count - 1)) + b"\r\n")

    with _connect(limits_server) as sock:
        sock.sendall(head(101))
        assert "100 headers" in _error(_read_answer(sock), 431)
    with _connect(limits_server) as sock:
        sock.sendall(head(100))
        assert _read_answer(sock)[0] == 200


def test_an_endless_head_is_cut_without_being_buffered(limits_server: FranzServer) -> None:
    """A header that never ends, sent in small pieces: 431 once 64 KiB (plus at most one
    read) has arrived, while the client is still sending (not a buffer that grows until
    the client stops)."""
    with _connect(limits_server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: franz\r\nX-Endless: ")
        sent = 0
        answered = False
        sock.settimeout(0.001)
        while sent < 8 * 1024 * 1024 and not answered:
            try:
                sock.sendall(b"a" * 4096)
            except OSError:
                break  # the server closed: the answer is waiting
            sent += 4096
            try:
                answered = bool(sock.recv(1, socket.MSG_PEEK))
            except TimeoutError:
                pass
        sock.settimeout(10)
        assert "65536 bytes" in _error(_read_answer(sock), 431)
    assert sent < 8 * 1024 * 1024, sent  # answered while the client was still sending


# --- body sizes -------------------------------------------------------------------------


def test_a_body_over_request_body_max_bytes_is_413_before_it_is_read(
    limits_server: FranzServer,
) -> None:
    answer = _post_raw(limits_server, "/consumers/g", 2 * 1024 * 1024)
    message = _error(answer, 413)
    assert message == f"Request body of {2 * 1024 * 1024} bytes exceeds request.body.max.bytes={BODY_MAX}"
    assert answer[1]["content-type"] == V2
    # a usual client (writes the whole body, then reads) sees the same clean answer
    with httpx.Client(base_url=limits_server.url, timeout=30) as http:
        resp = http.post("/consumers/g", content=b"{" * (2 * 1024 * 1024),
                         headers={"Content-Type": V2})
        assert resp.status_code == 413 and resp.json()["error_code"] == 413
        # v3 routes answer in v3's content type
        resp = http.post("/v3/clusters/x/topics", content=b" " * (BODY_MAX + 1),
                         headers={"Content-Type": "application/json"})
        assert resp.status_code == 413 and resp.headers["content-type"] == "application/json"


def test_a_refused_body_does_not_grow_the_server(limits_server: FranzServer) -> None:
    with httpx.Client(base_url=limits_server.url, timeout=30) as http:
        assert http.get("/topics").status_code == 200
    before = _rss_mib(limits_server)
    for _ in range(4):
        _error(_post_raw(limits_server, "/consumers/g", 2 * 1024 * 1024), 413)
    _error(_post_raw(limits_server, "/consumers/g", 64 * 1024 * 1024), 413)
    _error(_post_raw(limits_server, "/consumers/g", 16 * 1024 * 1024, chunked=True), 413)
    grown = _rss_mib(limits_server) - before
    assert grown < 16, f"RSS grew by {grown:.1f} MiB"


def test_a_chunked_body_over_the_limit_is_413(limits_server: FranzServer) -> None:
    answer = _post_raw(limits_server, "/consumers/g", 4 * 1024 * 1024, chunked=True)
    assert "request.body.max.bytes=1048576" in _error(answer, 413)

    def pieces(body: bytes) -> Iterator[bytes]:
        for i in range(0, len(body), 1000):
            yield body[i:i + 1000]

    with httpx.Client(base_url=limits_server.url, timeout=30) as http:
        # within the limit, a chunked body reaches the route whole
        group = f"g-{uuid.uuid4().hex[:8]}"
        resp = http.post(f"/consumers/{group}",
                         content=pieces(json.dumps({"name": "c", "format": "binary"}).encode()
                                        + b" " * 500_000),
                         headers={"Content-Type": V2})
        assert resp.status_code == 200, resp.text
        assert http.delete(resp.json()["base_uri"], headers={"Content-Type": V2}).status_code == 204


def test_hot_routes_are_limited_too(limits_server: FranzServer) -> None:
    """The range read is served before FastAPI's router (api.hot_routes)."""
    with _connect(limits_server) as sock:
        sock.sendall(b"GET /topics/t/partitions/0/records HTTP/1.1\r\nHost: franz\r\n"
                     b"Content-Length: 2000000\r\n\r\n")
        assert "request.body.max.bytes" in _error(_read_answer(sock), 413)


def test_produce_keeps_max_request_size(limits_server: FranzServer) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    record = {"value": "A" * 1000}
    big = {"records": [record] * 2500}  # ~2.5 MB: over request.body.max.bytes, within max.request.size
    raw = json.dumps(big).encode()
    assert BODY_MAX < len(raw) < PRODUCE_MAX

    def pieces() -> Iterator[bytes]:
        for i in range(0, len(raw), 65536):
            yield raw[i:i + 65536]

    with httpx.Client(base_url=limits_server.url, timeout=60) as http:
        for path in (f"/topics/{topic}", f"/topics/{topic}/partitions/0"):
            resp = http.post(path, content=raw, headers={"Content-Type": BINARY})
            assert resp.status_code == 200, resp.text
            assert len(resp.json()["offsets"]) == 2500
        resp = http.post(f"/topics/{topic}", content=pieces(), headers={"Content-Type": BINARY})
        assert resp.status_code == 200, resp.text
        too_big = json.dumps({"records": [record] * 3100}).encode()
        assert len(too_big) > PRODUCE_MAX
        resp = http.post(f"/topics/{topic}", content=too_big, headers={"Content-Type": BINARY})
        assert resp.status_code == 413
        assert resp.json()["message"] == (f"Request body of {len(too_big)} bytes exceeds "
                                          f"max.request.size={PRODUCE_MAX}")
    answer = _post_raw(limits_server, f"/topics/{topic}", 4 * 1024 * 1024, chunked=True,
                       content_type=BINARY)
    assert f"max.request.size={PRODUCE_MAX}" in _error(answer, 413)
