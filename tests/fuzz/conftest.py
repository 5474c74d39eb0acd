"""A real ``franz serve`` of its own for the OpenAPI fuzz tests (tests/fuzz).

The server machinery is the integration tests' (``FranzServer`` in
tests/integration/conftest.py), loaded by path: conftest modules are not importable
packages, and this broker is deliberately separate from the integration tests' shared
``franz_server``, since the fuzzer fills it with odd topics, groups, users, ACLs and
schemas.

Fixtures
- ``fuzz_server`` (module): one standalone broker, ``num.partitions=3``, topic
  auto-creation on (the defaults of ``franz serve`` otherwise: no authentication).
  Reads wait at most 200 ms (``consumer.request.timeout.max.ms``), so a generated
  ``timeout=300000`` costs nothing (larger ones are the documented 400).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

OVERRIDES = [
    "num.partitions=3",
    "consumer.request.timeout.ms=100",
    "consumer.request.timeout.max.ms=200",
]

_INTEGRATION_CONFTEST = Path(__file__).resolve().parents[1] / "integration" / "conftest.py"


def _integration() -> ModuleType:
    name = "franz_tests_integration_conftest"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, _INTEGRATION_CONFTEST)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    server = _integration().FranzServer(
        tmp_path_factory.mktemp("fuzz") / "data", OVERRIDES
    )
    server.start()
    yield server
    server.stop()
