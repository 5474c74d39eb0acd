"""Cluster metadata: what topics, partitions, leaders, ISRs and brokers exist.

``store`` is the ``MetadataStore`` interface the broker and controller use, with its
value types and events; two backends implement it: ``embedded_store`` (SQLite through
SQLAlchemy, standalone ``franz serve``) and ``zk`` (Kafka's znode layout through kazoo,
a cluster). ``cache`` is this broker's in-memory read view of the store; ``events``
and ``rules`` hold what both backends share.
"""
