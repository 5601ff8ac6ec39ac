"""The JSON API under /api/v1: one router per resource, gathered here."""

from fastapi import APIRouter

from app.api.responses import ERROR_RESPONSES
from app.api.routes import accounts, detector_runs, golden_sets, misses, runs, triages

api_router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)
api_router.include_router(golden_sets.router)
api_router.include_router(runs.router)
api_router.include_router(triages.router)
api_router.include_router(misses.router)
api_router.include_router(detector_runs.router)
api_router.include_router(accounts.router)
