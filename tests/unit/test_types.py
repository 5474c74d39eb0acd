"""mypy on core/ and api/ ([tool.mypy] in pyproject.toml) reports no error."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_is_clean() -> None:
    # the files and options are pyproject's; its cache (.mypy_cache) makes a rerun fast
    # (~10 s without it)
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
