"""The pure evaluation core: parsing, ordering, measures, misses.

Nothing here imports the web or database layers (a test enforces it), so the CLI, the service
and the tests share one implementation of the conventions.
"""

from app.eval.conventions import DEFAULT_DEPTHS, Conventions, Gain, Order
from app.eval.diagnosis import Diagnosis, Thresholds, diagnose
from app.eval.errors import InputError
from app.eval.evaluate import QueryEvaluation, RunEvaluation, evaluate_run
from app.eval.golden import Judgments, golden_from_frame, load_golden
from app.eval.measures import Measure, MeasureKind, parse_measure
from app.eval.misses import MissedDocument, enumerate_misses, misses_frame
from app.eval.ranking import RankedRun, RunReport, rank_run, top_candidates
from app.eval.sources import load_run, resolve_golden

__all__ = [
    "DEFAULT_DEPTHS",
    "Conventions",
    "Diagnosis",
    "Gain",
    "InputError",
    "Judgments",
    "Measure",
    "MeasureKind",
    "MissedDocument",
    "Order",
    "QueryEvaluation",
    "RankedRun",
    "RunEvaluation",
    "RunReport",
    "Thresholds",
    "diagnose",
    "enumerate_misses",
    "evaluate_run",
    "golden_from_frame",
    "load_golden",
    "load_run",
    "misses_frame",
    "parse_measure",
    "rank_run",
    "resolve_golden",
    "top_candidates",
]
