"""Ceiling servers for ``benchmarks/http_bench.py`` and ``franz bench ceiling``: the same
stack as franz (uvicorn + httptools + uvloop, one worker, FastAPI) answering the same
request shapes with as little work as possible. The servers live in
``app/bench/ceiling.py`` (routes documented there); this script is the same command:

    python benchmarks/ceiling.py --port 18090              # FastAPI app
    python benchmarks/ceiling.py --port 18091 --plain      # bare ASGI callable (tiny GET only)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory: import this tree's app
    sys.path.insert(0, str(ROOT))

from app.bench.ceiling import create_app, main, plain_app, prebuilt_records  # noqa: E402

__all__ = ["create_app", "main", "plain_app", "prebuilt_records"]

if __name__ == "__main__":
    main()
