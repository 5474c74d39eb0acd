"""Kafka's wire protocol: franz's second front door, beside HTTP.

Kafka clients (librdkafka, kafka-python, aiokafka, the Java clients and tools) connect
to a ``kafka.listeners`` listener and speak Kafka's protocol to the same broker core the
HTTP API uses: the same partitions, groups, committed offsets, users and ACLs.

    protocol/   the codec: Kafka's message definitions compiled to decoders/encoders
    server.py   listeners and connections: framing, limits, dispatch, answers in order
    apis.py     the API table: key -> versions and handler (what ApiVersions answers)
    handlers/   one module per family of APIs, each a thin translation onto core.broker
    errors.py   franz's errors -> Kafka error codes (the one place)
"""
