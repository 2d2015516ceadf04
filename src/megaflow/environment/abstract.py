"""The Environment Service interface: runtimes create sandboxes; sandboxes run commands.

Every runtime (``local`` bubblewrap, ``container`` Docker API, ``dummy``)
implements :class:`Runtime` and :class:`Sandbox`; callers above this layer
(the agent, the scheduler, the app) use only these types. All request and
response types of the service live here.
"""

from __future__ import annotations

import abc
import posixpath
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from megaflow.core.lifecycle import Lifecycle

DEFAULT_OUTPUT_CAP = 1024 * 1024  # bytes kept per stream


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SandboxResources(_Model):
    cpus: float = Field(1.0, gt=0, le=1024, description="CPU cores (cgroup quota).")
    memory_mb: int = Field(1024, ge=8, le=16 * 1024 * 1024, description="Memory limit in MiB.")
    pids: int = Field(256, ge=8, le=4_194_304, description="Most processes at once.")
    disk_mb: int | None = Field(None, ge=1, description="Workspace size limit in MiB.")


class EnvironmentSpec(_Model):
    """What a sandbox looks like. Two equal specs may share a pool."""

    image: str = Field(
        "host",
        description="'host' (read-only host root), a root-filesystem directory or "
        "tarball, or a container image name.",
    )
    workdir: str = Field("/workspace", description="Working directory inside the sandbox.")
    files: dict[str, str] = Field(
        default_factory=dict, description="Files placed in the workspace: relative path -> text."
    )
    repo: str | None = Field(
        None, description="A host directory, tarball or git bundle copied into the workspace."
    )
    setup: list[str] = Field(default_factory=list, description="Shell commands run after start.")
    env: dict[str, str] = Field(default_factory=dict)
    resources: SandboxResources = Field(default_factory=SandboxResources)
    network: Literal["none", "loopback", "host"] = "none"
    ttl_s: float = Field(3600, gt=0, description="Lifetime; always longer than the task deadline.")

    def key(self) -> str:
        """A stable key for pooling sandboxes of the same spec."""
        return self.model_dump_json()


class ExecResult(_Model):
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    timed_out: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class SandboxStats(_Model):
    cpu_seconds: float = 0.0
    memory_bytes: int = 0
    memory_peak_bytes: int = 0
    pids: int = 0
    taken_at: float = Field(default_factory=time.time)


class SandboxInfo(_Model):
    id: str
    runtime: str
    state: Literal["starting", "ready", "busy", "stopped"] = "ready"
    owner: str | None = Field(None, description="Task or pool that holds the sandbox.")
    created_at: float = Field(default_factory=time.time)
    deadline: float = Field(description="Wall-clock time after which the reaper destroys it.")
    image: str = "host"


def shell_argv(command: str | list[str]) -> list[str]:
    """The argv of an exec's ``command``: a string runs through ``/bin/sh -c``."""
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


class Sandbox(abc.ABC):
    """One isolated environment. ``destroy`` is idempotent."""

    info: SandboxInfo
    spec: EnvironmentSpec

    def _path(self, path: str) -> str:
        """``path`` made absolute against the spec's workdir, normalised."""
        return posixpath.normpath(posixpath.join(self.spec.workdir, path))

    @property
    def id(self) -> str:
        return self.info.id

    @abc.abstractmethod
    async def exec(
        self,
        command: str | list[str],
        timeout: float | None = 60.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        """Run a command (a shell string or argv). On timeout the whole process
        group is killed and ``timed_out`` is set; output beyond ``output_cap``
        bytes per stream is dropped and ``truncated`` is set."""

    @abc.abstractmethod
    async def read_file(self, path: str) -> bytes: ...

    @abc.abstractmethod
    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None: ...

    @abc.abstractmethod
    async def upload(self, tar_stream: bytes, dest: str) -> None:
        """Unpack a tar archive into ``dest`` inside the sandbox."""

    @abc.abstractmethod
    async def download(self, path: str) -> bytes:
        """Pack ``path`` (a file or directory) inside the sandbox as a tar archive."""

    @abc.abstractmethod
    async def reset(self) -> None:
        """Kill every process and restore the workspace as it was right after setup."""

    @abc.abstractmethod
    async def kill_processes(self) -> None:
        """Kill every process the sandbox's commands started (the exec server
        stays); files are left as they are."""

    @abc.abstractmethod
    async def stats(self) -> SandboxStats: ...

    @abc.abstractmethod
    async def destroy(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.destroy()


class Runtime(Lifecycle, abc.ABC):
    """Creates and tracks sandboxes of one kind."""

    name: str

    async def start(self) -> None:
        """Prepare the runtime; reap what a crashed process left behind."""

    async def stop(self) -> None:
        """Destroy every sandbox this runtime created."""
        for info in await self.list():
            await self.destroy(info.id)

    @abc.abstractmethod
    async def create(self, spec: EnvironmentSpec, owner: str | None = None) -> Sandbox:
        """Start a sandbox and run the spec's setup. Raises ``SandboxStartError``."""

    @abc.abstractmethod
    async def list(self) -> list[SandboxInfo]: ...

    @abc.abstractmethod
    async def destroy(self, sandbox_id: str) -> None:
        """Tear a sandbox down; a no-op for an unknown or already destroyed id."""

    @abc.abstractmethod
    async def reap_orphans(self) -> int:
        """Remove sandboxes, cgroups, mounts and directories left by a dead process."""

    async def prefetch(self, specs: Sequence[EnvironmentSpec]) -> None:
        """Load ahead, in the background, what sandboxes of ``specs`` (the next to
        start, first first) will need; a later call replaces the list. Runtimes
        with nothing to load (one root for every sandbox) need not override it."""
