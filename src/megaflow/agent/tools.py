"""The builtin agent's tools, run against a MegaFlow sandbox.

Each tool returns an :class:`Observation`. A tool used wrongly (a missing
argument, a file that does not exist, an ``edit`` whose ``old_str`` is not
found exactly once) answers with an error message the model can act on; only
sandbox failures (SandboxError) escape, as infrastructure errors.
"""

from __future__ import annotations

import posixpath
import time
from typing import Any

from megaflow.core.errors import SandboxError
from megaflow.core.trajectory import Observation
from megaflow.environment.abstract import Sandbox


def _fn(name: str, description: str, **props: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
                "required": list(props),
            },
        },
    }


TOOLS: list[dict[str, Any]] = [
    _fn("bash", "Run a shell command in the repository directory.", command="The command."),
    _fn("read_file", "Read a text file.", path="File path, absolute or relative."),
    _fn(
        "edit",
        "Replace the one occurrence of old_str in a file with new_str.",
        path="File path.",
        old_str="Exact text to replace; must occur exactly once.",
        new_str="Replacement text.",
    ),
    _fn("write_file", "Create or overwrite a file.", path="File path.", content="File content."),
    _fn("submit", "Finish: the current state of the repository is your answer."),
]
TOOL_NAMES = frozenset(t["function"]["name"] for t in TOOLS)


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and the tail of a long text, with a marker of what was cut."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters truncated ...]\n{text[-half:]}", True


class ToolError(Exception):
    """A tool was used wrongly; the message goes back to the model."""


class Toolbox:
    def __init__(self, sandbox: Sandbox, workdir: str, command_timeout_s: float, limit: int):
        self.sandbox = sandbox
        self.workdir = workdir
        self.command_timeout_s = command_timeout_s
        self.limit = limit

    def _path(self, args: dict[str, Any]) -> str:
        path = _arg(args, "path")
        return posixpath.normpath(posixpath.join(self.workdir, path))

    async def run(self, tool: str, args: dict[str, Any]) -> Observation:
        started = time.time()
        try:
            content, code = await getattr(self, f"_{tool}")(args)
        except ToolError as exc:
            content, code = f"error: {exc}", 1
        text, cut = truncate(content, self.limit)
        return Observation(
            content=text,
            exit_code=code,
            truncated=cut,
            started_at=started,
            duration_s=time.time() - started,
        )

    async def _bash(self, args: dict[str, Any]) -> tuple[str, int]:
        res = await self.sandbox.exec(
            _arg(args, "command"), timeout=self.command_timeout_s, cwd=self.workdir
        )
        out = res.stdout + (f"\n[stderr]\n{res.stderr}" if res.stderr else "")
        if res.timed_out:
            out += f"\n[command killed after {self.command_timeout_s:g}s]"
        if res.truncated:
            out += "\n[output cut by the sandbox]"
        return f"exit code {res.exit_code}\n{out}", res.exit_code

    async def _read(self, path: str) -> str:
        try:
            data = await self.sandbox.read_file(path)
        except (FileNotFoundError, KeyError) as exc:
            raise ToolError(f"no such file: {path}") from exc
        except SandboxError:
            # A directory or unreadable path is the model's mistake, not the
            # sandbox's; tell them apart with a plain test (which itself raises
            # if the sandbox is really broken).
            check = await self.sandbox.exec(["test", "-f", path, "-a", "-r", path], timeout=30)
            if check.exit_code != 0:
                raise ToolError(f"{path} is not a readable file") from None
            raise
        return data.decode("utf-8", errors="replace")

    async def _read_file(self, args: dict[str, Any]) -> tuple[str, int]:
        return await self._read(self._path(args)), 0

    async def _write_file(self, args: dict[str, Any]) -> tuple[str, int]:
        path = self._path(args)
        content = _arg(args, "content", allow_empty=True)
        await self.sandbox.exec(["mkdir", "-p", posixpath.dirname(path)], timeout=30)
        await self.sandbox.write_file(path, content.encode())
        return f"wrote {len(content)} characters to {path}", 0

    async def _edit(self, args: dict[str, Any]) -> tuple[str, int]:
        path = self._path(args)
        old, new = _arg(args, "old_str"), _arg(args, "new_str", allow_empty=True)
        text = await self._read(path)
        count = text.count(old)
        if count != 1:
            where = "not found" if count == 0 else f"found {count} times"
            raise ToolError(f"old_str {where} in {path}; it must occur exactly once")
        await self.sandbox.write_file(path, text.replace(old, new).encode())
        return f"edited {path}", 0

    async def _submit(self, args: dict[str, Any]) -> tuple[str, int]:
        return "submitted", 0


def _arg(args: dict[str, Any], key: str, *, allow_empty: bool = False) -> str:
    value = args.get(key)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise ToolError(f"argument {key!r} is required and must be a string")
    return value
