"""MegaFlow sandboxes as SWE-ReX runtimes, driven through SWE-ReX's own API:
its request types, its exceptions, and its ``RemoteRuntime`` HTTP client."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from swerex.exceptions import (
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
)
from swerex.runtime.abstract import (
    AbstractRuntime,
    BashAction,
    BashInterruptAction,
    CloseBashSessionRequest,
    Command,
    CreateBashSessionRequest,
    ReadFileRequest,
    UploadRequest,
    WriteFileRequest,
)
from swerex.runtime.remote import RemoteRuntime

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import PoolConfig
from megaflow.environment.local import LocalRuntime
from megaflow.environment.pool import SandboxPool
from megaflow.environment.swerex import SandboxDeployment
from megaflow.environment.swerex.server import SwerexServer
from megaflow.environment.swerex.session import SessionExitedError
from tests.environment.conftest import local_runtime


@pytest.fixture
async def deployment(local: LocalRuntime) -> AsyncIterator[SandboxDeployment]:
    d = SandboxDeployment.on_runtime(local, EnvironmentSpec(), owner="swerex-test")
    await d.start()
    try:
        yield d
    finally:
        await d.stop()


def run(command: str, **kw: object) -> BashAction:
    return BashAction(command=command, **kw)  # type: ignore[arg-type]


async def check_sessions(rt: AbstractRuntime) -> None:
    """What SWE-agent relies on of a session, through any runtime."""
    await rt.create_session(CreateBashSessionRequest())
    await rt.create_session(CreateBashSessionRequest(session="other"))
    with pytest.raises(SessionExistsError):
        await rt.create_session(CreateBashSessionRequest())
    await rt.run_in_session(run("cd /tmp && export GREETING=hello && f() { echo f:$1; }"))
    obs = await rt.run_in_session(run("pwd; echo $GREETING; f x; echo oops >&2"))
    assert obs.output == "/tmp\nhello\nf:x\noops\n"
    assert obs.exit_code == 0
    other = await rt.run_in_session(run("pwd; echo ${GREETING:-unset}", session="other"))
    assert other.output == "/workspace\nunset\n"
    # multi-line input, heredocs included, is one command
    obs = await rt.run_in_session(run("cat <<'EOF' > notes.txt\na\nb\nEOF\nwc -l < notes.txt"))
    assert obs.output.strip() == "2"
    assert (await rt.run_in_session(run("(exit 3)", check="silent"))).exit_code == 3
    assert (await rt.run_in_session(run("false", check="ignore"))).exit_code is None
    with pytest.raises(NonZeroExitCodeError, match="exit code 4"):
        await rt.run_in_session(run("(exit 4)", error_msg="setup"))
    with pytest.raises(BashIncorrectSyntaxError):
        await rt.run_in_session(run("if then fi"))
    with pytest.raises(SessionDoesNotExistError):
        await rt.run_in_session(run("true", session="nope"))
    await rt.close_session(CloseBashSessionRequest(session="other"))
    with pytest.raises(SessionDoesNotExistError):
        await rt.run_in_session(run("true", session="other"))


async def check_files(rt: AbstractRuntime, tmp_path: Path) -> None:
    await rt.write_file(WriteFileRequest(path="/workspace/pkg/mod.py", content="X = 1\n"))
    assert (await rt.read_file(ReadFileRequest(path="pkg/mod.py"))).content == "X = 1\n"
    with pytest.raises(FileNotFoundError):
        await rt.read_file(ReadFileRequest(path="/workspace/missing.txt"))
    tools = tmp_path / "tools"
    (tools / "bin").mkdir(parents=True)
    (tools / "bin" / "hello").write_text("#!/bin/sh\necho hello from tool\n")
    (tools / "bin" / "hello").chmod(0o755)
    await rt.upload(UploadRequest(source_path=str(tools), target_path="/workspace/t/tools"))
    single = tmp_path / "single.txt"
    single.write_text("one file\n")
    await rt.upload(UploadRequest(source_path=str(single), target_path="/workspace/t"))
    out = await rt.execute(
        Command(command="/workspace/t/tools/bin/hello; cat t/single.txt", shell=True)
    )
    assert (out.stdout, out.exit_code) == ("hello from tool\none file\n", 0)


async def test_sessions_commands_and_files_in_a_local_sandbox(
    deployment: SandboxDeployment, tmp_path: Path
) -> None:
    rt = deployment.runtime
    assert await rt.is_alive()
    await check_sessions(rt)
    await check_files(rt, tmp_path)


async def test_sessions_started_at_once_each_run_their_first_command(
    deployment: SandboxDeployment,
) -> None:
    """The first line a new shell reads is written before it runs: on a busy host
    it must not be lost (it sets up where every command's status goes). A race:
    before the fix this lost a line in about one run in four, and never since."""
    rt = deployment.runtime
    names = [f"s{i}" for i in range(32)]
    spin = "import time\nend = time.time() + 20\nwhile time.time() < end: pass"
    busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(8)]  # a busy host
    try:
        await asyncio.gather(
            *(rt.create_session(CreateBashSessionRequest(session=n, startup_source=["/dev/null"]))
              for n in names)
        )  # fmt: skip
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    outs = await asyncio.gather(*(rt.run_in_session(run("echo $$", session=n)) for n in names))
    assert len({o.output for o in outs}) == len(names)
    assert all(o.exit_code == 0 for o in outs)


async def test_timeout_interrupt_and_exit(deployment: SandboxDeployment) -> None:
    rt = deployment.runtime
    await rt.create_session(CreateBashSessionRequest())
    await rt.run_in_session(run("export KEPT=yes"))
    with pytest.raises(CommandTimeoutError):
        await rt.run_in_session(run("echo started; sleep 30; echo never", timeout=2))
    # generous waits: on a loaded machine SIGINT may take a while to land
    obs = await rt.run_in_session(BashInterruptAction(timeout=10))
    assert obs.output == "started"
    assert obs.exit_code == 130
    # a command that ignores SIGINT is killed; the shell and its state survive
    with pytest.raises(CommandTimeoutError):
        await rt.run_in_session(run("trap '' INT; sleep 30", timeout=0.3))
    obs = await rt.run_in_session(BashInterruptAction(timeout=0.2, n_retry=1))
    assert obs.exit_code == 137
    assert (await rt.run_in_session(run("echo $KEPT"))).output == "yes\n"
    with pytest.raises(SessionExitedError, match="exited"):
        await rt.run_in_session(run("exit 7"))
    await rt.close_session(CloseBashSessionRequest())


async def test_execute_is_a_subprocess(deployment: SandboxDeployment) -> None:
    rt = deployment.runtime
    out = await rt.execute(
        Command(command=["sh", "-c", "echo $V; pwd; echo e >&2"], env={"V": "1"}, cwd="/tmp")
    )
    assert (out.stdout, out.stderr, out.exit_code) == ("1\n/tmp\n", "e\n", 0)
    merged = await rt.execute(
        Command(command="echo a; echo b >&2", shell=True, merge_output_streams=True)
    )
    assert (merged.stdout, merged.stderr) == ("a\nb\n", "")
    assert (await rt.execute(Command(command=["false"]))).exit_code == 1
    with pytest.raises(NonZeroExitCodeError):
        await rt.execute(Command(command=["false"], check=True))
    with pytest.raises(CommandTimeoutError):
        await rt.execute(Command(command=["sleep", "10"], timeout=0.3))


async def test_stop_destroys_the_sandbox_it_created(local: LocalRuntime) -> None:
    d = SandboxDeployment.on_runtime(local, EnvironmentSpec())
    assert not await d.is_alive()
    await d.start()
    sandbox_id = d.sandbox.id
    await d.runtime.create_session(CreateBashSessionRequest())
    await d.stop()
    await d.stop()  # idempotent
    assert sandbox_id not in {i.id for i in await local.list()}


async def test_pool_and_caller_sandboxes_are_handed_back(local: LocalRuntime) -> None:
    pool = SandboxPool(local, mode="persistent", cfg=PoolConfig(min=1, max=1, warm_share=0))
    try:
        d = SandboxDeployment.on_pool(pool, EnvironmentSpec())
        await d.start()
        first = d.sandbox.id
        await d.runtime.execute(Command(command="touch /workspace/dirty", shell=True))
        await d.stop()
        await d.start()
        assert d.sandbox.id == first  # the same sandbox, reset by the pool
        gone = await d.runtime.execute(Command(command=["test", "-e", "/workspace/dirty"]))
        assert gone.exit_code == 1
        await d.stop()
    finally:
        await pool.stop()
    async with await local.create(EnvironmentSpec()) as sandbox:
        d = SandboxDeployment.on_sandbox(sandbox)
        await d.start()
        await d.runtime.create_session(CreateBashSessionRequest())
        await d.stop()
        assert (await sandbox.exec("echo still here")).stdout == "still here\n"


async def test_swerex_remote_client_through_the_server(
    deployment: SandboxDeployment, tmp_path: Path
) -> None:
    async with SwerexServer(deployment.runtime, auth_token="secret") as server:
        client = RemoteRuntime(host=server.url, auth_token="secret", timeout=5)
        assert await client.is_alive()
        await check_sessions(client)
        await check_files(client, tmp_path)
        with pytest.raises(CommandTimeoutError):
            await client.run_in_session(run("sleep 30", timeout=1))
        interrupt = BashInterruptAction(timeout=10)
        assert (await client.run_in_session(interrupt)).exit_code == 130
        await client.close()
        assert deployment.runtime.sessions == {}
        intruder = RemoteRuntime(host=server.url, auth_token="wrong", timeout=5)
        assert not await intruder.is_alive()


@pytest.fixture
def loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in another thread, as MegaFlow's would beside SWE-agent."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_swe_agent_calling_pattern(loop_thread: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    """SWE-agent's SWEEnv wraps each call in its own ``asyncio.run``."""
    rt = local_runtime(tmp_path)
    asyncio.run_coroutine_threadsafe(rt.start(), loop_thread).result(30)
    try:
        d = SandboxDeployment.on_runtime(rt, EnvironmentSpec(), loop=loop_thread)
        asyncio.run(d.start())
        request = CreateBashSessionRequest(startup_source=["/root/.bashrc"])
        asyncio.run(d.runtime.create_session(request))
        asyncio.run(d.runtime.run_in_session(run("export LANG=C.UTF-8 && cd /tmp")))
        obs = asyncio.run(d.runtime.run_in_session(run("echo $LANG $PWD", check="silent")))
        assert (obs.output, obs.exit_code) == ("C.UTF-8 /tmp\n", 0)
        asyncio.run(d.stop())
    finally:
        asyncio.run_coroutine_threadsafe(rt.stop(), loop_thread).result(30)


async def test_swe_agent_remote_deployment_against_the_cli(tmp_path: Path) -> None:
    """``megaflow sandbox swerex`` and the deployment SWE-agent builds from
    ``--env.deployment.type=remote`` (SWE-ReX's own RemoteDeployment)."""
    import signal

    from swerex.deployment.config import RemoteDeploymentConfig

    megaflow = Path(sys.executable).with_name("megaflow")
    root = tmp_path / "cli-root"
    cmd = [str(megaflow), "sandbox", "swerex", "--port", "0", "--token", "k", "--root", str(root)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [await asyncio.to_thread(proc.stdout.readline) for _ in range(3)]
        info = dict(line.strip().split("=", 1) for line in lines)
        config = RemoteDeploymentConfig(host=info["host"], port=int(info["port"]), auth_token="k")
        deployment = config.get_deployment()
        await deployment.start()
        rt = deployment.runtime
        await rt.create_session(CreateBashSessionRequest(startup_source=["/root/.bashrc"]))
        obs = await rt.run_in_session(run("cd /tmp && echo in $PWD", check="silent"))
        assert (obs.output, obs.exit_code) == ("in /tmp\n", 0)
        await deployment.stop()
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, err
    assert not list((root / "boxes").iterdir())
