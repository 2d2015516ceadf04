"""The ``mini-swe-agent`` adapter: the real package's agent loop in a MegaFlow sandbox.

mini-swe-agent's ``DefaultAgent`` runs unchanged in a worker thread, with:

- :class:`SandboxEnvironment`, its environment, whose ``execute`` runs each
  bash action in the MegaFlow sandbox (on the caller's event loop) and
  records an Action and an Observation;
- :class:`GatewayModel`, its model, which sends each query through the
  MegaFlow model client (in-process or the HTTP gateway) with the package's
  own bash tool, so every call is recorded under the trajectory id; or any
  mini-swe-agent model class named in the config (its deterministic test
  model, say).

Prompts and templates come from one of the package's own config files.
Needs the ``agents`` extra.
"""

from __future__ import annotations

import asyncio
import os
import platform
import time
from importlib import resources
from types import SimpleNamespace
from typing import Any

import yaml

from megaflow.agent.abstract import Agent, ExitStatus, problem_statement
from megaflow.agent.config import MiniSweAgentConfig
from megaflow.core.errors import AgentError
from megaflow.core.plugins import load_object
from megaflow.core.tasks import TaskSpec
from megaflow.core.trajectory import Action, Observation, Trajectory
from megaflow.environment.abstract import Sandbox
from megaflow.model.abstract import ModelClient

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_STATUS: dict[str, ExitStatus] = {
    "Submitted": "submitted",
    "LimitsExceeded": "step_limit",
    "TimeExceeded": "time_limit",
}


class SandboxEnvironment:
    """A mini-swe-agent environment executing in a MegaFlow sandbox."""

    def __init__(
        self,
        sandbox: Sandbox,
        loop: asyncio.AbstractEventLoop,
        traj: Trajectory,
        *,
        cwd: str,
        timeout: float,
    ) -> None:
        self.sandbox = sandbox
        self.loop = loop
        self.traj = traj
        self.config = SimpleNamespace(cwd=cwd, timeout=timeout)

    def execute(self, action: dict[str, Any], cwd: str = "", **kw: Any) -> dict[str, Any]:
        from minisweagent.exceptions import Submitted

        command = str(action.get("command", ""))
        started = time.time()
        self.traj.add(Action(tool="bash", arguments={"command": command}, started_at=started))
        coro = self.sandbox.exec(
            command, timeout=kw.get("timeout") or self.config.timeout, cwd=cwd or self.config.cwd
        )
        res = asyncio.run_coroutine_threadsafe(coro, self.loop).result()
        text = res.stdout + res.stderr
        output: dict[str, Any] = {
            "output": text,
            "returncode": res.exit_code,
            "exception_info": f"command timed out after {self.config.timeout:g}s"
            if res.timed_out
            else "",
        }
        self.traj.add(
            Observation(
                content=text,
                exit_code=res.exit_code,
                truncated=res.truncated,
                started_at=started,
                duration_s=time.time() - started,
            )
        )
        lines = text.lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_MARKER and res.exit_code == 0:
            submission = "".join(lines[1:])
            raise Submitted(
                {
                    "role": "exit",
                    "content": submission,
                    "extra": {"exit_status": "Submitted", "submission": submission},
                }
            )
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {"cwd": self.config.cwd, **platform.uname()._asdict(), **kwargs}

    def serialize(self) -> dict[str, Any]:
        env = {"sandbox": self.sandbox.id, "cwd": self.config.cwd}
        return {"info": {"config": {"environment": env, "environment_type": "megaflow"}}}


class GatewayModel:
    """A mini-swe-agent model answering through a MegaFlow model client."""

    def __init__(
        self,
        client: ModelClient,
        trajectory_id: str,
        loop: asyncio.AbstractEventLoop,
        templates: dict[str, Any],
    ) -> None:
        self.client = client
        self.trajectory_id = trajectory_id
        self.loop = loop
        self.config = SimpleNamespace(
            observation_template=templates["observation_template"],
            format_error_template=templates.get("format_error_template", "{{ error }}"),
        )

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        from minisweagent.models.utils.actions_toolcall import BASH_TOOL, parse_toolcall_actions

        clean = [{k: v for k, v in m.items() if k != "extra"} for m in messages]
        coro = self.client.chat(clean, trajectory_id=self.trajectory_id, tools=[BASH_TOOL])
        out = asyncio.run_coroutine_threadsafe(coro, self.loop).result()
        calls = [
            SimpleNamespace(
                id=c.get("id"),
                function=SimpleNamespace(
                    name=c.get("function", {}).get("name"),
                    arguments=c.get("function", {}).get("arguments", ""),
                ),
            )
            for c in out.tool_calls
        ]
        extra = {"cost": 0.0, "timestamp": time.time()}
        try:
            actions = parse_toolcall_actions(
                calls,
                format_error_template=self.config.format_error_template,
                template_kwargs={"finish_reason": out.finish_reason},
            )
        except Exception as exc:  # FormatError: the agent answers it and goes on
            # Keep the model's answer in the conversation (as text: a tool call
            # must be followed by its result, which a rejected call has none of),
            # so the model, and the gateway's record, see what was rejected.
            said = {"role": "assistant", "content": out.content, "extra": dict(extra)}
            exc.messages = (said, *getattr(exc, "messages", ()))  # type: ignore[attr-defined]
            raise
        message = {k: v for k, v in out.message.items() if k in ("role", "content", "tool_calls")}
        message["extra"] = {"actions": actions, **extra}
        return message

    def format_message(self, **kwargs: Any) -> dict[str, Any]:
        return dict(kwargs)

    def format_observation_messages(
        self, message: dict[str, Any], outputs: list[dict[str, Any]], template_vars: Any = None
    ) -> list[dict[str, Any]]:
        from minisweagent.models.utils.actions_toolcall import (
            format_toolcall_observation_messages,
        )

        result: list[dict[str, Any]] = format_toolcall_observation_messages(
            actions=message.get("extra", {}).get("actions", []),
            outputs=outputs,
            observation_template=self.config.observation_template,
            template_vars=template_vars,
        )
        return result

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {"model_name": "megaflow", **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"model": {"trajectory": self.trajectory_id}}}}


def load_templates(name: str) -> dict[str, Any]:
    """The ``agent`` and ``model`` sections of a config file shipped in the package."""
    path = resources.files("minisweagent").joinpath("config", name)
    data = yaml.safe_load(path.read_text())
    return {"agent": data.get("agent", {}), "model": data.get("model", {})}


class MiniSweAgent(Agent):
    name = "mini-swe-agent"

    def __init__(self, config: MiniSweAgentConfig | None = None) -> None:
        self.config = config or MiniSweAgentConfig()

    async def _run(
        self, task: TaskSpec, sandbox: Sandbox, model: ModelClient, traj: Trajectory
    ) -> ExitStatus:
        os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # no banner in our output
        from minisweagent.agents.default import DefaultAgent

        cfg = self.config
        loop = asyncio.get_running_loop()
        templates = load_templates(cfg.templates)
        env = SandboxEnvironment(
            sandbox, loop, traj, cwd=cfg.workdir, timeout=cfg.command_timeout_s
        )
        mini_model: Any
        if cfg.model_class:
            mini_model = load_object(cfg.model_class)(**cfg.model_kwargs)
        else:
            mini_model = GatewayModel(model, traj.id, loop, templates["model"])
        agent = DefaultAgent(
            mini_model,
            env,
            system_template=templates["agent"]["system_template"],
            instance_template=templates["agent"]["instance_template"],
            step_limit=cfg.step_limit,
            cost_limit=0,
            wall_time_limit_seconds=cfg.wall_time_limit_s,
        )
        result = await asyncio.to_thread(agent.run, problem_statement(task))
        traj.meta["submission"] = result.get("submission", "")
        status = str(result.get("exit_status", ""))
        traj.meta["mini_swe_agent_exit"] = status
        if status not in _STATUS:
            raise AgentError(f"mini-swe-agent stopped with {status!r} on task {task.id!r}")
        return _STATUS[status]
