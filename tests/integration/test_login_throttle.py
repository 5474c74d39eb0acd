"""Failed HTTP Basic logins slowed per principal and per client address, over real
``franz serve`` processes: past the limits 429 with ``Retry-After`` and Confluent's
error body, without the password being checked, counted in /metrics and audited; other
principals from other addresses go on as before; a success resets the principal.

Clients come from their own loopback addresses (127.0.0.x: the whole 127/8 reaches a
listener on 127.0.0.1 on Linux), so each test has principals and addresses of its own.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import V2, FranzServer
from tests.integration.test_security import add_users

USERS = ("admin", "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
         "ivan", "judy")
PASSWORDS = {name: f"{name}-pw" for name in USERS}
BASIC = ["num.partitions=1", "authentication.method=BASIC"]


def _server(tmp: Path, extra: list[str]) -> FranzServer:
    server = FranzServer(tmp / "data", [*BASIC, *extra])
    add_users(server.data_dir, PASSWORDS)
    server.start()
    return server


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    """The defaults: 5 failures of a principal, 20 of an address, in 60 s; 60 s locks."""
    server = _server(tmp_path_factory.mktemp("throttle"), [])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    """Short locks, and 127.0.0.1 a trusted proxy (X-Forwarded-For names the address)."""
    server = _server(tmp_path_factory.mktemp("throttle-short"), [
        "authentication.failures.max=3", "authentication.failures.address.max=6",
        "authentication.failures.lockout.ms=1500",
        "http.forwarded.trusted.addresses=127.0.0.1"])
    yield server
    server.stop()


def client(server: FranzServer, source: str, user: str | None = None,
           password: str | None = None) -> httpx.Client:
    auth = None if user is None else (user, PASSWORDS.get(user, "") if password is None
                                      else password)
    return httpx.Client(base_url=server.url, auth=auth, timeout=30.0,
                        transport=httpx.HTTPTransport(local_address=source))


_CLIENTS: dict[tuple[str, str], httpx.Client] = {}


@pytest.fixture(scope="module", autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    for c in _CLIENTS.values():
        c.close()
    _CLIENTS.clear()


def attempt(server: FranzServer, source: str, user: str, password: str | None = None,
            path: str = "/topics", **headers: str) -> httpx.Response:
    """One request as ``user`` from ``source`` (a kept-alive client per address)."""
    c = _CLIENTS.get((server.url, source))
    if c is None:
        c = _CLIENTS[(server.url, source)] = client(server, source)
    return c.get(path, headers=headers,
                 auth=(user, PASSWORDS.get(user, "") if password is None else password))


def assert_throttled(r: httpx.Response, *, media: str = V2, most: int = 60) -> int:
    assert r.status_code == 429, (r.status_code, r.text)
    assert r.headers["content-type"] == media
    body = r.json()
    assert body["error_code"] == 429 and isinstance(body["message"], str), body
    assert "www-authenticate" not in r.headers
    retry = int(r.headers["retry-after"])
    assert 1 <= retry <= most, retry
    return retry


def metrics(server: FranzServer) -> dict[str, float]:
    with client(server, "127.0.0.1", "admin") as admin:
        r = admin.get("/metrics")
    assert r.status_code == 200, r.text
    found = {}
    for name in ("franz_authentication_failures_total", "franz_authentication_throttled_total"):
        match = re.search(rf"^{name} ([0-9.e+]+)$", r.text, re.M)
        assert match, f"{name} not in /metrics"
        found[name] = float(match.group(1))
    return found


def audit_lines(server: FranzServer) -> list[dict[str, Any]]:
    out = []
    for line in server.log_path.read_text(errors="replace").splitlines():
        _, sep, rest = line.partition("franz.audit: ")
        if sep:
            out.append(json.loads(rest))
    return out


def test_sixty_wrong_passwords_then_the_right_one_is_refused(broker: FranzServer) -> None:
    source = "127.0.0.11"
    statuses = [attempt(broker, source, "alice", f"guess-{i}").status_code for i in range(60)]
    assert statuses[:5] == [401] * 5, statuses
    assert set(statuses[5:]) == {429}, statuses
    assert_throttled(attempt(broker, source, "alice"))  # the right password: not checked
    # the principal is locked from any address, on v3 too (its media type)
    assert_throttled(attempt(broker, "127.0.0.12", "alice", path="/v3/clusters"),
                     media="application/json")


def test_another_principal_from_another_address_is_not_slowed(broker: FranzServer) -> None:
    for i in range(6):
        attempt(broker, "127.0.0.21", "bob", f"guess-{i}")
    assert_throttled(attempt(broker, "127.0.0.21", "bob"))
    started = time.monotonic()
    r = attempt(broker, "127.0.0.22", "carol")
    assert r.status_code == 200, r.text
    assert time.monotonic() - started < 5
    # the address has 5 failures, under its own limit: carol from there too
    assert attempt(broker, "127.0.0.21", "carol").status_code == 200


def test_a_success_resets_the_principal(broker: FranzServer) -> None:
    source = "127.0.0.31"
    for _round in range(2):
        for i in range(4):
            assert attempt(broker, source, "dave", f"guess-{i}").status_code == 401
        assert attempt(broker, source, "dave").status_code == 200
    # after the last success, five failures again lock the principal
    for i in range(5):
        assert attempt(broker, source, "dave", f"again-{i}").status_code == 401
    assert_throttled(attempt(broker, source, "dave"))


def test_an_address_trying_many_users_is_locked(broker: FranzServer) -> None:
    source = "127.0.0.41"
    for i in range(20):
        assert attempt(broker, source, f"nobody-{i}", "x").status_code == 401
    assert_throttled(attempt(broker, source, "erin"))  # a right password, from there
    with httpx.Client(base_url=broker.url, timeout=30.0,
                      transport=httpx.HTTPTransport(local_address=source)) as c:
        r = c.get("/topics", headers={"Authorization": "Basic garbage"})
    assert_throttled(r)
    assert attempt(broker, "127.0.0.42", "erin").status_code == 200  # elsewhere: fine


def test_throttled_attempts_are_counted_and_audited(broker: FranzServer) -> None:
    before = metrics(broker)
    source = "127.0.0.51"
    for i in range(5):
        assert attempt(broker, source, "frank", f"guess-{i}").status_code == 401
    for i in range(3):
        assert_throttled(attempt(broker, source, "frank", f"more-{i}"))
    after = metrics(broker)
    assert after["franz_authentication_failures_total"] - before[
        "franz_authentication_failures_total"] == 5
    assert after["franz_authentication_throttled_total"] - before[
        "franz_authentication_throttled_total"] == 3
    deadline = time.monotonic() + 5
    while True:
        throttled = [a for a in audit_lines(broker) if a.get("result") == "throttled"
                     and a["principal"] == "User:frank"]
        if len(throttled) == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(throttled) == 3, throttled
    assert all(a["event"] == "authentication" and a["host"] == source for a in throttled)
    assert "more-0" not in broker.log_path.read_text(errors="replace")


def test_parallel_guesses_cannot_slip_past_the_limit(broker: FranzServer) -> None:
    source = "127.0.0.61"
    statuses: list[int] = []
    lock = threading.Lock()

    def guess(i: int) -> None:
        status = attempt(broker, source, "grace", f"parallel-{i}").status_code
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=guess, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses.count(401) <= 5, sorted(statuses)
    assert statuses.count(401) + statuses.count(429) == 30, sorted(statuses)


def test_parallel_requests_with_the_right_password_all_pass(broker: FranzServer) -> None:
    source = "127.0.0.71"
    statuses: list[int] = []
    lock = threading.Lock()

    def call() -> None:
        status = attempt(broker, source, "heidi").status_code
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=call) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 12, statuses
    # and they counted as no failure: it takes the usual five to lock heidi
    for i in range(5):
        assert attempt(broker, source, "heidi", f"guess-{i}").status_code == 401
    assert_throttled(attempt(broker, source, "heidi"))


def test_the_lock_ends_after_lockout_ms(short: FranzServer) -> None:
    source = "127.0.0.81"
    for i in range(3):
        assert attempt(short, source, "ivan", f"guess-{i}").status_code == 401
    retry = assert_throttled(attempt(short, source, "ivan"), most=2)
    time.sleep(1.6)
    assert retry <= 2
    assert attempt(short, source, "ivan").status_code == 200


def test_behind_a_trusted_proxy_the_forwarded_address_is_throttled(short: FranzServer) -> None:
    sprayer, other = "198.51.100.1", "198.51.100.2"
    for i in range(6):
        r = attempt(short, "127.0.0.1", f"nobody-{i}", "x", **{"X-Forwarded-For": sprayer})
        assert r.status_code == 401
    assert_throttled(attempt(short, "127.0.0.1", "judy", **{"X-Forwarded-For": sprayer}))
    assert attempt(short, "127.0.0.1", "judy", **{"X-Forwarded-For": other}).status_code == 200
    assert attempt(short, "127.0.0.1", "judy").status_code == 200  # the proxy itself
    deadline = time.monotonic() + 5
    while not [a for a in audit_lines(short) if a.get("result") == "throttled"
               and a["host"] == sprayer]:
        assert time.monotonic() < deadline, "no throttled audit line for the sprayer"
        time.sleep(0.05)
