"""One local sandbox: a bubblewrap process whose exec server runs our requests."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path

from megaflow.core.errors import SandboxError, SandboxTimeout
from megaflow.environment.abstract import (
    DEFAULT_OUTPUT_CAP,
    EnvironmentSpec,
    ExecResult,
    Sandbox,
    SandboxInfo,
    SandboxStats,
    shell_argv,
)
from megaflow.environment.local import userns, workspace
from megaflow.environment.local.cgroups import SandboxCgroup
from megaflow.environment.local.channel import Channel, Reply
from megaflow.environment.local.process import Bwrap
from megaflow.environment.local.records import remove_sandbox_dir
from megaflow.monitoring.environment import EnvironmentMetrics

HOST_GRACE_S = 15.0  # how much longer than a command's timeout the host waits for its reply


class LocalSandbox(Sandbox):
    def __init__(
        self,
        info: SandboxInfo,
        spec: EnvironmentSpec,
        directory: Path,
        base_env: dict[str, str],
        metrics: EnvironmentMetrics | None,
        on_gone: Callable[[LocalSandbox], None],
    ) -> None:
        self.info = info
        self.spec = spec
        self.dir = directory
        self.base_env = base_env
        self.metrics = metrics
        self.proc: Bwrap | None = None
        self.channel: Channel | None = None
        self.cgroup: SandboxCgroup | None = None
        self.image_key: str | None = None
        self._on_gone = on_gone
        self._busy = 0
        self._destroyed = False
        self._teardown_lock = asyncio.Lock()
        self.mounts: list[Path] = []  # host mounts of this sandbox, unmounted in order
        self.left_groups: list[Path] = []  # cgroups its teardown left for the reaper to remove
        self.max_frame = 64 << 20
        self.violation: str | None = None
        self._violation_task: asyncio.Task[None] | None = None

    def protocol_violation(self, reason: str) -> None:
        """The exec server broke the protocol: the sandbox cannot be trusted, tear it down."""
        self.violation = reason
        if self.metrics is not None:
            self.metrics.failed("local", "exec")
        self._violation_task = asyncio.get_running_loop().create_task(self.teardown())

    def set_state(self, state: str) -> None:
        if self.metrics is not None and state != self.info.state:
            self.metrics.moved("local", self.info.state, state)
        self.info.state = state  # type: ignore[assignment]

    def _chan(self) -> Channel:
        if self.channel is None or self._destroyed:
            raise SandboxError(f"sandbox {self.id} is destroyed")
        return self.channel

    async def exec(
        self,
        command: str | list[str],
        timeout: float | None = 60.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        argv = shell_argv(command)
        if not argv:
            raise SandboxError("exec needs a command")
        head = {
            "op": "exec",
            "argv": argv,
            "env": {**self.base_env, **(env or {})},
            "cwd": self._path(cwd or "."),
            "timeout": timeout,
            "cap": output_cap,
        }
        chan = self._chan()
        t0 = time.perf_counter()
        self._busy += 1
        if self.info.state == "ready":
            self.set_state("busy")
        try:
            guard = None if timeout is None else timeout + HOST_GRACE_S
            reply, body = await chan.call(head, timeout=guard)
        except SandboxError:
            if self.metrics is not None:
                self.metrics.failed("local", "exec")
            raise
        finally:
            self._busy -= 1
            if self._busy == 0 and self.info.state == "busy":
                self.set_state("ready")
        split = reply["stdout_len"]
        result = ExecResult(
            exit_code=reply["exit_code"],
            stdout=body[:split].decode(errors="replace"),
            stderr=body[split:].decode(errors="replace"),
            truncated=reply["truncated"],
            timed_out=reply["timed_out"],
            duration_s=reply["duration_s"],
        )
        if self.metrics is not None:
            self.metrics.exec_seconds.labels("local").observe(time.perf_counter() - t0)
            if result.timed_out:
                self.metrics.failed("local", "timeout")
        return result

    async def read_file(self, path: str) -> bytes:
        _, body = await self._chan().call({"op": "read", "path": self._path(path)})
        return body

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        await self._chan().call({"op": "write", "path": self._path(path), "mode": mode}, data)

    async def upload(self, tar_stream: bytes, dest: str) -> None:
        await self._chan().call({"op": "upload", "dest": self._path(dest)}, tar_stream)

    async def download(self, path: str) -> bytes:
        _, body = await self._chan().call({"op": "download", "path": self._path(path)})
        return body

    async def reset(self) -> None:
        """Kill every process, clear the IPC namespace, restore the files.

        Only a sandbox whose cgroup proves every process of the last task gone
        is reset; otherwise (a survivor, no cgroups, a failed restore) it is
        destroyed and :class:`SandboxError` raised, so a pool never reuses it."""
        if self.cgroup is None:
            await self.teardown()
            raise SandboxError(
                f"sandbox {self.id} cannot be reset without cgroups (the local runtime's "
                "cgroups option is 'off'): nothing proves every process of its last task "
                "is gone. It was destroyed; use ephemeral sandboxes or enable cgroups"
            )
        await self._end_processes("reset")
        try:
            await asyncio.to_thread(workspace.restore, self.dir)
        except Exception as e:
            await self.teardown()
            raise SandboxError(
                f"sandbox {self.id}: restoring its files failed ({e}); it was destroyed"
            ) from e

    async def kill_processes(self) -> None:
        await self._end_processes("kill")

    async def _end_processes(self, op: str) -> None:
        """The exec server kills everything but itself and init through the pid
        namespace; then the host checks the cgroup, which must hold only the
        processes pinned at start, and ends any other by freezing the group.
        A sandbox where that fails is destroyed."""
        try:
            await self._chan().call({"op": op}, timeout=30.0)
        except (SandboxError, SandboxTimeout):
            await self.teardown()
            raise
        if self.cgroup is None or self.cgroup.only_kept():  # the usual case: two reads
            return
        if not await asyncio.to_thread(self.cgroup.end_others):
            await self.teardown()
            raise SandboxError(
                f"sandbox {self.id}: a process outlived the kill (its cgroup still holds "
                "more than bubblewrap, init and the exec server); it was destroyed"
            )

    def open_terminal(
        self, argv: list[str], rows: int = 24, cols: int = 80, env: dict[str, str] | None = None
    ) -> Terminal:
        """Run ``argv`` on a terminal inside the sandbox (for interactive shells)."""
        head = {
            "op": "pty", "argv": argv, "env": {"TERM": "xterm", **self.base_env, **(env or {})},
            "cwd": self.spec.workdir, "rows": rows, "cols": cols,
        }  # fmt: skip
        chan = self._chan()
        rid, queue = chan.open_stream(head)
        return Terminal(chan, rid, queue)

    async def stats(self) -> SandboxStats:
        if self.cgroup is not None:
            return await asyncio.to_thread(self.cgroup.stats)
        return SandboxStats()

    async def destroy(self) -> None:
        await self.teardown()

    async def teardown(self) -> None:
        """Kill the sandbox's processes, remove its cgroups and directory. Idempotent."""
        async with self._teardown_lock:
            if self._destroyed:
                return
            self._destroyed = True
            t0 = time.perf_counter()
            self.set_state("stopped")
            try:
                if self.channel is not None:
                    await self.channel.close()
                if self.proc is not None:
                    if self.proc.returncode is None:
                        try:
                            self.proc.send_signal(signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                        await self.proc.wait()
                    self.proc.close()
                await asyncio.to_thread(self._remove_host_state)  # one thread hop, not three
            except BaseException:
                if self.metrics is not None:
                    self.metrics.failed("local", "teardown")
                raise
            finally:
                self._on_gone(self)
                if self.metrics is not None:
                    self.metrics.moved("local", "stopped", None)
                    self.metrics.sandbox_gone("local", self.id)
                    self.metrics.teardown_seconds.labels("local").observe(time.perf_counter() - t0)

    def _remove_host_state(self) -> None:
        """Blocking: the cgroups' processes (none should be left), the mounts, the
        directory, then the cgroups: files the sandbox wrote hold page cache
        charged to its memory group, so they go first and the group can be
        freed once removed (:func:`cgroups.reclaim`)."""
        if self.cgroup is not None:
            self.cgroup.kill_all()
        for mount in self.mounts:
            userns.umount(mount)
        remove_sandbox_dir(self.dir)
        if self.cgroup is not None:
            self.left_groups = self.cgroup.remove()


class Terminal:
    """A process on a terminal in a sandbox: write keystrokes, read its output."""

    def __init__(self, chan: Channel, rid: int, queue: asyncio.Queue[Reply | None]) -> None:
        self._chan = chan
        self._rid = rid
        self._queue = queue
        self.exit_code: int | None = None

    def write(self, data: bytes) -> None:
        self._chan.notify({"op": "pty_in", "target": self._rid}, data)

    def resize(self, rows: int, cols: int) -> None:
        self._chan.notify({"op": "pty_in", "target": self._rid, "rows": rows, "cols": cols})

    async def read(self) -> bytes | None:
        """The next output, or None once the process has exited."""
        if self.exit_code is not None:
            return None
        item = await self._queue.get()
        if item is None:
            self.exit_code = -1
            return None
        head, body = item
        if "out" in head:
            return body
        self.exit_code = head.get("exit_code", -1)
        return None
