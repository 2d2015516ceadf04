"""Every external program the code and the tests run is declared in
``scripts/install-sysdeps.sh`` (binary:package), and is present here.

The programs are found by reading src/ and tests/ with ``ast``: the names
given to ``shutil.which`` and ``need_binary``, and the first element of the
argv at each ``subprocess`` / ``asyncio.create_subprocess_exec`` / ``os.exec*``
call, followed through simple assignments in the same function or module
(``cmd = ["x", ...]``, ``x = str(bindir / "initdb")``, ``X = Path("/usr/bin/x")``).
Adding a call to an undeclared program fails this test until the script names
it. Programs that other programs start (podman's helpers) are listed in
``INDIRECT`` below.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install-sysdeps.sh"
VENV_BIN = Path(sys.executable).parent

SPAWNERS = {
    "subprocess": {"run", "Popen", "check_output", "check_call", "call"},
    "asyncio": {"create_subprocess_exec"},
    "os": {"execv", "execve", "execvp", "execvpe", "execl", "execlp", "execle", "execlpe"},
    "shutil": {"which"},
}
# Installed into the virtualenv by pip, not by the system package manager.
VENV_PROGRAMS = {"megaflow", "nx-27017", "moto_server", "ray"}
# Started by a program we run, so no call site names them.
INDIRECT = {
    "catatonit": "podman --init (the container runtime's default) runs it as PID 1",
    "conmon": "podman monitors every container with it",
    "runc": "the OCI runtime podman is configured with",
    "crun": "the OCI runtime of the benchmarks' podman peers on crun",
    "newuidmap": "user-namespace id maps for podman",
    "newgidmap": "user-namespace id maps for podman",
    "postgres": "pg_ctl starts it",
    "pytest-3": "the default test command `python3 -m pytest` in host-image sandboxes",
}


def declared() -> dict[str, str]:
    """The script's NEEDED list: binary (a name or an absolute path) -> package."""
    text = SCRIPT.read_text()
    block = re.search(r"^NEEDED=\(\n(.*?)^\)", text, re.M | re.S)
    assert block, "NEEDED=( ... ) not found in install-sysdeps.sh"
    pairs = re.findall(r'^\s*"([^"]+)"', block.group(1), re.M)
    out = {}
    for pair in pairs:
        binary, _, package = pair.rpartition(":")
        assert binary, pair
        assert package, pair
        out[binary] = package
    return out


def _name(binary: str) -> str:
    return PurePosixPath(binary).name


def _callee(node: ast.Call) -> tuple[str, str]:
    """(owner, name) of the called function: ('subprocess', 'run'), ('', 'spawn')."""
    f = node.func
    if isinstance(f, ast.Attribute):
        return (f.value.id if isinstance(f.value, ast.Name) else "?"), f.attr
    return ("", f.id) if isinstance(f, ast.Name) else ("?", "")


class _Finder(ast.NodeVisitor):
    """Collects the programs one module runs, and its functions that pass one
    of their parameters on as an argv (``wrappers``: name -> parameter index)."""

    def __init__(self, tree: ast.Module, wrappers: dict[str, int]) -> None:
        self.found: set[str] = set()
        self.wrappers = wrappers
        self.new_wrappers: dict[str, int] = {}
        self.aliases: dict[str, str] = {}  # local name -> module, or "module.function"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module in SPAWNERS:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        self.scopes: list[dict[str, list[ast.expr]]] = [self._assigned(tree.body)]
        self.params: list[list[str]] = [[]]
        self.functions: list[str] = [""]

    @staticmethod
    def _assigned(body: list[ast.stmt]) -> dict[str, list[ast.expr]]:
        """Assignments in ``body``, not looking into the functions it defines."""
        out: dict[str, list[ast.expr]] = {}
        todo: list[ast.AST] = list(body)
        while todo:
            node = todo.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            todo.extend(ast.iter_child_nodes(node))
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    _Finder._bind(target, node.value, out)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                _Finder._bind(node.target, node.value, out)
        return out

    @staticmethod
    def _bind(target: ast.expr, value: ast.expr, out: dict[str, list[ast.expr]]) -> None:
        if isinstance(target, ast.Name):
            out.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            for t, v in zip(target.elts, value.elts, strict=False):
                _Finder._bind(t, v, out)

    def _lookup(self, name: str) -> list[ast.expr]:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return []

    def _programs(self, node: ast.expr, depth: int = 0) -> Iterator[str]:
        """The program names ``node`` (an argv or its first element) evaluates to;
        ``@param`` for a parameter of the enclosing function."""
        if depth > 8:
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value.split()[0] if node.value.strip() else node.value
        elif isinstance(node, ast.List | ast.Tuple) and node.elts:
            first = node.elts[0]
            inner = first.value if isinstance(first, ast.Starred) else first
            yield from self._programs(inner, depth + 1)
        elif isinstance(node, ast.Name):
            local = self.scopes[-1].get(node.id, [])
            if node.id in self.params[-1]:
                yield f"@{node.id}"
            for value in local or ([] if node.id in self.params[-1] else self._lookup(node.id)):
                yield from self._programs(value, depth + 1)
        elif isinstance(node, ast.IfExp):
            yield from self._programs(node.body, depth + 1)
            yield from self._programs(node.orelse, depth + 1)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            yield from self._programs(node.left, depth + 1)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            yield from (_name(p) for p in self._programs(node.right, depth + 1))
        elif (
            isinstance(node, ast.Call)
            and _callee(node)[1] in {"str", "Path", "fspath"}
            and node.args
        ):
            yield from self._programs(node.args[0], depth + 1)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scopes.append(self._assigned(node.body))
        self.params.append([a.arg for a in [*node.args.posonlyargs, *node.args.args]])
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()
        self.params.pop()
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _argv_index(self, node: ast.Call) -> int | None:
        """Which positional argument of this call is a program or an argv, if any."""
        owner, name = _callee(node)
        module = self.aliases.get(owner, owner) if owner else ""
        if owner == "" and "." in self.aliases.get(name, ""):
            module, name = self.aliases[name].split(".", 1)
        if module in SPAWNERS and name in SPAWNERS[module]:
            return 0
        if name == "need_binary":
            return 0
        if owner in ("", "self") and name in self.wrappers:
            return self.wrappers[name]
        return None

    def visit_Call(self, node: ast.Call) -> None:
        index = self._argv_index(node)
        if index is not None and len(node.args) > index:
            first = node.args[index]
            if _callee(node)[1] == "create_subprocess_exec" and not isinstance(first, ast.Starred):
                first = ast.List(elts=[first])
            elif isinstance(first, ast.Starred):
                first = first.value
            for prog in self._programs(first):
                if prog.startswith("@"):
                    params = self.params[-1]
                    self.new_wrappers[self.functions[-1]] = params.index(prog[1:]) - (
                        1 if params and params[0] in ("self", "cls") else 0
                    )
                elif prog:
                    self.found.add(prog)
        self.generic_visit(node)


def programs_in(source: str) -> set[str]:
    """The programs one module runs (its own wrappers followed)."""
    wrappers = _scan(source, {})[1]
    return _scan(source, wrappers)[0]


def _scan(source: str, wrappers: dict[str, int]) -> tuple[set[str], dict[str, int]]:
    tree = ast.parse(source)
    finder = _Finder(tree, wrappers)
    finder.visit(tree)
    return finder.found, finder.new_wrappers


def called_programs() -> dict[str, set[str]]:
    """Program name -> the files running it, over src/ and tests/. Functions that
    hand a parameter to subprocess (``spawn(cmd)``) count as spawners too."""
    sources = {
        str(path.relative_to(ROOT)): path.read_text()
        for top in ("src", "tests")
        for path in sorted((ROOT / top).rglob("*.py"))
        if "/gen/" not in path.as_posix()
    }
    wrappers: dict[str, int] = {}
    for _ in range(3):  # wrappers of wrappers
        for text in sources.values():
            wrappers.update(_scan(text, wrappers)[1])
    out: dict[str, set[str]] = {}
    for rel, text in sources.items():
        for prog in _scan(text, wrappers)[0]:
            out.setdefault(_name(prog), set()).add(rel)
    return out


def test_the_scanner_sees_each_call_pattern() -> None:
    src = """
import asyncio, os, shutil, subprocess
import subprocess as sp
from pathlib import Path
from subprocess import check_output
HOST = Path("/usr/bin/python3")
def f(bindir, owner, cmd):
    shutil.which("alpha")
    need_binary("beta", "hint")
    subprocess.run(["gamma", "-x"])
    sp.Popen(("delta",))
    full = cmd if owner is None else ["epsilon", "-u", owner]
    subprocess.run(full)
    zeta = str(bindir / "zeta")
    subprocess.run([zeta, "-D"])
    subprocess.run([str(HOST), "-c", "pass"])
    asyncio.create_subprocess_exec("/bin/eta", "-c")
    os.execvp("theta", ["theta"])
    check_output(["iota"])
    f(None, None, ["kappa", "--flag"])
def spawn(cmd, log):
    return subprocess.Popen(cmd, stdout=log)
spawn(["lambda"], None)
sandbox.run(["not-a-host-program"])
run("not-a-program-either")
stub.call("Exec")
"""
    found = {_name(p) for p in programs_in(src)}
    expected = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "python3", "eta", "theta",
                "iota", "kappa", "lambda"}  # fmt: skip
    assert found == expected


def test_every_called_program_is_declared() -> None:
    names = {_name(b) for b in declared()}
    called = called_programs()
    assert {"git", "bwrap", "busybox", "podman", "redis-server", "initdb", "openssl"} <= set(
        called
    ), "the scanner lost track of calls it used to see"
    undeclared = {
        prog: sorted(files)
        for prog, files in called.items()
        if prog not in names and prog not in VENV_PROGRAMS
    }
    assert not undeclared, (
        "programs run by the code or the tests but not in scripts/install-sysdeps.sh "
        f"NEEDED (add binary:package): {undeclared}"
    )
    missing_indirect = sorted(set(INDIRECT) - names)
    assert not missing_indirect, f"not declared: {missing_indirect}"


def test_catatonit_is_declared_by_its_path() -> None:
    assert declared().get("/usr/libexec/podman/catatonit") == "catatonit"


def _present(binary: str) -> bool:
    if binary.startswith("/"):
        return os.access(binary, os.X_OK)
    if shutil.which(binary) or any(
        os.access(f"{d}/{binary}", os.X_OK) for d in ("/usr/sbin", "/sbin")
    ):
        return True
    return any(Path("/usr/lib/postgresql").glob(f"*/bin/{binary}"))


def test_every_declared_program_is_installed() -> None:
    absent = {b: p for b, p in declared().items() if not _present(b)}
    assert not absent, f"declared but not installed (run scripts/install-sysdeps.sh): {absent}"
    for prog in VENV_PROGRAMS:
        assert (VENV_BIN / prog).exists() or shutil.which(prog), prog


@pytest.mark.skipif(shutil.which("bash") is None, reason="the script is bash")
def test_the_scripts_own_check_agrees() -> None:
    res = subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    text = SCRIPT.read_text()
    assert "--no-install-recommends" in text
