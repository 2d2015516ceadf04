"""The trajectory inspector's API: tokens decoded as text, an errored task's own trajectory,
previous/next within the group.

Over :mod:`tests.dashboard.seed_inspector` in real SQLite and artifact stores,
with a real byte-level BPE tokenizer (``tokenizers``) named by the run's config.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from megaflow.dashboard.auth import DashboardAuth
from megaflow.dashboard.decoding import token_pieces
from megaflow.dashboard.server import create_app
from tests.dashboard.seed_inspector import (
    GROUP,
    PROMPT,
    SAID,
    TIMED_OUT,
    byte_tokenizer,
    seed_inspector,
)
from tests.dashboard.stores import open_stores

TOKEN = "i" * 32
H = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    async with open_stores(tmp_path) as (meta, art):
        await seed_inspector(meta, art, tmp_path)
        yield TestClient(create_app(meta, art, DashboardAuth(TOKEN)), follow_redirects=False)


def test_byte_level_tokens_read_as_the_text(tmp_path: Path) -> None:
    """A character of several bytes spans several tokens: decoded one by one each is
    U+FFFD; the pieces give the character to the token that completes it."""
    _, tok = byte_tokenizer(tmp_path)
    ids = tok.encode(SAID).ids  # type: ignore[attr-defined]
    alone = [tok.decode([i]) for i in ids]  # type: ignore[attr-defined]
    assert "\ufffd" in "".join(alone)  # what one-by-one decoding showed
    pieces = token_pieces(tok, ids)
    assert len(pieces) == len(ids)
    assert "".join(pieces) == SAID
    assert "\ufffd" not in "".join(pieces)
    assert "é" in pieces
    assert "✓" in pieces
    assert "" in pieces  # a character's leading bytes show nothing


def test_sentencepiece_tokens_keep_their_spaces() -> None:
    """A Metaspace tokenizer drops a token's leading space when it is decoded alone."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"▁the": 0, "▁cat": 1, "▁sat": 2, "<unk>": 3}, "<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    ids = tok.encode("the cat sat").ids
    assert [tok.decode([i]) for i in ids] == ["the", "cat", "sat"]
    assert token_pieces(tok, ids) == ["the", " cat", " sat"]


def test_invalid_bytes_the_model_generated_do_not_swallow_the_rest(tmp_path: Path) -> None:
    _, tok = byte_tokenizer(tmp_path)
    lone = tok.encode("é").ids[1:]  # type: ignore[attr-defined]  # a continuation byte alone
    ids = lone * 5 + tok.encode(PROMPT).ids  # type: ignore[attr-defined]
    pieces = token_pieces(tok, ids)
    assert "".join(pieces).endswith(PROMPT)
    assert sum(1 for p in pieces if p) >= len(ids) - 4  # held back at most 4 bytes' worth


def test_train_sample_decoded_through_the_api(client: TestClient) -> None:
    v = client.get(f"/api/trajectory?id={GROUP}/0", headers=H).json()
    s = v["sample"]
    assert "".join(s["prompt_text"]) == PROMPT
    assert "".join(s["completion_text"]).startswith(SAID)  # the answer, then fed-back tokens
    assert "\ufffd" not in "".join(s["completion_text"])
    assert v["trained"] is True


def test_a_task_ended_without_a_result_trajectory_shows_its_attempts(client: TestClient) -> None:
    """As the scheduler records a timed-out attempt: the result has no trajectory, the
    attempt's is under its prefix. The task's page links it, the trajectory page opens it
    with the task's outcome and error, and previous/next reach it."""
    task = client.get(f"/api/task?id={GROUP}/1", headers=H).json()
    assert task["has_trajectory"] is True
    v = client.get(f"/api/trajectory?id={GROUP}/1", headers=H)
    assert v.status_code == 200, v.text
    view = v.json()
    assert (view["outcome"], view["error"], view["reward"]) == ("timed out", TIMED_OUT, None)
    assert view["errored"] is True
    assert view["attempt"] == {"number": 1, "of": 1, "final": True}
    assert view["trained"] is False  # ungraded: masked
    assert view["sample"]["completion_ids"]  # its tokens still shown
    same = client.get(f"/api/trajectory?id={GROUP}/1&attempt=1", headers=H).json()
    assert same["outcome"] == "timed out"  # its last attempt is not a retried one
    first = client.get(f"/api/trajectory?id={GROUP}/0", headers=H).json()
    assert first["next"] == f"{GROUP}/1"
    members = first["group_rewards"]["members"]
    assert [m["has_trajectory"] for m in members] == [True, True, True]
    assert members[1]["outcome"] == "timed out"


def test_previous_and_next_within_the_group(client: TestClient) -> None:
    views = [client.get(f"/api/trajectory?id={GROUP}/{n}", headers=H).json() for n in range(3)]
    assert [(v["group_previous"], v["group_next"]) for v in views] == [
        (None, f"{GROUP}/1"),
        (f"{GROUP}/0", f"{GROUP}/2"),
        (f"{GROUP}/1", None),
    ]
