"""The exec server's spawner (server_spawner.py): what a command can reach of
it, and what happens when the agent (same uid) kills or stops it. The spawner
is the default (``MEGAFLOW_EXEC_MODE=fork`` turns it off); every test here
sets ``spawn`` all the same, so a host environment that says ``fork`` cannot
turn them into tests of the fork path."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from megaflow.core.errors import SandboxStartError
from megaflow.environment.abstract import EnvironmentSpec, Sandbox
from megaflow.environment.local import LocalRuntime

# Run inside: this command's fds (with their targets), and whether its parent
# (the spawner) and grandparent (the exec server) let it list theirs.
PROBE = r"""
import json, os
fds = {}
for name in os.listdir("/proc/self/fd"):
    try:
        fds[name] = os.readlink("/proc/self/fd/" + name)
    except OSError:
        pass  # the listing's own fd, closed by now
spawner = os.getppid()
with open(f"/proc/{spawner}/status") as f:
    server = int(next(line.split()[1] for line in f if line.startswith("PPid:")))
seen = {}
for who, pid in (("spawner", spawner), ("server", server)):
    try:
        seen[who] = os.listdir(f"/proc/{pid}/fd")
    except PermissionError:
        seen[who] = "denied"
print(json.dumps({"fds": fds, "seen": seen, "uid": os.getuid()}))
"""


@pytest.fixture(autouse=True)
def spawner_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEGAFLOW_EXEC_MODE", "spawn")


async def test_a_command_holds_no_channel_and_cannot_list_the_spawners_or_servers(
    local: LocalRuntime,
) -> None:
    async with await local.create(EnvironmentSpec()) as sb:
        await sb.exec("true")  # the spawner has run one command already
        out = await sb.exec(["python3", "-c", PROBE])
        assert out.exit_code == 0, out
        found = json.loads(out.stdout)
        fds = found["fds"]
        # stdin, stdout, stderr and nothing else: no socket (the spawner's
        # channel), no host pipe, no second copy of its own output pipes
        assert sorted(fds) == ["0", "1", "2"], fds
        assert fds["0"] == "/dev/null"
        assert fds["1"].startswith("pipe:"), fds
        assert fds["2"].startswith("pipe:"), fds
        assert sb.proc is not None
        host_pipes = {  # the server's channel, seen from the host's ends
            f"pipe:[{os.fstat(sb.proc.stdin.get_extra_info('pipe').fileno()).st_ino}]",
            f"pipe:[{os.fstat(sb.proc._stdout_pipe.get_extra_info('pipe').fileno()).st_ino}]",
        }
        assert not host_pipes & set(fds.values()), (host_pipes, fds)
        assert found["seen"] == {"spawner": "denied", "server": "denied"}, found
        assert found["uid"] == 1000


async def test_killing_the_spawner_loses_no_exec_and_the_next_runs_as_the_agent(
    local: LocalRuntime,
) -> None:
    """The agent may kill the spawner (same uid). Its commands become the
    server's children (the server is their subreaper), so the exec that
    killed it and one running beside it still report their output and exit
    status; the next exec starts a new spawner."""
    async with await local.create(EnvironmentSpec()) as sb:
        first = (await sb.exec("echo $PPID")).stdout
        slow = asyncio.ensure_future(sb.exec("sleep 2; echo slow; exit 3", timeout=120))
        await asyncio.sleep(0.5)
        # (a command that kills it before it has sent the command's pid, within
        # microseconds of the start, fails: the server cannot tell it started)
        killer = await asyncio.wait_for(sb.exec("sleep 0.5; kill -9 $PPID; echo x; exit 5"), 30)
        assert (killer.exit_code, killer.stdout) == (5, "x\n"), killer
        done = await asyncio.wait_for(slow, 30)
        assert (done.exit_code, done.stdout) == (3, "slow\n"), done
        after = await asyncio.wait_for(sb.exec("id -u; echo $PPID"), 30)
        assert after.exit_code == 0, after
        uid, spawner = after.stdout.split()
        assert uid == "1000"  # a fresh spawner, as the agent again
        assert spawner != first.strip()


async def test_an_agent_killing_all_its_processes_still_gets_its_result(
    local: LocalRuntime,
) -> None:
    """``kill -9 -1`` as the agent ends every process of its uid but the
    caller, the spawner among them; the caller's exec is answered as usual."""
    async with await local.create(EnvironmentSpec()) as sb:
        command = "sleep 60 & sleep 0.5; kill -9 -1; echo alone; exit 7"
        out = await asyncio.wait_for(sb.exec(command), 30)
        assert (out.exit_code, out.stdout) == (7, "alone\n"), out
        assert (await sb.exec("echo next")).stdout == "next\n"


async def test_a_stopped_spawner_is_replaced_and_its_command_reported(local: LocalRuntime) -> None:
    async with await local.create(EnvironmentSpec()) as sb:
        # stopped after it has reported the command's pid: only the stop itself
        # tells the server that the exit will never come from the spawner
        out = await asyncio.wait_for(sb.exec("sleep 1; kill -STOP $PPID; echo on; exit 4"), 30)
        assert (out.exit_code, out.stdout) == (4, "on\n"), out
        after = await asyncio.wait_for(sb.exec("echo ok; id -u; ps -o stat= -p $PPID"), 30)
        ok, uid, state = after.stdout.split()
        assert (ok, uid) == ("ok", "1000"), after
        # a new spawner, not the stopped one (T); "N" follows when the suite runs niced
        assert state[0] in ("R", "S"), after


async def test_the_fork_mode_switch_starts_commands_from_the_server(
    local: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MEGAFLOW_EXEC_MODE=fork forks the server: the command's parent is the
    server itself (oom_score_adj 0), not the spawner (1000); another value is
    refused with a message naming the variable."""
    probe = "cat /proc/$PPID/oom_score_adj"
    async with await local.create(EnvironmentSpec()) as sb:
        assert (await sb.exec(probe)).stdout == "1000\n"
    monkeypatch.setenv("MEGAFLOW_EXEC_MODE", "fork")
    async with await local.create(EnvironmentSpec()) as sb:
        assert (await sb.exec(probe)).stdout == "0\n"
    monkeypatch.setenv("MEGAFLOW_EXEC_MODE", "vfork")
    with pytest.raises(SandboxStartError, match="MEGAFLOW_EXEC_MODE='vfork' is not an exec mode"):
        await local.create(EnvironmentSpec())
    assert await local.list() == []


async def test_a_request_too_large_for_the_spawners_socket_is_forked(local: LocalRuntime) -> None:
    """About 200 KiB of argv and env do not fit one message on the socket: such
    an exec is forked by the server instead, still as the agent."""
    probe = "id -u; cat /proc/$PPID/oom_score_adj; echo ${#V0}"
    async with await local.create(EnvironmentSpec()) as sb:
        small = await sb.exec(probe, env={"V0": "x" * 10_000})
        assert small.stdout.split() == ["1000", "1000", "10000"], small  # the spawner's child
        env = {f"V{i}": "x" * 10_000 for i in range(40)}  # 400 KB
        large = await sb.exec(probe, env=env)
        assert large.stdout.split() == ["1000", "0", "10000"], large  # the server's child


async def test_limits_the_agent_sets_on_the_spawner_never_reach_a_later_command(
    local: LocalRuntime,
) -> None:
    """The spawner has the agent's uid, so the agent may prlimit it, and a
    command inherits its limits: the spawner checks its own before and after
    each start and quits when they changed, and the next spawner starts with
    the sandbox's limits."""
    async with await local.create(EnvironmentSpec()) as sb:
        normal = (await sb.exec("ulimit -n; ulimit -f")).stdout
        await _change(sb, "prlimit --pid $PPID --nofile=16:16 --fsize=0:0")
        await _never_inherited(sb, "ulimit -n; ulimit -f", normal)


async def test_a_priority_the_agent_sets_on_the_spawner_never_reaches_a_later_command(
    local: LocalRuntime,
) -> None:
    async with await local.create(EnvironmentSpec()) as sb:
        normal = (await sb.exec("nice")).stdout
        await _change(sb, "renice -n 19 -p $PPID >/dev/null")
        await _never_inherited(sb, "nice", normal)


async def test_a_scheduling_policy_the_agent_sets_on_the_spawner_never_reaches_a_later_command(
    local: LocalRuntime,
) -> None:
    async with await local.create(EnvironmentSpec()) as sb:
        policy = "chrt -p $$ | head -1 | cut -d: -f2"
        normal = (await sb.exec(policy)).stdout
        assert "SCHED_OTHER" in normal, normal
        await _change(sb, "chrt -i -p 0 $PPID")
        await _never_inherited(sb, policy, normal)


async def _change(sb: Sandbox, command: str) -> None:
    """The agent may change its spawner (``command`` succeeds), unless the
    spawner's check after the start saw the change first and killed it (137)."""
    changed = await sb.exec(f"{command}; echo $?")
    assert changed.stdout == "0\n" or changed.exit_code == 137, changed


async def _never_inherited(sb: Sandbox, command: str, normal: str) -> None:
    """The next command runs with the sandbox's own settings (``normal``), or,
    when the spawner saw the change only at that start, fails with exit 126
    naming the spawner (the spawner's check after the changing command's
    start may come before or after the change); the one after it runs with
    ``normal``."""
    first = await sb.exec(command)
    if first.exit_code == 126:
        assert "the command spawner" in first.stderr, first
    else:
        assert first.stdout == normal, (normal, first)
    assert (await sb.exec(command)).stdout == normal


async def test_a_spawner_the_agent_kills_mid_start_fails_the_command_not_the_sandbox(
    local: LocalRuntime,
) -> None:
    """The agent (same uid) kills every spawner as soon as it appears: an exec
    whose spawner died before reporting its command ends with exit 126, the
    command's failure, never a SandboxError (infrastructure, retried): an
    agent must not be able to turn its own sample into a retry."""
    async with await local.create(EnvironmentSpec()) as sb:
        killer = "while :; do pkill -9 -P 2 -u 1000 -x python3; done"
        await sb.exec(f"setsid sh -c '{killer}' >/dev/null 2>&1 &")
        codes: dict[int, int] = {}
        for _ in range(60):
            result = await sb.exec("true")
            codes[result.exit_code] = codes.get(result.exit_code, 0) + 1
            if result.exit_code:
                assert result.exit_code == 126, result
                assert "the command spawner" in result.stderr, result
        assert codes.get(126, 0) > 0, codes  # the attack did reach starts in flight
