"""Settings: Kafka-named properties from a ``.properties`` file, then environment
variables (``FRANZ_LOG_RETENTION_HOURS=24`` -> ``log.retention.hours``), then CLI flags,
merged once into a ``core.broker.config.BrokerConfig``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

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
    listeners = props.pop("listeners", None)
    if isinstance(listeners, str) and listeners and "port" not in (overrides or {}):
        host_port = listeners.split(",")[0].split("://")[-1]
        host, _, port = host_port.rpartition(":")
        props.setdefault("host", host or "127.0.0.1")
        props["port"] = port
    return BrokerConfig.from_properties(props)
