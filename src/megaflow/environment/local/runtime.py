"""The ``local`` runtime: each sandbox is one long-lived bubblewrap process.

``create`` makes the sandbox's directories and cgroups, starts bubblewrap
(new user, pid, ipc, uts and, unless ``network: host``, net namespaces) with
the exec server inside, places files and the repository, runs the setup
commands and snapshots the writable state for later resets. At most
``max_starting`` sandboxes start at once; the others wait before their start
timeout begins.

bubblewrap starts as an unprivileged host uid (:mod:`.spawn`, :mod:`.userns`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from megaflow.core.errors import MegaFlowError, SandboxStartError
from megaflow.environment.abstract import EnvironmentSpec, Runtime, SandboxInfo
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.local import cgroups, launcher, seccomp, spawn, userns, workspace
from megaflow.environment.local.images import ImageCache
from megaflow.environment.local.limits import check_spec, mem_total
from megaflow.environment.local.reaper import Reaper
from megaflow.environment.local.records import SandboxRecord, make_sandbox_dir, process_key
from megaflow.environment.local.sandbox import LocalSandbox
from megaflow.environment.local.staging import Staging
from megaflow.monitoring.environment import EnvironmentMetrics

log = logging.getLogger(__name__)


def _checkout_of(path: Path) -> Path | None:
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


T = TypeVar("T")


async def _finished(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a worker thread, off the event loop. Cancelled meanwhile,
    it still waits for the thread, so a teardown that follows sees everything
    ``fn`` made (a cgroup, a directory) and removes it."""
    work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await work
        raise


class LocalRuntime(Runtime):
    name = "local"

    def __init__(
        self, cfg: LocalRuntimeConfig | None = None, metrics: EnvironmentMetrics | None = None
    ) -> None:
        self.cfg = cfg or LocalRuntimeConfig()
        self.metrics = metrics
        self.root = Path(self.cfg.root).absolute()
        self.images = ImageCache(self.root / "images", self.cfg.image_cache_mb * 1024 * 1024)
        self.sandboxes: dict[str, LocalSandbox] = {}
        self.layout: cgroups.CgroupLayout | None = None
        self.process = process_key()
        self.hide: list[Path] = []
        self._bwrap = ""
        self._server: launcher.ServerPayload | None = None
        self._started = False
        self._reap_task: asyncio.Task[None] | None = None
        self.reaped_at_start = 0
        self.swept = 0
        self.pending_groups: list[Path] = []
        """Groups of torn-down sandboxes the kernel still held; each reap retries them."""
        """Stray sandbox processes of dead makers the reaper's marker sweep killed so far."""
        self._stopped = False
        self._binds: dict[Path, list[str]] = {}
        self.ids: userns.IdMap | None = None
        self.staging: Staging | None = None
        self._filters: dict[str, bytes] = {}
        self._mem_total = 0
        self._host_paths: list[tuple[Path, Path]] = []
        self._as_user: list[str] = []
        # A start needs the cores (the exec server's boot) and the kernel's mount lock
        # (bubblewrap's 54 mount calls); a thousand at once only made each one slower,
        # past its start timeout.
        self._starting = asyncio.Semaphore(self.cfg.max_starting or 32 * (os.cpu_count() or 1))

    @property
    def sandbox_root(self) -> Path:
        return self.root / "boxes"

    async def start(self) -> None:
        if self._started:
            return
        self._stopped = False
        self._bwrap = launcher.find_bwrap()
        self.layout = cgroups.detect(self.cfg.cgroups)
        self.ids = userns.id_map(self.cfg.uid_base)
        self._as_user = [] if self.ids.run_as is None else launcher.as_user(*self.ids.run_as)
        if self.cfg.seccomp:
            self._filters = {net: seccomp.build(net) for net in ("none", "loopback", "host")}
        for path in self.cfg.host_paths:
            if not path.startswith("/"):
                raise SandboxStartError(f"host_paths entry {path!r} is not an absolute path")
        for own in (self.root, self.sandbox_root, self.images.root):
            own.mkdir(mode=0o711, parents=True, exist_ok=True)
            own.chmod(0o711)  # traversable by bubblewrap's uid, not listable
        self._server = self._server or await asyncio.to_thread(launcher.server_payload)
        self._mem_total = mem_total()  # read once: every create checks against it
        staging = self.staging = Staging(self.root, self.process, self.ids)
        await asyncio.to_thread(staging.start)  # root: bubblewrap's uid may not reach root
        self._host_paths = [
            await asyncio.to_thread(staging.source, Path(p)) for p in self.cfg.host_paths
        ]
        hide = [Path(p) for p in self.cfg.hide] + [self.root]
        checkout = _checkout_of(Path.cwd()) if self.cfg.hide_checkout else None
        self.hide = [*hide, *([checkout] if checkout else [])]
        self._started = True
        self.reaped_at_start = await self.reap_orphans()
        self._reap_task = asyncio.get_running_loop().create_task(self._reap_loop())

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.reap_interval_s)
            await self.reap_orphans()
            await self.collect_stats()

    async def collect_stats(self) -> None:
        """Publish every live sandbox's CPU and memory to the metrics."""
        if self.metrics is None:
            return
        for sb in list(self.sandboxes.values()):
            if sb.info.state in ("ready", "busy"):
                st = await sb.stats()
                self.metrics.sandbox_usage(self.name, sb.id, st.cpu_seconds, st.memory_bytes)

    async def stop(self) -> None:
        if self._reap_task is not None:
            self._reap_task.cancel()
            try:
                await self._reap_task
            except asyncio.CancelledError:
                pass
            self._reap_task = None
        await asyncio.gather(*(sb.teardown() for sb in list(self.sandboxes.values())))
        if self.pending_groups:  # the last chance in this process; then a later one's reaper
            left = await asyncio.to_thread(cgroups.remove_groups, self.pending_groups)
            self.pending_groups = left
            if left:
                log.warning("%d cgroups are still held by the kernel; the next MegaFlow "
                            "process on this host removes them", len(left))  # fmt: skip
        if self.layout is not None:  # other runtimes of this process may still use it
            for base in self.layout.bases():
                with contextlib.suppress(OSError):
                    (base / self.process).rmdir()
        if self.staging is not None:
            await asyncio.to_thread(self.staging.stop)
        self._started = False
        self._stopped = True

    async def create(self, spec: EnvironmentSpec, owner: str | None = None) -> LocalSandbox:
        if self._stopped:  # e.g. a pool still refilling after the runtime stopped
            raise SandboxStartError("the local runtime is stopped; call start() again first")
        if not self._started:
            await self.start()
        check_spec(spec, self._mem_total or mem_total())
        t0 = time.perf_counter()
        sid = uuid.uuid4().hex[:12]
        now = time.time()
        info = SandboxInfo(
            id=sid, runtime=self.name, state="starting", owner=owner,
            created_at=now, deadline=now + spec.ttl_s, image=spec.image,
        )  # fmt: skip
        directory = self.sandbox_root / sid
        base_env = {**launcher.default_env(spec.workdir), **spec.env}
        sb = LocalSandbox(info, spec, directory, base_env, self.metrics, self._gone)
        sb.max_frame = self.cfg.max_frame_mb << 20
        if self.metrics is not None:
            self.metrics.moved(self.name, None, "starting")
        self.sandboxes[sid] = sb
        try:
            async with self._starting:
                await self._launch(sb, spec)
            for command in spec.setup:
                result = await sb.exec(command, timeout=self.cfg.setup_timeout_s)
                if not result.ok:
                    raise SandboxStartError(
                        f"setup command {command!r} failed with exit code {result.exit_code}"
                        f"{' (timed out)' if result.timed_out else ''}: {result.stderr[-2000:]}"
                    )
            if spec.files or spec.repo or spec.setup:  # else rw is empty: nothing to copy
                await asyncio.to_thread(workspace.snapshot, directory)
        except BaseException as e:
            if self.metrics is not None:
                self.metrics.failed(self.name, "start")
            await asyncio.shield(sb.teardown())
            if isinstance(e, MegaFlowError | asyncio.CancelledError):
                raise
            raise SandboxStartError(f"cannot start a local sandbox ({spec.image}): {e}") from e
        sb.set_state("ready")
        if self.metrics is not None:
            self.metrics.start_seconds.labels(self.name, "cold").observe(time.perf_counter() - t0)
        return sb

    async def _launch(self, sb: LocalSandbox, spec: EnvironmentSpec) -> None:
        assert self._server is not None, "start() first"
        assert self.ids is not None
        assert self.staging is not None
        staging = self.staging
        directory = sb.dir
        owner = (self.ids.agent_uid, self.ids.agent_gid)
        disk = spec.resources.disk_mb
        record = SandboxRecord(
            id=sb.id, owner=sb.info.owner, deadline=sb.info.deadline,
            created_at=sb.info.created_at, image=spec.image, process=self.process,
        )  # fmt: skip
        rw = await _finished(self._make_dirs, directory, owner, disk, record)
        if disk is not None:
            sb.mounts.append(rw)
            if staging.stage is not None:  # the tmpfs is not in the staged view by itself
                await asyncio.to_thread(userns.bind, rw, staging.seen(rw))
                sb.mounts.insert(0, staging.seen(rw))
        if spec.image == "host":
            image_root: Path = Path("/")
        else:
            t_img = time.perf_counter()
            image_root, sb.image_key = await asyncio.to_thread(self.images.resolve, spec.image)
            if self.metrics is not None and time.perf_counter() - t_img > 0.05:
                self.metrics.image_load_seconds.labels(self.name).observe(
                    time.perf_counter() - t_img
                )
        await _finished(self._fill, sb, rw, spec, owner, record)
        plan = launcher.LaunchPlan(
            image_root=image_root, rw_dir=staging.seen(rw), workdir=spec.workdir,
            network=spec.network, hide=self.hide, payload=self._server,
            host_paths=self._host_paths,
            max_frame=self.cfg.max_frame_mb << 20,
        )  # fmt: skip
        plan.view = await asyncio.to_thread(
            staging.view, image_root, spec.workdir, launcher.view_args(plan)
        )
        if plan.view is None and image_root != Path("/") and image_root not in self._binds:
            plan.image_source = (await asyncio.to_thread(staging.source, image_root))[1]
        if plan.view is None and image_root not in self._binds:  # top level rarely changes
            self._binds[image_root] = launcher.root_binds(plan)
        plan.root_binds = self._binds.get(image_root)
        assert self._server is not None
        assert self.ids is not None
        how = spawn.How(
            self._bwrap, self._as_user, self.ids, self._filters.get(spec.network),
            self._server.data, self.cfg.start_timeout_s,
        )  # fmt: skip
        await spawn.start(sb, plan, record, how)

    @staticmethod
    def _make_dirs(
        directory: Path, owner: workspace.Owner, disk_mb: int | None, record: SandboxRecord
    ) -> Path:
        """Blocking: the sandbox's directory, made with its record in it (saved
        again once bubblewrap runs), then its subdirectories: a crash while the
        sandbox starts leaves a directory whose maker the reaper knows."""
        make_sandbox_dir(directory, record)
        rw = workspace.make_dirs(directory, owner, None if disk_mb is None else disk_mb << 20)
        return rw

    def _fill(
        self,
        sb: LocalSandbox,
        rw: Path,
        spec: EnvironmentSpec,
        owner: workspace.Owner,
        record: SandboxRecord,
    ) -> None:
        """Blocking: the workspace's repository and files, then the cgroups."""
        if spec.files or spec.repo:
            if spec.repo:
                workspace.place_repo(rw, spec.repo, owner)
            workspace.place_files(rw, spec.files, owner)
        if self.layout is not None:
            sb.cgroup = self.layout.create(self.process, sb.id, spec.resources)
            record.cgroups = [str(p) for p in sb.cgroup.paths()]

    def _gone(self, sb: LocalSandbox) -> None:
        self.sandboxes.pop(sb.id, None)
        if sb.left_groups:  # its processes are killed; the kernel has not let a group go yet
            self.pending_groups += sb.left_groups
            if self.metrics is not None:
                self.metrics.failures.labels(self.name, "cgroup_deferred").inc()
        self.images.release(sb.image_key)
        sb.image_key = None

    async def get(self, sandbox_id: str) -> LocalSandbox | None:
        return self.sandboxes.get(sandbox_id)

    async def list(self) -> list[SandboxInfo]:
        return [sb.info.model_copy() for sb in self.sandboxes.values()]

    async def destroy(self, sandbox_id: str) -> None:
        sb = self.sandboxes.get(sandbox_id)
        if sb is not None:
            await sb.teardown()

    async def reap_orphans(self) -> int:
        """Destroy this runtime's sandboxes past their deadline, and remove what a
        dead MegaFlow process left behind: processes, cgroups, directories."""
        now = time.time()
        expired = [sb for sb in self.sandboxes.values() if sb.info.deadline < now]
        for sb in expired:
            await sb.teardown()
        if self.metrics is not None and expired:
            self.metrics.failures.labels(self.name, "reaped").inc(len(expired))
        live = {sb.id for sb in self.sandboxes.values()}
        reaper = Reaper(self.sandbox_root, self.layout, self.process)
        pending = list(self.pending_groups)  # kept whole if this is cancelled meanwhile
        orphans = await asyncio.to_thread(reaper.reap, live, pending)
        self.pending_groups = [p for p in self.pending_groups if p not in pending] + reaper.left
        self.swept += reaper.swept
        return len(expired) + orphans

    def remove_all_images(self) -> None:
        """Empty the image cache (for ``sandbox gc --images``)."""
        shutil.rmtree(self.images.root, ignore_errors=True)
