"""The ``broadcast`` weight sync's calls to MegaFlow's own engine in another process.

The trainer's ``openai`` client of ``megaflow serve model`` (``weight_sync:
megaflow``) is a member of the trainer's weight-update group by proxy: each
call here is one of the engine's weight routes (:mod:`megaflow.model.weight_routes`),
and the engine's replicas are the ranks (``served`` is the version they serve,
which the health checks compare with the one the trainer gave). ``native`` is the client's call of a
native route (method, path, JSON body; the JSON answer), behind its token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from megaflow.core.errors import ModelError
from megaflow.core.weight_group import TensorMeta, WeightGroup

Native = Callable[[str, dict[str, Any] | None, str], Awaitable[Any]]
"""``native(path, body, method)``: the engine's JSON answer; raises on an error answer."""


async def ranks(native: Native) -> int:
    answer = await native("/v1/weights/group", None, "GET")
    try:
        return int(answer["ranks"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"the engine sent no rank count: {answer!r}") from exc


async def init(native: Native, group: WeightGroup) -> None:
    await native("/v1/weights/group/init", group.model_dump(), "POST")


async def update(native: Native, metas: Sequence[TensorMeta], version: int) -> None:
    """Announce an update; returns once every replica of the engine serves it."""
    body = {"metas": [m.model_dump() for m in metas], "version": version}
    answer = await native("/v1/weights/group/update", body, "POST")
    served = [b.get("weights_version") for b in (answer or {}).get("backends", [])]
    if not served or any(v != version for v in served):
        raise ModelError(f"the engine serves {served} after broadcast weights v{version}")


async def digests(native: Native) -> dict[str, str]:
    """The SHA-256 of each tensor the engine serves; its replicas must agree."""
    answer = await native("/v1/weights/digest", None, "GET")
    found = list((answer or {}).get("backends", {}).values())
    if not found or any(d != found[0] for d in found):
        raise ModelError(f"the engine's replicas serve different weights or none: {answer!r}")
    return dict(found[0])


async def served(native: Native) -> int:
    """The weights version every replica of the engine serves (``GET /v1/weights``);
    replicas that differ serve no one version, which is an error."""
    answer = await native("/v1/weights", None, "GET")
    found = {b.get("weights_version") for b in (answer or {}).get("backends", [])}
    if len(found) != 1 or not isinstance(next(iter(found)), int):
        raise ModelError(f"the engine's replicas serve no one weights version: {answer!r}")
    return int(next(iter(found)))


async def close(native: Native) -> None:
    await native("/v1/weights/group/close", None, "POST")
