"""An in-memory runtime that runs nothing, for tests of logic elsewhere.

Sandboxes keep files in a dict. ``exec`` answers from a queue of scripted
results, then from a ``responder`` callable, else with a tiny built-in
interpreter (``echo``, ``cat FILE``, ``true``, ``false``, ``exit N``) that is
enough for scheduler and agent tests. Every command is recorded in
``sandbox.commands``.
"""

from __future__ import annotations

import io
import posixpath
import re
import shlex
import tarfile
import time
import uuid
from collections import deque
from collections.abc import Callable

from megaflow.core.errors import NotFound, SandboxError
from megaflow.environment.abstract import (
    DEFAULT_OUTPUT_CAP,
    EnvironmentSpec,
    ExecResult,
    Runtime,
    Sandbox,
    SandboxInfo,
    SandboxStats,
)

Responder = Callable[[str], ExecResult | None]

_SHLEX_SPECIAL = re.compile(r"['\"\\#]|[^\S \t\r\n]")
"""What ``shlex.split`` treats otherwise than ``str.split``: quotes, the escape, the
comment sign, and whitespace other than the four it splits on."""


def split_words(command: str) -> list[str]:
    """``shlex.split(command)``; a command without quotes, escapes or comments is
    split by ``str.split``, with the same words at a twentieth of the cost (the
    rollout benchmark's control-plane side runs five commands an episode here)."""
    if _SHLEX_SPECIAL.search(command) is None:
        return command.split()
    return shlex.split(command)


def _builtin(command: str, files: dict[str, bytes], workdir: str) -> ExecResult:
    try:
        words = split_words(command)
    except ValueError:
        return ExecResult(exit_code=2, stderr="syntax error\n")
    if not words or words[0] == "true":
        return ExecResult(exit_code=0)
    if words[0] == "false":
        return ExecResult(exit_code=1)
    if words[0] == "exit":
        return ExecResult(exit_code=int(words[1]) if len(words) > 1 else 0)
    if words[0] == "echo":
        return ExecResult(exit_code=0, stdout=" ".join(words[1:]) + "\n")
    if words[0] == "cat" and len(words) == 2:
        path = posixpath.normpath(posixpath.join(workdir, words[1]))
        if path in files:
            return ExecResult(exit_code=0, stdout=files[path].decode(errors="replace"))
        return ExecResult(exit_code=1, stderr=f"cat: {words[1]}: No such file or directory\n")
    return ExecResult(exit_code=0)


class DummySandbox(Sandbox):
    def __init__(self, info: SandboxInfo, spec: EnvironmentSpec, runtime: DummyRuntime) -> None:
        self.info = info
        self.spec = spec
        self.runtime = runtime
        self.files: dict[str, bytes] = {self._path(k): v.encode() for k, v in spec.files.items()}
        self._snapshot = dict(self.files)
        self.commands: list[str] = []
        self.destroyed = False

    def _alive(self) -> None:
        if self.destroyed:
            raise SandboxError(f"sandbox {self.id} is destroyed")

    async def exec(
        self,
        command: str | list[str],
        timeout: float | None = 60.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        self._alive()
        text = command if isinstance(command, str) else shlex.join(command)
        self.commands.append(text)
        t0 = time.perf_counter()
        result: ExecResult | None = None
        if self.runtime.script:
            result = self.runtime.script.popleft()
        elif self.runtime.responder is not None:
            result = self.runtime.responder(text)
        if result is None:
            result = _builtin(text, self.files, self._path(cwd or "."))
        out, err = result.stdout.encode(), result.stderr.encode()
        cut = len(out) > output_cap or len(err) > output_cap
        return result.model_copy(
            update={
                "stdout": out[:output_cap].decode(errors="replace"),
                "stderr": err[:output_cap].decode(errors="replace"),
                "truncated": result.truncated or cut,
                "duration_s": result.duration_s or time.perf_counter() - t0,
            }
        )

    async def read_file(self, path: str) -> bytes:
        self._alive()
        try:
            return self.files[self._path(path)]
        except KeyError:
            raise NotFound(f"sandbox {self.id}: no such file {path!r}") from None

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self._alive()
        self.files[self._path(path)] = bytes(data)

    async def upload(self, tar_stream: bytes, dest: str) -> None:
        self._alive()
        with tarfile.open(fileobj=io.BytesIO(tar_stream)) as tar:
            for m in tar.getmembers():
                f = tar.extractfile(m) if m.isfile() else None
                if f is not None:
                    self.files[self._path(posixpath.join(dest, m.name))] = f.read()

    async def download(self, path: str) -> bytes:
        self._alive()
        root = self._path(path)
        chosen = {k: v for k, v in self.files.items() if k == root or k.startswith(root + "/")}
        if not chosen:
            raise NotFound(f"sandbox {self.id}: no such file {path!r}")
        out = io.BytesIO()
        base = posixpath.dirname(root)
        with tarfile.open(fileobj=out, mode="w") as tar:
            for name, data in sorted(chosen.items()):
                ti = tarfile.TarInfo(posixpath.relpath(name, base))
                ti.size = len(data)
                tar.addfile(ti, io.BytesIO(data))
        return out.getvalue()

    async def reset(self) -> None:
        self._alive()
        self.files = dict(self._snapshot)

    async def kill_processes(self) -> None:
        self._alive()  # runs nothing, so nothing to kill

    async def stats(self) -> SandboxStats:
        self._alive()
        return SandboxStats(pids=1)

    async def destroy(self) -> None:
        await self.runtime.destroy(self.id)


class DummyRuntime(Runtime):
    """``script``: results returned by the next execs, in order, before ``responder``."""

    name = "dummy"

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self.script: deque[ExecResult] = deque()
        self.sandboxes: dict[str, DummySandbox] = {}
        self.created = 0

    async def create(self, spec: EnvironmentSpec, owner: str | None = None) -> DummySandbox:
        now = time.time()
        info = SandboxInfo(
            id=uuid.uuid4().hex[:12], runtime=self.name, owner=owner,
            created_at=now, deadline=now + spec.ttl_s, image=spec.image,
        )  # fmt: skip
        sb = DummySandbox(info, spec, self)
        for command in spec.setup:
            await sb.exec(command)
        sb._snapshot = dict(sb.files)
        self.sandboxes[info.id] = sb
        self.created += 1
        return sb

    async def list(self) -> list[SandboxInfo]:
        return [sb.info.model_copy() for sb in self.sandboxes.values()]

    async def destroy(self, sandbox_id: str) -> None:
        sb = self.sandboxes.pop(sandbox_id, None)
        if sb is not None:
            sb.destroyed = True
            sb.info.state = "stopped"

    async def reap_orphans(self) -> int:
        now = time.time()
        expired = [sid for sid, sb in self.sandboxes.items() if sb.info.deadline < now]
        for sid in expired:
            await self.destroy(sid)
        return len(expired)
