"""Builtin agent logic on the dummy runtime: malformed calls, limits, failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from megaflow.agent.abstract import Agent, ExitStatus, error_kind, is_retryable
from megaflow.agent.builtin import BuiltinAgent
from megaflow.agent.config import BuiltinAgentConfig
from megaflow.agent.tools import truncate
from megaflow.core.errors import AgentError, MegaFlowTimeout, ModelError, TransportError
from megaflow.core.tasks import ErrorKind, TaskSpec
from megaflow.core.trajectory import Observation, Trajectory
from megaflow.environment.abstract import EnvironmentSpec, Runtime, Sandbox
from megaflow.model.abstract import ModelClient
from megaflow.model.client import InProcessModelClient
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend, tool_call
from megaflow.model.service import ModelService

TASK = TaskSpec(id="t", run_id="r", payload={"problem_statement": "do it"})
BASH = tool_call("bash", {"command": "echo hi"})


def client(script: list[Any], timeout_s: float = 30) -> InProcessModelClient:
    router = Router([ScriptedBackend(script)], timeout_s=timeout_s, retries=0)
    return InProcessModelClient(ModelService("scripted", router))


def observations(traj: Trajectory) -> list[str]:
    return [s.content for s in traj.steps if isinstance(s, Observation)]


async def run(
    runtime: Runtime, script: list[Any], cfg: BuiltinAgentConfig | None = None, **kw: Any
) -> tuple[Trajectory, Any]:
    traj = Trajectory(id="traj", task_id="t", run_id="r")
    async with client(script, **kw) as model, await runtime.create(EnvironmentSpec()) as sb:
        try:
            await BuiltinAgent(cfg).run(TASK, sb, model, traj)
        except Exception as exc:
            return traj, exc
    return traj, None


async def test_malformed_tool_calls_are_answered_and_the_loop_goes_on(
    dummy_runtime: Runtime,
) -> None:
    script = [
        tool_call("bash", "{not json"),
        tool_call("teleport", {"to": "mars"}),
        tool_call("bash", "[1, 2]"),
        {"content": "I think I am done."},
        tool_call("bash", {}),
        tool_call("edit", {"path": "missing.py", "old_str": "a", "new_str": "b"}),
        tool_call("submit", {}),
    ]
    traj, exc = await run(dummy_runtime, script)
    assert exc is None
    assert traj.meta["exit_status"] == "submitted"
    obs = observations(traj)
    assert obs[0].startswith("error: arguments are not valid JSON")
    assert obs[1].startswith("error: unknown tool 'teleport'")
    assert obs[2] == "error: arguments must be a JSON object"
    assert obs[3] == "error: argument 'command' is required and must be a string"
    assert obs[4].startswith("error: no such file")
    recorded = traj.model_calls
    assert len(recorded) == 7
    # the model saw each error, and the reminder after the answer without a tool call
    last_request = recorded[-1].request["messages"]
    assert any("no tool call" in str(m.get("content")) for m in last_request)
    assert sum(1 for m in last_request if m["role"] == "tool") == 5


async def test_step_limit(dummy_runtime: Runtime) -> None:
    traj, exc = await run(dummy_runtime, [BASH], BuiltinAgentConfig(max_steps=3))
    assert exc is None
    assert traj.meta["exit_status"] == "step_limit"
    assert len(traj.model_calls) == 3


async def test_token_limit(dummy_runtime: Runtime) -> None:
    traj, exc = await run(dummy_runtime, [BASH], BuiltinAgentConfig(max_tokens=40))
    assert exc is None
    assert traj.meta["exit_status"] == "token_limit"
    assert 1 <= len(traj.model_calls) < 30
    assert traj.tokens >= 40


async def test_time_limit(dummy_runtime: Runtime) -> None:
    cfg = BuiltinAgentConfig(max_seconds=0.3)
    traj, exc = await run(dummy_runtime, [BASH, 30.0, BASH], cfg)
    assert exc is None
    assert traj.meta["exit_status"] == "time_limit"
    assert traj.ended_at is not None


async def test_long_observations_are_truncated(dummy_runtime: Runtime) -> None:
    text, cut = truncate("x" * 1000 + "TAIL", 200)
    assert cut
    assert text.endswith("TAIL")
    assert "[... 804 characters truncated ...]" in text
    assert truncate("short", 200) == ("short", False)
    write = tool_call("write_file", {"path": "big.txt", "content": "y" * 5000})
    read = tool_call("read_file", {"path": "big.txt"})
    script = [write, read, tool_call("submit", {})]
    traj, _ = await run(dummy_runtime, script, BuiltinAgentConfig(max_observation_chars=300))
    obs = [s for s in traj.steps if isinstance(s, Observation)]
    assert obs[1].truncated
    assert len(obs[1].content) < 400


async def test_repeated_malformed_answers_are_an_agent_error(dummy_runtime: Runtime) -> None:
    cfg = BuiltinAgentConfig(max_format_errors=3)
    traj, exc = await run(dummy_runtime, [{"content": "no tools for me"}], cfg)
    assert isinstance(exc, AgentError)
    assert "3 malformed answers in a row" in str(exc)
    assert traj.meta["exit_status"] == "error"
    assert traj.meta["error_kind"] == "agent"
    assert len(traj.model_calls) == 3  # recorded although the run failed
    assert not is_retryable(exc)


async def test_model_error_and_hang_end_with_a_clear_recorded_error(
    dummy_runtime: Runtime,
) -> None:
    traj, exc = await run(dummy_runtime, [BASH, ModelError("upstream said no")])
    assert isinstance(exc, ModelError)
    assert traj.meta["error_type"] == "ModelError"
    assert traj.model_calls[-1].response == {
        "error": "upstream said no",
        "error_type": "ModelError",
    }
    traj, exc = await run(dummy_runtime, [BASH, 60.0, BASH], timeout_s=0.2)
    assert isinstance(exc, MegaFlowTimeout)
    assert traj.meta["error_kind"] == "timeout"
    assert traj.model_calls[-1].response["error_type"] == "MegaFlowTimeout"


class Crashing(Agent):
    name = "crashing"

    async def _run(
        self, task: TaskSpec, sandbox: Sandbox, model: ModelClient, traj: Trajectory
    ) -> ExitStatus:
        await model.chat([{"role": "user", "content": "x"}], trajectory_id=traj.id)
        raise KeyError("bug in the adapter")


async def test_adapter_crash_is_an_agent_error_and_not_retried(dummy_runtime: Runtime) -> None:
    traj = Trajectory(id="crash", task_id="t", run_id="r")
    async with client([BASH]) as model, await dummy_runtime.create(EnvironmentSpec()) as sb:
        with pytest.raises(AgentError, match="agent 'crashing' failed on task 't'") as info:
            await Crashing().run(TASK, sb, model, traj)
    assert isinstance(info.value.__cause__, KeyError)
    assert error_kind(info.value) is ErrorKind.AGENT
    assert traj.meta["error_kind"] == "agent"
    assert len(traj.model_calls) == 1


def test_error_classification() -> None:
    assert error_kind(TransportError("x")) is ErrorKind.INFRA
    assert is_retryable(TransportError("x"))
    assert error_kind(MegaFlowTimeout("x")) is ErrorKind.TIMEOUT
    assert error_kind(ModelError("x")) is ErrorKind.AGENT
    assert error_kind(asyncio.CancelledError()) is ErrorKind.CANCELLED
    assert not is_retryable(AgentError("x"))


async def test_task_without_instructions_is_an_agent_error(dummy_runtime: Runtime) -> None:
    empty = TaskSpec(id="e", run_id="r")
    async with client([BASH]) as model, await dummy_runtime.create(EnvironmentSpec()) as sb:
        with pytest.raises(AgentError, match="no 'problem_statement'"):
            await BuiltinAgent().run(empty, sb, model)


def test_a_task_may_set_its_own_temperature() -> None:
    agent = BuiltinAgent(BuiltinAgentConfig(temperature=1.0, completion_tokens=32))
    own = TASK.model_copy(
        update={"payload": {**TASK.payload, "megaflow_sampling": {"temperature": 0}}}
    )
    assert agent._params(TASK) == {"temperature": 1.0, "max_tokens": 32}
    assert agent._params(own) == {"temperature": 0.0, "max_tokens": 32}
    bad = TASK.model_copy(update={"payload": {**TASK.payload, "megaflow_sampling": "greedy"}})
    assert agent._params(bad) == {"temperature": 1.0, "max_tokens": 32}
