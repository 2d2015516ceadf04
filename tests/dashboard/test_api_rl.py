"""The API behind what an RL engineer reads: why a task failed, the trajectory's outcome,
tokens decoded, its GRPO group and neighbours, the run's task pages, the training figures.

Over :mod:`tests.dashboard.seed_rl` in real SQLite and artifact stores, with a
real ``tokenizers`` tokenizer named by the run's config.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from megaflow.dashboard.auth import DashboardAuth
from megaflow.dashboard.server import create_app
from megaflow.dashboard.training import TrainingRuns
from tests.dashboard.seed_rl import (
    AGENT_ERROR,
    CANCELLED,
    CONTROL,
    DEAD,
    EVAL_TASKS,
    GROUP,
    INSTANCE,
    LOST,
    RETRIED_TASK,
    RUN,
    seed_curves,
    seed_rl,
)
from tests.dashboard.stores import open_stores

TOKEN = "r" * 32
H = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    async with open_stores(tmp_path) as (meta, art):
        await seed_rl(meta, art, tmp_path)
        seed_curves(tmp_path / "train")
        training = TrainingRuns(art, tmp_path / "train", "train/checkpoints")
        auth = DashboardAuth(TOKEN)
        yield TestClient(create_app(meta, art, auth, training=training), follow_redirects=False)


def test_task_says_why_it_failed(client: TestClient) -> None:
    t = client.get(f"/api/task?id={GROUP}/3", headers=H).json()
    assert (t["outcome"], t["errored"], t["error"]) == ("agent error", True, AGENT_ERROR)
    [attempt] = t["attempts"]  # the attempt ended fine; the agent's failure is the result's
    assert (attempt["error_kind"], attempt["error"]) == ("agent", AGENT_ERROR)


def test_trajectory_outcome_tokens_group_and_neighbours(client: TestClient) -> None:
    v = client.get(f"/api/trajectory?id={GROUP}/0", headers=H).json()
    assert (v["outcome"], v["reward"], v["errored"]) == ("resolved", 1.0, False)
    s = v["sample"]
    # decoded by the run's tokenizer: each token's piece of the text, spaces included
    assert s["prompt_text"] == ["fix", " the", " settings"]
    assert s["completion_text"][:4] == [" write_file", " DEBUG", " =", " True"]
    assert s["decoded_by"].endswith("tokenizer.json")
    g = v["group_rewards"]
    assert [m["reward"] for m in g["members"]] == [1.0, 0.0, 0.0, 0.0]
    assert [m["outcome"] for m in g["members"]] == [
        "resolved", "unresolved", "unresolved", "agent error"
    ]  # fmt: skip
    # GRPO: (r - 0.25) / (pstdev 0.433 + 1e-6)
    assert g["members"][0]["advantage"] == pytest.approx(1.7320, abs=1e-3)
    assert g["members"][1]["advantage"] == pytest.approx(-0.5773, abs=1e-3)
    assert (v["previous"], v["next"]) == (None, f"{GROUP}/3")
    bad = client.get(f"/api/trajectory?id={GROUP}/3", headers=H).json()
    assert (bad["outcome"], bad["error"]) == ("agent error", AGENT_ERROR)
    assert bad["previous"] == v["task"]


def test_run_pages_sort_search_and_short_ids(client: TestClient) -> None:
    view = client.get(f"/api/run?id={RUN}", headers=H).json()
    assert (view["matched"], view["pages"], len(view["tasks"])) == (EVAL_TASKS + 4, 3, 50)
    assert view["tasks"][0]["short_id"] == "ab12.e00000.heldout-000/0"  # no "rl/" prefix
    last = client.get(f"/api/run?id={RUN}&page=3", headers=H).json()
    assert len(last["tasks"]) == EVAL_TASKS + 4 - 100
    train = client.get(f"/api/run?id={RUN}&type=train&sort=-reward", headers=H).json()
    assert [t["reward"] for t in train["tasks"]] == [1.0, 0.0, 0.0, 0.0]
    # the histograms count every task that matched, not only the page shown
    assert sum(view["reward_histogram"]["counts"]) == EVAL_TASKS + 4
    found = client.get(f"/api/run?id={RUN}&q=MALFORMED", headers=H).json()
    assert [t["id"] for t in found["tasks"]] == [f"{GROUP}/3"]
    assert client.get(f"/api/run?id={RUN}&sort=nope", headers=H).status_code == 400
    assert client.get("/api/run?id=nope", headers=H).status_code == 404


def test_a_link_opened_before_sign_in_is_kept(client: TestClient) -> None:
    page = f"/run?id={RUN}&type=train"
    resp = client.get(page)
    assert resp.headers["location"] == "/login?next=" + quote(page, safe="")
    form = client.get(resp.headers["location"])
    assert 'name="next" value="/run?id=rl&amp;type=train"' in form.text
    signed = client.post("/login", data={"token": TOKEN, "next": page})
    assert (signed.status_code, signed.headers["location"]) == (303, page)
    # never off this server
    for away in ("//evil.example/x", "/\t/evil.example/x", "/\\evil.example", "https://e.x/"):
        off = client.post("/login", data={"token": TOKEN, "next": away})
        assert off.headers["location"] == "/", away


def test_training_view_has_every_figure_the_config_and_the_run(client: TestClient) -> None:
    v = client.get(f"/api/training?id={RUN}", headers=H).json()
    assert (v["has_run"], v["config"]["train"]["kl_coef"]) == (True, 0.0)
    last = v["curve"]["steps"][-1]
    for key in ("grad_norm", "clip_fraction", "groups_with_signal", "response_length",
                "reward_std", "sync_s", "tokens", "seconds"):  # fmt: skip
        assert last[key] is not None, key
    assert client.get(f"/api/run?id={RUN}", headers=H).json()["training"] is True


def test_figures_per_type_and_a_cancelled_run(client: TestClient) -> None:
    runs = {r["id"]: r for r in client.get("/api/runs", headers=H).json()}
    rl = runs[RUN]
    train, evals = rl["by_type"]["train"], rl["by_type"]["eval"]
    assert (train["tasks"], train["graded"], train["resolved"]) == (4, 4, 1)
    assert (evals["tasks"], evals["resolved"]) == (EVAL_TASKS, EVAL_TASKS // 3)
    assert train["resolved_share"] == 0.25  # not mixed with the held-out tasks' 1/3
    assert rl["outcomes"] == {"agent error": 1}  # the outcome word, as the command line says it
    gone = runs[CANCELLED]
    assert (gone["done"], gone["cancelled"], gone["throughput"]) == (3, 3, 0.0)
    assert (gone["resolved_share"], gone["reward_mean"]) == (None, None)  # a dash, not 0.0%
    assert runs[DEAD]["driver"] == "gone"  # unfinished, and its lease ended
    assert runs[RUN]["driver"] is None  # nothing unfinished


def test_two_runs_per_instance(client: TestClient) -> None:
    v = client.get(f"/api/compare?a={RUN}&b={CONTROL}", headers=H).json()
    rows = {(r["instance"], r["type"]): r for r in v["rows"]}
    both = rows[(INSTANCE, "train")]  # same instance, ids that differ by run and round
    assert (both["a"]["samples"], both["a"]["resolved"], both["b"]["samples"]) == (4, 1, 2)
    assert both["delta"] == pytest.approx(-0.25)
    assert rows[("ab12.e00000.heldout-000", "eval")]["b"] is None  # sampled by one run only
    assert client.get(f"/api/compare?a={RUN}&b=nope", headers=H).status_code == 404


def test_each_attempts_trajectory_is_reachable(client: TestClient) -> None:
    t = client.get(f"/api/task?id={RETRIED_TASK}", headers=H).json()
    assert [(a["number"], a["has_trajectory"]) for a in t["attempts"]] == [(1, True), (2, True)]
    last = client.get(f"/api/trajectory?id={RETRIED_TASK}", headers=H).json()
    assert last["attempt"] == {"number": 2, "of": 2, "final": True}
    assert (last["outcome"], last["reward"]) == ("resolved", 1.0)
    first = client.get(f"/api/trajectory?id={RETRIED_TASK}&attempt=1", headers=H).json()
    assert first["attempt"] == {"number": 1, "of": 2, "final": False}
    assert (first["outcome"], first["error"], first["reward"]) == ("retried", LOST, None)
    assert first["trajectory"]["steps"][0]["content"] == "first try, cut off"
    assert [a["this"] for a in first["attempts"]] == [True, False]
    none = client.get(f"/api/trajectory?id={RETRIED_TASK}&attempt=3", headers=H)
    assert none.status_code == 404
    assert "attempt 3" in none.text
