"""This broker's properties as v3 broker configs (read-only: franz has no dynamic
broker configs): the property table, then the log properties that default topic keys,
then any other log property set."""

from __future__ import annotations

from core.broker.config import BROKER_PROPERTIES, BrokerConfig
from core.storage.config import (
    TOPIC_CONFIG_DEFS,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    server_synonyms,
)

_PROPERTY_TYPES = {bool: ConfigType.BOOLEAN, int: ConfigType.INT, str: ConfigType.STRING}


def _broker_entry(name: str, value: str | None, default: str | None, *, set_here: bool,
                  type_: ConfigType, doc: str) -> ConfigEntry:
    source = ConfigSource.STATIC_BROKER_CONFIG if set_here else ConfigSource.DEFAULT_CONFIG
    syns = [ConfigSynonym(name, value, source)] if set_here else []
    syns.append(ConfigSynonym(name, default, ConfigSource.DEFAULT_CONFIG))
    return ConfigEntry(name, value, source, not set_here, True, False, tuple(syns), type_, doc)


def broker_config_entries(config: BrokerConfig) -> list[ConfigEntry]:
    """The broker property table, then the log properties that default topic keys
    (``log.retention.hours``, ``message.max.bytes``, ...), then any other log property
    set; STATIC_BROKER_CONFIG when set (or, for the table, differing from the default)."""
    def text(v: object) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    entries: dict[str, ConfigEntry] = {}
    for prop in BROKER_PROPERTIES:
        value = config[prop.name]
        entries[prop.name] = _broker_entry(
            prop.name, text(value), text(prop.default), set_here=value != prop.default,
            type_=_PROPERTY_TYPES.get(prop.type, ConfigType.STRING), doc=prop.doc)
    log_defaults = config.log_defaults
    for key in TOPIC_CONFIG_DEFS:
        for syn in server_synonyms(key.name):
            raw = log_defaults.get(syn.name)
            entries.setdefault(syn.name, _broker_entry(
                syn.name, raw if raw is not None else syn.default, syn.default,
                set_here=raw is not None, type_=key.type,
                doc=f"Broker default of the topic config {key.name}."))
    for name, raw in log_defaults.items():
        entries.setdefault(name, _broker_entry(name, raw, None, set_here=True,
                                               type_=ConfigType.STRING, doc="Log property."))
    return [entries[name] for name in sorted(entries)]
