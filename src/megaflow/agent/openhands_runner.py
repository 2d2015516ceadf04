"""The OpenHands side of the ``openhands`` adapter: a script run by the SDK's own Python.

The OpenHands SDK needs Python 3.12 or newer, so it lives in a venv of its own
(``scripts/install-openhands.sh``) and this file runs there as a subprocess of
:mod:`megaflow.agent.openhands`. It imports only the standard library and the
SDK, never MegaFlow.

It talks JSON lines with the adapter: the first line on stdin is the episode
(problem statement, gateway URL, trajectory id, limits); after that each line
it writes on its protocol channel (the stdout it was started with; the SDK's
own printing goes to stderr) is a request for the sandbox (``exec``,
``pull``, ``write``, answered on stdin by ``id``) or a notice (``action``,
``observation``, and ``done`` last).

OpenHands' ``Agent`` and ``LocalConversation`` run unchanged; its LLM is
pointed at MegaFlow's gateway with the trajectory header; its ``terminal`` and
``file_editor`` tools keep their schemas and descriptions but get executors
that act in the MegaFlow sandbox: a terminal command is one sandbox exec (the
working directory carries over between commands, shell variables do not), and
the file editor is OpenHands' own ``FileEditor`` working on a host mirror of
the one path it touches, fetched from the sandbox before and written back
after. The conversation's own workspace is an empty host scratch directory,
so no host skills, plugins or files reach the episode.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any, TextIO

CWD_MARK = "__MEGAFLOW_CWD__"


class Channel:
    """Requests to the adapter and their answers, one at a time."""

    def __init__(self, inp: TextIO, out: TextIO) -> None:
        self.inp = inp
        self.out = out
        self.lock = threading.Lock()
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    def receive(self) -> dict[str, Any]:
        line = self.inp.readline()
        if not line:
            raise SystemExit("the adapter closed the channel")
        message: dict[str, Any] = json.loads(line)
        return message

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        with self.lock:
            self.next_id += 1
            self.send({"id": self.next_id, "op": op, **args})
            answer = self.receive()
        if answer.get("id") != self.next_id:
            raise RuntimeError(f"answer {answer.get('id')} to request {self.next_id}")
        if "error" in answer:
            raise RuntimeError(str(answer["error"]))
        result: dict[str, Any] = answer["result"]
        return result


def terminal_executor(channel: Channel, workdir: str, timeout_s: float) -> Any:
    from openhands.sdk.tool import ToolExecutor
    from openhands.tools.terminal import TerminalObservation
    from openhands.tools.terminal.metadata import CmdOutputMetadata

    class SandboxTerminal(ToolExecutor):  # type: ignore[misc]
        """Each command is one exec in the sandbox, started in the last command's cwd."""

        def __init__(self) -> None:
            self.cwd = workdir

        def __call__(self, action: Any, conversation: Any = None) -> Any:
            command = str(action.command)
            channel.send({"op": "action", "tool": "terminal", "arguments": {"command": command}})
            obs = self._run(action, command)
            channel.send({"op": "observation", "content": obs.text, "exit_code": obs.exit_code})
            return obs

        def _run(self, action: Any, command: str) -> Any:
            if action.reset:
                self.cwd = workdir
                return TerminalObservation.from_text(
                    text="terminal reset", command=command, exit_code=0
                )
            if action.is_input or not command.strip():
                return TerminalObservation.from_text(
                    text="No command is running: each command runs to completion in the "
                    "sandbox, so there is nothing to send input to.",
                    command=command,
                    is_error=True,
                )
            script = f'{command}\n__mf_rc=$?\nprintf "\\n{CWD_MARK}%s\\n" "$PWD"\nexit $__mf_rc'
            limit = float(action.timeout) if action.timeout else timeout_s
            res = channel.call("exec", argv=["bash", "-c", script], cwd=self.cwd, timeout=limit)
            text, _, tail = str(res["stdout"]).rpartition(f"\n{CWD_MARK}")
            if tail:
                self.cwd = tail.strip() or self.cwd
            else:
                text = str(res["stdout"])
            text += str(res["stderr"])
            if res["timed_out"]:
                text += f"\n[The command was killed after {limit:g} s.]"
            code = int(res["exit_code"])
            return TerminalObservation.from_text(
                text=text,
                command=command,
                exit_code=code,
                timeout=bool(res["timed_out"]),
                metadata=CmdOutputMetadata(exit_code=code, working_dir=self.cwd),
            )

    return SandboxTerminal()


def file_editor_executor(channel: Channel, mirror: Path) -> Any:
    from openhands.sdk.tool import ToolExecutor
    from openhands.tools.file_editor import FileEditorObservation
    from openhands.tools.file_editor.editor import FileEditor
    from openhands.tools.file_editor.exceptions import ToolError

    class SandboxFileEditor(ToolExecutor):  # type: ignore[misc]
        """OpenHands' FileEditor on a host mirror of the one sandbox path it touches."""

        def __init__(self) -> None:
            self.editor = FileEditor(workspace_root=str(mirror))

        def __call__(self, action: Any, conversation: Any = None) -> Any:
            args = action.model_dump(exclude_none=True, exclude={"kind"})
            channel.send({"op": "action", "tool": "file_editor", "arguments": args})
            obs = self._edit(action)
            channel.send({"op": "observation", "content": obs.text, "exit_code": None})
            return obs

        def _edit(self, action: Any) -> Any:
            path = str(action.path)
            if not path.startswith("/"):
                return FileEditorObservation.from_text(
                    text=f"Invalid `path` parameter: {path}. The path should be an absolute path.",
                    command=action.command,
                    is_error=True,
                )
            local = mirror / path.lstrip("/")
            self._pull(path, local)
            try:
                obs = self.editor(
                    command=action.command,
                    path=str(local),
                    file_text=action.file_text,
                    view_range=action.view_range,
                    old_str=action.old_str,
                    new_str=action.new_str,
                    insert_line=action.insert_line,
                )
            except ToolError as exc:
                obs = FileEditorObservation.from_text(
                    text=exc.message, command=action.command, is_error=True
                )
            if action.command != "view" and not obs.is_error and local.is_file():
                data = base64.b64encode(local.read_bytes()).decode()
                channel.call("write", path=path, data_b64=data)
            root = str(mirror)
            return FileEditorObservation.from_text(
                text=obs.text.replace(root, ""),
                command=action.command,
                is_error=obs.is_error,
                path=path,
                prev_exist=obs.prev_exist,
                old_content=obs.old_content,
                new_content=obs.new_content,
            )

        def _pull(self, path: str, local: Path) -> None:
            if local.is_dir():
                shutil.rmtree(local)
            elif local.exists():
                local.unlink()
            local.parent.mkdir(parents=True, exist_ok=True)
            got = channel.call("pull", path=path)
            if got["kind"] == "file":
                local.write_bytes(base64.b64decode(got["data_b64"]))
            elif got["kind"] == "dir":
                local.mkdir()
                for kind, rel in got["entries"]:
                    target = local / rel
                    if kind == "d":
                        target.mkdir(parents=True, exist_ok=True)
                    else:
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.touch()

    return SandboxFileEditor()


def run(episode: dict[str, Any], channel: Channel, scratch: Path) -> dict[str, Any]:
    from openhands.sdk import LLM, Agent, Conversation, Tool
    from openhands.sdk.tool import register_tool
    from openhands.tools.file_editor import (
        FileEditorAction,
        FileEditorObservation,
        FileEditorTool,
    )
    from openhands.tools.file_editor.definition import TOOL_DESCRIPTION
    from openhands.tools.terminal import TerminalAction, TerminalObservation, TerminalTool
    from openhands.tools.terminal.descriptions import UNIX_TOOL_DESCRIPTION

    workdir = str(episode["workdir"])
    where = f"\n\nYour current working directory is: {workdir}"
    terminal = TerminalTool(
        action_type=TerminalAction,
        observation_type=TerminalObservation,
        description=UNIX_TOOL_DESCRIPTION + where,
        executor=terminal_executor(channel, workdir, float(episode["command_timeout_s"])),
    )
    editor = FileEditorTool(
        action_type=FileEditorAction,
        observation_type=FileEditorObservation,
        description=TOOL_DESCRIPTION + where,
        executor=file_editor_executor(channel, scratch / "mirror"),
    )
    register_tool("megaflow_terminal", terminal)
    register_tool("megaflow_file_editor", editor)
    llm = LLM(
        model=f"openai/{episode['model']}",
        base_url=episode["base_url"],
        api_key="megaflow",
        extra_headers={episode["trajectory_header"]: episode["trajectory_id"]},
        native_tool_calling=True,
        num_retries=0,
        temperature=episode.get("temperature"),
        max_output_tokens=episode.get("max_output_tokens"),
        usage_id="agent",
    )
    tools = [Tool(name="megaflow_terminal"), Tool(name="megaflow_file_editor")]
    workspace = scratch / "workspace"
    workspace.mkdir()
    conversation = Conversation(
        agent=Agent(llm=llm, tools=tools),
        workspace=str(workspace),
        max_iteration_per_run=int(episode["max_iterations"]),
        visualizer=None,
    )
    try:
        conversation.send_message(str(episode["problem_statement"]))
        conversation.run()
        status = conversation.state.execution_status.value
        errors = [
            e for e in conversation.state.events if type(e).__name__ == "ConversationErrorEvent"
        ]
    finally:
        conversation.close()
    if errors and errors[-1].code == "MaxIterationsReached":
        return {"op": "done", "status": "max_iterations"}
    if errors:
        return {"op": "done", "status": status, "error": f"{errors[-1].code}: {errors[-1].detail}"}
    return {"op": "done", "status": status}


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the SDK's printing goes to stderr, never onto the channel
    sys.stdout = sys.stderr
    channel = Channel(sys.stdin, protocol)
    episode = channel.receive()
    with tempfile.TemporaryDirectory(prefix="megaflow-openhands-") as tmp:
        scratch = Path(tmp)
        os.environ["HOME"] = str(scratch)  # no user-level skills or plugins of the host
        try:
            done = run(episode, channel, scratch)
        except Exception as exc:
            traceback.print_exc()
            done = {"op": "done", "status": "exception", "error": f"{type(exc).__name__}: {exc}"}
    channel.send(done)
    return 0


if __name__ == "__main__":
    sys.exit(main())
