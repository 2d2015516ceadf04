"""The pages an RL engineer lives in, in Chromium: task, trajectory, training, run, live pages.

One browser, one ``megaflow dashboard`` process and one live ``megaflow run``
(two mini-swe tasks, the replay model) serve the whole module, over one
SQLite file that also holds :mod:`tests.dashboard.seed_rl` (a GRPO group with
an agent error, 120 eval tasks, a tokenizer the run's config names) and its
training curves (a trained run and its control). Every page is also shot at
1400 and 800 px wide and must not scroll sideways. Screenshots go to
``.megaflow/test-artifacts/dashboard/`` (named in ``docs/dashboard.md``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest

from tests.dashboard.conftest import SHOTS
from tests.dashboard.seed_rl import (
    AGENT_ERROR,
    CANCELLED,
    DEAD,
    GROUP,
    LOST,
    PATCH,
    RETRIED_TASK,
    RUN,
    seed_curves,
    seed_rl,
    step,
)
from tests.dashboard.test_browser import MEGAFLOW, browsing, run_config, seed_stores

WIDTHS = (1400, 800)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The seeded stores, a live run into them, the dashboard over them and one browser."""
    tmp = tmp_path_factory.mktemp("rl-dash")
    config = run_config(tmp)  # its stores are tmp/m.db and tmp/art
    seed_stores(tmp, seed_rl)
    seed_curves(tmp / "train")
    text = config.read_text().replace("limit: 5", "limit: 2").replace("samples: 2", "samples: 1")
    config.write_text(text)
    run = subprocess.Popen(
        [MEGAFLOW, "run", str(config)], cwd=tmp, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    stores = ["--config", str(config), "--train-dir", str(tmp / "train")]
    try:
        with browsing(stores, tmp) as (browser, page, base):
            yield {"base": base, "page": page, "browser": browser, "run": run, "tmp": tmp}
    finally:
        if run.poll() is None:
            run.terminate()
            run.wait(timeout=30)


def shoot(page: Any, name: str) -> None:
    """Screenshots at each width; the page must fit it (no sideways scrolling)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(150)
        over = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert over <= 1, f"{name} at {width} px scrolls {over} px sideways"
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 900})


def test_task_page_says_why_the_task_failed(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(f"{site['base']}/task?id={GROUP}/3")
    page.wait_for_selector("#attempts-table")
    assert page.locator("#outcome").inner_text() == "agent error"
    assert page.locator("#task-error").inner_text() == AGENT_ERROR
    assert AGENT_ERROR in page.locator("#attempts-table").inner_text()
    shoot(page, "task-agent-error")


def test_trajectory_page_reads_like_an_inspector(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(f"{site['base']}/trajectory?id={GROUP}/0")
    page.wait_for_selector("#tokens span")
    assert page.locator("#outcome").inner_text() == "resolved"
    assert "reward 1.00" in page.locator("#banner").inner_text()
    words = page.locator("#tokens span").evaluate_all("es => es.map(e => e.textContent)")
    assert words[:4] == [" write_file", " DEBUG", " =", " True"]  # decoded, not ids
    assert page.locator("#tokens span").first.get_attribute("title") == (
        "id 4 · logprob -0.010 · mask 1"
    )
    prompt = page.locator("#prompt-tokens span").evaluate_all("es => es.map(e => e.textContent)")
    assert prompt == ["fix", " the", " settings"]  # the prompt decoded, shown
    assert page.locator("#steps .turn").count() == 2  # one box per turn
    first = page.locator("#steps .turn").first
    assert first.locator(".diff .add").inner_text().strip() == PATCH.splitlines()[-1]
    assert "\\n" not in first.inner_text()  # the patch is not escaped JSON on one line
    rows = page.locator("#group-table tr").all_inner_texts()
    assert len(rows) == 5
    assert "1.732" in rows[1]
    assert "agent error" in rows[4]
    assert page.locator("#estimator strong").inner_text() == "Advantage estimator: grpo"
    shoot(page, "trajectory-inspector")
    page.locator("#next").click()
    page.wait_for_selector("#banner-error")
    assert unquote(page.url).endswith(f"{GROUP}/3")
    assert page.locator("#banner-error").inner_text() == AGENT_ERROR
    assert page.locator("#banner.bad").count() == 1
    page.locator("#prev").click()
    page.wait_for_selector("#outcome")
    assert unquote(page.url).endswith(f"{GROUP}/0")


def test_each_attempts_trajectory_from_the_task_page(site: dict[str, Any]) -> None:
    """A task retried after an infrastructure error: both attempts' trajectories are linked
    from its attempts table, and the trajectory page says which attempt it shows."""
    page = site["page"]
    page.goto(f"{site['base']}/task?id={RETRIED_TASK}")
    page.wait_for_selector("#attempts-table")
    links = page.locator("#attempts-table a", has_text="trajectory")
    assert links.count() == 2
    links.first.click()
    page.wait_for_selector("#attempt")
    assert page.locator("#attempt").inner_text() == "attempt 1 of 2 (retried)"
    assert page.locator("#outcome").inner_text() == "retried"
    assert page.locator("#banner-error").inner_text() == LOST
    assert "first try, cut off" in page.locator("#steps").inner_text()
    shoot(page, "trajectory-earlier-attempt")
    page.locator("#other-attempts a").click()  # to the result's attempt
    page.wait_for_function("() => location.search.includes('attempt=2')")
    page.wait_for_selector("#attempt")
    assert page.locator("#attempt").inner_text() == "attempt 2 of 2 (the task's)"
    assert page.locator("#outcome").inner_text() == "resolved"


def test_live_run_trajectory_shows_the_patch_as_a_diff(site: dict[str, Any]) -> None:
    """A trajectory the replay model wrote in the live run: its write_file patch as a diff."""
    assert site["run"].wait(timeout=300) == 0, site["run"].stdout.read()
    page = site["page"]
    page.goto(f"{site['base']}/")
    page.wait_for_selector("#runs-table")
    page.locator("#runs-table a", has_text="dash").first.click()
    page.wait_for_selector("#tasks-table a")
    page.locator("#tasks-table a").first.click()
    page.locator("#meta").get_by_role("link", name="trajectory").click()
    page.wait_for_selector("#steps .turn")
    assert page.locator("#steps .diff .add").count() > 0
    assert page.locator("#outcome").inner_text() == "resolved"
    shoot(page, "trajectory-live")


def test_training_page_charts_overlay_config_and_links(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(f"{site['base']}/training")  # the list: pick two runs to overlay
    page.wait_for_selector("#training-table")
    page.select_option("#ov-a", RUN)
    page.select_option("#ov-b", f"{RUN}-control")
    page.locator("#ov-go").click()
    page.wait_for_selector("#grad-chart canvas")
    assert page.url.endswith(f"/training?id={RUN}&vs={RUN}-control")
    shown = page.locator("#charts").get_attribute("data-shown").split()
    for chart in ("loss", "grad", "clip", "signal", "length", "tps", "time", "stale"):
        assert chart in shown, chart
    assert "kl" not in shown
    assert page.locator("#kl-chart").is_hidden()
    legend = page.locator("#reward-chart").inner_text()
    assert f"{RUN}-control: train reward" in legend
    assert f"{RUN}: held-out pass@1" in legend
    assert f"{RUN}: held-out pass@4" in legend  # pass@k, k the samples per prompt
    page.locator("#config summary").click()
    assert '"kl_coef": 0' in page.locator("#config-json").inner_text()
    shoot(page, "training-overlay")
    page.locator("#steps-table a", has_text="2").first.click()
    page.wait_for_selector("#tasks-table")
    assert page.locator("#f-type").input_value() == "train"
    assert page.locator("#f-q").input_value() == ".s00002."
    page.goto(f"{site['base']}/run?id={RUN}")
    page.wait_for_selector("#training-link a")
    # the seeded config is no full run config: each type's total is what is queued, and says so
    assert "train 4/4 submitted" in page.locator("#type-progress").inner_text()
    page.locator("#training-link a").click()
    page.wait_for_selector("#run-link")
    assert page.url.endswith(f"/training?id={RUN}")
    page.wait_for_selector("#steps-table")
    assert page.locator("#steps-table tr").count() == 4
    # a new step in curve.json (the loop rewrites it after each step) shows without a reload
    path = site["tmp"] / "train" / RUN / "curve.json"
    curve = json.loads(path.read_text())
    curve["steps"].append(step(4, 0.9))
    path.write_text(json.dumps(curve))
    page.wait_for_function("() => document.querySelectorAll('#steps-table tr').length === 5")
    page.locator("#smooth").fill("0.5")  # smoothing, kept in the URL
    page.wait_for_function("() => location.search.includes('smooth=0.5')")


def test_run_page_pages_sorts_searches_in_the_url(site: dict[str, Any]) -> None:
    page, base = site["page"], site["base"]
    page.goto(f"{base}/run?id={RUN}&type=train")
    page.wait_for_function("() => document.querySelectorAll('#tasks-table tr').length === 5")
    assert page.locator("#f-type").input_value() == "train"  # ?type= honoured
    assert not page.locator("#tasks-table a").first.inner_text().startswith(f"{RUN}/")
    first = "() => document.querySelector('#tasks-table tr:nth-child(2) td:nth-child(6)')"
    page.locator("th[data-sort=reward]").click()
    page.wait_for_function("() => location.search.includes('sort=reward')")
    page.wait_for_function(first + ".innerText === '0.00'")  # the lowest reward first
    page.locator("th[data-sort=reward]").click()
    page.wait_for_function("() => location.search.includes('sort=-reward')")
    page.wait_for_function(first + ".innerText === '1.00'")  # then the highest
    page.goto(f"{base}/run?id={RUN}")
    info = "() => (document.getElementById('page-info')?.innerText || '').includes('124')"
    page.wait_for_function(info)
    assert page.locator("#tasks-table tr").count() == 51
    page.locator("#page-next").click()
    page.wait_for_function("() => location.search.includes('page=2')")
    shoot(page, "run-paged")
    page.fill("#f-q", "malformed")
    page.wait_for_function("() => document.querySelectorAll('#tasks-table tr').length === 2")
    assert "q=malformed" in page.url
    assert "page=" not in page.url
    page.goto(f"{base}/run?id=no-such-run")
    page.wait_for_selector("#no-run")
    assert "No such run" in page.locator("#no-run").inner_text()
    page.screenshot(path=str(SHOTS / "run-unknown.png"))


def test_link_kept_through_sign_in_and_pages_say_metrics_are_not_wired(
    site: dict[str, Any],
) -> None:
    base = site["base"]
    fresh = site["browser"].new_page(viewport={"width": 800, "height": 900})
    fresh.goto(f"{base}/run?id={RUN}&type=train")
    assert "/login?next=" in fresh.url
    fresh.fill("#token", (site["tmp"] / "token").read_text().strip())
    fresh.locator("button[type=submit]").click()
    fresh.wait_for_selector("#tasks-table")
    assert fresh.url == f"{base}/run?id={RUN}&type=train"
    fresh.goto(f"{base}/sandboxes")
    fresh.wait_for_selector("#reason")
    assert fresh.locator("#reason").inner_text().startswith("Metrics not wired")
    assert fresh.locator("#wired").is_hidden()  # no empty metrics tables under the notice
    fresh.goto(f"{base}/scheduler")
    fresh.wait_for_selector("#no-scheduler")
    assert "need the scheduler's metrics" in fresh.locator("#no-scheduler").inner_text()
    fresh.close()


def test_runs_page_keeps_types_apart_and_cancelled_out_of_the_work(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(f"{site['base']}/")
    row = page.locator("#runs-table tr", has=page.locator(f"a:text-is('{CANCELLED}')"))
    row.wait_for()
    text = row.inner_text()
    assert "0/3 done, 3 cancelled" in text  # cancelled is never done (core/outcomes.py)
    assert "0.00 /s" in text  # cancelled tasks are no throughput
    assert "nothing graded" in text  # a dash, not 0.0%
    rl = page.locator("#runs-table tr", has=page.locator(f"a:text-is('{RUN}')")).inner_text()
    assert "train: 25.0% (1/4)" in rl
    assert "eval: 33.3% (40/120)" in rl
    assert "agent error 1" in rl
    dead = page.locator("#runs-table tr", has=page.locator(f"a:text-is('{DEAD}')")).inner_text()
    assert "driver gone" in dead
    shoot(page, "runs")
    page.goto(f"{site['base']}/run?id={RUN}")
    page.wait_for_selector("#types-table")
    assert page.locator("#types-table tr").count() == 3  # eval and train, each its own row
    page.locator("#vs-control").click()  # the run and its control arm, per instance
    page.wait_for_selector("#compare-table")
    row = page.locator("#compare-table tr", has_text="settings-fix-3").inner_text()
    assert "1/4" in row
    assert "0/2" in row
    assert "-0.25" in row
    assert "vs=rl-control" in page.url
    page.goto(f"{site['base']}/run?id={DEAD}")
    page.wait_for_selector("#driver-gone")
