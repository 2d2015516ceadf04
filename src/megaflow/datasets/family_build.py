"""What the generators of the small built task families share
(``tasks/settings-fix/build/generate.py``, ``tasks/settings-kinds/build/generate.py``).

Each generator writes its repositories, commits a base, takes the gold and
test patches from ``git diff`` and, unless told not to, checks FAIL_TO_PASS and
PASS_TO_PASS by running pytest on the host. Its command line is the same:
``--seed``, ``--check`` (exit 1 if the committed set differs from a fresh
build) and ``--no-verify``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from megaflow.datasets.prepare import GIT_ENV
from megaflow.datasets.pytest_report import parse_pytest_report, passed

PYTEST = ["/usr/bin/python3", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-q"]
GITIGNORE = "__pycache__/\n*.pyc\n.pytest_cache/\n"
SPLITS = ("demonstrations.jsonl", "train.jsonl", "heldout.jsonl")


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    """Run git with the project's fixed identity and dates; exit naming the command."""
    env = {**os.environ, **GIT_ENV}
    res = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True
    )
    if res.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {res.stderr}")
    return res.stdout


def pytest_results(cwd: Path) -> dict[str, bool]:
    """Each test's node id and whether it passed, from pytest run in ``cwd``."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(cwd)}
    res = subprocess.run(PYTEST, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    return {node: passed(s) for node, s in parse_pytest_report(res.stdout).items()}


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def tree(root: Path) -> dict[str, bytes]:
    """A built family's files (its splits and repositories), for ``--check``."""
    files = {n: (root / n).read_bytes() for n in SPLITS if (root / n).exists()}
    for p in sorted((root / "repos").rglob("*")):
        if p.is_file():
            files[str(p.relative_to(root))] = p.read_bytes()
    return files


def main(doc: str, set_dir: Path, generate: Callable[[Path, int, bool], dict[str, int]]) -> int:
    """A generator's command line; ``generate(out_dir, seed, verify)`` returns row counts."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="Seed of the whole family.")
    ap.add_argument("--check", action="store_true", help="Fail if the committed set is stale.")
    ap.add_argument("--no-verify", action="store_true", help="Skip the pytest runs.")
    args = ap.parse_args()
    name = f"tasks/{set_dir.name}"
    if args.check:
        with tempfile.TemporaryDirectory(prefix=f"{set_dir.name}-check-") as tmp:
            generate(Path(tmp), args.seed, False)
            if tree(Path(tmp)) != tree(set_dir):
                print(f"{name} is stale; run generate.py", file=sys.stderr)
                return 1
        return 0
    sizes = generate(set_dir, args.seed, not args.no_verify)
    print(", ".join(f"{k}: {v} rows" for k, v in sizes.items()))
    return 0


def commit_base(work: Path, files: dict[str, str], verify: bool, name: str) -> str:
    """Write ``files`` into a fresh repository at ``work``, commit them as the base
    and return its commit; with ``verify``, exit unless every base test passes."""
    write_files(work, files)
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "--allow-empty", "-m", "base")
    base = git(work, "rev-parse", "HEAD").strip()
    if verify and not all(pytest_results(work).values()):
        raise SystemExit(f"{name}: the base tests must all pass")
    return base


def check_instance(
    work: Path, gold: str, f2p: list[str], p2p: list[str], restore: Callable[[], object], iid: str
) -> None:
    """Exit unless FAIL_TO_PASS fails and PASS_TO_PASS passes before ``gold``, and
    both pass after it; ``restore`` undoes ``gold`` afterwards."""
    unfixed = pytest_results(work)
    git(work, "apply", stdin=gold)
    fixed = pytest_results(work)
    restore()
    if [n for n in f2p + p2p if not fixed.get(n)] or any(unfixed.get(n) for n in f2p):
        raise SystemExit(f"{iid}: FAIL_TO_PASS/PASS_TO_PASS do not hold")
    if not all(unfixed.get(n) for n in p2p):
        raise SystemExit(f"{iid}: PASS_TO_PASS fails before the fix")
