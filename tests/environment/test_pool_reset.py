"""A persistent pool never hands out again a sandbox whose reset failed."""

from __future__ import annotations

import pytest

from megaflow.core.errors import SandboxError
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import PoolConfig
from megaflow.environment.dummy import DummyRuntime, DummySandbox
from megaflow.environment.pool import SandboxPool

SPEC = EnvironmentSpec(files={"state.txt": "clean"})


@pytest.mark.parametrize("error", [SandboxError("a process outlived the kill"), OSError(5, "EIO")])
async def test_a_sandbox_whose_reset_failed_is_destroyed(
    error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing_reset(self: DummySandbox) -> None:
        raise error

    rt = DummyRuntime()
    async with SandboxPool(rt, "persistent", PoolConfig(min=0, max=1, warm_share=0)) as pool:
        first = await pool.acquire(SPEC)
        monkeypatch.setattr(DummySandbox, "reset", failing_reset)
        if isinstance(error, SandboxError):
            await pool.release(first)  # an infrastructure failure: counted, not raised
        else:
            with pytest.raises(OSError, match="EIO"):
                await pool.release(first)  # anything else is a bug: raised, after the destroy
        assert first.info.state == "stopped"
        assert await rt.list() == []
        monkeypatch.undo()
        second = await pool.acquire(SPEC)
        assert second.id != first.id
        await pool.release(second)
