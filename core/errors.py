"""The domain error tree, one class per Kafka error code that matters.

    FranzError                    error_code, retriable
    ├── core.storage.errors.*     log, segment, record and config errors
    └── core.broker.errors.*      partition, replication, group and metadata errors

Each subclass sets ``error_code`` to Kafka's wire error number; ``for_code`` is the
reverse lookup. HTTP status and Confluent ``error_code`` are chosen in ``api/errors.py``
only, never here.
"""

from __future__ import annotations

from typing import ClassVar


class FranzError(Exception):
    """Base of every domain error. ``message`` names what is wrong, for people."""

    error_code: ClassVar[int] = -1  # UNKNOWN_SERVER_ERROR
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__class__.__name__)
        self.message = message or self.__class__.__name__

    @classmethod
    def for_code(cls, code: int) -> type[FranzError]:
        """The most specific registered class for a Kafka error code."""
        return _registry().get(code, FranzError)

    @classmethod
    def for_name(cls, name: str, code: int) -> type[FranzError]:
        """The class called ``name`` when it is a FranzError (several share a Kafka
        code: the internal API carries the exact one), else ``for_code(code)``."""
        for sub in _all_subclasses(FranzError):
            if sub.__name__ == name:
                return sub
        return cls.for_code(code)


def _all_subclasses(cls: type[FranzError]) -> list[type[FranzError]]:
    out: list[type[FranzError]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


def _registry() -> dict[int, type[FranzError]]:
    reg: dict[int, type[FranzError]] = {}
    for sub in _all_subclasses(FranzError):
        reg.setdefault(sub.error_code, sub)
    return reg


class InvalidRequestError(FranzError):
    """A request that is malformed in a way Kafka calls INVALID_REQUEST."""

    error_code = 42
