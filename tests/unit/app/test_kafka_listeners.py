"""Kafka listeners (app/kafka_listeners.py): Kafka's syntax and protocol map, the default
per command, what is advertised, the checks that name the property (ports of HTTP
listeners, exposure, SASL mechanisms, TLS), the bound sockets, and the endpoints a
standalone broker registers."""

from __future__ import annotations

import os
import socket
import ssl
from pathlib import Path

import pytest
import trustme

from app.assembly import build_broker
from app.kafka_listeners import (
    STANDALONE_DEFAULT,
    KafkaListener,
    bind_kafka_listeners,
    check_kafka_exposure,
    client_auth_of,
    kafka_advertised_of,
    kafka_limits_of,
    kafka_listeners_of,
    kafka_tls_contexts,
    open_kafka_door,
    parse_kafka_listeners,
    parse_protocol_map,
    sasl_mechanisms_of,
)
from app.listeners import ListenerConfigError, listeners_of, registry_listeners_of
from app.settings import ConfigError, load_config
from core.broker.admin.broker_config import BrokerConfig, broker_config_entries
from core.broker.metadata.store import Endpoint

DEFAULT_MAP = parse_protocol_map("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                 "SASL_SSL:SASL_SSL")


def _config(**props: object) -> BrokerConfig:
    return load_config(overrides=props, environ={})


def _listeners(**props: object) -> list[KafkaListener]:
    config = _config(**props)
    http = listeners_of(config)
    return kafka_listeners_of(config, [*http, *registry_listeners_of(config, http)])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- syntax -------------------------------------------------------------------------------


def test_parse_kafka_listeners_in_kafkas_syntax() -> None:
    assert parse_kafka_listeners(
        " PLAINTEXT://127.0.0.1:9092, sasl_ssl://:9094 ,SSL://[::1]:9093,"
        "SASL_PLAINTEXT://broker-1.example.com:9095,", DEFAULT_MAP) == [
        KafkaListener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),
        KafkaListener("SASL_SSL", "SASL_SSL", "", 9094),
        KafkaListener("SSL", "SSL", "::1", 9093),
        KafkaListener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "broker-1.example.com", 9095)]
    assert parse_kafka_listeners("", DEFAULT_MAP) == []
    lsn = parse_kafka_listeners("SSL://[::1]:9093", DEFAULT_MAP)[0]
    assert str(lsn) == "SSL://[::1]:9093" and lsn.is_tls and not lsn.is_sasl
    assert lsn.endpoint() == Endpoint("SSL", "::1", 9093, "SSL")
    sasl_ssl = KafkaListener("X", "SASL_SSL", "h", 1)
    assert sasl_ssl.is_tls and sasl_ssl.is_sasl


def test_own_names_through_the_protocol_map() -> None:
    protocols = parse_protocol_map("internal:plaintext, EXTERNAL:SASL_SSL")
    assert protocols == {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"}
    assert parse_kafka_listeners("INTERNAL://127.0.0.1:9092,external://0.0.0.0:9094",
                                 protocols) == [
        KafkaListener("INTERNAL", "PLAINTEXT", "127.0.0.1", 9092),
        KafkaListener("EXTERNAL", "SASL_SSL", "0.0.0.0", 9094)]
    # a map that is set replaces Kafka's default one, as in Kafka
    with pytest.raises(ValueError, match="PLAINTEXT has no security protocol"):
        parse_kafka_listeners("PLAINTEXT://h:1", protocols)


@pytest.mark.parametrize(("text", "why"), [
    ("PLAINTEXT:127.0.0.1:9092", "not NAME://HOST:PORT"),
    ("://h:1", "not NAME://HOST:PORT"),
    ("PLAINTEXT://h", "not NAME://HOST:PORT"),
    ("PLAINTEXT://::1:9092", "IPv6 host goes in brackets"),
    ("PLAINTEXT://[h]:9092", "not an IPv6 address"),
    ("PLAINTEXT://h:0", "bad port '0'"),
    ("PLAINTEXT://h:65536", "bad port '65536'"),
    ("PLAINTEXT://h:x", "bad port 'x'"),
    ("PLAINTEXT://a b:1", "bad host"),
    ("PLAIN.TEXT://h:1", "bad listener name"),
    ("CLIENT://h:1", "CLIENT has no security protocol"),
    ("HTTP://h:1", "name of franz's HTTP endpoint"),
    ("PLAINTEXT://h:1,plaintext://h:2", "has the name of PLAINTEXT://h:1"),
    ("PLAINTEXT://h:1,SSL://h:1", "duplicates PLAINTEXT://h:1"),
    ("PLAINTEXT://:1,SSL://h:1", "duplicates PLAINTEXT://:1"),
])
def test_bad_listeners_are_refused_naming_the_entry(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(".", r"\.")):
        parse_kafka_listeners(text, DEFAULT_MAP)


@pytest.mark.parametrize(("text", "why"), [
    ("PLAINTEXT", "not NAME:PROTOCOL"),
    ("A:FOO", "unknown security protocol 'FOO'"),
    ("A:SSL,a:PLAINTEXT", "A is mapped twice"),
    ("HTTPS:SSL", "franz's HTTP endpoint"),
])
def test_bad_protocol_maps(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_protocol_map(text)


@pytest.mark.parametrize(("key", "value", "why"), [
    ("kafka.listeners", "PLAINTEXT://h:99999", "bad port"),
    ("kafka.advertised.listeners", "PLAINTEXT//h:1", "not NAME://HOST:PORT"),
    ("listener.security.protocol.map", "A:TLS", "unknown security protocol"),
    ("sasl.enabled.mechanisms", "PLAIN,GSSAPI", "franz has no Kerberos"),
    ("sasl.enabled.mechanisms", "OAUTHBEARER", "unknown SASL mechanism"),
    ("ssl.client.auth", "maybe", "none, requested, required"),
    ("socket.request.max.bytes", "0", "Value must be in"),
])
def test_bad_values_stop_the_configuration_naming_the_key(key: str, value: str, why: str) -> None:
    with pytest.raises(ConfigError, match=f"--override {key}: .*{key}.*{why}"):
        _config(**{key: value})


def test_properties_in_the_broker_table() -> None:
    config = _config()
    assert config["kafka.listeners"] is None  # the command's default
    assert config["socket.request.max.bytes"] == 104857600
    assert config["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    assert config["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")
    entries = {e.name: e for e in broker_config_entries(config)}
    assert entries["kafka.listeners"].value is None and entries["kafka.listeners"].is_default
    set_here = {e.name: e for e in broker_config_entries(
        _config(**{"kafka.listeners": "PLAINTEXT://127.0.0.1:19092"}))}
    assert set_here["kafka.listeners"].value == "PLAINTEXT://127.0.0.1:19092"
    assert not set_here["kafka.listeners"].is_default
    # socket.request.max.bytes is read now, no longer one of the ignored Kafka keys
    assert _config(**{"socket.request.max.bytes": "1024"})["socket.request.max.bytes"] == 1024


# --- from the configuration ---------------------------------------------------------------


def test_default_per_command_and_empty_turns_it_off() -> None:
    assert _listeners() == [KafkaListener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)]
    assert STANDALONE_DEFAULT == "PLAINTEXT://127.0.0.1:9092"
    assert _listeners(**{"kafka.listeners": ""}) == []
    assert _listeners(**{"zookeeper.connect": "127.0.0.1:2181"}) == []  # franz broker
    assert _listeners(**{"zookeeper.connect": "127.0.0.1:2181",
                         "kafka.listeners": "PLAINTEXT://127.0.0.1:19092"}) == [
        KafkaListener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 19092)]


def test_errors_name_the_property() -> None:
    with pytest.raises(ListenerConfigError, match=r"^kafka\.listeners: .*CLIENT has no"):
        _listeners(**{"kafka.listeners": "CLIENT://127.0.0.1:9092"})
    with pytest.raises(ListenerConfigError, match=r"^listener\.security\.protocol\.map: "):
        kafka_listeners_of(BrokerConfig.from_properties(
            {"listener.security.protocol.map": "A:B"}))


def test_a_port_of_an_http_listener_is_refused() -> None:
    with pytest.raises(ListenerConfigError,
                       match=r"kafka\.listeners: listener PLAINTEXT://127\.0\.0\.1:8082 takes "
                             r"the port of the HTTP listener http://127\.0\.0\.1:8082"):
        _listeners(**{"kafka.listeners": "PLAINTEXT://127.0.0.1:8082"})
    with pytest.raises(ListenerConfigError, match="HTTP listener http://:9000"):
        _listeners(**{"listeners": "http://:9000", "kafka.listeners": "PLAINTEXT://127.0.0.1:9000"})
    with pytest.raises(ListenerConfigError, match="HTTP listener http://127.0.0.1:8081"):
        _listeners(**{"schema.registry.listeners": "http://127.0.0.1:8081",
                      "kafka.listeners": "SSL://127.0.0.1:8081"})
    # another host, the same port: two sockets
    assert _listeners(**{"kafka.listeners": "PLAINTEXT://127.0.0.2:8082"})[0].port == 8082


def test_advertised_default_replaces_wildcard_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "getfqdn", lambda *a: "broker-7.example.com")
    config = _config(**{"kafka.listeners": "PLAINTEXT://127.0.0.1:9092,SSL://0.0.0.0:9093,"
                                           "SASL_SSL://:9094,SASL_PLAINTEXT://[::]:9095"})
    listeners = kafka_listeners_of(config)
    assert [str(a) for a in kafka_advertised_of(config, listeners)] == [
        "PLAINTEXT://127.0.0.1:9092", "SSL://broker-7.example.com:9093",
        "SASL_SSL://broker-7.example.com:9094", "SASL_PLAINTEXT://broker-7.example.com:9095"]
    named = _config(**{"kafka.listeners": "PLAINTEXT://0.0.0.0:9092",
                       "advertised.host": "kafka.internal"})
    assert [str(a) for a in kafka_advertised_of(named, kafka_listeners_of(named))] == [
        "PLAINTEXT://kafka.internal:9092"]


def test_advertised_listeners_set() -> None:
    config = _config(**{
        "kafka.listeners": "INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9094",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
        "kafka.advertised.listeners": "external://kafka.example.com:443,"
                                      "INTERNAL://10.0.0.7:9092"})
    listeners = kafka_listeners_of(config)
    assert kafka_advertised_of(config, listeners) == [
        KafkaListener("EXTERNAL", "SASL_SSL", "kafka.example.com", 443),
        KafkaListener("INTERNAL", "PLAINTEXT", "10.0.0.7", 9092)]
    some = _config(**{"kafka.listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
                      "kafka.advertised.listeners": "SSL://h:9093"})
    assert [a.name for a in kafka_advertised_of(some, kafka_listeners_of(some))] == ["SSL"]


@pytest.mark.parametrize(("listeners", "advertised", "why"), [
    ("PLAINTEXT://127.0.0.1:9092", "SSL://h:9093", "SSL://h:9093 names no listener"),
    ("", "PLAINTEXT://h:9092", "none: the Kafka protocol is off"),
    ("PLAINTEXT://0.0.0.0:9092", "PLAINTEXT://0.0.0.0:9092", "nonroutable meta-address 0.0.0.0"),
    ("PLAINTEXT://127.0.0.1:9092", "PLAINTEXT://a:1,PLAINTEXT://b:2", "has the name of"),
])
def test_bad_advertised_listeners(listeners: str, advertised: str, why: str) -> None:
    config = BrokerConfig.from_properties({"kafka.listeners": listeners,  # start-time checks
                                           "kafka.advertised.listeners": advertised})
    with pytest.raises(ListenerConfigError, match=f"^kafka\\.advertised\\.listeners: .*{why}"):
        kafka_advertised_of(config, kafka_listeners_of(config))


def test_sasl_mechanisms() -> None:
    assert sasl_mechanisms_of(_config()) == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert sasl_mechanisms_of(_config(**{"sasl.enabled.mechanisms": "scram-sha-512, ,"})) == (
        "SCRAM-SHA-512",)
    off = _config(**{"sasl.enabled.mechanisms": "", "kafka.listeners": "SASL_SSL://h:1"})
    assert sasl_mechanisms_of(off, [KafkaListener("PLAINTEXT", "PLAINTEXT", "h", 2)]) == ()
    with pytest.raises(ListenerConfigError, match="sasl.enabled.mechanisms is empty: the "
                                                  "listener SASL_SSL://h:1"):
        sasl_mechanisms_of(off, kafka_listeners_of(off))


# --- exposure -----------------------------------------------------------------------------


@pytest.mark.parametrize(("props", "refused"), [
    ({"kafka.listeners": "PLAINTEXT://0.0.0.0:9092"}, True),
    ({"kafka.listeners": "PLAINTEXT://:9092"}, True),
    ({"kafka.listeners": "PLAINTEXT://10.0.0.7:9092", "authentication.method": "BASIC"}, True),
    ({"kafka.listeners": "SSL://0.0.0.0:9093"}, True),
    ({"kafka.listeners": "SSL://0.0.0.0:9093", "ssl.client.auth": "requested"}, True),
    ({"kafka.listeners": "SSL://0.0.0.0:9093", "ssl.client.auth": "required"}, False),
    ({"kafka.listeners": "SSL://0.0.0.0:9093", "ssl.client.authentication": "REQUIRED"}, False),
    ({"kafka.listeners": "SSL://0.0.0.0:9093", "ssl.client.authentication": "REQUIRED",
      "ssl.client.auth": "none"}, True),
    ({"kafka.listeners": "SASL_PLAINTEXT://0.0.0.0:9095"}, False),
    ({"kafka.listeners": "SASL_SSL://0.0.0.0:9094"}, False),
    ({"kafka.listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT2://localhost:9093,"
                         "PLAINTEXT3://[::1]:9094",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,PLAINTEXT2:PLAINTEXT,"
                                        "PLAINTEXT3:PLAINTEXT"}, False),
    ({"kafka.listeners": "PLAINTEXT://0.0.0.0:9092", "listeners.unauthenticated.allow": "true"},
     False),
])
def test_exposure(props: dict[str, str], refused: bool) -> None:
    config = _config(**props)
    listeners = kafka_listeners_of(config)
    if refused:
        with pytest.raises(ListenerConfigError, match="accepts connections from other hosts "
                                                      "without authentication.*SASL_PLAINTEXT "
                                                      "or SASL_SSL.*listeners.unauthenticated"):
            check_kafka_exposure(listeners, config)
    else:
        check_kafka_exposure(listeners, config)


def test_sasl_plain_without_tls_from_other_hosts_is_warned_about(
        caplog: pytest.LogCaptureFixture) -> None:
    config = _config(**{"kafka.listeners": "SASL_PLAINTEXT://0.0.0.0:9095"})
    check_kafka_exposure(kafka_listeners_of(config), config)
    assert "passwords cross the network in the clear" in caplog.text
    caplog.clear()
    scram = _config(**{"kafka.listeners": "SASL_PLAINTEXT://0.0.0.0:9095",
                       "sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    check_kafka_exposure(kafka_listeners_of(scram), scram)
    assert "clear" not in caplog.text


def test_client_auth_follows_franzs_setting_unless_set() -> None:
    assert client_auth_of(_config()) == "NONE"
    assert client_auth_of(_config(**{"ssl.client.authentication": "REQUESTED"})) == "REQUESTED"
    assert client_auth_of(_config(**{"ssl.client.authentication": "REQUIRED",
                                     "ssl.client.auth": "none"})) == "NONE"
    assert client_auth_of(_config(**{"ssl.client.auth": "Required"})) == "REQUIRED"


# --- TLS ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("kafka-pki")
    ca = trustme.CA()
    files = {"server": str(root / "server.pem"), "ca": str(root / "ca.pem")}
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(files["server"])
    ca.cert_pem.write_to_path(files["ca"])
    return files


def test_tls_contexts_per_security_protocol(pki: dict[str, str]) -> None:
    config = _config(**{"kafka.listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,"
                                           "SASL_SSL://127.0.0.1:9094,OTHER://127.0.0.1:9095",
                        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,"
                                                          "SASL_SSL:SASL_SSL,OTHER:SSL",
                        "ssl.keystore.location": pki["server"],
                        "ssl.truststore.location": pki["ca"], "ssl.client.auth": "required"})
    plain, tls, sasl_tls, other = kafka_tls_contexts(config, kafka_listeners_of(config))
    assert plain is None
    assert tls is not None and tls.verify_mode == ssl.CERT_REQUIRED
    assert sasl_tls is not None and sasl_tls.verify_mode == ssl.CERT_NONE  # KIP-684
    assert other is tls  # one context per security protocol


def test_tls_settings_that_cannot_work(pki: dict[str, str]) -> None:
    no_keystore = _config(**{"kafka.listeners": "SSL://127.0.0.1:9093"})
    with pytest.raises(ListenerConfigError, match="the SSL listener SSL://127.0.0.1:9093 of "
                                                  "kafka.listeners needs ssl.keystore.location"):
        kafka_tls_contexts(no_keystore, kafka_listeners_of(no_keystore))
    no_truststore = _config(**{"kafka.listeners": "SSL://127.0.0.1:9093",
                               "ssl.keystore.location": pki["server"],
                               "ssl.client.auth": "required"})
    with pytest.raises(ListenerConfigError, match="ssl.client.auth=REQUIRED needs "
                                                  "ssl.truststore.location"):
        kafka_tls_contexts(no_truststore, kafka_listeners_of(no_truststore))
    # SASL_SSL asks for no certificate: no truststore needed
    sasl = _config(**{"kafka.listeners": "SASL_SSL://127.0.0.1:9094",
                      "ssl.keystore.location": pki["server"], "ssl.client.auth": "required"})
    assert kafka_tls_contexts(sasl, kafka_listeners_of(sasl))[0] is not None


# --- limits, sockets, the door --------------------------------------------------------------


def test_limits() -> None:
    limits = kafka_limits_of(_config(**{"socket.request.max.bytes": "1048576",
                                        "connections.max.idle.ms": "5000",
                                        "max.connections": "7"}))
    assert (limits.max_request_bytes, limits.idle_ms, limits.max_connections) == (1048576, 5000, 7)
    assert kafka_limits_of(_config(), max_connections=3).max_connections == 3
    assert kafka_limits_of(_config()).max_request_bytes == 104857600


def test_open_kafka_door_binds_without_listening() -> None:
    port = _free_port()
    config = _config(**{"kafka.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                        "kafka.advertised.listeners": f"PLAINTEXT://kafka.example:{port}"})
    door = open_kafka_door(config, listeners_of(config))
    try:
        assert door and door.endpoints == (Endpoint("PLAINTEXT", "kafka.example", port,
                                                    "PLAINTEXT"),)
        assert door.mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
        [(sock, info, tls)] = list(door.listener_infos())
        assert sock.getsockname()[1] == port and tls is None
        assert (info.name, info.security_protocol, info.advertised_host,
                info.advertised_port) == ("PLAINTEXT", "PLAINTEXT", "kafka.example", port)
        with pytest.raises(ConnectionRefusedError):  # bound, not yet accepting
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        sock.listen()  # as the server will: now the port is in use
        with pytest.raises(ListenerConfigError,
                           match=rf"^kafka\.listeners: listener PLAINTEXT://127\.0\.0\.1:{port} "
                                 rf"could not be opened: port {port} is already in use .*"
                                 "change kafka.listeners"):
            open_kafka_door(config, listeners_of(config))
    finally:
        door.close()
    assert not open_kafka_door(_config(**{"kafka.listeners": ""}))


def test_a_failed_bind_leaves_nothing_open() -> None:
    first, taken = _free_port(), _free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        listeners = parse_kafka_listeners(
            f"PLAINTEXT://127.0.0.1:{first},SSL://127.0.0.1:{taken}", DEFAULT_MAP)
        holder.listen()
        before = len(os.listdir("/proc/self/fd"))
        with pytest.raises(ListenerConfigError, match=f"SSL://127.0.0.1:{taken}"):
            bind_kafka_listeners(listeners)
        assert len(os.listdir("/proc/self/fd")) == before  # the first one's socket was closed


async def test_a_standalone_broker_registers_its_advertised_kafka_endpoints(tmp_path: Path) -> None:
    config = _config(**{"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 1,
                        "kafka.listeners": "PLAINTEXT://127.0.0.1:19092,"
                                           "SASL_SSL://127.0.0.1:19094"})
    broker = await build_broker(config)
    await broker.start()
    try:
        assert broker.kafka_endpoints_of("PLAINTEXT") == [(0, "127.0.0.1", 19092, None)]
        assert broker.kafka_endpoints_of("sasl_ssl") == [(0, "127.0.0.1", 19094, None)]
        assert broker.kafka_endpoints_of("SSL") == []
        [reg] = await broker.store.live_brokers()
        assert (reg.host, reg.port) == ("127.0.0.1", 8082)  # the HTTP one, as before
    finally:
        await broker.stop()
    off = await build_broker(_config(**{"log.dirs": str(tmp_path / "data"),
                                        "offsets.topic.num.partitions": 1,
                                        "kafka.listeners": ""}))
    await off.start()
    try:
        assert off.kafka_endpoints_of("PLAINTEXT") == []
    finally:
        await off.stop()
