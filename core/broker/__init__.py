"""The broker: ``broker.Broker`` is the facade ``api/`` talks to, assembled from its parts
in ``assembly``; the parts live in sub-packages named for their concepts (``replica``,
``cluster``, ``produce``, ``controller``, ``admin``, ``group``, ``consumer``,
``metadata``) and never see the facade. Built on ``core.storage``; never imports a web
framework. The map and the path of a produce and a read: ``docs/architecture.md``."""
