"""TLS listeners of real ``franz serve`` processes, with certificates made by trustme:
https answers with the CA and refuses plain HTTP; http and https listeners side by side;
client certificates required; bad TLS or listener settings stop the start with a
message naming the property; a listener other hosts can reach needs authentication."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import trustme
from conftest import ROOT, START_TIMEOUT_S, V2, free_port

BINARY = "application/vnd.kafka.binary.v2+json"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """broker.pem (names 127.0.0.1 and localhost), alice.pem and bob.pem (clients),
    ca.pem, and a broker key encrypted with the password "s3cret" (broker-enc.pem)."""
    from cryptography.hazmat.primitives import serialization

    ca = trustme.CA()
    root = tmp_path_factory.mktemp("pki")
    files = {n: root / f"{n}.pem" for n in ("broker", "broker-enc", "alice", "bob", "ca")}
    leaf = ca.issue_cert("127.0.0.1", "localhost", common_name="broker")
    leaf.private_key_and_cert_chain_pem.write_to_path(str(files["broker"]))
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    files["broker-enc"].write_bytes(
        b"".join(p.bytes() for p in leaf.cert_chain_pems)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(b"s3cret")))
    ca.issue_cert("alice@example.com", common_name="alice", organization_name="acme") \
        .private_key_and_cert_chain_pem.write_to_path(str(files["alice"]))
    ca.issue_cert("bob@example.com", common_name="bob", organization_name="acme") \
        .private_key_and_cert_chain_pem.write_to_path(str(files["bob"]))
    ca.cert_pem.write_to_path(str(files["ca"]))
    return files


def _tls(pki: dict[str, Path], client: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    if client is not None:
        ctx.load_cert_chain(str(pki[client]))
    return ctx


def _ssl_props(pki: dict[str, Path], client_auth: str = "NONE") -> list[str]:
    return [f"ssl.keystore.location={pki['broker']}", f"ssl.truststore.location={pki['ca']}",
            f"ssl.client.authentication={client_auth}"]


def _cmd(data_dir: Path, listeners: str, props: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "app.cli", "serve", "--data-dir", str(data_dir),
           "--override", f"listeners={listeners}"]
    for p in props:
        cmd += ["--override", p]
    return cmd


@dataclass
class TlsServer:
    """One ``franz serve`` with the given listeners; ready when ``ready_url`` answers."""

    data_dir: Path
    listeners: str
    props: list[str]
    ready_url: str
    verify: ssl.SSLContext | bool = True
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / "server.log"

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                _cmd(self.data_dir, self.listeners, self.props), cwd=ROOT, stdout=log,
                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"franz exited with {self.proc.returncode}:\n"
                                   f"{self.log_path.read_text(errors='replace')[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.ready_url, verify=self.verify, timeout=1).status_code == 200:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"franz did not answer on {self.ready_url}")

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code, self.proc = self.proc.returncode, None
        return code


@contextlib.contextmanager
def serving(tmp_path: Path, listeners: str, props: list[str], ready_url: str,
            verify: ssl.SSLContext | bool = True) -> Iterator[TlsServer]:
    server = TlsServer(tmp_path / "data", listeners, props, ready_url, verify)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _refused_start(tmp_path: Path, listeners: str, props: list[str]) -> str:
    """Start a server that must refuse to start; its stderr."""
    done = subprocess.run(_cmd(tmp_path / "data", listeners, props), cwd=ROOT,
                          capture_output=True, timeout=60, check=False)
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode != 0, stderr
    assert "cannot start" in stderr and "Traceback" not in stderr, stderr
    return stderr


# --- https listeners --------------------------------------------------------------------------


def test_https_listener_answers_over_tls_only(tmp_path: Path, pki: dict[str, Path]) -> None:
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    with serving(tmp_path, url, _ssl_props(pki), url + "/", _tls(pki)) as server:
        r = httpx.get(url + "/v3/clusters", verify=_tls(pki))
        assert r.status_code == 200 and r.json()["data"]
        # the links name the scheme the request came in on
        assert r.json()["data"][0]["metadata"]["self"].startswith("https://")
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the https port
            httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
        with pytest.raises(httpx.ConnectError):  # a client that does not trust the CA
            httpx.get(url + "/", timeout=5)
        assert server.stop() == 0


def test_http_and_https_listeners_side_by_side(tmp_path: Path, pki: dict[str, Path]) -> None:
    plain, tls = free_port(), free_port()
    listeners = f"http://127.0.0.1:{plain},https://localhost:{tls}"
    with serving(tmp_path, listeners, _ssl_props(pki), f"http://127.0.0.1:{plain}/") as server:
        topic = "tls-mixed"
        r = httpx.post(f"https://localhost:{tls}/topics/{topic}", verify=_tls(pki),
                       headers={"Content-Type": BINARY},
                       json={"records": [{"value": "aGVsbG8="}]})
        assert r.status_code == 200 and r.json()["offsets"][0]["offset"] == 0, r.text
        r = httpx.get(f"http://127.0.0.1:{plain}/topics/{topic}/partitions/0/records",
                      params={"offset": 0}, headers={"Accept": BINARY})
        assert r.status_code == 200 and r.json()[0]["value"] == "aGVsbG8=", r.text
        assert httpx.get(f"http://127.0.0.1:{plain}/topics", headers={"Accept": V2}).json()
        # SIGTERM stops both servers, then the broker, cleanly
        assert server.stop() == 0
    for port in (plain, tls):
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/", timeout=2)


def test_large_bodies_on_concurrent_tls_connections_arrive_intact(
        tmp_path: Path, pki: dict[str, Path]) -> None:
    """Bodies larger than the TLS receive buffer (256 KiB), sent at once on several
    connections, are produced byte for byte: the buffer every connection shares is
    refilled and handed over correctly."""
    import asyncio
    import base64

    port = free_port()
    url = f"https://127.0.0.1:{port}"
    topic = "tls-large"

    def records(conn: int, n: int) -> list[dict[str, str]]:
        return [{"value": base64.b64encode(bytes([conn, i % 256]) * 1500).decode()}
                for i in range(n)]

    async def produce_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(verify=_tls(pki), timeout=60,
                                     limits=httpx.Limits(max_connections=6)) as client:
            return await asyncio.gather(*(
                client.post(f"{url}/topics/{topic}/partitions/0",
                            headers={"Content-Type": BINARY},
                            json={"records": records(conn, 300)})  # ~1.2 MB each
                for conn in range(6)))

    with serving(tmp_path, url, _ssl_props(pki), url + "/", _tls(pki)):
        answers = asyncio.run(produce_all())
        assert [r.status_code for r in answers] == [200] * 6, [r.text[:200] for r in answers]
        sent = {base64.b64encode(bytes([c, i % 256]) * 1500).decode()
                for c in range(6) for i in range(300)}
        got: list[str] = []
        with httpx.Client(verify=_tls(pki), timeout=30) as client:
            while len(got) < 1800:
                r = client.get(f"{url}/topics/{topic}/partitions/0/records",
                               params={"offset": len(got), "max_bytes": 4_000_000},
                               headers={"Accept": BINARY})
                assert r.status_code == 200 and r.json(), r.text[:300]
                got += [rec["value"] for rec in r.json()]
        assert len(got) == 1800 and set(got) == sent


def test_required_client_certificates(tmp_path: Path, pki: dict[str, Path]) -> None:
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    with serving(tmp_path, url, _ssl_props(pki, "REQUIRED"), url + "/", _tls(pki, "alice")):
        assert httpx.get(url + "/v3/clusters", verify=_tls(pki, "alice")).status_code == 200
        with pytest.raises(httpx.HTTPError):  # no client certificate: the handshake fails
            httpx.get(url + "/v3/clusters", verify=_tls(pki), timeout=5)


def test_client_certificates_meet_the_mapping_rules(tmp_path: Path, pki: dict[str, Path]) -> None:
    """The subject of the certificate reaches the broker (the ASGI TLS extension): a
    certificate no rule maps is refused; with REQUESTED, a client without one is not."""
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    props = [*_ssl_props(pki, "REQUESTED"), r"ssl.principal.mapping.rules=RULE:^CN=bob,.*$/bob/"]
    with serving(tmp_path, url, props, url + "/", _tls(pki)):
        assert httpx.get(url + "/v3/clusters", verify=_tls(pki)).status_code == 200
        r = httpx.get(url + "/v3/clusters", verify=_tls(pki, "alice"))  # CN=alice,O=acme
        assert r.status_code == 401, r.text
        assert "principal mapping rule" in r.text


def _audit_lines(server: TlsServer) -> list[dict[str, object]]:
    out = []
    for line in server.log_path.read_text(errors="replace").splitlines():
        _, found, text = line.partition("franz.audit: ")
        if found:
            out.append(json.loads(text))
    return out


def test_a_certificate_no_rule_maps_is_audited(tmp_path: Path, pki: dict[str, Path]) -> None:
    """Each request refused for a certificate no rule maps leaves an authentication
    failure in the audit log, as the Kafka door's refused connections do; a mapped
    certificate leaves none."""
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    props = [*_ssl_props(pki, "REQUESTED"), r"ssl.principal.mapping.rules=RULE:^CN=bob,.*$/bob/"]
    with serving(tmp_path, url, props, url + "/", _tls(pki)) as server:
        with httpx.Client(verify=_tls(pki, "bob")) as bob:
            assert bob.get(url + "/v3/clusters").status_code == 200
        with httpx.Client(verify=_tls(pki, "alice")) as alice:  # one connection, two requests
            for _ in range(2):
                assert alice.get(url + "/v3/clusters").status_code == 401
        deadline = time.monotonic() + 5
        while True:
            failures = [a for a in _audit_lines(server) if a["event"] == "authentication"]
            if len(failures) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert len(failures) == 2, failures
    subject = failures[0]["subject"]
    assert isinstance(subject, str) and "CN=alice" in subject and "O=acme" in subject, failures
    assert failures[0] == {
        "event": "authentication", "principal": "", "host": "127.0.0.1", "operation": "",
        "resource": "", "result": "failure", "mechanism": "SSL", "subject": subject,
        "reason": "No principal mapping rule matches the client certificate."}, failures
    assert failures[1] == failures[0]
    assert not [a for a in _audit_lines(server) if "bob" in json.dumps(a)]


def test_an_encrypted_key_with_its_password(tmp_path: Path, pki: dict[str, Path]) -> None:
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    props = [f"ssl.keystore.location={pki['broker-enc']}", "ssl.key.password=s3cret"]
    with serving(tmp_path, url, props, url + "/", _tls(pki)):
        assert httpx.get(url + "/", verify=_tls(pki)).status_code == 200


# --- settings that stop the start -------------------------------------------------------------


@pytest.mark.parametrize(("listener", "props", "named"), [
    ("https", [], "ssl.keystore.location"),
    ("https", ["ssl.keystore.location=no-such-file.pem"], "ssl.keystore.location='no-such-file.pem' cannot be read"),
    ("https", ["ssl.keystore.location={broker-enc}", "ssl.key.password=wrong"], "ssl.key.password"),
    ("https", ["ssl.keystore.location={broker-enc}"], "ssl.key.password"),
    ("https", ["ssl.keystore.location={ca}"], "ssl.keystore.location"),
    ("https", ["ssl.keystore.location={broker}", "ssl.client.authentication=REQUIRED"],
     "ssl.truststore.location"),
    ("https", ["ssl.keystore.location={broker}", "ssl.keystore.type=PKCS12"], "ssl.keystore.type"),
    ("ftp", [], "listeners: listener 'ftp://127.0.0.1"),
    ("http", ["authentication.method=SASL"], "authentication.method"),
])
def test_bad_settings_stop_the_start(tmp_path: Path, pki: dict[str, Path], listener: str,
                                     props: list[str], named: str) -> None:
    files = {f"{{{k}}}": str(v) for k, v in pki.items()}
    for key, path in files.items():
        props = [p.replace(key, path) for p in props]
    stderr = _refused_start(tmp_path, f"{listener}://127.0.0.1:{free_port()}", props)
    assert named in stderr, stderr


def test_a_busy_port_stops_the_start(tmp_path: Path, pki: dict[str, Path]) -> None:
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    with serving(tmp_path, url, _ssl_props(pki), url + "/", _tls(pki)):
        other = tmp_path / "other"
        stderr = _refused_start(other, f"http://127.0.0.1:{free_port()},{url}", _ssl_props(pki))
        assert f"listener {url} could not be opened" in stderr


def test_unauthenticated_listener_on_other_hosts(tmp_path: Path, pki: dict[str, Path]) -> None:
    port = free_port()
    stderr = _refused_start(tmp_path, f"http://0.0.0.0:{port}", [])
    assert f"http://0.0.0.0:{port}" in stderr and "listeners.unauthenticated.allow=true" in stderr
    stderr = _refused_start(tmp_path, f"https://:{port}", _ssl_props(pki, "REQUESTED"))
    assert f"https://:{port}" in stderr
    # a required client certificate authenticates: allowed
    with serving(tmp_path, f"https://0.0.0.0:{port}", _ssl_props(pki, "REQUIRED"),
                 f"https://127.0.0.1:{port}/", _tls(pki, "alice")):
        pass
    # and so does the operator's explicit choice
    with serving(tmp_path, f"http://0.0.0.0:{port}", ["listeners.unauthenticated.allow=true"],
                 f"http://127.0.0.1:{port}/"):
        pass
