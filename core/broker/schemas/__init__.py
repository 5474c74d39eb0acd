"""A Confluent Schema Registry compatible registry inside the broker (docs/schema-registry.md).

Subjects, versions, schema ids, compatibility levels and modes live in the compacted
internal topic ``_schemas`` (one partition, Confluent's record layout: ``records``).
The leader of ``_schemas-0`` is the registry's one reader and writer (``registry``):
it loads the partition into memory (``state``) whenever its leader epoch moved, checks
and appends with acks=all. Any broker takes a call and hands it to that leader
(``router``, over the internal API when it is another broker). Schema formats (AVRO,
JSON, PROTOBUF), their canonical forms and their compatibility rules are in
``formats``; the levels (BACKWARD, FORWARD, FULL and their transitive forms) in
``compatibility``.
"""
