"""The OpenHands adapter: the real SDK, in its own venv, in a real local sandbox.

A scripted model behind the real HTTP gateway plays OpenHands' own tool calls
(``terminal``, ``file_editor`` view and str_replace, ``finish``); the test
checks the edit landed in the sandbox, not on the host, that the gateway
recorded every call under the trajectory, and that the episode grades as
resolved. Needs ``scripts/install-openhands.sh`` (``make setup`` runs it).
"""

from __future__ import annotations

from typing import Any

import pytest

from megaflow.agent.config import OpenHandsAgentConfig
from megaflow.agent.factory import make_agent
from megaflow.agent.openhands import default_python
from megaflow.core.errors import AgentError, ConfigError
from megaflow.core.tasks import TaskSpec
from megaflow.core.trajectory import Action, Observation, Trajectory
from megaflow.datasets.instance import SWEInstance
from megaflow.environment.abstract import EnvironmentSpec, Runtime
from megaflow.model.client import HttpModelClient, InProcessModelClient
from megaflow.model.gateway import GatewayServer
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend, tool_call
from megaflow.model.service import ModelService
from tests.agent.swe_tasks import grade_agent, prepared

OLD = '    return token.replace("~0", "~").replace("~1", "/")'
NEW = '    return token.replace("~1", "/").replace("~0", "~")'
FILE = "/workspace/jsonptr/tokens.py"


def step(n: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return tool_call(name, arguments, call_id=f"call_{n}")


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content)
    return str(content or "")


def fixing_script() -> list[dict[str, Any]]:
    return [
        step(1, "terminal", {"command": "cd jsonptr && grep -n replace tokens.py"}),
        step(2, "terminal", {"command": "pwd"}),
        step(3, "file_editor", {"command": "view", "path": "/workspace/jsonptr"}),
        step(
            4,
            "file_editor",
            {"command": "str_replace", "path": FILE, "old_str": OLD, "new_str": NEW},
        ),
        step(5, "finish", {"message": "unescape now replaces ~1 before ~0"}),
    ]


def test_the_install_script_provided_the_sdk() -> None:
    assert default_python().exists(), "run `bash scripts/install-openhands.sh` (make setup)"


@pytest.mark.slow
async def test_openhands_fixes_a_task_in_a_sandbox_through_the_gateway(
    local_runtime: Runtime, instances: list[SWEInstance]
) -> None:
    (instance,) = [i for i in instances if i.instance_id == "mini-swe__jsonptr-1"]
    task, sandbox = await prepared(local_runtime, instance)
    service = ModelService("scripted", Router([ScriptedBackend(fixing_script())]))
    async with sandbox, GatewayServer(service) as gw, HttpModelClient(gw.base_url) as model:
        before = (await sandbox.read_file(FILE)).decode()
        traj = await make_agent(OpenHandsAgentConfig()).run(task, sandbox, model)
        after = (await sandbox.read_file(FILE)).decode()
        report = await grade_agent(local_runtime, sandbox, instance)
    assert OLD in before
    assert NEW in after
    assert OLD not in after
    assert traj.meta["exit_status"] == "submitted", traj.meta
    assert traj.meta["openhands_status"] == "finished"
    assert report.resolved
    # every model call went through the gateway, recorded under this trajectory
    calls = traj.model_calls
    assert len(calls) == 5
    tools = {t["function"]["name"] for t in calls[0].request["tools"]}
    assert {"terminal", "file_editor", "finish"} <= tools
    first = calls[0].request["messages"]
    assert any(instance.problem_statement in text_of(m) for m in first if m["role"] == "user")
    # the tool calls, in order, with what the sandbox answered
    actions = [s for s in traj.steps if isinstance(s, Action)]
    assert [a.tool for a in actions] == ["terminal", "terminal", "file_editor", "file_editor"]
    observations = [s.content for s in traj.steps if isinstance(s, Observation)]
    assert OLD.strip() in observations[0]
    assert observations[1].strip() == "/workspace/jsonptr"  # the cd carried over
    assert f"{FILE}" in observations[2]  # the directory view, with sandbox paths
    assert "has been edited" in observations[3]
    # the model saw the sandbox's answers, not the host's
    last = calls[-1].request["messages"]
    assert any("/workspace/jsonptr" in text_of(m) for m in last if m["role"] == "tool")


@pytest.mark.slow
async def test_in_process_client_on_a_loopback_gateway_and_the_step_limit(
    local_runtime: Runtime,
) -> None:
    task = TaskSpec(id="t", run_id="r", payload={"problem_statement": "loop"})
    looping = [step(i, "terminal", {"command": f"echo {i}"}) for i in range(10)]
    model = InProcessModelClient(ModelService("s", Router([ScriptedBackend(looping)])))
    traj = Trajectory(id="oh-inproc", task_id="t", run_id="r")
    async with model, await local_runtime.create(EnvironmentSpec()) as sb:
        await make_agent(OpenHandsAgentConfig(max_iterations=2)).run(task, sb, model, traj)
        url = await model.openai_base_url()
        missing = OpenHandsAgentConfig(python="/nonexistent/python")
        with pytest.raises(ConfigError, match="install-openhands"):
            await make_agent(missing).run(task, sb, model)
    assert url.startswith("http://127.0.0.1:")
    assert traj.meta["exit_status"] == "step_limit"
    assert traj.meta["openhands_status"] == "max_iterations"
    assert len(traj.model_calls) == 2
    assert [o.content for o in traj.steps if isinstance(o, Observation)] == ["0\n", "1\n"]


@pytest.mark.slow
async def test_a_failing_model_ends_the_episode_as_an_agent_error(local_runtime: Runtime) -> None:
    task = TaskSpec(id="t", run_id="r", payload={"problem_statement": "fail"})
    broken = [step(1, "terminal", {"command": "true"}), RuntimeError("backend down")]
    model = InProcessModelClient(ModelService("s", Router([ScriptedBackend(broken)])))
    traj = Trajectory(id="oh-broken", task_id="t", run_id="r")
    async with model, await local_runtime.create(EnvironmentSpec()) as sb:
        with pytest.raises(AgentError, match="OpenHands stopped") as err:
            await make_agent(OpenHandsAgentConfig()).run(task, sb, model, traj)
    assert "backend down" in str(err.value)
    assert traj.meta["error_kind"] == "agent"
    assert len(traj.model_calls) == 2  # the failed call is recorded too
