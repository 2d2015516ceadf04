"""Grading throughput per grader type, and the Harbor image build cache.

Against a ``podman system service`` started for the run (overlay storage),
with the bundled Harbor set (``tasks/harbor-mini``) built from the busybox
root filesystem imported as ``localhost/megaflow-base:latest``:

- image builds through the engine's build API, cold (every folder built),
  against a cache hit (the content-hashed tag found: one inspect), and the
  peer ``podman build`` of the same folder again (its own layer cache);
- grading throughput at concurrency 4, per grader: ``script`` (each Harbor
  task's solution played in a container, then ``take`` and ``grade``: a fresh
  container running ``tests/test.sh``), ``python`` (an answer file read from
  a bubblewrap sandbox, a host function) and ``swebench`` (the bundled
  mini-SWE set's gold patches, each graded in a fresh bubblewrap sandbox
  through the reporter; calibration off). Only ``take`` and ``grade`` are
  timed, not the agent's sandbox.

``python benchmarks/bench_graders.py`` (``--rounds N``, default 2).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures.podman import running_podman_service

from ab import interleave_reps, order_text
from bench_container import row
from megaflow.core.tasks import TaskSpec, TaskType
from megaflow.core.trajectory import Trajectory
from megaflow.datasets.harbor import image_tag, read_tasks, task_payload
from megaflow.datasets.loader import load_instances
from megaflow.datasets.task_specs import to_task_specs
from megaflow.environment.abstract import EnvironmentSpec, Runtime, Sandbox
from megaflow.environment.config import ContainerRuntimeConfig, LocalRuntimeConfig
from megaflow.environment.container import ContainerRuntime
from megaflow.environment.container.build import build_images
from megaflow.environment.local import LocalRuntime
from megaflow.environment.rootfs import build_busybox_rootfs
from megaflow.grading.config import (
    JudgeGraderConfig,
    PythonGraderConfig,
    ScriptGraderConfig,
    SwebenchGraderConfig,
)
from megaflow.grading.reward import reward_of
from report import add_rule_args, begin, claim, report

ROOT = Path(__file__).resolve().parent.parent
BASE = "localhost/megaflow-base:latest"
CONCURRENCY = 4


def fresh_of(rt: Runtime, spec: EnvironmentSpec) -> Callable[[], Any]:
    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[Sandbox]:
        box = await rt.create(spec)
        try:
            yield box
        finally:
            await box.destroy()

    return fresh


async def graded(
    rt: Runtime, grader: Any, task: TaskSpec, base: EnvironmentSpec, act: str
) -> tuple[float, float]:
    """(reward, seconds of take + grade) of one task whose agent runs ``act``."""
    spec = grader.sandbox_spec(task, base)
    fresh = fresh_of(rt, spec)
    async with fresh() as box, grader.attempt(task, spec, fresh) as attempt:
        await attempt.prepare(box)
        await box.exec(act, timeout=120)
        t0 = time.perf_counter()
        taken = await attempt.take(box, Trajectory(id="b", task_id=task.id, run_id="b"))
    report_ = await attempt.grade(taken)
    return reward_of(report_), time.perf_counter() - t0


async def throughput(
    jobs: list[Callable[[], Awaitable[tuple[float, float]]]],
) -> tuple[float, list[float], float]:
    """(tasks per minute at CONCURRENCY, per-task grading seconds, mean reward)."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(job: Callable[[], Awaitable[tuple[float, float]]]) -> tuple[float, float]:
        async with gate:
            return await job()

    t0 = time.perf_counter()
    done = await asyncio.gather(*(one(j) for j in jobs))
    wall = time.perf_counter() - t0
    return len(jobs) / wall * 60, [s for _, s in done], sum(r for r, _ in done) / len(done)


def task_of(payload: dict[str, Any], name: str, n: int) -> TaskSpec:
    return TaskSpec(id=f"b/{name}/{n}", run_id="b", type=TaskType.EVAL, payload=payload)


async def script_jobs(url: str, rounds: int) -> tuple[Runtime, list[Any]]:
    rt = ContainerRuntime(ContainerRuntimeConfig(base_url=url, namespace="bgrade"))
    await rt.start()
    grader = ScriptGraderConfig().build()
    jobs = []
    for t in read_tasks(ROOT / "tasks" / "harbor-mini"):
        task = task_of(task_payload(t), t.name, 0)
        act = f"cd /app && sh -c {_quote(t.solution['solve.sh'])}"
        for _ in range(rounds):
            jobs.append(lambda task=task, act=act: graded(rt, grader, task, EnvironmentSpec(), act))
    return rt, jobs


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


async def python_jobs(root: Path, n: int) -> tuple[Runtime, list[Any]]:
    rt = LocalRuntime(LocalRuntimeConfig(root=str(root / "local-py")))
    await rt.start()
    grader = PythonGraderConfig(function="bench_graders.exact").build()
    jobs = []
    for i in range(n):
        task = task_of({"answer": i}, f"q{i}", 0)
        jobs.append(lambda task=task, i=i: graded(
            rt, grader, task, EnvironmentSpec(), f"echo {i} > answer.txt"))  # fmt: skip
    return rt, jobs


def exact(payload: dict[str, Any], answer: str) -> float:
    return float(answer.strip() == str(payload["answer"]))


@contextlib.asynccontextmanager
async def judge_model(root: Path) -> AsyncIterator[Any]:
    """The run's model a ``judge`` grader asks through its gateway: a small
    ``transformers`` model built here (random weights: its replies are rarely a
    SCORE line, so the reward is mostly 0; the figure is the judge's cost)."""
    from megaflow.model.config import TransformersModelConfig
    from megaflow.model.factory import make_model_client
    from megaflow.model.transformers_lm import build_tiny_model

    path = build_tiny_model(root / "judge-model", seed=0)
    cfg = TransformersModelConfig(model=str(path), max_new_tokens=JUDGE_TOKENS)
    async with make_model_client(cfg) as client:
        yield client


JUDGE_TOKENS = 32


async def judge_jobs(root: Path, n: int, client: Any) -> tuple[Runtime, list[Any]]:
    rt = LocalRuntime(LocalRuntimeConfig(root=str(root / "local-judge")))
    await rt.start()
    cfg = JudgeGraderConfig(rubric="1 if the answer is the number asked for, else 0.",
                            max_tokens=JUDGE_TOKENS)  # fmt: skip
    grader = cfg.build(model=client)
    jobs = []
    for i in range(n):
        task = task_of({"problem_statement": f"what is {i} + 0?"}, f"j{i}", 0)
        jobs.append(lambda task=task, i=i: graded(
            rt, grader, task, EnvironmentSpec(), f"echo {i} > answer.txt"))  # fmt: skip
    return rt, jobs


async def swebench_jobs(root: Path, rounds: int) -> tuple[Runtime, list[Any]]:
    rt = LocalRuntime(LocalRuntimeConfig(root=str(root / "local-swe")))
    await rt.start()
    grader = SwebenchGraderConfig(calibrate=False).build()
    instances = load_instances(ROOT / "tasks" / "mini-swe")
    jobs = []
    for spec in to_task_specs(instances, "b", rounds, TaskType.EVAL):
        patch = _quote(str(spec.payload["patch"]))
        act = f"printf %s {patch} > /tmp/g.patch && git apply /tmp/g.patch"
        jobs.append(lambda spec=spec, act=act: graded(
            rt, grader, spec, EnvironmentSpec(), act))  # fmt: skip
    return rt, jobs


def builds(url: str, svc: Any) -> list[list[str]]:
    """Cold builds, then warm against warm: the engine's cache hit and ``podman build``
    again (its layer cache), folder by folder, the order alternating."""
    tasks = read_tasks(ROOT / "tasks" / "harbor-mini")
    contexts = sorted({(Path(t.context), image_tag(t)) for t in tasks if t.context})
    cold = [b.seconds for b in build_images(url, contexts) if not b.cached]

    def hit(i: int) -> float:
        return sum(b.seconds for b in build_images(url, [contexts[i]]))

    def podman_again(i: int) -> float:
        context, tag = contexts[i]
        t0 = time.perf_counter()
        done = svc.podman("build", "-q", "--pull=never", "--network=none", "-t", tag,
                          str(context), timeout=300)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"podman build failed: {done.stderr[-300:]}")
        return time.perf_counter() - t0

    hits, peer = interleave_reps(len(contexts), [hit, podman_again])
    return [
        row("cold build (engine build API)", cold),
        row("cache hit (content-hashed tag found)", hits),
        row("peer: podman build again (its layer cache)", peer),
    ]


async def main(rounds: int, args: argparse.Namespace | None = None) -> None:
    binary = shutil.which("podman")
    if binary is None:
        raise SystemExit("podman is not installed")
    root = Path(tempfile.mkdtemp(prefix="bench-graders-"))
    rows: list[list[str]] = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            svc = stack.enter_context(running_podman_service(binary, driver="overlay"))
            claim(str(svc.home))  # its conmons: detached, without our environment
            judge_client = await stack.enter_async_context(judge_model(root))
            rootfs = build_busybox_rootfs(root / "busybox.tar")
            done = svc.podman("import", str(rootfs), BASE, timeout=300)
            if done.returncode != 0:
                raise RuntimeError(f"podman import failed: {done.stderr[-300:]}")
            rows += [[*r, "-"] for r in builds(svc.url, svc)]
            makers: list[tuple[str, Callable[[], Awaitable[tuple[Runtime, list[Any]]]]]] = [
                ("script (harbor-mini, containers)", lambda: script_jobs(svc.url, rounds)),
                ("python (answer file, bubblewrap)", lambda: python_jobs(root, 8 * rounds)),
                ("swebench (mini-swe gold, bubblewrap)", lambda: swebench_jobs(root, rounds)),
                (f"judge (answer file, small model, {JUDGE_TOKENS} tokens)",
                 lambda: judge_jobs(root, 8 * rounds, judge_client)),
            ]  # fmt: skip
            for name, make in makers:
                rt, jobs = await make()
                try:
                    per_min, secs, mean = await throughput(jobs)
                finally:
                    await rt.stop()
                rows.append([*row(f"grading: {name}", secs)[:3], str(len(jobs)),
                             f"{per_min:.1f} tasks/min, reward mean {mean:.2f}"])  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(
        "graders",
        "Graders: throughput at concurrency 4, and the Harbor image build cache",
        ["what", "P50", "P99", "n", "throughput"],
        rows,
        notes="P50/P99: per image build, or per task's take + grade. Throughput: tasks "
        f"graded per minute of wall time, {CONCURRENCY} at a time. The cache hit and the "
        f"podman peer, both warm, alternate folder by folder ({order_text(2)}). The graders "
        "are not peers of each other (each does different work): their rows are figures. "
        "The judge asks the run's model through its gateway: a small `transformers` model "
        f"with random weights built here, at most {JUDGE_TOKENS} tokens a reply, one model "
        "for the 4 at a time (a judge's cost is its model's; a real judge model costs more).",
        args=args,
        reps=rounds,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="Times each task is graded.")
    parser.add_argument("--quick", action="store_true", help="One round (default 2).")
    add_rule_args(parser)
    parsed = parser.parse_args()
    begin(parsed)
    asyncio.run(main(parsed.rounds or (1 if parsed.quick else 2), parsed))
