"""Online adjustment: the live scheduler records the learned policy's decisions and
outcomes; ``megaflow sim train --from-run`` fine-tunes a checkpoint on them."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.states import TaskState
from megaflow.scheduler.abstract import InstanceSpec
from megaflow.scheduler.config import LearnedPolicyConfig, SchedulerConfig
from megaflow.scheduler.decision_log import Decision, Session, read_decisions
from megaflow.scheduler.learned_net import (
    CRITIC_INPUTS,
    N_FEATURES,
    Checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from megaflow.scheduler.service import Scheduler
from megaflow.scheduler.synthetic import SleepExecutor
from megaflow.sim.finetune import finetune
from megaflow.sim.learn import _export, _nets
from tests.scheduler.helpers import make_stores, run, task
from tests.sim.test_learned_live import _config

runner = CliRunner()


def _fresh(path: Path) -> Path:
    save_checkpoint(_export(*_nets(32, None), {}), path)
    return path


def _lines(root: Path, run_id: str) -> list[dict[str, object]]:
    out = []
    for p in sorted((root / "runs" / run_id / "decisions").glob("*.jsonl.gz")):
        out += [json.loads(s) for s in gzip.decompress(p.read_bytes()).decode().splitlines()]
    return out


def _differs(a: Checkpoint, b: Checkpoint, part: str) -> bool:
    la, lb = getattr(a, part), getattr(b, part)
    return any(not np.array_equal(x, y) for (x, _), (y, _) in zip(la, lb, strict=True))


def test_a_real_job_records_decisions_and_from_run_fine_tunes_on_them(tmp_path: Path) -> None:
    ckpt = _fresh(tmp_path / "policy.safetensors")
    res = runner.invoke(app, ["run", str(_config(tmp_path, ckpt))], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    art = tmp_path / "art"
    recorded = sorted(p.name for p in (art / "runs").iterdir() if (p / "decisions").is_dir())
    run_id, control = recorded  # the run and its negative control arm, two tasks each
    assert control == f"{run_id}-control"
    lines = _lines(art, run_id)
    decisions = [x for x in lines if x["k"] == "d"]
    outcomes = [x for x in lines if x["k"] == "o"]
    assert len(decisions) == 2  # two tasks, one sample each, placed once
    assert sorted(str(x["task"]) for x in outcomes) == sorted(str(x["task"]) for x in decisions)
    assert {x["outcome"] for x in outcomes} == {"ok"}
    assert all(
        len(x["rows"][0]) == N_FEATURES and len(x["state"]) == CRITIC_INPUTS  # type: ignore[index, arg-type]
        for x in decisions
    )
    assert lines[0]["k"] == "h"
    assert lines[0]["checkpoint"] == str(ckpt)

    out = tmp_path / "tuned.safetensors"
    res = runner.invoke(app, ["sim", "train", "--from-run", run_id, "--artifacts", str(art),
                              "--out", str(out), "--iterations", "20"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "2 decisions" in res.output
    new, old = read_checkpoint(out), read_checkpoint(ckpt)
    assert new.meta["from_run"] == run_id
    assert _differs(new, old, "critic")
    # The run and its control arm are two runs, so two classes of task: a decision had
    # a choice between candidates when tasks of both waited at once (timing decides);
    # the actor learns exactly when one had.
    choices = sum(1 for x in decisions if isinstance(x["rows"], list) and len(x["rows"]) > 1)
    assert f"({choices} with a choice" in " ".join(res.output.split())
    assert _differs(new, old, "actor") == (choices > 0)


def test_decisions_without_a_choice_teach_only_the_critic() -> None:
    rows = [[0.5] * N_FEATURES]
    ds = [
        Decision(
            f"t{i}", 10.0 * i, rows, [0.1] * CRITIC_INPUTS, 0, 1.0, "ok", 10.0 * i, 10.0 * i + 5
        )
        for i in range(20)
    ]
    old = _export(*_nets(32, None), {})
    new, log = finetune(old, [Session("s", "p", True, ds)])
    assert log.with_choice == 0
    assert not _differs(new, old, "actor")
    assert _differs(new, old, "critic")


def test_a_run_without_recorded_decisions_is_a_clear_error(tmp_path: Path) -> None:
    art = tmp_path / "art"
    (art / "runs" / "r-plain" / "tasks").mkdir(parents=True)
    res = runner.invoke(app, ["sim", "train", "--from-run", "r-plain", "--artifacts", str(art),
                              "--out", str(tmp_path / "x.safetensors")])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "run r-plain has no recorded decisions" in res.output
    assert not (tmp_path / "x.safetensors").exists()
    none = str(tmp_path / "none")
    res = runner.invoke(app, ["sim", "train", "--from-run", "r-plain", "--artifacts", none,
                              "--out", str(tmp_path / "x.safetensors")])  # fmt: skip
    assert res.exit_code == 2
    assert "no artifact store" in res.output


def test_the_live_scheduler_writes_chunks_as_it_goes_and_the_actor_learns(
    tmp_path: Path,
) -> None:
    """Two instances and tasks of three classes: decisions with a choice; chunks of
    five lines are in the store before the scheduler stops (what a crash keeps)."""
    ckpt = _fresh(tmp_path / "p.safetensors")
    # A backlog limit far above the 24 tasks: on two instances the default lets two due
    # tasks wait and places the rest ahead of the network, and those are not recorded.
    policy = LearnedPolicyConfig(checkpoint=str(ckpt), greedy=False, record_every=5,
                                 wait_backlog=100)  # fmt: skip
    cfg = SchedulerConfig(policy=policy, max_concurrency=2)
    specs = [task(f"t{i}", priority=i % 3, cpu=1.0 + (i % 2), payload={"sleep_s": 0.002 * (i % 4)})
             for i in range(24)]  # fmt: skip
    insts = [InstanceSpec(id=f"i{k}", cpu=4, memory_mb=8192, slots=1) for k in range(2)]

    async def go() -> list[Session]:
        stores = make_stores(tmp_path)
        async with stores:
            sched = Scheduler(cfg, stores, SleepExecutor(), instances=insts)
            await sched.start()
            await sched.submit(run(), specs)
            counts = await sched.wait("r1")
            assert counts == {TaskState.SUCCEEDED: 24}
            before: list[str] = []
            for _ in range(200):  # the chunks' writes run on worker threads: a loaded CI is slow
                before = await stores.artifacts.list("runs/r1/decisions/")
                if before:
                    break
                await asyncio.sleep(0.05)
            assert before, "chunks are written while the run goes on"
            await sched.stop()
            return await read_decisions(stores.artifacts, "r1")

    sessions = asyncio.run(go())
    (sess,) = sessions
    assert len(sess.decisions) == 24
    assert all(d.outcome == "ok" for d in sess.decisions)
    assert any(len(d.rows) > 1 for d in sess.decisions)
    assert all(0 < d.prob <= 1 for d in sess.decisions)
    old = read_checkpoint(ckpt)
    new, log = finetune(old, sessions)
    assert log.with_choice > 0
    assert _differs(new, old, "actor")
    assert _differs(new, old, "critic")


def test_awr_moves_the_actor_towards_choices_that_ended_better() -> None:
    """Synthetic log: two candidates per decision differing in one feature; the task
    placed through row 0 runs 5 s, through row 1 50 s. After fine-tuning, row 0 is
    more likely than before."""
    rng = np.random.default_rng(0)
    ds = []
    for i in range(200):
        rows = np.full((2, N_FEATURES), 0.5)
        rows[0, 2], rows[1, 2] = 0.2, 0.8
        a = int(rng.integers(2))
        t = 100.0 * i
        state = [i / 200.0] * CRITIC_INPUTS
        end = t + (5.0 if a == 0 else 50.0)
        ds.append(Decision(f"t{i}", t, rows.tolist(), state, a, 0.5, "ok", t, end))
    sess = Session("s", "p", False, ds)
    old = _export(*_nets(32, None), {})
    new, _ = finetune(old, [sess])
    rows = np.asarray(ds[0].rows, dtype=np.float32)

    def p0(c: Checkpoint) -> float:
        z = np.exp(c.logits(rows) - c.logits(rows).max())
        return float(z[0] / z.sum())

    assert p0(new) > p0(old) + 0.2
