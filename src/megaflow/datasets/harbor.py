"""Harbor task folders (the Harbor / terminal-bench 2.0 format) as MegaFlow tasks.

A Harbor task is a folder::

    task.toml            timeouts, cpus, memory, storage, internet, docker_image
    instruction.md       what the agent is asked
    environment/         Dockerfile (and what it copies): the task's image
    tests/test.sh        the verifier; writes /logs/verifier/reward.txt or reward.json
    solution/solve.sh    the reference solution (the gold arm)

:func:`read_task` reads one into a :class:`HarborTask` (every problem names the
file and the field); :func:`task_payload` is the payload of its MegaFlow task,
graded by the ``script`` grader (:mod:`megaflow.grading.script`). The tests
and the solution travel as text in the payload: they are never placed in the
agent's sandbox. The image is named by a hash of the ``environment/`` folder's
content (:func:`context_digest`), so an unchanged folder is built once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from megaflow.core.errors import InvalidInput

IMAGE_REPO = "localhost/megaflow-harbor"
MAX_FILE_BYTES = 1 << 20
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1 / (1 << 20), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1 << 20}


class HarborTask(BaseModel):
    """One Harbor task, read."""

    model_config = ConfigDict(extra="forbid")

    name: str
    instruction: str
    workdir: str = "/app"
    image: str | None = Field(None, description="task.toml's docker_image, or the built one.")
    context: str | None = Field(
        None, description="The environment/ folder, when it has a Dockerfile."
    )
    tests: dict[str, str]
    solution: dict[str, str] = Field(default_factory=dict)
    verifier_timeout_s: float = 600.0
    agent_timeout_s: float = 600.0
    cpus: float = 1.0
    memory_mb: int = 2048
    storage_mb: int | None = None
    internet: bool = False


def _mb(value: object, where: str) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    m = _SIZE.match(str(value))
    if m is None:
        raise InvalidInput(f"{where}: {value!r} is not a size (e.g. 2048, '2G', '512M')")
    return max(1, int(float(m.group(1)) * _UNITS[m.group(2).upper()]))


def _texts(folder: Path, where: str) -> dict[str, str]:
    """Every regular file under ``folder`` as text, by relative path; links refused."""
    out: dict[str, str] = {}
    for root, dirs, files in os.walk(folder):
        for name in sorted(dirs + files):
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                raise InvalidInput(f"{where}/{rel}: a symbolic link; Harbor tasks must hold files")
            if path.is_dir():
                continue
            data = path.read_bytes()
            if len(data) > MAX_FILE_BYTES:
                raise InvalidInput(f"{where}/{rel}: larger than {MAX_FILE_BYTES} bytes")
            try:
                out[rel] = data.decode()
            except UnicodeDecodeError:
                raise InvalidInput(f"{where}/{rel}: not UTF-8 text") from None
    return out


def _workdir(dockerfile: Path) -> str:
    """The last ``WORKDIR`` of the Dockerfile (Harbor's tasks use ``/app``)."""
    workdir = "/app"
    for line in dockerfile.read_text(errors="replace").splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and parts[0].upper() == "WORKDIR":
            workdir = parts[1].strip().strip("\"'")
    if not workdir.startswith("/") or workdir == "/":
        raise InvalidInput(f"{dockerfile}: WORKDIR {workdir!r} must be an absolute folder")
    return workdir


def context_digest(context: Path) -> str:
    """SHA-256 over the build context's paths, modes and bytes, in a fixed order."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(context):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            rel = path.relative_to(context).as_posix()
            h.update(f"{rel}\0{path.lstat().st_mode & 0o777:o}\0".encode())
            h.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def read_task(folder: Path) -> HarborTask:
    """Read the Harbor task in ``folder``; an :class:`InvalidInput` names what is wrong."""
    toml_path = folder / "task.toml"
    try:
        config: dict[str, Any] = tomllib.loads(toml_path.read_text())
    except FileNotFoundError:
        raise InvalidInput(f"{toml_path}: missing (every Harbor task has a task.toml)") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InvalidInput(f"{toml_path}: not valid TOML: {e}") from None
    instruction = folder / "instruction.md"
    if not instruction.is_file():
        raise InvalidInput(f"{instruction}: missing (the agent's instruction)")
    if not (folder / "tests" / "test.sh").is_file():
        raise InvalidInput(f"{folder / 'tests' / 'test.sh'}: missing (the verifier)")
    sections = {k: config.get(k, {}) for k in ("verifier", "agent", "environment")}
    for key, value in sections.items():
        if not isinstance(value, dict):
            raise InvalidInput(f"{toml_path}: [{key}] must be a table")
    env = sections["environment"]
    dockerfile = folder / "environment" / "Dockerfile"
    image = env.get("docker_image")
    if image is None and not dockerfile.is_file():
        raise InvalidInput(f"{toml_path}: no environment.docker_image and no {dockerfile}")
    fields: dict[str, Any] = {}
    try:
        for out, section, key in (("verifier_timeout_s", "verifier", "timeout_sec"),
                                  ("agent_timeout_s", "agent", "timeout_sec")):  # fmt: skip
            if key in sections[section]:
                fields[out] = float(sections[section][key])
        if "cpus" in env:
            fields["cpus"] = float(env["cpus"])
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{toml_path}: a timeout or cpus is not a number: {e}") from None
    for key in ("memory_mb", "memory"):
        if key in env:
            fields["memory_mb"] = _mb(env[key], f"{toml_path}: environment.{key}")
    for key in ("storage_mb", "storage"):
        if key in env:
            fields["storage_mb"] = _mb(env[key], f"{toml_path}: environment.{key}")
    internet = env.get("allow_internet", env.get("internet", False))
    if not isinstance(internet, bool):
        raise InvalidInput(f"{toml_path}: environment.allow_internet must be true or false")
    solution = folder / "solution"
    return HarborTask(
        name=folder.name,
        instruction=instruction.read_text(),
        workdir=_workdir(dockerfile) if dockerfile.is_file() else "/app",
        image=image,
        context=str(dockerfile.parent.absolute()) if dockerfile.is_file() else None,
        tests=_texts(folder / "tests", f"{folder.name}/tests"),
        solution=_texts(solution, f"{folder.name}/solution") if solution.is_dir() else {},
        internet=internet,
        **fields,
    )


def read_tasks(root: Path) -> list[HarborTask]:
    """Every task under ``root`` (a task folder, or a folder of them), by name."""
    if not root.is_dir():
        raise InvalidInput(f"{root}: not a folder")
    if (root / "task.toml").is_file():
        return [read_task(root)]
    folders = sorted(p for p in root.iterdir() if (p / "task.toml").is_file())
    if not folders:
        raise InvalidInput(f"{root}: no Harbor task (a folder with a task.toml) in it")
    return [read_task(p) for p in folders]


def image_tag(task: HarborTask) -> str:
    """The image a task runs in: its ``docker_image``, or the content-hashed build."""
    if task.context is None:
        assert task.image is not None
        return task.image
    return f"{IMAGE_REPO}:{context_digest(Path(task.context))[:24]}"


def task_payload(task: HarborTask) -> dict[str, Any]:
    """The payload of the task's MegaFlow task (read by the ``script`` grader)."""
    return {
        "task_id": task.name,
        "problem_statement": task.instruction,
        "megaflow_harbor": task.model_dump(mode="json") | {"image": image_tag(task)},
    }


def harbor_of(payload: dict[str, Any]) -> HarborTask | None:
    """The Harbor task a payload carries, if any."""
    raw = payload.get("megaflow_harbor")
    return HarborTask.model_validate(raw) if isinstance(raw, dict) else None


def write_rows(tasks: list[HarborTask], out: Path, overwrite: bool = False) -> None:
    """Write the converted task set: one JSON line ``{"id", "payload"}`` per task."""
    if out.exists() and not overwrite:
        raise InvalidInput(f"{out} exists; pass --force to overwrite it")
    lines = [json.dumps({"id": t.name, "payload": task_payload(t)}) for t in tasks]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(line + "\n" for line in lines))


def load_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(task id, payload)`` of every task: read from a Harbor folder (a task, or a
    folder of tasks) or from a converted JSONL file."""
    if path.is_dir():
        return [(t.name, task_payload(t)) for t in read_tasks(path)]
    out: list[tuple[str, dict[str, Any]]] = []
    try:
        text = path.read_text()
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read the Harbor task set: {e}") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            task = HarborTask.model_validate(row["payload"]["megaflow_harbor"])
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidInput(f"{path} line {n}: not a converted Harbor task: {e}") from None
        out.append((str(row.get("id", task.name)), row["payload"]))
    if not out:
        raise InvalidInput(f"{path}: holds no task")
    return out
