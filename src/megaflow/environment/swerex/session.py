"""A SWE-ReX bash session kept alive in a sandbox and driven by one-shot execs.

SWE-ReX's own sessions type into a shell on a terminal. A MegaFlow sandbox
offers ``exec`` (one command, its output, its exit code), so a session here
is a long-lived ``bash`` in the sandbox that reads commands from a FIFO;
``session.sh`` (copied into the sandbox) starts it and, in one exec per
call, hands it a command and waits for that command's exit status. State
that SWE-agent relies on persists between calls: the working directory,
exported variables, shell functions, background jobs.

What differs from a terminal: a command's stdin is ``/dev/null`` (a program
waiting for input ends at once instead of hanging until the timeout),
stdout and stderr arrive as one stream, and ``expect`` strings are not
matched. Interactive commands (``is_interactive_command``) are refused.
"""

from __future__ import annotations

import asyncio
import functools
import shlex
from importlib import resources

from swerex.exceptions import (
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    NonZeroExitCodeError,
    SwerexException,
)
from swerex.runtime.abstract import (
    BashAction,
    BashInterruptAction,
    BashObservation,
    CreateBashSessionRequest,
    CreateBashSessionResponse,
)

from megaflow.environment.abstract import Sandbox

HOST_GRACE_S = 10.0
"""How much longer than the command's own timeout an exec may take."""
STARTUP_FLOOR_S = 30.0
"""Least time a session's startup files get: SWE-ReX's default ``startup_timeout``
(1 s) is tight for two sandbox calls on a loaded machine."""


class SessionExitedError(SwerexException, RuntimeError):
    """The session's shell is gone (the command ran ``exit``, or it was killed)."""


class InteractiveCommandError(SwerexException, NotImplementedError):
    """Interactive commands need a terminal, which this runtime does not keep."""


@functools.cache
def script() -> str:
    """The text of ``session.sh``."""
    return resources.files(__package__).joinpath("session.sh").read_text()


def _micros(timeout: float | None) -> str:
    return "0" if timeout is None else str(max(1, int(timeout * 1e6)))


class ShellSession:
    """One named session: a bash in the sandbox under ``directory``."""

    def __init__(self, sandbox: Sandbox, directory: str, script_path: str) -> None:
        self.sandbox = sandbox
        self.directory = directory
        self.script_path = script_path
        self.pid = 0
        self._n = 0
        self._pending: int | None = None
        """The command that timed out and may still be running."""
        self._lock = asyncio.Lock()

    async def _call(self, *args: str, timeout: float | None) -> tuple[str, str]:
        """Run ``session.sh`` with ``args``: its status line and the rest."""
        argv = ["bash", self.script_path, args[0], self.directory, *args[1:]]
        limit = None if timeout is None else timeout + HOST_GRACE_S
        res = await self.sandbox.exec(argv, timeout=limit)
        if res.timed_out or res.exit_code != 0:
            raise SwerexException(
                f"session {self.directory}: {args[0]} failed (exit {res.exit_code}, "
                f"timed out: {res.timed_out}): {res.stderr.strip() or res.stdout.strip()}"
            )
        status, _, output = res.stdout.partition("\n")
        return status, output

    async def start(self, request: CreateBashSessionRequest) -> CreateBashSessionResponse:
        timeout = max(request.startup_timeout, STARTUP_FLOOR_S)
        status, _ = await self._call("start", timeout=timeout)
        self.pid = int(status)
        output = ""
        if request.startup_source:
            sources = " ; ".join(f"source {shlex.quote(p)}" for p in request.startup_source)
            obs = await self.run(BashAction(command=sources, timeout=timeout, check="silent"))
            output = obs.output
        return CreateBashSessionResponse(output=output)

    async def run(self, action: BashAction) -> BashObservation:
        if action.is_interactive_command or action.is_interactive_quit:
            raise InteractiveCommandError(
                f"interactive command {action.command!r}: sessions in a MegaFlow sandbox "
                "have no terminal; run the program non-interactively"
            )
        async with self._lock:
            self._n += 1
            n = str(self._n)
            await self.sandbox.write_file(f"{self.directory}/c.{n}", action.command.encode())
            status, output = await self._call(
                "run", n, _micros(action.timeout), timeout=action.timeout
            )
            if status == "syntax":
                raise BashIncorrectSyntaxError(
                    f"Error while checking bash command \n{action.command!r}\n"
                    f"---- Stderr ----\n{output}",
                    extra_info={"bash_stdout": "", "bash_stderr": output},
                )
            if status == "timeout":
                self._pending = self._n
                raise CommandTimeoutError(
                    f"timeout after {action.timeout} seconds while running command "
                    f"{action.command!r}"
                )
            self._pending = None
            code = self._exit_code(status, action.command, output)
        if action.check == "raise" and code != 0:
            msg = (
                f"Command {action.command!r} failed with exit code {code}. "
                f"Here is the output:\n{output!r}"
            )
            raise NonZeroExitCodeError(f"{action.error_msg}: {msg}" if action.error_msg else msg)
        return BashObservation(output=output, exit_code=None if action.check == "ignore" else code)

    def _exit_code(self, status: str, command: str, output: str) -> int:
        if status.startswith("exited"):
            raise SessionExitedError(
                f"the shell of session {self.directory} exited ({status}) while running "
                f"{command!r}; close the session and create a new one. Output:\n{output}"
            )
        return int(status)

    async def interrupt(self, action: BashInterruptAction) -> BashObservation:
        """Stop the command that timed out: SIGINT to the session's process
        group (the shell survives it), ``n_retry`` times, then SIGKILL to all
        the shell's descendants."""
        async with self._lock:
            if self._pending is None:
                return BashObservation(output="", exit_code=0)
            n = str(self._pending)
            budget = action.timeout * action.n_retry + 1.0
            status, output = await self._call(
                "interrupt",
                n,
                _micros(action.timeout),
                str(action.n_retry),
                timeout=budget,
            )
            if status == "timeout":
                raise SwerexException(f"session {self.directory}: could not interrupt command")
            self._pending = None
            return BashObservation(output=output.strip(), exit_code=self._exit_code(status, "", ""))

    async def close(self) -> None:
        await self._call("close", timeout=10.0)
