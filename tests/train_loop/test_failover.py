"""The train loop through two engine processes survives losing one mid-step.

`megaflow train`'s loop rolls out through two ``megaflow serve model``
processes behind its router (health checks on, ``disk`` weight sync). While
step 1's episodes are running, the engine that holds some of them is
SIGKILLed: the episodes pinned to it are lost (their first turns' tokens died
with it) and start again from their first turn on the other engine, as new
attempts of the same tasks. The step completes with every sample of its batch
(none lost, none counted twice), every recorded call carries a known weights
version equal to the trainer's at that step, and the dead engine is out of
rotation, so step 1's update goes to the live engine only.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.core.trajectory import ModelCall
from megaflow.model.client import InProcessModelClient
from megaflow.model.service import ModelService
from tests.model.test_health_engine import TOKEN, Engine, two_engines, wait_until
from tests.train_loop.conftest import train_config

pytestmark = pytest.mark.slow
PROMPTS, SAMPLES = 3, 2  # a batch of 6 episodes a step


def fleet_config(tmp_path: Path, policy: Path, a: Engine, b: Engine) -> dict[str, object]:
    raw = train_config(
        tmp_path, policy, steps=2, checkpoint_every=0, policy=str(policy),
        prompts_per_step=PROMPTS, weight_sync={"type": "disk", "root": str(tmp_path / "w")},
        step_without_signal=True,  # a random policy earns no reward; each step still updates
    )  # fmt: skip
    raw["samples"] = SAMPLES
    raw["model"] = {
        "type": "openai", "base_url": a.base_url, "replicas": [b.base_url], "model": "default",
        "api_key_env": "ENGINE_TOKEN", "weight_sync": "megaflow", "max_concurrency": 2,
        "health": {"interval_s": 0.5, "timeout_s": 2, "failures": 2},
    }  # fmt: skip
    raw["agent"]["temperature"] = 1.0
    raw["agent"]["max_steps"] = 3
    return raw


async def service_of(loop: TrainLoop) -> ModelService:
    """The job's model service, once the loop has started it."""
    while True:
        arm = loop.job.arms.get(loop.run_id)
        if arm is not None and isinstance(arm.model, InProcessModelClient):
            return arm.model.service
        await asyncio.sleep(0.05)


async def kill_mid_step(loop: TrainLoop, engines: dict[str, Engine]) -> str:
    """SIGKILL an engine while it is answering and holds a step-1 episode that has
    an answered turn already; its base URL once the router has taken it out."""
    service = await service_of(loop)
    router = service.router
    while True:
        for tid, (replica, _) in list(router._affinity.items()):
            answered = [c for c in service.recorder.calls(tid) if c.token_ids]
            if ".s00001." in tid and answered and replica.outstanding:
                engine = engines[replica.backend.name]
                engine.signal(signal.SIGKILL)
                await wait_until(lambda: not replica.healthy, 20)  # noqa: B023 - awaited here
                return engine.base_url
        await asyncio.sleep(0.02)


def trajectories(art: Path) -> dict[str, dict[int, list[ModelCall]]]:
    """Every stored trajectory's model calls, by task id and attempt."""
    out: dict[str, dict[int, list[ModelCall]]] = {}
    for f in art.rglob("trajectory.json"):
        t = json.loads(f.read_text())
        calls = [ModelCall.model_validate(s) for s in t["steps"] if s["kind"] == "model_call"]
        out.setdefault(t["task_id"], {})[t["attempt"]] = calls
    return out


async def test_a_step_completes_on_one_engine_when_the_other_is_killed_mid_step(
    tmp_path: Path, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGINE_TOKEN", TOKEN)
    async with two_engines(policy, tmp_path / "engines") as (a, b):
        raw = fleet_config(tmp_path, policy, a, b)
        loop = TrainLoop(parse_config(raw), run_id="tl-failover", printer=lambda _: None)
        engines = {f"openai:{e.base_url}": e for e in (a, b)}
        killer = asyncio.ensure_future(kill_mid_step(loop, engines))
        try:
            curve = await loop.run()
        finally:
            killer.cancel()
        dead = await killer if killer.done() and not killer.cancelled() else None
    assert dead is not None, "no step-1 episode was in flight on an engine"
    assert [p.weights_version for p in curve.steps] == [1, 2]
    batch = PROMPTS * SAMPLES
    assert [p.samples for p in curve.steps] == [batch, batch]  # none lost or doubled
    assert [p.dropped for p in curve.steps] == [0, 0]
    rounds = {"s00001": 0, "s00002": 1}  # the trainer's version while each step rolled out
    train = {t: a for t, a in trajectories(tmp_path / "art").items() if ".s0000" in t}
    assert len(train) == 2 * batch  # one task per sample; a retry is an attempt, not a task
    restarted = [t for t, attempts in train.items() if len(attempts) > 1]
    assert restarted, "no episode was started again"
    assert all(".s00001." in t for t in restarted)
    for task, attempts in train.items():
        version = rounds[task.split("/")[-2].split(".")[1]]
        final = attempts[max(attempts)]
        assert final, task
        assert {c.weights_version for c in final} == {version}, task  # known, the trainer's
        for n, calls in attempts.items():  # a lost attempt's answered calls: the same
            answered = [c for c in calls if c.token_ids is not None]
            assert {c.weights_version for c in answered} <= {version}, (task, n)
