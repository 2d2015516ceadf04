"""``megaflow train CONFIG``: the closed RL loop, with a line per step and a curve.

Prints the held-out reward before training, one line per step (reward mean,
loss, KL, weights version, staleness, seconds), the held-out reward after
each evaluation round, and at the end the held-out reward at the first and
last rounds (each held-out set's too, with its interval) and where the PNG
curve and its JSON went.
``--resume RUN`` continues RUN from its last checkpoint with the same config;
``--no-updates`` runs the same loop without optimizer steps; ``--control
shuffled`` the same loop with each group's rewards permuted before the
advantages (a control whose updates carry no signal; ``megaflow train
compare`` sets a run against it).

On a terminal each line the loop prints is laid out to its width (cut
between figures, the later lines indented: :func:`~megaflow.app.training.step_line.fit`),
so no label is parted from its value; to a file or a pipe it stays one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console

from megaflow.app.assembly import new_run_id
from megaflow.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, console, fail
from megaflow.cli.config_cmd import missing_task_paths
from megaflow.cli.interrupt import interruptible
from megaflow.config import load_config
from megaflow.config.paths import missing_model_dirs
from megaflow.core.errors import ConfigError, MegaFlowError


def _quiet() -> None:
    """The progress lines are the output: no loading bars, no single-process DCP notice."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")


def printer(out: Console) -> Callable[[str], None]:
    """How the loop's lines reach ``out``: fitted to a terminal's width, whole otherwise
    (a log keeps one line per step, whatever COLUMNS says)."""
    from megaflow.app.training.step_line import fit

    def say(line: str) -> None:
        if not out.is_terminal:
            out.print(line, markup=False, highlight=False, soft_wrap=True)
            return
        for part in fit(line, out.width):
            out.print(part, markup=False, soft_wrap=True)

    return say


def train(
    config: Path = typer.Argument(..., help="A run config (YAML) with a train: section."),
    resume: str | None = typer.Option(
        None, "--resume", help="Continue this run from its last checkpoint."
    ),
    no_updates: bool = typer.Option(
        False, "--no-updates", help="The same loop without optimizer steps (a control run)."
    ),
    control: str | None = typer.Option(
        None,
        "--control",
        help="Override train.control: 'shuffled' permutes each group's rewards before the "
        "advantages (the control arm), 'none' trains on them as graded.",
    ),
    curve: Path | None = typer.Option(
        None, "--curve", help="Override train.curve: where the PNG curve goes (JSON beside it)."
    ),
    eval_before: bool | None = typer.Option(
        None,
        "--eval-before/--no-eval-before",
        help="Override train.eval_before: evaluate the held-out split before the first step.",
    ),
    steps: int | None = typer.Option(None, "--steps", min=1, help="Override train.steps."),
    mode: str | None = typer.Option(None, "--mode", help="Override train.mode: sync or async."),
) -> None:
    """Train the rollout model on CONFIG's tasks with GRPO, pushing new weights in place."""
    try:
        from megaflow.app.training.heldout import closing_lines
        from megaflow.app.training.loop import TrainLoop
    except ImportError as exc:
        fail(f"megaflow train needs the train extra (pip install 'megaflow[train]'): {exc}")
    _quiet()
    try:
        cfg = load_config(config)
        if cfg.train is None:
            raise ConfigError(
                f"{config}: no train: section; `megaflow run` runs a config without one",
                [("train", "missing")],
            )
        missing = missing_task_paths(cfg, config.resolve().parent)
        missing += missing_model_dirs(cfg, config.resolve().parent)
        if missing:
            raise ConfigError(
                f"{config}: " + "; ".join(f"{field}: {why}" for field, why in missing), missing
            )
        update: dict[str, object] = {}
        if no_updates:
            update["updates"] = False
        if control is not None:
            if control not in ("none", "shuffled"):
                raise ConfigError(
                    f"--control must be none or shuffled, not {control!r}", [("--control", control)]
                )
            update["control"] = control
        if curve is not None:
            update["curve"] = str(curve)
        if eval_before is not None:
            update["eval_before"] = eval_before
        if steps is not None:
            update["steps"] = steps
        if mode is not None:
            if mode not in ("sync", "async"):
                raise ConfigError(f"--mode must be sync or async, not {mode!r}", [("--mode", mode)])
            update["mode"] = mode
        if update:
            train_cfg = type(cfg.train).model_validate({**cfg.train.model_dump(), **update})
            cfg = cfg.model_copy(update={"train": train_cfg})
        run_id = resume or new_run_id(cfg.name)
        loop = TrainLoop(
            cfg, run_id=run_id, config_dir=config.resolve().parent, printer=printer(console)
        )
    except MegaFlowError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except ValueError as exc:  # a validation error of an override
        fail(f"{config}: {exc}", EXIT_BAD_INPUT)
    tc = loop.tc
    console.print(
        f"train run [bold]{run_id}[/]: {tc.steps} steps x {tc.prompts_per_step} "
        f"prompts x {cfg.samples} samples, {tc.mode}"
        f"{'' if tc.updates else ', no updates (control)'}"
        f"{', rewards shuffled in each group (control)' if tc.control == 'shuffled' else ''}",
        highlight=False,
    )
    try:
        result = asyncio.run(interruptible(loop.run(resume=resume is not None)))
    except ConfigError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, after the run stopped its engines
        fail(f"interrupted; continue with `megaflow train {config} --resume {run_id}`", EXIT_FAILED)
    except MegaFlowError as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILED)
    for line in closing_lines(result.evals):  # overall, then each held-out set's
        printer(console)(line)
    if loop.sync_s:
        mean = sum(loop.sync_s) / len(loop.sync_s)
        console.print(f"weight sync: {mean * 1000:.0f} ms per update", highlight=False)
    console.print(f"curve: {loop.png} and {loop.png.with_suffix('.json')}", highlight=False)
