"""The served gateway refuses request bodies over its cap with HTTP 413,
declared (Content-Length) or streamed (chunked), without reading them whole."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import ValidationError

from megaflow.model.config import GatewayConfig
from megaflow.model.gateway import GatewayServer
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend
from megaflow.model.service import ModelService

CAP = 64 * 1024
CHAT = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def gateway() -> AsyncIterator[GatewayServer]:
    service = ModelService("scripted", Router([ScriptedBackend([{"content": "ok"}] * 8)]))
    async with GatewayServer(service, port=0, max_body_bytes=CAP) as gw:
        yield gw


async def _status_line(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.readline(), 10)


async def test_a_body_under_the_cap_is_served(gateway: GatewayServer) -> None:
    async with httpx.AsyncClient(base_url=gateway.base_url) as c:
        res = await c.post("/chat/completions", json=CHAT)
        assert res.status_code == 200, res.text
        assert res.json()["choices"][0]["message"]["content"] == "ok"

        async def pieces() -> AsyncIterator[bytes]:  # no Content-Length: chunked
            body = json.dumps(CHAT).encode()
            for i in range(0, len(body), 7):
                yield body[i : i + 7]

        res = await c.post("/chat/completions", content=pieces())
        assert res.status_code == 200, res.text


async def test_a_declared_length_over_the_cap_is_refused_before_the_body(
    gateway: GatewayServer,
) -> None:
    reader, writer = await asyncio.open_connection(gateway.host, gateway.port)
    try:
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 10737418240\r\n\r\n"
        )  # 10 GiB announced, not one byte of it sent
        await writer.drain()
        assert b" 413 " in await _status_line(reader)
        rest = await asyncio.wait_for(reader.read(), 10)
        assert b"at most 65536 bytes" in rest
    finally:
        writer.close()


async def test_a_streamed_body_over_the_cap_is_cut_off(gateway: GatewayServer) -> None:
    reader, writer = await asyncio.open_connection(gateway.host, gateway.port)
    sent = 0
    try:
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"x" * 4096
        status = b""
        while sent < 64 * 1024 * 1024:  # far more than the cap; the server answers first
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
            try:
                await writer.drain()
                status = await asyncio.wait_for(reader.readline(), 0.01)
            except TimeoutError:
                continue
            except ConnectionError:
                status = await _status_line(reader)
            break
        assert b" 413 " in status, status
        assert sent < 16 * 1024 * 1024, "the server read far past its cap"
    finally:
        writer.close()


async def test_a_streamed_body_over_the_cap_via_httpx(gateway: GatewayServer) -> None:
    async def pieces() -> AsyncIterator[bytes]:
        for _ in range(CAP // 1024 + 8):
            yield b"y" * 1024
            await asyncio.sleep(0)

    async with httpx.AsyncClient(base_url=gateway.base_url) as c:
        try:
            res = await c.post("/chat/completions", content=pieces())
        except httpx.TransportError:
            return  # the server closed the connection mid-upload: also refused
        assert res.status_code == 413
        assert res.json()["error"]["code"] == 413


async def test_a_bad_content_length_is_refused(gateway: GatewayServer) -> None:
    reader, writer = await asyncio.open_connection(gateway.host, gateway.port)
    try:
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n")
        await writer.drain()
        line = await _status_line(reader)
        assert line.split()[1] in (b"400", b"413"), line
    finally:
        writer.close()


def test_the_cap_is_configurable() -> None:
    assert GatewayConfig().max_body_mb == 16
    assert GatewayConfig(max_body_mb=2).max_body_mb == 2
    with pytest.raises(ValidationError):
        GatewayConfig(max_body_mb=0)
