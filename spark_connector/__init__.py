"""PySpark data source ``franz``: reads and writes topics over franz's HTTP API only.

    from spark_connector import FranzDataSource
    spark.dataSource.register(FranzDataSource)
    df = spark.read.format("franz").option("url", "http://127.0.0.1:8082") \\
        .option("subscribe", "orders").load()

See docs/spark.md. The package never imports franz's server code (``core``, ``api``,
``app``): an import-linter contract enforces it.
"""

from __future__ import annotations

from typing import Any

from spark_connector.datasource import FranzDataSource, franz_schema
from spark_connector.options import FranzOptionError
from spark_connector.ranges import FranzDataLossError

#: What PySpark's automatic discovery looks for in a top-level ``pyspark_<name>`` module.
DefaultSource = FranzDataSource

__all__ = [
    "DefaultSource",
    "FranzDataLossError",
    "FranzDataSource",
    "FranzOptionError",
    "franz_schema",
    "register",
]


def register(spark: Any) -> None:
    """``spark.dataSource.register(FranzDataSource)``: ``format("franz")`` in ``spark``."""
    spark.dataSource.register(FranzDataSource)
