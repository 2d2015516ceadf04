"""Run and task ids as people type them: whole, by a unique prefix, or relative.

A run id is long (``quickstart-20261201-071930-08c4``), so tables print the
shortest prefix that names one run (as git abbreviates a commit), and every
command that takes a run id accepts such a prefix. A control arm's run is
its main run's id with ``-control``; a prefix of the main id also starts the
control's, so a prefix that starts several runs names the one whose id
starts all the others, and ``<prefix>-control`` names that run's control.

A task id is ``<run>/<task>/<n>``; ``results`` prints it relative to its run
(``<task>/<n>``). A command that takes a task id accepts the whole id, a
run prefix with the relative id (``quickstart-2026/t3/0``), or the relative
id alone with ``--run`` or, when only one run has such a task, without.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.storage.abstract import MetadataStore

CONTROL = "-control"
MIN_PREFIX = 8


def _pick(given: str, ids: Sequence[str]) -> str | None:
    """The run ``given`` names among ``ids``: itself, or the one run it is a prefix
    of, or among several the one whose id starts all the others."""
    if given in ids:
        return given
    hits = [i for i in ids if i.startswith(given)]
    roots = [h for h in hits if all(o.startswith(h) for o in hits)]
    if len(roots) == 1:
        return roots[0]
    if given.endswith(CONTROL):
        base = _pick(given.removesuffix(CONTROL), ids)
        if base is not None and base + CONTROL in ids:
            return base + CONTROL
    return None


def short_ids(ids: Iterable[str], among: Sequence[str]) -> dict[str, str]:
    """Each id of ``ids`` as the shortest prefix (at least :data:`MIN_PREFIX` characters)
    that :func:`resolve_run` takes back to it among the runs ``among``."""
    out: dict[str, str] = {}
    for rid in ids:
        base = rid.removesuffix(CONTROL)
        if rid.endswith(CONTROL) and base in among:
            out[rid] = short_ids([base], among)[base] + CONTROL
            continue
        out[rid] = next(
            (
                rid[:n]
                for n in range(min(MIN_PREFIX, len(rid)), len(rid))
                if _pick(rid[:n], among) == rid
            ),
            rid,
        )
    return out


async def resolve_run(store: MetadataStore, given: str) -> str:
    """The run id ``given`` names: a whole id or a prefix (see the module docstring)."""
    ids = [r.id for r in await store.list_runs()]
    found = _pick(given, ids)
    if found is not None:
        return found
    hits = [i for i in ids if i.startswith(given)]
    if not hits:
        raise NotFound(
            f"no run {given!r} in the metadata store: give a run id or a prefix of one "
            "(`megaflow status` lists them)"
        )
    raise InvalidInput(
        f"run {given!r} is ambiguous: it starts {len(hits)} runs "
        f"({', '.join(sorted(hits)[:4])}{', ...' if len(hits) > 4 else ''}); give more of it"
    )


async def _exists(store: MetadataStore, task_id: str) -> bool:
    try:
        await store.get_task(task_id)
    except NotFound:
        return False
    return True


async def resolve_task(store: MetadataStore, given: str, run: str | None = None) -> str:
    """The task id ``given`` names: a whole id, ``<run prefix>/<task>/<n>``, or a
    relative id ``<task>/<n>`` within ``run`` (or within the one run that has it)."""
    if run is not None:
        rid = await resolve_run(store, run)
        whole = given if given.startswith(f"{rid}/") else f"{rid}/{given}"
        if await _exists(store, whole):
            return whole
        raise NotFound(f"no task {given!r} in run {rid}")
    if await _exists(store, given):
        return given
    ids = [r.id for r in await store.list_runs()]
    head, _, rest = given.partition("/")
    tried: list[str] = []
    owner = _pick(head, ids) if rest else None
    if owner is not None:
        tried.append(f"{owner}/{rest}")
    tried += [f"{rid}/{given}" for rid in ids]
    found = [t for t in dict.fromkeys(tried) if await _exists(store, t)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise NotFound(
            f"no task {given!r} in the metadata store: give <run>/<task>/<n>, a run prefix "
            "with the task (as `results` prints it), or --run RUN"
        )
    runs = ", ".join(f.removesuffix(f"/{given}") for f in found[:4])
    raise InvalidInput(f"task {given!r} is in {len(found)} runs ({runs}); pass --run RUN")
