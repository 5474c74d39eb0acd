"""The broker: partitions, replica manager, delayed operations, group coordinator,
metadata stores and the controller. Built on ``core.storage``; never imports FastAPI."""
