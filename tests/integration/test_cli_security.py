"""``franz users``, ``franz acls`` and the client security of the commands, run as the
real executable against real ``franz serve`` processes: the first super user made
offline before the broker starts with Basic authentication and ACLs, users and ACLs
managed online with its credentials (``--command-config``, ``FRANZ_CLIENT_*``), what an
allowed and a denied client sees, API keys, wrong credentials, and https with a
truststore and a client certificate (commands and the bench's own HTTP/1.1 client)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import shutil
import ssl
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from conftest import ROOT, START_TIMEOUT_S, FranzServer

pytestmark = pytest.mark.timeout(180)

ADMIN_PASSWORD = "admin-Passw0rd"
ALICE_PASSWORD = "alice-Passw0rd"
SECURE = ["authentication.method=BASIC", "authorizer.class.name=AclAuthorizer",
          "super.users=User:admin"]
CLI_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("FRANZ_")},
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
}


def franz_command() -> list[str]:
    """The installed ``franz`` console script next to this interpreter, else
    ``python -m app.cli`` (run with ``CLI_ENV``: this checkout first)."""
    script = Path(sys.executable).with_name("franz")
    if script.exists():
        return [str(script)]
    found = shutil.which("franz")
    return [found] if found else [sys.executable, "-m", "app.cli"]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def franz(*args: str, stdin: str = "", env: dict[str, str] | None = None,
          timeout: float = 60.0) -> Result:
    proc = subprocess.run([*franz_command(), *args], input=stdin.encode(), capture_output=True,
                          cwd=ROOT, timeout=timeout, check=False, env={**CLI_ENV, **(env or {})})
    return Result(proc.returncode, proc.stdout.decode(errors="replace"),
                  proc.stderr.decode(errors="replace"))


@dataclass
class SecuredServer(FranzServer):
    """A ``franz serve`` that may answer 401 to anonymous requests and may be https:
    ready as soon as it answers anything (``probe`` verifies https)."""

    scheme: str = "http"
    probe: ssl.SSLContext | bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"franz exited with {self.proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/", timeout=1.0, verify=self.probe).status_code < 500:
                    return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"franz did not answer within {START_TIMEOUT_S}s:\n{self.log_tail()}")


@dataclass
class Secured:
    server: SecuredServer
    root: Path

    @property
    def url(self) -> str:
        return self.server.url

    def props(self, name: str, *lines: str) -> str:
        path = self.root / f"{name}.properties"
        path.write_text("# client settings, Kafka's names\n" + "\n".join(lines) + "\n")
        return str(path)

    def run(self, *args: str, config: str | None = None, stdin: str = "",
            env: dict[str, str] | None = None) -> Result:
        """``franz ARGS --bootstrap-server URL [--command-config FILE]``."""
        extra = ["--bootstrap-server", self.url] + (["--command-config", config] if config else [])
        return franz(*args, *extra, stdin=stdin, env=env)

    @property
    def admin(self) -> str:
        return self.props("admin", f"basic.auth.user.info=admin:{ADMIN_PASSWORD}")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """A broker with Basic authentication and ACLs whose super user ``admin`` was added
    offline, before its first start."""
    root = tmp_path_factory.mktemp("secured")
    data = root / "data"
    r = franz("users", "add", "admin", "--data-dir", str(data), stdin=ADMIN_PASSWORD + "\n")
    assert r.code == 0 and r.out == "Stored the password of user 'admin'.\n", r
    assert ADMIN_PASSWORD not in r.out + r.err
    server = SecuredServer(data, ["num.partitions=1", *SECURE])
    server.start()
    try:
        yield Secured(server, root)
    finally:
        server.stop()


def acl_list(secured: Secured, *filters: str) -> Any:
    r = secured.run("acls", "--list", *filters, "--output", "json", config=secured.admin)
    assert r.code == 0, r
    return r.json()


# --- users and ACLs online ------------------------------------------------------------------


def test_users_and_acls_decide_what_alice_may_do(secured: Secured) -> None:
    admin = secured.admin
    r = secured.run("users", "add", "alice", config=admin, stdin=ALICE_PASSWORD + "\n")
    assert (r.code, r.out) == (0, "Stored the password of user 'alice'.\n"), r
    r = secured.run("users", "list", config=admin)
    assert r.code == 0 and {"admin", "alice"} <= set(r.out.split()), r
    for topic in ("orders", "other"):
        r = secured.run("topics", "--create", "--topic", topic, config=admin)
        assert r.code == 0, r

    r = secured.run("acls", "--add", "--allow-principal", "User:alice", "--operation", "Write",
                    "--topic", "orders", config=admin)
    assert r.code == 0, r
    pattern = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    entry = "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)"
    assert r.out == f"Adding ACLs for resource `{pattern}`:\n\t{entry}\n\n", r
    r = secured.run("acls", "--list", config=admin)
    assert r.code == 0 and r.out == f"Current ACLs for resource `{pattern}`:\n\t{entry}\n\n", r
    assert acl_list(secured, "--topic", "orders") == [{
        "resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
        "principal": "User:alice", "host": "*", "operation": "WRITE", "permission": "ALLOW"}]
    assert acl_list(secured, "--principal", "User:bob") == []

    alice = secured.props("alice", f"basic.auth.user.info=alice:{ALICE_PASSWORD}")
    r = secured.run("produce", "--topic", "orders", config=alice, stdin="one\ntwo\n")
    assert (r.code, r.err) == (0, ""), r
    r = secured.run("produce", "--topic", "other", config=alice, stdin="one\n")
    assert r.code == 1 and "Not authorized to WRITE topic 'other'" in r.err, r
    r = secured.run("acls", "--add", "--allow-principal", "User:alice", "--topic", "x",
                    config=alice)
    assert r.code == 1 and "Not authorized" in r.err, r  # only a super user changes ACLs

    r = secured.run("acls", "--remove", "--allow-principal", "User:alice", "--operation", "Write",
                    "--topic", "orders", "--force", config=admin)
    assert r.code == 0 and r.out == f"Removed ACLs for resource `{pattern}`:\n\t{entry}\n\n", r
    assert acl_list(secured) == []
    r = secured.run("acls", "--list", config=admin)
    assert (r.code, r.out) == (0, ""), r
    r = secured.run("produce", "--topic", "orders", config=alice, stdin="three\n")
    assert r.code == 1 and "Not authorized to WRITE topic 'orders'" in r.err, r


def test_producer_and_consumer_shortcuts_and_filters(secured: Secured) -> None:
    admin = secured.admin
    r = secured.run("acls", "--add", "--allow-principal", "User:carol", "--producer",
                    "--consumer", "--topic", "logs-", "--group", "readers",
                    "--resource-pattern-type", "prefixed", "--output", "json", config=admin)
    assert r.code == 0, r
    ops = {(a["resource_type"], a["operation"]) for a in r.json()}
    assert ops == {("TOPIC", "WRITE"), ("TOPIC", "DESCRIBE"), ("TOPIC", "CREATE"),
                   ("TOPIC", "READ"), ("GROUP", "READ")}
    assert {a["pattern_type"] for a in r.json()} == {"PREFIXED"}
    matched = acl_list(secured, "--topic", "logs-app", "--resource-pattern-type", "match")
    assert {a["operation"] for a in matched} == {"WRITE", "DESCRIBE", "CREATE", "READ"}
    assert acl_list(secured, "--topic", "logs-", "--resource-pattern-type", "literal") == []
    r = secured.run("acls", "--remove", "--allow-principal", "User:carol", "--topic", "logs-",
                    "--group", "readers", "--force", "--output", "json", config=admin)
    assert r.code == 0 and len(r.json()) == 5, r
    assert acl_list(secured, "--principal", "User:carol") == []


def test_api_key_is_created_once_and_works_as_credentials(secured: Secured) -> None:
    r = secured.run("users", "add", "--api-key", "--output", "json", config=secured.admin)
    assert r.code == 0, r
    key, secret = r.json()["key"], r.json()["secret"]
    assert key.startswith("ak-") and len(secret) >= 32
    assert key in secured.run("users", "list", config=secured.admin).out.split()
    as_key = secured.props("key", f"basic.auth.user.info={key}:{secret}")
    r = secured.run("topics", "--list", config=as_key)
    assert r.code == 0, r
    r = secured.run("users", "delete", key, config=secured.admin)
    assert (r.code, r.out) == (0, f"Deleted user {key!r}.\n"), r
    r = secured.run("topics", "--list", config=as_key)
    assert r.code == 1 and "authentication failed" in r.err, r
    assert secret not in r.err


def test_wrong_or_missing_credentials_fail_authentication(secured: Secured) -> None:
    wrong = secured.props("wrong", "basic.auth.user.info=admin:not-the-password")
    r = secured.run("topics", "--list", config=wrong)
    assert r.code == 1 and r.out == "", r
    assert "authentication failed" in r.err and "'admin'" in r.err, r
    assert "not-the-password" not in r.err
    r = secured.run("topics", "--list")
    assert r.code == 1 and "authentication failed" in r.err, r
    assert "basic.auth.user.info" in r.err  # says how to give credentials


def test_credentials_from_the_environment_and_jaas(secured: Secured) -> None:
    env = {"FRANZ_CLIENT_BASIC_AUTH_USER_INFO": f"admin:{ADMIN_PASSWORD}"}
    r = secured.run("users", "list", env=env)
    assert r.code == 0 and "admin" in r.out.split(), r
    wrong = secured.props("wrong-file", "basic.auth.user.info=admin:nope")
    r = secured.run("users", "list", config=wrong, env=env)
    assert r.code == 1 and "authentication failed" in r.err, r  # the file wins
    jaas = secured.props(
        "jaas", "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\",
        f'    username="admin" password="{ADMIN_PASSWORD}";')
    r = secured.run("users", "list", config=jaas)
    assert r.code == 0 and "admin" in r.out.split(), r


def test_offline_user_added_while_the_broker_runs_is_noticed(secured: Secured) -> None:
    data = str(secured.server.data_dir)
    r = franz("users", "add", "bob", "--data-dir", data, stdin="bob-Passw0rd\r\n")
    assert r.code == 0, r
    assert "bob" in franz("users", "list", "--data-dir", data).out.split()
    deadline = time.monotonic() + 15
    status = 0
    while time.monotonic() < deadline:
        status = httpx.get(secured.url + "/v3/clusters", auth=("bob", "bob-Passw0rd"),
                           timeout=5).status_code
        if status == 200:
            break
        time.sleep(0.2)
    assert status == 200
    r = franz("users", "delete", "bob", "--data-dir", data)
    assert (r.code, r.out) == (0, "Deleted user 'bob'.\n"), r


def test_usage_errors_and_missing_things(secured: Secured, tmp_path: Path) -> None:
    admin = secured.admin
    r = secured.run("users", "delete", "nobody", config=admin)
    assert r.code == 1 and "nobody" in r.err and "does not exist" in r.err, r
    r = franz("users", "delete", "nobody", "--data-dir", str(secured.server.data_dir))
    assert r.code == 1 and "user 'nobody' does not exist" in r.err, r
    r = secured.run("users", "add", "bad/name", config=admin, stdin="pw\n")
    assert r.code == 2 and "user name 'bad/name'" in r.err, r
    r = secured.run("users", "add", "dave", config=admin, stdin="")
    assert r.code == 2 and "no password" in r.err, r
    r = secured.run("acls", "--remove", "--topic", "orders", config=admin)
    assert r.code == 2 and "--force" in r.err, r  # stdin is not a terminal
    r = secured.run("acls", "--add", "--allow-principal", "User:x", "--operation", "Frob",
                    "--topic", "t", config=admin)
    assert r.code == 2 and "--operation 'Frob' is not one of" in r.err, r
    r = franz("users", "list", "--data-dir", str(tmp_path / "nothing"))
    assert r.code == 2 and "no metadata.db" in r.err, r
    r = franz("users", "list", "--data-dir", "d", "--zookeeper", "z")
    assert r.code == 2 and "not allowed with argument" in r.err, r
    r = franz("users", "list")
    assert r.code == 2 and "give one target" in r.err, r
    with socket_port() as port:
        r = franz("users", "list", "--bootstrap-server", f"127.0.0.1:{port}")
    assert r.code == 2 and "connection refused" in r.err, r
    r = secured.run("topics", "--list", config=str(tmp_path / "missing.properties"))
    assert r.code == 2 and "--command-config" in r.err, r


@contextlib.contextmanager
def socket_port() -> Iterator[int]:
    """A port nothing listens on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def at_terminal(args: list[str], dialogue: list[tuple[str, str]], timeout: float = 60.0
                ) -> tuple[int, str]:
    """Run ``franz ARGS`` with a pseudo-terminal as its controlling terminal (getpass
    asks there); for each (prompt, answer) wait for the prompt, then type the answer.
    The exit code and everything the terminal showed."""
    leader, follower = pty.openpty()

    def attach() -> None:  # in the child: a session of its own, the pty its terminal
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([*franz_command(), *args], stdin=follower, stdout=follower,
                            stderr=follower, cwd=ROOT, env=CLI_ENV, preexec_fn=attach)
    os.close(follower)
    seen = b""
    asked_from = 0  # where to look for the next prompt: after the last one answered
    deadline = time.monotonic() + timeout
    pending = list(dialogue)
    try:
        while time.monotonic() < deadline:
            if pending and pending[0][0].encode() in seen[asked_from:]:
                os.write(leader, pending.pop(0)[1].encode() + b"\n")
                asked_from = len(seen)
                continue
            ready, _, _ = select.select([leader], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        return proc.wait(timeout), seen.decode(errors="replace")
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_password_and_confirmation_at_a_terminal(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    code, shown = at_terminal(["users", "add", "carol", "--data-dir", data],
                              [("Password for carol: ", "carol-pw"),
                               ("(again): ", "carol-pw")])
    assert code == 0 and "Stored the password of user 'carol'." in shown, shown
    assert "carol-pw" not in shown  # not echoed
    code, shown = at_terminal(["users", "add", "dan", "--data-dir", data],
                              [("Password for dan: ", "one"), ("(again): ", "two")])
    assert code == 2 and "the two passwords differ" in shown, shown
    assert franz("users", "list", "--data-dir", data).out.split() == ["carol"]

    r = franz("acls", "--add", "--allow-principal", "User:carol", "--operation", "Read",
              "--topic", "t", "--data-dir", data)
    assert r.code == 0, r
    code, shown = at_terminal(["acls", "--remove", "--topic", "t", "--data-dir", data],
                              [("(y/n)", "n")])
    assert code == 1 and "nothing was removed" in shown, shown
    assert "ResourcePatternFilter(resourceType=TOPIC, name=t, patternType=ANY)" in shown
    code, shown = at_terminal(["acls", "--remove", "--topic", "t", "--data-dir", data],
                              [("(y/n)", "y")])
    assert code == 0 and "Removed ACLs for resource" in shown, shown
    r = franz("acls", "--list", "--data-dir", data, "--output", "json")
    assert (r.code, r.json()) == (0, []), r


def test_bench_with_credentials(secured: Secured) -> None:
    r = secured.run("bench", "produce", "--topic", "bench-secured", "--records", "2000",
                    "--batch", "500", "--connections", "2", "--duration", "10",
                    "--output", "json", config=secured.admin)
    assert r.code == 0, r
    assert r.json()["records_acked"] == 2000


# --- https --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    ca = trustme.CA()
    root = tmp_path_factory.mktemp("client-pki")
    files = {n: str(root / f"{n}.pem") for n in ("broker", "client", "ca", "other-ca")}
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        files["broker"])
    ca.issue_cert("client@example.com", common_name="client") \
        .private_key_and_cert_chain_pem.write_to_path(files["client"])
    ca.cert_pem.write_to_path(files["ca"])
    trustme.CA().cert_pem.write_to_path(files["other-ca"])
    return files


@pytest.fixture(scope="module")
def mutual_tls(tmp_path_factory: pytest.TempPathFactory, pki: dict[str, str]
               ) -> Iterator[Secured]:
    """An https broker that requires a client certificate signed by the CA."""
    root = tmp_path_factory.mktemp("mtls")
    probe = ssl.create_default_context(cafile=pki["ca"])
    probe.load_cert_chain(pki["client"])
    server = SecuredServer(root / "data", [
        f"ssl.keystore.location={pki['broker']}", f"ssl.truststore.location={pki['ca']}",
        "ssl.client.authentication=REQUIRED"], scheme="https", probe=probe)
    server.overrides.append(f"listeners=https://127.0.0.1:{server.port}")
    server.start()
    try:
        yield Secured(server, root)
    finally:
        server.stop()


def test_https_with_truststore_and_client_certificate(mutual_tls: Secured,
                                                      pki: dict[str, str]) -> None:
    tls = mutual_tls.props("tls", f"ssl.truststore.location={pki['ca']}",
                           f"ssl.keystore.location={pki['client']}")
    r = mutual_tls.run("topics", "--create", "--topic", "secret-orders", config=tls)
    assert r.code == 0, r
    r = mutual_tls.run("produce", "--topic", "secret-orders", config=tls, stdin="a\nb\n")
    assert r.code == 0, r
    r = mutual_tls.run("bench", "produce", "--topic", "secret-orders", "--records", "1000",
                       "--batch", "250", "--connections", "2", "--duration", "10",
                       "--output", "json", config=tls)
    assert r.code == 0 and r.json()["records_acked"] == 1000, r

    env = {"FRANZ_CLIENT_SSL_TRUSTSTORE_LOCATION": pki["ca"],
           "FRANZ_CLIENT_SSL_KEYSTORE_LOCATION": pki["client"]}
    r = mutual_tls.run("topics", "--list", env=env)
    assert r.code == 0 and "secret-orders" in r.out.split(), r

    r = mutual_tls.run("topics", "--list", config=mutual_tls.props(
        "no-client-cert", f"ssl.truststore.location={pki['ca']}"))
    assert r.code == 2 and "cannot reach franz" in r.err, r  # the handshake is refused
    r = mutual_tls.run("topics", "--list", config=mutual_tls.props(
        "wrong-ca", f"ssl.truststore.location={pki['other-ca']}",
        f"ssl.keystore.location={pki['client']}"))
    assert r.code == 2 and "CERTIFICATE_VERIFY_FAILED" in r.err, r
    assert "ssl.truststore.location" in r.err
    r = mutual_tls.run("topics", "--list", config=mutual_tls.props(
        "missing-ca", f"ssl.truststore.location={pki['ca']}.missing"))
    assert r.code == 2 and "ssl.truststore.location=" in r.err and "cannot be read" in r.err, r
