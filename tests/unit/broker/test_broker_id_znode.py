"""``/brokers/ids/<id>`` (``BrokerIdZNode``) with Kafka endpoints: Kafka's exact JSON with
franz's HTTP endpoint beside them, what franz wrote before its Kafka listeners, what
Kafka's own brokers write; and the cache's answer per listener name."""

from __future__ import annotations

import json

import pytest

from core.broker.metadata.cache import MetadataCache
from core.broker.metadata.store import BrokerRegistration, Endpoint
from core.broker.metadata.zk.paths import BrokerIdZNode, MalformedZNodeError

PLAINTEXT = Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")
SASL_SSL = Endpoint("SASL_SSL", "kafka-1.example.com", 9094, "SASL_SSL")


def test_kafka_endpoints_then_the_http_one_in_kafkas_json() -> None:
    reg = BrokerRegistration(1, "127.0.0.1", 8082, rack="r1", timestamp_ms=1700000000000,
                             kafka_endpoints=(PLAINTEXT, SASL_SSL))
    assert BrokerIdZNode.encode(reg) == (
        b'{"version":5,"host":"127.0.0.1","port":9092,"jmx_port":-1,'
        b'"timestamp":"1700000000000","endpoints":["PLAINTEXT://127.0.0.1:9092",'
        b'"SASL_SSL://kafka-1.example.com:9094","HTTP://127.0.0.1:8082"],'
        b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SASL_SSL":"SASL_SSL",'
        b'"HTTP":"PLAINTEXT"},"rack":"r1","features":{}}')
    assert BrokerIdZNode.decode(1, BrokerIdZNode.encode(reg), czxid=77) == \
        BrokerRegistration(1, "127.0.0.1", 8082, "r1", 1700000000000, 77, "http",
                           (PLAINTEXT, SASL_SSL))


def test_host_and_port_are_the_first_kafka_plaintext_endpoints() -> None:
    own = Endpoint("CLIENT", "::1", 19092, "PLAINTEXT")
    reg = BrokerRegistration(2, "b2", 8443, timestamp_ms=5, scheme="https",
                             kafka_endpoints=(SASL_SSL, own, PLAINTEXT))
    doc = json.loads(BrokerIdZNode.encode(reg))
    assert (doc["host"], doc["port"]) == ("::1", 19092)
    assert doc["endpoints"] == ["SASL_SSL://kafka-1.example.com:9094", "CLIENT://[::1]:19092",
                                "PLAINTEXT://127.0.0.1:9092", "HTTPS://b2:8443"]
    assert doc["listener_security_protocol_map"] == {
        "SASL_SSL": "SASL_SSL", "CLIENT": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT", "HTTPS": "SSL"}
    back = BrokerIdZNode.decode(2, BrokerIdZNode.encode(reg), czxid=1)
    assert (back.host, back.port, back.scheme) == ("b2", 8443, "https")
    assert back.kafka_endpoints == (SASL_SSL, own, PLAINTEXT)
    tls_only = BrokerRegistration(3, "b3", 8082, kafka_endpoints=(SASL_SSL,))
    doc = json.loads(BrokerIdZNode.encode(tls_only))
    assert (doc["host"], doc["port"]) == (None, -1)  # Kafka's: no PLAINTEXT endpoint
    assert BrokerIdZNode.decode(3, BrokerIdZNode.encode(tls_only), czxid=1).kafka_endpoints == (
        SASL_SSL,)


def _decode_as_franz_did_before(data: bytes) -> tuple[str, int, str]:
    """What a franz broker of the previous release reads from a registration (a rolling
    upgrade: old brokers still call the new ones)."""
    obj = json.loads(data)
    host, port, scheme = obj.get("host"), int(obj.get("port", -1)), "http"
    if host is None or port < 0:
        listener, _, hostport = obj["endpoints"][0].partition("://")
        host, _, port_text = hostport.rpartition(":")
        port = int(port_text)
        protocols = obj.get("listener_security_protocol_map") or {}
        if str(protocols.get(listener, listener)).upper() in ("SSL", "SASL_SSL"):
            scheme = "https"
    return str(host).strip("[]"), port, scheme


def test_without_kafka_endpoints_franz_brokers_of_the_previous_release_still_find_it() -> None:
    for reg in (BrokerRegistration(1, "h", 8082), BrokerRegistration(2, "h", 8443, scheme="https")):
        data = BrokerIdZNode.encode(reg)
        assert _decode_as_franz_did_before(data) == (reg.host, reg.port, reg.scheme)


def test_what_franz_wrote_before_its_kafka_listeners() -> None:
    plain = (b'{"version":5,"host":"h","port":8082,"jmx_port":-1,"timestamp":"7",'
             b'"endpoints":["PLAINTEXT://h:8082"],'
             b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"features":{}}')
    assert BrokerIdZNode.decode(1, plain, czxid=3) == BrokerRegistration(1, "h", 8082, None, 7, 3)
    tls = (b'{"version":5,"host":null,"port":-1,"jmx_port":-1,"timestamp":"7",'
           b'"endpoints":["SSL://[::1]:8443"],"listener_security_protocol_map":{"SSL":"SSL"},'
           b'"rack":"r","features":{}}')
    assert BrokerIdZNode.decode(2, tls, czxid=3) == BrokerRegistration(
        2, "::1", 8443, "r", 7, 3, "https")


def test_what_kafkas_own_brokers_write() -> None:
    # Kafka 3.x (ZooKeeper mode): its Map's own key order, a rack, two listeners
    kafka = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
             b'"SASL_SSL":"SASL_SSL"},"endpoints":["PLAINTEXT://kafka-1:9092",'
             b'"SASL_SSL://kafka-1:9094"],"jmx_port":9999,"port":9092,"host":"kafka-1",'
             b'"version":5,"timestamp":"1700000000000","rack":"eu-west-1a"}')
    reg = BrokerIdZNode.decode(1, kafka, czxid=4)
    assert (reg.host, reg.port, reg.scheme, reg.rack) == ("kafka-1", 9092, "http", "eu-west-1a")
    assert reg.kafka_endpoints == ()  # no HTTP endpoint: read as franz read it before
    # Kafka 0.10 (version 2: no protocol map, the names are the protocols)
    old = (b'{"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://h:9092"],"host":"h",'
           b'"version":2,"port":9092}')
    assert BrokerIdZNode.decode(5, old, czxid=1) == BrokerRegistration(5, "h", 9092, None, 1, 1)
    named = (b'{"version":4,"host":null,"port":-1,"timestamp":"1",'
             b'"endpoints":["internal://b1:9094","EXTERNAL://b1:9095"],'
             b'"listener_security_protocol_map":{"INTERNAL":"SASL_SSL",'
             b'"external":"SASL_PLAINTEXT"}}')
    reg = BrokerIdZNode.decode(6, named, czxid=1)
    assert (reg.host, reg.port, reg.scheme) == ("b1", 9094, "https")


@pytest.mark.parametrize("data", [
    b'{"version":5,"host":null,"port":-1,"endpoints":[]}',
    b'{"version":5,"host":null,"port":-1,"endpoints":["nonsense"]}',
    b'{"version":5,"host":"h","port":1,"endpoints":["HTTP://h:x"]}',
    b'{"version":5,"host":"h","port":1,"endpoints":["HTTP://h:1","PLAINTEXT//h:2"]}',
])
def test_malformed_registrations(data: bytes) -> None:
    with pytest.raises(MalformedZNodeError):
        BrokerIdZNode.decode(1, data, czxid=1)


def test_the_cache_answers_the_brokers_of_one_listener() -> None:
    cache = MetadataCache()
    cache.set_brokers({
        2: BrokerRegistration(2, "h2", 8084, rack="b", kafka_endpoints=(
            Endpoint("PLAINTEXT", "h2", 9094, "PLAINTEXT"),
            Endpoint("EXTERNAL", "k2.example.com", 443, "SASL_SSL"))),
        0: BrokerRegistration(0, "h0", 8082, rack="a", kafka_endpoints=(
            Endpoint("PLAINTEXT", "h0", 9092, "PLAINTEXT"),)),
        1: BrokerRegistration(1, "h1", 8083),  # its Kafka door is off
    })
    assert cache.kafka_endpoints_of("PLAINTEXT") == [(0, "h0", 9092, "a"), (2, "h2", 9094, "b")]
    assert cache.kafka_endpoints_of("external") == [(2, "k2.example.com", 443, "b")]
    assert cache.kafka_endpoints_of("SSL") == []
    assert cache.address_of(2) == ("h2", 8084)  # brokers still call each other over HTTP
