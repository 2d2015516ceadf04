"""``megaflow logs TASK [--follow]``: one task's attempts, steps and grade.

Reads the metadata store (``--db`` or ``--config``) for the task, its
attempts and result, and the artifact store (``--artifacts`` or the
config's) for the stored trajectory of its last attempt (model calls,
actions, observations, in order) and its grade report. A trajectory is
stored when its attempt ends, so ``--follow`` shows attempts and state
changes as they happen, polling the store, and the steps and grade once the
task is terminal.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from megaflow.cli.common import ConfigOption, DbOption, console, fail, storage_of, with_store
from megaflow.cli.ids import resolve_task
from megaflow.core.errors import MegaFlowError, NotFound
from megaflow.core.outcomes import outcome, ungraded
from megaflow.core.tasks import Attempt, TaskRecord, TaskResult
from megaflow.core.trajectory import Action, ModelCall, Observation, Trajectory
from megaflow.storage.abstract import ArtifactStore, MetadataStore
from megaflow.storage.config import ArtifactsConfig, LocalArtifactsConfig

_OBS_LINES = 12
_TEST_LINES = 20


def _clip(text: str, lines: int) -> str:
    rows = text.rstrip().splitlines()
    if len(rows) <= lines:
        return "\n".join(rows)
    return "\n".join([*rows[:lines], f"... ({len(rows) - lines} more lines)"])


def _call_text(call: ModelCall) -> str:
    r = call.response
    if "error" in r:
        return f"error {r.get('error_type', '')}: {r['error']}"
    msg: dict[str, Any] = r.get("message") or {}
    tools = [(tc.get("function") or {}).get("name", "?") for tc in msg.get("tool_calls") or []]
    text = str(msg.get("content") or "").strip()
    head = text.splitlines()[0][:160] if text else ""
    return " ".join(x for x in (head, f"-> {', '.join(tools)}" if tools else "") if x)


def print_steps(traj: Trajectory) -> None:
    console.print(f"[bold]trajectory[/] {traj.id} (attempt {traj.attempt}, "
                  f"{len(traj.steps)} steps)", highlight=False)  # fmt: skip
    for i, step in enumerate(traj.steps, 1):
        if isinstance(step, ModelCall):
            tok = f"{step.prompt_tokens}+{step.completion_tokens} tok"
            line = f"{i:>3} model  {tok}, {step.duration_s:.2f} s: {_call_text(step)}"
        elif isinstance(step, Action):
            args = json.dumps(step.arguments)
            line = f"{i:>3} action {step.tool} {args[:200]}"
        else:
            assert isinstance(step, Observation)
            code = "" if step.exit_code is None else f"exit {step.exit_code}"
            cut = " (truncated)" if step.truncated else ""
            line = f"{i:>3} output {code}{cut}\n" + _clip(step.content, _OBS_LINES)
        console.print(line, highlight=False, markup=False)


def print_grade(report: dict[str, Any]) -> None:
    f2p, p2p = report.get("fail_to_pass", {}), report.get("pass_to_pass", {})
    verdict = "resolved" if report.get("resolved") else "unresolved"
    console.print(
        f"[bold]grade[/]: {verdict}, reward {report.get('reward', 0.0):.3f}; "
        f"FAIL_TO_PASS {len(f2p.get('passed', []))} passed / {len(f2p.get('failed', []))} "
        f"failed; PASS_TO_PASS {len(p2p.get('passed', []))} passed / "
        f"{len(p2p.get('failed', []))} failed; test exit {report.get('test_exit_code')}",
        highlight=False,
    )
    for test, status in sorted(report.get("statuses", {}).items()):
        console.print(f"  {status:<8} {test}", highlight=False, markup=False)
    if report.get("error"):
        console.print(f"  grading error: {report['error']}", highlight=False, markup=False)
    if report.get("test_output"):
        console.print(_clip(report["test_output"][-4000:], _TEST_LINES), markup=False)


def _attempts_table(attempts: list[Attempt]) -> Table:
    table = Table(title="attempts")
    for col in ("#", "instance", "sandbox", "time", "error"):
        table.add_column(col, overflow="fold")
    for a in attempts:
        took = f"{a.ended_at - a.started_at:.2f} s" if a.ended_at else "running"
        err = f"{a.error_kind.value}: {a.error or ''}" if a.error_kind else (a.error or "")
        table.add_row(str(a.number), a.instance or "", a.sandbox or "", took, err[:120])
    return table


def _result_line(rec: TaskRecord, res: TaskResult | None) -> str:
    """The task's state, its outcome in the words of ``status`` and ``results``, and its
    reward: none for an ungraded task (failed, timed out, cancelled), never a 0."""
    if res is None:
        return f"state {rec.state.value}, no result yet"
    graded = "no reward (ungraded)" if ungraded(rec.state) else f"reward {res.reward:.3f}"
    return f"state {rec.state.value}: {outcome(rec.state, res)}, {graded}" + (
        f"; {res.error}" if res.error else ""
    )


async def _artifact_json(art: ArtifactStore, res: TaskResult, name: str) -> Any:
    key = res.artifacts.get(name)
    if key is None or not await art.exists(key):
        return None
    return json.loads(await art.get(key))


async def _show(store: MetadataStore, art: ArtifactsConfig | str, task_id: str) -> None:
    """``art`` is the artifact store, or why there is none."""
    rec = await store.get_task(task_id)
    attempts = await store.list_attempts(task_id)
    try:
        res: TaskResult | None = await store.get_result(task_id)
    except NotFound:
        res = None
    console.print(f"[bold]task[/] {task_id} (run {rec.spec.run_id})", highlight=False)
    if attempts:
        console.print(_attempts_table(attempts))
    console.print(_result_line(rec, res), highlight=False, markup=False)
    if res is None or not res.artifacts:
        return
    if isinstance(art, str):
        console.print(art, highlight=False)
        return
    async with art.build() as artifacts:
        traj = await _artifact_json(artifacts, res, "trajectory")
        grade = await _artifact_json(artifacts, res, "grade")
    if traj is not None:
        print_steps(Trajectory.model_validate(traj))
    if grade is not None:
        print_grade(grade)


async def _follow(store: MetadataStore, task_id: str, interval: float) -> None:
    """Print attempts and state changes as they happen, until the task is terminal."""
    seen: tuple[str, int, str | None] | None = None
    while True:
        rec = await store.get_task(task_id)
        attempts = await store.list_attempts(task_id)
        last = attempts[-1] if attempts else None
        now = (rec.state.value, len(attempts), None if last is None else str(last.ended_at))
        if now != seen:
            seen = now
            where = f" on {last.instance or '?'} / {last.sandbox or '?'}" if last else ""
            stamp = time.strftime("%H:%M:%S")
            console.print(f"{stamp} {rec.state.value} (attempt {len(attempts)}{where})",
                          highlight=False, markup=False)  # fmt: skip
        if rec.state.terminal:
            return
        await asyncio.sleep(interval)


def logs(
    task_id: str = typer.Argument(
        ...,
        metavar="TASK",
        help="A task id: <run>/<task>/<n>, a run prefix with <task>/<n>, or <task>/<n> as "
        "`results` prints it (with --run when several runs have it).",
    ),
    run: str | None = typer.Option(
        None, "--run", help="The run (id or unique prefix) a relative TASK id is in."
    ),
    follow: bool = typer.Option(False, "--follow", "-f", help="Poll until the task ends."),
    interval: float = typer.Option(1.0, "--interval", min=0.05, help="Seconds between polls."),
    artifacts: str = typer.Option(
        LocalArtifactsConfig().root,
        "--artifacts",
        help="Without --config: the local artifact store's directory.",
    ),
    db: str = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """A task's attempts, its stored trajectory steps and its grade."""
    try:
        art_cfg = storage_of(config).artifacts if config else LocalArtifactsConfig(root=artifacts)
    except MegaFlowError as exc:
        fail(str(exc))
    where: ArtifactsConfig | str = art_cfg
    if isinstance(art_cfg, LocalArtifactsConfig) and not Path(art_cfg.root).is_dir():
        where = f"no artifact store at {art_cfg.root}: pass --artifacts DIR or --config FILE"

    async def go(store: MetadataStore) -> None:
        whole = await resolve_task(store, task_id, run)
        if follow:
            await _follow(store, whole, interval)
        await _show(store, where, whole)

    try:
        with_store(db, go, config)
    except KeyboardInterrupt:
        pass
