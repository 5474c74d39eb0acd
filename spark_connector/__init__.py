"""PySpark data source ``franz``: reads and writes topics over franz's HTTP API only."""
