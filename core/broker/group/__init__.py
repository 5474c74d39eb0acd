"""Consumer groups as their coordinator holds them.

``coordinator`` owns the groups of the ``__consumer_offsets`` partitions this broker
leads: membership, generations, rebalances, committed offsets. ``group`` is one group's
state machine; ``assignors`` the range, round-robin and sticky assignors; ``records``,
``offsets_codec``, ``consumer_protocol`` and ``wire_primitives`` the formats of
``__consumer_offsets``; ``loading`` reads a partition back after a leadership change;
``backend`` is the narrow interface the coordinator needs from the broker.
``classic`` is Kafka's classic group protocol as an API for Kafka clients
(``ClassicGroups``: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit...), run by
the coordinator's ``classic_engine`` mixin, its arguments in ``classic_types``.
"""
