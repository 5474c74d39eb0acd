"""Options every FastAPI app of franz is built with (the broker's and the ceiling
servers', so both run the same per-request code).

``NO_OPENTELEMETRY``: FastAPI's built-in OpenTelemetry hooks (FastAPI >= 0.16x) look up
the global providers on every request; franz exports its own metrics (``/metrics``), so
they are off. Older FastAPI has no such parameter.
"""

from __future__ import annotations

import inspect
from typing import Any

from fastapi import FastAPI

NO_OPENTELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {}
)
