"""Start-up logging: per-partition INFO lines are shown as DEBUG (hidden at INFO), the
lines that matter are untouched."""

from __future__ import annotations

import io
import logging

import pytest

from app.logs import DemoteDetail


def _record(name: str, msg: str, *args: object, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def _shown(records: list[logging.LogRecord], *, show_debug: bool) -> list[str]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(DemoteDetail(show_debug=show_debug))
    for record in records:
        if handler.filter(record):
            handler.emit(record)
    return out.getvalue().splitlines()


RECORDS = [
    _record("core.storage.log_manager", "created log for %s-%d in %s", "orders", 3, "/d"),
    _record("core.broker.group.loading",
            "loaded __consumer_offsets-%d: %d groups in %.0f ms (%d records skipped)",
            7, 0, 1.0, 0),
    _record("core.storage.log_manager", "loaded %d logs from %s (%s shutdown)", 0, "/d",
            "unclean"),
    _record("alembic.runtime.migration", "Context impl %s.", "SQLiteImpl"),
    _record("core.storage.log_manager", "loaded %d logs from %s (%s shutdown)", 50, "/d",
            "unclean"),
    _record("core.broker.controller.controller", "created topic %s with %d partition(s), "
            "replication factor %d", "orders", 3, 1),
    _record("core.storage.log_manager", "created log for %s-%d in %s", "orders", 4, "/d",
            level=logging.WARNING),
]


def test_per_partition_lines_are_hidden_at_info() -> None:
    assert _shown(RECORDS, show_debug=False) == [
        "INFO loaded 50 logs from /d (unclean shutdown)",  # a real recovery is news
        "INFO created topic orders with 3 partition(s), replication factor 1",
        "WARNING created log for orders-4 in /d",  # only INFO is demoted
    ]


def test_per_partition_lines_are_debug_lines_at_debug() -> None:
    shown = _shown(RECORDS, show_debug=True)
    assert shown[:4] == [
        "DEBUG created log for orders-3 in /d",
        "DEBUG loaded __consumer_offsets-7: 0 groups in 1 ms (0 records skipped)",
        "DEBUG loaded 0 logs from /d (unclean shutdown)",
        "DEBUG Context impl SQLiteImpl.",
    ]


def test_an_unknown_level_is_refused() -> None:
    from app.logs import configure_logging  # noqa: PLC0415

    with pytest.raises(ValueError, match="unknown log level 'LOUD'"):
        configure_logging("LOUD")
