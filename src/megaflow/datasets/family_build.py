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
