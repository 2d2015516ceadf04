"""The mini-swe-agent adapter: the real package in a real local sandbox."""

from __future__ import annotations

import json

import pytest

from megaflow.agent.config import MiniSweAgentConfig
from megaflow.agent.factory import make_agent
from megaflow.core.trajectory import Action, Observation
from megaflow.datasets.instance import SWEInstance
from megaflow.environment.abstract import Runtime
from megaflow.model.client import HttpModelClient
from megaflow.model.config import ReplayModelConfig
from megaflow.model.factory import make_model_client, make_model_service
from megaflow.model.gateway import GatewayServer
from tests.agent.swe_tasks import grade_agent, prepared

DETERMINISTIC = "minisweagent.models.test_models.DeterministicToolcallModel"


def toolcall_output(n: int, command: str) -> dict[str, object]:
    """An output of mini-swe-agent's deterministic tool-call model (its own format)."""
    from minisweagent.models.test_models import make_toolcall_output

    call_id = f"call_{n}"
    return make_toolcall_output(
        f"step {n}",
        [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})},
            }
        ],
        [{"command": command, "tool_call_id": call_id}],
    )


async def test_deterministic_model_solves_a_task_in_a_sandbox(
    local_runtime: Runtime, instances: list[SWEInstance]
) -> None:
    instance = instances[2]
    apply = f"cat > /tmp/fix.patch <<'EOF'\n{instance.patch}EOF\ngit apply /tmp/fix.patch"
    outputs = [
        toolcall_output(1, "pwd && git status --short"),
        toolcall_output(2, apply),
        toolcall_output(3, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    ]
    cfg = MiniSweAgentConfig(model_class=DETERMINISTIC, model_kwargs={"outputs": outputs})
    task, sandbox = await prepared(local_runtime, instance)
    async with sandbox, make_model_client(ReplayModelConfig()) as model:
        traj = await make_agent(cfg).run(task, sandbox, model)
        report = await grade_agent(local_runtime, sandbox, instance)
    assert traj.meta["exit_status"] == "submitted"
    assert traj.meta["mini_swe_agent_exit"] == "Submitted"
    actions = [s for s in traj.steps if isinstance(s, Action)]
    assert [a.arguments["command"] for a in actions] == [
        "pwd && git status --short",
        apply,
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    ]
    first = next(s for s in traj.steps if isinstance(s, Observation))
    assert first.content.startswith("/workspace")
    assert report.resolved


async def test_gateway_model_records_calls_over_http(
    local_runtime: Runtime, instances: list[SWEInstance]
) -> None:
    instance = instances[3]
    task, sandbox = await prepared(local_runtime, instance)
    service = make_model_service(ReplayModelConfig())
    async with sandbox, GatewayServer(service) as gw, HttpModelClient(gw.base_url) as model:
        traj = await make_agent(MiniSweAgentConfig()).run(task, sandbox, model)
        report = await grade_agent(local_runtime, sandbox, instance)
    assert traj.meta["exit_status"] == "submitted"
    assert report.resolved
    calls = traj.model_calls
    assert len(calls) == 3
    assert [t["function"]["name"] for t in calls[0].request["tools"]] == ["bash"]
    # mini-swe-agent's own prompt carried the problem statement
    assert instance.problem_statement in calls[0].request["messages"][1]["content"]


async def test_step_limit_of_the_package(
    local_runtime: Runtime, instances: list[SWEInstance]
) -> None:
    outputs = [toolcall_output(i, "true") for i in range(5)]
    cfg = MiniSweAgentConfig(
        model_class=DETERMINISTIC, model_kwargs={"outputs": outputs}, step_limit=2
    )
    task, sandbox = await prepared(local_runtime, instances[0])
    async with sandbox, make_model_client(ReplayModelConfig()) as model:
        traj = await make_agent(cfg).run(task, sandbox, model)
    assert traj.meta["exit_status"] == "step_limit"
    assert len([s for s in traj.steps if isinstance(s, Action)]) == 2


async def test_format_errors_are_answered_then_repeated_ones_fail(dummy_runtime: Runtime) -> None:
    from megaflow.core.errors import AgentError
    from megaflow.core.tasks import TaskSpec
    from megaflow.core.trajectory import Trajectory
    from megaflow.environment.abstract import EnvironmentSpec
    from megaflow.model.client import InProcessModelClient
    from megaflow.model.routing import Router
    from megaflow.model.scripted import ScriptedBackend, tool_call
    from megaflow.model.service import ModelService

    task = TaskSpec(id="t", run_id="r", payload={"problem_statement": "do it"})
    wrong = tool_call("python", {"code": "print(1)"})
    done = tool_call("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})
    agent = make_agent(MiniSweAgentConfig())
    for script, ok in (([wrong, done], True), ([wrong], False)):
        model = InProcessModelClient(ModelService("s", Router([ScriptedBackend(script)])))
        traj = Trajectory(id=f"mini-{ok}", task_id="t", run_id="r")
        async with model, await dummy_runtime.create(EnvironmentSpec()) as sb:
            if ok:
                await agent.run(task, sb, model, traj)
            else:
                with pytest.raises(AgentError, match="RepeatedFormatError"):
                    await agent.run(task, sb, model, traj)
        if ok:
            assert traj.meta["exit_status"] == "submitted"
            second = traj.model_calls[1].request["messages"]
            assert "Unknown tool 'python'" in second[-1]["content"]
        else:
            assert traj.meta["error_kind"] == "agent"
            assert len(traj.model_calls) == 3
