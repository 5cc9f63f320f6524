"""yui-push: the phone push function (to be built)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

from relay.gateway.db import Database

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings


def routes(db: Database, settings: GatewaySettings) -> list[BaseRoute]:
    return []


@asynccontextmanager
async def lifespan(db: Database, settings: GatewaySettings) -> AsyncIterator[None]:
    yield
