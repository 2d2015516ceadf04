"""The cluster config (``cluster.yaml``): where each service listens, auth, TLS, limits.

::

    auth:
      token_file: .megaflow/cluster/token     # `megaflow up` creates it, mode 0600
    tls:                                      # optional
      cert_file: server.pem
      key_file: server.key
      ca_file: ca.pem                         # clients verify the server with it
    environment:
      port: 20052
      runtime: {type: local}
    scheduler:
      port: 20051

Ports must lie outside 10002-19999 (Ray's worker port range).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from megaflow.core.errors import ConfigError
from megaflow.environment.config import LocalRuntimeConfig, RuntimeConfig
from megaflow.model.config import ModelConfig, ReplayModelConfig
from megaflow.rpc.auth import load_or_create_token, read_token, token_from_env
from megaflow.scheduler.config import SchedulerConfig
from megaflow.storage.config import StorageConfig

RESERVED_PORTS = range(10002, 20000)
SERVICES = ("scheduler", "environment", "agent", "model")
Service = Literal["scheduler", "environment", "agent", "model"]
SERVABLE: tuple[Service, ...] = ("environment", "model", "agent", "scheduler")
"""Every service, in the order a cluster starts them (each before what calls it)."""


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AuthConfig(_Cfg):
    token: str | None = Field(
        None, description="The bearer token itself; prefer token_file outside tests."
    )
    token_file: str = Field(
        ".megaflow/cluster/token", description="Token file (mode 0600); `megaflow up` creates it."
    )
    token_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Environment variable holding the token (a Kubernetes Secret passed as "
        "an env var, docs/kubernetes.md); used before token_file when set.",
    )

    def resolve(self, create: bool = False) -> str:
        """The token: ``token`` if set, else ``$token_env`` if named, else read from
        ``token_file`` (created if asked)."""
        if self.token is not None:
            return self.token
        if self.token_env is not None:
            return token_from_env(self.token_env)
        path = Path(self.token_file)
        return load_or_create_token(path) if create else read_token(path)


class TlsConfig(_Cfg):
    cert_file: str | None = Field(None, description="Server certificate chain (PEM).")
    key_file: str | None = Field(None, description="Server private key (PEM).")
    ca_file: str | None = Field(
        None, description="CA that signed cert_file; clients verify the server with it."
    )
    server_name: str | None = Field(
        None, description="Name clients expect in the certificate, if not the host."
    )


def check_port(v: int) -> int:
    if not 0 <= v <= 65535:
        raise ValueError(f"port {v} is not a TCP port")
    if v in RESERVED_PORTS:
        raise ValueError(f"port {v} is in 10002-19999, which Ray's workers use")
    return v


class _Endpoint(_Cfg):
    host: str = Field("127.0.0.1", description="Address clients connect to.")
    port: int = Field(description="TCP port, outside 10002-19999.")
    bind: str | None = Field(
        None,
        description="Address the server listens on ('0.0.0.0' for every interface); host if None.",
    )

    metrics_port: int | None = Field(
        None,
        description="Serve this service's Prometheus metrics on http(s)://bind:PORT/metrics "
        "(bearer token required); off if unset.",
    )

    @field_validator("port")
    @classmethod
    def _port(cls, v: int) -> int:
        return check_port(v)

    @field_validator("metrics_port")
    @classmethod
    def _metrics_port(cls, v: int | None) -> int | None:
        return None if v is None else check_port(v)

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def listen(self) -> str:
        return self.bind or self.host


class EnvironmentEndpoint(_Endpoint):
    port: int = 20052
    runtime: RuntimeConfig = Field(default_factory=LocalRuntimeConfig)


class SchedulerEndpoint(_Endpoint):
    port: int = 20051
    executor: Literal["noop", "sleep", "agent"] = Field(
        "agent",
        description="What runs a task attempt: 'agent' sends it to the Agent service; 'noop' "
        "succeeds at once and 'sleep' holds its slot for payload['sleep_s'] seconds, both in "
        "this process (control-plane tests, benchmarks).",
    )
    config: SchedulerConfig = Field(default_factory=SchedulerConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)


class AgentEndpoint(_Endpoint):
    port: int = 20053
    executor: Literal["app", "noop", "sleep"] = Field(
        "app",
        description="What the Agent service runs: 'app' is the real task path (sandboxes "
        "from the environment service, the run's agent and model, grading, artifacts in the "
        "scheduler's stores); 'noop' and 'sleep' are for control-plane tests and benchmarks.",
    )


class ModelEndpoint(_Endpoint):
    port: int = Field(20054, description="gRPC model control (list, register, drain backends).")
    http_port: int = Field(
        20055, description="The OpenAI-compatible gateway (bearer token required), same host."
    )
    config: ModelConfig = Field(default_factory=ReplayModelConfig)

    @field_validator("http_port")
    @classmethod
    def _http_port(cls, v: int) -> int:
        return check_port(v)

    def base_url(self, tls: bool = False) -> str:
        return f"{'https' if tls else 'http'}://{self.host}:{self.http_port}/v1"


class DashboardEndpoint(_Cfg):
    """The web dashboard, served by the scheduler's process over its stores, behind the
    cluster token (``docs/dashboard.md``)."""

    host: str = Field("127.0.0.1", description="Address browsers connect to.")
    port: int = Field(20080, description="HTTP(S) port, outside 10002-19999.")
    bind: str | None = Field(None, description="Address to listen on; host if None.")
    interval_s: float = Field(1.0, ge=0.1, description="Seconds between live updates.")
    train_dir: str = Field(".megaflow/train", description="Where megaflow train writes curves.")

    @field_validator("port")
    @classmethod
    def _port(cls, v: int) -> int:
        return check_port(v)

    @property
    def listen(self) -> str:
        return self.bind or self.host


class ClusterConfig(_Cfg):
    auth: AuthConfig = Field(default_factory=AuthConfig)
    tls: TlsConfig | None = None
    max_message_mb: int = Field(
        16, ge=1, le=1024, description="Largest gRPC message either way; larger ones fail."
    )
    keepalive_s: float = Field(
        20.0, gt=0, le=3600,
        description="Clients ping a silent connection this often and drop it after as long "
        "without an answer (a frozen or unreachable peer fails fast instead of hanging).",
    )  # fmt: skip
    state_dir: str = Field(
        ".megaflow/cluster", description="Where `megaflow up` keeps pids, logs and the token."
    )
    scheduler: SchedulerEndpoint = Field(default_factory=SchedulerEndpoint)
    environment: EnvironmentEndpoint = Field(default_factory=EnvironmentEndpoint)
    agent: AgentEndpoint = Field(default_factory=AgentEndpoint)
    model: ModelEndpoint = Field(default_factory=ModelEndpoint)
    dashboard: DashboardEndpoint | None = Field(
        None, description="Serve the web dashboard from the scheduler's process; off if unset."
    )

    @property
    def max_message_bytes(self) -> int:
        return self.max_message_mb * 1024 * 1024

    def endpoint(self, service: Service) -> _Endpoint:
        ep: _Endpoint = getattr(self, service)
        return ep


def load_cluster_config(path: Path) -> ClusterConfig:
    """Read and validate ``cluster.yaml``. Raises ``ConfigError`` with field paths."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read cluster config {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"cluster config {path} is not valid YAML: {exc}") from exc
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as exc:
        problems = [(".".join(map(str, e["loc"])), e["msg"]) for e in exc.errors()]
        listing = "; ".join(f"{p}: {m}" for p, m in problems)
        raise ConfigError(f"invalid cluster config {path}: {listing}", problems) from exc
