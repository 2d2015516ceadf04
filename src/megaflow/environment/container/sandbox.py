"""One container-runtime sandbox: a container, its execs, files and snapshot."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Literal

import docker
from docker.errors import APIError, DockerException
from docker.errors import NotFound as DockerNotFound

from megaflow.core.errors import NotFound, SandboxError
from megaflow.environment.abstract import (
    DEFAULT_OUTPUT_CAP,
    EnvironmentSpec,
    ExecResult,
    Sandbox,
    SandboxInfo,
    SandboxStats,
    shell_argv,
)
from megaflow.environment.container.exec import IncompleteExec, Output, run_command, run_quiet
from megaflow.environment.container.scripts import KILL_SCRIPT, RESET_SCRIPT, SNAPSHOT_SCRIPT
from megaflow.environment.container.tar import first_file, plain_tar, single_file_tar

if TYPE_CHECKING:
    from megaflow.environment.container.runtime import ContainerRuntime

SCRIPT_TIMEOUT_S = 120.0


class ContainerSandbox(Sandbox):
    """A container whose main process idles; every command is an exec."""

    def __init__(
        self,
        runtime: ContainerRuntime,
        client: docker.DockerClient,
        container_id: str,
        info: SandboxInfo,
        spec: EnvironmentSpec,
        image: str | None = None,
    ) -> None:
        self.info = info
        self.spec = spec
        self.image = image or spec.image
        """The image the runtime resolved (``host`` is its ``host_image``)."""
        self.container_id = container_id
        self.start_seconds = 0.0
        """Seconds from create to ready, not counting the image load."""
        self._runtime = runtime
        self._api = client.api
        self._busy = 0
        self._peak = 0
        self._destroyed = False

    @property
    def image_load_seconds(self) -> float:
        """Seconds the runtime spent loading this sandbox's image on its first use."""
        return self._runtime.image_load_seconds.get(self.image, 0.0)

    def set_state(self, state: Literal["ready", "busy", "stopped"]) -> None:
        if self._runtime.metrics and state != self.info.state:
            self._runtime.metrics.moved("container", self.info.state, state)
        self.info.state = state

    def _alive(self) -> None:
        if self._destroyed:
            raise SandboxError(f"sandbox {self.id} is destroyed")

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
        started = time.monotonic()
        self._busy += 1
        self.set_state("busy")
        try:
            code, timed_out = await run_command(
                self._runtime.engine, self._api, self.container_id, argv, env or {}, workdir,
                timeout, output,
            )  # fmt: skip
        except IncompleteExec as e:
            raise IncompleteExec(
                f"sandbox {self.id}: exec {argv[:3]!r} lost its output or exit status: {e}"
            ) from e
        except (DockerNotFound, APIError) as e:
            raise SandboxError(
                f"sandbox {self.id}: exec {argv[:3]!r} failed: {e} (if its container "
                "stopped, e.g. after a fork bomb, reset() starts it again)"
            ) from e
        finally:
            self._busy -= 1
            if self._busy == 0 and not self._destroyed:
                self.set_state("ready")
        metrics = self._runtime.metrics
        if metrics:
            metrics.exec_seconds.labels("container").observe(time.monotonic() - started)
            if timed_out:
                metrics.failed("container", "timeout")
        return ExecResult(
            exit_code=137
            if timed_out and code in (None, 0)
            else (code if code is not None else -1),
            stdout=output.out.decode(errors="replace"),
            stderr=output.err.decode(errors="replace"),
            truncated=output.truncated,
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
        )

    async def _script(self, script: str, arg: str) -> ExecResult:
        return await self.exec(["/bin/sh", "-c", script, arg], timeout=SCRIPT_TIMEOUT_S)

    # -- files ----------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        full = self._path(path)
        return first_file(await self._get_archive(full), full)

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        full = self._path(path)
        await self._put_archive("/", single_file_tar(full.lstrip("/"), data, mode))

    async def upload(self, tar_stream: bytes, dest: str) -> None:
        full = self._path(dest)
        data = await self._runtime.run(plain_tar, tar_stream)
        try:
            await self._put_archive(full, data)
        except NotFound:  # Docker wants the directory to exist; Podman makes it
            r = await self.exec(["mkdir", "-p", full], timeout=SCRIPT_TIMEOUT_S)
            if not r.ok:
                raise SandboxError(
                    f"sandbox {self.id}: cannot create {full!r}: {r.stderr}"
                ) from None
            await self._put_archive(full, data)

    async def download(self, path: str) -> bytes:
        return await self._get_archive(self._path(path))

    async def _get_archive(self, full: str) -> bytes:
        self._alive()

        def get() -> bytes:
            chunks, _ = self._api.get_archive(self.container_id, full)
            return b"".join(chunks)

        try:
            return await self._runtime.run(get)
        except DockerNotFound:
            raise NotFound(f"sandbox {self.id}: no such file {full!r}") from None
        except DockerException as e:
            raise SandboxError(f"sandbox {self.id}: cannot read {full!r}: {e}") from e

    async def _put_archive(self, full: str, data: bytes) -> None:
        self._alive()
        try:
            await self._runtime.run(self._api.put_archive, self.container_id, full, data)
        except DockerNotFound:
            raise NotFound(f"sandbox {self.id}: no such directory {full!r}") from None
        except DockerException as e:
            raise SandboxError(f"sandbox {self.id}: cannot write into {full!r}: {e}") from e

    # -- lifecycle ------------------------------------------------------------

    async def snapshot(self) -> None:
        """Record the workspace; ``reset`` brings it back."""
        r = await self._script(SNAPSHOT_SCRIPT, self.spec.workdir)
        if not r.ok:
            raise SandboxError(f"sandbox {self.id}: workspace snapshot failed: {r.stderr.strip()}")

    async def reset(self) -> None:
        """Kill all processes, empty /tmp, restore the workspace snapshot.

        When the reset exec cannot run (a fork bomb holds every pid of the
        limit) or the container stopped, the container is killed and started
        again; the snapshot lives in its writable layer, so it survives.
        """
        self._alive()
        try:
            r = await self._script(RESET_SCRIPT, self.spec.workdir)
            if r.ok:
                return
        except SandboxError:
            pass
        await self._restart()
        r = await self._script(RESET_SCRIPT, self.spec.workdir)
        if not r.ok:
            raise SandboxError(f"sandbox {self.id}: reset failed: {r.stderr.strip()}")

    async def kill_processes(self) -> None:
        """The reset's kill script without a tag: every process but the keeper
        and PID 1. When it cannot run (every pid taken), the container restarts."""
        self._alive()
        try:
            argv = ["/bin/sh", "-c", KILL_SCRIPT, ""]
            if await self._runtime.run(run_quiet, self._api, self.container_id, argv) == 0:
                return
        except DockerException:
            pass
        await self._restart()

    async def _restart(self) -> None:
        def restart() -> None:
            if self._api.inspect_container(self.container_id)["State"]["Running"]:
                self._api.kill(self.container_id, "KILL")
                self._api.wait(self.container_id, timeout=SCRIPT_TIMEOUT_S)
            self._api.start(self.container_id)

        try:
            await self._runtime.run(restart)
        except DockerException as e:
            raise SandboxError(f"sandbox {self.id}: cannot restart its container: {e}") from e

    async def stats(self) -> SandboxStats:
        self._alive()
        try:
            raw = await self._runtime.run(
                self._api.stats, self.container_id, stream=False, one_shot=True
            )
        except DockerException as e:
            raise SandboxError(f"sandbox {self.id}: stats failed: {e}") from e
        mem = raw.get("memory_stats") or {}
        usage = int(mem.get("usage") or 0)
        # Docker on cgroup v1 reports max_usage; Podman does not, so keep the highest seen.
        self._peak = max(self._peak, usage, int(mem.get("max_usage") or 0))
        cpu = ((raw.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage") or 0
        return SandboxStats(
            cpu_seconds=int(cpu) / 1e9,
            memory_bytes=usage,
            memory_peak_bytes=self._peak,
            pids=int((raw.get("pids_stats") or {}).get("current") or 0),
        )

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        t0 = time.monotonic()
        self.set_state("stopped")
        self._runtime.forget(self.id)
        try:
            await asyncio.shield(
                self._runtime.run(self._runtime.remove_container, self.container_id)
            )
        except DockerException:
            if self._runtime.metrics:
                self._runtime.metrics.failed("container", "teardown")
            raise
        finally:
            self._runtime.release_image(self.image)
            if self._runtime.metrics:
                self._runtime.metrics.moved("container", "stopped", None)
        if self._runtime.metrics:
            self._runtime.metrics.teardown_seconds.labels("container").observe(
                time.monotonic() - t0
            )
