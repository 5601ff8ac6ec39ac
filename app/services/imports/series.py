"""Series: one configuration ("bm25-main") evaluated commit after commit, and each run's
provenance (commit, branch, time, free key-values).

A series is a name its runs carry, not a table: a run joins one when it is imported with it.
Its order is the order of import (the run imported before is the previous one, as a CI job
pushes a run after each commit). This module owns the checks of both fields and the queries
"the runs of a series" and "the run before this one"; what is computed over them lives with
its readers (app.services.views.series, the gate, carried labels).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from app.models import LOG, GoldenSet, Run
from app.services.errors import Invalid, NotFound
from app.services.names import check_name, refused_character

#: At most this many keys, each of 1 to 64 characters (any but control characters, as every
#: name), each value at most 500 characters: provenance, not a document store.
MAX_META_KEYS = 20
MAX_META_KEY = 64
MAX_META_VALUE = 500
#: The longest series name, in characters.
MAX_SERIES = 200
#: The keys pages and the markdown name first.
KNOWN_META = ("commit", "branch", "time")


def check_series(value: str | None, *, kind: str | None = None) -> str | None:
    """The series name without surrounding whitespace, None for none (empty or absent), or
    Invalid (422) as for any name: any Unicode but control characters (a ``/``, ``?``,
    ``#``, ``%``, ``..``: links encode them, app.http.links). A run of ``kind`` log takes
    no series (422 ``log_run_series``): a series is what its page and its gate compare,
    recall and nDCG, which a log run has not."""
    if value is None or not value.strip():
        return None
    name = check_name(value, what="a series name", max_length=MAX_SERIES, code="invalid_series")
    if kind == LOG:
        raise Invalid(
            f"a log run cannot join a series (got {name[:64]!r}): a series' page and its gate "
            "compare recall and nDCG, which a log run (no judgments) has not; import it "
            "without a series",
            code="log_run_series",
            details={"field": "series"},
        )
    return name


def check_meta(meta: Mapping[str, object]) -> dict[str, str]:
    """The provenance as stored: string keys and values, or Invalid (422 ``invalid_meta``,
    ``control_character`` for a key) naming the key at fault (never echoing a long value).
    A key is a name as any other (app.services.names): 1 to 64 characters without
    control characters, surrounding whitespace dropped."""
    if not isinstance(meta, Mapping):
        raise Invalid("meta must be an object of key-value strings", code="invalid_meta")
    if len(meta) > MAX_META_KEYS:
        raise Invalid(f"meta takes at most {MAX_META_KEYS} keys", code="invalid_meta")
    checked: dict[str, str] = {}
    for given, value in meta.items():
        if not isinstance(given, str):
            raise Invalid("meta keys must be strings", code="invalid_meta")
        key = check_name(given, what="a meta key", max_length=MAX_META_KEY, code="invalid_meta")
        if key in checked:
            raise Invalid(f"meta key {key!r} is given twice", code="invalid_meta")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise Invalid(f"meta {key!r}: the value must be a string", code="invalid_meta")
        text = str(value).strip()
        if len(text) > MAX_META_VALUE:
            raise Invalid(f"meta {key!r}: at most {MAX_META_VALUE} characters", code="invalid_meta")
        if refused_character(text) is not None:
            raise Invalid(f"meta {key!r} must not contain control characters", code="invalid_meta")
        checked[key] = text
    return checked


def _one_value_a_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once (a repeated key would lose a value)."""
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise ValueError(f"the key {key[:64]!r} is given twice")
        value[key] = item
    return value


def _no_constant(name: str) -> None:
    """NaN and Infinity, which JSON does not have (Python's reader would take them)."""
    raise ValueError(f"{name} is not a JSON value")


def meta_from_json(text: str) -> dict[str, str]:
    """The API's ``meta`` form field: a JSON object of strings (empty: none)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text, object_pairs_hook=_one_value_a_key, parse_constant=_no_constant)
    except ValueError as exc:
        raise Invalid(
            f"meta must be a JSON object: line {exc.lineno if hasattr(exc, 'lineno') else 1}"
            if isinstance(exc, json.JSONDecodeError)
            else f"meta: {exc}",
            code="invalid_meta",
        ) from None
    except RecursionError:  # nested arrays or objects deeper than the parser goes
        raise Invalid("meta must be a flat JSON object of strings", code="invalid_meta") from None
    if not isinstance(value, dict):
        raise Invalid("meta must be a JSON object of key-value strings", code="invalid_meta")
    return check_meta(value)


def parse_meta_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """``key=value`` strings (the CLI's ``--meta``, the form's lines) as provenance; a
    line without ``=`` is Invalid. Blank lines are skipped; a later key wins."""
    meta: dict[str, str] = {}
    for number, pair in enumerate(pairs, start=1):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep:
            raise Invalid(
                f"meta line {number}: key=value is needed (got {pair[:64]!r})",
                code="invalid_meta",
            )
        meta[key.strip()] = value.strip()
    return check_meta(meta)


def series_runs(*, session: Session, golden: GoldenSet, series: str) -> list[Run]:
    """The judged runs of ``series`` in ``golden``, oldest first; 404 ``series_not_found``
    when none. A log run stored in a series before imports refused one is left out."""
    runs = list(
        session.exec(
            select(Run)
            .where(Run.golden_set_id == golden.id, Run.series == series, Run.kind != LOG)
            .order_by(col(Run.id))
        ).all()
    )
    if not runs:
        raise NotFound(
            f"golden set {golden.name!r} has no series {series[:200]!r}", code="series_not_found"
        )
    return runs


def series_names(*, session: Session, golden: GoldenSet) -> list[tuple[str, int]]:
    """Every series of ``golden`` with its number of judged runs, by name."""
    rows = session.exec(
        select(Run.series, func.count())
        .where(Run.golden_set_id == golden.id, col(Run.series).is_not(None), Run.kind != LOG)
        .group_by(Run.series)
        .order_by(Run.series)
    ).all()
    return [(name, count) for name, count in rows if name is not None]


def previous_run(*, session: Session, run: Run) -> Run | None:
    """The judged run of the same series imported just before ``run`` (None: first, or no
    series): a gate's default baseline, never a log run (it has no recall to compare)."""
    if run.series is None:
        return None
    return session.exec(
        select(Run)
        .where(
            Run.golden_set_id == run.golden_set_id,
            Run.series == run.series,
            Run.kind != LOG,
            col(Run.id) < run.id,
        )
        .order_by(col(Run.id).desc())
        .limit(1)
    ).first()
