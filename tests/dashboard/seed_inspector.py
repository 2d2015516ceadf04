"""A train run seeded for the trajectory inspector, as the attempt pipeline stores it.

Run ``insp`` names a byte-level BPE tokenizer (``tokenizers``, trained here on
a few lines, so characters such as ``é`` and ``✓`` span several tokens), and
holds one GRPO group of three samples:

- ``/0`` resolved: a model call whose completion holds those characters, an
  ``edit`` call (``old_str`` -> ``new_str``), its observation, and a second
  call after a malformed answer's feedback (no tool ran);
- ``/1`` ended without a result trajectory, as the scheduler records a task
  whose attempt timed out: the attempt's trajectory under its own prefix, the
  result only an error;
- ``/2`` unresolved, stored under its attempt's prefix.
"""

from __future__ import annotations

import json
from pathlib import Path

from megaflow.core.states import TaskState
from megaflow.core.tasks import (
    Attempt,
    ErrorKind,
    RunSpec,
    TaskResult,
    TaskSpec,
    TaskType,
    artifact_prefix,
)
from megaflow.core.trajectory import Action, ModelCall, Observation, Trajectory
from megaflow.storage.abstract import ArtifactStore, MetadataStore

RUN = "insp"
GROUP = f"{RUN}/ab12.s00001.cafe"
PROMPT = "fix the settings"
SAID = "DEBUG = False  # café ✓"  # what the model answers: several multi-byte characters
OLD = "NAME = 'x'\nDEBUG = True,\nPORT = 1\n"
NEW = "NAME = 'x'\nDEBUG = True\nPORT = 1\n"
FEEDBACK = "error: your answer has no tool call. Use a tool, or call `submit` when you are done."
TIMED_OUT = "task exceeded its deadline of 6 s"
PATH = [TaskState.SCHEDULED, TaskState.STARTING, TaskState.RUNNING, TaskState.GRADING]


def byte_tokenizer(tmp: Path) -> tuple[Path, object]:
    """A byte-level BPE tokenizer saved as ``tmp/policy/tokenizer.json``, and the tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator([PROMPT, "DEBUG = True", "done"] * 3, trainer=trainer)
    out = tmp / "policy"
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    return out, tok


def _episode(spec: TaskSpec, tok: object, attempt: int = 1) -> Trajectory:
    enc = tok.encode  # type: ignore[attr-defined]
    prompt, said, fed = enc(PROMPT).ids, enc(SAID).ids, enc(" bad").ids
    traj = Trajectory(id=f"{spec.id}/a{attempt}", task_id=spec.id, run_id=RUN, attempt=attempt)
    traj.meta.update(task_type="train", group_id=GROUP)
    first = [
        {"role": "system", "content": "You fix settings."},
        {"role": "user", "content": PROMPT},
    ]
    answer = {"role": "assistant", "content": SAID}
    traj.add(ModelCall(
        request={"messages": first}, response={"message": answer},
        prompt_token_ids=prompt, token_ids=said, logprobs=[-0.1] * len(said), weights_version=2,
    ))  # fmt: skip
    args = {"path": "settings.py", "old_str": OLD, "new_str": NEW}
    call = {"id": "c1", "function": {"name": "edit", "arguments": json.dumps(args)}}
    again = [*first, answer, {"role": "user", "content": FEEDBACK}]
    traj.add(ModelCall(
        request={"messages": again},
        response={"message": {"role": "assistant", "content": "", "tool_calls": [call]}},
        prompt_token_ids=[*prompt, *said, *fed], token_ids=enc("done").ids, logprobs=[-2.0],
        weights_version=2,
    ))  # fmt: skip
    traj.add(Action(tool="edit", arguments=args))
    traj.add(Observation(content="edited settings.py", exit_code=0))
    return traj


async def _put(art: ArtifactStore, key: str, traj: Trajectory) -> None:
    await art.put(key, json.dumps(traj.model_dump(mode="json")).encode())


async def seed_inspector(meta: MetadataStore, art: ArtifactStore, tmp: Path) -> None:
    policy, tok = byte_tokenizer(tmp)
    config = {"model": {"type": "transformers", "path": str(policy)}, "train": {"steps": 1}}
    await meta.create_run(RunSpec(id=RUN, name=RUN, config=config))
    specs = [
        TaskSpec(id=f"{GROUP}/{n}", run_id=RUN, type=TaskType.TRAIN, sample=n) for n in range(3)
    ]
    await meta.add_tasks(specs)
    for n, spec in enumerate(specs):
        key = f"{artifact_prefix(spec, 1)}/trajectory.json"
        await _put(art, key, _episode(spec, tok))
        await meta.put_attempt(Attempt(
            task_id=spec.id, number=1, instance="local", sandbox=f"sb-{n}", ended_at=9.0,
            error_kind=ErrorKind.TIMEOUT if n == 1 else None, error=TIMED_OUT if n == 1 else None,
        ))  # fmt: skip
        for dst in PATH[:3] if n == 1 else PATH:
            await meta.transition(spec.id, dst)
        if n == 1:  # the scheduler's result of a timed-out attempt: an error, no artifacts
            await meta.transition(spec.id, TaskState.TIMED_OUT)
            res = TaskResult(task_id=spec.id, error_kind=ErrorKind.TIMEOUT, error=TIMED_OUT)
        else:
            await meta.transition(spec.id, TaskState.SUCCEEDED)
            res = TaskResult(task_id=spec.id, success=n == 0, reward=float(n == 0),
                             artifacts={"trajectory": key})  # fmt: skip
        await meta.put_result(res)
