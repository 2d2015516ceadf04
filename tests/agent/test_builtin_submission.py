"""The builtin agent's submission: the work tree's diff inside a repository (found
upwards, as git finds it), nothing and no git process outside one."""

from __future__ import annotations

from typing import Any

from megaflow.agent.builtin import _diff, _in_repository
from megaflow.agent.tools import Toolbox
from megaflow.environment.abstract import EnvironmentSpec, ExecResult, Runtime, Sandbox


class Counting:
    """A sandbox that counts the commands run through it."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner
        self.commands: list[Any] = []

    async def exec(self, command: Any, **kw: Any) -> ExecResult:
        self.commands.append(command)
        return await self.inner.exec(command, **kw)

    async def read_file(self, path: str) -> bytes:
        return await self.inner.read_file(path)


def _tools(sandbox: Any, workdir: str) -> Toolbox:
    return Toolbox(sandbox, workdir, 30.0, 10_000)


async def test_outside_a_repository_nothing_is_run(local_runtime: Runtime) -> None:
    async with await local_runtime.create(EnvironmentSpec()) as sb:
        await sb.exec("mkdir -p /workspace/a && echo x > /workspace/a/f")
        counting = Counting(sb)
        assert await _diff(_tools(counting, "/workspace/a")) == ""
        assert counting.commands == []


async def test_a_repository_above_the_workdir_is_found_and_diffed(local_runtime: Runtime) -> None:
    async with await local_runtime.create(EnvironmentSpec()) as sb:
        setup = (
            "cd /workspace && git init -q r && cd r && mkdir sub && echo old > sub/f && "
            "git add . && git -c user.email=a@b -c user.name=a commit -qm base && echo new > sub/f"
        )
        assert (await sb.exec(setup)).exit_code == 0
        assert await _in_repository(sb, "/workspace/r/sub/")
        diff = await _diff(_tools(sb, "/workspace/r/sub"))
        assert "-old" in diff
        assert "+new" in diff


async def test_a_git_file_counts_as_a_repository(local_runtime: Runtime) -> None:
    async with await local_runtime.create(EnvironmentSpec()) as sb:
        await sb.exec("mkdir -p /workspace/w && echo 'gitdir: /elsewhere' > /workspace/w/.git")
        assert await _in_repository(sb, "/workspace/w")
        assert not await _in_repository(sb, "/workspace")
