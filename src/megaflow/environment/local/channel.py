"""The host's end of the pipe to a sandbox's exec server.

Requests are framed as in :mod:`megaflow.environment.local.server`; many may
be in flight at once, and one reader task matches replies to callers by id.
When the server dies every waiting call fails with ``SandboxError``.

The host never trusts a frame's size: header and body lengths are checked
against caps before anything is read, so a broken or hostile server cannot
make the host allocate more than ``max_frame`` bytes. An oversized or
malformed frame, a reply to no outstanding request, or a second reply to one,
is a protocol violation: every waiting call fails and ``on_violation`` runs
(the sandbox tears itself down).
"""

from __future__ import annotations

import asyncio
import errno
import marshal
import struct
from collections.abc import Callable
from typing import Any

from megaflow.core.errors import NotFound, SandboxError, SandboxFileError, SandboxTimeout

HDR = struct.Struct(">II")
MARSHAL_VERSION = 4
Reply = tuple[dict[str, Any], bytes]
MAX_HEADER = 1 << 20  # headers are small dicts; the server keeps them below 64 KiB


class ProtocolError(Exception):
    """The server sent something no correct server sends."""


def frame(head: dict[str, Any], body: bytes = b"") -> bytes:
    raw = marshal.dumps(head, MARSHAL_VERSION)
    return HDR.pack(len(raw), len(body)) + raw + body


class Channel:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        name: str,
        max_frame: int = 64 << 20,
        on_violation: Callable[[str], None] | None = None,
    ):
        self._reader = reader
        self.max_frame = max_frame
        self._on_violation = on_violation
        self._abandoned: set[int] = set()  # timed out or cancelled: a late reply is fine
        self._writer = writer
        self._name = name
        self._next = 0
        self._waiting: dict[int, asyncio.Future[Reply]] = {}
        self._streams: dict[int, asyncio.Queue[Reply | None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed: str | None = None

    async def _read_frame(self) -> Reply:
        hlen, blen = HDR.unpack(await self._reader.readexactly(HDR.size))
        if hlen > MAX_HEADER or hlen + blen > self.max_frame:
            raise ProtocolError(
                f"frame of {hlen} + {blen} bytes is above the {self.max_frame} byte limit"
            )
        try:
            head = marshal.loads(await self._reader.readexactly(hlen))
        except (ValueError, EOFError, TypeError) as e:
            raise ProtocolError(f"unreadable frame header ({e})") from e
        if not isinstance(head, dict) or not isinstance(head.get("id", 0), int):
            raise ProtocolError(f"frame header is not a request reply: {type(head).__name__}")
        body = await self._reader.readexactly(blen) if blen else b""
        return head, body

    async def wait_ready(self) -> dict[str, Any]:
        """Wait for the server's hello, then start matching replies."""
        try:
            head, _ = await self._read_frame()
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            raise SandboxError(f"sandbox {self._name}: exec server exited while starting") from e
        except ProtocolError as e:
            raise SandboxError(f"sandbox {self._name}: bad hello: {e}") from e
        if head.get("op") != "ready":
            raise SandboxError(f"sandbox {self._name}: unexpected hello {head!r}")
        self._task = asyncio.get_running_loop().create_task(self._read_loop())
        return head

    async def _read_loop(self) -> None:
        try:
            while True:
                head, body = await self._read_frame()
                rid = head.get("id", -1)
                stream = self._streams.get(rid)
                if stream is not None:  # a terminal: output frames, then its exit
                    stream.put_nowait((head, body))
                    if "out" not in head:
                        del self._streams[rid]
                    continue
                fut = self._waiting.pop(rid, None)
                if fut is not None:  # outstanding; a caller cancelled meanwhile drops it
                    if not fut.done():
                        fut.set_result((head, body))
                elif rid in self._abandoned:
                    self._abandoned.discard(rid)
                else:
                    raise ProtocolError(f"reply to request {rid!r}, which is not outstanding")
        except (asyncio.IncompleteReadError, ConnectionError):
            self._fail("the sandbox's exec server exited (killed, or out of memory)")
        except ProtocolError as e:
            self._fail(f"protocol violation by the exec server: {e}")
            if self._on_violation is not None:
                self._on_violation(str(e))

    def _fail(self, reason: str) -> None:
        self._closed = reason
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(SandboxError(f"sandbox {self._name}: {reason}"))
        self._waiting.clear()
        for stream in self._streams.values():
            stream.put_nowait(None)
        self._streams.clear()

    async def call(
        self, head: dict[str, Any], body: bytes = b"", timeout: float | None = None
    ) -> Reply:
        """Send one request and wait for its reply. Errors the server reports
        for the request come back as ``NotFound`` (no such file) or ``SandboxError``."""
        if self._closed is not None:
            raise SandboxError(f"sandbox {self._name}: {self._closed}")
        self._next += 1
        rid = head["id"] = self._next
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        try:
            self._writer.write(frame(head, body))
            await self._writer.drain()
            # asyncio.timeout, not wait_for: on 3.11 wait_for returns (or raises) the
            # reply when a cancel and the reply land in the same loop turn, and the
            # caller's cancellation is lost (a task past its deadline went on, or saw
            # its sandbox's loss instead of its deadline).
            async with asyncio.timeout(timeout):
                reply, data = await fut
        except TimeoutError as e:
            self._abandoned.add(rid)
            raise SandboxTimeout(
                f"sandbox {self._name}: no answer to {head['op']!r} within {timeout} s"
            ) from e
        except (ConnectionError, RuntimeError) as e:
            raise SandboxError(f"sandbox {self._name}: exec server is gone ({e})") from e
        except asyncio.CancelledError:
            self._abandoned.add(rid)
            raise
        finally:
            self._waiting.pop(rid, None)
        if "error" in reply:
            where = head.get("path") or head.get("dest") or ""
            if reply.get("errno") == errno.ENOENT:
                raise NotFound(f"sandbox {self._name}: no such file {where!r}")
            raise SandboxFileError(
                f"sandbox {self._name}: {head['op']} {where!r}: {reply['error']}"
            )
        return reply, data

    def _send(self, head: dict[str, Any], body: bytes = b"") -> int:
        if self._closed is not None:
            raise SandboxError(f"sandbox {self._name}: {self._closed}")
        self._next += 1
        head["id"] = self._next
        self._writer.write(frame(head, body))
        return self._next

    def open_stream(self, head: dict[str, Any]) -> tuple[int, asyncio.Queue[Reply | None]]:
        """Send a request whose replies are a stream of frames (a terminal); the
        queue gets each frame, and None if the sandbox goes away."""
        queue: asyncio.Queue[Reply | None] = asyncio.Queue()
        if self._closed is None:
            self._streams[self._next + 1] = queue
        return self._send(head), queue

    def notify(self, head: dict[str, Any], body: bytes = b"") -> None:
        """Send a request that gets no reply (not even an error)."""
        self._send({**head, "noreply": True}, body)

    async def close(self) -> None:
        self._fail("the sandbox was destroyed")
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if not self._writer.is_closing():
            self._writer.close()
