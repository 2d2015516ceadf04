"""``megaflow train plan CONFIG``: how to spread a model's training over the hardware.

CONFIG is a plan file (model shape or directory, batch, hardware; see
``docs/train-scale.md``), at its top level or under a ``plan:`` key, or a
run config with a ``train:`` section (``examples/train-quickstart.yaml``):
then the model is its ``model.model`` directory, the batch its trainer's
micro-batch and ``plan_seq_len``, the hardware its ``train.hardware`` or
this machine, as ``train.strategy: auto`` plans it. ``megaflow plan`` is a
hidden alias of this command, kept for old scripts. Prints
every strategy's predicted memory per device and communication per step,
the choice and why; ``--json`` prints the same as JSON and ``--deepspeed
FILE`` also writes the equivalent DeepSpeed config. A bad file exits 2 with
the field and the reason. Needs neither torch nor a GPU.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
import yaml
from pydantic import ValidationError
from rich.table import Table

from megaflow.cli.common import console, fail
from megaflow.cli.stacked import table_width
from megaflow.config.loader import errors_from_validation, is_run_config
from megaflow.core.errors import ConfigError
from megaflow.train.plan_config import GB, PlanConfig
from megaflow.train.planner import Plan, plan


def _from_run_config(path: Path) -> PlanConfig:
    """The plan ``train.strategy: auto`` makes for a run config's trainer and model."""
    from megaflow.config import load_config
    from megaflow.model.config import TransformersModelConfig
    from megaflow.train.strategy import machine, plan_config, ranks_per_node

    try:
        cfg = load_config(path)
    except ConfigError as exc:
        fail(str(exc))
    assert cfg.train is not None  # the caller saw a train: section
    if not isinstance(cfg.model, TransformersModelConfig):
        fail(
            f"{path}: model.type is {cfg.model.type!r}; a plan needs the trained model's "
            "shape: a transformers model directory (model.model), or give a plan file "
            "(docs/train-scale.md)"
        )
    model_dir = Path(cfg.model.model)
    if not (model_dir / "config.json").is_file():
        fail(
            f"{path}: model.model: {model_dir} has no config.json yet; build the model first "
            "(for the quickstart, `make run` builds it), or give a plan file with the "
            "model's shape (docs/train-scale.md)"
        )
    tc = cfg.train
    world = tc.world_size
    try:
        hardware = tc.hardware or machine(world, ranks_per_node(tc, world), None)
        planned = plan_config(model_dir, tc, hardware)
    except ValidationError as exc:  # the model directory's config.json
        fail(f"{path}: " + "; ".join(str(e["msg"]) for e in exc.errors()))
    except (ConfigError, ValueError) as exc:
        fail(f"{path}: {exc}")
    stored = stored_params(model_dir)
    if stored is None:
        return planned
    model = planned.model.model_copy(update={"params": float(stored)})
    return planned.model_copy(update={"model": model})


def stored_params(model_dir: Path) -> int | None:
    """The parameters the model directory's safetensors files hold (tied weights stored
    once), read from their headers alone; None without such files."""
    total, files = 0, sorted(model_dir.glob("*.safetensors"))
    for file in files:
        try:
            with file.open("rb") as f:
                size = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(size))
        except (OSError, ValueError):
            return None
        for name, entry in header.items():
            if name != "__metadata__":
                n = 1
                for d in entry["shape"]:
                    n *= d
                total += n
    return total if files else None


def _load(path: Path) -> PlanConfig:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        fail(f"cannot read plan file {path}: {exc.strerror}")
    except yaml.YAMLError as exc:
        fail(f"{path}: malformed YAML: {exc}")
    if is_run_config(data):  # a run config, not a plan file
        if not isinstance(data.get("train"), dict):
            fail(
                f"{path}: a run config without a train: section has no trainer to plan; "
                "give a plan file (docs/train-scale.md) or a train config"
            )
        return _from_run_config(path)
    if isinstance(data, dict) and isinstance(data.get("plan"), dict):
        data = data["plan"]
    if not isinstance(data, dict):
        fail(f"{path}: expected a mapping with model and hardware (or a plan: section)")
    model = data.get("model")
    if isinstance(model, dict) and isinstance(model.get("path"), str):  # relative to the file
        data = {**data, "model": {**model, "path": str(path.parent / model["path"])}}
    try:
        return PlanConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{field}: {why}" for field, why in errors_from_validation(exc, data))
        fail(f"{path}: invalid plan: {problems}")


def _gb(x: float) -> str:
    """A size in GB, or in MB or KB when it would print as 0.0 GB (a small model's
    state and traffic are real figures, not nothing)."""
    for scale, unit in ((GB, "GB"), (GB / 1024, "MB"), (GB / 1024**2, "KB")):
        if x >= 0.1 * scale:
            return f"{x / scale:.1f} {unit}"
    return f"{x:.0f} B"


def params_text(n: float) -> str:
    """A parameter count as people write it: 3.41M, 1.24B, 70.6B (never 0.00B)."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{n:.0f}"


def _table(result: Plan, notes: list[str], with_notes: bool) -> Table:
    """A row per strategy, every figure on one line; the notes in a last column (or,
    ``with_notes`` false, left for lines under the table)."""
    table = Table()
    for col in ("strategy", "memory / device", "fits", "sent / device / step", "comm time"):
        table.add_column(col, no_wrap=True, justify="left" if col == "strategy" else "right")
    if with_notes:
        table.add_column("note")
    for e, note in zip(result.estimates, notes, strict=True):
        cells = [e.strategy, _gb(e.device_bytes), "yes" if e.fits else "no", _gb(e.comm_bytes)]
        mark = "[bold green]<- chosen[/]" if result.choice is e else ""
        note = " ".join(x for x in (note, mark) if x)
        table.add_row(*cells, f"{e.comm_s:.2f} s", *([note] if with_notes else []))
    return table


def _show(path: Path, cfg: PlanConfig, result: Plan) -> None:
    hw = cfg.hardware
    console.print(
        f"[bold]{path}[/]: {params_text(result.params)} parameters on {hw.nodes} x "
        f"{hw.devices_per_node} devices of {hw.device_memory_gb:.1f} GB, {cfg.precision}, "
        f"micro-batch {cfg.batch.micro_batch} x {cfg.batch.seq_len} tokens"
    )
    notes = [e.note for e in result.estimates]  # the reasons below name the choice
    table = _table(result, notes, with_notes=True)
    if table_width(table) > console.width:  # the notes go under it: every figure stays whole
        table = _table(result, notes, with_notes=False)
        notes_below = [
            f"  {e.strategy}: {n}" for e, n in zip(result.estimates, notes, strict=True) if n
        ]
    else:
        notes_below = []
    console.print(table)
    for line in notes_below:
        console.print(line, highlight=False)
    for reason in result.reasons:
        console.print(f"  {reason}", highlight=False)
    if result.choice is not None:
        parts = ", ".join(f"{k} {_gb(v)}" for k, v in result.choice.parts.items())
        console.print(f"[bold]plan: {result.choice.strategy}[/] ({parts})", highlight=False)


def plan_cmd(
    config: Path = typer.Argument(
        ...,
        help="A plan file (YAML): model, batch, hardware; or a run config with a train: "
        "section and a transformers model directory.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    deepspeed: Path | None = typer.Option(
        None, "--deepspeed", help="Also write the equivalent DeepSpeed config (JSON) here."
    ),
    lr: float = typer.Option(1e-6, "--lr", help="Learning rate in the DeepSpeed config."),
    warmup_steps: int = typer.Option(
        100, "--warmup-steps", min=1, help="OneBitAdam freeze_step in the DeepSpeed config."
    ),
) -> None:
    """Choose DDP, ZeRO-2/3, hybrid sharding, pipeline stages or CPU offload for CONFIG."""
    cfg = _load(config)
    result = plan(cfg)
    if as_json:
        out: dict[str, Any] = {
            "params": result.params,
            "choice": result.choice.strategy if result.choice else None,
            "estimates": [asdict(e) for e in result.estimates],
            "reasons": result.reasons,
        }
        console.print_json(json.dumps(out))
    else:
        _show(config, cfg, result)
    if deepspeed is not None:
        from megaflow.train.deepspeed_config import deepspeed_config

        if result.choice is None:
            fail("no plan fits, so there is no DeepSpeed config to write")
        try:
            ds = deepspeed_config(cfg, result.choice, lr=lr, warmup_steps=warmup_steps)
        except ConfigError as exc:
            fail(str(exc))
        deepspeed.write_text(json.dumps(ds, indent=2) + "\n")
        if not as_json:
            console.print(f"DeepSpeed config written to {deepspeed}")
    if result.choice is None:
        raise typer.Exit(1)
