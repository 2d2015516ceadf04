"""What the host-side graders (``python``, ``judge``) take from the agent's sandbox.

The agent's answer as bytes the host keeps: the file ``answer_file`` of its
workdir (read as data once every process of the sandbox is dead), its last
message, or its patch against the payload's ``base_commit``; at most
``cap`` bytes. Nothing the agent wrote is imported or run on the host.
"""

from __future__ import annotations

from typing import Literal

from megaflow.core.errors import NotFound, SandboxFileError
from megaflow.core.tasks import TaskSpec
from megaflow.core.trajectory import Trajectory
from megaflow.datasets.candidate import extract_patch
from megaflow.environment.abstract import Sandbox
from megaflow.grading.abstract import Taken

AnswerSource = Literal["answer", "message", "patch"]


def last_message(trajectory: Trajectory) -> str:
    """The text of the agent's last model answer."""
    for call in reversed(trajectory.model_calls):
        message = call.response.get("message", call.response)
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return content
    return ""


async def take_answer(
    sandbox: Sandbox,
    trajectory: Trajectory,
    task: TaskSpec,
    *,
    on: AnswerSource,
    answer_file: str,
    cap: int,
) -> Taken:
    """The agent's answer (or why there is none), at most ``cap`` bytes."""
    if on == "message":
        data = last_message(trajectory).encode()
    elif on == "patch":
        base = task.payload.get("base_commit")
        if not isinstance(base, str):
            return Taken(b"", "patch.diff", "the task has no base_commit to take a patch against")
        candidate = await extract_patch(sandbox, base, cap)
        return Taken(candidate.patch, "patch.diff", candidate.error)
    else:
        await sandbox.kill_processes()
        try:
            data = await sandbox.read_file(answer_file)
        except (NotFound, SandboxFileError) as exc:
            return Taken(b"", "answer.txt", f"no answer: {exc}")
    if len(data) > cap:
        return Taken(b"", "answer.txt", f"the answer is {len(data)} bytes; the limit is {cap}")
    return Taken(data, "answer.txt")
