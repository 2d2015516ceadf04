"""``megaflow tasks ...``: inspect, validate and convert SWE-style task sets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from megaflow.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, console, err_console, fail
from megaflow.cli.tasks_table import ls_table
from megaflow.core.errors import MegaFlowError
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import load_instances
from megaflow.datasets.sources import DEFAULT_MAX_SOURCE_MB
from megaflow.datasets.validate import CheckResult, ValidationReport, validate_instances
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.storage.private import private_dir

app = typer.Typer(help="Inspect and validate task sets (SWE-bench format).", no_args_is_help=True)

SourceRootOption = typer.Option(
    None,
    "--source-root",
    help="A folder besides the task set's own that megaflow_source paths may point into "
    "(the run config's tasks.source_roots); repeatable.",
)
MaxSourceOption = typer.Option(
    DEFAULT_MAX_SOURCE_MB,
    "--max-source-mb",
    min=1,
    help="Largest repository source in MiB (the run config's tasks.max_source_mb).",
)


def _harbor_hint(path: Path) -> str:
    """How to make a task set of ``path`` when it is a folder of Harbor tasks (each a
    folder with a task.toml), which the commands here do not read as they are."""
    if not path.is_dir() or not any(path.glob("*/task.toml")):
        return ""
    return (
        f"; it holds Harbor task folders: `megaflow tasks convert --from harbor {path} "
        "--out SET.jsonl` makes a task set of them"
    )


def _load(
    path: Path,
    only: list[str] | None,
    roots: list[Path] | None = None,
    max_source_mb: int = DEFAULT_MAX_SOURCE_MB,
) -> list[SWEInstance]:
    try:
        instances = load_instances(
            path, source_roots=roots or [], max_source_bytes=max_source_mb * 1024 * 1024
        )
    except (MegaFlowError, OSError) as exc:
        fail(str(exc) + _harbor_hint(path), EXIT_BAD_INPUT)
    if only:
        unknown = set(only) - {i.instance_id for i in instances}
        if unknown:
            fail(f"no instance {', '.join(sorted(unknown))} in {path}")
        instances = [i for i in instances if i.instance_id in only]
    return instances


@app.command("ls")
def ls(
    path: Path = typer.Argument(..., help="A task-set directory, JSON or JSONL file."),
    roots: list[Path] | None = SourceRootOption,
    max_source_mb: int = MaxSourceOption,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List the instances of a task set."""
    instances = _load(path, None, roots, max_source_mb)
    rows = [_ls_row(i) for i in instances]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    console.print(ls_table(f"{path}: {len(instances)} instances", rows, console.width))


def _ls_row(i: SWEInstance) -> dict[str, Any]:
    """One instance as ``tasks ls`` shows it (and prints it with ``--json``)."""
    statement = i.problem_statement.strip()
    return {
        "instance_id": i.instance_id,
        "repo": i.repo,
        "base_commit": i.base_commit,
        "source": i.megaflow_source.model_dump(mode="json"),
        "fail_to_pass": len(i.FAIL_TO_PASS),
        "pass_to_pass": len(i.PASS_TO_PASS),
        "test_format": i.megaflow_test_format,
        "issue": statement.splitlines()[0] if statement else "",
    }


@app.command("validate")
def validate(
    path: Path = typer.Argument(..., help="A task-set directory, JSON or JSONL file."),
    concurrency: int = typer.Option(4, "--concurrency", "-j", min=1, help="Sandboxes at once."),
    only: list[str] | None = typer.Option(None, "--only", help="Check only this instance id."),
    root: str = typer.Option(
        ".megaflow/sandboxes", "--sandbox-root", help="Where local sandboxes keep workspaces."
    ),
    image: str = typer.Option("host", "--image", help="Sandbox image ('host' or a rootfs)."),
    roots: list[Path] | None = SourceRootOption,
    max_source_mb: int = MaxSourceOption,
) -> None:
    """Apply every gold patch (all must resolve) and an empty patch (none may
    resolve), each in a fresh local sandbox; exit 1 if any instance misbehaves."""
    instances = _load(path, only, roots, max_source_mb)
    report = asyncio.run(_validate(instances, concurrency, root, image))
    _print(report, len(instances))
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


async def _validate(
    instances: list[SWEInstance], concurrency: int, root: str, image: str
) -> ValidationReport:
    from megaflow.environment.config import LocalRuntimeConfig
    from megaflow.environment.factory import make_runtime

    def progress(r: CheckResult) -> None:
        mark = "[green]ok[/]" if r.ok else "[red]MISBEHAVES[/]"
        console.print(f"{mark} {r.instance_id} {r.check}", highlight=False)

    private_dir(Path(root).parent)  # the state directory (.megaflow) is made 0700
    runtime = make_runtime(LocalRuntimeConfig(root=root))
    async with runtime:
        return await validate_instances(
            runtime,
            instances,
            concurrency=concurrency,
            base_spec=EnvironmentSpec(image=image),
            on_result=progress,
        )


def _print(report: ValidationReport, n: int) -> None:
    bad = report.misbehaving
    gold = [r for r in report.results if r.check == "gold"]
    empty = [r for r in report.results if r.check == "empty"]
    resolved_gold = sum(1 for r in gold if r.report and r.report.resolved)
    resolved_empty = sum(1 for r in empty if r.report and r.report.resolved)
    console.print(
        f"{n} instances in {report.duration_s:.1f} s: gold resolves {resolved_gold}/{len(gold)}, "
        f"empty resolves {resolved_empty}/{len(empty)}"
    )
    if not bad:
        console.print("[green]all instances behave[/]")
        return
    table = Table(title=f"{len(bad)} checks misbehave")
    table.add_column("instance", style="bold")
    table.add_column("check")
    table.add_column("problem")
    for r in bad:
        table.add_row(r.instance_id, r.check, r.reason())
    err_console.print(table)


@app.command("convert")
def convert(
    path: Path = typer.Argument(
        ..., help="SWE-bench-format rows (a JSONL, JSON or parquet file), or a Harbor folder."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="The task set to write (JSONL)."),
    from_: str = typer.Option(
        "swebench", "--from", help="The format of PATH: swebench (rows) or harbor (task folders)."
    ),
    engine: str = typer.Option(
        None, "--engine", help="With --from harbor: a container engine URL to build images with."
    ),
    source: str = typer.Option(
        None,
        "--source",
        help="What the repositories folder holds: dir | git_bundle | tarball; or image "
        "(a container image per instance, named by --image-template).",
    ),
    repos: Path = typer.Option(
        None, "--repos", help="The folder of clones, bundles or tarballs (not for image)."
    ),
    image_template: str = typer.Option(
        None,
        "--image-template",
        help="With --source image: each instance's image, from the --template placeholders, "
        "e.g. 'registry/{instance_id}:latest'.",
    ),
    repo_path: str = typer.Option(
        "/testbed", "--repo-path", help="With --source image: the repository's path in the image."
    ),
    template: str = typer.Option(
        None,
        "--template",
        help="Each source's path under --repos, from {instance_id} {repo} {owner} {name} "
        "{base_commit}; default {owner}__{name} (dir), {owner}__{name}.bundle (git_bundle), "
        "{instance_id}.tar.gz (tarball).",
    ),
    test_cmd: str = typer.Option(None, "--test-cmd", help="megaflow_test_cmd for every row."),
    allow_missing: bool = typer.Option(
        False, "--allow-missing", help="Write rows whose source does not exist yet."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
) -> None:
    """Convert SWE-bench-format rows (as on the Hugging Face hub), or Harbor task
    folders, to a MegaFlow task set."""
    from megaflow.datasets.convert import TEMPLATES, convert_rows, read_rows, write_jsonl

    if from_ == "harbor":
        from megaflow.cli.tasks_harbor import convert_harbor

        convert_harbor(path, out, engine, force)
        return
    if from_ != "swebench":
        fail(f"--from {from_!r}: use swebench or harbor", EXIT_BAD_INPUT)

    kinds = [*TEMPLATES, "image"]
    if source is None:
        fail(f"--from swebench needs --source: one of {', '.join(kinds)}", EXIT_BAD_INPUT)
    if source not in kinds:
        fail(f"--source {source!r}: use one of {', '.join(kinds)}", EXIT_BAD_INPUT)
    if source == "image" and not image_template:
        fail("--source image needs --image-template, e.g. 'registry/{instance_id}:latest'",
             EXIT_BAD_INPUT)  # fmt: skip
    if source != "image" and repos is None:
        fail(f"--source {source} needs --repos, the folder of its repositories", EXIT_BAD_INPUT)
    if not path.is_file():
        fail(f"{path} does not exist", EXIT_BAD_INPUT)
    out_dir = out.parent.absolute()
    try:
        records = convert_rows(
            read_rows(path),
            kind=source,  # type: ignore[arg-type,unused-ignore]  # checked against kinds above
            repos=None if source == "image" else repos,
            out_dir=out_dir,
            template=image_template if source == "image" else template,
            test_cmd=test_cmd,
            require_sources=not allow_missing,
            repo_path=repo_path,
        )
        write_jsonl(records, out, overwrite=force)
    except (MegaFlowError, OSError) as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    console.print(f"wrote {len(records)} instances to {out}")
    if repos is not None and source != "image" and not repos.absolute().is_relative_to(out_dir):
        console.print(
            f"its sources lie outside {out_dir}: load it with --source-root {repos} "
            "(tasks.source_roots in a run config)"
        )
