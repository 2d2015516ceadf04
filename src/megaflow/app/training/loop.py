"""The closed RL loop of `megaflow train`: rollouts -> GRPO step -> new weights.

::

    loop = TrainLoop(cfg, run_id=..., config_dir=..., printer=print)
    curve = await loop.run()            # or run(resume=True) after a crash

One long-lived :class:`~megaflow.app.job.Job` (stores, sandbox runtime and
pool, the rollout model in process, scheduler) serves every step. Step ``s``
takes the groups of its rollout run, filters them by staleness, has the
trainer take one optimizer step on them, and pushes the new weights to the
rollout backend as version ``s``. In ``sync`` mode a step's rollouts start
after the previous step's update; in ``async`` mode the rollouts of the next
``lookahead`` steps are already running while a step trains, and the
staleness bound decides what their older samples are worth. The held-out
split is evaluated, with the weights fixed, before training, every
``eval_every`` steps and after the last.

A checkpoint (every ``checkpoint_every`` steps and after the last, or when
``checkpoint_every_s`` seconds have passed since the previous one) holds the
trainer's state and, in its ``extra``, the loop's :class:`LoopState`: the
cursor in the planned prompt sequence and the curve so far. ``run(resume=
True)`` restores both, pushes the restored weights, and continues from the
next step's prompts, so no prompt is skipped or trained twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from megaflow.app.job import Job
from megaflow.app.training.control import apply_control
from megaflow.app.training.curve import CURVE_JSON, Curve, StepPoint, step_figures
from megaflow.app.training.engines import launched_engines
from megaflow.app.training.guards import check_signal, check_usable, has_signal
from megaflow.app.training.heldout import eval_line, evaluate
from megaflow.app.training.learner import open_trainer, policy_dir
from megaflow.app.training.lookahead import starved_lookahead
from megaflow.app.training.mixed import MixedPlan, mixed_plan, with_set_grading
from megaflow.app.training.plan import PromptPlan
from megaflow.app.training.probe import check_tokenizer
from megaflow.app.training.refill import refill_step
from megaflow.app.training.rollouts import Rollouts, round_name
from megaflow.app.training.splits import Splits, load_splits
from megaflow.app.training.staleness import apply_staleness
from megaflow.app.training.step_line import step_line
from megaflow.app.training.weights import engines_of
from megaflow.config.models import RunConfig
from megaflow.core.errors import ConfigError
from megaflow.core.tasks import TaskType
from megaflow.train.loop_config import TrainingConfig
from megaflow.train.stats import StepStats

if TYPE_CHECKING:
    from megaflow.train.trainer import Trainer
    from megaflow.train.weight_sync.abstract import WeightSync


class LoopState(BaseModel):
    """What a checkpoint's ``extra`` holds of the loop."""

    model_config = ConfigDict(extra="forbid")

    step: int
    cursor: int
    version: int
    plan: str
    curve: Curve
    sampler: dict[str, Any] | None = None
    """A mixed run's draws and curriculum counts (:meth:`MixedPlan.state`)."""


def plan_key(plan: PromptPlan | MixedPlan) -> str:
    """Names the planned sequence; a resumed run must plan the same one."""
    return hashlib.sha256("\n".join(plan.sequence()).encode()).hexdigest()[:16]


class TrainLoop:
    def __init__(
        self,
        cfg: RunConfig,
        *,
        run_id: str,
        config_dir: Path | None = None,
        printer: Callable[[str], None] = print,
    ) -> None:
        if cfg.train is None:
            raise ConfigError("the config has no train: section", [("train", "missing")])
        self.cfg = cfg
        self.tc: TrainingConfig = cfg.train
        self.run_id = run_id
        self.say = printer
        self.splits: Splits = load_splits(cfg, config_dir)
        policy_dir(cfg)  # a bad model fails here, before anything starts
        cfg = self.cfg = with_set_grading(cfg)  # train and held-out sets: each set's grader
        self.plan: PromptPlan | MixedPlan = (
            mixed_plan(cfg, config_dir)  # several task sets: their plan
            if self.tc.sets is not None
            else PromptPlan(
                tuple(i.instance_id for i in self.splits.train),
                self.tc.prompts_per_step,
                self.tc.steps,
                self.tc.seed,
            )
        )
        self.config_dir = config_dir
        self.job = Job(cfg, run_id=run_id, config_dir=config_dir)
        self.incarnation = secrets.token_hex(3)
        self.curve = Curve(run_id=run_id, updates=self.tc.updates, control=self.tc.control)
        self.sync_s: list[float] = []
        self.trainer: Trainer  # started by run()
        self.sync: WeightSync  # built by run(), on the job's rollout model

    @property
    def png(self) -> Path:
        tc = self.tc
        return Path(tc.curve) if tc.curve else Path(tc.out_dir) / self.run_id / "curve.png"

    async def run(self, *, resume: bool = False) -> Curve:
        async with launched_engines(self.cfg, self.run_id, self.say, policy_dir(self.cfg)) as cfg:
            if cfg is not self.cfg:  # the rollout model now points at the engines started
                self.cfg = cfg
                self.job = Job(cfg, run_id=self.run_id, config_dir=self.config_dir)
            return await self._run(resume)

    async def _run(self, resume: bool) -> Curve:
        async with self.job as job:
            model = job.arms[self.run_id].model
            self.sync = self.tc.weight_sync.build(
                engines_of(model),
                base_model=policy_dir(self.cfg),
                run_id=self.run_id,
                artifacts=job.stores.artifacts,
            )
            await check_tokenizer(model, policy_dir(self.cfg))
            trainer = await asyncio.to_thread(open_trainer, self.cfg, self.run_id)
            try:
                self.trainer = trainer
                self.say(
                    f"trainer: {trainer.world_size} rank(s), {trainer.resolved.describe()}, "
                    f"optimizer {trainer.config.optimizer}"
                )
                if (note := starved_lookahead(self.cfg)) is not None:
                    self.say(note)
                first = await self._restore() if resume else 1
                rollouts = Rollouts(job, self.incarnation)
                if not resume and self.tc.eval_before:
                    await self._evaluate(rollouts, 0)
                await self._train(rollouts, first)
                await trainer.wait_checkpoint()  # an asynchronous save still uploading
            finally:
                await self.sync.close()
                await asyncio.to_thread(trainer.close)
        self.curve.write(self.png)
        return self.curve

    def _publish(self) -> None:
        """The curve so far, where the dashboard reads it (``OUT_DIR/<run id>/curve.json``,
        also when ``train.curve`` puts the final one elsewhere) and beside the PNG; after
        every step and every held-out round, so the training page follows the run."""
        for js in {Path(self.tc.out_dir) / self.run_id / CURVE_JSON, self.png.with_suffix(".json")}:
            self.curve.write_json(js)

    @property
    def version(self) -> int:
        return self.trainer.weights_version

    async def _push(self) -> None:
        weights = await asyncio.to_thread(self.trainer.state_dict_for_inference)
        self.sync_s.append((await self.sync.push(weights, self.version)).seconds)

    async def _restore(self) -> int:
        extra = await self.trainer.resume(self.job.stores.artifacts)
        if extra is None:
            raise ConfigError(
                f"run {self.run_id} has no checkpoint to resume from",
                [("--resume", "no checkpoint of this run")],
            )
        state = LoopState.model_validate(extra)
        if (
            state.plan != plan_key(self.plan)
            or state.cursor != state.step * self.plan.prompts_per_step
        ):
            raise ConfigError(
                f"run {self.run_id} was planned with other prompts (train split, "
                "prompts_per_step, steps or seed changed); resume it with its own config",
                [("train", "differs from the checkpointed run")],
            )
        if state.version != self.version:
            raise ConfigError(
                f"run {self.run_id}: the checkpoint's trainer is at weights v{self.version}, "
                f"its loop state at v{state.version}",
                [("--resume", "inconsistent checkpoint")],
            )
        self.curve = state.curve
        if state.sampler is not None and isinstance(self.plan, MixedPlan):
            self.plan.load(state.sampler)
        if self.version:
            await self._push()
        self.say(f"resumed {self.run_id} after step {state.step} (weights v{self.version})")
        return state.step + 1

    async def _submit(self, rollouts: Rollouts, step: int) -> str:
        name = round_name(self.incarnation, step)
        if isinstance(self.plan, MixedPlan):
            await self.plan.submit(rollouts, name, step, self.cfg.samples, self.cfg)
            return name
        insts = [self.splits.by_id[i] for i in self.plan.batch(step)]
        await rollouts.submit(name, insts, self.cfg.samples, TaskType.TRAIN)
        return name

    async def _train(self, rollouts: Rollouts, first: int) -> None:
        tc = self.tc
        runs: dict[int, str] = {}
        flat = 0  # steps in a row with no graded signal
        for step in range(first, tc.steps + 1):
            t0 = time.perf_counter()
            for s in range(step, min(tc.steps, step + tc.ahead) + 1):
                if s not in runs:
                    runs[s] = await self._submit(rollouts, s)
            batch = await rollouts.collect(runs.pop(step))
            mixed = self.plan.observe(batch, step) if isinstance(self.plan, MixedPlan) else None
            check_usable(batch, step, self.run_id)
            flat = 0 if has_signal(batch) else flat + 1
            check_signal(batch, flat, step, tc.max_steps_without_signal, self.run_id)
            refilled = None
            if tc.algorithm.dynamic_sampling:  # groups without signal are filtered: refill
                refilled = await refill_step(
                    rollouts, batch, name=round_name(self.incarnation, step),
                    pool=self.splits.train, used=set(self.plan.batch(step)),
                    need=tc.prompts_per_step, rounds=tc.algorithm.refill_rounds,
                    samples=self.cfg.samples, seed=tc.seed, step=step, say=self.say,
                )  # fmt: skip
                batch = refilled.batch
            rollout_s = time.perf_counter() - t0  # the rollouts waited for, refills included
            groups, stale = apply_staleness(
                batch.groups, self.version, max_staleness=tc.max_staleness,
                stale=tc.stale, decay=tc.reweight_decay,
            )  # fmt: skip
            groups = apply_control(tc.control, groups, tc.seed, step)
            stats: StepStats | None = None
            syncs = len(self.sync_s)
            if tc.updates:
                stats = await asyncio.to_thread(self.trainer.step, groups)
                if stats.updated:
                    await self._push()
            point = StepPoint(
                step=step, prompts=self.plan.batch(step), reward_mean=batch.reward_mean,
                weights_version=self.version, staleness_max=stale.staleness_max,
                samples=stale.samples, dropped=stale.dropped, reweighted=stale.reweighted,
                seconds=time.perf_counter() - t0, rollout_s=rollout_s,
                reward_std=batch.reward_std,
                sync_s=self.sync_s[-1] if len(self.sync_s) > syncs else None,
                **step_figures(stats, kl_measured=tc.kl_coef > 0),
            )  # fmt: skip
            point.sets = None if mixed is None else mixed.figures()
            if refilled is not None and refilled.drawn:
                point.refill_prompts = list(refilled.drawn)
            self.curve.steps.append(point)
            self._publish()
            line = step_line(point, tc, batch.masked, stats)
            self.say(line if mixed is None else line + mixed.line())
            last = step == tc.steps
            if last or (tc.eval_every and step % tc.eval_every == 0):
                await self._evaluate(rollouts, step)
            by_steps = tc.checkpoint_every and (last or step % tc.checkpoint_every == 0)
            if by_steps or self.trainer.checkpoint_time_due:
                await self._checkpoint(step)  # with this step's evaluation

    async def _checkpoint(self, step: int) -> None:
        state = LoopState(
            step=step,
            cursor=step * self.plan.prompts_per_step,
            version=self.version,
            plan=plan_key(self.plan),
            curve=self.curve,
            sampler=self.plan.state() if isinstance(self.plan, MixedPlan) else None,
        )
        await self.trainer.save_checkpoint(self.job.stores.artifacts, state.model_dump(mode="json"))

    async def _evaluate(self, rollouts: Rollouts, step: int) -> None:
        tc = self.tc
        point = await evaluate(
            rollouts, self.incarnation, step, self.version, self.splits.held_out,
            samples=tc.eval_samples, temperature=tc.eval_temperature, greedy=tc.eval_greedy,
        )  # fmt: skip
        self.curve.evals.append(point)
        self._publish()
        self.say(eval_line(point))
