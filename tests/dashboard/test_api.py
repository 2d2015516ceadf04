"""The dashboard's API over seeded stores: the token, figures, filters, grades, train tokens.

A run is written straight into the stores (one ``train`` sample with a
token-exact two-call episode, one with a re-tokenized history, one failed
for lost infrastructure), so every figure below is known in advance.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, RunSpec, TaskResult, TaskSpec, TaskType
from megaflow.core.trajectory import Action, ModelCall, Observation, Trajectory
from megaflow.dashboard.auth import COOKIE, DashboardAuth
from megaflow.dashboard.queries import histogram
from megaflow.dashboard.server import create_app
from megaflow.storage.abstract import ArtifactStore, MetadataStore
from megaflow.storage.config import LocalArtifactsConfig, SqliteMetadataConfig

TOKEN = "t" * 32
RUN = "seeded"
PATH_TO_SUCCESS = [TaskState.SCHEDULED, TaskState.STARTING, TaskState.RUNNING, TaskState.GRADING]


def episode(task_id: str, second_prompt: list[int]) -> Trajectory:
    traj = Trajectory(id=f"{task_id}/a1", task_id=task_id, run_id=RUN)
    traj.meta.update(task_type="train", group_id=f"{RUN}/t")
    traj.add(ModelCall(prompt_token_ids=[1, 2, 3], token_ids=[4, 5], logprobs=[-0.1, -2.0],
                       response={"message": {"role": "assistant", "content": "ls"}},
                       weights_version=3))  # fmt: skip
    traj.add(Action(tool="bash", arguments={"command": "ls"}))
    traj.add(Observation(content="a.py", exit_code=0))
    traj.add(ModelCall(prompt_token_ids=second_prompt, token_ids=[8], logprobs=[-0.5],
                       weights_version=4))  # fmt: skip
    return traj


async def seed(meta: MetadataStore, art: ArtifactStore) -> None:
    await meta.create_run(RunSpec(id=RUN, name="seeded"))
    specs = [
        TaskSpec(id=f"{RUN}/t/{n}", run_id=RUN, type=TaskType.TRAIN, sample=n) for n in range(3)
    ]
    await meta.add_tasks(specs)
    good, drift = episode(specs[0].id, [1, 2, 3, 4, 5, 6, 7]), episode(specs[1].id, [1, 2, 9, 9])
    for spec, traj, reward in ((specs[0], good, 1.0), (specs[1], drift, 0.0)):
        for dst in [*PATH_TO_SUCCESS, TaskState.SUCCEEDED]:
            await meta.transition(spec.id, dst)
        key = f"runs/{RUN}/{spec.sample}/trajectory.json"
        await art.put(key, json.dumps(traj.model_dump(mode="json")).encode())
        grade = {
            "resolved": reward == 1.0,
            "reward": reward,
            "statuses": {"tests/test_a.py::ok": "PASSED"},
        }
        await art.put(f"runs/{RUN}/{spec.sample}/grade.json", json.dumps(grade).encode())
        await art.put(f"runs/{RUN}/{spec.sample}/patch.diff", b"--- a/x\n+++ b/x\n-old\n+new\n")
        await meta.put_result(TaskResult(
            task_id=spec.id, success=reward == 1.0, reward=reward,
            metrics={"agent_s": 2.0, "grade_s": 1.0, "steps": 2.0},
            artifacts={"trajectory": key, "grade": f"runs/{RUN}/{spec.sample}/grade.json",
                       "patch": f"runs/{RUN}/{spec.sample}/patch.diff"},
        ))  # fmt: skip
    await meta.transition(specs[2].id, TaskState.SCHEDULED)
    await meta.transition(specs[2].id, TaskState.FAILED, error="instance lost")
    await meta.put_result(
        TaskResult(task_id=specs[2].id, error_kind=ErrorKind.INFRA_LOST, error="instance lost")
    )


async def seed_files(tmp: Path) -> tuple[MetadataStore, ArtifactStore]:
    """The seeded run in a SQLite file ``m.db`` and an artifact directory ``art`` under ``tmp``;
    the stores come back started."""
    meta = SqliteMetadataConfig(path=str(tmp / "m.db")).build()
    art = LocalArtifactsConfig(root=str(tmp / "art")).build()
    await meta.start()
    await art.start()
    await seed(meta, art)
    return meta, art


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    meta, art = await seed_files(tmp_path)
    app = create_app(meta, art, DashboardAuth(TOKEN), interval=0.1)
    yield TestClient(app, follow_redirects=False)
    await art.stop()
    await meta.stop()


def test_nothing_answers_without_the_token(client: TestClient) -> None:
    for path in ("/api/runs", f"/api/run?id={RUN}", "/api/stream", "/static/dashboard.js"):
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"authorization": "Bearer " + "w" * 32}).status_code == 401
    for page in ("/", f"/run?id={RUN}", "/task?id=x", "/trajectory?id=x"):
        resp = client.get(page)
        where = "/login" if page == "/" else "/login?next=" + quote(page, safe="")
        assert (resp.status_code, resp.headers["location"]) == (303, where), page
    assert client.get("/login").status_code == 200
    client.cookies.set(COOKIE, "forged")
    assert client.get("/api/runs").status_code == 401


def test_login_by_token_and_by_one_time_code() -> None:
    auth = DashboardAuth(TOKEN)
    code = auth.new_code()
    assert auth.redeem(code)
    assert not auth.redeem(code)
    assert not auth.redeem("made-up")
    assert auth.allows(f"Bearer {TOKEN}", None)
    assert auth.allows(None, auth.session_value)
    assert not DashboardAuth("u" * 32).allows(None, auth.session_value)


def test_login_form_sets_the_session_cookie(client: TestClient) -> None:
    wrong = client.post("/login", data={"token": "nope"})
    assert wrong.status_code == 401
    assert "Wrong token" in wrong.text
    resp = client.post("/login", data={"token": TOKEN})
    assert resp.status_code == 303
    client.cookies.set(COOKIE, resp.cookies[COOKIE])
    assert client.get("/api/runs").status_code == 200


def test_run_figures_and_filters(client: TestClient) -> None:
    h = {"authorization": f"Bearer {TOKEN}"}
    [run] = client.get("/api/runs", headers=h).json()
    assert run["states"] == {"succeeded": 2, "failed": 1}
    assert (run["graded"], run["resolved"], run["resolved_rate"]) == (2, 1, 0.5)
    assert run["reward_mean"] == 0.5
    assert run["reward_std"] == 0.5
    assert run["errors"] == {"infra_lost": 1}
    view = client.get(f"/api/run?id={RUN}&error_kind=infra_lost", headers=h).json()
    assert [t["id"] for t in view["tasks"]] == [f"{RUN}/t/2"]
    assert view["tasks"][0]["reward"] is None  # a masked sample has no reward, not 0
    view = client.get(f"/api/run?id={RUN}&state=succeeded", headers=h).json()
    assert [t["duration_s"] for t in view["tasks"]] == [3.0, 3.0]
    assert view["reward_histogram"]["counts"][0] == 1
    assert view["reward_histogram"]["counts"][-1] == 1
    assert client.get("/api/run?id=nope", headers=h).status_code == 404


def test_task_grade_and_train_tokens(client: TestClient) -> None:
    h = {"authorization": f"Bearer {TOKEN}"}
    task = client.get(f"/api/task?id={RUN}/t/0", headers=h).json()
    assert task["grade"]["statuses"] == {"tests/test_a.py::ok": "PASSED"}
    assert task["patch"].endswith("+new\n")
    view = client.get(f"/api/trajectory?id={RUN}/t/0", headers=h).json()
    sample = view["sample"]
    assert sample["prompt_ids"] == [1, 2, 3]
    assert sample["completion_ids"] == [4, 5, 6, 7, 8]
    assert sample["loss_mask"] == [1, 1, 0, 0, 1]
    assert sample["logprobs"] == [-0.1, -2.0, 0.0, 0.0, -0.5]
    assert sample["weights_version"] == 3
    drift = client.get(f"/api/trajectory?id={RUN}/t/1", headers=h).json()["sample"]
    assert "re-tokenized" in drift["problem"]
    assert client.get(f"/api/trajectory?id={RUN}/t/2", headers=h).status_code == 404


def test_stream_sends_the_runs(client: TestClient) -> None:
    h = {"authorization": f"Bearer {TOKEN}"}
    with client.stream("GET", f"/api/stream?run={RUN}", headers=h) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        line = next(line for line in resp.iter_lines() if line.startswith("data: "))
    assert json.loads(line[6:])["total"] == 3


def test_histogram_bins() -> None:
    assert histogram([]) == {"edges": [], "counts": []}
    assert histogram([1.0, 1.0]) == {"edges": [0.5], "counts": [2.0]}
    h = histogram([0.0, 0.5, 1.0], bins=2)
    assert h == {"edges": [0.0, 0.5], "counts": [1.0, 2.0]}
