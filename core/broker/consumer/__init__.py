"""REST consumer instances (Confluent's v2 consumers) as members of coordinator-run
groups: ``manager`` is their lifecycle, ``instance`` their settings and positions,
``fetch`` where positions start and how a long-polling read collects records."""
