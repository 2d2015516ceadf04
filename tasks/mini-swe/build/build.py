"""Build and verify the bundled task set from its compact definitions.

Each ``tasks/<name>.task`` file holds one repository and its bug:

    @@@@ issue                 the problem statement, as a user would file it
    @@@@ file <path>           a file of the repository at its base commit
    @@@@ fix <path>            old text, a line ``~~~~``, new text (exactly one match)
    @@@@ test <path>           a test file the test patch adds

The script writes ``repos/<name>/`` and ``instances.jsonl`` and verifies every
instance with the same pytest report parser grading uses:

* the base repository's own tests all pass;
* with the test patch and without the fix, every FAIL_TO_PASS test fails;
* with the test patch and the gold patch, every test passes.

FAIL_TO_PASS and PASS_TO_PASS are computed from those runs, never typed.
Run: ``python tasks/mini-swe/build/build.py [--only NAME ...] [--check]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from megaflow.datasets.pytest_report import parse_pytest_report, passed

HERE = Path(__file__).resolve().parent
SET_DIR = HERE.parent
PYTEST = ["/usr/bin/python3", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-q"]
GIT_ENV = {
    "GIT_AUTHOR_NAME": "mini-swe",
    "GIT_AUTHOR_EMAIL": "mini-swe@megaflow.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "mini-swe",
    "GIT_COMMITTER_EMAIL": "mini-swe@megaflow.invalid",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
}
GITIGNORE = "__pycache__/\n*.pyc\n.pytest_cache/\n"


class Task:
    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.issue = ""
        self.files: dict[str, str] = {}
        self.fixes: list[tuple[str, str, str]] = []
        self.tests: dict[str, str] = {}
        for kind, arg, body in _sections(text):
            if kind == "issue":
                self.issue = body.strip() + "\n"
            elif kind == "file":
                self.files[arg] = body
            elif kind == "test":
                self.tests[arg] = body
            elif kind == "fix":
                old, sep, new = body.partition("~~~~\n")
                if not sep:
                    raise SystemExit(f"{name}: fix {arg} has no ~~~~ separator")
                self.fixes.append((arg, old, new))
            else:
                raise SystemExit(f"{name}: unknown section {kind!r}")
        if not (self.issue and self.files and self.fixes and self.tests):
            raise SystemExit(f"{name}: needs issue, file, fix and test sections")


def _sections(text: str) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    kind, arg, lines = "", "", []
    for line in text.splitlines(keepends=True):
        if line.startswith("@@@@ "):
            if kind:
                out.append((kind, arg, "".join(lines)))
            head = line[5:].strip().split(maxsplit=1)
            kind, arg, lines = head[0], (head[1] if len(head) > 1 else ""), []
        else:
            lines.append(line)
    if kind:
        out.append((kind, arg, "".join(lines)))
    return out


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    res = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {res.stderr}")
    return res.stdout


def _pytest(cwd: Path) -> dict[str, bool]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(cwd)}
    res = subprocess.run(PYTEST, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    report = parse_pytest_report(res.stdout)
    return {node: passed(status) for node, status in report.items()}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def build_one(task: Task) -> dict[str, object]:
    repo_dir = SET_DIR / "repos" / task.name
    shutil.rmtree(repo_dir, ignore_errors=True)
    _write(repo_dir, {".gitignore": GITIGNORE, **task.files})
    with tempfile.TemporaryDirectory(prefix=f"mini-swe-{task.name}-") as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(repo_dir, work)
        _git(work, "init", "-q", "-b", "main")
        _git(work, "add", "-A")
        _git(work, "commit", "-q", "-m", "base")
        base = _git(work, "rev-parse", "HEAD").strip()
        before = _pytest(work)
        bad = sorted(n for n, ok in before.items() if not ok)
        if not before or bad:
            raise SystemExit(f"{task.name}: base tests must all pass; failing: {bad}")
        # gold patch
        for rel, old, new in task.fixes:
            path = work / rel
            text = path.read_text()
            if text.count(old) != 1:
                raise SystemExit(f"{task.name}: fix text for {rel} matches {text.count(old)} times")
            path.write_text(text.replace(old, new))
        _git(work, "add", "-A")
        gold = _git(work, "diff", "--cached")
        _git(work, "reset", "-q", "--hard", base)
        # test patch
        _write(work, task.tests)
        _git(work, "add", "-A")
        test_patch = _git(work, "diff", "--cached")
        unfixed = _pytest(work)
        subprocess.run(["git", "apply"], cwd=work, input=gold, text=True, check=True)
        fixed = _pytest(work)
    broken = sorted(n for n, ok in fixed.items() if not ok)
    if broken:
        raise SystemExit(f"{task.name}: with the gold patch these still fail: {broken}")
    f2p = sorted(n for n, ok in unfixed.items() if not ok)
    p2p = sorted(n for n, ok in unfixed.items() if ok)
    if not f2p:
        raise SystemExit(f"{task.name}: no test fails before the fix")
    if any("::" not in n for n in f2p) or set(f2p) - set(fixed):
        raise SystemExit(f"{task.name}: FAIL_TO_PASS must be test ids that exist after the fix")
    if set(fixed) != set(unfixed):
        raise SystemExit(f"{task.name}: the fix changes which tests exist")
    return {
        "instance_id": f"mini-swe__{task.name}-1",
        "repo": f"mini-swe/{task.name}",
        "base_commit": base,
        "problem_statement": task.issue,
        "patch": gold,
        "test_patch": test_patch,
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        "megaflow_source": {"type": "dir", "path": f"repos/{task.name}"},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help="Build only these task names.")
    ap.add_argument("--check", action="store_true", help="Fail if instances.jsonl is stale.")
    args = ap.parse_args()
    files = sorted((HERE / "tasks").glob("*.task"))
    tasks = [Task(f.stem, f.read_text()) for f in files]
    out_path = SET_DIR / "instances.jsonl"
    existing: dict[str, str] = {}
    if out_path.exists():
        for line in out_path.read_text().splitlines():
            if line.strip():
                existing[json.loads(line)["repo"].split("/", 1)[1]] = line
    todo = [t for t in tasks if args.only is None or t.name in args.only]
    with ThreadPoolExecutor(max_workers=2) as pool:
        built = dict(zip([t.name for t in todo], pool.map(build_one, todo), strict=True))
    lines = []
    for t in tasks:
        if t.name in built:
            lines.append(json.dumps(built[t.name], sort_keys=True))
            print(f"ok  {t.name}: {len(built[t.name]['FAIL_TO_PASS'])} fail-to-pass")  # type: ignore[arg-type]
        elif t.name in existing:
            lines.append(existing[t.name])
    text = "\n".join(lines) + "\n"
    if args.check:
        if out_path.read_text() != text:
            print("instances.jsonl is stale; run build.py", file=sys.stderr)
            return 1
        return 0
    out_path.write_text(text)
    print(f"{len(lines)} instances -> {out_path.relative_to(SET_DIR.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
