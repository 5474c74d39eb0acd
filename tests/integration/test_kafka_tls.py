"""TLS on Kafka's own protocol against real ``franz serve`` processes, with certificates
made by trustme (as tests/integration/test_tls.py makes them) and confluent-kafka
(librdkafka) clients.

- ``open_broker``: an ``SSL://`` listener asking for no client certificate, nothing
  else secured: produce and consume over TLS; a plaintext client gets nowhere.
- ``broker``: ``SSL://`` with ``ssl.client.auth=required`` and ``SASL_SSL://`` beside it,
  ACLs on (``super.users=User:admin``), ``ssl.principal.mapping.rules`` mapping
  ``CN=<name>,OU=ServiceUsers,O=acme`` to ``<name>`` and nothing else. The certificate's
  principal is what ACLs see and what the audit log names; no certificate, one of another
  CA, or one no rule maps gets no connection; SASL_SSL logs in with SCRAM and needs no
  certificate.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, Producer

from tests.integration.conftest import free_port
from tests.integration.test_kafka_sasl import (
    WAIT_S,
    KafkaBroker,
    consume_in_group,
    first_error,
    produce,
    start_broker,
    stop_broker,
    unique,
)
from tests.integration.test_security import acl

RULES = r"RULE:^CN=(.*?),OU=ServiceUsers,O=acme$/$1/"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """broker.pem (127.0.0.1 and localhost, chain and key), ca.pem; for the clients
    alice, bob (OU=ServiceUsers, O=acme), stranger (OU=Contractors: no rule maps it) and
    rogue (signed by another CA) as <name>.crt and <name>.key."""
    ca, other_ca = trustme.CA(), trustme.CA()
    root = tmp_path_factory.mktemp("kafka-pki")
    files = {"broker": root / "broker.pem", "ca": root / "ca.pem"}
    ca.issue_cert("127.0.0.1", "localhost", common_name="broker") \
        .private_key_and_cert_chain_pem.write_to_path(str(files["broker"]))
    ca.cert_pem.write_to_path(str(files["ca"]))
    for name, issuer, unit in (("alice", ca, "ServiceUsers"), ("bob", ca, "ServiceUsers"),
                               ("stranger", ca, "Contractors"),
                               ("rogue", other_ca, "ServiceUsers")):
        leaf = issuer.issue_cert(f"{name}@example.com", common_name=name,
                                 organization_name="acme", organization_unit_name=unit)
        files[f"{name}.crt"] = root / f"{name}.crt"
        files[f"{name}.key"] = root / f"{name}.key"
        files[f"{name}.crt"].write_bytes(b"".join(p.bytes() for p in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(files[f"{name}.key"]))
    return files


def _ssl_props(pki: dict[str, Path]) -> list[str]:
    return [f"ssl.keystore.location={pki['broker']}", f"ssl.truststore.location={pki['ca']}"]


@pytest.fixture(scope="module")
def open_broker(tmp_path_factory: pytest.TempPathFactory,
                pki: dict[str, Path]) -> Iterator[KafkaBroker]:
    b = start_broker(tmp_path_factory.mktemp("kafka-ssl-open"),
                     lambda port: [f"kafka.listeners=SSL://127.0.0.1:{port}",
                                   "ssl.client.auth=none"],
                     "SSL", [*_ssl_props(pki), "authorizer.class.name="])
    yield b
    stop_broker(b)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory,
           pki: dict[str, Path]) -> Iterator[KafkaBroker]:
    ports: dict[str, int] = {}

    def listeners(port: int) -> list[str]:
        ports["SASL_SSL"] = free_port()
        return [f"kafka.listeners=SSL://127.0.0.1:{port},"
                f"SASL_SSL://127.0.0.1:{ports['SASL_SSL']}",
                "ssl.client.auth=required", f"ssl.principal.mapping.rules={RULES}"]

    b = start_broker(tmp_path_factory.mktemp("kafka-ssl"), listeners, "SSL", _ssl_props(pki))
    b.ports.update(ports)
    yield b
    stop_broker(b)


def tls_conf(broker: KafkaBroker, pki: dict[str, Path], client: str | None = None,
             **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL",
                            "ssl.ca.location": str(pki["ca"]),
                            "reconnect.backoff.ms": 500, "reconnect.backoff.max.ms": 1000}
    if client is not None:
        conf["ssl.certificate.location"] = str(pki[f"{client}.crt"])
        conf["ssl.key.location"] = str(pki[f"{client}.key"])
    return {**conf, **extra}


def refused(conf: dict[str, Any], topic: str) -> KafkaError:
    """A producer that cannot get through: its first transport-level error (SSL, a
    closed connection, all brokers down); it wrote nothing."""
    errors: list[KafkaError] = []
    p = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 60000})
    try:
        p.produce(topic, b"must not be written")
        err = first_error(p, errors, lambda e: e.code() in (
            KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
            KafkaError._AUTHENTICATION))
        assert err is not None, errors
        return err
    finally:
        p.purge()
        p.flush(0)


# --- SSL without client certificates ------------------------------------------------------------


def test_produce_and_consume_over_tls(open_broker: KafkaBroker, pki: dict[str, Path]) -> None:
    topic, group = open_broker.create_topic(unique("t")), unique("g")
    conf = tls_conf(open_broker, pki)
    assert produce(conf, topic, [b"a", b"b"]) == [None, None]
    records, committed = consume_in_group(conf, topic, group, 2)
    assert [m.value() for m in records] == [b"a", b"b"] and committed == 2
    # a client certificate nobody asked for changes nothing
    assert produce(tls_conf(open_broker, pki, "alice"), topic, [b"c"]) == [None]
    assert open_broker.end_offset(topic) == 3


def test_plaintext_and_unverified_clients_get_nowhere(open_broker: KafkaBroker,
                                                      pki: dict[str, Path]) -> None:
    topic = open_broker.create_topic(unique("t"))
    plain = {"bootstrap.servers": open_broker.bootstrap, "reconnect.backoff.ms": 500,
             "socket.timeout.ms": 3000}
    refused(plain, topic)
    other_ca = tls_conf(open_broker, pki, **{"ssl.ca.location": str(pki["rogue.crt"])})
    assert refused(other_ca, topic).code() in (KafkaError._SSL, KafkaError._TRANSPORT,
                                               KafkaError._ALL_BROKERS_DOWN)
    assert open_broker.end_offset(topic) == 0


# --- client certificates required: the certificate is the principal ----------------------------


def test_the_certificates_principal_is_what_acls_see(broker: KafkaBroker,
                                                     pki: dict[str, Path]) -> None:
    topic, group = broker.create_topic(unique("t")), unique("g")
    broker.grant(acl("TOPIC", topic, "User:alice", "WRITE"),
                 acl("TOPIC", topic, "User:alice", "READ"),
                 acl("GROUP", group, "User:alice", "READ"),
                 acl("TOPIC", topic, "User:bob", "DESCRIBE"))
    alice = tls_conf(broker, pki, "alice")
    assert produce(alice, topic, [b"from-alice"]) == [None]
    records, committed = consume_in_group(alice, topic, group, 1)
    assert records[0].value() == b"from-alice" and committed == 1
    # bob may see the topic, not write to it: his certificate says who he is
    errors = produce(tls_conf(broker, pki, "bob"), topic, [b"from-bob"])
    assert errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors
    assert broker.end_offset(topic) == 1
    lines = broker.wait_audit(lambda a: a["principal"] == "User:bob"
                              and a["resource"] == f"TOPIC:{topic}")
    assert lines and lines[0] == {"event": "authorization", "principal": "User:bob",
                                  "host": "127.0.0.1", "operation": "WRITE",
                                  "resource": f"TOPIC:{topic}", "result": "denied"}, lines


def test_no_certificate_or_another_cas_gets_no_connection(broker: KafkaBroker,
                                                          pki: dict[str, Path]) -> None:
    topic = broker.create_topic(unique("t"))
    broker.grant(acl("TOPIC", topic, "User:*", "WRITE"))
    refused(tls_conf(broker, pki), topic)
    refused(tls_conf(broker, pki, "rogue"), topic)
    assert broker.end_offset(topic) == 0


def test_a_certificate_no_rule_maps_is_refused(broker: KafkaBroker,
                                               pki: dict[str, Path]) -> None:
    """As on HTTPS (and in Kafka, whose principal builder fails the handshake): not
    User:ANONYMOUS, which ``User:*`` ACLs would let in."""
    topic = broker.create_topic(unique("t"))
    broker.grant(acl("TOPIC", topic, "User:*", "WRITE"))
    refused(tls_conf(broker, pki, "stranger"), topic)
    assert broker.end_offset(topic) == 0
    lines = broker.wait_audit(lambda a: a["event"] == "authentication"
                              and "Contractors" in a.get("subject", ""))
    assert lines and lines[0]["result"] == "failure" and lines[0]["host"] == "127.0.0.1", lines
    assert lines[0]["mechanism"] == "SSL"


# --- SASL_SSL -------------------------------------------------------------------------------------


def test_sasl_ssl_with_scram(broker: KafkaBroker, pki: dict[str, Path]) -> None:
    user, topic, group = unique("carol"), broker.create_topic(unique("t")), unique("g")
    broker.add_user(user, "carol-Passw0rd")
    p = f"User:{user}"
    broker.grant(acl("TOPIC", topic, p, "WRITE"), acl("TOPIC", topic, p, "READ"),
                 acl("GROUP", group, p, "READ"))
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki["ca"]), "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": "carol-Passw0rd"}
    # no client certificate: SASL_SSL listeners ask for none
    assert produce(conf, topic, [b"over-sasl-ssl"]) == [None]
    records, committed = consume_in_group(conf, topic, group, 1)
    assert records[0].value() == b"over-sasl-ssl" and committed == 1
    # a certificate does not make the principal there: SASL does
    bob = {**conf, "ssl.certificate.location": str(pki["bob.crt"]),
           "ssl.key.location": str(pki["bob.key"])}
    assert produce(bob, topic, [b"still-carol"]) == [None]
    errors: list[KafkaError] = []
    wrong = Producer({**conf, "sasl.password": "wrong", "error_cb": errors.append,
                      "reconnect.backoff.ms": 500, "message.timeout.ms": 60000})
    try:
        wrong.produce(topic, b"must not be written")
        err = first_error(wrong, errors, lambda e: e.code() == KafkaError._AUTHENTICATION)
        assert err is not None, errors
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in err.str()
    finally:
        wrong.purge()
        wrong.flush(0)
    assert broker.end_offset(topic) == 2


def test_a_consumer_without_a_certificate_joins_nothing(broker: KafkaBroker,
                                                        pki: dict[str, Path]) -> None:
    group = unique("g")
    errors: list[KafkaError] = []
    c = Consumer({**tls_conf(broker, pki), "group.id": group, "error_cb": errors.append})
    try:
        c.subscribe([unique("t")])
        deadline = time.monotonic() + WAIT_S
        while not errors and time.monotonic() < deadline:
            c.poll(0.1)
        assert errors
    finally:
        c.close()
    r = broker.admin.get(f"/v3/clusters/{broker.cluster_id}/consumer-groups/{group}")
    assert r.status_code == 404, r.text
