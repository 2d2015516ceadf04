"""``megaflow train``: the closed RL loop, and the trainer's plan and diagnosis.

``megaflow train CONFIG [OPTIONS]`` runs the loop (it is ``megaflow train
run CONFIG``: a first word that names no subcommand is taken as the run's
config); ``megaflow train plan PLAN`` is the sharding planner (``megaflow plan``
is a hidden alias, kept so old scripts work; help and docs name the one
command); ``megaflow train diagnose METRICS`` splits the steps'
time per rank; ``megaflow train compare TRAINED CONTROL`` sets a run
against its shuffled-reward control. A config file literally named ``plan``,
``run``, ``diagnose`` or ``compare`` is given as ``./plan``.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from megaflow.cli import train_cmd, train_compare_cmd, train_diagnose_cmd, train_plan_cmd

_HELP = ("--help", "-h")


class RunByDefault(TyperGroup):
    """A group whose ``run`` subcommand is implied when the first word names none."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's own click Context
        if args and args[0] not in self.commands and args[0] not in _HELP:
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=RunByDefault,
    no_args_is_help=True,
    help="Train with GRPO (`megaflow train CONFIG`), compare a run with its control, plan "
    "the sharding, diagnose the ranks.",
)
app.command("run")(train_cmd.train)
app.command("plan")(train_plan_cmd.plan_cmd)
app.command("diagnose")(train_diagnose_cmd.diagnose_cmd)
app.command("compare")(train_compare_cmd.compare_cmd)


def register(root: Any) -> None:
    """Add ``train`` (this group) and the hidden ``plan`` alias to the root app."""
    root.add_typer(app, name="train")
    root.command(
        "plan", hidden=True, help="Alias of `megaflow train plan` (the one documented name)."
    )(train_plan_cmd.plan_cmd)
