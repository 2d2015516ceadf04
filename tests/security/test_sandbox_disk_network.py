"""disk_mb is a real limit; the three network modes are what they say."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from megaflow.core.errors import SandboxStartError
from megaflow.environment.abstract import EnvironmentSpec, SandboxResources
from megaflow.environment.local import LocalRuntime
from tests.environment.conftest import leak_check, local, mounts

__all__ = ["leak_check", "local"]


def disk(mb: int, **fields: object) -> EnvironmentSpec:
    return EnvironmentSpec(resources=SandboxResources(disk_mb=mb), **fields)  # type: ignore[arg-type]


async def test_writing_past_disk_mb_fails_and_the_sandbox_carries_on(local: LocalRuntime) -> None:
    async with await local.create(disk(8, files={"keep.txt": "kept"})) as sb:
        assert any(str(sb.dir) in m for m in mounts(sb.dir))  # a tmpfs of its own
        big = await sb.exec("head -c 20000000 /dev/zero > big", timeout=30)
        assert big.exit_code != 0
        assert "No space left on device" in big.stderr
        # /tmp and the home directory share the same budget
        tmp = await sb.exec("head -c 20000000 /dev/zero > /tmp/big", timeout=30)
        assert "No space left on device" in tmp.stderr
        assert (
            await sb.exec("rm -f big /tmp/big; echo ok > small; cat small keep.txt")
        ).stdout == ("ok\nkept")
        await sb.reset()
        assert (await sb.exec("ls; df -k . | tail -1")).stdout.startswith("keep.txt\n")
        write = await sb.exec("head -c 4000000 /dev/zero > fits && echo fits")
        assert write.stdout == "fits\n"


async def test_a_workspace_larger_than_disk_mb_cannot_start(local: LocalRuntime) -> None:
    with pytest.raises(SandboxStartError):
        await local.create(disk(1, files={"big.txt": "x" * 3_000_000}))
    assert await local.list() == []


@pytest.fixture
def host_listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


CONNECT = (
    "import socket,sys\n"
    "try:\n"
    " socket.create_connection(('127.0.0.1',int(sys.argv[1])),2);print('connected')\n"
    "except OSError as e:\n"
    " print('failed',e.errno)\n"
)
SERVE = (
    "import socket,threading\n"
    "s=socket.socket();s.bind(('127.0.0.1',0));s.listen()\n"
    "threading.Thread(target=lambda:s.accept()[0].sendall(b'hello'),daemon=True).start()\n"
    "c=socket.create_connection(s.getsockname(),2);print(c.recv(5).decode())"
)


async def test_network_none_has_no_sockets(local: LocalRuntime, host_listener: int) -> None:
    async with await local.create(EnvironmentSpec(network="none")) as sb:
        result = await sb.exec(["python3", "-c", CONNECT, str(host_listener)])
        assert result.stdout == "failed 1\n"  # EPERM: inet sockets are refused outright
        links = (await sb.exec("cat /proc/net/dev")).stdout
        assert "lo:" in links
        assert "eth" not in links


async def test_network_loopback_is_own_and_private(local: LocalRuntime, host_listener: int) -> None:
    async with await local.create(EnvironmentSpec(network="loopback")) as sb:
        assert (await sb.exec(["python3", "-c", SERVE])).stdout == "hello\n"
        result = await sb.exec(["python3", "-c", CONNECT, str(host_listener)])
        assert result.stdout.startswith("failed"), result  # the host's 127.0.0.1 is not ours
        assert "eth" not in (await sb.exec("cat /proc/net/dev")).stdout


async def test_network_host_reaches_the_host(local: LocalRuntime, host_listener: int) -> None:
    async with await local.create(EnvironmentSpec(network="host")) as sb:
        result = await sb.exec(["python3", "-c", CONNECT, str(host_listener)])
        assert result.stdout == "connected\n"
