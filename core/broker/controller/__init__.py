"""The controller role: the one broker (elected through the metadata store) that
decides topic layout and leadership (``controller``, with its preferred-replica election
and partition reassignment in the mixins ``preferred_election`` and ``reassigner``), plus
its pure rules (``leader_election``, ``replica_assignment``, ``reassignment``)."""
