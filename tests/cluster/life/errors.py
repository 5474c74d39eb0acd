"""What stops the walk: a violation of the model or of the cluster's promises."""

from __future__ import annotations


class Violation(AssertionError):
    """The cluster broke a promise: ``kind`` names which (``5xx``, ``lost``,
    ``committed-went-back``, ``member-vanished``, ``not-healed``...), ``detail`` says how."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
