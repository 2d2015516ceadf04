"""The ``openhands`` adapter: the OpenHands software agent in a MegaFlow sandbox.

The OpenHands SDK (``openhands-sdk``, ``openhands-tools``) needs Python 3.12
or newer, so it has a venv of its own (``scripts/install-openhands.sh``, by
default ``<megaflow venv>/openhands``) and runs there as a subprocess:
:mod:`megaflow.agent.openhands_runner`, which builds OpenHands' own ``Agent``
and ``Conversation`` with

- its LLM pointed at the model client's OpenAI-compatible URL
  (:meth:`ModelClient.openai_base_url`: the HTTP gateway, or the in-process
  service on a loopback gateway) with the trajectory id in the
  ``X-MegaFlow-Trajectory`` header, so every call is recorded like any other;
- its ``terminal`` and ``file_editor`` tools acting in the MegaFlow sandbox:
  the runner asks this process for each sandbox operation over JSON lines on
  its stdin and stdout (:class:`SandboxBridge`), and reports each tool call
  and its result, recorded as an Action and an Observation.

The episode ends with OpenHands' ``finish`` tool (``submitted``), at
``max_iterations`` (``step_limit``) or at ``wall_time_limit_s``
(``time_limit``, the runner is killed); anything else (a stuck or failed
conversation, a crashed runner) is an :class:`AgentError` carrying the
runner's last lines of output.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from megaflow.agent.abstract import Agent, ExitStatus, problem_statement
from megaflow.agent.config import OpenHandsAgentConfig
from megaflow.core.errors import AgentError, ConfigError
from megaflow.core.tasks import TaskSpec
from megaflow.core.trajectory import Action, Observation, Trajectory
from megaflow.environment.abstract import Sandbox
from megaflow.model.abstract import TRAJECTORY_HEADER, ModelClient

RUNNER = Path(__file__).with_name("openhands_runner.py")
LINE_LIMIT = 256 << 20
"""Longest protocol line: a file pulled or written travels base64 in one line."""


def default_python() -> Path:
    """Where ``scripts/install-openhands.sh`` puts the SDK's interpreter by default."""
    return Path(sys.prefix) / "openhands" / "bin" / "python"


def runner_env() -> dict[str, str]:
    """The runner's environment: no model-price fetch, banner or telemetry."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_"))}
    env.update(
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        OPENHANDS_SUPPRESS_BANNER="1",
        LMNR_PROJECT_API_KEY="",
        POSTHOG_DISABLED="1",
        PYTHONUNBUFFERED="1",
    )
    return env


class SandboxBridge:
    """Answers the runner's sandbox requests and records its tool calls."""

    def __init__(self, sandbox: Sandbox, traj: Trajectory) -> None:
        self.sandbox = sandbox
        self.traj = traj
        self._action_at = 0.0

    async def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to a request, or None for a notice."""
        op = message.get("op")
        if op == "action":
            self._action_at = time.time()
            tool, args = str(message.get("tool")), dict(message.get("arguments") or {})
            self.traj.add(Action(tool=tool, arguments=args, started_at=self._action_at))
            return None
        if op == "observation":
            self.traj.add(
                Observation(
                    content=str(message.get("content", "")),
                    exit_code=message.get("exit_code"),
                    started_at=self._action_at,
                    duration_s=time.time() - self._action_at,
                )
            )
            return None
        try:
            result = await self._request(str(op), message)
        except (OSError, ValueError, KeyError) as exc:  # the tool reports it to the agent
            return {"id": message.get("id"), "error": f"{type(exc).__name__}: {exc}"}
        return {"id": message.get("id"), "result": result}

    async def _request(self, op: str, message: dict[str, Any]) -> dict[str, Any]:
        if op == "exec":
            res = await self.sandbox.exec(
                list(message["argv"]), timeout=float(message["timeout"]), cwd=message.get("cwd")
            )
            return res.model_dump(include={"exit_code", "stdout", "stderr", "timed_out"})
        path = str(message["path"])
        if op == "pull":
            return await self._pull(path)
        if op == "write":
            mode = await self.sandbox.exec(f"stat -c %a {shlex.quote(path)}", timeout=30)
            perm = int(mode.stdout.strip(), 8) if mode.ok and mode.stdout.strip() else 0o644
            await self.sandbox.write_file(path, base64.b64decode(message["data_b64"]), perm)
            return {}
        raise ValueError(f"unknown request {op!r}")

    async def _pull(self, path: str) -> dict[str, Any]:
        q = shlex.quote(path)
        probe = await self.sandbox.exec(
            f"if [ -d {q} ]; then echo d; find {q} -mindepth 1 -maxdepth 2 -printf '%y %P\\n'; "
            f"elif [ -f {q} ]; then echo f; else echo m; fi",
            timeout=30,
        )
        kind, *rows = probe.stdout.splitlines() or ["m"]
        if kind == "f":
            data = await self.sandbox.read_file(path)
            return {"kind": "file", "data_b64": base64.b64encode(data).decode()}
        if kind == "d":
            entries = [row.split(" ", 1) for row in rows if " " in row]
            return {"kind": "dir", "entries": [[t, rel] for t, rel in entries]}
        return {"kind": "missing"}


class OpenHandsAgent(Agent):
    name = "openhands"

    def __init__(self, config: OpenHandsAgentConfig | None = None) -> None:
        self.config = config or OpenHandsAgentConfig()

    def python(self) -> Path:
        python = Path(self.config.python) if self.config.python else default_python()
        if not python.exists():
            raise ConfigError(
                f"agent 'openhands': no OpenHands interpreter at {python}; install it with "
                "`bash scripts/install-openhands.sh` (make setup does) or set agent.python"
            )
        return python

    async def _run(
        self, task: TaskSpec, sandbox: Sandbox, model: ModelClient, traj: Trajectory
    ) -> ExitStatus:
        cfg = self.config
        episode = {
            "problem_statement": problem_statement(task),
            "base_url": await model.openai_base_url(),
            "model": cfg.model,
            "trajectory_header": TRAJECTORY_HEADER,
            "trajectory_id": traj.id,
            "workdir": cfg.workdir,
            "max_iterations": cfg.max_iterations,
            "command_timeout_s": cfg.command_timeout_s,
            "temperature": cfg.temperature,
            "max_output_tokens": cfg.completion_tokens,
        }
        proc = await asyncio.create_subprocess_exec(
            str(self.python()),
            "-P",  # not the runner's folder on sys.path: its openhands.py is this module
            str(RUNNER),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=runner_env(),
            limit=LINE_LIMIT,
        )
        tail: collections.deque[str] = collections.deque(maxlen=15)
        drain = asyncio.create_task(_drain(proc.stderr, tail))
        try:
            async with asyncio.timeout(cfg.wall_time_limit_s):
                done = await _converse(proc, episode, SandboxBridge(sandbox, traj))
        except TimeoutError:
            done = {"status": "time_limit"}
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
            await drain
        return _exit_status(done, traj, task, "".join(tail))


async def _converse(
    proc: asyncio.subprocess.Process, episode: dict[str, Any], bridge: SandboxBridge
) -> dict[str, Any]:
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write((json.dumps(episode) + "\n").encode())
    await proc.stdin.drain()
    while line := await proc.stdout.readline():
        message = json.loads(line)
        if message.get("op") == "done":
            return dict(message)
        answer = await bridge.handle(message)
        if answer is not None:
            proc.stdin.write((json.dumps(answer) + "\n").encode())
            await proc.stdin.drain()
    return {"status": "exited", "error": f"the runner exited with code {await proc.wait()}"}


async def _drain(stream: asyncio.StreamReader | None, tail: collections.deque[str]) -> None:
    assert stream is not None
    while line := await stream.readline():
        tail.append(line.decode(errors="replace"))


def _exit_status(done: dict[str, Any], traj: Trajectory, task: TaskSpec, log: str) -> ExitStatus:
    status = str(done.get("status"))
    traj.meta["openhands_status"] = status
    if status == "finished":
        return "submitted"
    if status == "time_limit":
        return "time_limit"
    if status == "max_iterations":
        return "step_limit"
    error = done.get("error") or f"the conversation ended {status!r}"
    raise AgentError(f"OpenHands stopped on task {task.id!r}: {error}\n{log}".rstrip())
