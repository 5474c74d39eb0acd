"""SASL on Kafka's own protocol against a real ``franz serve``: real clients no one here
wrote (confluent-kafka / librdkafka, kafka-python, aiokafka) on a ``SASL_PLAINTEXT``
listener of a broker with HTTP Basic and ACLs on.

Users are made as an operator makes them: the super user ``admin`` with ``franz users
add --data-dir`` before the first start, the others online (``PUT /v3/.../users/{name}``
and ``franz users add --bootstrap-server``). Each test has users of its own: wrong
passwords lock their user (``authentication.failures.max=3``), and one throttle counts
failed logins of both doors. The address limit is off here (every client is 127.0.0.1,
and librdkafka retries a failed login by itself).

Checked: the right password produces, consumes in a group and commits with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512; a wrong password and an unknown user fail alike with
Kafka's authentication error, nothing written; a request other than ApiVersions and
SASL before authentication closes the connection, unanswered; the throttle locks a user
over both doors; the audit log has the Kafka door's failures as it has HTTP's.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.integration.conftest import ROOT, FranzServer, free_port
from tests.integration.test_security import acl, grant

ADMIN_PASSWORD = "admin-Passw0rd"
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SCRAMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
INVALID = ("Authentication failed during authentication due to invalid credentials with "
           "SASL mechanism {}")
SECURED = ["num.partitions=1", "offsets.topic.num.partitions=1",
           "authentication.method=BASIC", "authorizer.class.name=AclAuthorizer",
           "super.users=User:admin", "authentication.failures.max=3",
           "authentication.failures.address.max=0"]
WAIT_S = 15.0  # the longest any wait here may take


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def franz_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done


# --- the broker -------------------------------------------------------------------------------


@dataclass
class KafkaBroker:
    """A running ``franz serve`` with a Kafka listener, and its super user's HTTP client."""

    server: FranzServer
    kafka_port: int
    protocol: str  # the Kafka listener's security protocol
    admin: httpx.Client
    cluster_id: str
    ports: dict[str, int] = field(default_factory=dict)  # other Kafka listeners, by name

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def add_user(self, name: str, password: str) -> None:
        r = self.admin.put(f"/v3/clusters/{self.cluster_id}/users/{name}",
                           json={"password": password})
        assert r.status_code == 204, r.text

    def grant(self, *acls: dict[str, str]) -> None:
        grant(self.admin, self.cluster_id, *acls)

    def create_topic(self, name: str) -> str:
        r = self.admin.post(f"/v3/clusters/{self.cluster_id}/topics",
                            json={"topic_name": name, "partitions_count": 1})
        assert r.status_code == 201, r.text
        return name

    def end_offset(self, topic: str) -> int:
        r = self.admin.get(f"/topics/{topic}/partitions/0/offsets")
        assert r.status_code == 200, r.text
        return int(r.json()["end_offset"])

    def topics(self) -> list[str]:
        return list(self.admin.get("/topics").json())

    def audit(self) -> list[dict[str, Any]]:
        """The audit lines logged so far."""
        out = []
        for line in self.server.log_path.read_text(errors="replace").splitlines():
            _, found, text = line.partition("franz.audit: ")
            if found:
                out.append(json.loads(text))
        return out

    def wait_audit(self, match: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """The audit lines ``match`` accepts, once there is one (bounded)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            found = [a for a in self.audit() if match(a)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)


def start_broker(tmp: Path, listeners: Callable[[int], list[str]],
                 protocol: str, extra: list[str] = ()) -> KafkaBroker:
    """A broker whose super user ``admin`` was added offline, as before a first start."""
    port = free_port()
    server = FranzServer(tmp / "data", [*SECURED, *listeners(port), *extra])
    franz_cli("users", "add", "admin", "--data-dir", str(server.data_dir),
              stdin=ADMIN_PASSWORD + "\n")
    server.start()
    admin = httpx.Client(base_url=server.url, auth=("admin", ADMIN_PASSWORD), timeout=30.0)
    cluster_id = str(admin.get("/v3/clusters").json()["data"][0]["cluster_id"])
    return KafkaBroker(server, port, protocol, admin, cluster_id)


def stop_broker(broker: KafkaBroker) -> None:
    broker.admin.close()
    broker.server.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    b = start_broker(tmp_path_factory.mktemp("kafka-sasl"),
                     lambda port: [f"kafka.listeners=SASL_PLAINTEXT://127.0.0.1:{port}"],
                     "SASL_PLAINTEXT")
    yield b
    stop_broker(b)


# --- clients ------------------------------------------------------------------------------------


def rdkafka_conf(broker: KafkaBroker, mechanism: str, user: str, password: str,
                 **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": broker.protocol,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            # a failed login is retried by librdkafka itself: not too often
            "reconnect.backoff.ms": 500, "reconnect.backoff.max.ms": 1000, **extra}


def produce(conf: dict[str, Any], topic: str, values: list[bytes]) -> list[Any]:
    """Produce ``values`` (keys and a header each); the delivery reports' errors (None:
    delivered) in order."""
    errors: list[Any] = []
    p = Producer({**conf, "message.timeout.ms": 10000, "linger.ms": 0})
    for i, v in enumerate(values):
        p.produce(topic, v, key=b"k%d" % i, headers=[("h", b"x")],
                  on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(WAIT_S) == 0
    return errors


def consume_in_group(conf: dict[str, Any], topic: str, group: str,
                     count: int) -> tuple[list[Any], int]:
    """Subscribe in ``group``, read ``count`` records, commit them; the records and the
    offset the group committed (read back from the coordinator)."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        c.subscribe([topic])
        got: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m)
        assert len(got) == count, got
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, 0)], timeout=WAIT_S)
        return got, committed[0].offset
    finally:
        c.close()


def first_error(client: Producer | Consumer, errors: list[KafkaError],
                wanted: Callable[[KafkaError], bool]) -> KafkaError | None:
    """Poll ``client`` until its error_cb saw an error ``wanted`` accepts (bounded)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = next((e for e in errors if wanted(e)), None)
        if found is not None:
            return found
        client.poll(0.1)
    return None


def failed_login(broker: KafkaBroker, mechanism: str, user: str, password: str,
                 topic: str) -> str:
    """A librdkafka producer logging in as ``user``: the text of its first authentication
    error (it produced nothing)."""
    errors: list[KafkaError] = []
    p = Producer(rdkafka_conf(broker, mechanism, user, password,
                              error_cb=errors.append, **{"message.timeout.ms": 60000}))
    try:
        p.produce(topic, b"must not be written")
        err = first_error(p, errors, lambda e: e.code() == KafkaError._AUTHENTICATION)
        assert err is not None, errors
        return str(err.str())
    finally:
        p.purge()
        p.flush(0)


def reason(librdkafka_error: str) -> str:
    """The broker's message in a librdkafka authentication error:
    ``sasl_plaintext://...: SASL authentication error: <message> (after 5ms in state
    AUTH_REQ)``."""
    text = librdkafka_error.partition("SASL authentication error: ")[2]
    return text.rpartition(" (after ")[0] or text


class RawKafka:
    """One Kafka connection spoken to byte by byte (request header v1, non-flexible
    versions): what no client library would send, and exact answers."""

    def __init__(self, port: int, source: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5,
                                             source_address=(source, 0))
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawKafka:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, key: int, version: int, body: bytes) -> int:
        self.correlation_id += 1
        client = b"raw-test"
        frame = struct.pack(">hhih", key, version, self.correlation_id, len(client)) + client
        frame += body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        return self.correlation_id

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def receive(self) -> bytes | None:
        """The next answer's body (after its correlation id, which is checked); None
        when the broker closed the connection instead."""
        prefix = self._exactly(4)
        if prefix is None:
            return None
        frame = self._exactly(struct.unpack(">i", prefix)[0])
        assert frame is not None, "the connection closed inside an answer"
        assert struct.unpack_from(">i", frame)[0] == self.correlation_id
        return frame[4:]

    def closed(self) -> bool:
        """The broker closes the connection without another answer (bounded wait)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def api_versions(self) -> dict[int, tuple[int, int]]:
        self.send(18, 0, b"")
        body = self.receive()
        assert body is not None
        error, count = struct.unpack_from(">hi", body)
        assert error == 0
        return {k: (lo, hi) for k, lo, hi in
                (struct.unpack_from(">hhh", body, 6 + 6 * i) for i in range(count))}

    def handshake(self, mechanism: str) -> tuple[int, list[str]]:
        name = mechanism.encode()
        self.send(17, 1, struct.pack(">h", len(name)) + name)
        body = self.receive()
        assert body is not None
        error, count = struct.unpack_from(">hi", body)
        mechanisms, pos = [], 6
        for _ in range(count):
            n = struct.unpack_from(">h", body, pos)[0]
            mechanisms.append(body[pos + 2:pos + 2 + n].decode())
            pos += 2 + n
        return error, mechanisms

    def authenticate(self, token: bytes) -> tuple[int, str | None, bytes]:
        """SaslAuthenticate v1: (error code, error message, the server's bytes)."""
        self.send(36, 1, struct.pack(">i", len(token)) + token)
        body = self.receive()
        assert body is not None
        error, n = struct.unpack_from(">hh", body)
        message = None if n < 0 else body[4:4 + n].decode()
        pos = 4 + max(n, 0)
        size = struct.unpack_from(">i", body, pos)[0]
        return error, message, body[pos + 4:pos + 4 + size]

    def plain(self, user: str, password: str) -> tuple[int, str | None]:
        """A whole PLAIN login: (error code, error message)."""
        error, _ = self.handshake("PLAIN")
        assert error == 0
        code, message, _ = self.authenticate(f"\0{user}\0{password}".encode())
        return code, message


def metadata_v1(raw: RawKafka) -> None:
    raw.send(3, 1, struct.pack(">i", -1))  # every topic


def produce_v3(raw: RawKafka, topic: str) -> None:
    """A Produce v3 with one partition and an empty record set: a well-formed request."""
    name = topic.encode()
    raw.send(0, 3, struct.pack(">hhi", -1, 1, 5000) + struct.pack(">i", 1)
             + struct.pack(">h", len(name)) + name + struct.pack(">iii", 1, 0, 0))


# --- the right password --------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_right_password_produces_consumes_in_a_group_and_commits(
        broker: KafkaBroker, mechanism: str) -> None:
    user, topic, group = unique("user"), unique("t"), unique("g")
    password = f"{user}-Passw0rd"
    broker.add_user(user, password)
    broker.create_topic(topic)
    principal = f"User:{user}"
    broker.grant(acl("TOPIC", topic, principal, "WRITE"), acl("TOPIC", topic, principal, "READ"),
                 acl("GROUP", group, principal, "READ"))
    conf = rdkafka_conf(broker, mechanism, user, password)
    assert produce(conf, topic, [b"v0", b"v1", b"v2"]) == [None, None, None]
    assert broker.end_offset(topic) == 3
    records, committed = consume_in_group(conf, topic, group, 3)
    assert [(m.key(), m.value(), m.headers()) for m in records] == [
        (b"k0", b"v0", [("h", b"x")]), (b"k1", b"v1", [("h", b"x")]),
        (b"k2", b"v2", [("h", b"x")])]
    assert committed == 3
    # the same commit, seen over REST by the super user
    r = broker.admin.get(f"/v3/clusters/{broker.cluster_id}/consumer-groups/{group}/lags")
    assert r.status_code == 200, r.text
    assert [(x["topic_name"], x["current_offset"]) for x in r.json()["data"]] == [(topic, 3)]


def test_a_user_added_with_the_cli_online_logs_in_with_scram(broker: KafkaBroker,
                                                            tmp_path: Path) -> None:
    user, topic = unique("cli"), unique("t")
    config = tmp_path / "admin.properties"
    config.write_text(f"basic.auth.user.info=admin:{ADMIN_PASSWORD}\n")
    franz_cli("users", "add", user, "--bootstrap-server", broker.server.url,
              "--command-config", str(config), stdin="cli-Passw0rd\n")
    broker.create_topic(topic)
    broker.grant(acl("TOPIC", topic, f"User:{user}", "WRITE"))
    conf = rdkafka_conf(broker, "SCRAM-SHA-512", user, "cli-Passw0rd")
    assert produce(conf, topic, [b"one"]) == [None]
    assert broker.end_offset(topic) == 1


# --- wrong passwords, unknown users ---------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_and_an_unknown_user_fail_alike_and_write_nothing(
        broker: KafkaBroker, mechanism: str) -> None:
    user, nobody, topic = unique("wrong"), unique("nobody"), unique("t")
    broker.add_user(user, "the-Right-one")
    broker.create_topic(topic)
    broker.grant(acl("TOPIC", topic, f"User:{user}", "WRITE"))
    wrong = failed_login(broker, mechanism, user, "not-the-Right-one", topic)
    unknown = failed_login(broker, mechanism, nobody, "whatever-it-is", topic)
    assert reason(wrong) == reason(unknown) == INVALID.format(mechanism), (wrong, unknown)
    assert broker.end_offset(topic) == 0
    assert not [t for t in broker.topics() if t.startswith(("wrong-", "nobody-"))]
    # audited as HTTP failures are, with the mechanism, never the password
    for name in (user, nobody):
        lines = broker.wait_audit(lambda a, n=name: a["principal"] == f"User:{n}")
        assert lines and all(a["event"] == "authentication" and a["result"] == "failure"
                             and a["host"] == "127.0.0.1" and a["mechanism"] == mechanism
                             for a in lines[:1]), lines
    text = broker.server.log_path.read_text(errors="replace")
    assert "not-the-Right-one" not in text and "whatever-it-is" not in text


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_broker_answers_a_failed_login_before_it_closes(broker: KafkaBroker,
                                                            mechanism: str) -> None:
    """Kafka sends SASL_AUTHENTICATION_FAILED and closes the connection a moment later
    (connection.failed.authentication.delay.ms): a client that reads its socket to the
    end at once (kafka-python does) still reads the error."""
    with RawKafka(broker.kafka_port) as raw:
        if mechanism == "PLAIN":
            code, message = raw.plain(unique("nobody"), "x")
        else:
            assert raw.handshake(mechanism)[0] == 0
            code, _, first = raw.authenticate(b"n,,n=" + unique("nobody").encode() + b",r=abc")
            assert code == 0 and first.startswith(b"r=abc")
            nonce = first.split(b",")[0]
            proof = base64.b64encode(bytes(32 if mechanism.endswith("256") else 64))
            code, message, _ = raw.authenticate(b"c=biws," + nonce + b",p=" + proof)
        assert (code, message) == (58, INVALID.format(mechanism))
        t0 = time.monotonic()
        assert raw.closed()
        assert time.monotonic() - t0 >= 0.05


def test_an_unsupported_mechanism_is_refused_with_the_list(broker: KafkaBroker) -> None:
    """As Kafka: UNSUPPORTED_SASL_MECHANISM with the listener's mechanisms, then the
    connection ends (a client starts again on a new one)."""
    with RawKafka(broker.kafka_port) as raw:
        assert raw.handshake("GSSAPI") == (33, MECHANISMS)
        assert raw.closed()


def test_one_connection_has_one_sasl_exchange(broker: KafkaBroker) -> None:
    """A second SaslHandshake, mid-exchange, is ILLEGAL_SASL_STATE and ends the
    connection: nobody restarts an exchange (a guess) on it."""
    with RawKafka(broker.kafka_port) as raw:
        assert raw.handshake("SCRAM-SHA-256")[0] == 0
        code, _, first = raw.authenticate(b"n,,n=admin,r=abc")
        assert code == 0 and first.startswith(b"r=abc")
        assert raw.handshake("PLAIN") == (34, MECHANISMS)
        assert raw.closed()
    with RawKafka(broker.kafka_port) as raw:
        assert raw.handshake("PLAIN")[0] == 0
        assert raw.handshake("PLAIN") == (34, MECHANISMS)
        assert raw.closed()
    # after a login, ILLEGAL_SASL_STATE too (no re-authentication), the connection stays
    with RawKafka(broker.kafka_port) as raw:
        assert raw.plain("admin", ADMIN_PASSWORD) == (0, None)
        assert raw.handshake("PLAIN") == (34, MECHANISMS)
        metadata_v1(raw)
        assert raw.receive() is not None


# --- before authentication -----------------------------------------------------------------------


def test_only_api_versions_and_sasl_are_answered_before_authentication(
        broker: KafkaBroker) -> None:
    topic = broker.create_topic(unique("t"))
    with RawKafka(broker.kafka_port) as raw:
        versions = raw.api_versions()  # answered: a client asks before SaslHandshake
        assert versions[17] == (1, 1) and versions[36][0] == 0
        metadata_v1(raw)
        assert raw.receive() is None  # closed, nothing answered
    with RawKafka(broker.kafka_port) as raw:
        assert raw.handshake("PLAIN")[0] == 0
        produce_v3(raw, topic)  # mid-exchange
        assert raw.receive() is None
    with RawKafka(broker.kafka_port) as raw:
        code, message, _ = raw.authenticate(b"\0admin\0" + ADMIN_PASSWORD.encode())
        assert code == 34 and message  # ILLEGAL_SASL_STATE: no SaslHandshake first
        assert raw.closed()
    assert broker.end_offset(topic) == 0
    # a login that succeeded opens everything else
    with RawKafka(broker.kafka_port) as raw:
        assert raw.plain("admin", ADMIN_PASSWORD) == (0, None)
        metadata_v1(raw)
        assert raw.receive() is not None


def test_a_failed_exchange_cannot_go_on(broker: KafkaBroker) -> None:
    """After a failure the connection is closed: no second guess on it."""
    user = unique("again")
    broker.add_user(user, "the-Right-one")
    with RawKafka(broker.kafka_port) as raw:
        assert raw.plain(user, "guess")[0] == 58
        try:
            raw.send(17, 1, struct.pack(">h", 5) + b"PLAIN")
        except OSError:
            return
        assert raw.receive() is None


# --- kafka-python and aiokafka ---------------------------------------------------------------------


def _kafka_python_conf(broker: KafkaBroker, mechanism: str, user: str,
                       password: str) -> dict[str, Any]:
    return {"bootstrap_servers": broker.bootstrap, "security_protocol": broker.protocol,
            "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password, "request_timeout_ms": 10000}


@pytest.mark.parametrize("mechanism", SCRAMS)
def test_kafka_python_with_scram(broker: KafkaBroker, mechanism: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition

    user, topic, group = unique("kp"), unique("t"), unique("g")
    broker.add_user(user, "kp-Passw0rd")
    broker.create_topic(topic)
    p = f"User:{user}"
    broker.grant(acl("TOPIC", topic, p, "WRITE"), acl("TOPIC", topic, p, "READ"),
                 acl("GROUP", group, p, "READ"))
    conf = _kafka_python_conf(broker, mechanism, user, "kp-Passw0rd")
    producer = KafkaProducer(**conf)
    try:
        assert producer.send(topic, b"from-kafka-python").get(timeout=WAIT_S).offset == 0
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=int(WAIT_S * 1000),
                             **conf)
    try:
        first = next(iter(consumer))
        assert first.value == b"from-kafka-python"
        consumer.commit()
        assert consumer.committed(KpTopicPartition(topic, 0)) == 1
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", SCRAMS)
def test_kafka_python_reads_the_authentication_error(
        broker: KafkaBroker, mechanism: str, caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    caplog.set_level(logging.WARNING, "kafka")
    conf = _kafka_python_conf(broker, mechanism, unique("nobody"), "wrong")
    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(**conf, bootstrap_timeout_ms=1000)
    assert f"SaslAuthenticationFailedError: {INVALID.format(mechanism)}" in caplog.text


@pytest.mark.parametrize("mechanism", SCRAMS)
def test_aiokafka_with_scram(broker: KafkaBroker, mechanism: str,
                             caplog: pytest.LogCaptureFixture) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError
    from aiokafka.structs import TopicPartition as AioTopicPartition

    user, topic, group = unique("aio"), unique("t"), unique("g")
    broker.add_user(user, "aio-Passw0rd")
    broker.create_topic(topic)
    p = f"User:{user}"
    broker.grant(acl("TOPIC", topic, p, "WRITE"), acl("TOPIC", topic, p, "READ"),
                 acl("GROUP", group, p, "READ"))

    def conf(password: str) -> dict[str, Any]:
        return {"bootstrap_servers": broker.bootstrap, "security_protocol": broker.protocol,
                "sasl_mechanism": mechanism, "sasl_plain_username": user,
                "sasl_plain_password": password, "request_timeout_ms": 10000}

    async def run() -> None:
        producer = AIOKafkaProducer(**conf("aio-Passw0rd"))
        await producer.start()
        try:
            meta = await producer.send_and_wait(topic, b"from-aiokafka", key=b"k")
            assert meta.offset == 0
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                                    enable_auto_commit=False, **conf("aio-Passw0rd"))
        await consumer.start()
        try:
            got = await asyncio.wait_for(consumer.getone(), WAIT_S)
            assert (got.key, got.value) == (b"k", b"from-aiokafka")
            await consumer.commit()
            assert await consumer.committed(AioTopicPartition(topic, 0)) == 1
        finally:
            await consumer.stop()
        wrong = AIOKafkaProducer(**conf("wrong-password"))
        with pytest.raises(KafkaConnectionError):
            await wrong.start()
        await wrong.stop()

    caplog.set_level(logging.ERROR, "aiokafka")
    asyncio.run(asyncio.wait_for(run(), 60))
    assert f"SaslAuthenticationFailed: {INVALID.format(mechanism)}" in caplog.text


# --- one throttle for both doors --------------------------------------------------------------------


def test_failed_kafka_logins_lock_the_user_over_http_too(broker: KafkaBroker) -> None:
    user = unique("locked")
    broker.add_user(user, "the-Right-one")
    for _ in range(3):  # authentication.failures.max
        with RawKafka(broker.kafka_port) as raw:
            assert raw.plain(user, "a-guess") == (58, INVALID.format("PLAIN"))
    with RawKafka(broker.kafka_port) as raw:  # locked: even the right password
        code, message = raw.plain(user, "the-Right-one")
    assert code == 58 and message is not None
    assert message.startswith("too many failed authentications; retry in "), message
    r = httpx.get(broker.server.url + "/topics", auth=(user, "the-Right-one"), timeout=10)
    assert r.status_code == 429, r.text
    assert 0 < int(r.headers["retry-after"]) <= 60
    throttled = broker.wait_audit(lambda a: a["principal"] == f"User:{user}"
                                  and a["result"] == "throttled")
    assert {a.get("mechanism") for a in throttled} >= {"PLAIN"}, throttled
    # other users go on
    with RawKafka(broker.kafka_port) as raw:
        assert raw.plain("admin", ADMIN_PASSWORD) == (0, None)


def test_failed_http_logins_lock_the_user_over_kafka_too(broker: KafkaBroker) -> None:
    user, topic = unique("locked"), broker.create_topic(unique("t"))
    broker.add_user(user, "the-Right-one")
    broker.grant(acl("TOPIC", topic, f"User:{user}", "WRITE"))
    for _ in range(3):
        r = httpx.get(broker.server.url + "/topics", auth=(user, "a-guess"), timeout=10)
        assert r.status_code == 401
    error = failed_login(broker, "SCRAM-SHA-256", user, "the-Right-one", topic)
    assert "too many failed authentications; retry in " in error, error
    assert broker.end_offset(topic) == 0


@pytest.fixture(scope="module")
def address_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """The address limit on (3), the principal limit out of the way; only raw clients
    from addresses of their own (127.0.0.x) fail here."""
    b = start_broker(tmp_path_factory.mktemp("kafka-sasl-address"),
                     lambda port: [f"kafka.listeners=SASL_PLAINTEXT://127.0.0.1:{port}"],
                     "SASL_PLAINTEXT", ["authentication.failures.max=100",
                                        "authentication.failures.address.max=3"])
    yield b
    stop_broker(b)


def test_failed_kafka_logins_lock_the_address_over_http_too(address_broker: KafkaBroker) -> None:
    b, guesser, bystander = address_broker, "127.0.0.5", "127.0.0.6"
    for _ in range(3):  # three users guessed from one address
        with RawKafka(b.kafka_port, source=guesser) as raw:
            assert raw.plain(unique("guess"), "a-guess")[0] == 58
    with RawKafka(b.kafka_port, source=guesser) as raw:  # any user from there
        code, message = raw.plain("admin", ADMIN_PASSWORD)
    assert code == 58 and message is not None and message.startswith("too many failed")
    transport = httpx.HTTPTransport(local_address=guesser)
    with httpx.Client(transport=transport, auth=("admin", ADMIN_PASSWORD), timeout=10) as c:
        r = c.get(b.server.url + "/topics")
    assert r.status_code == 429, r.text
    with RawKafka(b.kafka_port, source=bystander) as raw:  # other addresses go on
        assert raw.plain("admin", ADMIN_PASSWORD) == (0, None)


def test_a_success_clears_the_count(broker: KafkaBroker) -> None:
    user = unique("clears")
    broker.add_user(user, "the-Right-one")
    for _ in range(2):
        for _ in range(2):
            with RawKafka(broker.kafka_port) as raw:
                assert raw.plain(user, "a-guess")[0] == 58
        with RawKafka(broker.kafka_port) as raw:
            assert raw.plain(user, "the-Right-one") == (0, None)


def test_kafka_door_failures_are_counted_in_metrics(broker: KafkaBroker) -> None:
    def failures() -> float:
        text = broker.admin.get("/metrics").text
        line = next((x for x in text.splitlines()
                     if x.startswith("franz_authentication_failures_total")), None)
        return float(line.split()[-1]) if line else 0.0

    before = failures()
    with RawKafka(broker.kafka_port) as raw:
        assert raw.plain(unique("nobody"), "x")[0] == 58
    deadline = time.monotonic() + WAIT_S
    while failures() <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert failures() == before + 1


def test_a_consumer_with_a_wrong_password_joins_no_group(broker: KafkaBroker) -> None:
    user, group = unique("cg"), unique("g")
    broker.add_user(user, "the-Right-one")
    errors: list[KafkaError] = []
    c = Consumer(rdkafka_conf(broker, "SCRAM-SHA-512", user, "wrong", error_cb=errors.append,
                              **{"group.id": group}))
    try:
        c.subscribe([unique("t")])
        deadline = time.monotonic() + WAIT_S
        while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) \
                and time.monotonic() < deadline:
            c.poll(0.1)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    finally:
        c.close()
    r = broker.admin.get(f"/v3/clusters/{broker.cluster_id}/consumer-groups/{group}")
    assert r.status_code == 404, r.text

