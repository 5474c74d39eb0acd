"""Broker settings: Java's .properties rules, unknown keys and bad values refused with
one line naming them, environment variables, and which source wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import (
    ConfigError,
    env_properties,
    known_properties,
    load_config,
    parse_properties,
    read_properties,
)


def _pairs(text: str) -> list[tuple[str, str]]:
    return [(p.key, p.value) for p in parse_properties(text)]


@pytest.mark.parametrize(("text", "expected"), [
    ("a=1", [("a", "1")]),
    ("a = 1", [("a", "1")]),
    ("a:1", [("a", "1")]),
    ("a : 1", [("a", "1")]),
    ("a 1", [("a", "1")]),  # whitespace separates too
    ("a\t=\t1", [("a", "1")]),
    ("   a=1", [("a", "1")]),
    ("a", [("a", "")]),
    ("a=", [("a", "")]),
    ("a==1", [("a", "=1")]),  # only the first separator separates
    ("a=b=c:d", [("a", "b=c:d")]),
    ("# a=1\n! b=2\n  # c=3", []),
    ("\n\n  \n", []),
    ("a=1  ", [("a", "1")]),  # trailing whitespace dropped (franz; Java keeps it) ...
    ("a=1\\ ", [("a", "1 ")]),  # ... unless escaped
])
def test_keys_values_separators_comments(text: str, expected: list[tuple[str, str]]) -> None:
    assert _pairs(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("url=http\\://h\\:1", [("url", "http://h:1")]),
    ("a\\=b=c", [("a=b", "c")]),
    ("a\\:b:c", [("a:b", "c")]),
    ("key\\ with\\ spaces = v", [("key with spaces", "v")]),
    ("a=x\\\\y", [("a", "x\\y")]),
    ("a=\\t\\n\\r\\f", [("a", "\t\n\r\f")]),
    ("a=caf\\u00e9 \\u20AC", [("a", "café €")]),
    ("a=\\q\\#\\!", [("a", "q#!")]),  # any other escaped character is itself
    ("\\#a=1", [("#a", "1")]),  # an escaped # starts a key, not a comment
])
def test_escapes(text: str, expected: list[tuple[str, str]]) -> None:
    assert _pairs(text) == expected


def test_line_continuations() -> None:
    text = ("listeners=http://127.0.0.1:8082,\\\n"
            "          https://127.0.0.1:8443\n"
            "super.users = User:admin;\\\r\n"
            "   User:broker\n"
            "b=ends in a backslash\\\\\n"  # an even number: not continued
            "c=3\n"
            "d=\\\n"
            "  # not a comment: part of d\n"
            "e=last line\\")
    assert _pairs(text) == [
        ("listeners", "http://127.0.0.1:8082,https://127.0.0.1:8443"),
        ("super.users", "User:admin;User:broker"),
        ("b", "ends in a backslash\\"),
        ("c", "3"),
        ("d", "# not a comment: part of d"),
        ("e", "last line"),
    ]


def test_a_comment_line_is_never_continued() -> None:
    assert _pairs("# a comment \\\nb=2") == [("b", "2")]


def test_line_numbers_are_where_each_entry_starts() -> None:
    props = parse_properties("# c\na=1\nb=x\\\n y\n\nc=3\r\nd=4\re=5")
    assert [(p.key, p.line) for p in props] == [("a", 2), ("b", 3), ("c", 6), ("d", 7),
                                                ("e", 8)]


def test_a_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"f:2: malformed \\uXXXX escape \\u12G4"):
        parse_properties("a=1\nb=\\u12G4", source="f")


def test_read_properties_last_wins(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nnum.partitions=5\n", encoding="utf-8")
    assert read_properties(path) == {"num.partitions": "5"}


# --- checks ------------------------------------------------------------------------------


def _load(text: str, tmp_path: Path, **overrides: object):  # noqa: ANN202
    path = tmp_path / "server.properties"
    path.write_text(text, encoding="utf-8")
    return load_config(properties_file=path, overrides=overrides, environ={})


def test_known_properties_cover_the_table_and_the_log_synonyms() -> None:
    known = known_properties()
    for name in ("num.partitions", "listeners", "zookeeper.connect", "log.retention.hours",
                 "log.segment.bytes", "log.cleaner.dedupe.buffer.size", "message.max.bytes",
                 "num.io.threads"):
        assert name in known, name
    assert "compression.gzip.level" not in known  # a topic config only, in franz


@pytest.mark.parametrize(("text", "message"), [
    ("num.partition=7", "server.properties:1: unknown property 'num.partition'; "
                        "did you mean num.partitions?"),
    ("# c\nauto.create.topic.enable=false", "server.properties:2: unknown property "
                                            "'auto.create.topic.enable'; did you mean "
                                            "auto.create.topics.enable?"),
    ("zzz=1", "unknown property 'zzz' (docs/cli.md lists the properties)"),
    ("compression.gzip.level=5", "franz reads compression.gzip.level per topic only"),
])
def test_unknown_keys_are_refused_naming_the_closest(text: str, message: str,
                                                     tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load(text, tmp_path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("text", "named"), [
    ("num.partitions=abc", ["num.partitions", "'abc'", "int"]),
    ("auto.create.topics.enable=yes", ["auto.create.topics.enable", "'yes'", "bool"]),
    ("log.segment.bytes=10", ["log.segment.bytes", "10", "[14, 2147483647]"]),
    ("log.retention.hours=forever", ["log.retention.hours", "forever", "LONG"]),
    ("log.cleanup.policy=shred", ["log.cleanup.policy", "shred", "compact, delete"]),
    ("log.cleaner.dedupe.buffer.size=lots", ["log.cleaner.dedupe.buffer.size", "lots"]),
])
def test_bad_values_name_key_value_and_what_is_allowed(text: str, named: list[str],
                                                      tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load(text, tmp_path)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'server.properties'}:1: ")
    for part in named:
        assert part in message, (part, message)


def test_overrides_are_checked_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--override num.partiton: unknown property"):
        load_config(overrides={"num.partiton": "3"}, environ={})
    with pytest.raises(ConfigError, match="--override num.partitions: Invalid value 'x'"):
        load_config(overrides={"num.partitions": "x"}, environ={})


def test_kafka_keys_franz_has_no_use_for_are_accepted_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = _load("num.io.threads=8\nnum.network.threads=3\nnum.partitions=4\n", tmp_path)
    assert config["num.partitions"] == 4
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "num.io.threads" in warnings[0], warnings


def test_environment_reads_property_names_only() -> None:
    env = {"FRANZ_NUM_PARTITIONS": "6", "FRANZ_LOG_RETENTION_HOURS": "24",
           "FRANZ_BOOTSTRAP_SERVER": "http://h:1", "FRANZ_CLIENT_SSL_KEY_PASSWORD": "x",
           "FRANZ_PURE_PYTHON_CODEC": "1", "OTHER": "y"}
    assert env_properties(env) == {"num.partitions": "6", "log.retention.hours": "24"}
    config = load_config(environ=env)
    assert config["num.partitions"] == 6
    assert config.log_defaults["log.retention.hours"] == "24"


def test_a_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"\$FRANZ_NUM_PARTITIONS: Invalid value 'x'"):
        load_config(environ={"FRANZ_NUM_PARTITIONS": "x"})


def test_sources_in_order_file_environment_overrides(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\ndefault.replication.factor=2\n"
                    "offsets.topic.num.partitions=7\n", encoding="utf-8")
    config = load_config(properties_file=path, environ={
        "FRANZ_NUM_PARTITIONS": "3", "FRANZ_DEFAULT_REPLICATION_FACTOR": "3"},
        overrides={"num.partitions": "4"})
    assert (config["num.partitions"], config["default.replication.factor"],
            config["offsets.topic.num.partitions"]) == (4, 3, 7)


def test_listeners_of_the_file_unless_the_command_line_names_host_or_port(
        tmp_path: Path) -> None:
    text = "listeners=http://127.0.0.1:18443,http://127.0.0.1:18444\n"
    config = _load(text, tmp_path, host=None, port=None)  # flags not given: None
    assert (config["host"], config["port"]) == ("127.0.0.1", 18443)
    config = _load(text, tmp_path, host=None, port=9000)
    assert (config["host"], config["port"]) == ("127.0.0.1", 9000)


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read .*nope.properties: No such file"):
        load_config(properties_file=tmp_path / "nope.properties", environ={})
    latin = tmp_path / "latin.properties"
    latin.write_bytes(b"a=caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(properties_file=latin, environ={})


def test_group_session_timeout_bounds(tmp_path: Path) -> None:
    config = load_config(environ={})
    assert (config["group.min.session.timeout.ms"],
            config["group.max.session.timeout.ms"]) == (6000, 1800000)  # Kafka's
    config = _load("group.min.session.timeout.ms=2000\ngroup.max.session.timeout.ms=20000",
                   tmp_path)
    assert (config["group.min.session.timeout.ms"],
            config["group.max.session.timeout.ms"]) == (2000, 20000)
    for bad in ("group.min.session.timeout.ms=0", "group.max.session.timeout.ms=-5",
                "group.max.session.timeout.ms=2147483648"):
        with pytest.raises(ConfigError, match=r"Value must be in \[1, 2147483647\]"):
            _load(bad, tmp_path)


def test_group_session_timeout_bounds_the_wrong_way_round_name_both(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load("group.min.session.timeout.ms=40000\ngroup.max.session.timeout.ms=30000",
              tmp_path)
    path = tmp_path / "server.properties"
    assert str(info.value) == (f"group.min.session.timeout.ms 40000 ({path}:1) must be at most "
                               f"group.max.session.timeout.ms 30000 ({path}:2)")
    with pytest.raises(ConfigError, match=r"6000 \(the default\) must be at most group.max."
                                          r"session.timeout.ms 5000 \(--override group.max"):
        load_config(overrides={"group.max.session.timeout.ms": "5000"}, environ={})
    with pytest.raises(ConfigError, match=r"group.min.session.timeout.ms 2000000 \("
                                          r"\$FRANZ_GROUP_MIN_SESSION_TIMEOUT_MS\)"):
        load_config(environ={"FRANZ_GROUP_MIN_SESSION_TIMEOUT_MS": "2000000"})
