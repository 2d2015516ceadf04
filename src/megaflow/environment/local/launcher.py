"""Build the one bubblewrap command line that starts a local sandbox.

The sandbox's root is bubblewrap's own tmpfs, made read-only at the end; each
top-level entry of an unpacked root filesystem, or for the host image only
the entries of an allow list (``/usr``, ``/etc``, the lib dirs...), is bound
into it read-only, so mount points for the workspace can be created
anywhere. Writable state lives in three host directories bound over the
workdir, ``/tmp`` and ``/root``; everything else is read-only or hidden.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from megaflow.core.errors import SandboxStartError
from megaflow.environment.local.sweep import MARKER

BWRAP_PACKAGE = "bubblewrap"
HOST_PYTHON = Path("/usr/bin/python3")
HOST_USR_IN_SANDBOX = "/.megaflow/usr"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Top-level entries of a root filesystem image never bound: private or replaced.
_SKIP_TOP = {"proc", "dev", "tmp", "run", "root", "sys", "lost+found", "old_root"}
# What the 'host' image binds read-only (symlinks stay symlinks); nothing else
# of the host is visible unless the config's host_paths names it.
HOST_ALLOW = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
# Only what the exec server (uid 0 inside) needs to run commands as the agent
# and to kill them; agent commands drop all of them with their setuid.
KEPT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL")
# The exec server's parts, run in this order in one namespace (server.py's docstring).
SERVER_PARTS = ("server_jobs.py", "server_spawner.py", "server_files.py", "server_commands.py",
                "server_terminals.py", "server.py")  # fmt: skip
# Boot loader given to python -c: read the server from stdin (a tuple of compiled
# parts when the sandbox's python has the same bytecode as ours, else their
# sources joined by NUL bytes) and run the parts in turn.
# A read that finds the pipe closed (MegaFlow died before sending it all) ends
# the server, and with it the sandbox, rather than spinning on end of file.
_BOOT = (
    "import os,sys\nn=int(sys.argv[1]);b=b''\n"
    "while len(b)<n:\n c=os.read(0,n-len(b))\n if not c:sys.exit(125)\n b+=c\n"
    "for p in(__import__('marshal').loads(b)if sys.argv[2]=='c'else"
    "[compile(s,'mfserver','exec')for s in b.split(bytes(1))]):exec(p)"
)


@dataclass(frozen=True)
class ServerPayload:
    data: bytes
    compiled: bool


def server_payload() -> ServerPayload:
    """The exec server, precompiled when the host's python3 shares our bytecode
    format (saves compiling it in every sandbox start), else as source."""
    here = Path(__file__).parent
    sources = [(here / part).read_bytes() for part in SERVER_PARTS]
    probe = "import importlib.util,sys;sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"
    try:
        theirs = subprocess.run(
            [str(HOST_PYTHON), "-I", "-c", probe], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        theirs = ""
    if theirs == importlib.util.MAGIC_NUMBER.hex():
        code = tuple(compile(src, f"mfserver/{part}", "exec") for src, part in
                     zip(sources, SERVER_PARTS, strict=True))  # fmt: skip
        return ServerPayload(marshal.dumps(code), True)
    return ServerPayload(b"\0".join(sources), False)


def as_user(uid: int, gid: int) -> list[str]:
    """A command prefix that runs the rest as ``uid``/``gid`` with no groups.

    ``setpriv`` (util-linux) rather than subprocess's ``user=``: with a uid
    change subprocess must fork() instead of vfork(), which runs every
    library's fork handlers in the child (gRPC's can kill it before exec)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise SandboxStartError("'setpriv' was not found on PATH; install 'util-linux'")
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]


def find_bwrap() -> str:
    """The ``bwrap`` binary, or an error naming the package that provides it."""
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxStartError(
            f"'bwrap' was not found on PATH; install the {BWRAP_PACKAGE!r} package "
            f"(apt-get install {BWRAP_PACKAGE}) or use another runtime"
        )
    return found


def elf_interpreter(path: Path) -> str | None:
    """The PT_INTERP (dynamic loader) of a 64-bit ELF file, or None when static."""
    with path.open("rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
            return None
        e = "<" if head[5] == 1 else ">"
        phoff = struct.unpack_from(e + "Q", head, 32)[0]
        phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        for i in range(phnum):
            base = i * phentsize
            if struct.unpack_from(e + "I", table, base)[0] == 3:  # PT_INTERP
                offset = struct.unpack_from(e + "Q", table, base + 8)[0]
                size = struct.unpack_from(e + "Q", table, base + 32)[0]
                f.seek(offset)
                return f.read(size).rstrip(b"\0").decode()
    return None


@dataclass
class ServerCommand:
    """How to start the exec server inside the sandbox."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    extra_binds: list[str] = field(default_factory=list)


def server_command(payload: ServerPayload, host_root: bool, max_frame: int) -> ServerCommand:
    """Run the host's python3 as the server; inside a foreign root filesystem
    the host's /usr is bound at a hidden path and python is started through
    the host's dynamic loader, so the image itself needs no python."""
    if not HOST_PYTHON.exists():
        raise SandboxStartError(
            f"{HOST_PYTHON} is missing; the local runtime needs the host's 'python3' "
            "package (apt-get install python3)"
        )
    kind = "c" if payload.compiled else "s"
    # The server's spawner (server_spawner.py) posix_spawns each command;
    # MEGAFLOW_EXEC_MODE=fork has the server fork them instead (docs/environment.md).
    mode = os.environ.get("MEGAFLOW_EXEC_MODE") or "spawn"
    if mode not in ("spawn", "fork"):
        raise SandboxStartError(
            f"MEGAFLOW_EXEC_MODE={mode!r} is not an exec mode: use 'spawn' (the default: "
            "started by the exec server's spawner) or 'fork' (forked by the exec server)"
        )
    tail = ["-I", "-S", "-c", _BOOT, str(len(payload.data)), kind, str(max_frame), mode]
    if host_root:
        return ServerCommand([str(HOST_PYTHON), *tail])
    python = HOST_PYTHON.resolve()
    interp = elf_interpreter(python)
    if interp is None or not Path(interp).resolve().is_relative_to("/usr"):
        raise SandboxStartError(
            f"cannot run the host's {python} inside a root filesystem image: its loader "
            f"{interp!r} is not under /usr; use image 'host' instead"
        )

    def inside(p: Path) -> str:
        return HOST_USR_IN_SANDBOX + str(p)[len("/usr") :]

    loader = Path(interp).resolve()
    libdirs = ":".join([inside(loader.parent), HOST_USR_IN_SANDBOX + "/lib"])
    argv = [inside(loader), "--library-path", libdirs, inside(python), *tail]
    return ServerCommand(
        argv,
        env={"PYTHONHOME": HOST_USR_IN_SANDBOX},
        extra_binds=[
            "--perms",
            "0755",
            "--dir",
            str(Path(HOST_USR_IN_SANDBOX).parent),
            "--ro-bind",
            "/usr",
            HOST_USR_IN_SANDBOX,
        ],
    )


@dataclass
class LaunchPlan:
    """Everything one sandbox's bubblewrap command needs."""

    image_root: Path  # "/" for the host image
    rw_dir: Path  # holds ws/, tmp/, home/ (as bubblewrap reaches it: maybe staged)
    workdir: str
    network: str
    hide: list[Path]
    payload: ServerPayload
    hostname: str = "sandbox"
    root_binds: list[str] | None = None  # root_binds(plan), when the caller cached it
    image_source: Path | None = None  # image_root as bubblewrap reaches it (staged)
    host_paths: list[tuple[Path, Path]] = field(default_factory=list)  # (path, source)
    fds: dict[str, int] = field(default_factory=dict)  # info, block, seccomp
    max_frame: int = 64 << 20
    view: Path | None = None  # the image's prepared read-only root (view.py), if any
    marker: str = ""  # MARKER's value for the exec server, if any


def _covered(path: Path, roots: list[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def root_binds(plan: LaunchPlan) -> list[str]:
    """Bind the image's top-level entries (for the host image: the allow list
    and ``host_paths``) read-only and cover the hidden paths. Depends only on
    the image, ``host_paths`` and ``hide``, so callers may cache it."""
    args: list[str] = []
    if plan.image_root != Path("/"):
        source = plan.image_source or plan.image_root
        for entry in sorted(os.scandir(plan.image_root), key=lambda e: e.name):
            if entry.name in _SKIP_TOP:
                continue
            target = "/" + entry.name
            if entry.is_symlink():
                args += ["--symlink", os.readlink(entry.path), target]
            elif entry.is_dir() or entry.is_file():
                args += ["--ro-bind", str(source / entry.name), target]
        return args
    bound: list[Path] = []
    for name in HOST_ALLOW:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
            bound.append(path)
    made = {Path("/var")}  # directories made on the sandbox's root (bubblewrap's own are 0700)
    args += ["--perms", "0755", "--dir", "/var"]
    for path, source in plan.host_paths:
        if path.exists() and not _covered(path, bound):
            for parent in reversed(path.parents[:-1]):
                if parent not in made:
                    args += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            args += ["--ro-bind", str(source), str(path)]
            bound.append(path)
    var_tmp = Path("/var/tmp")
    if not any(var_tmp.is_relative_to(p) or p.is_relative_to(var_tmp) for p in bound):
        args += ["--symlink", "/tmp", str(var_tmp)]  # else a host path is there
    for path in plan.hide:
        if not _covered(path, bound) or not (path.exists() or path.is_symlink()):
            continue  # not visible in the sandbox anyway
        if path.is_dir() and not path.is_symlink():
            args += ["--tmpfs", str(path)]
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def _parents(path: str, binds: list[str]) -> list[str]:
    """Directories (0755) above ``path`` that nothing in ``binds`` provides:
    bubblewrap makes missing parents of a mount point 0700, which the agent
    could not traverse."""
    above = Path(path).parents[:-1]
    if not above:  # a top-level workdir (the usual case): no binds to look through
        return []
    bound = [Path(binds[i + 2]) for i, a in enumerate(binds) if a in ("--ro-bind", "--symlink")]
    args: list[str] = []
    for parent in reversed(above):
        if not any(parent.is_relative_to(b) for b in bound):
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


def bwrap_argv(bwrap: str, plan: LaunchPlan) -> list[str]:
    """The bubblewrap argv running the exec server as uid 0 of a new user
    namespace whose maps the caller writes (``--userns-block-fd``)."""
    host_root = plan.image_root == Path("/")
    server = server_command(plan.payload, host_root, plan.max_frame)
    args = [bwrap, "--die-with-parent", "--unshare-user", "--uid", "0", "--gid", "0"]
    args += ["--userns-block-fd", str(plan.fds["block"]), "--info-fd", str(plan.fds["info"])]
    if "seccomp" in plan.fds:
        args += ["--seccomp", str(plan.fds["seccomp"])]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", plan.hostname]
    args += ["--cap-drop", "ALL"]
    for cap in KEPT_CAPS:
        args += ["--cap-add", cap]
    args.append("--new-session")  # no terminal to steal input from
    if plan.network != "host":  # 'none' and 'loopback': an own namespace, only lo
        args.append("--unshare-net")
    args += ["--clearenv"]
    if plan.marker:  # the server's own environment; commands get theirs from each call
        args += ["--setenv", MARKER, plan.marker]
    for key, value in server.env.items():
        args += ["--setenv", key, value]
    if plan.view is not None:  # one bind of a tree made once; /run is in it, read-only
        args += ["--ro-bind", str(plan.view), "/", "--proc", "/proc", "--dev", "/dev"]
        args += ["--bind", str(plan.rw_dir / "tmp"), "/tmp"]
        args += ["--bind", str(plan.rw_dir / "home"), "/root"]
        args += ["--bind", str(plan.rw_dir / "ws"), plan.workdir]
        return [*args, "--chdir", plan.workdir, *server.argv]
    binds = plan.root_binds if plan.root_binds is not None else root_binds(plan)
    args += binds
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/run"]
    args += server.extra_binds
    args += ["--bind", str(plan.rw_dir / "tmp"), "/tmp"]
    args += ["--bind", str(plan.rw_dir / "home"), "/root"]
    args += _parents(plan.workdir, binds)
    args += ["--bind", str(plan.rw_dir / "ws"), plan.workdir]
    args += ["--remount-ro", "/", "--chdir", plan.workdir, *server.argv]
    return args


def view_args(plan: LaunchPlan) -> list[str]:
    """What a prepared view of ``plan``'s image holds (:mod:`.view`), with host
    paths as this process reaches them: the root binds and the server's own."""
    direct = LaunchPlan(
        image_root=plan.image_root, rw_dir=plan.rw_dir, workdir=plan.workdir,
        network=plan.network, hide=plan.hide, payload=plan.payload,
        host_paths=[(path, path) for path, _ in plan.host_paths],
    )  # fmt: skip
    server = server_command(plan.payload, plan.image_root == Path("/"), plan.max_frame)
    return [*root_binds(direct), *server.extra_binds]


def default_env(workdir: str) -> dict[str, str]:
    """The environment every command starts from, before the spec's and the call's."""
    return {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "PWD": workdir}
