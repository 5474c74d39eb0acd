"""The controller role: the one broker (elected through the metadata store) that
decides topic layout and leadership, plus its pure rules (``leader_election``,
``replica_assignment``, ``reassignment``)."""
