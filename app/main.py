"""The application factory: ``uvicorn --factory app.main:create_app``."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy import text
from sqlalchemy.engine import Engine
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app import __version__
from app import errors as error_handlers
from app.api import api_router
from app.clock import Clock
from app.db import make_engine
from app.eval.agreement import warm_up
from app.http.deps import ReviewerDep
from app.http.params import refuse_nul
from app.http.uploads import limit_decompression
from app.http.uploads import sweep_abandoned as sweep_abandoned_uploads
from app.middleware import BodySizeLimit, BodyTimeout, HeadAsGet, SecurityHeaders
from app.observability import RequestLog
from app.services.background import JobRunner
from app.services.delivery.events import Deliverer
from app.settings import Settings, get_settings
from app.web import accounts as web_accounts
from app.web import adjudication as web_adjudication
from app.web import duplicates as web_duplicates
from app.web import golden_set as web_golden_set
from app.web import lookup as web_lookup
from app.web import pages as web_pages
from app.web import pair_review as web_pair_review
from app.web import progress as web_progress
from app.web import review as web_review
from app.web import runs as web_runs
from app.web import series as web_series
from app.web import triage as web_triage

STATIC_DIR = Path(__file__).resolve().parent / "web" / "static"
log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None, engine: Engine | None = None, clock: Clock | None = None
) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # the agreement's statistics libraries take seconds to import: loaded beside the
        # start-up, not in the first dashboard that needs them
        threading.Thread(target=warm_up, name="warm-up-statistics", daemon=True).start()
        # the upload copies of requests whose process was killed (app/http/uploads.py)
        sweep_abandoned_uploads()
        deliverer = None
        if settings.webhook_poll_seconds > 0 and settings.webhook_secret is not None:
            deliverer = Deliverer(
                app.state.engine,
                settings.webhook_secret.get_secret_value(),
                settings.webhook_poll_seconds,
                allow_local=settings.allow_local_network,
            )
            deliverer.start()
        runner = None
        if settings.job_poll_seconds > 0:
            runner = JobRunner(
                app.state.engine,
                app.state.clock,
                settings.job_poll_seconds,
                stale_seconds=settings.job_stale_seconds,
            )
            runner.start()
        yield
        if runner is not None:
            runner.stop(timeout=10.0)
        if deliverer is not None:
            deliverer.stop(timeout=10.0)  # joined: no delivery runs on after shutdown

    app = FastAPI(
        lifespan=lifespan,
        title="misstriage",
        version=__version__,
        description="Turn recall at the candidate depth into a work queue of misses.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(refuse_nul), Depends(limit_decompression)],
    )
    app.state.settings = settings
    app.state.engine = engine or make_engine(settings)
    app.state.clock = clock or Clock()

    error_handlers.install(app)
    app.include_router(api_router)
    app.include_router(web_accounts.router)
    app.include_router(web_adjudication.router)
    app.include_router(web_duplicates.router)
    app.include_router(web_lookup.router)
    app.include_router(web_pair_review.router)
    app.include_router(web_series.router)
    app.include_router(web_golden_set.router)
    app.include_router(web_pages.router)
    app.include_router(web_progress.router)
    app.include_router(web_review.router)
    app.include_router(web_runs.router)
    app.include_router(web_triage.router)

    @app.get("/openapi.json", include_in_schema=False, name="openapi")
    def openapi(principal: ReviewerDep) -> dict[str, Any]:
        return app.openapi()

    @app.get("/healthz", include_in_schema=False, name="healthz")
    def healthz(request: Request) -> Response:
        """Public: is this process up and can it query its database? 200 or 503. Says no
        more than that (no URL, no error text: those go to the log)."""
        no_store = {"Cache-Control": "no-store"}
        try:
            with request.app.state.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except Exception as exc:  # any database failure means unhealthy
            log.warning("health check: the database is down: %s", type(exc).__name__)
            return JSONResponse(
                {"status": "unavailable", "database": "down"}, status_code=503, headers=no_store
            )
        return JSONResponse(
            {"status": "ok", "database": "up", "version": __version__}, headers=no_store
        )

    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    # Innermost: HEAD runs as GET and loses its body here, so everything outside (the log
    # line, the security headers) sees an ordinary HEAD answer.
    app.add_middleware(HeadAsGet)
    app.add_middleware(
        BodySizeLimit, max_bytes=settings.upload_max_bytes, refusal=error_handlers.too_large
    )
    app.add_middleware(BodyTimeout, seconds=settings.body_timeout_seconds)
    app.add_middleware(SecurityHeaders)
    if settings.trusted_proxy_list:
        # The client's address and scheme from X-Forwarded-For/-Proto, only when the peer is
        # a configured proxy (uvicorn's middleware: the right-most untrusted address).
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxy_list)
    # Outermost: every answer, the 413s of BodySizeLimit included, gets a request id and a log line.
    app.add_middleware(RequestLog)
    return app
