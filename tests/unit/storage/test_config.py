"""Topic-level configuration: Kafka's defaults, validation messages, broker-default
precedence, describe output, and topic-name rules."""

from __future__ import annotations

import dataclasses

import pytest

from core.storage.config import (
    CONFIG_KEYS,
    LONG_MAX,
    ConfigEntry,
    ConfigSource,
    ConfigType,
    LogConfig,
    describe_configs,
    format_value,
    topic_collides,
    validate_topic_configs,
    validate_topic_name,
)
from core.storage.errors import InvalidConfigError, InvalidTopicError, StorageError

# --- definitions and defaults ------------------------------------------------------

KAFKA_3_TOPIC_KEYS = {
    "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
    "flush.messages", "flush.ms", "follower.replication.throttled.replicas",
    "index.interval.bytes", "leader.replication.throttled.replicas", "local.retention.bytes",
    "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.downconversion.enable", "message.format.version",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes",
    "segment.index.bytes", "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
}  # fmt: skip


def test_every_kafka_3_topic_key_is_defined() -> None:
    assert KAFKA_3_TOPIC_KEYS - set(CONFIG_KEYS) == set()
    # Added in 3.8 (KIP-390) and 3.9 (KIP-950).
    assert set(CONFIG_KEYS) - KAFKA_3_TOPIC_KEYS == {
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
    }


@pytest.mark.parametrize(
    ("attr", "expected"),
    [
        ("segment_bytes", 1073741824),
        ("segment_ms", 604800000),
        ("segment_jitter_ms", 0),
        ("segment_index_bytes", 10485760),
        ("index_interval_bytes", 4096),
        ("retention_ms", 604800000),
        ("retention_bytes", -1),
        ("cleanup_policy", ("delete",)),
        ("delete_retention_ms", 86400000),
        ("min_compaction_lag_ms", 0),
        ("max_compaction_lag_ms", LONG_MAX),
        ("min_cleanable_dirty_ratio", 0.5),
        ("flush_messages", LONG_MAX),
        ("flush_ms", LONG_MAX),
        ("max_message_bytes", 1048588),
        ("message_timestamp_type", "CreateTime"),
        ("message_timestamp_before_max_ms", LONG_MAX),
        ("message_timestamp_after_max_ms", LONG_MAX),
        ("compression_type", "producer"),
        ("min_insync_replicas", 1),
        ("unclean_leader_election_enable", False),
        ("file_delete_delay_ms", 60000),
        ("preallocate", False),
    ],
)
def test_defaults_match_kafka(attr: str, expected: object) -> None:
    assert getattr(LogConfig.from_overrides({}), attr) == expected


def test_dataclass_defaults_agree_with_the_definition_table() -> None:
    assert LogConfig() == LogConfig.from_overrides({})
    for field in dataclasses.fields(LogConfig):
        assert field.name.replace("_", ".") in CONFIG_KEYS


def test_log_config_is_frozen_and_slotted() -> None:
    config = LogConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.segment_bytes = 1  # type: ignore[misc]
    assert not hasattr(config, "__dict__")


def test_cleanup_policy_flags() -> None:
    assert LogConfig().delete and not LogConfig().compact
    both = LogConfig.from_overrides({"cleanup.policy": "compact, delete"})
    assert both.cleanup_policy == ("compact", "delete")
    assert both.compact and both.delete
    neither = LogConfig.from_overrides({"cleanup.policy": ""})
    assert not neither.compact and not neither.delete


def test_overrides_are_parsed_to_typed_attributes() -> None:
    config = LogConfig.from_overrides(
        {
            "segment.bytes": " 1048576 ",
            "min.cleanable.dirty.ratio": "0.25",
            "preallocate": "TRUE",
            "message.timestamp.type": "LogAppendTime",
            "retention.ms": "-1",
        }
    )
    assert config.segment_bytes == 1048576
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.preallocate is True
    assert config.message_timestamp_type == "LogAppendTime"
    assert config.retention_ms == -1


def test_timestamp_bounds_fall_back_to_the_deprecated_difference() -> None:
    config = LogConfig.from_overrides({"message.timestamp.difference.max.ms": "5000"})
    assert config.message_timestamp_before_max_ms == 5000
    assert config.message_timestamp_after_max_ms == 5000
    explicit = LogConfig.from_overrides(
        {"message.timestamp.difference.max.ms": "5000", "message.timestamp.after.max.ms": "10"}
    )
    assert explicit.message_timestamp_after_max_ms == 10
    assert explicit.message_timestamp_before_max_ms == 5000


def test_max_segment_ms_is_capped_by_max_compaction_lag_on_compacted_topics() -> None:
    overrides = {"segment.ms": "1000", "max.compaction.lag.ms": "10"}
    assert LogConfig.from_overrides(overrides).max_segment_ms == 1000
    compacted = LogConfig.from_overrides({**overrides, "cleanup.policy": "compact"})
    assert compacted.max_segment_ms == 10


# --- validation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        ("segment.bytes", "1.5", "Not a number of type INT"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("retention.bytes", "9223372036854775808", "Not a number of type LONG"),
        ("min.cleanable.dirty.ratio", "nan", "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("segment.bytes", "13", "Value must be at least 14"),
        ("segment.index.bytes", "3", "Value must be at least 4"),
        ("segment.ms", "0", "Value must be at least 1"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("compression.gzip.level", "0", "Value must be at least 1"),
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("compression.type", "GZIP", "String must be one of"),
        ("message.timestamp.type", "NoTime", "String must be one of: CreateTime, LogAppendTime"),
        ("cleanup.policy", "delete,remove", "Invalid value remove for configuration cleanup.policy"),
        ("cleanup.policy", "delete,", "String must be one of: compact, delete"),
        ("leader.replication.throttled.replicas", "0:1,x", "must be the literal '*'"),
        ("message.format.version", "banana", "Version banana is not a valid version"),
    ],
)  # fmt: skip
def test_bad_values_raise_invalid_config_naming_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        validate_topic_configs({key: value})
    assert key in info.value.message
    assert message in info.value.message
    assert info.value.error_code == 40


def test_unknown_key_is_rejected_by_name() -> None:
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: retention.hours"):
        validate_topic_configs({"retention.ms": "1", "retention.hours": "1"})


def test_non_string_values_are_rejected() -> None:
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        validate_topic_configs({"retention.ms": 1000})  # type: ignore[dict-item]


def test_min_compaction_lag_above_max_is_rejected() -> None:
    with pytest.raises(
        InvalidConfigError, match=r"min.compaction.lag.ms \(100\) > max.compaction.lag.ms \(10\)"
    ):
        validate_topic_configs({"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "10"})
    with pytest.raises(InvalidConfigError, match="min.compaction.lag.ms"):
        validate_topic_configs(
            {"min.compaction.lag.ms": "100"},
            server_defaults={"log.cleaner.max.compaction.lag.ms": "50"},
        )


def test_remote_storage_cannot_be_enabled() -> None:
    with pytest.raises(InvalidConfigError, match="remote.storage.enable"):
        validate_topic_configs({"remote.storage.enable": "true"})
    assert validate_topic_configs({"remote.storage.enable": "false"}) == {
        "remote.storage.enable": "false"
    }


def test_valid_values_come_back_normalized() -> None:
    normalized = validate_topic_configs(
        {
            "retention.ms": " 86400000 ",
            "cleanup.policy": "compact ,  delete",
            "preallocate": "True",
            "min.cleanable.dirty.ratio": "1",
            "compression.gzip.level": "-1",
            "leader.replication.throttled.replicas": "*",
            "follower.replication.throttled.replicas": "0:1, 1:2",
            "message.format.version": "2.8-IV1",
            "compression.type": "zstd",
        }
    )
    assert normalized == {
        "retention.ms": "86400000",
        "cleanup.policy": "compact,delete",
        "preallocate": "true",
        "min.cleanable.dirty.ratio": "1.0",
        "compression.gzip.level": "-1",
        "leader.replication.throttled.replicas": "*",
        "follower.replication.throttled.replicas": "0:1,1:2",
        "message.format.version": "2.8-IV1",
        "compression.type": "zstd",
    }


def test_every_default_passes_its_own_validator() -> None:
    defaults = {k.name: format_value(k.type, k.default) for k in CONFIG_KEYS.values()}
    assert validate_topic_configs(defaults) == defaults


def test_invalid_config_is_a_storage_error() -> None:
    assert issubclass(InvalidConfigError, StorageError)


# --- broker defaults and precedence ------------------------------------------------


@pytest.mark.parametrize(
    ("server", "expected_ms"),
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 300_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "42"}, 42),
        ({"log.retention.minutes": "2"}, 120_000),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.ms": "-5"}, -1),
    ],
)  # fmt: skip
def test_retention_precedence_ms_over_minutes_over_hours(
    server: dict[str, str], expected_ms: int
) -> None:
    assert LogConfig.from_overrides({}, server).retention_ms == expected_ms


def test_topic_override_beats_broker_properties() -> None:
    server = {"log.retention.ms": "42", "log.segment.bytes": "2048"}
    config = LogConfig.from_overrides({"retention.ms": "7", "segment.bytes": "4096"}, server)
    assert config.retention_ms == 7
    assert config.segment_bytes == 4096


def test_broker_properties_map_to_topic_keys() -> None:
    server = {
        "log.segment.bytes": "2048",
        "log.roll.hours": "2",
        "log.roll.jitter.hours": "1",
        "log.cleanup.policy": "compact",
        "min.insync.replicas": "2",
        "message.max.bytes": "500",
        "log.index.size.max.bytes": "4096",
        "log.cleaner.min.cleanable.ratio": "0.1",
        "log.flush.scheduler.interval.ms": "900",
        "log.segment.delete.delay.ms": "5",
        "log.message.timestamp.type": "LogAppendTime",
        "num.partitions": "12",  # broker-only: ignored
    }
    config = LogConfig.from_overrides({}, server)
    assert config.segment_bytes == 2048
    assert config.segment_ms == 7_200_000
    assert config.segment_jitter_ms == 3_600_000
    assert config.cleanup_policy == ("compact",)
    assert config.min_insync_replicas == 2
    assert config.max_message_bytes == 500
    assert config.segment_index_bytes == 4096
    assert config.min_cleanable_dirty_ratio == 0.1
    assert config.flush_ms == 900
    assert config.file_delete_delay_ms == 5
    assert config.message_timestamp_type == "LogAppendTime"
    assert LogConfig.from_overrides({}, {**server, "log.roll.ms": "10"}).segment_ms == 10


def test_bad_broker_property_names_the_property() -> None:
    with pytest.raises(InvalidConfigError, match="log.retention.hours"):
        LogConfig.from_overrides({}, {"log.retention.hours": "week"})
    with pytest.raises(InvalidConfigError, match="log.segment.bytes"):
        LogConfig.from_overrides({}, {"log.segment.bytes": "10"})


def test_unknown_override_keys_are_ignored_when_building() -> None:
    assert LogConfig.from_overrides({"some.future.key": "1"}) == LogConfig()


# --- describe ----------------------------------------------------------------------


def _entry(
    name: str, overrides: dict[str, str], server: dict[str, str] | None = None
) -> ConfigEntry:
    return next(e for e in describe_configs(overrides, server) if e.name == name)


def test_describe_lists_every_key_sorted() -> None:
    entries = describe_configs({}, None)
    assert [e.name for e in entries] == sorted(CONFIG_KEYS)
    assert all(e.source is ConfigSource.DEFAULT_CONFIG and e.is_default for e in entries)
    assert not any(e.is_read_only or e.is_sensitive for e in entries)


def test_describe_default_entry() -> None:
    entry = _entry("retention.ms", {})
    assert entry.value == "604800000"
    assert entry.source == "DEFAULT_CONFIG"
    assert entry.type is ConfigType.LONG
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)
    ]
    assert _entry("remote.storage.enable", {}).synonyms == ()


def test_describe_static_broker_entry_converts_units() -> None:
    entry = _entry("retention.ms", {}, {"log.retention.hours": "2"})
    assert entry.value == "7200000"
    assert entry.source is ConfigSource.STATIC_BROKER_CONFIG
    assert not entry.is_default
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("log.retention.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]


def test_describe_topic_override_entry() -> None:
    entry = _entry(
        "cleanup.policy", {"cleanup.policy": "compact"}, {"log.cleanup.policy": "delete"}
    )
    assert entry.value == "compact"
    assert entry.source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert [s.source for s in entry.synonyms] == [
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    assert entry.synonyms[0].name == "cleanup.policy"
    assert entry.synonyms[1].name == "log.cleanup.policy"


# --- topic names -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["orders", "a", "Orders.v2_final-3", "__consumer_offsets", "x" * 249, "..."]
)
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "the empty string is not allowed"),
        (".", "'.' is not allowed"),
        ("..", "'..' is not allowed"),
        ("x" * 250, "longer than the max allowed length 249"),
        ("has space", "characters other than ASCII alphanumerics"),
        ("slash/topic", "characters other than ASCII alphanumerics"),
        ("colon:topic", "characters other than ASCII alphanumerics"),
        ("caf\u00e9", "characters other than ASCII alphanumerics"),
        ("new\nline", "characters other than ASCII alphanumerics"),
        ("trailing\n", "characters other than ASCII alphanumerics"),
    ],
)
def test_illegal_topic_names(name: str, reason: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(name)
    assert info.value.message.startswith("Topic name is invalid: ")
    assert reason in info.value.message
    assert info.value.error_code == 17


def test_dot_and_underscore_collide() -> None:
    assert topic_collides("metrics.cpu", "metrics_cpu")
    assert topic_collides("a.b_c", "a_b.c")
    assert not topic_collides("metrics.cpu", "metrics-cpu")
    assert not topic_collides("ab", "a_b")
