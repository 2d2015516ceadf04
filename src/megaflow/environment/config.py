"""Environment configs: which runtime runs sandboxes, and how they are pooled."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LocalRuntimeConfig(_Cfg):
    """Bubblewrap sandboxes with cgroup limits on this machine."""

    type: Literal["local"] = "local"
    root: str = Field(".megaflow/sandboxes", description="Where sandbox workspaces live.")


class ContainerRuntimeConfig(_Cfg):
    """Containers through the Docker Engine API (Docker or Podman's service)."""

    type: Literal["container"] = "container"
    base_url: str | None = Field(None, description="Docker API URL; None uses DOCKER_HOST.")


class DummyRuntimeConfig(_Cfg):
    """In-memory sandboxes for tests of logic elsewhere; runs nothing."""

    type: Literal["dummy"] = "dummy"


RuntimeConfig = Annotated[
    LocalRuntimeConfig | ContainerRuntimeConfig | DummyRuntimeConfig,
    Field(discriminator="type"),
]


class PoolConfig(_Cfg):
    min: int = Field(0, ge=0, description="Sandboxes kept per spec (persistent mode).")
    max: int = Field(64, ge=1, description="Most sandboxes per spec (persistent mode).")
    warm_share: float = Field(0.2, ge=0, le=1, description="Spare started sandboxes, as a share.")


class EnvironmentConfig(_Cfg):
    runtime: RuntimeConfig = Field(default_factory=LocalRuntimeConfig)
    mode: Literal["ephemeral", "persistent"] = "ephemeral"
    pool: PoolConfig = Field(default_factory=PoolConfig)
    image: str = Field("host", description="'host', a rootfs directory or tarball, or an image.")
    network: Literal["none", "loopback", "host"] = "none"
    cpus: float = Field(1.0, gt=0, le=1024)
    memory_mb: int = Field(1024, gt=0)
    pids: int = Field(256, ge=8, le=1_000_000)
