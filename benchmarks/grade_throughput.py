"""``bench_grading.py --mode grade``: ``megaflow grade`` on the bundled mini-SWE set.

Throughput: the real command (``megaflow grade PREDICTIONS --tasks
tasks/mini-swe -j 4``) on the set's gold patches, each a process of its own,
instances graded per minute of its wall time (process start included). The
peer is the ``swebench`` package's own evaluation
(``swebench.harness.run_evaluation``) on the same predictions; it runs each
instance in a Docker container built from images it builds or pulls for the
instance's repository, so it needs a Docker daemon, the network, and a
repository its specification tables know. :func:`peer_blockers` says which of
these is missing here; when any is, the table gives instead the per-instance
cost of MegaFlow's grading, stage by stage (one instance at a time, the
stages timed by wrapping the functions ``grade_patch`` calls; a
benchmark-only instrument, as ``graded_in_agent_sandbox`` is).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from megaflow.datasets import grading as grading_mod
from megaflow.datasets import validate as validate_mod
from megaflow.datasets.loader import load_instances
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.local import LocalRuntime

TASKS = Path(__file__).resolve().parents[1] / "tasks" / "mini-swe"
STAGES = {  # (module, function): the stage's name in the table
    (validate_mod, "prepare_sandbox"): "prepare: repository at the base commit",
    (grading_mod, "find_base_config"): "find the test configuration",
    (grading_mod, "apply_patch"): "apply the model patch",
    (grading_mod, "apply_test_patch"): "apply the test patch",
    (grading_mod, "run_tests"): "run the tests",
    (grading_mod, "judge"): "parse the log, judge",
}


def write_predictions(path: Path, limit: int) -> int:
    rows = [
        {"instance_id": i.instance_id, "model_name_or_path": "gold", "model_patch": i.patch}
        for i in load_instances(TASKS)[:limit]
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


def cli_run(preds: Path, out: Path, conc: int, sandboxes: Path) -> tuple[float, int]:
    """(wall seconds, instances resolved) of one ``megaflow grade`` process."""
    cli = str(Path(sys.executable).parent / "megaflow")
    cmd = [cli, "grade", str(preds), "--tasks", str(TASKS), "-o", str(out), "-j", str(conc),
           "--sandbox-root", str(sandboxes)]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"megaflow grade failed ({done.returncode}): {done.stdout[-800:]}")
    summary = json.loads(next(out.glob("*.json")).read_text())
    return wall, len(summary["resolved_ids"])


def peer_blockers() -> list[str]:
    """Why the ``swebench`` harness's own evaluation cannot run here (empty: it can)."""
    why = []
    try:
        import swebench.harness.run_evaluation  # noqa: F401
    except ImportError as exc:
        return [f"the swebench harness does not import ({exc})"]
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # any failure: no daemon to use
        why.append(f"no Docker daemon answers ({type(exc).__name__}: {str(exc)[:80]})")
    need = ("image", "version", "eval_script", "log_parser", "eval_type")  # make_test_spec's
    rows = [json.loads(x) for x in (TASKS / "instances.jsonl").read_text().splitlines() if x]
    missing = [k for k in need if any(k not in r for r in rows)]
    if missing:
        why.append(
            f"the harness runs an instance in its prebuilt image with its eval script "
            f"(make_test_spec needs {', '.join(need)}); the mini-SWE instances lack "
            f"{', '.join(missing)}: their repositories are local folders with no such image"
        )
    return why


@contextlib.contextmanager
def timed_stages(sink: dict[str, float]) -> Iterator[None]:
    """Wrap each stage's function so its time adds to ``sink`` (one grading at a time)."""
    saved: list[tuple[Any, str, Any]] = []

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        if asyncio.iscoroutinefunction(fn):

            async def timed_async(*a: Any, **kw: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return await fn(*a, **kw)
                finally:
                    sink[name] = sink.get(name, 0.0) + time.perf_counter() - t0

            return timed_async

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                sink[name] = sink.get(name, 0.0) + time.perf_counter() - t0

        return timed

    for (mod, attr), name in STAGES.items():
        saved.append((mod, attr, getattr(mod, attr)))
        setattr(mod, attr, wrap(name, getattr(mod, attr)))
    try:
        yield
    finally:
        for mod, attr, fn in saved:
            setattr(mod, attr, fn)


async def breakdown(root: Path, limit: int) -> list[dict[str, float]]:
    """Each instance's stage times, graded one at a time as ``megaflow grade`` does
    (``grade_patch``: a fresh sandbox, prepared, patched, tested, destroyed)."""
    rt = LocalRuntime(LocalRuntimeConfig(root=str(root)))
    out = []
    create = rt.create
    async with rt:
        for inst in load_instances(TASKS)[:limit]:
            sink: dict[str, float] = {}

            async def timed_create(*a: Any, sink: dict[str, float] = sink, **kw: Any) -> Any:
                t0 = time.perf_counter()
                box = await create(*a, **kw)
                sink["sandbox start"] = time.perf_counter() - t0
                return box

            rt.create = timed_create  # type: ignore[method-assign]
            with timed_stages(sink):
                t0 = time.perf_counter()
                report = await validate_mod.grade_patch(rt, inst, inst.patch)
                sink["total"] = time.perf_counter() - t0
            if not report.resolved:
                raise SystemExit(f"{inst.instance_id}: its gold patch did not resolve it")
            sink["other: sandbox teardown, reads, report"] = sink["total"] - sum(
                v for k, v in sink.items() if k != "total"
            )
            out.append(sink)
    return out


def stage_rows(per_instance: list[dict[str, float]]) -> list[list[str]]:
    names = ["sandbox start", *STAGES.values(), "other: sandbox teardown, reads, report", "total"]
    total = statistics.median(d["total"] for d in per_instance)
    rows = []
    for name in names:
        values = [d.get(name, 0.0) for d in per_instance]
        med = statistics.median(values)
        rows.append([f"per instance: {name}", f"{med * 1000:.0f} ms",
                     f"{max(values) * 1000:.0f} ms", f"{med / total:.0%}"])  # fmt: skip
    return rows


def grade_mode(args: Any, root: Path, report: Callable[..., None]) -> None:
    """The table: ``megaflow grade`` throughput, the peer's blockers, the breakdown."""
    limit = 8 if args.quick else 34
    conc = 4
    preds = root / "preds.jsonl"
    n = write_predictions(preds, limit)
    runs = [cli_run(preds, root / f"out{i}", conc, root / f"sb{i}") for i in range(args.reps)]
    if any(ok != n for _, ok in runs):
        raise SystemExit(f"megaflow grade resolved {[ok for _, ok in runs]} of {n} gold patches")
    rate = [n / wall * 60 for wall, _ in runs]
    blockers = peer_blockers()
    per = asyncio.run(breakdown(root / "stages", limit))
    fmt = "{:.1f}".format
    rows = [
        [f"megaflow grade -j {conc}: instances/min (process start included)",
         spread(rate, fmt), "-", "-"],
        ["peer: swebench harness run_evaluation", "cannot run here", "-", "-"],
        *stage_rows(per),
    ]  # fmt: skip
    notes = (
        f"{n} gold predictions of tasks/mini-swe, every one resolved in every run; "
        f"throughput: {args.reps} runs of the command, median (min-max). The peer cannot "
        f"run here: {'; '.join(blockers)}. So the per-instance rows give MegaFlow's own "
        f"cost instead: each of the {n} instances graded alone (a fresh local sandbox "
        "each, as megaflow grade does), P50 and the slowest, and each stage's median "
        "over the median total (medians do not add up to the total). Stages are timed by "
        "wrapping the functions grade_patch calls."
    )
    report("grade", "megaflow grade on the mini-SWE set: throughput and per-instance cost",
           ["figure", "P50 / median", "slowest", "share of total"], rows, notes,
           args=args, reps=args.reps)  # fmt: skip


def spread(values: list[float], fmt: Callable[[float], str]) -> str:
    med = statistics.median(values)
    return fmt(med) if len(values) == 1 else f"{fmt(med)} ({fmt(min(values))}-{fmt(max(values))})"
