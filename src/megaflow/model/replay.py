"""The ``replay`` backend: plays a task's reference solution as tool calls.

It answers like a model that knows the gold patch: write the patch to a file,
``git apply`` it in the repository, submit; for a Harbor task, write its
``solution/solve.sh`` to a file, run it in the task's workdir, submit.
``play: empty`` submits at once (a negative control: nothing may resolve).
The task payload (with its ``patch``) comes from the trajectory's
registration, or from the request's ``metadata.megaflow_task``. The backend
keeps no state: the step it plays is the number of assistant messages
already in the conversation, so any agent, in-process or over HTTP, replays
the same way.

The actions take the shape of the tools the request offers: MegaFlow's own
(``write_file``, ``bash``, ``submit``), a lone ``bash`` tool (as
mini-swe-agent has; the patch goes through a here-document and the agent
submits by printing its submit marker), or, with no tools, fenced bash blocks.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Literal

from megaflow.core.errors import ModelError
from megaflow.model.abstract import (
    Backend,
    CallContext,
    ChatRequest,
    Completion,
    estimate_tokens,
    message_text,
)

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_EOF = "MEGAFLOW_PATCH_EOF"


class ReplayBackend(Backend):
    name = "replay"

    def __init__(
        self,
        play: Literal["gold", "empty"] = "gold",
        workdir: str = "/workspace",
        patch_path: str = "/tmp/megaflow-gold.patch",
        solve_path: str = "/tmp/megaflow-solve.sh",
    ) -> None:
        self.play = play
        self.workdir = workdir
        self.patch_path = patch_path
        self.solve_path = solve_path

    def _script(self, ctx: CallContext) -> list[tuple[str, dict[str, Any]]]:
        """The (tool, arguments) steps to play."""
        if self.play == "empty":
            return [("submit", {})]
        task = ctx.task
        if task is None:
            raise ModelError(
                f"replay backend has no task for trajectory {ctx.trajectory_id!r}: register "
                "the task payload first, or send it as metadata.megaflow_task"
            )
        solve = _solution_script(task)
        if solve is not None:  # a Harbor task's solution/solve.sh, run in its workdir
            workdir, script = solve
            return [
                ("write_file", {"path": self.solve_path, "content": script}),
                ("bash", {"command": f"cd {workdir} && sh {self.solve_path}"}),
                ("submit", {}),
            ]
        patch = task.get("patch")
        if not isinstance(patch, str) or not patch.strip():
            raise ModelError(
                f"task {task.get('instance_id', '?')!r} of trajectory {ctx.trajectory_id!r} "
                "has no gold 'patch' to replay"
            )
        if not patch.endswith("\n"):
            patch += "\n"
        return [
            ("write_file", {"path": self.patch_path, "content": patch}),
            ("bash", {"command": f"cd {self.workdir} && git apply {self.patch_path}"}),
            ("submit", {}),
        ]

    @staticmethod
    def _as_bash(tool: str, args: dict[str, Any]) -> str:
        if tool == "bash":
            return str(args["command"])
        if tool == "write_file":
            return f"cat > {args['path']} <<'{_EOF}'\n{args['content']}{_EOF}"
        return f"echo {SUBMIT_MARKER}"

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        script = self._script(ctx)
        step = sum(1 for m in request.messages if m.get("role") == "assistant")
        tool, args = script[min(step, len(script) - 1)]
        names = set(request.tool_names)
        message: dict[str, Any] = {"role": "assistant"}
        if names >= {tool}:
            message["content"] = f"Replaying reference step {step + 1}: {tool}."
            message["tool_calls"] = [_call(step, tool, args)]
            finish = "tool_calls"
        elif "bash" in names:
            message["content"] = f"Replaying reference step {step + 1}."
            message["tool_calls"] = [_call(step, "bash", {"command": self._as_bash(tool, args)})]
            finish = "tool_calls"
        else:
            message["content"] = f"```bash\n{self._as_bash(tool, args)}\n```"
            finish = "stop"
        out = message_text([message])
        return Completion(
            message=message,
            finish_reason=finish,
            prompt_tokens=estimate_tokens(message_text(request.messages)),
            completion_tokens=estimate_tokens(out),
            model=self.name,
        )


def _solution_script(task: dict[str, Any]) -> tuple[str, str] | None:
    """(workdir, solve.sh text) of a Harbor task's payload, if it has a solution."""
    harbor = task.get("megaflow_harbor")
    if not isinstance(harbor, dict):
        return None
    solution = harbor.get("solution")
    script = solution.get("solve.sh") if isinstance(solution, dict) else None
    workdir = harbor.get("workdir", "/app")
    if not isinstance(script, str) or not isinstance(workdir, str):
        return None
    return shlex.quote(workdir), script


def _call(step: int, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_replay_{step}",
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps(args)},
    }
