"""The storage engine: Kafka's on-disk log format.

``codec`` (compression and CRC-32C, the only place that sees the C libraries),
``batch`` (the 61-byte v2 batch header and batch framing), ``records`` (building and
decoding records inside batches), ``index`` (offset and time indexes), ``segment``
(one .log with its indexes), ``log`` (the partition log: append, read, truncate,
recovery), ``checkpoint`` (Kafka's text checkpoint files), ``config`` (topic-level
configuration and validation), ``retention`` and ``cleaner`` (deletion and compaction),
and ``log_manager`` (the data dir). Storage objects are not thread-safe: their owner
serialises access.
"""
