"""One kubernetes-runtime sandbox: a pod, its execs, files and snapshot."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import TYPE_CHECKING, Literal

from kubernetes.client.exceptions import ApiException
from websocket import WebSocketException

from megaflow.core.errors import MegaFlowError, NotFound, SandboxError
from megaflow.environment.abstract import (
    DEFAULT_OUTPUT_CAP,
    EnvironmentSpec,
    ExecResult,
    Sandbox,
    SandboxInfo,
    SandboxStats,
    shell_argv,
)
from megaflow.environment.container.scripts import KILL_SCRIPT, RESET_SCRIPT, SNAPSHOT_SCRIPT
from megaflow.environment.container.tar import first_file, plain_tar, single_file_tar
from megaflow.environment.kubernetes.eviction import eviction, eviction_error, killed
from megaflow.environment.kubernetes.exec import Output, run_exec, untar_argv, wrap

if TYPE_CHECKING:
    from megaflow.environment.kubernetes.runtime import KubernetesRuntime

SCRIPT_TIMEOUT_S = 120.0
KILL_GRACE_S = 5.0  # after the kill exec, how long the command's stream may take to end
# cgroup v2, else v1: usage in bytes, CPU microseconds or nanoseconds, processes.
STATS_SCRIPT = (
    "c=/sys/fs/cgroup; if [ -f $c/memory.current ]; then "
    "echo v2 $(cat $c/memory.current) $(grep usage_usec $c/cpu.stat | cut -d' ' -f2) "
    "$(cat $c/pids.current 2>/dev/null || echo 0) $(cat $c/memory.peak 2>/dev/null || echo 0); "
    "else echo v1 $(cat $c/memory/memory.usage_in_bytes) $(cat $c/cpuacct/cpuacct.usage) "
    "$(cat $c/pids/pids.current 2>/dev/null || echo 0) "
    "$(cat $c/memory/memory.max_usage_in_bytes 2>/dev/null || echo 0); fi"
)


STREAM_ERRORS = (ApiException, WebSocketException, OSError)
"""What opening or reading an exec stream raises when the pod or the API server fails."""


def _why(e: BaseException) -> str:
    return str(e.reason) if isinstance(e, ApiException) else f"{type(e).__name__}: {e}"


class KubernetesSandbox(Sandbox):
    """A pod whose main process idles; every command is an exec."""

    def __init__(
        self, runtime: KubernetesRuntime, info: SandboxInfo, spec: EnvironmentSpec
    ) -> None:
        self.info = info
        self.spec = spec
        self.pod = info.id
        self.start_seconds = 0.0
        """Seconds from the create call to ready."""
        self._runtime = runtime
        self._busy = 0
        self._destroyed = False

    def set_state(self, state: Literal["ready", "busy", "stopped"]) -> None:
        metrics = self._runtime.metrics
        if metrics and state != self.info.state:
            metrics.moved("kubernetes", self.info.state, state)
        self.info.state = state

    def _alive(self) -> None:
        if self._destroyed:
            raise SandboxError(f"sandbox {self.id} is destroyed")

    async def _exec(
        self, argv: list[str], output: Output, *, stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> Output:  # fmt: skip
        """Run an exec to its end on a stream thread; on timeout or cancellation,
        kill what it started (by its tag) and wait for its stream to end."""
        kube = self._runtime.kube
        tag = uuid.uuid4().hex
        stop = threading.Event()
        env_argv = wrap(argv, {}, "/", tag)
        ns = self._runtime.config.namespace
        reader = asyncio.ensure_future(
            kube.run_stream(run_exec, kube.core(), ns, self.pod, env_argv, output,
                            stdin=stdin, timeout=timeout, stop=stop)
        )  # fmt: skip
        try:
            await asyncio.shield(reader)
        except asyncio.CancelledError:
            stop.set()
            await asyncio.shield(self._kill(tag))
            raise
        except STREAM_ERRORS as e:
            raise await self._failure(argv, e) from e
        return output

    async def _failure(self, argv: list[str], e: BaseException) -> MegaFlowError:
        """Why an exec failed: its pod's eviction if it was evicted, else ``e``."""
        why = await eviction(self._runtime.kube, self._runtime.config.namespace, self.pod)
        if why is not None:
            return eviction_error(self.id, self.pod, why, self.spec.resources.disk_mb)
        return SandboxError(f"sandbox {self.id}: exec {argv[:3]!r} failed: {_why(e)}")

    async def _kill(self, tag: str) -> None:
        """SIGKILL every process carrying ``tag`` (every one but the keeper for "")."""
        argv = ["/bin/sh", "-c", KILL_SCRIPT, tag]
        kube = self._runtime.kube
        ns = self._runtime.config.namespace
        try:
            await kube.run_stream(run_exec, kube.core(), ns, self.pod, argv, Output(4096),
                                  timeout=SCRIPT_TIMEOUT_S)  # fmt: skip
        except STREAM_ERRORS:
            pass  # the pod is gone, and its processes with it

    # -- commands -------------------------------------------------------------

    async def exec(
        self,
        command: str | list[str],
        timeout: float | None = 60.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        self._alive()
        argv = shell_argv(command)
        workdir = self._path(cwd) if cwd else self.spec.workdir
        output = Output(output_cap)
        tag = uuid.uuid4().hex
        started = time.monotonic()
        self._busy += 1
        self.set_state("busy")
        kube, ns = self._runtime.kube, self._runtime.config.namespace
        stop = threading.Event()
        try:
            reader = asyncio.ensure_future(
                kube.run_stream(run_exec, kube.core(), ns, self.pod,
                                wrap(argv, env or {}, workdir, tag), output, stop=stop)
            )  # fmt: skip
            try:
                await asyncio.wait_for(asyncio.shield(reader), timeout)
            except TimeoutError:
                output.timed_out = True
                await self._kill(tag)
                try:
                    await asyncio.wait_for(asyncio.shield(reader), KILL_GRACE_S)
                except TimeoutError:
                    stop.set()
            except asyncio.CancelledError:
                stop.set()
                await asyncio.shield(self._kill(tag))
                raise
            finally:
                stop.set()
                await asyncio.gather(reader, return_exceptions=True)
            reader.result()
            if killed(output.code, output.timed_out):  # by its pod's eviction?
                why = await eviction(kube, ns, self.pod)
                if why is not None:
                    raise eviction_error(self.id, self.pod, why, self.spec.resources.disk_mb)
        except STREAM_ERRORS as e:
            raise await self._failure(argv, e) from e
        finally:
            self._busy -= 1
            if self._busy == 0 and not self._destroyed:
                self.set_state("ready")
        metrics = self._runtime.metrics
        if metrics:
            metrics.exec_seconds.labels("kubernetes").observe(time.monotonic() - started)
            if output.timed_out:
                metrics.failed("kubernetes", "timeout")
        timed_out = output.timed_out
        code = output.code
        stderr = output.err.decode(errors="replace")
        if output.failure and not timed_out:
            stderr = (stderr + "\n" if stderr else "") + output.failure
        return ExecResult(
            exit_code=137
            if timed_out and code in (None, 0)
            else (code if code is not None else -1),
            stdout=output.out.decode(errors="replace"),
            stderr=stderr,
            truncated=output.truncated,
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
        )

    async def _script(self, script: str, arg: str) -> ExecResult:
        return await self.exec(["/bin/sh", "-c", script, arg], timeout=SCRIPT_TIMEOUT_S)

    # -- files ----------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        full = self._path(path)
        return first_file(await self._tar_of(full), full)

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        await self._untar("/", single_file_tar(self._path(path).lstrip("/"), data, mode))

    async def upload(self, tar_stream: bytes, dest: str) -> None:
        await self._untar(self._path(dest), await self._runtime.kube.run(plain_tar, tar_stream))

    async def download(self, path: str) -> bytes:
        return await self._tar_of(self._path(path))

    async def _untar(self, full: str, data: bytes) -> None:
        self._alive()
        out = await self._exec(
            untar_argv(full, len(data)), Output(64 * 1024), stdin=data, timeout=SCRIPT_TIMEOUT_S
        )
        if out.code != 0:
            why = out.err.decode(errors="replace").strip() or out.failure or f"exit {out.code}"
            raise SandboxError(f"sandbox {self.id}: cannot write into {full!r}: {why}")

    async def _tar_of(self, full: str) -> bytes:
        self._alive()
        parent, _, name = full.rstrip("/").rpartition("/")
        argv = ["tar", "-cf", "-", "-C", parent or "/", name or "."]
        cap = self._runtime.config.max_transfer_mb * 1024 * 1024
        out = await self._exec(argv, Output(cap), timeout=SCRIPT_TIMEOUT_S)
        if out.code != 0:
            err = out.err.decode(errors="replace").strip()
            if "No such file" in err or "not found" in err.lower():
                raise NotFound(f"sandbox {self.id}: no such file {full!r}")
            raise SandboxError(f"sandbox {self.id}: cannot read {full!r}: {err or out.failure}")
        if out.truncated:
            raise SandboxError(
                f"sandbox {self.id}: {full!r} is larger than max_transfer_mb="
                f"{self._runtime.config.max_transfer_mb}"
            )
        return bytes(out.out)

    # -- lifecycle ------------------------------------------------------------

    async def snapshot(self) -> None:
        """Record the workspace; ``reset`` brings it back."""
        r = await self._script(SNAPSHOT_SCRIPT, self.spec.workdir)
        if not r.ok:
            raise SandboxError(f"sandbox {self.id}: workspace snapshot failed: {r.stderr.strip()}")

    async def reset(self) -> None:
        """Kill all processes, empty /tmp, restore the workspace snapshot. A pod's
        container cannot be restarted through the API, so when the reset cannot
        run (every pid taken) it fails and the pool replaces the sandbox."""
        self._alive()
        r = await self._script(RESET_SCRIPT, self.spec.workdir)
        if not r.ok:
            raise SandboxError(f"sandbox {self.id}: reset failed: {r.stderr.strip()}")

    async def kill_processes(self) -> None:
        self._alive()
        r = await self._script(KILL_SCRIPT, "")
        if not r.ok:
            raise SandboxError(f"sandbox {self.id}: cannot kill its processes: {r.stderr.strip()}")

    async def stats(self) -> SandboxStats:
        """CPU, memory and pids from the pod's own cgroup files (no metrics server needed)."""
        r = await self.exec(["/bin/sh", "-c", STATS_SCRIPT], timeout=SCRIPT_TIMEOUT_S)
        parts = r.stdout.split()
        if not r.ok or len(parts) != 5:
            raise SandboxError(f"sandbox {self.id}: stats failed: {r.stderr.strip() or r.stdout}")
        version, mem, cpu, pids, peak = parts[0], *(int(p or 0) for p in parts[1:])
        return SandboxStats(
            cpu_seconds=cpu / (1e6 if version == "v2" else 1e9),
            memory_bytes=mem,
            memory_peak_bytes=max(peak, mem),
            pids=pids,
        )

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        t0 = time.monotonic()
        self.set_state("stopped")
        self._runtime.forget(self.id)
        metrics = self._runtime.metrics
        try:
            await asyncio.shield(self._runtime.delete_pod(self.pod))
        except ApiException:
            if metrics:
                metrics.failed("kubernetes", "teardown")
            raise
        finally:
            if metrics:
                metrics.moved("kubernetes", "stopped", None)
        if metrics:
            metrics.teardown_seconds.labels("kubernetes").observe(time.monotonic() - t0)
