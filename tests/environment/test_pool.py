"""Pools: ephemeral and persistent modes, warm spares, limits, reset between tasks."""

from __future__ import annotations

import asyncio
import time

import pytest

from megaflow.core.errors import InvalidInput
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import EnvironmentConfig, PoolConfig
from megaflow.environment.dummy import DummyRuntime
from megaflow.environment.local import LocalRuntime
from megaflow.environment.pool import SandboxPool

SPEC = EnvironmentSpec(files={"state.txt": "clean"})


async def test_ephemeral_gives_fresh_sandboxes_and_destroys_on_release() -> None:
    rt = DummyRuntime()
    async with SandboxPool(rt, "ephemeral", PoolConfig(warm_share=0)) as pool:
        a = await pool.acquire(SPEC, owner="t1")
        b = await pool.acquire(SPEC, owner="t2")
        assert a.id != b.id
        assert (a.info.owner, b.info.owner) == ("t1", "t2")
        await pool.release(a)
        await pool.release(b)
        assert await rt.list() == []
        assert rt.created == 2


async def test_warm_spares_make_acquire_a_hit_and_are_refilled() -> None:
    rt = DummyRuntime()
    async with SandboxPool(rt, "ephemeral", PoolConfig(warm_share=0.5, max=8)) as pool:
        await pool.prewarm(SPEC)
        assert rt.created == 1  # ceil(0.5 * max(busy=0, min=0, 1))
        spare = (await rt.list())[0].id
        got = await pool.acquire(SPEC, owner="t1")
        assert got.id == spare
        for _ in range(100):  # the refill runs in the background
            if rt.created == 2:
                break
            await asyncio.sleep(0.01)
        assert pool.counts()[SPEC.key()] == {"busy": 1, "idle": 1, "starting": 0}
        await pool.release(got)
    assert await rt.list() == []


async def test_refill_respects_the_rate_limit() -> None:
    rt = DummyRuntime()
    cfg = PoolConfig(warm_share=1.0, max=20, refill_per_s=10)
    async with SandboxPool(rt, "ephemeral", cfg) as pool:
        held = [await pool.acquire(SPEC) for _ in range(8)]  # wants 8 spares now
        made, t0 = rt.created, time.monotonic()
        await asyncio.sleep(0.35)
        started, elapsed = rt.created - made, time.monotonic() - t0
        assert 1 <= started <= elapsed * cfg.refill_per_s + 2  # never faster than the rate
        for sb in held:
            await pool.release(sb)


async def test_persistent_resets_between_tasks_and_caps_at_max() -> None:
    rt = DummyRuntime()
    async with SandboxPool(rt, "persistent", PoolConfig(min=0, max=2, warm_share=0)) as pool:
        a = await pool.acquire(SPEC, owner="t1")
        b = await pool.acquire(SPEC, owner="t2")
        await a.write_file("state.txt", b"dirty")
        waiter = asyncio.create_task(pool.acquire(SPEC, owner="t3"))
        await asyncio.sleep(0.05)
        assert not waiter.done()  # max reached: the third task waits
        await pool.release(a)
        c = await asyncio.wait_for(waiter, 1)
        assert c.id == a.id
        assert c.info.owner == "t3"
        assert await c.read_file("state.txt") == b"clean"
        await pool.release(b)
        await pool.release(c)
        assert len(await rt.list()) == 2  # kept for the next tasks
    assert await rt.list() == []


async def test_persistent_keeps_min_started() -> None:
    rt = DummyRuntime()
    async with SandboxPool(rt, "persistent", PoolConfig(min=3, max=4, warm_share=0.2)) as pool:
        await pool.prewarm(SPEC)
        assert len(await rt.list()) == 3


async def test_task_deadline_beyond_ttl_is_refused() -> None:
    rt = DummyRuntime()
    async with SandboxPool(rt) as pool:
        with pytest.raises(InvalidInput, match="ttl_s"):
            await pool.acquire(EnvironmentSpec(ttl_s=10), task_deadline=time.time() + 60)


async def test_pool_and_spec_from_environment_config() -> None:
    cfg = EnvironmentConfig(mode="persistent", memory_mb=256, network="loopback")
    spec = cfg.spec(files={"a": "b"})
    assert (spec.resources.memory_mb, spec.network, spec.files) == (256, "loopback", {"a": "b"})
    async with SandboxPool.from_config(DummyRuntime(), cfg) as pool:
        assert pool.mode == "persistent"
        sb = await pool.acquire(spec, owner="t")
        await pool.release(sb)


async def test_min_above_max_is_refused() -> None:
    with pytest.raises(InvalidInput, match="min"):
        SandboxPool(DummyRuntime(), "persistent", PoolConfig(min=5, max=2))


async def test_persistent_local_pool_resets_workspace(local: LocalRuntime) -> None:
    cfg = PoolConfig(min=1, max=1, warm_share=0)
    async with SandboxPool(local, "persistent", cfg) as pool:
        first = await pool.acquire(SPEC, owner="t1")
        await first.exec("echo dirty > state.txt; touch extra; sleep 100 >/dev/null 2>&1 &")
        await pool.release(first)
        second = await pool.acquire(SPEC, owner="t2")
        assert second.id == first.id
        out = await second.exec("cat state.txt; ls; ps -o comm | grep -c sleep || true")
        assert out.stdout.split() == ["cleanstate.txt", "0"]  # no newline in the file
        await pool.release(second)
