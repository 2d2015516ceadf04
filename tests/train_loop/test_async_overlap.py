"""The async loop keeps sampling while the trainer steps; the sync loop does not.

The run is the real loop through real sandboxes (the small random policy).
Step 2's trainer step waits, for a while, for the model to answer a call of
round 3: that round exists then only if the loop queued it ahead of
training. Round 3's calls are held until step 2's trainer step has begun, so
the answer cannot have come earlier, in the tail of round 2. In async mode
the answer comes, on the weights before the update (v1), and step 3 trains
the round with staleness 1; in sync mode the same wait runs out (the round
is queued only after the update), which is what this test would see if the
async loop waited on its update.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.training.lookahead import starved_lookahead, tasks_in_flight
from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.model.transformers_lm import TransformersBackend
from megaflow.train.trainer import Trainer
from tests.train_loop.conftest import train_config

ROUND_3 = ".s00003."


def test_the_note_names_the_field_when_the_scheduler_starves_the_lookahead(
    tmp_path: Path, policy: Path
) -> None:
    def cfg(mode: str, cap: int, **kw: Any) -> Any:
        raw = train_config(tmp_path, policy, mode=mode, **kw)
        raw["scheduler"]["max_concurrency"] = cap
        return parse_config(raw)

    starved = cfg("async", 4, lookahead=1)  # 2 prompts x 2 samples a round, 2 rounds
    assert tasks_in_flight(starved) == 8
    note = starved_lookahead(starved)
    assert note is not None
    assert "scheduler.max_concurrency 4" in note
    assert "set scheduler.max_concurrency to 8" in note
    assert starved_lookahead(cfg("async", 8, lookahead=1)) is None
    assert tasks_in_flight(cfg("async", 12, lookahead=2)) == 12
    assert starved_lookahead(cfg("async", 11, lookahead=2)) is not None
    assert starved_lookahead(cfg("sync", 1)) is None  # one round at a time anyway


async def _answered_during_step_2(
    tmp_path: Path, policy: Path, monkeypatch: pytest.MonkeyPatch, mode: str, wait_s: float
) -> tuple[bool, list[str], Any]:
    """Run 3 steps; whether a call of round 3 was answered during step 2's trainer step."""
    training = threading.Event()  # step 2's trainer step has begun
    answered = threading.Event()  # ... and a call of round 3 was answered within it
    in_step = threading.Event()
    step, complete = Trainer.step, TransformersBackend.complete

    def slow_step(self: Trainer, groups: Any) -> Any:
        if self.weights_version == 1:  # the step that makes v2
            in_step.set()
            training.set()
            answered.wait(wait_s)
            in_step.clear()
        return step(self, groups)

    async def held(self: TransformersBackend, request: Any, ctx: Any) -> Any:
        if ROUND_3 in ctx.trajectory_id:
            # never in round 2's tail: only once step 2 trains. A thread's event (the
            # trainer's thread sets it); a worker thread waiting here could take the one
            # the trainer's step needs.
            while not training.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        out = await complete(self, request, ctx)
        if ROUND_3 in ctx.trajectory_id and in_step.is_set():
            answered.set()
        return out

    monkeypatch.setattr(Trainer, "step", slow_step)
    monkeypatch.setattr(TransformersBackend, "complete", held)
    extra = {"lookahead": 1} if mode == "async" else {}
    raw = train_config(tmp_path, policy, mode=mode, max_staleness=1, steps=3, **extra)
    raw["scheduler"]["max_concurrency"] = 4  # one round at a time: the note is printed
    lines: list[str] = []
    curve = await TrainLoop(parse_config(raw), run_id=f"ov-{mode}", printer=lines.append).run()
    return answered.is_set(), lines, curve


@pytest.mark.slow
async def test_the_async_loop_samples_while_the_trainer_steps(
    tmp_path: Path, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok, lines, curve = await _answered_during_step_2(
        tmp_path, policy, monkeypatch, "async", wait_s=240
    )
    assert ok, "no call of round 3 was answered while step 2's trainer step ran"
    assert any("set scheduler.max_concurrency to 8" in line for line in lines)
    assert [p.weights_version for p in curve.steps] == [1, 2, 3]
    assert curve.steps[2].staleness_max == 1  # round 3 ran on v1, trained at v2
    assert curve.steps[2].dropped == 0  # within max_staleness 1


@pytest.mark.slow
async def test_the_sync_loop_samples_nothing_while_the_trainer_steps(
    tmp_path: Path, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok, lines, curve = await _answered_during_step_2(
        tmp_path, policy, monkeypatch, "sync", wait_s=20
    )
    assert not ok  # round 3 is queued only after step 2's update
    assert not any("scheduler.max_concurrency" in line for line in lines)
    assert all(p.staleness_max == 0 for p in curve.steps)
