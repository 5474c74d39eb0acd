"""Kafka-protocol produce and fetch beside REST and same-run ceilings, one broker process.

    python benchmarks/kafka_protocol_bench.py [--rounds 2] [--duration 5] [--json OUT]
    python benchmarks/kafka_protocol_bench.py --quick            # smoke run, ~30 s
    python benchmarks/kafka_protocol_bench.py --profile DIR      # + py-spy of the broker

The same run as ``franz bench kafka`` (docs/cli.md "bench"). The benchmark itself (its
cases, ceilings, ratios and options) is ``app/bench/kafka_protocol.py``, whose docstring
says what is measured; this file only runs it from a source tree.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory: import this tree's app
    sys.path.insert(0, str(ROOT))

from app.bench.kafka_protocol import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
