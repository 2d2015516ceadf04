"""Environment configs: which runtime runs sandboxes, and how they are pooled.

Each runtime config builds its runtime with ``build(metrics=...)``, importing
the backend's module only then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from megaflow.environment.abstract import EnvironmentSpec, SandboxResources

if TYPE_CHECKING:
    from megaflow.environment.abstract import Runtime
    from megaflow.monitoring.environment import EnvironmentMetrics

# Secret-bearing paths inside the 'host' image's allow list, covered by default.
DEFAULT_HIDE = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh",
    "/etc/sudoers", "/etc/sudoers.d", "/etc/ssl/private", "/etc/security/opasswd",
    "/etc/subuid", "/etc/subgid", "/etc/machine-id", "/etc/krb5.keytab", "/etc/docker",
    "/etc/containers/auth.json", "/etc/wireguard", "/etc/NetworkManager/system-connections",
    "/etc/ipsec.secrets", "/etc/ppp", "/etc/mysql", "/etc/postgresql", "/etc/letsencrypt",
)  # fmt: skip


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LocalRuntimeConfig(_Cfg):
    """Bubblewrap sandboxes with cgroup limits on this machine."""

    type: Literal["local"] = "local"
    root: str = Field(".megaflow/sandboxes", description="Where sandbox workspaces live.")
    cgroups: Literal["auto", "v1", "v2", "off"] = Field(
        "auto", description="cgroup version for limits and stats; 'off' means neither."
    )
    image_cache_mb: int = Field(
        4096, ge=1, description="Size limit of unpacked root filesystem images (LRU)."
    )
    hide: list[str] = Field(
        default_factory=lambda: list(DEFAULT_HIDE),
        description="Host paths hidden inside what 'host' image sandboxes see.",
    )
    hide_checkout: bool = Field(
        True, description="Hide the git checkout the runtime was started in (if bound)."
    )
    host_paths: list[str] = Field(
        default_factory=list,
        description="Extra host paths bound read-only into 'host' image sandboxes; "
        "only /usr, /bin, /sbin, /lib*, /etc are bound unless the config names more.",
    )
    uid_base: int = Field(
        100_000,
        ge=1,
        le=2**32 - 2 - 65_536,
        description="First host uid/gid of the 65536 that sandbox uids 0..65535 map to; "
        "the agent (uid 1000 inside) is uid_base+1000 on the host. Pick a range no "
        "account uses. Not used when MegaFlow runs unprivileged (its /etc/subuid range is).",
    )
    seccomp: bool = Field(
        True, description="Load the seccomp filter; False only for machines of unknown arch."
    )
    max_frame_mb: int = Field(
        64, ge=1, le=1024, description="Largest message from a sandbox's exec server, MiB."
    )
    start_timeout_s: float = Field(30.0, gt=0, description="Longest wait for a sandbox start.")
    max_starting: int = Field(
        0, ge=0, description="Sandboxes starting at once (directories, cgroups, bubblewrap, "
        "until the exec server answers); the others wait their turn, outside start_timeout_s. "
        "0: 32 per core.",
    )  # fmt: skip
    setup_timeout_s: float = Field(600.0, gt=0, description="Longest wait for each setup command.")
    reap_interval_s: float = Field(
        30.0, gt=0, description="How often expired sandboxes (past their TTL) are destroyed."
    )

    def build(self, metrics: EnvironmentMetrics | None = None) -> Runtime:
        from megaflow.environment.local import LocalRuntime

        return LocalRuntime(self, metrics=metrics)


class ImageCacheConfig(_Cfg):
    """Per-task images: where a missing one comes from, how many are kept, how far ahead."""

    archive_dir: str | None = Field(
        None,
        description="Folder of image archives (`docker save` / `podman save` tarballs) named "
        "`<image, each character outside [A-Za-z0-9._-] as _>.tar`, loaded on first use.",
    )
    mirror: str | None = Field(
        None,
        description="Registry mirror (host[:port][/prefix]) a missing image is pulled from, "
        "as <mirror>/<repository path>, before its own registry.",
    )
    max_cache_gb: float | None = Field(
        None,
        gt=0,
        description="Most GB of images the runtime loaded itself to keep; past it the least "
        "recently used one no container uses is removed. None: no bound.",
    )
    prefetch: int = Field(
        2, ge=0, description="Images of the upcoming tasks loaded ahead, in the background."
    )


class ContainerRuntimeConfig(_Cfg):
    """Containers through the Docker Engine API (Docker or Podman's service)."""

    type: Literal["container"] = "container"
    base_url: str | None = Field(None, description="Docker API URL; None uses DOCKER_HOST.")
    namespace: str = Field(
        "megaflow",
        pattern=r"^[a-z0-9][a-z0-9_.-]*$",
        description="Label and name prefix; list and reap see only this namespace.",
    )
    pull: Literal["missing", "never", "always"] = Field(
        "missing", description="When to pull a named image from its registry."
    )
    host_image: str | None = Field(
        None, description="Image used for specs asking for 'host'; None makes them an error."
    )
    init: bool = Field(True, description="Run an init as PID 1 so orphaned processes are reaped.")
    api_timeout_s: float = Field(60.0, gt=0, description="Timeout of one engine API call.")
    start_timeout_s: float = Field(30.0, gt=0, description="Longest wait for a sandbox start.")
    setup_timeout_s: float = Field(600.0, gt=0, description="Longest wait for each setup command.")
    max_connections: int = Field(64, ge=1, description="Connection pool size to the engine.")
    reap_on_start: bool = Field(True, description="Reap orphaned containers when starting.")
    images: ImageCacheConfig = Field(
        default_factory=ImageCacheConfig,
        description="Image archives, registry mirror, cache bound and pre-loading.",
    )

    def build(self, metrics: EnvironmentMetrics | None = None) -> Runtime:
        from megaflow.environment.container import ContainerRuntime

        return ContainerRuntime(self, metrics=metrics)


class KubernetesRuntimeConfig(_Cfg):
    """Pods in a Kubernetes namespace, through the official client (``docs/kubernetes.md``)."""

    type: Literal["kubernetes"] = "kubernetes"
    namespace: str = Field(
        "megaflow",
        pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
        description="Namespace the sandbox pods and their runs' owner objects live in.",
    )
    label: str = Field(
        "megaflow",
        pattern=r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$",
        description="Value of the megaflow.io/owner label on all this runtime makes, and "
        "the pod name prefix; list and reap see only pods carrying it.",
    )
    kubeconfig: str | None = Field(
        None,
        description="kubeconfig file; None uses the pod's service account inside a cluster, "
        "else $KUBECONFIG or ~/.kube/config.",
    )
    context: str | None = Field(None, description="kubeconfig context; None: its current one.")
    host_image: str | None = Field(
        None, description="Image used for specs asking for 'host'; None makes them an error."
    )
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    image_pull_secrets: list[str] = Field(
        default_factory=list, description="Secrets (in the namespace) for private registries."
    )
    service_account: str | None = Field(
        None,
        description="Service account of the sandbox pods (its token is never mounted); "
        "None: the namespace's default.",
    )
    run_as_user: int | None = Field(
        1000,
        ge=1,
        description="Uid the sandbox runs as (non-root, no privilege escalation); None runs "
        "as the image's user, for images whose tasks need root.",
    )
    workspace: Literal["volume", "image"] = Field(
        "volume",
        description="'volume': the workdir is an emptyDir (writable by run_as_user, sized by "
        "disk_mb, empty at start); 'image': the image's own workdir, for images that carry "
        "their repository there (it must be writable by run_as_user).",
    )
    seccomp_profiles: str | None = Field(
        "megaflow",
        pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$",
        description="Folder under each node's kubelet seccomp root (/var/lib/kubelet/seccomp) "
        "holding the sandboxes' seccomp profiles, none.json and loopback.json (`megaflow "
        "sandbox seccomp-profile`); pods name them as Localhost profiles. None: the "
        "RuntimeDefault profile, which may let a root process make user namespaces and mount.",
    )
    runtime_class: str | None = Field(
        None, description="RuntimeClass of the sandbox pods (gVisor, Kata); None: the default."
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels a sandbox pod must match."
    )
    request_share: float = Field(
        1.0,
        gt=0,
        le=1,
        description="CPU and memory requests as a share of the limits (1: Guaranteed QoS).",
    )
    deadline_grace_s: float = Field(
        300.0,
        ge=0,
        description="activeDeadlineSeconds is the spec's ttl_s plus this, a backstop behind "
        "the reaper (which removes a pod at its ttl_s) when no runtime is left to reap.",
    )
    api_timeout_s: float = Field(30.0, gt=0, description="Timeout of one API call.")
    start_timeout_s: float = Field(
        300.0, gt=0, description="Longest wait for a pod to run (image pull included)."
    )
    setup_timeout_s: float = Field(600.0, gt=0, description="Longest wait for each setup command.")
    max_transfer_mb: int = Field(
        512, ge=1, description="Largest download (tar over exec) from a sandbox, MiB."
    )
    max_connections: int = Field(
        64, ge=1, description="Threads for blocking client calls and exec streams."
    )
    reap_on_start: bool = Field(True, description="Reap stale pods when the runtime starts.")
    reap_interval_s: float | None = Field(
        60.0, gt=0, description="How often stale pods are reaped while running; None: never."
    )

    def build(self, metrics: EnvironmentMetrics | None = None) -> Runtime:
        from megaflow.environment.kubernetes import KubernetesRuntime

        return KubernetesRuntime(self, metrics=metrics)


class DummyRuntimeConfig(_Cfg):
    """In-memory sandboxes for tests of logic elsewhere; runs nothing."""

    type: Literal["dummy"] = "dummy"

    def build(self, metrics: EnvironmentMetrics | None = None) -> Runtime:
        from megaflow.environment.dummy import DummyRuntime

        return DummyRuntime()


RuntimeConfig = Annotated[
    LocalRuntimeConfig | ContainerRuntimeConfig | KubernetesRuntimeConfig | DummyRuntimeConfig,
    Field(discriminator="type"),
]


class PoolConfig(_Cfg):
    min: int = Field(0, ge=0, description="Sandboxes kept per spec (persistent mode).")
    max: int = Field(64, ge=1, description="Most sandboxes per spec (persistent mode).")
    warm_share: float = Field(0.2, ge=0, le=1, description="Spare started sandboxes, as a share.")
    refill_per_s: float = Field(
        20.0, gt=0, description="Most sandbox starts per second when refilling spares."
    )


class EnvironmentConfig(_Cfg):
    runtime: RuntimeConfig = Field(default_factory=LocalRuntimeConfig)
    mode: Literal["ephemeral", "persistent"] = "ephemeral"
    pool: PoolConfig = Field(default_factory=PoolConfig)
    image: str = Field("host", description="'host', a rootfs directory or tarball, or an image.")
    network: Literal["none", "loopback", "host"] = "none"
    cpus: float = Field(1.0, gt=0, le=1024)
    memory_mb: int = Field(1024, gt=0)
    pids: int = Field(256, ge=8, le=1_000_000)

    def spec(self, **fields: Any) -> EnvironmentSpec:
        """An EnvironmentSpec with this config's image, network and limits;
        ``fields`` (files, repo, setup, env, ttl_s...) add the task's part."""
        resources = SandboxResources(cpus=self.cpus, memory_mb=self.memory_mb, pids=self.pids)
        base: dict[str, Any] = {
            "image": self.image, "network": self.network, "resources": resources,
        }  # fmt: skip
        return EnvironmentSpec(**{**base, **fields})
