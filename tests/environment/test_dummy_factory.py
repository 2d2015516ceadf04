"""The dummy runtime (for tests elsewhere) and the runtime factory."""

from __future__ import annotations

import io
import tarfile
import typing

import pytest

from megaflow.core.errors import NotFound, SandboxError
from megaflow.environment.abstract import EnvironmentSpec, ExecResult
from megaflow.environment.config import (
    DummyRuntimeConfig,
    EnvironmentConfig,
    LocalRuntimeConfig,
    RuntimeConfig,
)
from megaflow.environment.dummy import DummyRuntime
from megaflow.environment.factory import make_runtime
from megaflow.environment.local import LocalRuntime


async def test_dummy_scripted_builtin_and_files() -> None:
    rt = DummyRuntime(responder=lambda cmd: ExecResult(exit_code=5) if cmd == "grade" else None)
    async with rt:
        sb = await rt.create(EnvironmentSpec(files={"a.txt": "A"}, setup=["echo set"]), owner="t")
        rt.script.append(ExecResult(exit_code=0, stdout="scripted"))
        assert (await sb.exec("anything")).stdout == "scripted"
        assert (await sb.exec("grade")).exit_code == 5
        assert (await sb.exec("cat a.txt")).stdout == "A"
        assert (await sb.exec(["echo", "x", "y"])).stdout == "x y\n"
        assert (await sb.exec("echo 123456", output_cap=3)).truncated
        await sb.write_file("b.txt", b"B")
        tar = await sb.download("b.txt")
        await sb.upload(tar, "copy")
        assert await sb.read_file("copy/b.txt") == b"B"
        await sb.reset()
        with pytest.raises(NotFound):
            await sb.read_file("b.txt")
        assert sb.commands[0] == "echo set"
        await sb.destroy()
        await sb.destroy()
        with pytest.raises(SandboxError):
            await sb.exec("true")
    assert await rt.list() == []


async def test_dummy_upload_reads_tar() -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("d/f")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"f"))
    async with DummyRuntime() as rt:
        sb = await rt.create(EnvironmentSpec())
        await sb.upload(buf.getvalue(), ".")
        assert await sb.read_file("d/f") == b"f"


def test_factory_picks_backends_lazily() -> None:
    assert isinstance(make_runtime(DummyRuntimeConfig()), DummyRuntime)
    assert isinstance(make_runtime(LocalRuntimeConfig()), LocalRuntime)
    cfg = EnvironmentConfig.model_validate({"runtime": {"type": "dummy"}})
    assert isinstance(cfg.runtime, DummyRuntimeConfig)


def test_every_runtime_config_has_its_tag() -> None:
    union = typing.get_args(typing.get_args(RuntimeConfig)[0])
    for member in union:
        tag = member.model_fields["type"].default
        assert typing.get_args(member.model_fields["type"].annotation) == (tag,)
