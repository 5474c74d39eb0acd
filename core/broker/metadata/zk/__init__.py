"""The ZooKeeper backend of ``MetadataStore``: Kafka's znode layout under a chroot.

``client`` adapts kazoo (the only module here that catches kazoo errors), ``paths`` owns
each znode's path and JSON, ``watches`` keeps the cluster view current, ``store`` is the
``MetadataStore`` built on them, over one mixin per concept: ``base`` (the state they
share), ``election`` (the controller role, its epoch fence, admin requests), ``brokers``
(registrations and session handling), ``topics`` (topics, configs, partition states).
"""
