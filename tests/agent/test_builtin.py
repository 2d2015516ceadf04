"""The builtin agent in a real local sandbox, with scripted and replay models."""

from __future__ import annotations

import pytest

from megaflow.agent.builtin import BuiltinAgent
from megaflow.agent.config import BuiltinAgentConfig
from megaflow.core.tasks import TaskSpec
from megaflow.core.trajectory import Action, ModelCall, Observation
from megaflow.datasets.instance import SWEInstance
from megaflow.environment.abstract import EnvironmentSpec, Runtime
from megaflow.model.client import HttpModelClient, InProcessModelClient
from megaflow.model.config import ReplayModelConfig
from megaflow.model.factory import make_model_client, make_model_service
from megaflow.model.gateway import GatewayServer
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend, tool_call
from megaflow.model.service import ModelService
from tests.agent.swe_tasks import grade_agent, prepared

BUGGY = "def add(a, b):\n    return a - b\n"


def scripted(script: list) -> InProcessModelClient:  # type: ignore[type-arg]
    return InProcessModelClient(ModelService("scripted", Router([ScriptedBackend(script)])))


async def test_solves_a_task_with_a_scripted_model(local_runtime: Runtime) -> None:
    spec = EnvironmentSpec(files={"calc.py": BUGGY})
    task = TaskSpec(id="calc", run_id="r", payload={"problem_statement": "add() subtracts."})
    check = "python3 -c 'import calc; assert calc.add(2, 3) == 5' && echo FIXED"
    script = [
        tool_call("read_file", {"path": "calc.py"}),
        tool_call("edit", {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"}),
        tool_call("write_file", {"path": "notes/done.txt", "content": "fixed\n"}),
        tool_call("bash", {"command": check}),
        tool_call("submit", {}),
    ]
    async with scripted(script) as model, await local_runtime.create(spec) as sandbox:
        traj = await BuiltinAgent().run(task, sandbox, model)
        assert (await sandbox.read_file("/workspace/calc.py")).decode() == BUGGY.replace("-", "+")
        assert (await sandbox.read_file("/workspace/notes/done.txt")) == b"fixed\n"
    assert traj.meta["exit_status"] == "submitted"
    observations = [s for s in traj.steps if isinstance(s, Observation)]
    assert observations[0].content == BUGGY
    assert "FIXED" in observations[3].content
    assert observations[3].exit_code == 0
    kinds = [s.kind for s in traj.steps]
    assert kinds == ["model_call", "action", "observation"] * 5
    assert len(traj.model_calls) == 5
    assert traj.meta["steps"] == 5
    assert traj.tokens > 0


@pytest.mark.slow
async def test_replay_gold_resolves_and_empty_does_not(
    local_runtime: Runtime, instances: list[SWEInstance]
) -> None:
    instance = instances[0]
    outcomes = {}
    for play in ("gold", "empty"):
        task, sandbox = await prepared(local_runtime, instance)
        async with sandbox, make_model_client(ReplayModelConfig(play=play)) as model:
            traj = await BuiltinAgent().run(task, sandbox, model)
            report = await grade_agent(local_runtime, sandbox, instance)
        assert traj.meta["exit_status"] == "submitted"
        outcomes[play] = report.resolved
        if play == "gold":
            assert [s.tool for s in traj.steps if isinstance(s, Action)] == [
                "write_file",
                "bash",
                "submit",
            ]
            assert traj.meta["submission"].strip()
    assert outcomes == {"gold": True, "empty": False}


@pytest.mark.slow
async def test_same_run_through_the_http_gateway(
    local_runtime: Runtime, instances: list[SWEInstance]
) -> None:
    instance = instances[1]
    task, sandbox = await prepared(local_runtime, instance)
    service = make_model_service(ReplayModelConfig())
    async with sandbox, GatewayServer(service) as gw, HttpModelClient(gw.base_url) as model:
        traj = await BuiltinAgent(BuiltinAgentConfig(max_steps=5)).run(task, sandbox, model)
        report = await grade_agent(local_runtime, sandbox, instance)
        assert len(service.recorder) == 0  # the agent released its recorded calls
    assert report.resolved
    calls = [s for s in traj.steps if isinstance(s, ModelCall)]
    assert len(calls) == 3
    assert calls[0].request["messages"][1]["content"] == instance.problem_statement
    assert traj.steps == sorted(traj.steps, key=lambda s: s.started_at)
