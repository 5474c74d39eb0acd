"""franz core: the broker (``core.broker``) and its storage engine (``core.storage``).

Leaf modules shared by both: ``core.errors`` (the domain error tree), ``core.types``
(ids and offsets) and ``core.clock`` (time, injectable for tests). Nothing in ``core``
imports FastAPI; ``core.storage`` imports nothing from ``core.broker``.
"""
