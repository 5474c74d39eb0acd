"""``log.format=json`` (``app.logs.JsonFormatter``) and the checks of the HTTP front
door's properties (``app.settings``: ranges and choices)."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from app.logs import FORMAT, JsonFormatter, use_log_format
from app.settings import ConfigError, load_config


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("api.access_log", logging.INFO, __file__, 1, msg, args, None)
    record.created = 1714564800.123  # 2024-05-01T12:00:00.123Z
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_a_record_is_one_json_object_on_one_line() -> None:
    line = JsonFormatter().format(_record("hello %s\nworld", "there"))
    assert "\n" not in line
    assert json.loads(line) == {"time": "2024-05-01T12:00:00.123Z", "level": "INFO",
                                "logger": "api.access_log", "message": "hello there\nworld"}


def test_access_fields_become_json_fields() -> None:
    fields = {"method": "POST", "path": "/topics/t", "status": 200, "bytes": 12,
              "duration_ms": 1.5, "principal": "User:alice"}
    entry = json.loads(JsonFormatter().format(_record("x", access=fields)))
    assert {k: entry[k] for k in fields} == fields


def test_the_traceback_is_a_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = _record("failed")
        record.exc_info = sys.exc_info()
    entry = json.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in entry["exception"]


def test_use_log_format_sets_every_root_handler() -> None:
    root = logging.getLogger()
    handler = logging.StreamHandler()
    root.addHandler(handler)
    try:
        use_log_format("json")
        assert isinstance(handler.formatter, JsonFormatter)
        use_log_format("text")
        assert handler.formatter is not None and handler.formatter._fmt == FORMAT
        with pytest.raises(ValueError):
            use_log_format("xml")
    finally:
        root.removeHandler(handler)


@pytest.mark.parametrize(("key", "value"), [
    ("log.format", "xml"),
    ("http.gzip.min.bytes", "-1"),
    ("api.v3.produce.batch.maximum.entries", "0"),
    ("api.v3.produce.batch.maximum.entries", "51"),
    ("http.access.log", "yes"),
])
def test_bad_values_are_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(overrides={key: value}, environ={})


def test_the_front_door_defaults() -> None:
    config = load_config(environ={})
    assert config["access.control.allow.origin"] == ""
    assert config["http.gzip.min.bytes"] == 0
    assert config["http.access.log"] is False
    assert config["log.format"] == "text"
    assert config["api.v3.produce.batch.maximum.entries"] == 10
    assert "log.format" not in config.log_defaults  # a broker property, not a topic default
