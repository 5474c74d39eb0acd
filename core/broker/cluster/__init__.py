"""Calls to the other brokers of the cluster over their internal HTTP API: ``client``
(every internal call, errors translated into domain errors) and ``replica_http`` (the
lean keep-alive poster of the follower fetch loop)."""
