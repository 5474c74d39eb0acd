"""Listeners: parsing, the first listener as host/port (and --host/--port replacing it),
the refusal of unauthenticated listeners other hosts can reach, inter-broker credentials,
and the broker registration's scheme in ZooKeeper's JSON."""

from __future__ import annotations

import json
import socket

import pytest

from app.assembly import RegisteredSchemes, _credentials
from app.listeners import (
    Listener,
    ListenerConfigError,
    bind_listener,
    check_exposure,
    is_loopback,
    listeners_of,
    parse_listeners,
)
from app.settings import load_config
from core.broker.metadata.cache import MetadataCache
from core.broker.metadata.store import BrokerRegistration
from core.broker.metadata.zk.paths import BrokerIdZNode


def _config(**props: object):  # noqa: ANN202
    return load_config(overrides=props, environ={})


def test_parse_listeners() -> None:
    assert parse_listeners(" http://127.0.0.1:8082, https://0.0.0.0:8443 ,https://:9443,"
                           "http://[::1]:8090,https://broker-1.example.com:443") == [
        Listener("http", "127.0.0.1", 8082), Listener("https", "0.0.0.0", 8443),
        Listener("https", "", 9443), Listener("http", "::1", 8090),
        Listener("https", "broker-1.example.com", 443)]
    assert parse_listeners("PLAINTEXT://h:1,SSL://h:2") == [Listener("http", "h", 1),
                                                          Listener("https", "h", 2)]
    assert parse_listeners("") == []
    assert str(Listener("https", "::1", 8443)) == "https://[::1]:8443"


@pytest.mark.parametrize(("text", "named"), [
    ("ftp://h:1", "unknown scheme 'ftp'"),
    ("http://h", "'http://h'"),
    ("h:8082", "'h:8082'"),
    ("http://h:0", "bad port '0'"),
    ("http://h:65536", "bad port"),
    ("http://h:80x", "bad port '80x'"),
    ("http://::1:8082", "IPv6 host goes in brackets"),
    ("http://[nope]:8082", "not an IPv6 address"),
    ("http://a:1,https://a:1", "duplicates http://a:1"),
    ("http://0.0.0.0:1,https://b:1", "duplicates"),
])
def test_bad_listeners_are_named(text: str, named: str) -> None:
    with pytest.raises(ValueError, match="listener") as info:
        parse_listeners(text)
    assert named in str(info.value)


def test_first_listener_is_host_and_port() -> None:
    config = _config(listeners="https://10.0.0.5:8443,http://127.0.0.1:8082")
    assert (config["host"], config["port"]) == ("10.0.0.5", 8443)
    assert config["listeners"] == "https://10.0.0.5:8443,http://127.0.0.1:8082"
    assert listeners_of(config) == [Listener("https", "10.0.0.5", 8443),
                                    Listener("http", "127.0.0.1", 8082)]


def test_host_and_port_overrides_replace_the_first_listener() -> None:
    config = _config(listeners="https://10.0.0.5:8443,http://127.0.0.1:8082", host="127.0.0.1",
                     port=9443)
    assert listeners_of(config) == [Listener("https", "127.0.0.1", 9443),
                                    Listener("http", "127.0.0.1", 8082)]
    clash = _config(listeners="https://10.0.0.5:8443,http://127.0.0.1:8082", host="127.0.0.1",
                    port=8082)
    with pytest.raises(ListenerConfigError, match="listeners"):
        listeners_of(clash)


def test_no_listeners_is_http_host_port() -> None:
    assert listeners_of(_config()) == [Listener("http", "127.0.0.1", 8082)]
    assert listeners_of(_config(host="::1", port=9000)) == [Listener("http", "::1", 9000)]


def test_a_bad_listeners_property_is_reported_when_served() -> None:
    config = _config(listeners="gopher://h:1")  # loading does not fail ...
    with pytest.raises(ListenerConfigError, match="listeners: .*unknown scheme"):
        listeners_of(config)  # ... the start does, naming the property


def test_loopback() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "localhost", "LOCALHOST"]))
    assert not any(map(is_loopback, ["", "0.0.0.0", "::", "10.0.0.1", "broker.example.com"]))


@pytest.mark.parametrize(("props", "refused"), [
    ({"listeners": "http://127.0.0.1:1,https://[::1]:2"}, None),
    ({"listeners": "http://127.0.0.1:1,http://0.0.0.0:2"}, "http://0.0.0.0:2"),
    ({"listeners": "https://:2"}, "https://:2"),
    ({"listeners": "https://0.0.0.0:2", "ssl.client.authentication": "REQUESTED"}, "https://0.0.0.0:2"),
    ({"listeners": "https://0.0.0.0:2", "ssl.client.authentication": "REQUIRED"}, None),
    ({"listeners": "http://10.1.1.1:2", "ssl.client.authentication": "REQUIRED"}, "http://10.1.1.1:2"),
    ({"listeners": "http://10.1.1.1:2", "authentication.method": "BASIC"}, None),
    ({"listeners": "http://10.1.1.1:2", "listeners.unauthenticated.allow": "true"}, None),
])
def test_exposure(props: dict[str, object], refused: str | None) -> None:
    config = _config(**props)
    if refused is None:
        check_exposure(listeners_of(config), config)
        return
    with pytest.raises(ListenerConfigError) as info:
        check_exposure(listeners_of(config), config)
    assert refused in str(info.value) and "listeners.unauthenticated.allow=true" in str(info.value)


def test_exposure_names_a_bad_authentication_method() -> None:
    config = _config(listeners="http://0.0.0.0:1", **{"authentication.method": "KERBEROS"})
    with pytest.raises(ListenerConfigError, match="authentication.method='KERBEROS'"):
        check_exposure(listeners_of(config), config)


def test_inter_broker_credentials() -> None:
    assert _credentials(_config()) == {}
    basic = _config(**{"authentication.method": "BASIC",
                       "inter.broker.basic.auth.user.info": "broker:s3:cret"})
    assert _credentials(basic) == {"Authorization": "Basic YnJva2VyOnMzOmNyZXQ="}
    bad = _config(**{"authentication.method": "BASIC", "inter.broker.basic.auth.user.info": "x"})
    with pytest.raises(ListenerConfigError, match="inter.broker.basic.auth.user.info"):
        _credentials(bad)


def test_registered_schemes() -> None:
    schemes = RegisteredSchemes(default="https")
    assert schemes(("h", 1)) == "https"  # no cache yet
    cache = MetadataCache()
    cache.set_brokers({1: BrokerRegistration(1, "h", 1), 2: BrokerRegistration(2, "h", 2, scheme="https")})
    schemes.cache = cache
    assert [schemes(("h", 1)), schemes(("h", 2)), schemes(("other", 3))] == ["http", "https", "https"]


def test_registration_json_carries_the_scheme_as_kafka_writes_it() -> None:
    ssl_reg = BrokerRegistration(3, "::1", 9093, timestamp_ms=7, scheme="https")
    doc = json.loads(BrokerIdZNode.encode(ssl_reg))
    assert doc["endpoints"] == ["HTTPS://[::1]:9093"]  # franz's own name, mapped to SSL
    assert doc["listener_security_protocol_map"] == {"HTTPS": "SSL"}
    assert (doc["host"], doc["port"]) == (None, -1)  # Kafka: those of a PLAINTEXT endpoint
    assert BrokerIdZNode.decode(3, BrokerIdZNode.encode(ssl_reg), czxid=9) == \
        BrokerRegistration(3, "::1", 9093, None, 7, 9, "https")
    plain = BrokerRegistration(4, "h", 8082, timestamp_ms=7)
    doc = json.loads(BrokerIdZNode.encode(plain))
    assert doc["endpoints"] == ["HTTP://h:8082"] and (doc["host"], doc["port"]) == (None, -1)
    assert doc["listener_security_protocol_map"] == {"HTTP": "PLAINTEXT"}
    assert BrokerIdZNode.decode(4, BrokerIdZNode.encode(plain), czxid=9).scheme == "http"


def test_registrations_kafka_wrote_with_named_listeners() -> None:
    data = json.dumps({"version": 5, "host": None, "port": -1, "timestamp": "1",
                       "endpoints": ["INTERNAL://b1:9094", "EXTERNAL://b1:9095"],
                       "listener_security_protocol_map": {"INTERNAL": "SASL_SSL",
                                                          "EXTERNAL": "SASL_PLAINTEXT"}}).encode()
    reg = BrokerIdZNode.decode(1, data, czxid=1)
    assert (reg.host, reg.port, reg.scheme) == ("b1", 9094, "https")
    both = json.dumps({"version": 5, "host": "b2", "port": 9092, "timestamp": "1",
                       "endpoints": ["SSL://b2:9093", "PLAINTEXT://b2:9092"],
                       "listener_security_protocol_map": {"SSL": "SSL",
                                                          "PLAINTEXT": "PLAINTEXT"}}).encode()
    assert BrokerIdZNode.decode(2, both, czxid=1).scheme == "http"  # the PLAINTEXT one


def test_bind_listener_binds_without_listening() -> None:
    sockets = bind_listener(Listener("http", "127.0.0.1", 0))
    try:
        assert len(sockets) == 1
        port = sockets[0].getsockname()[1]
        with pytest.raises(ConnectionRefusedError):  # bound, not yet accepting
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        for sock in sockets:
            sock.close()


def test_a_port_in_use_is_named_in_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ListenerConfigError) as info:
            bind_listener(Listener("http", "127.0.0.1", port))
    assert str(info.value) == (f"listener http://127.0.0.1:{port} could not be opened: port {port} "
                               "is already in use (another franz, or another program: stop it, "
                               "or change listeners / --port)")


def test_a_port_out_of_range_is_refused() -> None:
    with pytest.raises(ListenerConfigError, match="port=99999 is not a port"):
        listeners_of(_config(port=99999))
