"""Router: least outstanding requests, cap, token bucket, timeouts, retries."""

from __future__ import annotations

import asyncio

import pytest

from megaflow.core.errors import MegaFlowTimeout, ModelError, TransportError
from megaflow.model.abstract import Backend, CallContext, ChatRequest, Completion
from megaflow.model.routing import Router, TokenBucket

REQ = ChatRequest(messages=[{"role": "user", "content": "x"}])


class Gate(Backend):
    """Answers once released; counts calls in flight."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.release = asyncio.Event()
        self.inflight = 0
        self.peak = 0

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        try:
            await self.release.wait()
        finally:
            self.inflight -= 1
        return Completion(message={"role": "assistant", "content": self.name})


class Failing(Backend):
    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.calls = 0

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return Completion(message={"role": "assistant", "content": "ok"})


async def test_least_outstanding_spreads_load() -> None:
    a, b = Gate("a"), Gate("b")
    router = Router([a, b], max_concurrency=10)
    tasks = [asyncio.create_task(router.complete(REQ, CallContext())) for _ in range(6)]
    await asyncio.sleep(0.05)
    assert (a.inflight, b.inflight) == (3, 3)
    assert router.outstanding == 6
    a.release.set()
    b.release.set()
    names = sorted(t.message["content"] for t in await asyncio.gather(*tasks))
    assert names == ["a"] * 3 + ["b"] * 3
    assert router.outstanding == 0


async def test_least_outstanding_avoids_a_busy_replica() -> None:
    slow, fast = Gate("slow"), Gate("fast")
    fast.release.set()
    router = Router([slow, fast], max_concurrency=10)
    pending = asyncio.create_task(router.complete(REQ, CallContext()))
    await asyncio.sleep(0.02)
    results = [await router.complete(REQ, CallContext()) for _ in range(4)]
    assert all(r.message["content"] == "fast" for r in results)
    slow.release.set()
    await pending


async def test_concurrency_cap_holds() -> None:
    gate = Gate("g")
    router = Router([gate], max_concurrency=2)
    tasks = [asyncio.create_task(router.complete(REQ, CallContext())) for _ in range(5)]
    await asyncio.sleep(0.05)
    assert gate.inflight == 2
    gate.release.set()
    await asyncio.gather(*tasks)
    assert gate.peak == 2


async def test_token_bucket_paces_after_burst() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=2.0, burst=3, clock=lambda: now[0])
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.5
    assert bucket.try_acquire()
    assert not bucket.try_acquire()


async def test_router_token_bucket_delays_requests() -> None:
    backend = Failing([])
    router = Router([backend], requests_per_s=50, burst=1)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for _ in range(3):
        await router.complete(REQ, CallContext())
    assert loop.time() - t0 >= 2 / 50 * 0.9  # two waits of 1/rate after the burst


async def test_retries_transport_errors_only() -> None:
    flaky = Failing([TransportError("refused"), TransportError("reset")])
    router = Router([flaky], retries=2, backoff_s=0.001)
    assert (await router.complete(REQ, CallContext())).content == "ok"
    assert flaky.calls == 3

    down = Failing([TransportError("refused")] * 5)
    with pytest.raises(TransportError, match="after 2 tries"):
        await Router([down], retries=1, backoff_s=0.001).complete(REQ, CallContext())
    assert down.calls == 2

    broken = Failing([ModelError("bad request")])
    with pytest.raises(ModelError):
        await Router([broken], retries=3).complete(REQ, CallContext())
    assert broken.calls == 1


async def test_hanging_backend_times_out_without_retry() -> None:
    gate = Gate("hang")
    router = Router([gate], timeout_s=0.1, retries=3)
    with pytest.raises(MegaFlowTimeout, match=r"no answer within 0\.1s \(trajectory t9\)"):
        await router.complete(REQ, CallContext(trajectory_id="t9"))
    assert gate.peak == 1
    assert router.outstanding == 0


class Named(Backend):
    """Answers at once with its name; fails with a transport error while ``down``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.down = False

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        if self.down:
            raise TransportError(f"{self.name} is down")
        return Completion(message={"role": "assistant", "content": self.name})


async def test_a_trajectory_stays_on_the_replica_of_its_first_call() -> None:
    a, b = Named("a"), Named("b")
    router = Router([a, b], retries=1, backoff_s=0)

    async def where(tid: str) -> str:
        return (await router.complete(REQ, CallContext(trajectory_id=tid))).content

    first = {t: await where(t) for t in ("t1", "t2", "t3")}  # odd: plain rotation would move them
    assert set(first.values()) == {"a", "b"}  # new trajectories still spread
    for _ in range(3):
        assert {t: await where(t) for t in first} == first
    router.release("t1")
    assert "t1" not in router._affinity
    lost = next(t for t, name in first.items() if name == "a")
    a.down = True  # a transport error ends the affinity: the retry goes to b
    assert await where(lost) == "b"
    a.down = False
    assert await where(lost) == "b"  # and it stays there
