"""``megaflow tasks convert --from harbor``: Harbor task folders to a MegaFlow task set.

Reads every task under the folder (:mod:`megaflow.datasets.harbor`), writes
one JSON line per task, and, given a container engine (``--engine``), builds
each task's ``environment/Dockerfile`` into its content-hashed image (built
once: an unchanged folder is found by its tag).
"""

from __future__ import annotations

from pathlib import Path

from megaflow.cli.common import EXIT_BAD_INPUT, console, fail
from megaflow.core.errors import MegaFlowError


def convert_harbor(folder: Path, out: Path, engine: str | None, force: bool) -> None:
    from megaflow.datasets.harbor import image_tag, read_tasks, write_rows

    if not folder.is_dir():
        fail(f"{folder}: not a folder of Harbor tasks", EXIT_BAD_INPUT)
    try:
        tasks = read_tasks(folder)
        write_rows(tasks, out, overwrite=force)
    except (MegaFlowError, OSError) as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    console.print(f"wrote {len(tasks)} Harbor tasks to {out}")
    contexts = [(Path(t.context), image_tag(t)) for t in tasks if t.context is not None]
    if engine is None:
        if contexts:
            console.print(f"{len(contexts)} images to build: pass --engine URL to build them")
        return
    from megaflow.environment.container.build import build_images

    try:
        built = build_images(engine, contexts)
    except MegaFlowError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    for b in built:
        how = "cached" if b.cached else f"built in {b.seconds:.1f} s"
        console.print(f"{b.tag}: {how}")
