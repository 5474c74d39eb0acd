"""franz's Kafka codec (api/kafka/protocol/codegen.py) on its own: the request and
response headers byte by byte, records as slices and regions, and the cases its
generated code once got wrong. Against other codecs: test_kafka_codec_interop.py;
hostile bytes: test_kafka_codec_hostile.py."""

from __future__ import annotations

import struct

import pytest

from api.kafka.protocol import codegen
from api.kafka.protocol.codegen import DecodeError, decoder, encode, encoder
from api.kafka.protocol.schema import Field, Message, Versions, load

# --- headers -------------------------------------------------------------------------


def test_request_header_v0_has_no_client_id() -> None:
    data = struct.pack(">hhi", 18, 0, 7)
    header, pos = decoder("RequestHeader", 0)(data, 0)
    assert pos == 8
    assert header == {"request_api_key": 18, "request_api_version": 0, "correlation_id": 7,
                      "client_id": ""}
    assert encode("RequestHeader", 0, header) == data


@pytest.mark.parametrize("client_id", ["kcat", "", None, "ключ-客户端"])
def test_request_header_v1_client_id_is_a_nullable_int16_string(client_id: str | None) -> None:
    raw = b"\xff\xff" if client_id is None else (
        struct.pack(">h", len(client_id.encode())) + client_id.encode())
    data = struct.pack(">hhi", 3, 12, -5) + raw
    header, pos = decoder("RequestHeader", 1)(data, 0)
    assert pos == len(data)
    assert header["client_id"] == client_id
    assert encode("RequestHeader", 1, header) == data


@pytest.mark.parametrize("client_id", ["rdkafka", "", None, "x" * 200])
def test_request_header_v2_client_id_stays_a_non_compact_string(client_id: str | None) -> None:
    """ClientId has "flexibleVersions": "none": an int16 length even in the flexible v2,
    then the header's tagged fields (none here)."""
    raw = b"\xff\xff" if client_id is None else (
        struct.pack(">h", len(client_id.encode())) + client_id.encode())
    data = struct.pack(">hhi", 0, 9, 1) + raw + b"\x00"
    header, pos = decoder("RequestHeader", 2)(data + b"body", 0)
    assert pos == len(data)
    assert header["client_id"] == client_id
    assert encode("RequestHeader", 2, header) == data


def test_request_header_v2_skips_unknown_tagged_fields() -> None:
    data = struct.pack(">hhih", 1, 13, 2, 1) + b"c" + b"\x02" + b"\x05\x02ab" + b"\x07\x00"
    header, pos = decoder("RequestHeader", 2)(data, 0)
    assert pos == len(data)
    assert header["client_id"] == "c"


def test_response_headers() -> None:
    assert encode("ResponseHeader", 0, {"correlation_id": 42}) == struct.pack(">i", 42)
    assert encode("ResponseHeader", 1, {"correlation_id": 42}) == struct.pack(">i", 42) + b"\x00"
    assert decoder("ResponseHeader", 1)(struct.pack(">i", -1) + b"\x00", 0) == (
        {"correlation_id": -1}, 5)
    with pytest.raises(DecodeError):
        decoder("ResponseHeader", 1)(struct.pack(">i", -1), 0)  # its tagged fields missing


# --- records -------------------------------------------------------------------------

BATCH = bytes(range(256)) * 3


def _produce(records: object) -> dict:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": records},
                                         {"index": 1, "records": None}]}]}


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_records_decode_as_a_view_of_the_frame(version: int) -> None:
    data = encode("ProduceRequest", version, _produce(BATCH))
    frame = bytearray(data)
    view = memoryview(frame)
    request, pos = decoder("ProduceRequest", version)(view, 0)
    assert pos == len(data)
    records = request["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview)
    assert records.obj is frame  # no copy: a slice of the very buffer given
    assert records == BATCH
    frame[data.index(BATCH)] ^= 0xFF  # the view sees a change of the frame
    assert records[0] == BATCH[0] ^ 0xFF
    assert request["topic_data"][0]["partition_data"][1]["records"] is None
    from_bytes, _ = decoder("ProduceRequest", version)(data, 0)
    assert from_bytes["topic_data"][0]["partition_data"][0]["records"] == BATCH


class Region:
    """A stand-in for a file region the server sends with sendfile: only a length."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def _fetch_response(records: list[object]) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "topic_id": bytes(16), "partitions": [
            {"partition_index": i, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
             "records": r} for i, r in enumerate(records)]}]}


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16])
def test_records_regions_are_separate_parts(version: int) -> None:
    regions = [Region(100), Region(7)]
    out = bytearray()
    parts: list[object] = []
    encoder("FetchResponse", version)(_fetch_response([regions[0], b"abc", regions[1]]), out,
                                      parts)
    assert [p for p in parts if isinstance(p, Region)] == regions
    assert all(isinstance(p, bytes) for p in parts if not isinstance(p, Region))
    assert parts[1] is regions[0] and parts[3] is regions[1]
    # the same bytes as with the regions' contents inline
    inline = encode("FetchResponse", version, _fetch_response([b"r" * 100, b"abc", b"s" * 7]))
    filled = b"".join(b"r" * 100 if p is regions[0] else b"s" * 7 if p is regions[1] else p
                      for p in parts) + bytes(out)
    assert filled == inline
    decoded, pos = decoder("FetchResponse", version)(inline, 0)
    assert pos == len(inline)
    assert [bytes(p["records"]) for p in decoded["responses"][0]["partitions"]] == [
        b"r" * 100, b"abc", b"s" * 7]


def test_bytes_like_records_stay_in_the_chunk() -> None:
    for value in (BATCH, bytearray(BATCH), memoryview(BATCH)):
        out = bytearray()
        parts: list[object] = []
        encoder("ProduceRequest", 9)(_produce(value), out, parts)
        assert parts == []
        assert bytes(out) == encode("ProduceRequest", 9, _produce(BATCH))


def test_large_records_are_a_part_of_their_own() -> None:
    """Records of 64 KiB or more are not copied into the chunk: the very object is a
    part (the server writes it as it is), and encode() joins them once."""
    big = bytes(range(256)) * 256  # 64 KiB
    assert len(big) == codegen.LARGE_RECORDS
    for value in (big, memoryview(big), bytearray(big)):
        out = bytearray()
        parts: list[object] = []
        encoder("ProduceRequest", 9)(_produce(value), out, parts)
        assert len(parts) == 2 and parts[1] is value and isinstance(parts[0], bytes)
        assert parts[0] + bytes(value) + bytes(out) == encode("ProduceRequest", 9, _produce(value))
    small = big[:-1]
    out = bytearray()
    parts = []
    encoder("ProduceRequest", 9)(_produce(small), out, parts)
    assert parts == []
    decoded, _ = decoder("ProduceRequest", 9)(encode("ProduceRequest", 9, _produce(big)), 0)
    assert decoded["topic_data"][0]["partition_data"][0]["records"] == big


# --- what once went wrong ------------------------------------------------------------


@pytest.mark.parametrize(("name", "version", "empty"), [
    ("ProduceResponse", 10, {"responses": [], "throttle_time_ms": 0, "node_endpoints": []}),
    ("FetchResponse", 16, {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                           "responses": [], "node_endpoints": []}),
    ("ApiVersionsResponse", 3, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0,
                                "supported_features": [], "finalized_features": []}),
])
def test_an_empty_tagged_array_is_not_written(name: str, version: int, empty: dict) -> None:
    """Kafka writes a tagged array only when it is not empty (its default): an empty
    one written as a tag cost bytes and differed from every other implementation."""
    without = {k: v for k, v in empty.items() if not k.endswith("_endpoints")
               and not k.endswith("_features")}
    assert encode(name, version, empty) == encode(name, version, without)
    assert encode(name, version, empty).endswith(b"\x00")  # no tagged field at all


def test_an_absent_struct_decodes_as_its_default_struct() -> None:
    """Kafka's default of a (non-nullable) struct field is the struct of its fields'
    defaults: FetchRequest v15+ without the tagged ReplicaState (every consumer) is
    replica -1, epoch -1, as a broker's would be; a handler reads it the same way in
    every version."""
    request = {"max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
               "session_id": 0, "session_epoch": -1, "topics": [], "forgotten_topics_data": [],
               "rack_id": ""}
    for version in (4, 14, 15, 17):
        decoded, _ = decoder("FetchRequest", version)(encode("FetchRequest", version, request), 0)
        assert decoded["replica_state"] == {"replica_id": -1, "replica_epoch": -1}, version
        decoded["replica_state"]["replica_id"] = 3  # a fresh dict per decode
        again, _ = decoder("FetchRequest", version)(encode("FetchRequest", version, request), 0)
        assert again["replica_state"]["replica_id"] == -1
    # the default struct is not written; any other value is
    plain = encode("FetchRequest", 15, request)
    assert encode("FetchRequest", 15, {**request, "replica_state": {
        "replica_id": -1, "replica_epoch": -1}}) == plain
    follower = encode("FetchRequest", 15, {**request, "replica_state": {
        "replica_id": 2, "replica_epoch": 7}})
    assert len(follower) > len(plain)
    decoded, _ = decoder("FetchRequest", 15)(follower, 0)
    assert decoded["replica_state"] == {"replica_id": 2, "replica_epoch": 7}


def test_a_nullable_struct_defaults_to_null() -> None:
    m = load("ConsumerGroupHeartbeatResponse")
    (assignment,) = [f for f in m.fields if f.name == "assignment"]
    assert assignment.default is None
    answer = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": None,
              "member_epoch": 1, "heartbeat_interval_ms": 3000, "assignment": None}
    data = encode("ConsumerGroupHeartbeatResponse", 0, answer)
    assert decoder("ConsumerGroupHeartbeatResponse", 0)(data, 0)[0]["assignment"] is None


def _message(fields: tuple[Field, ...], flexible: str = "1+") -> Message:
    return Message(name="Synthetic", api_key=None, kind="header", valid=Versions.parse("0-3"),
                   flexible=Versions.parse(flexible), fields=fields)


def _string(name: str, flexible_override: str | None) -> Field:
    return Field(name=name, kafka_name=name, type="string", versions=Versions.parse("0+"),
                 nullable=Versions.parse("none"), tagged=Versions.parse("none"), tag=None,
                 default="", flexible_override=None if flexible_override is None
                 else Versions.parse(flexible_override))


@pytest.mark.parametrize(("override", "compact_in"), [
    (None, {1, 2, 3}), ("none", set()), ("2+", {2, 3}), ("3+", {3})])
def test_a_field_flexible_versions_decide_its_compactness(override: str | None,
                                                          compact_in: set[int]) -> None:
    """A field's own "flexibleVersions" overrides the message's for that field (only
    RequestHeader's ClientId uses it today, with "none")."""
    message = _message((_string("s", override),))
    for version in range(4):
        enc = codegen._compile(message, version, "e")
        dec = codegen._compile(message, version, "d")
        out = bytearray()
        enc({"s": "abc"}, out, [])
        body = b"\x04abc" if version in compact_in else b"\x00\x03abc"
        tags = b"\x00" if version >= 1 else b""
        assert bytes(out) == body + tags, (override, version)
        assert dec(bytes(out), 0) == ({"s": "abc"}, len(out))


def test_a_tagged_field_must_fill_exactly_its_size() -> None:
    """A known tag whose value ends before or after the size it declared is malformed
    (the reader would otherwise go on inside it, or skip into the next field)."""
    # ProduceRequest v9, no topics; tagged field of ProduceResponse v10: node_endpoints
    base = encode("ProduceResponse", 10, {"responses": [], "throttle_time_ms": 0})
    assert base.endswith(b"\x00")
    endpoint = b"\x00\x00\x00\x01" + b"\x02h" + b"\x00\x00\x23\x84" + b"\x00" + b"\x00"
    value = b"\x02" + endpoint  # a compact array of one NodeEndpoint
    good = base[:-1] + b"\x01" + b"\x00" + bytes([len(value)]) + value
    decoded, pos = decoder("ProduceResponse", 10)(good, 0)
    assert pos == len(good)
    assert decoded["node_endpoints"] == [{"node_id": 1, "host": "h", "port": 9092, "rack": None}]
    short = base[:-1] + b"\x01" + b"\x00" + bytes([len(value) + 2]) + value + b"\x00\x00"
    long = base[:-1] + b"\x01" + b"\x00" + bytes([len(value) - 3]) + value
    for bad in (short, long):
        with pytest.raises(DecodeError):
            decoder("ProduceResponse", 10)(bad, 0)


@pytest.mark.parametrize(("name", "version", "obj", "field"), [
    ("ProduceRequest", 9, {"transactional_id": None, "acks": 1, "timeout_ms": 1,
                           "topic_data": None}, "topic_data"),
    ("ProduceRequest", 9, {"transactional_id": None, "acks": 1, "timeout_ms": 1,
                           "topic_data": [{"name": None, "partition_data": []}]}, "name"),
    ("MetadataRequest", 0, {"topics": None}, "topics"),
    ("SaslAuthenticateRequest", 1, {"auth_bytes": None}, "auth_bytes"),
    ("HeartbeatRequest", 4, {"group_id": None, "generation_id": 1, "member_id": "m"}, "group_id"),
])
def test_encoding_null_where_the_version_has_none_is_refused(name: str, version: int, obj: dict,
                                                             field: str) -> None:
    """Kafka's encoder throws on null in a non-nullable version; writing it would send
    bytes every reader refuses."""
    with pytest.raises(ValueError, match=field):
        encode(name, version, obj)


def test_a_uuid_must_be_16_bytes() -> None:
    obj = {"topics": [{"topic_id": b"\x01" * 15, "name": "t"}], "allow_auto_topic_creation": False,
           "include_topic_authorized_operations": False}
    with pytest.raises(ValueError, match="topic_id"):
        encode("MetadataRequest", 12, obj)
    obj["topics"][0]["topic_id"] = None  # None is the zero UUID (Kafka's "no id")
    decoded, _ = decoder("MetadataRequest", 12)(encode("MetadataRequest", 12, obj), 0)
    assert decoded["topics"][0]["topic_id"] == bytes(16)


def test_unknown_versions_are_refused() -> None:
    with pytest.raises(DecodeError):
        decoder("ProduceRequest", 12)
    with pytest.raises(ValueError):
        encoder("HeartbeatRequest", 5)
