"""The builtin agent: a tool-calling loop (bash, read_file, edit, write_file, submit).

Each step asks the model for the next action with the tools offered as
OpenAI function tools, runs the tool calls in the sandbox, and answers each
with a ``tool`` message. The episode ends when the model calls ``submit``, or
at the step, token or time limit (those are normal ends, graded like any
other). A malformed answer (no tool call, an unknown tool, arguments that are
not a JSON object) is answered with an error message and the loop goes on;
``max_format_errors`` of them in a row end the episode with AgentError.

A task may set its own sampling temperature in its payload
(``megaflow_sampling: {temperature: T}``); it overrides the agent's. The
held-out rounds of ``megaflow train`` use it for ``train.eval_temperature``.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
import time
from typing import Any

from megaflow.agent.abstract import Agent, ExitStatus, problem_statement
from megaflow.agent.config import BuiltinAgentConfig
from megaflow.agent.tools import TOOL_NAMES, TOOLS, Toolbox
from megaflow.core.errors import AgentError, MegaFlowError, NotFound
from megaflow.core.tasks import TaskSpec
from megaflow.core.trajectory import Action, Observation, Trajectory
from megaflow.environment.abstract import Sandbox
from megaflow.model.abstract import ModelClient

SYSTEM_PROMPT = """You are a software engineer fixing an issue in the repository at {workdir}.
Work with the tools: `bash` runs a shell command in the repository, `read_file` shows a file,
`edit` replaces one exact occurrence of a text in a file, `write_file` writes a whole file.
Find the cause, change the code, check your change, then call `submit`.
Call exactly the tools you need; every answer must contain at least one tool call."""


class BuiltinAgent(Agent):
    name = "builtin"

    def __init__(self, config: BuiltinAgentConfig | None = None) -> None:
        self.config = config or BuiltinAgentConfig()

    async def _run(
        self, task: TaskSpec, sandbox: Sandbox, model: ModelClient, traj: Trajectory
    ) -> ExitStatus:
        cfg = self.config
        system = (cfg.system_prompt or SYSTEM_PROMPT).format(workdir=cfg.workdir)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": problem_statement(task)},
        ]
        tools = Toolbox(sandbox, cfg.workdir, cfg.command_timeout_s, cfg.max_observation_chars)
        scope = asyncio.timeout(cfg.max_seconds)
        try:
            async with scope:
                return await self._loop(messages, tools, model, traj, self._params(task))
        except TimeoutError:
            if scope.expired():
                return "time_limit"
            raise

    def _params(self, task: TaskSpec) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.config.temperature is not None:
            params["temperature"] = self.config.temperature
        own = task.payload.get("megaflow_sampling")
        if isinstance(own, dict) and isinstance(own.get("temperature"), int | float):
            params["temperature"] = float(own["temperature"])
        if self.config.completion_tokens is not None:
            params["max_tokens"] = self.config.completion_tokens
        return params

    async def _loop(
        self,
        messages: list[dict[str, Any]],
        tools: Toolbox,
        model: ModelClient,
        traj: Trajectory,
        params: dict[str, Any],
    ) -> ExitStatus:
        cfg = self.config
        tokens = 0
        format_errors = 0
        for _ in range(cfg.max_steps):
            if tokens >= cfg.max_tokens:
                return "token_limit"
            out = await model.chat(messages, trajectory_id=traj.id, tools=TOOLS, **params)
            tokens += out.prompt_tokens + out.completion_tokens
            messages.append(_assistant(out.message))
            if not out.tool_calls:
                format_errors += 1
                messages.append(
                    {
                        "role": "user",
                        "content": "error: your answer has no tool call. Use a tool, "
                        "or call `submit` when you are done.",
                    }
                )
            else:
                submitted = False
                bad = 0
                for call in out.tool_calls:
                    reply, ok, done = await self._call(call, tools, traj)
                    messages.append(reply)
                    bad += 0 if ok else 1
                    submitted = submitted or done
                if submitted:
                    traj.meta["submission"] = await _diff(tools)
                    return "submitted"
                format_errors = format_errors + 1 if bad == len(out.tool_calls) else 0
            if format_errors >= cfg.max_format_errors:
                raise AgentError(
                    f"the model gave {format_errors} malformed answers in a row "
                    f"(trajectory {traj.id}); giving up"
                )
        return "step_limit"

    async def _call(
        self, call: dict[str, Any], tools: Toolbox, traj: Trajectory
    ) -> tuple[dict[str, Any], bool, bool]:
        """Run one tool call: (tool message, well formed, submitted)."""
        fn = call.get("function") or {}
        name = str(fn.get("name", ""))
        call_id = str(call.get("id") or "")
        error = None
        args: Any = {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError as exc:
            error = f"arguments are not valid JSON ({exc})"
        if error is None and not isinstance(args, dict):
            error = "arguments must be a JSON object"
        if error is None and name not in TOOL_NAMES:
            error = f"unknown tool {name!r}; use one of {', '.join(sorted(TOOL_NAMES))}"
        if error is not None:
            traj.add(Action(tool=name or "?", arguments={"raw": str(fn.get("arguments"))}))
            traj.add(Observation(content=f"error: {error}", exit_code=1))
            return _tool_msg(call_id, f"error: {error}"), False, False
        started = time.time()
        traj.add(Action(tool=name, arguments=args, started_at=started))
        obs = await tools.run(name, args)
        traj.steps[-1].duration_s = time.time() - started
        traj.add(obs)
        return _tool_msg(call_id, obs.content), True, name == "submit"


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    keep = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
    keep["role"] = "assistant"
    keep.setdefault("content", "")
    return keep


def _tool_msg(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


async def _diff(tools: Toolbox) -> str:
    """The work tree's ``git diff``; empty outside a repository (then no git runs:
    a process in the sandbox costs more than the few file reads that find out)."""
    if not await _in_repository(tools.sandbox, tools.workdir):
        return ""
    res = await tools.sandbox.exec(["git", "-C", tools.workdir, "diff"], timeout=60)
    return res.stdout if res.exit_code == 0 else ""


async def _in_repository(sandbox: Sandbox, workdir: str) -> bool:
    """Whether ``workdir`` or a folder above it has a ``.git`` (a folder, or the file of a
    worktree or submodule): git looks upwards the same way."""
    here = posixpath.normpath(workdir)
    while True:
        try:
            await sandbox.read_file(posixpath.join(here, ".git"))
            return True
        except NotFound:
            pass
        except MegaFlowError:  # there, but not a file: a folder
            return True
        if here == "/":
            return False
        here = posixpath.dirname(here)
