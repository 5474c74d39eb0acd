"""The audit trail: one structured line per authentication failure, authorization
denial and security or admin change, on the ``franz.audit`` logger.

    {"event":"authorization","principal":"User:bob","host":"10.0.0.7",
     "operation":"WRITE","resource":"TOPIC:orders","result":"denied"}

Secrets never reach it: callers pass names, never credentials. Operators route the
logger where they want it (a file, syslog) with the logging configuration.
"""

from __future__ import annotations

import logging

import orjson

AUDIT = logging.getLogger("franz.audit")


def audit(event: str, *, principal: str, result: str, operation: str = "",
          resource: str = "", host: str = "", **details: object) -> None:
    if not AUDIT.isEnabledFor(logging.INFO):
        return
    line: dict[str, object] = {"event": event, "principal": principal, "host": host,
                               "operation": operation, "resource": resource,
                               "result": result}
    line.update(details)
    AUDIT.info("%s", orjson.dumps(line, default=str).decode())
