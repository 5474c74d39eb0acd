"""Automatic registration of the PySpark data source ``franz``.

PySpark registers the ``DefaultSource`` of every importable top-level module named
``pyspark_<name>`` the first time a session looks up a Python data source, so with franz
installed ``spark.read.format("franz")`` works with no ``register()`` call.
"""

from spark_connector import DefaultSource

__all__ = ["DefaultSource"]
