"""Access to the services the app was built with (``create_app`` puts them on app.state)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request

from api.render_cache import RenderCache

if TYPE_CHECKING:
    from core.broker.broker import Broker
    from core.broker.consumer.router import GroupRouter


def broker_of(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    return broker


def consumers_of(request: Request) -> GroupRouter:
    """Consumer instances and groups, each served by its coordinator (any broker)."""
    groups: GroupRouter = request.app.state.broker.groups
    return groups


def render_cache_of(request: Request) -> RenderCache:
    cache: RenderCache = request.app.state.render_cache
    return cache
