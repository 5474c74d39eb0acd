"""docs/kafka-protocol.md lists exactly the APIs and versions ApiVersions answers."""

from __future__ import annotations

import re
from pathlib import Path

from api.kafka.apis import load_handlers

DOC = Path(__file__).resolve().parents[3] / "docs" / "kafka-protocol.md"


def test_the_documented_api_table_is_what_api_versions_answers() -> None:
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)-(\d+) \|$", DOC.read_text(), re.M)
    documented = {int(key): (name, int(lo), int(hi)) for name, key, lo, hi in rows}
    served = {a.key: (a.name, a.versions.low, a.versions.high) for a in load_handlers().values()}
    assert documented == served
