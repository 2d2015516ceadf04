"""Start one local sandbox's bubblewrap and hand it its exec server.

The process that becomes bubblewrap first joins the sandbox's cgroups, made
before it, and only then execs ``setpriv`` and bubblewrap
(:meth:`.cgroups.SandboxCgroup.joining`): every process of the sandbox
starts inside them, so a MegaFlow process killed at any point of a start
leaves nothing outside a group the reaper finds by its name. Each carries the
sandbox's marker (:data:`.sweep.MARKER`) in its environment.

bubblewrap starts as an unprivileged host uid (through ``setpriv``) with
``--userns-block-fd`` and ``--info-fd``; from the info this process learns
the sandbox's pid, writes its user namespace's uid/gid maps, and only then
lets it go on, so nothing runs inside before the maps and limits hold. Once
the exec server says hello, the processes in the cgroup are pinned as the
ones every later kill leaves alive. The seccomp program is passed in a memfd
(``--seccomp``). The process is watched by a pidfd (:mod:`.process`), not by
a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import dataclass

from megaflow.core.errors import MegaFlowError, SandboxStartError
from megaflow.environment.local import launcher, sweep, userns
from megaflow.environment.local.channel import Channel
from megaflow.environment.local.process import Bwrap
from megaflow.environment.local.records import SandboxRecord, start_time
from megaflow.environment.local.sandbox import LocalSandbox


@dataclass(frozen=True)
class How:
    """What every start of one runtime shares."""

    bwrap: str
    as_user: list[str]  # the setpriv prefix, empty when we run unprivileged
    ids: userns.IdMap
    seccomp: bytes | None  # the filter program for this sandbox's network mode
    payload: bytes  # the exec server
    timeout_s: float


async def _read_all(fd: int) -> bytes:
    """Everything written to the pipe ``fd`` until its writers close it."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    data = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        data.extend(chunk)
        if not chunk and not done.done():
            done.set_result(None)

    os.set_blocking(fd, False)
    loop.add_reader(fd, readable)
    try:
        await done
    finally:
        loop.remove_reader(fd)
    return bytes(data)


def _place(child: int, ids: userns.IdMap | None, block_w: int) -> None:
    """Blocking: write the user namespace's maps (when ``ids`` is given) and
    let bubblewrap go on. Off the event loop: such writes waited for kernel
    locks that other starts and removals hold."""
    if ids is not None:
        userns.put(f"/proc/{child}/uid_map", ids.uid_lines)
        userns.put(f"/proc/{child}/gid_map", ids.gid_lines)
    os.write(block_w, b"1")


async def _off_loop(child: int, ids: userns.IdMap | None, fd: int) -> None:
    """:func:`_place` on a worker thread. Cancelled meanwhile, it still waits
    for the thread: the caller closes ``fd`` next, and a write to a closed
    (maybe reused) fd number must not happen."""
    work = asyncio.ensure_future(asyncio.to_thread(_place, child, ids, fd))
    try:
        await asyncio.shield(work)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await work
        raise


async def start(
    sb: LocalSandbox, plan: launcher.LaunchPlan, record: SandboxRecord, how: How
) -> None:
    """Start bubblewrap, map its user namespace, put it in its cgroups, let it run."""
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    plan.fds = {"info": info_w, "block": block_r}
    passed = [info_w, block_r]
    if how.seccomp is not None:
        memfd = os.memfd_create("megaflow-seccomp", 0)
        os.write(memfd, how.seccomp)
        os.lseek(memfd, 0, os.SEEK_SET)
        plan.fds["seccomp"] = memfd
        passed.append(memfd)
    plan.marker = sweep.marker(record.process, sb.id)
    argv = launcher.bwrap_argv(how.bwrap, plan)
    argv = [*how.as_user, *argv]  # setpriv execs bubblewrap as its uid: no fork
    if sb.cgroup is not None:
        argv = sb.cgroup.joining(argv)
    env = {sweep.MARKER: plan.marker}
    directory = sb.dir
    try:
        with (directory / "bwrap.log").open("wb") as log:
            sb.proc = await Bwrap.start_bwrap(argv, log, passed, env, limit=2**24)
    finally:
        for fd in passed:
            os.close(fd)
    try:
        record.bwrap_pid, record.bwrap_started = sb.proc.pid, start_time(sb.proc.pid)
        await asyncio.to_thread(record.save, directory)  # file I/O off the event loop
        info = await asyncio.wait_for(_read_all(info_r), how.timeout_s)
        try:
            child = int(json.loads(info)["child-pid"])
        except (ValueError, KeyError, TypeError) as e:
            log_text = (directory / "bwrap.log").read_text(errors="replace").strip()
            raise SandboxStartError(
                f"sandbox {sb.id}: bubblewrap did not start: {log_text[-1000:] or '-'}"
            ) from e
        if how.ids.helpers:  # newuidmap/newgidmap: subprocesses, awaited on the loop
            await userns.write_maps(child, how.ids)
            await _off_loop(child, None, block_w)
        else:
            await _off_loop(child, how.ids, block_w)
    finally:
        os.close(info_r)
        os.close(block_w)
    sb.proc.stdin.write(how.payload)
    sb.channel = Channel(
        sb.proc.stdout, sb.proc.stdin, sb.id, plan.max_frame, sb.protocol_violation
    )
    try:
        await asyncio.wait_for(sb.channel.wait_ready(), how.timeout_s)
    except (MegaFlowError, TimeoutError) as e:
        log_text = (directory / "bwrap.log").read_text(errors="replace").strip()
        raise SandboxStartError(
            f"sandbox {sb.id} did not start: {e}; bubblewrap said: {log_text[-1000:] or '-'}"
        ) from e
    if sb.cgroup is not None:  # before any command: only bubblewrap, init and the server
        sb.cgroup.pin()
        kept = sb.cgroup.kept or set()
        if sb.proc.pid not in kept or child not in kept or sb.cgroup.kept_tasks != len(kept):
            raise SandboxStartError(
                f"sandbox {sb.id}: its cgroup holds {sorted(kept)} ({sb.cgroup.kept_tasks} "
                f"tasks) after start, not bubblewrap ({sb.proc.pid}), its init ({child}) "
                "and the exec server alone"
            )
