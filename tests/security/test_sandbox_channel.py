"""The host end of the exec server's pipe trusts no frame: sizes are capped
before anything is read, and replies nobody asked for end the channel."""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from megaflow.core.errors import SandboxError, SandboxTimeout
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime
from megaflow.environment.local.channel import HDR, Channel, frame
from tests.environment.conftest import leak_check, local, local_runtime

__all__ = ["leak_check", "local"]


class FakeWriter:
    """Collects what the channel sends."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    async def drain(self) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


async def _channel(max_frame: int = 1 << 20) -> tuple[Channel, asyncio.StreamReader, list[str]]:
    reader = asyncio.StreamReader()
    violations: list[str] = []
    writer: Any = FakeWriter()
    chan = Channel(reader, writer, "fake", max_frame, violations.append)
    reader.feed_data(frame({"op": "ready", "pid": 2}))
    await chan.wait_ready()
    return chan, reader, violations


@pytest.mark.parametrize("sizes", [(1 << 30, 0), (16, 1 << 30), (2 << 20, 0)])
async def test_oversized_frame_fails_calls_without_allocating(sizes: tuple[int, int]) -> None:
    chan, reader, violations = await _channel()
    call = asyncio.ensure_future(chan.call({"op": "ping"}))
    await asyncio.sleep(0)
    tracemalloc.start()
    try:
        reader.feed_data(HDR.pack(*sizes) + b"\0" * 64)  # a header claiming a huge frame
        with pytest.raises(SandboxError, match=r"protocol violation.*limit"):
            await call
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, peak  # the cap check came before any readexactly
    assert violations
    with pytest.raises(SandboxError):  # the channel stays closed
        await chan.call({"op": "ping"})
    await chan.close()


async def test_a_header_above_one_mib_is_a_violation_in_a_frame_far_under_the_limit() -> None:
    """The header cap holds on its own, not only through ``max_frame``: a
    well-formed reply whose header alone is above 1 MiB is refused although
    the whole frame is far under the frame limit."""
    chan, reader, violations = await _channel(max_frame=64 << 20)
    call = asyncio.ensure_future(chan.call({"op": "ping"}))
    await asyncio.sleep(0)
    reply = frame({"id": 1, "pid": 2, "pad": "x" * (1 << 20)}, b"body")
    hlen, blen = HDR.unpack_from(reply)
    assert hlen > 1 << 20
    assert hlen + blen < 2 << 20  # the limit is 64 MiB
    reader.feed_data(reply)
    with pytest.raises(SandboxError, match=r"protocol violation.*limit"):
        await call
    assert violations
    await chan.close()


async def test_garbage_header_is_a_violation() -> None:
    chan, reader, violations = await _channel()
    call = asyncio.ensure_future(chan.call({"op": "ping"}))
    await asyncio.sleep(0)
    reader.feed_data(HDR.pack(4, 0) + b"\xff\xff\xff\xff")
    with pytest.raises(SandboxError, match="protocol violation"):
        await call
    assert violations
    await chan.close()


@pytest.mark.parametrize("kind", ["unknown id", "second reply", "not a dict"])
async def test_unasked_replies_end_the_channel(kind: str) -> None:
    chan, reader, violations = await _channel()
    first = asyncio.ensure_future(chan.call({"op": "ping"}))
    await asyncio.sleep(0)
    pending = asyncio.ensure_future(chan.call({"op": "ping"}))
    await asyncio.sleep(0)
    if kind == "unknown id":
        reader.feed_data(frame({"id": 999, "exit_code": 0}))
    elif kind == "not a dict":
        reader.feed_data(frame([1, 2]))  # type: ignore[arg-type]
    else:
        reader.feed_data(frame({"id": 1, "pid": 2}))
        assert (await first)[0] == {"id": 1, "pid": 2}
        reader.feed_data(frame({"id": 1, "pid": 2}))  # the same reply again
    with pytest.raises(SandboxError, match="protocol violation"):
        await pending
    assert violations
    await asyncio.gather(first, return_exceptions=True)
    await chan.close()


async def test_a_late_reply_to_a_timed_out_call_is_fine() -> None:
    chan, reader, violations = await _channel()
    with pytest.raises(SandboxTimeout, match="no answer"):
        await chan.call({"op": "ping"}, timeout=0.01)
    reader.feed_data(frame({"id": 1, "pid": 2}))  # arrives after the caller gave up
    call = asyncio.ensure_future(chan.call({"op": "ping"}))
    await asyncio.sleep(0)
    reader.feed_data(frame({"id": 2, "pid": 2}))
    assert (await call)[0]["id"] == 2
    assert violations == []
    await chan.close()


async def test_violation_tears_the_real_sandbox_down(local: LocalRuntime) -> None:
    sb = await local.create(EnvironmentSpec())
    assert sb.channel is not None
    assert sb.proc is not None
    # what a forged frame on the pipe would look like, as if the server wrote it
    sb.channel._reader.feed_data(HDR.pack(1 << 30, 0))
    for _ in range(200):
        if sb._violation_task is not None:
            break
        await asyncio.sleep(0.01)
    assert sb._violation_task is not None
    await asyncio.wait_for(sb._violation_task, 10)
    assert sb.info.state == "stopped"
    assert sb.violation is not None
    assert "limit" in sb.violation
    assert sb.proc.returncode is not None
    assert not sb.dir.exists()
    with pytest.raises(SandboxError):
        await sb.exec("true")
    assert await local.list() == []


async def test_huge_output_and_files_stay_under_the_frame_cap(tmp_path: Path) -> None:
    rt = local_runtime(tmp_path, max_frame_mb=1)
    async with rt, await rt.create(EnvironmentSpec()) as sb:
        flood = await sb.exec("head -c 5000000 /dev/zero | tr '\\0' x", output_cap=1 << 30)
        assert flood.truncated
        assert len(flood.stdout) < 1 << 20
        await sb.exec("head -c 3000000 /dev/zero > big")
        with pytest.raises(SandboxError, match="frame limit"):
            await sb.read_file("big")
        with pytest.raises(SandboxError, match="frame limit"):
            await sb.download("big")
        assert (await sb.exec("echo usable")).stdout == "usable\n"


async def test_both_streams_flooded_still_fit_one_frame_with_room_for_the_header(
    tmp_path: Path,
) -> None:
    """The server caps each stream so that both, and the reply's header, fit one
    frame: a command flooding stdout and stderr at once gets its output
    truncated, not an oversized reply."""
    rt = local_runtime(tmp_path, max_frame_mb=1)
    flood = "head -c 3000000 /dev/zero | tr '\\0' x; head -c 3000000 /dev/zero | tr '\\0' y >&2"
    async with rt, await rt.create(EnvironmentSpec()) as sb:
        both = await sb.exec(flood, output_cap=1 << 30)
        assert both.truncated
        assert set(both.stdout) == {"x"}
        assert set(both.stderr) == {"y"}
        assert len(both.stdout) == len(both.stderr)
        assert len(both.stdout) + len(both.stderr) <= (1 << 20) - (1 << 16)
        assert (await sb.exec("echo usable")).stdout == "usable\n"
