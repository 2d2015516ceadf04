"""``megaflow sandbox``: a shell in a local sandbox, listing and cleaning up sandboxes, and
the seccomp profile Kubernetes nodes need for sandbox pods."""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
import yaml

from megaflow.cli.common import console, err_console, fail
from megaflow.core.errors import MegaFlowError
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig

if TYPE_CHECKING:
    from megaflow.environment.local import LocalSandbox

app = typer.Typer(help="Debug and clean up local sandboxes.", no_args_is_help=True)
RootOption = typer.Option(
    LocalRuntimeConfig().root, "--root", help="The local runtime's directory."
)


def load_spec(spec: str | None, network: str | None) -> EnvironmentSpec:
    """SPEC is a YAML/JSON file holding an EnvironmentSpec, or just an image."""
    if spec and spec.endswith((".yaml", ".yml", ".json")):
        path = Path(spec)
        if not path.is_file():
            fail(f"spec file {spec} does not exist")
        data = yaml.safe_load(path.read_text()) or {}
    else:
        data = {"image": spec or "host"}
    if network:
        data["network"] = network
    try:
        return EnvironmentSpec.model_validate(data)
    except ValueError as e:
        fail(f"invalid sandbox spec {spec}: {e}")


async def _shell(spec: EnvironmentSpec, root: str) -> None:
    from megaflow.environment.local import LocalRuntime

    async with LocalRuntime(LocalRuntimeConfig(root=root)) as rt:
        sb = await rt.create(spec, owner="cli-shell")
        err_console.print(f"[dim]sandbox {sb.id} ({spec.image}); 'exit' or Ctrl-D leaves[/]")
        if sys.stdin.isatty() and sys.stdout.isatty():
            await _terminal(sb)
        else:
            await _lines(sb, spec)


SHELL = ["/bin/sh", "-c", "command -v bash >/dev/null && exec bash -i || exec sh -i"]


async def _terminal(sb: LocalSandbox) -> None:
    """A real terminal: raw keystrokes in, the shell's output out, window size kept."""
    import os
    import signal
    import termios
    import tty

    fd = sys.stdin.fileno()
    size = os.get_terminal_size(fd)
    term = sb.open_terminal(SHELL, rows=size.lines, cols=size.columns)
    loop = asyncio.get_running_loop()
    saved = termios.tcgetattr(fd)

    def keys() -> None:
        data = os.read(fd, 4096)
        if data:
            term.write(data)

    def winch() -> None:
        now = os.get_terminal_size(fd)
        term.resize(now.lines, now.columns)

    tty.setraw(fd, termios.TCSANOW)  # keep what was typed before the shell came up
    loop.add_reader(fd, keys)
    loop.add_signal_handler(signal.SIGWINCH, winch)
    try:
        while (chunk := await term.read()) is not None:
            os.write(sys.stdout.fileno(), chunk)
    finally:
        loop.remove_reader(fd)
        loop.remove_signal_handler(signal.SIGWINCH)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def _lines(sb: LocalSandbox, spec: EnvironmentSpec) -> None:
    """Without a terminal: run each input line as one command, remembering ``cd``."""
    cwd = spec.workdir
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, _prompt, cwd)
        if line is None or line.strip() == "exit":
            break
        if not line.strip():
            continue
        words = shlex.split(line) if line.lstrip().startswith("cd") else []
        if words and words[0] == "cd":  # each line runs on its own; keep the cwd here
            where = await sb.exec(
                f"cd {shlex.quote(words[1] if len(words) > 1 else spec.workdir)} && pwd",
                cwd=cwd,
            )
            if where.ok:
                cwd = where.stdout.strip()
            else:
                sys.stderr.write(where.stderr)
            continue
        result = await sb.exec(line, timeout=None, cwd=cwd)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        if result.truncated:
            err_console.print("[yellow](output truncated)[/]")
        if result.exit_code:
            err_console.print(f"[dim]exit {result.exit_code}[/]")


def _prompt(cwd: str) -> str | None:
    try:
        return input(f"sandbox:{cwd}$ ")
    except EOFError:
        return None


@app.command("shell")
def shell(
    spec: str = typer.Argument(
        None, help="An image ('host', a rootfs dir or tarball) or a spec file."
    ),
    network: str = typer.Option(None, help="none | loopback | host"),
    root: str = RootOption,
) -> None:
    """Open a shell in a fresh local sandbox (a real terminal when run from one,
    else line by line); the sandbox is destroyed when the shell exits."""
    parsed = load_spec(spec, network)
    try:
        asyncio.run(_shell(parsed, root))
    except MegaFlowError as e:
        fail(str(e))


@app.command("ls")
def ls(root: str = RootOption) -> None:
    """List the local sandboxes recorded under ROOT, live or left behind."""
    from megaflow.environment.local.records import SandboxRecord, key_alive, sandbox_dir_state

    boxes = Path(root) / "boxes"
    rows = [("ID", "OWNER", "STATE", "AGE", "TTL LEFT", "PROCESS", "IMAGE")]
    now = time.time()
    for entry in sorted(boxes.iterdir()) if boxes.is_dir() else []:
        rec = SandboxRecord.load(entry)
        if rec is None:
            rows.append((entry.name, "-", "no-record", "-", "-", "-", "-"))
            continue
        state = "running" if rec.bwrap_alive() else "dead"
        kind, _ = sandbox_dir_state(entry.name)
        if kind != "sandbox":
            state = {"new": "making", "gone": "removing"}[kind]
        if not key_alive(rec.process):
            state += ",orphan"
        rows.append(
            (rec.id, rec.owner or "-", state, f"{now - rec.created_at:.0f}s",
             f"{rec.deadline - now:.0f}s", rec.process, rec.image)
        )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])


@app.command("gc")
def gc(
    root: str = RootOption,
    images: bool = typer.Option(False, "--images", help="Also empty the image cache."),
) -> None:
    """Remove sandboxes whose process died or whose deadline passed, and their cgroups;
    kill the stray processes a dead MegaFlow process's sandboxes left anywhere on the host."""
    from megaflow.environment.local import LocalRuntime

    async def go() -> tuple[int, int]:
        rt = LocalRuntime(LocalRuntimeConfig(root=root))
        await rt.start()  # start reaps
        removed, killed = rt.reaped_at_start, rt.swept
        if images:
            rt.remove_all_images()
        await rt.stop()
        return removed, killed

    try:
        removed, killed = asyncio.run(go())
    except MegaFlowError as e:
        fail(str(e))
    console.print(
        f"removed {removed} orphaned sandbox(es); killed {killed} stray sandbox process(es)"
        + ("; emptied the image cache" if images else "")
    )


@app.command("seccomp-profile")
def seccomp_profile(
    network: str = typer.Option("none", help="none | loopback: the sandboxes' network."),
    arch: str = typer.Option(None, help="The node's machine (x86_64, aarch64); default: this one."),
) -> None:
    """Print the sandboxes' seccomp profile (JSON) for a Kubernetes node: save it as
    <kubelet seccomp root>/<seccomp_profiles>/<network>.json (docs/kubernetes.md)."""
    from megaflow.environment.kubernetes.profiles import NETWORKS, profile_json

    if network not in NETWORKS:
        fail(f"--network {network!r}: a sandbox pod's network is one of {', '.join(NETWORKS)}")
    try:
        typer.echo(profile_json(network, arch), nl=False)
    except MegaFlowError as e:
        fail(str(e))


@app.command("swerex")
def swerex(
    spec: str = typer.Argument(
        None, help="An image ('host', a rootfs dir or tarball) or a spec file."
    ),
    port: int = typer.Option(8000, help="Port to serve SWE-ReX's protocol on (0: any free)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    token: str = typer.Option(None, help="The X-API-Key clients send; default: a new one."),
    network: str = typer.Option(None, help="none | loopback | host"),
    root: str = RootOption,
) -> None:
    """Serve a fresh local sandbox as a SWE-ReX remote runtime (SWE-agent:
    --env.deployment.type=remote); the sandbox is destroyed on Ctrl-C."""
    import secrets

    parsed = load_spec(spec, network)
    key = token or secrets.token_urlsafe(24)
    try:
        asyncio.run(_serve_swerex(parsed, root, host, port, key))
    except KeyboardInterrupt:
        pass
    except (MegaFlowError, OSError) as e:
        fail(str(e))


async def _serve_swerex(spec: EnvironmentSpec, root: str, host: str, port: int, key: str) -> None:
    from megaflow.environment.local import LocalRuntime
    from megaflow.environment.swerex import SandboxRuntime
    from megaflow.environment.swerex.server import SwerexServer

    async with LocalRuntime(LocalRuntimeConfig(root=root)) as rt:
        sb = await rt.create(spec, owner="cli-swerex")
        async with sb, SwerexServer(SandboxRuntime(sb), key, host=host, port=port) as server:
            err_console.print(f"[dim]sandbox {sb.id} ({spec.image}) on {server.url}[/]")
            console.print(f"host=http://{host}\nport={server.port}\nauth_token={key}")
            await server.serve_forever()
