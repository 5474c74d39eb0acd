"""The connector's logic without a SparkSession: options, range splitting, admission
control, the range reader and the stream reader's offset planning, driven directly
(against the franz server where HTTP is involved). Fast; no JVM."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("pyspark", minversion="4.2")
pytest.importorskip("pyarrow")

from pyspark.sql.streaming.datasource import (  # noqa: E402
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
)

from spark_connector.client import FranzClient  # noqa: E402
from spark_connector.datasource import (  # noqa: E402
    FranzRange,
    FranzStreamReader,
    arrow_schema,
    franz_schema,
)
from spark_connector.offsets import (  # noqa: E402
    OffsetRange,
    rate_limit,
    split_ranges,
    to_json_offsets,
)
from spark_connector.options import (  # noqa: E402
    FranzOptionError,
    SchemaSpec,
    batch_checks,
    reader_conf,
    writer_conf,
)
from spark_connector.ranges import FranzDataLossError, iter_range, read_rows  # noqa: E402
from spark_connector.writer import (  # noqa: E402
    FranzProduceError,
    KeyScope,
    Producer,
    check_columns,
)

URL = {"url": "http://127.0.0.1:1"}


# --- options -----------------------------------------------------------------------------


def test_options_are_case_insensitive_and_typed() -> None:
    conf = reader_conf(
        {
            **URL,
            "SUBSCRIBE": " a, b ,,a",
            "maxoffsetspertrigger": "10",
            "includeHeaders": "TRUE",
            "http.header.X-Trace": "1",
            "auth.bearerToken": "tok",
            "maxTriggerDelay": "2m",
        }
    )
    assert conf.subscribe == ("a", "b")
    assert conf.max_offsets_per_trigger == 10 and conf.include_headers
    assert conf.max_trigger_delay_ms == 120_000
    assert dict(conf.http.headers) == {"X-Trace": "1", "Authorization": "Bearer tok"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t"}, "Option url is required"),
        ({**URL}, "Exactly one of the options subscribe, subscribePattern, assign"),
        ({**URL, "subscribe": "t", "subscribePattern": "t.*"}, "got subscribe, subscribePattern"),
        ({**URL, "subscribe": " , "}, "Option subscribe is empty"),
        ({**URL, "assign": '{"t": [0, "x"]}'}, "Option assign must be JSON like"),
        ({**URL, "subscribePattern": "("}, "is not a regex"),
        ({**URL, "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, "-2 (earliest)"),
        ({**URL, "subscribe": "t", "startingOffsets": '{"t": {"x": 1}}'}, "is not a number"),
        ({**URL, "subscribe": "t", "endingOffsets": "earliest"}, "endingOffsets=earliest"),
        ({**URL, "subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, "not allowed as an end"),
        ({**URL, "subscribe": "t", "minPartitions": "0"}, "minPartitions='0' must be >= 1"),
        ({**URL, "subscribe": "t", "failOnDataLoss": "maybe"}, "is not a boolean"),
        (
            {**URL, "subscribe": "t", "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "9"},
            "is larger than maxOffsetsPerTrigger",
        ),
        ({**URL, "subscribe": "t", "longPollTimeoutMs": "40000"}, "must exceed longPollTimeoutMs"),
        ({**URL, "subscribe": "t", "kafka.auto.offset.reset": "x"}, "use startingOffsets"),
        ({**URL, "subscribe": "t", "startingoffset": "x"}, "did you mean 'startingOffsets'"),
        ({"url": "localhost:8082", "subscribe": "t"}, "is not an http:// or https:// URL"),
    ],
)
def test_bad_reader_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(FranzOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        reader_conf(options)


def test_bootstrap_servers_alias_and_batch_rules() -> None:
    conf = reader_conf({"kafka.bootstrap.servers": "h1:1, https://h2:2", "subscribe": "t"})
    assert conf.http.urls == ("http://h1:1", "https://h2:2")
    with pytest.raises(FranzOptionError, match="must name the same partitions"):
        batch_checks(
            reader_conf(
                {
                    **URL,
                    "subscribe": "t",
                    "startingOffsets": '{"t": {"0": 1}}',
                    "endingOffsets": '{"t": {"1": 5}}',
                }
            )
        )
    with pytest.raises(FranzOptionError, match="after its endingOffsets"):
        batch_checks(
            reader_conf(
                {
                    **URL,
                    "subscribe": "t",
                    "startingOffsets": '{"t": {"0": 9}}',
                    "endingOffsets": '{"t": {"0": 5}}',
                }
            )
        )


def test_writer_options() -> None:
    conf = writer_conf({**URL, "path": "out", "batchsize": "10", "acks": "1"})
    assert (conf.topic, conf.batch_size, conf.acks) == ("out", 10, "1")
    with pytest.raises(FranzOptionError, match="Unknown option 'subscribe' for the franz writer"):
        writer_conf({**URL, "subscribe": "x"})


def test_writer_schema_options() -> None:
    plain = writer_conf({**URL, "topic": "t"})
    assert not plain.with_schemas
    assert (plain.key_schema, plain.value_schema) == (SchemaSpec("key"), SchemaSpec("value"))
    conf = writer_conf(
        {**URL, "topic": "t", "VALUEFORMAT": " Avro ", "keyformat": "jsonschema", "keySchemaId": "7"}
    )
    assert conf.with_schemas and conf.acks == "all" and conf.exactly_once
    assert conf.value_schema == SchemaSpec("value", "avro") and conf.value_schema.latest
    assert conf.key_schema == SchemaSpec("key", "jsonschema", schema_id=7)
    assert not conf.key_schema.latest
    # a binary key beside a schema value, and the other way round
    assert writer_conf({**URL, "topic": "t", "keyFormat": "protobuf"}).value_schema.format == (
        "binary"
    )
    # the subject may name where an id or a text is registered; with an explicit subject,
    # an id or a text, no topic option is needed (a topic column)
    conf = writer_conf(
        {**URL, "valueFormat": "avro", "valueSubject": " users ", "valueSchema": '"string"'}
    )
    assert conf.value_schema == SchemaSpec("value", "avro", subject="users", schema='"string"')
    assert writer_conf({**URL, "valueFormat": "avro", "valueSchemaId": "0"}).topic is None
    assert writer_conf({**URL, "topic": "t", "valueFormat": "avro", "acks": "-1"}).acks == "-1"
    assert SchemaSpec("value").default_subject("orders") == "orders-value"
    assert SchemaSpec("key", "avro", subject="s").default_subject("orders") == "s"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"valueSchemaId": "1"}, "Option valueSchemaId needs valueFormat=avro, jsonschema or"),
        ({"valueFormat": "avro", "keySubject": "s"}, "Option keySubject needs keyFormat=avro"),
        ({"keyFormat": "binary", "keySchema": "{}"}, "(keyFormat is binary: the key column"),
        ({"valueFormat": "xml"}, "valueFormat='xml' is not one of binary, avro, jsonschema"),
        (
            {"valueFormat": "avro", "valueSchemaId": "1", "valueSchema": '"int"'},
            "Options valueSchemaId and valueSchema exclude each other",
        ),
        ({"valueFormat": "avro", "valueSchemaId": "x"}, "valueSchemaId='x' is not an integer"),
        ({"valueFormat": "avro", "valueSchemaId": "-1"}, "valueSchemaId='-1' must be >= 0"),
        ({"keyFormat": "avro", "keySubject": " "}, "Option keySubject is empty"),
        ({"valueFormat": "protobuf", "valueSchema": " "}, "Option valueSchema is empty"),
        ({"valueFormat": "avro", "acks": "1"}, "Option acks=1 cannot be used with valueFormat"),
        ({"keyFormat": "jsonschema", "acks": "0"}, "acks=0 cannot be used with keyFormat=json"),
        ({"kafka.value.serializer": "x"}, "written by franz with valueFormat"),
    ],
)
def test_bad_writer_schema_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(FranzOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        writer_conf({**URL, "topic": "t", **options})


def test_latest_schema_needs_the_topic_option() -> None:
    with pytest.raises(
        FranzOptionError,
        match="valueFormat=avro without valueSchemaId, valueSchema or valueSubject writes with "
        "the latest version of the subject <topic>-value, which needs the topic option",
    ):
        writer_conf({**URL, "valueFormat": "avro"})


def test_schema_columns_are_strings_of_json() -> None:
    conf = writer_conf({**URL, "topic": "t", "valueFormat": "avro"})
    check_columns({"key": "binary", "value": "string"}, conf)  # the key stays binary
    with pytest.raises(FranzOptionError, match="Column 'value' of the franz sink must be a string"):
        check_columns({"value": "binary"}, conf)
    conf = writer_conf({**URL, "topic": "t", "keyFormat": "avro", "keySchemaId": "1"})
    check_columns({"key": "string", "value": "binary"}, conf)
    with pytest.raises(FranzOptionError, match="holding the key as JSON with keyFormat=avro"):
        check_columns({"key": "binary", "value": "binary"}, conf)


class _Capture(Producer):
    """The producer without a server: the bodies it would send."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.bodies: list[tuple[str, bytes]] = []

    def produce_exactly_once(
        self, topic: str, body: bytes, key: str, count: int
    ) -> list[dict[str, Any]]:
        self.bodies.append((key, body))
        return [{"error_code": None}] * count


def test_schema_records_are_v3_records_with_the_json_as_it_is() -> None:
    conf = writer_conf(
        {**URL, "topic": "t", "valueFormat": "jsonschema", "valueSubject": "s", "batchSize": 2}
    )
    with pytest.raises(FranzProduceError, match="not resolved on the driver"):
        Producer(conf, ["value"])
    conf = replace(
        conf, cluster_id="c1", value_schema=replace(conf.value_schema, schema_id=3)
    )  # what resolve_schemas does on the driver
    p = _Capture(conf, ["key", "value", "partition", "headers"], KeyScope("w", "-", 0))
    p.add_rows(
        [
            ("k1", ' {"a": 1.50, "b": 123456789012345678901234567890}', 1, [("h", b"x")]),
            (b"\x00", None, None, None),
            (None, '"é"', None, []),
        ]
    )
    p.close()
    assert p.bodies == [
        (
            "w:-:0:t:0",
            b'[{"partition_id":1,"headers":[{"name":"h","value":"eA=="}],'
            b'"key":{"type":"BINARY","data":"azE="},'
            b'"value":{"subject":"s","schema_id":3,"data": {"a": 1.50, '
            b'"b": 123456789012345678901234567890}}},'
            b'{"key":{"type":"BINARY","data":"AA=="},"value":null}]',
        ),
        ("w:-:0:t:1", '[{"value":{"subject":"s","schema_id":3,"data":"é"}}]'.encode()),
    ]
    text = replace(conf, value_schema=SchemaSpec("value", "avro", schema='"string"'))
    p = _Capture(text, ["value"], KeyScope("w", "-", 0))
    p.add_rows([('"x"',)])
    p.close()
    assert p.bodies[0][1] == b'[{"value":{"type":"AVRO","schema":"\\"string\\"","data":"x"}}]'

    p = _Capture(conf, ["value"], KeyScope("w", "-", 0))
    p.add_rows([('{"a": 1}',)])
    with pytest.raises(
        FranzProduceError,
        match=r"column 'value' of row 1 of this task is not JSON \(valueFormat=jsonschema "
        r"takes the value as JSON, e.g. to_json\(struct\(...\)\)\): .*; the string: "
        r"'\{a: 1\}'",
    ):
        p.add_rows([("{a: 1}",)])
    with pytest.raises(FranzProduceError, match="the string: 'NaN'"):
        p.add_rows([("NaN",)])


# --- ranges and admission control --------------------------------------------------------


def _covers(pieces: list[OffsetRange], ranges: list[OffsetRange]) -> bool:
    for r in ranges:
        mine = sorted(
            (p.start, p.end) for p in pieces if (p.topic, p.partition) == (r.topic, r.partition)
        )
        if r.size == 0:
            if mine:
                return False
            continue
        if mine[0][0] != r.start or mine[-1][1] != r.end:
            return False
        if any(a[1] != b[0] for a, b in zip(mine, mine[1:], strict=False)):
            return False
    return True


def test_split_ranges() -> None:
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 5, 15), OffsetRange("t", 2, 7, 7)]
    assert split_ranges(ranges) == ranges[:2]  # one task per non-empty range
    pieces = split_ranges(ranges, min_partitions=10)
    assert _covers(pieces, ranges)
    assert [p for p in pieces if p.partition == 1] == [ranges[1]]  # small stays whole
    assert 9 <= len(pieces) <= 11
    capped = split_ranges(ranges, max_records_per_partition=300)
    assert _covers(capped, ranges) and max(p.size for p in capped) <= 300
    assert len(capped) == 5


def test_rate_limit_is_proportional_and_does_not_starve() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    latest = {("t", 0): 30, ("t", 1): 10, ("t", 2): 101}
    end = rate_limit(start, latest, 8)
    assert end[("t", 0)] == 5 and end[("t", 1)] == 1 and end[("t", 2)] == 101
    assert rate_limit(start, latest, 1000) == latest


# --- the range reader against a real server -----------------------------------------------


def test_iter_range_stops_exactly_at_end(franz: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=1)
    for lo in range(0, 40, 9):
        franz.produce_values(topic, 0, [str(i) for i in range(lo, min(40, lo + 9))])
    conf = reader_conf({"url": franz.url, "subscribe": topic, "maxRecordsPerRequest": "4"})
    with FranzClient(conf.http) as client:
        chunks = list(iter_range(client, conf, topic, 0, 3, 30))
    assert all(len(c) <= 4 for c in chunks)
    assert [r["offset"] for c in chunks for r in c] == list(range(3, 30))


def test_arrow_batches_match_sparks_schema(franz: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=1)
    franz.produce(
        topic, [{"key": "k", "value": "v", "headers": [("a", b"1")]}, {"value": None}], partition=0
    )
    for headers in (False, True):
        conf = reader_conf({"url": franz.url, "subscribe": topic, "includeHeaders": str(headers)})
        schema = arrow_schema(franz_schema(headers))
        (batch,) = list(read_rows(conf, topic, 0, 0, 2, schema))
        assert batch.schema.equals(schema)
        assert batch.column("value").to_pylist() == [b"v", None]


def test_data_loss_in_a_range(franz: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=1, **{"segment.bytes": 100})
    for i in range(8):
        franz.produce_values(topic, 0, [f"{i}-{j}" for j in range(3)])
    franz.set_config(topic, "retention.bytes", 1)
    import time

    deadline = time.monotonic() + 30
    while franz.offsets(topic, 0)[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    log_start, end = franz.offsets(topic, 0)
    assert 0 < log_start < end == 24
    strict = reader_conf({"url": franz.url, "subscribe": topic})
    lenient = reader_conf({"url": franz.url, "subscribe": topic, "failOnDataLoss": "false"})
    with FranzClient(strict.http) as client:
        with pytest.raises(FranzDataLossError, match=f"offsets 2 to {log_start - 1} were deleted"):
            list(iter_range(client, strict, topic, 0, 2, 24))
        got = [r["offset"] for c in iter_range(client, lenient, topic, 0, 2, 24) for r in c]
        assert got == list(range(log_start, 24))
        # a range wholly deleted yields nothing (lenient) rather than reading past its end
        assert list(iter_range(client, lenient, topic, 0, 0, 1)) == []


# --- stream planning, driven like Spark's driver-side process -------------------------------


def _stream(franz: Any, topic: str, **options: str) -> FranzStreamReader:
    conf = reader_conf({"url": franz.url, "subscribe": topic, **options})
    return FranzStreamReader(conf, franz_schema(False))


def test_available_now_never_passes_its_snapshot(franz: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=2)
    franz.produce_values(topic, 0, ["a"] * 5)
    r = _stream(franz, topic, startingOffsets="earliest", maxOffsetsPerTrigger="3")
    start = r.initialOffset()
    assert start == {topic: {"0": 0, "1": 0}}
    assert r.initialOffset() is start  # resolved once
    r.prepareForTriggerAvailableNow()
    franz.produce_values(topic, 1, ["late"] * 4)  # after the snapshot: not this run's
    ends = []
    while True:
        end = r.latestOffset(start, r.getDefaultReadLimit())
        if end == start:
            break
        ends.append(end)
        parts = r.partitions(start, end)
        assert all(isinstance(p, FranzRange) for p in parts)
        start = end
    assert ends == [{topic: {"0": 3, "1": 0}}, {topic: {"0": 5, "1": 0}}]
    assert r.reportLatestOffset() == {topic: {"0": 5, "1": 0}}
    assert r.partitions(start, start) == []


def test_new_partitions_and_topics_join_the_stream(franz: Any, topic: str) -> None:
    r = _stream(franz, topic)  # the topic does not exist yet
    start = r.initialOffset()
    assert start == {}
    assert r.latestOffset(start, ReadAllAvailable()) == {}
    franz.create_topic(topic, partitions=2)
    franz.produce_values(topic, 1, ["x", "y"])
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {topic: {"0": 0, "1": 2}}
    assert r.partitions(start, end) == [FranzRange(topic, 1, 0, 2)]


def test_min_offsets_per_trigger_waits_for_a_backlog(franz: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=1)
    r = _stream(
        franz, topic, startingOffsets="earliest", minOffsetsPerTrigger="5", maxTriggerDelay="1h"
    )
    assert r.getDefaultReadLimit() == ReadMinRows(5)
    start = r.initialOffset()
    franz.produce_values(topic, 0, ["a"] * 2)
    first = r.latestOffset(start, r.getDefaultReadLimit())  # the first trigger runs
    assert first == {topic: {"0": 2}}
    franz.produce_values(topic, 0, ["b"] * 2)
    assert r.latestOffset(first, r.getDefaultReadLimit()) is first  # 2 < 5: wait
    assert r.latestOffset(first, ReadAllAvailable()) == {topic: {"0": 4}}  # Trigger.Once
    franz.produce_values(topic, 0, ["c"] * 3)
    assert r.latestOffset(first, r.getDefaultReadLimit()) == {topic: {"0": 7}}


def test_reader_pickles_without_its_client(franz: Any, topic: str) -> None:
    import pickle

    franz.create_topic(topic, partitions=1)
    r = _stream(franz, topic)
    r.initialOffset()
    assert r._client is not None
    copy = pickle.loads(pickle.dumps(r))
    assert copy._client is None and copy.conf == r.conf
    assert to_json_offsets({("b", 10): 1, ("b", 2): 2, ("a", 0): 3}) == json.loads(
        '{"a": {"0": 3}, "b": {"2": 2, "10": 1}}'
    )
    assert ReadMaxRows(3) == _stream(franz, topic, maxOffsetsPerTrigger="3").getDefaultReadLimit()


def test_offset_json_must_cover_the_partitions_read(franz: Any, topic: str) -> None:
    from spark_connector.datasource import FranzBatchReader

    franz.create_topic(topic, partitions=2)
    franz.produce_values(topic, 0, ["a", "b"])

    def plan(**options: str) -> list[tuple[int, int, int]]:
        conf = reader_conf({"url": franz.url, "path": topic, **options})
        batch_checks(conf)
        return [(r.partition, r.start, r.end)
                for r in FranzBatchReader(conf, franz_schema()).plan()]

    assert plan() == [(0, 0, 2), (1, 0, 0)]
    assert plan(startingOffsets=json.dumps({topic: {"0": 1, "1": -2}})) == [(0, 1, 2), (1, 0, 0)]
    with pytest.raises(FranzOptionError, match=f"no offset for {topic}-1"):
        plan(startingOffsets=json.dumps({topic: {"0": 1}}))
    with pytest.raises(FranzOptionError, match=f"{topic}-7 not read by this query"):
        plan(startingOffsets=json.dumps({topic: {"0": 1, "1": 0, "7": 0}}))
    with pytest.raises(FranzOptionError, match="offset 5 of .* is past the partition's end"):
        plan(endingOffsets=json.dumps({topic: {"0": 5, "1": -1}}))
    with pytest.raises(FranzOptionError, match="assign names partitions that do not exist"):
        conf = reader_conf({"url": franz.url, "assign": json.dumps({topic: [0, 3]})})
        FranzBatchReader(conf, franz_schema()).plan()


def test_deleted_topic_is_data_loss_for_a_stream(franz: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=1)
    franz.produce_values(topic, 0, ["a"])
    strict = _stream(franz, topic, startingOffsets="earliest")
    lenient = _stream(franz, topic, startingOffsets="earliest", failOnDataLoss="false")
    start = strict.initialOffset()
    assert lenient.initialOffset() == start == {topic: {"0": 0}}
    r = franz.http.delete(f"/v3/clusters/{franz.cluster}/topics/{topic}")
    assert r.status_code == 204, r.text
    with pytest.raises(FranzDataLossError, match=f"partitions {topic}-0 were read by this query "
                                                 "but no longer exist"):
        strict.latestOffset(start, ReadAllAvailable())
    assert lenient.latestOffset(start, ReadAllAvailable()) == {}


# --- TLS options (ssl.truststore.location, ssl.keystore.location, ssl.key.password) ------


def test_ssl_options_parse_with_and_without_the_kafka_prefix() -> None:
    import pickle

    conf = reader_conf(
        {
            "url": "https://h:8443",
            "subscribe": "t",
            "ssl.truststore.location": " ca.pem ",
            "KAFKA.SSL.KEYSTORE.LOCATION": "client.pem",
            "kafka.ssl.key.password": "k3y-pw",
        }
    ).http
    assert (conf.truststore, conf.keystore, conf.key_password) == ("ca.pem", "client.pem", "k3y-pw")
    assert "k3y-pw" not in repr(conf)  # the key's password never shows in a repr or log
    assert pickle.loads(pickle.dumps(conf)) == conf  # the conf travels to the executors
    plain = writer_conf({**URL, "topic": "t"}).http
    assert (plain.truststore, plain.keystore, plain.key_password) == (None, None, None)
    same = writer_conf(
        {
            **URL,
            "topic": "t",
            "ssl.truststore.location": "ca.pem",
            "kafka.ssl.truststore.location": "ca.pem",
        }
    )
    assert same.http.truststore == "ca.pem"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ssl.key.password": "x"}, "ssl.key.password needs ssl.keystore.location"),
        (
            {"ssl.truststore.location": "a.pem", "kafka.ssl.truststore.location": "b.pem"},
            "ssl.truststore.location and kafka.ssl.truststore.location disagree",
        ),
        (
            {"ssl.truststore.location": "a.pem", "tls.verify": "false"},
            "tls.verify and ssl.truststore.location exclude each other",
        ),
        ({"ssl.keystore.location": " "}, "ssl.keystore.location is empty"),
        ({"kafka.ssl.keystore.type": "JKS"}, "franz reads PEM files"),
        ({"kafka.security.protocol": "SSL"}, "https:// for TLS"),
    ],
)
def test_bad_ssl_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(FranzOptionError, match=message):
        reader_conf({**URL, "subscribe": "t", **options})
    with pytest.raises(FranzOptionError, match=message):
        writer_conf({**URL, "topic": "t", **options})


def test_client_verifies_the_server_and_presents_its_certificate(tmp_path: Any) -> None:
    """The executor-side client over https with mutual TLS, against a small https
    server that requires a client certificate signed by its CA."""
    import http.server
    import ssl
    import threading

    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1")
    client_cert = ca.issue_cert("client@example.com")
    ca_pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    client_pem = tmp_path / "client.pem"
    client_cert.private_key_and_cert_chain_pem.write_to_path(str(client_pem))
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_cert.configure_cert(server_ctx)
    ca.configure_trust(server_ctx)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    seen: list[Any] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.connection.getpeercert())  # type: ignore[attr-defined]
            body = b'["t1"]'
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.kafka.v2+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = server_ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{httpd.server_address[1]}"
    try:
        opts = {"url": url, "subscribe": "t", "http.maxRetries": "0"}
        conf = reader_conf(
            {**opts, "ssl.truststore.location": str(ca_pem),
             "ssl.keystore.location": str(client_pem)}
        )
        with FranzClient(conf.http) as client:
            assert client.topics() == ["t1"]
        assert seen and seen[0] is not None  # the server got the client's certificate
        missing = reader_conf({**opts, "ssl.truststore.location": str(tmp_path / "no.pem")})
        with FranzClient(missing.http) as client, pytest.raises(
            FranzOptionError, match="ssl.truststore.location=.*no PEM CA bundle"
        ):
            client.topics()
        not_a_key = reader_conf(
            {**opts, "ssl.truststore.location": str(ca_pem),
             "ssl.keystore.location": str(ca_pem)}
        )
        with FranzClient(not_a_key.http) as client, pytest.raises(
            FranzOptionError, match="ssl.keystore.location=.*no PEM client certificate"
        ):
            client.topics()
    finally:
        httpd.shutdown()
        httpd.server_close()
