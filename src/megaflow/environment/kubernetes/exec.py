"""Running commands in a sandbox's pod over the API server's exec stream.

The client's streaming API (``kubernetes.stream.stream`` over
``connect_get_namespaced_pod_exec``, binary frames) carries stdin, stdout,
stderr and the status channel; :func:`run_exec` reads it on a stream thread
until the command ends, the deadline passes or the caller stops it, keeping
at most ``cap`` bytes per stream (the rest is read and dropped).

The exec API has no working directory or environment, so every command
runs through :func:`wrap`: a shell that enters the directory and ``exec``\\ s
``env`` with the variables and the ``MEGAFLOW_EXEC_ID`` tag. A timeout kills
what the command started the way the container runtime does: a second exec
runs the shared kill script over every process carrying the tag, and their
process groups (:mod:`megaflow.environment.container.scripts`). Files travel
as tar over exec: ``head -c N | tar -x`` reads exactly the archive's bytes
from stdin, so no end-of-input signal is needed on servers without the v5
stream protocol; downloads are ``tar -c`` on stdout.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes.stream import stream

from megaflow.environment.container.scripts import EXEC_TAG
from megaflow.environment.kubernetes.pods import CONTAINER

STDOUT, STDERR, STATUS = 1, 2, 3
CHUNK = 256 * 1024  # bytes per stdin frame
POLL_S = 0.2  # longest wait for a frame before the deadline and stop flag are checked
WRAP = 'cd "$1" || exit 126; shift; exec env "$@"'
UNTAR = 'mkdir -p "$1" && head -c "$2" | tar -xf - -C "$1"'


@dataclass
class Output:
    """Capped stdout and stderr of one exec, and how it ended."""

    cap: int
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    code: int | None = None
    """The exit code from the status channel; None if it never came."""
    timed_out: bool = False
    failure: str = ""
    """The API server's message when the command could not run (no such binary...)."""

    def take(self, channel: int, data: bytes) -> None:
        buf = self.err if channel == STDERR else self.out
        room = self.cap - len(buf)
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        buf += data


def wrap(argv: list[str], env: dict[str, str], workdir: str, tag: str) -> list[str]:
    """``argv`` run in ``workdir`` with ``env`` and the exec tag."""
    pairs = [f"{k}={v}" for k, v in sorted(env.items())] + [f"{EXEC_TAG}={tag}"]
    return ["/bin/sh", "-c", WRAP, "sh", workdir, *pairs, *argv]


def untar_argv(dest: str, size: int) -> list[str]:
    """The command that unpacks a ``size``-byte tar from stdin into ``dest``."""
    return ["/bin/sh", "-c", UNTAR, "sh", dest, str(size)]


def exit_status(raw: bytes | str) -> tuple[int | None, str]:
    """(exit code, failure message) from the status channel's ``Status`` object."""
    try:
        status = yaml.safe_load(raw) or {}
    except yaml.YAMLError:
        return None, str(raw)[:500]
    if not isinstance(status, dict):
        return None, str(raw)[:500]
    if status.get("status") == "Success":
        return 0, ""
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message")), ""
            except (TypeError, ValueError):
                break
    return None, str(status.get("message") or raw)[:500]


def open_exec(api: Any, namespace: str, pod: str, argv: list[str], stdin: bool) -> Any:
    """The exec's websocket client (blocking)."""
    return stream(
        api.connect_get_namespaced_pod_exec, pod, namespace, command=argv, container=CONTAINER,
        stdin=stdin, stdout=True, stderr=True, tty=False, _preload_content=False, binary=True,
    )  # fmt: skip


def run_exec(
    api: Any,
    namespace: str,
    pod: str,
    argv: list[str],
    output: Output,
    *,
    stdin: bytes | None = None,
    timeout: float | None = None,
    stop: threading.Event | None = None,
) -> Output:
    """Run ``argv`` in ``pod`` and read it to its end (blocking). Past ``timeout``
    seconds, or once ``stop`` is set, it returns with ``timed_out`` set; killing
    what the command left running is the caller's part. Raises what the client
    raises when the exec cannot be opened (``ApiException``)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    ws = open_exec(api, namespace, pod, argv, stdin is not None)
    status = b""
    try:
        if stdin is not None:
            for i in range(0, len(stdin), CHUNK):
                ws.write_stdin(stdin[i : i + CHUNK])
            ws.close_channel(0)
        while ws.is_open():
            if (deadline is not None and time.monotonic() >= deadline) or (
                stop is not None and stop.is_set()
            ):
                output.timed_out = True
                break
            wait = (
                POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
            )
            ws.update(timeout=wait)
            for channel in (STDOUT, STDERR):
                data = ws.read_channel(channel)
                if data:
                    output.take(channel, data)
            status += ws.read_channel(STATUS) or b""
        for channel in (STDOUT, STDERR):
            data = ws.read_channel(channel)
            if data:
                output.take(channel, data)
        status += ws.read_channel(STATUS) or b""
    finally:
        ws.close()
    if not output.timed_out:
        output.code, output.failure = exit_status(status) if status else (None, "")
    return output
