"""Forwarded headers (X-Forwarded-For, X-Forwarded-Proto, RFC 7239 Forwarded) over real
``franz serve`` processes with HTTP Basic and ACLs: ignored from any peer not in
``http.forwarded.trusted.addresses`` (empty by default: loopback clients included, on
http and https alike), and from a trusted proxy read with the right-most untrusted
address as the client, the same host for ACLs, the audit log and the access log."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from tests.integration.conftest import JSON, ROOT, V2, FranzServer, free_port
from tests.integration.test_security import add_users

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw"}
SECURED = ["num.partitions=1", "authentication.method=BASIC",
           "authorizer.class.name=AclAuthorizer", "super.users=User:admin",
           "http.access.log=true", "log.format=json"]
FORGED = "10.9.9.9"
CLIENT = "203.0.113.5"  # what the trusted proxy saw: the denied host on the proxied broker
OTHER = "198.51.100.7"


class Broker:
    def __init__(self, server: FranzServer, https_port: int | None, ca: Path | None) -> None:
        self.server, self.https_port, self.ca = server, https_port, ca
        self.topic = f"fwd-{uuid.uuid4().hex[:8]}"

    def url(self, scheme: str) -> str:
        return self.server.url if scheme == "http" else f"https://127.0.0.1:{self.https_port}"

    def client(self, user: str, scheme: str = "http") -> httpx.Client:
        return httpx.Client(base_url=self.url(scheme), auth=(user, PASSWORDS[user]),
                            timeout=30.0, verify=ssl.create_default_context(cafile=str(self.ca))
                            if scheme == "https" else True)

    def log_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.server.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(e["message"]) for e in self.log_lines()
                if e.get("logger") == "franz.audit"]


def _start(tmp: Path, extra: list[str], deny_host: str, *, https: bool = False) -> Broker:
    ca_path = None
    https_port = None
    overrides = [*SECURED, *extra]
    port = free_port()
    if https:
        ca = trustme.CA()
        leaf = ca.issue_cert("127.0.0.1", "localhost")
        keystore, ca_path = tmp / "broker.pem", tmp / "ca.pem"
        leaf.private_key_and_cert_chain_pem.write_to_path(str(keystore))
        ca.cert_pem.write_to_path(str(ca_path))
        https_port = free_port()
        overrides += [f"listeners=http://127.0.0.1:{port},https://127.0.0.1:{https_port}",
                      f"ssl.keystore.location={keystore}"]
    server = FranzServer(tmp / "data", overrides, port=port)
    add_users(server.data_dir, PASSWORDS)
    server.start()
    broker = Broker(server, https_port, ca_path)
    with broker.client("admin") as admin:
        r = admin.post(f"/topics/{broker.topic}", json={"records": [{"value": 0}]},
                       headers={"Content-Type": JSON})
        assert r.status_code == 200, r.text
        cluster = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
        acls = [{"resource_type": "TOPIC", "resource_name": broker.topic,
                 "pattern_type": "LITERAL", "principal": "User:alice", "host": host,
                 "operation": "WRITE", "permission": permission}
                for host, permission in (("*", "ALLOW"), (deny_host, "DENY"))]
        r = admin.post(f"/v3/clusters/{cluster}/acls:batch", json={"data": acls})
        assert r.status_code == 204, r.text
    return broker


@pytest.fixture(scope="module")
def untrusted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """The defaults (no trusted proxy); alice may WRITE the topic, except from 127.0.0.1."""
    broker = _start(tmp_path_factory.mktemp("fwd-default"), [], "127.0.0.1", https=True)
    yield broker
    broker.server.stop()


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """127.0.0.1 and 10.1.0.0/16 are trusted proxies; alice is denied from CLIENT."""
    broker = _start(tmp_path_factory.mktemp("fwd-proxied"),
                    ["http.forwarded.trusted.addresses=127.0.0.1, 10.1.0.0/16"], CLIENT)
    yield broker
    broker.server.stop()


@pytest.fixture(scope="module")
def rfc7239(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A trusted proxy that writes RFC 7239 Forwarded."""
    broker = _start(tmp_path_factory.mktemp("fwd-rfc7239"),
                    ["http.forwarded.trusted.addresses=127.0.0.0/8",
                     "http.forwarded.header=Forwarded"], CLIENT)
    yield broker
    broker.server.stop()


def produce(c: httpx.Client, topic: str, **headers: str) -> httpx.Response:
    return c.post(f"/topics/{topic}", json={"records": [{"value": 1}]},
                  headers={"Content-Type": JSON, **headers})


def wait_for(predicate: Any, what: str, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {timeout} s: {what}")
        time.sleep(0.05)


# --- not trusted: the defaults -------------------------------------------------------------

# (Forwarded alone is left out: uvicorn never read it, so it proves nothing about the fix;
# "all" sends it beside the others)
FORGERIES = [
    {"X-Forwarded-For": FORGED},
    {"X-Forwarded-For": f"{FORGED}, {FORGED}"},
    {"X-Forwarded-For": FORGED, "Forwarded": f'for="{FORGED}"', "X-Real-IP": FORGED},
]


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("headers", FORGERIES, ids=["xff", "xff-chain", "all"])
def test_a_loopback_client_cannot_forge_its_host_past_a_deny_acl(
        untrusted: Broker, scheme: str, headers: dict[str, str]) -> None:
    with untrusted.client("alice", scheme) as alice:
        r = produce(alice, untrusted.topic, **headers)
    assert r.status_code == 403, r.text
    assert r.json()["error_code"] == 40301


def test_the_audit_and_access_logs_record_the_real_peer(untrusted: Broker) -> None:
    with untrusted.client("alice") as alice:
        assert produce(alice, untrusted.topic, **{"X-Forwarded-For": "10.8.8.8"}).status_code == 403
    denial = wait_for(lambda: [a for a in untrusted.audit() if a["event"] == "authorization"
                               and a["principal"] == "User:alice"], "the denial's audit line")
    assert {a["host"] for a in denial} == {"127.0.0.1"}
    access = [e for e in untrusted.log_lines() if e.get("logger") == "api.access_log"
              and e.get("status") == 403]
    assert access and all(e["client"].startswith("127.0.0.1:") for e in access)
    assert "10.8.8.8" not in untrusted.server.log_path.read_text(errors="replace")


def test_x_forwarded_proto_from_an_untrusted_peer_changes_no_link(untrusted: Broker) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    with untrusted.client("admin") as admin:
        r = admin.post(f"/consumers/{group}", json={"name": "c1"},
                       headers={"Content-Type": V2, "X-Forwarded-Proto": "https",
                                "Forwarded": "proto=https"})
        assert r.status_code == 200, r.text
        assert r.json()["base_uri"].startswith("http://127.0.0.1:"), r.json()
        admin.delete(f"/consumers/{group}/instances/c1", headers={"Content-Type": V2})


# --- a trusted proxy -------------------------------------------------------------------------


def test_a_trusted_proxy_names_the_client(proxied: Broker) -> None:
    with proxied.client("alice") as alice:
        assert produce(alice, proxied.topic).status_code == 200  # 127.0.0.1 itself
        r = produce(alice, proxied.topic, **{"X-Forwarded-For": CLIENT})
        assert r.status_code == 403, r.text
        assert produce(alice, proxied.topic, **{"X-Forwarded-For": OTHER}).status_code == 200


def test_the_right_most_untrusted_address_is_the_client(proxied: Broker) -> None:
    with proxied.client("alice") as alice:
        # the client wrote CLIENT itself; the proxy appended OTHER, what it saw
        assert produce(alice, proxied.topic,
                       **{"X-Forwarded-For": f"{CLIENT}, {OTHER}"}).status_code == 200
        # trusted hops (10.1.0.9) are skipped from the right
        assert produce(alice, proxied.topic,
                       **{"X-Forwarded-For": f"{OTHER}, {CLIENT}, 10.1.0.9"}).status_code == 403
        # every hop trusted: the left-most
        assert produce(alice, proxied.topic,
                       **{"X-Forwarded-For": "10.1.0.8, 10.1.0.9"}).status_code == 200


def test_a_trusted_proxy_ignores_the_header_it_does_not_write(proxied: Broker) -> None:
    with proxied.client("alice") as alice:
        assert produce(alice, proxied.topic, Forwarded=f"for={CLIENT}").status_code == 200


def test_the_audit_and_access_logs_name_the_forwarded_client(proxied: Broker) -> None:
    with proxied.client("alice") as alice:
        assert produce(alice, proxied.topic,
                       **{"X-Forwarded-For": f"{FORGED}, {CLIENT}"}).status_code == 403
    denial = wait_for(lambda: [a for a in proxied.audit() if a["event"] == "authorization"
                               and a["principal"] == "User:alice"], "the denial's audit line")
    assert {a["host"] for a in denial} == {CLIENT}
    access = wait_for(lambda: [e for e in proxied.log_lines()
                               if e.get("logger") == "api.access_log" and e.get("status") == 403],
                      "the access-log line of the denial")
    assert all(e["client"].startswith(f"{CLIENT}:") for e in access), access


def test_x_forwarded_proto_from_a_trusted_proxy_makes_https_links(proxied: Broker) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    with proxied.client("admin") as admin:
        r = admin.post(f"/consumers/{group}", json={"name": "c1"},
                       headers={"Content-Type": V2, "X-Forwarded-For": OTHER,
                                "X-Forwarded-Proto": "https"})
        assert r.status_code == 200, r.text
        assert r.json()["base_uri"].startswith("https://"), r.json()


def test_rfc7239_forwarded_from_a_trusted_proxy(rfc7239: Broker) -> None:
    with rfc7239.client("alice") as alice:
        assert produce(alice, rfc7239.topic, Forwarded=f"for={CLIENT};proto=http").status_code == 403
        assert produce(alice, rfc7239.topic, Forwarded=f'for="{CLIENT}:4711"').status_code == 403
        # right-most untrusted: the client's own element is not believed
        assert produce(alice, rfc7239.topic,
                       Forwarded=f"for={CLIENT}, for={OTHER}").status_code == 200
        # X-Forwarded-For is not the header this proxy writes
        assert produce(alice, rfc7239.topic, **{"X-Forwarded-For": CLIENT}).status_code == 200


# --- the property -----------------------------------------------------------------------------


@pytest.mark.parametrize("value,why", [
    ("10.0.0.0/33", "is not an IP address or CIDR"),
    ("127.0.0.1,proxy.example.com", "is not an IP address or CIDR"),
])
def test_a_bad_trusted_address_stops_the_start_naming_the_property(
        tmp_path: Path, value: str, why: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(free_port()), "--data-dir",
         str(tmp_path / "data"), "--override", f"http.forwarded.trusted.addresses={value}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r
    assert "http.forwarded.trusted.addresses" in r.stderr and why in r.stderr, r.stderr
    assert not (tmp_path / "data").exists()
