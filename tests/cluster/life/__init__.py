"""The life test: a seeded, model-checked random walk over a real three-broker cluster.

One concept per module:

- ``settings``: the cluster's properties, the topics, the walk's knobs (seed, steps,
  seconds from ``FRANZ_LIFE_*``);
- ``http``: every HTTP call, classified (answer, try-again, unavailable, server error);
- ``cluster``: the driver: ZooKeeper, three ``franz broker`` processes, the ``franz``
  tools, the cluster's state in ZooKeeper, healing;
- ``model``: what the walk was told (acknowledged records, committed offsets, members);
- ``workload``: the client steps (produce, idempotent produce and its exact retry,
  consumer instances, commits);
- ``faults``: the operator's and the machine's steps (restarts, kill -9, leadership
  moves with the tools, the controller killed, SIGSTOP past the session);
- ``checker``: the model against what every broker serves;
- ``walk``: the seeded schedule, the history, the counts, the report.

docs/life-test.md describes it.
"""
