"""The ``script`` grader: a verifier script against the agent's final files.

Harbor's way of grading, with the agent kept out of the verifier's reach:

* ``take`` kills every process of the agent's sandbox (the sandbox's own
  kill, through its cgroup or pid namespace), then copies out its workdir as
  a tar, capped; nothing else of that sandbox is kept, and none of its
  processes outlives it;
* ``grade`` starts a **fresh** sandbox of the task's image, empties its
  workdir and unpacks the agent's files there (as the agent's user: uploads
  run with the agent's ids), writes the task's tests to ``tests_dir`` and
  only then makes ``reward_dir`` anew, empty. The verifier (``test.sh``)
  runs as the agent's user too, so code of the agent's it runs has no more
  rights than the agent had; what it left running is killed before the
  reward is read.

The reward is ``reward.json`` (a number, or named numbers: their ``reward``,
or their mean) or ``reward.txt`` (a number), read from ``reward_dir`` of the
verifier's sandbox: a file the agent planted in its own sandbox never
reaches it (:func:`verify` with ``clear=False`` in the agent's sandbox is
what grading in place would give). No reward file, an unreadable one, or a
verifier that timed out is reward 0 with the reason. A read of the reward
whose output the engine lost is tried again, then raised as a sandbox error
(infrastructure, retried), never read as reward 0. A Harbor task's sandboxes
get their own loopback when the run's network is ``none`` (as Docker's network
none keeps ``lo``): tasks that serve on 127.0.0.1 can be graded.
"""

from __future__ import annotations

import json
import posixpath
import shlex
import time

from megaflow.core.errors import NotFound, SandboxError, SandboxFileError
from megaflow.core.tasks import TaskSpec
from megaflow.core.trajectory import Trajectory
from megaflow.datasets.harbor import HarborTask, harbor_of
from megaflow.environment.abstract import EnvironmentSpec, Sandbox, SandboxResources
from megaflow.grading.abstract import FreshSandbox, Taken, Verdict
from megaflow.grading.config import ScriptGraderConfig
from megaflow.grading.reward import clamp, combined

OUTPUT_TAIL = 20_000
REWARD_CAP = 64 * 1024
READ_TRIES = 3
_BEGIN, _END = "<megaflow-read>", "</megaflow-read>"


def _task(task: TaskSpec) -> HarborTask:
    harbor = harbor_of(task.payload)
    if harbor is None:
        raise ValueError(f"task {task.id!r} carries no verifier (megaflow_harbor) to grade with")
    return harbor


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class ScriptGrader:
    def __init__(self, cfg: ScriptGraderConfig) -> None:
        self.cfg = cfg

    def grades(self, task: TaskSpec) -> bool:
        return isinstance(task.payload.get("megaflow_harbor"), dict)

    def sandbox_spec(self, task: TaskSpec, base: EnvironmentSpec) -> EnvironmentSpec:
        harbor = _task(task)
        resources = SandboxResources(
            cpus=harbor.cpus, memory_mb=harbor.memory_mb, pids=base.resources.pids,
            disk_mb=harbor.storage_mb if base.resources.disk_mb is not None else None,
        )  # fmt: skip
        # allow_internet grants nothing: the network is the run's (environment.network),
        # but a Harbor task always has its own loopback (Docker's network none keeps lo,
        # and tasks serve on 127.0.0.1); ours refuses IP sockets, so it is raised to it
        network = "loopback" if base.network == "none" else base.network
        update = {
            "image": harbor.image or base.image,
            "workdir": harbor.workdir,
            "network": network,
        }
        return base.model_copy(update={**update, "resources": resources})

    def attempt(self, task: TaskSpec, spec: EnvironmentSpec, fresh: FreshSandbox) -> ScriptAttempt:
        return ScriptAttempt(self.cfg, _task(task), fresh)


class ScriptAttempt:
    def __init__(self, cfg: ScriptGraderConfig, task: HarborTask, fresh: FreshSandbox) -> None:
        self.cfg, self.task, self.fresh = cfg, task, fresh
        self.times: dict[str, float] = {}

    async def __aenter__(self) -> ScriptAttempt:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self, sandbox: Sandbox) -> None:
        """Nothing: the task's image holds the task."""

    async def take(self, sandbox: Sandbox, trajectory: Trajectory) -> Taken:
        await sandbox.kill_processes()
        cap = self.cfg.max_state_mb << 20
        size = await sandbox.exec(["du", "-sk", self.task.workdir], timeout=120)
        try:
            kb = int(size.stdout.split()[0])
        except (IndexError, ValueError):
            kb = 0
        if kb * 1024 > cap:
            return Taken(
                b"", "state.tar", f"the agent's files are {kb} KiB; the limit is {cap >> 10}"
            )
        try:
            data = await sandbox.download(self.task.workdir)
        except (NotFound, SandboxFileError) as exc:
            return Taken(b"", "state.tar", f"cannot take the agent's files: {exc}")
        if len(data) > cap:
            return Taken(b"", "state.tar", f"the agent's files are {len(data)} bytes as a tar")
        return Taken(data, "state.tar")

    async def grade(self, taken: Taken) -> Verdict:
        if taken.error is not None:
            return Verdict(grader="script", error=taken.error)
        t0 = time.perf_counter()
        async with self.fresh() as sandbox:
            self.times["grade_sandbox_start_s"] = time.perf_counter() - t0
            return await verify(sandbox, self.task, self.cfg, state=taken.data)


async def verify(
    sandbox: Sandbox,
    task: HarborTask,
    cfg: ScriptGraderConfig,
    state: bytes | None = None,
    clear: bool = True,
) -> Verdict:
    """Run ``task``'s verifier in ``sandbox`` and read its reward. ``state``: the
    agent's workdir as a tar, put in place of the image's. ``clear`` makes the
    reward folder anew right before the verifier starts (off: grading in place,
    as in the agent's own sandbox, which trusts whatever is already there)."""
    t0 = time.monotonic()
    workdir, tests, rewards = task.workdir, cfg.tests_dir, cfg.reward_dir
    for folder in (tests, rewards):
        if _inside(folder, workdir) or _inside(workdir, folder):
            return Verdict(grader="script", error=f"{folder} overlaps the workdir {workdir}")
    if state is not None:
        empty = f"cd {shlex.quote(workdir)} && rm -rf -- * .[!.]* ..?*"
        await _checked(sandbox, empty, "workdir")
        await sandbox.upload(state, posixpath.dirname(workdir.rstrip("/")) or "/")
    await _checked(
        sandbox, f"rm -rf {shlex.quote(tests)} && mkdir -p {shlex.quote(tests)}", "tests"
    )
    for rel, text in task.tests.items():
        await sandbox.write_file(posixpath.join(tests, rel), text.encode(), mode=0o755)
    if clear:
        q = shlex.quote(rewards)
        await _checked(sandbox, f"rm -rf {q} && mkdir -p {q}", "reward folder")
    script = shlex.quote(posixpath.join(tests, "test.sh"))
    timeout = cfg.timeout_s or task.verifier_timeout_s
    res = await sandbox.exec(
        f"if command -v bash >/dev/null 2>&1; then exec bash {script}; else exec sh {script}; fi",
        timeout=timeout, cwd=workdir,
    )  # fmt: skip
    await sandbox.kill_processes()  # nothing the verifier left writes after this
    verdict = await _read_reward(sandbox, rewards)
    verdict.exit_code = res.exit_code
    verdict.output = (res.stdout + res.stderr)[-OUTPUT_TAIL:]
    if res.timed_out:
        verdict.reward, verdict.resolved = 0.0, False
        verdict.error = f"the verifier ran past {timeout:g} s and was killed"
    verdict.duration_s = time.monotonic() - t0
    return verdict


async def _checked(sandbox: Sandbox, command: str, what: str) -> None:
    res = await sandbox.exec(command, timeout=120)
    if not res.ok:
        raise SandboxFileError(f"verifier sandbox: cannot set up the {what}: {res.stderr[-300:]}")


async def _read(sandbox: Sandbox, path: str) -> str | None:
    """The file's first bytes, read without following a link; None when absent.

    The output is framed by marks before and after: an engine can lose an exec's
    output and still report exit 0 (seen about once in 300 reads on a loaded
    Podman), which unframed would read as an empty reward file, a 0 blamed on the
    agent. A read without both marks is tried again, then is the sandbox's failure
    (infrastructure, retried), never a reward."""
    q = shlex.quote(path)
    command = (
        f"printf '{_BEGIN}'; if [ -f {q} ] && [ ! -L {q} ]; then head -c {REWARD_CAP} {q} "
        f"&& printf '{_END}1' || printf '{_END}0'; else printf '{_END}0'; fi"
    )
    cap = REWARD_CAP + len(_BEGIN) + len(_END) + 1
    for _ in range(READ_TRIES):
        res = await sandbox.exec(command, timeout=30, output_cap=cap)
        out = res.stdout
        if out.startswith(_BEGIN) and out[-len(_END) - 1 : -1] == _END:
            return out[len(_BEGIN) : -len(_END) - 1] if out.endswith("1") else None
    raise SandboxError(
        f"verifier sandbox: reading {path} lost its output {READ_TRIES} times "
        f"(exit {res.exit_code}, {len(out)} bytes): the engine's fault, not the agent's"
    )


async def _read_reward(sandbox: Sandbox, folder: str) -> Verdict:
    raw = await _read(sandbox, posixpath.join(folder, "reward.json"))
    if raw is not None:
        try:
            value = json.loads(raw)
        except ValueError:
            return Verdict(grader="script", error="reward.json is not JSON")
        if isinstance(value, dict):
            named = {str(k): clamp(v) for k, v in value.items()}
            if (
                not named
                or len(named) != len(value)
                or any(
                    isinstance(v, bool) or not isinstance(v, int | float) for v in value.values()
                )
            ):
                return Verdict(grader="script", error="reward.json must hold named numbers")
            return _verdict(combined(named), named)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return _verdict(clamp(value), {})
        return Verdict(grader="script", error="reward.json holds neither a number nor names")
    raw = await _read(sandbox, posixpath.join(folder, "reward.txt"))
    if raw is None:
        return Verdict(grader="script", error="the verifier wrote no reward.txt or reward.json")
    try:
        return _verdict(clamp(float(raw.strip())), {})
    except ValueError:
        return Verdict(grader="script", error=f"reward.txt is not a number: {raw[:80]!r}")


def _verdict(reward: float, named: dict[str, float]) -> Verdict:
    return Verdict(grader="script", reward=reward, rewards=named, resolved=reward >= 1.0)
