"""PySpark finds franz's data source by itself after an install, from any directory.

PySpark registers the ``DefaultSource`` of every importable top-level module named
``pyspark_*`` that ``pkgutil.iter_modules()`` lists (``pyspark.sql.worker.
lookup_data_sources``), so ``spark.read.format("franz")`` works without ``register()``
when ``pyspark_franz`` is listed. The checks run that same lookup in a fresh interpreter
whose working directory is not the repository (the repository on sys.path would hide
an install that does not expose the module): once against the install the test suite
runs on (``pip install -e .`` in CI), once against a wheel (``pip install .``)
installed into a virtual environment of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LOOKUP = """
import importlib, pkgutil
from pyspark.sql.datasource import DataSource
found = {}
for info in pkgutil.iter_modules():
    if info.name.startswith("pyspark_"):
        mod = importlib.import_module(info.name)
        if hasattr(mod, "DefaultSource") and issubclass(mod.DefaultSource, DataSource):
            found[mod.DefaultSource.name()] = mod.__file__
print(found)
assert "franz" in found, found
"""


def _lookup(python: str, cwd: Path) -> str:
    # without PYTHONPATH: the Spark fixtures put the checkout there for their workers,
    # which would find the module whatever the install does
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([python, "-c", LOOKUP], cwd=cwd, capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_discovered_from_another_directory(tmp_path: Path) -> None:
    out = _lookup(sys.executable, tmp_path)
    assert "pyspark_franz" in out


def test_discovered_after_a_wheel_install(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    # pyproject's build requirements (setuptools, wheel) come from the package index,
    # as for any `pip install .`
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "-w", str(wheels), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    env_dir = tmp_path / "venv"
    # the environment's own packages (pyspark and franz's dependencies) stay visible;
    # franz itself comes from the wheel, installed over them in the new environment
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    python = str(env_dir / "bin" / "python")
    (wheel,) = wheels.glob("franz-*.whl")
    r = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps",
                        "--force-reinstall", str(wheel)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = _lookup(python, tmp_path)
    assert str(env_dir) in out, out  # the wheel's module, not the editable install's
