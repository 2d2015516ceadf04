"""The dashboard's FastAPI app: pages, a JSON API and a live stream, all behind the token.

:func:`create_app` takes open stores and a :class:`~megaflow.dashboard.auth.DashboardAuth`;
the caller owns the stores' lifecycle (:func:`serve` opens and closes them
around uvicorn). Pages are static HTML files that fetch ``/api/...``; the
stream ``/api/stream`` sends the runs' summaries (or one run's, with
``?run=``) as server-sent events every ``interval`` seconds, each read fresh
from the metadata store, and ends when the client goes away.
"""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Form, Request
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.dashboard import inflight, queries, summary, trajectories
from megaflow.dashboard.auth import COOKIE, OPEN_PATHS, DashboardAuth
from megaflow.dashboard.compare import compare_runs
from megaflow.dashboard.live import LiveMetrics
from megaflow.dashboard.training import TrainingRuns
from megaflow.storage.abstract import ArtifactStore, MetadataStore

STATIC = resources.files("megaflow.dashboard") / "static"
PAGES = {
    "/": "runs.html",
    "/run": "run.html",
    "/task": "task.html",
    "/trajectory": "trajectory.html",
    "/sandboxes": "sandboxes.html",
    "/scheduler": "scheduler.html",
    "/training": "training.html",
}
TRAIN_DIR = Path(".megaflow/train")
CHECKPOINT_PREFIX = "train/checkpoints"


def _static(name: str) -> Any:
    return STATIC / name


def create_app(
    meta: MetadataStore,
    artifacts: ArtifactStore,
    auth: DashboardAuth,
    *,
    interval: float = 1.0,
    live: LiveMetrics | None = None,
    training: TrainingRuns | None = None,
) -> FastAPI:
    """The app over open stores; ``live`` reads the sandboxes' and scheduler's metrics (none:
    the pages say there is no source), ``training`` the curves of ``megaflow train``."""
    metrics = live or LiveMetrics([])
    train = training or TrainingRuns(artifacts, TRAIN_DIR, CHECKPOINT_PREFIX)
    app = FastAPI(title="MegaFlow dashboard", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def require_token(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if request.url.path in OPEN_PATHS or auth.allows(
            request.headers.get("authorization"), request.cookies.get(COOKIE)
        ):
            return await call_next(request)
        if request.url.path in PAGES:  # back to this page after signing in
            here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            target = "/login" if here == "/" else f"/login?next={quote(here, safe='')}"
            return RedirectResponse(target, status_code=303)
        return JSONResponse(
            {"error": "missing or wrong bearer token"},
            status_code=401,
            headers={"www-authenticate": "Bearer"},
        )

    def _login_page(error: str = "", next: str = "/") -> HTMLResponse:
        text = _static("login.html").read_text().replace("{{error}}", error)
        text = text.replace("{{next}}", html.escape(_local(next), quote=True))
        return HTMLResponse(text, status_code=401 if error else 200)

    def _signed_in(next: str = "/") -> RedirectResponse:
        resp = RedirectResponse(_local(next), status_code=303)
        resp.set_cookie(COOKIE, auth.session_value, httponly=True, samesite="strict")
        return resp

    @app.get("/login")
    async def login_form(code: str | None = None, next: str = "/") -> Response:
        if code is None:
            return _login_page(next=next)
        if auth.redeem(code):
            return _signed_in(next)
        msg = "That link was already used or is not valid; enter the token."
        return _login_page(msg, next)

    @app.post("/login")
    async def login(token: str = Form(""), next: str = Form("/")) -> Response:
        if auth.token_matches(token):
            return _signed_in(next)
        return _login_page("Wrong token.", next)

    for path, name in PAGES.items():
        app.add_api_route(path, _page(name), methods=["GET"], response_class=HTMLResponse)

    @app.get("/static/{name}")
    async def static(name: str) -> Response:
        item = _static(name)
        if "/" in name or name.startswith(".") or not item.is_file():
            return JSONResponse({"error": f"no static file {name!r}"}, status_code=404)
        with resources.as_file(item) as path:
            return FileResponse(path)

    @app.get("/api/runs")
    async def runs() -> Any:
        return await summary.run_summaries(meta)

    @app.get("/api/run")
    async def run(
        id: str,
        state: str | None = None,
        type: str | None = None,
        error_kind: str | None = None,
        q: str | None = None,
        sort: str = "id",
        page: int = 1,
        per_page: int = queries.PAGE_SIZE,
    ) -> Any:
        filters = {"state": state, "task_type": type, "error_kind": error_kind, "search": q}
        return await _found(
            lambda: _run_view(meta, train, id, sort=sort, page=page, per_page=per_page, **filters)
        )

    @app.get("/api/compare")
    async def compare(a: str, b: str) -> Any:
        return await _found(lambda: compare_runs(meta, a, b))

    @app.get("/api/task")
    async def task(id: str) -> Any:
        return await _found(lambda: queries.task_detail(meta, artifacts, id))

    @app.get("/api/trajectory")
    async def trajectory(id: str, attempt: int | None = None) -> Any:
        return await _found(lambda: trajectories.trajectory_view(meta, artifacts, id, attempt))

    @app.get("/api/sandboxes")
    async def sandboxes() -> Any:
        view = await metrics.sandboxes()
        view["in_flight"] = await inflight.in_flight(meta)  # from the store: no metrics needed
        return view

    @app.get("/api/scheduler")
    async def scheduler() -> Any:
        view = await metrics.scheduler()
        view["queued"] = await inflight.queued_by_type(meta)
        view["in_flight"] = await inflight.in_flight(meta)
        return view

    @app.get("/api/training")
    async def training_runs(id: str | None = None) -> Any:
        if id is None:
            return await train.list()
        return await _found(lambda: _training_view(meta, train, id))

    @app.get("/api/stream")
    async def stream(request: Request, run: str | None = None) -> StreamingResponse:
        async def events() -> AsyncIterator[str]:
            while not await request.is_disconnected():
                try:
                    data: Any = (
                        await summary.run_summary(meta, run)
                        if run
                        else await summary.run_summaries(meta)
                    )
                except NotFound as exc:
                    yield f"event: error\ndata: {json.dumps(str(exc))}\n\n"
                    return
                yield f"data: {json.dumps(data)}\n\n"
                await asyncio.sleep(interval)

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    return app


def _page(name: str) -> Callable[[], Awaitable[HTMLResponse]]:
    async def page() -> HTMLResponse:
        return HTMLResponse(_static(name).read_text())

    return page


async def _run_view(
    meta: MetadataStore, train: TrainingRuns, run_id: str, **filters: Any
) -> dict[str, Any]:
    view = await queries.run_tasks(meta, run_id, **filters)
    view["summary"] = await summary.run_summary(meta, run_id)
    view["training"] = run_id in await train.run_ids()  # the run page links its curves
    return view


async def _training_view(meta: MetadataStore, train: TrainingRuns, run_id: str) -> Any:
    """A training run's curve, with its config and rollouts when the metadata store has
    the run (``megaflow train`` records its run there under the same id)."""
    view = await train.curve(run_id)
    try:
        run = await meta.get_run(run_id)
    except NotFound:
        view.update(config=None, has_run=False)
    else:
        view.update(config=run.config, has_run=True)
    return view


def _local(next: str) -> str:
    """Where to go after signing in: a path on this server, else the runs page. Browsers
    drop tabs and newlines from a URL and read a backslash as a slash, so any of them could
    turn ``/`` into ``//other.host``: such a path is refused whole."""
    plain = "\\" not in next and all(c >= " " for c in next)
    ok = plain and next.startswith("/") and not next.startswith("//")
    return next if ok else "/"


async def _found(fn: Callable[[], Awaitable[Any]]) -> Any:
    try:
        return await fn()
    except NotFound as exc:
        return JSONResponse({"error": str(exc)}, status_code=404)
    except InvalidInput as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)


async def serve(
    meta: MetadataStore,
    artifacts: ArtifactStore,
    auth: DashboardAuth,
    *,
    host: str,
    port: int,
    interval: float = 1.0,
    live: LiveMetrics | None = None,
    train_dir: Path = TRAIN_DIR,
    checkpoint_prefix: str = CHECKPOINT_PREFIX,
    tls: tuple[str, str] | None = None,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Open the stores, serve the dashboard until cancelled (or ``stop`` is set), close the
    stores. ``tls`` is a certificate chain and key file to serve HTTPS with.

    The socket is bound before serving, so ``on_ready`` gets the port (also
    when ``port`` is 0) and a client connecting right away waits in the backlog.
    """
    import socket
    import threading

    import uvicorn

    from megaflow.dashboard.advantages import warm_up

    threading.Thread(target=warm_up, name="dashboard warm-up", daemon=True).start()
    sock = socket.create_server((host, port))
    try:
        async with meta, artifacts:
            training = TrainingRuns(artifacts, train_dir, checkpoint_prefix)
            app = create_app(meta, artifacts, auth, interval=interval, live=live, training=training)
            certfile, keyfile = tls if tls else (None, None)
            config = uvicorn.Config(
                app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2,
                ssl_certfile=certfile, ssl_keyfile=keyfile,
            )  # fmt: skip
            server = uvicorn.Server(config)
            if on_ready is not None:
                on_ready(int(sock.getsockname()[1]))
            serving = asyncio.ensure_future(server.serve(sockets=[sock]))
            waiter = asyncio.ensure_future(stop.wait() if stop else asyncio.Event().wait())
            try:
                await asyncio.wait({serving, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                server.should_exit = True
                await serving
    finally:
        sock.close()
