"""Logging of ``franz serve`` / ``franz broker``: one stderr handler on the root logger at
``--log-level``, and per-partition detail shown as DEBUG.

A start used to print one INFO line per partition (``created log for ...``, ``loaded
__consumer_offsets-N``: 100 lines for the 50 offsets partitions of a first start, one
per partition of each topic created), which buries the lines that matter. Those records
(``PER_PARTITION``) are demoted to DEBUG by the handler's filter: hidden at INFO, shown
as DEBUG with ``--log-level DEBUG``. So are two lines with nothing to say: the storage's
``loaded 0 logs from DIR (unclean shutdown)`` of a data directory that has no log yet
(a fresh one), and Alembic's per-database preamble. The start is summed up by
``app.server`` in one INFO line.

``log.format=json`` (``use_log_format``) writes each record as one JSON object on one
line: ``time`` (ISO-8601 UTC, milliseconds), ``level``, ``logger``, ``message``, the
traceback as ``exception`` when there is one, and the access log's fields (``method``,
``path``, ``status``, ``bytes``, ``duration_ms``, ``principal``, ...: ``api.access_log``)
as fields of their own.

The modules that write the per-partition lines (``core.storage.log_manager``,
``core.broker.group.loading``) are owned elsewhere; once they log them at DEBUG
themselves, their entries here can go.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: (logger, start of the message template) of INFO records that are detail.
PER_PARTITION: tuple[tuple[str, str], ...] = (
    ("core.storage.log_manager", "created log for "),
    ("core.broker.group.loading", "loaded __consumer_offsets-"),
    ("alembic.runtime.migration", "Context impl "),
    ("alembic.runtime.migration", "Will assume "),
)
_EMPTY_DIR = ("core.storage.log_manager", "loaded %d logs from ")


def is_detail(record: logging.LogRecord) -> bool:
    """Whether an INFO record is per-partition (or empty) detail, shown as DEBUG."""
    template = record.msg if isinstance(record.msg, str) else ""
    for name, start in PER_PARTITION:
        if record.name == name and template.startswith(start):
            return True
    name, start = _EMPTY_DIR
    return (record.name == name and template.startswith(start)
            and isinstance(record.args, tuple) and record.args[:1] == (0,))


class DemoteDetail(logging.Filter):
    """Handler filter: detail INFO records become DEBUG ones, dropped unless the handler
    shows DEBUG (``show_debug``)."""

    def __init__(self, *, show_debug: bool) -> None:
        super().__init__()
        self.show_debug = show_debug

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not is_detail(record):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return self.show_debug


def configure_logging(level: str) -> None:
    """The root logger at ``level`` (a name: ``INFO``, ``debug``...), one stderr handler."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r} (DEBUG, INFO, WARNING, ERROR)")
    logging.basicConfig(level=numeric, format=FORMAT)
    for handler in logging.getLogger().handlers:
        handler.addFilter(DemoteDetail(show_debug=numeric <= logging.DEBUG))


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (``log.format=json``)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"
                                                                          ).replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        access = getattr(record, "access", None)
        if isinstance(access, dict):
            entry.update(access)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, default=str)


def use_log_format(log_format: str) -> None:
    """``text`` (``FORMAT``) or ``json`` (``JsonFormatter``) on the root logger's handlers."""
    if log_format not in ("text", "json"):
        raise ValueError(f"unknown log.format {log_format!r} (text, json)")
    formatter = JsonFormatter() if log_format == "json" else logging.Formatter(FORMAT)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
