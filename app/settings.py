"""Settings: Kafka-named properties from a ``.properties`` file, then environment
variables (``FRANZ_LOG_RETENTION_HOURS=24`` -> ``log.retention.hours``), then CLI flags,
merged once into a ``core.broker.config.BrokerConfig``.

``listeners`` is kept whole (``app.listeners`` serves them all); ``host`` and ``port``
are its first listener's unless given as overrides (``--host``/``--port``), which then
replace that listener's."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from app.listeners import Listener, parse_listeners
from core.broker.admin.broker_config import BrokerConfig

ENV_PREFIX = "FRANZ_"


def read_properties(path: Path) -> dict[str, str]:
    """Java-style ``key=value`` (or ``key: value``) lines; ``#``/``!`` comments."""
    props: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            props[line] = ""
            continue
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


def env_properties(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {
        k[len(ENV_PREFIX):].lower().replace("_", "."): v
        for k, v in env.items() if k.startswith(ENV_PREFIX) and len(k) > len(ENV_PREFIX)
    }


def load_config(
    *, properties_file: Path | None = None, overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    props: dict[str, object] = {}
    if properties_file is not None:
        props.update(read_properties(properties_file))
    props.update(env_properties(environ))
    props.update({k: v for k, v in (overrides or {}).items() if v is not None})
    first = _first_listener(props.get("listeners"))
    if first is not None:  # host/port mean the first listener, unless given as overrides
        given = {k for k, v in (overrides or {}).items() if v is not None}
        if "host" not in given:
            props["host"] = first.host
        if "port" not in given:
            props["port"] = first.port
    return BrokerConfig.from_properties(props)


def _first_listener(listeners: object) -> Listener | None:
    if not isinstance(listeners, str):
        return None
    try:
        found = parse_listeners(listeners)
    except ValueError:  # reported, naming the property, when the server starts
        return None
    return found[0] if found else None
