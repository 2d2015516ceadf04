"""The runs and run pages' rows, a control arm, sign-in mid-session and the live pages without
metrics, in Chromium against ``megaflow dashboard`` over :mod:`tests.dashboard.seed_rl`.

Rows must stay one line, two at most at 800 px (long run ids, a control arm's
tag and a long error included), where tasks stand is counted by outcome
(never ``succeeded`` beside an error count), a page whose session ends comes
back to itself after signing in again, and the sandboxes and scheduler pages
show what the metadata store knows (tasks waiting and in flight, those of a
run whose driver died apart) with one notice of how to wire the metrics.
Screenshots (``.megaflow/test-artifacts/dashboard/``): ``runs-rows-{1400,800}.png``,
``run-rows-{1400,800}.png``, ``run-control-arm-{1400,800}.png``,
``sandboxes-store-{1400,800}.png``, ``scheduler-store-{1400,800}.png``,
``sandboxes-unmeasured-{1400,800}.png``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboard.seed_rl import CANCELLED, CONTROL, DEAD, RUN, seed_rl
from tests.dashboard.test_browser import browsing, seed_stores, start_dashboard
from tests.dashboard.test_browser_rl import WIDTHS, shoot
from tests.fixtures.servers import free_port

LINE = 20.0  # px: one line of the dashboard's 14 px text at line-height 1.4


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("rows")
    seed_stores(tmp, seed_rl)
    stores = ["--db", str(tmp / "m.db"), "--artifacts", str(tmp / "art")]
    with browsing(stores, tmp) as (_, page, base):
        yield {"base": base, "page": page, "tmp": tmp}


def row_lines(page: Any, table: str) -> list[float]:
    """Each body row's height in lines of text (less the cells' 8 px of padding)."""
    heights = page.evaluate(
        f"() => [...document.querySelectorAll('{table} tr')].slice(1)"
        ".map(r => r.getBoundingClientRect().height)"
    )
    return [(h - 9) / LINE for h in heights]


def test_runs_rows_by_outcome_and_at_most_two_lines(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(f"{site['base']}/")
    page.wait_for_selector(f"#runs-table a:text-is('{CONTROL}')")
    head = page.locator("#runs-table tr").first.inner_text()
    assert "outcomes" in head
    assert "states" not in head
    rl = page.locator("#runs-table tr", has=page.locator(f"a:text-is('{RUN}')")).inner_text()
    assert "resolved 41" in rl
    assert "agent error 1" in rl
    assert "succeeded" not in page.locator("#runs-table").inner_text()  # a state, not an outcome
    control = page.locator("#runs-table tr", has=page.locator(f"a:text-is('{CONTROL}')"))
    assert control.locator(".arm").inner_text() == "control arm"
    gone = page.locator("#runs-table tr", has=page.locator(f"a:text-is('{CANCELLED}')"))
    assert "0/3 done, 3 cancelled" in gone.inner_text()
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(200)
        lines = row_lines(page, "#runs-table")
        assert max(lines) <= 2.2, f"a runs row takes {max(lines):.1f} lines at {width} px"
    shoot(page, "runs-rows")


def test_run_rows_one_line_with_a_long_error(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(f"{site['base']}/run?id={RUN}&type=train&vs={CONTROL}")
    page.wait_for_selector("#compare-table")
    page.wait_for_function("() => document.querySelectorAll('#tasks-table tr').length === 5")
    assert page.locator("#compare-legend").inner_text().startswith(f"A: {RUN} · B: {CONTROL}")
    outcomes = page.locator("#summary .outcomes").inner_text()
    assert outcomes == "resolved 41, unresolved 82, agent error 1"
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(200)
        for table in ("#tasks-table", "#compare-table"):
            lines = row_lines(page, table)
            assert max(lines) <= 1.2, f"{table}: a row takes {max(lines):.1f} lines at {width} px"
    err = page.locator("#tasks-table .clip", has_text="malformed")
    assert err.get_attribute("title").startswith("the model gave 2 malformed answers")
    shoot(page, "run-rows")
    page.goto(f"{site['base']}/run?id={RUN}")
    page.wait_for_function("() => document.querySelectorAll('#tasks-table tr').length === 51")
    height = page.evaluate("() => document.documentElement.scrollHeight")
    assert height < 3500, f"a 124-task run page is {height} px tall"  # one page of 50


def test_control_arm_reads_as_the_control(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(f"{site['base']}/run?id={CONTROL}")
    page.wait_for_selector("#control-arm")
    note = page.locator("#control-arm")
    assert note.inner_text().startswith(f"Control arm of job {RUN}:")
    note.get_by_role("link", name="per instance beside it").click()
    page.wait_for_selector("#compare-table")
    assert page.url.endswith(f"/run?id={RUN}&vs={CONTROL}")
    page.goto(f"{site['base']}/run?id={CONTROL}")
    page.wait_for_selector("#control-arm")
    shoot(page, "run-control-arm")


def test_a_page_whose_session_ends_comes_back_after_sign_in(site: dict[str, Any]) -> None:
    page = site["page"]
    here = f"/run?id={RUN}&type=train"
    page.goto(site["base"] + here)
    page.wait_for_selector("#tasks-table")
    page.context.clear_cookies()  # the session ends (the token was changed, say)
    page.select_option("#f-state", "succeeded")  # the page's next request gets 401
    page.wait_for_url("**/login?next=*")
    page.fill("#token", (site["tmp"] / "token").read_text().strip())
    page.locator("button[type=submit]").click()
    page.wait_for_selector("#tasks-table")
    assert page.url == f"{site['base']}/run?id={RUN}&state=succeeded&type=train"


def test_sandboxes_and_scheduler_pages_from_the_store(site: dict[str, Any]) -> None:
    page = site["page"]
    page.goto(f"{site['base']}/sandboxes")
    page.wait_for_selector("#flight-table")
    assert page.locator("#flight-count").inner_text() == "No task in flight under a live driver."
    assert page.locator("#flight-stuck").inner_text().startswith("1 more are stuck in flight")
    row = page.locator("#flight-table tr", has_text=DEAD).inner_text()
    assert "t1/0" in row
    assert "running (driver gone)" in row
    assert page.locator("#reason").count() == 1  # one notice of how to wire the metrics...
    assert "--metrics-port" in page.locator("#reason").inner_text()
    assert page.locator("#wired").is_hidden()  # ...not empty tables repeating it
    assert page.locator("main").inner_text().count("Not wired") == 0
    shoot(page, "sandboxes-store")
    page.goto(f"{site['base']}/scheduler")
    page.wait_for_selector("#queued-stuck")
    assert "all\t0" in page.locator("#queued-table").inner_text()
    assert page.locator("#queued-stuck").inner_text().startswith("1 more wait in runs whose")
    assert page.locator("#reason").count() == 1
    shoot(page, "scheduler-store")


def test_by_state_and_each_sandbox_add_up(site: dict[str, Any]) -> None:
    """A runtime's real metrics (prometheus_client over HTTP): four live sandboxes, one
    starting, two busy, one stopped and not yet removed, and only one measured so far. The
    table by state shows every state and the total; each sandbox's table lists the measured
    one and a row for the three not measured yet, so the two add up to the same four."""
    from prometheus_client import CollectorRegistry, start_http_server

    from megaflow.monitoring.environment import EnvironmentMetrics

    reg = CollectorRegistry()
    env = EnvironmentMetrics(reg)
    for then in (None, "busy", "busy", "stopped"):
        env.moved("local", None, "starting")
        if then:
            env.moved("local", "starting", then)
    env.sandbox_usage("local", "sb-a", cpu_seconds=1.0, memory_bytes=32 << 20)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=reg)
    metrics = ["--metrics", f"http://127.0.0.1:{port}/metrics"]
    stores = ["--db", str(site["tmp"] / "m.db"), "--artifacts", str(site["tmp"] / "art")]
    (site["tmp"] / "wired").mkdir()
    dash, base, link = start_dashboard([*stores, *metrics], site["tmp"] / "wired")
    context = site["page"].context.browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(link)
        page.goto(f"{base}/sandboxes")
        page.wait_for_selector("#unmeasured")
        header, row = page.locator("#states-table tr").all_inner_texts()
        assert header.split("\t")[2:] == ["starting", "ready", "busy", "stopped", "live"]
        assert row.split("\t")[2:] == ["1", "0", "2", "1", "4"]
        assert page.locator("#sandbox-count").inner_text() == (
            "4 live sandboxes by state, 1 of them measured."
        )
        assert page.locator("#sandboxes-table tr").count() == 3  # header, sb-a, the other 3
        assert page.locator("#unmeasured").inner_text().startswith("3 more live, not measured")
        assert page.locator("#reason").count() == 0
        shoot(page, "sandboxes-unmeasured")
    finally:
        context.close()
        dash.terminate()
        dash.wait(timeout=10)
        server.shutdown()
        thread.join(timeout=10)
