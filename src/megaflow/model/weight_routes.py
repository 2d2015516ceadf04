"""The gateway's weight routes: how a trainer in another process updates the engine.

All are behind the bearer token (the ``authorize`` callable the gateway is
given); a gateway without one refuses every update, so an engine started
without a token never takes weights.

- ``POST /v1/weights`` ``{"path", "version"}``: every replica loads the
  checkpoint at ``path`` (a directory or file the engine can read, or an
  ``s3://`` URI it downloads first) and serves it as ``version``.
- ``GET /v1/weights``: every replica's status, with the version it serves (a
  trainer's health checks read it: an engine restarted at the same address
  serves v0 again, whatever it was given before).
- ``GET /v1/weights/digest``: by replica, the SHA-256 of every tensor it
  serves (``tensor_digests``), so a trainer can check an update arrived bit
  for bit.
- the ``broadcast`` sync's group, one rank per replica (the
  ``GroupEngineControl`` protocol of ``megaflow.train.weight_sync``):
  ``GET /v1/weights/group`` answers ``{"ranks": N}``;
  ``POST /v1/weights/group/init`` with a ``WeightGroup`` joins it (answering once
  the whole group formed); ``POST /v1/weights/group/update`` with
  ``{"metas", "version"}`` receives the buckets the trainer then broadcasts,
  stages them and swaps when all arrived and checked out;
  ``POST /v1/weights/group/close`` leaves it.

Update routes answer the version and every replica's status; an error names
the replicas that refused and what each serves now.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from megaflow.core.errors import AuthError, InvalidInput
from megaflow.core.weight_group import GroupUpdate, WeightGroup
from megaflow.model.abstract import WeightsUpdate
from megaflow.model.control import LocalModelControl

Authorize = Callable[[str | None], bool]
"""Given the request's ``Authorization`` header, whether it carries the token."""
ErrorBody = Callable[[Exception], JSONResponse]


def add_weight_routes(
    app: FastAPI, control: LocalModelControl, authorize: Authorize | None, error: ErrorBody
) -> None:
    """Serve the weight routes of ``control``'s replicas on ``app``."""

    async def guarded(request: Request, act: Callable[[], Awaitable[Any]]) -> Any:
        if authorize is None:
            return error(AuthError("weight updates are off: the gateway runs without a token"))
        if not authorize(request.headers.get("authorization")):
            return error(AuthError("missing or wrong bearer token"))
        try:
            return await act()
        except Exception as exc:
            return error(exc)

    async def body(request: Request, kind: type[Any], what: str) -> Any:
        try:
            return kind.model_validate(await request.json())
        except ValueError as exc:
            raise InvalidInput(f"not a {what}: {exc}") from exc

    @app.post("/v1/weights")
    async def weights(request: Request) -> Any:
        async def act() -> dict[str, Any]:
            update = await body(request, WeightsUpdate, 'weights update {"path", "version"}')
            statuses = await control.update_weights(update.path, update.version)
            return {"version": update.version, "backends": [st.model_dump() for st in statuses]}

        return await guarded(request, act)

    @app.get("/v1/weights")
    async def served(request: Request) -> Any:
        async def act() -> dict[str, Any]:
            statuses = await control.list_backends()
            return {"backends": [st.model_dump() for st in statuses if not st.draining]}

        return await guarded(request, act)

    @app.get("/v1/weights/digest")
    async def digest(request: Request) -> Any:
        async def act() -> dict[str, Any]:
            return {"backends": await control.weight_digests()}

        return await guarded(request, act)

    @app.get("/v1/weights/group")
    async def group_ranks(request: Request) -> Any:
        async def act() -> dict[str, Any]:
            return {"ranks": await control.weight_group_ranks()}

        return await guarded(request, act)

    @app.post("/v1/weights/group/init")
    async def group_init(request: Request) -> Any:
        async def act() -> dict[str, Any]:
            group = await body(request, WeightGroup, "weight group")
            await control.init_weight_group(group)
            return {"ranks": await control.weight_group_ranks()}

        return await guarded(request, act)

    @app.post("/v1/weights/group/update")
    async def group_update(request: Request) -> Any:
        async def act() -> dict[str, Any]:
            update = await body(request, GroupUpdate, 'group update {"metas", "version"}')
            statuses = await control.update_weights_from_group(update.metas, update.version)
            return {"version": update.version, "backends": [st.model_dump() for st in statuses]}

        return await guarded(request, act)

    @app.post("/v1/weights/group/close")
    async def group_close(request: Request) -> Any:
        async def act() -> dict[str, Any]:
            await control.close_weight_group()
            return {}

        return await guarded(request, act)
