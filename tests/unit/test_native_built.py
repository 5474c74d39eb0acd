"""Where the C accelerators are required (CI sets FRANZ_REQUIRE_NATIVE=1), both must
have been built and imported: otherwise every C test would skip and the suite pass on
the pure-Python paths alone."""

from __future__ import annotations

import os

import pytest

from api import native_render
from core.storage import native


@pytest.mark.skipif(os.environ.get("FRANZ_REQUIRE_NATIVE") != "1",
                    reason="FRANZ_REQUIRE_NATIVE=1 is not set (CI sets it)")
def test_both_extensions_are_built() -> None:
    assert native.AVAILABLE, "core.storage._native is not built"
    assert native_render.AVAILABLE, "api._render is not built"
