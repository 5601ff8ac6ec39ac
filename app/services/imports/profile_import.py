"""Importing a log run as its per-query cluster profile: the output of
docs/sql/unique_clusters.sql (qid, k, distinct_clusters, results, clustered), computed past one
machine over a lake's logs, stored so that the run's clusters table, distribution and chart give
the figures of the same log imported line by line, at the ks the file holds.

The rows are read and checked by app.eval.profile_rows, which makes traces exact at those ks;
they are stored as any log run's (``store_traces``) with the ks they are exact at
(``RunClusterTotals.exact_ks``): another k is refused (422 ``invalid_k``), and there is no cost
side (the SQL computes no tokens). All or nothing: a bad file leaves no rows. This module never
reads a run's lines: that is app.services.imports.run_import.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sqlmodel import Session, select

from app.db import writing
from app.eval import InputError, Order, RunReport
from app.eval.errors import printable_name
from app.eval.profile_rows import looks_like_profile, read_profile_rows
from app.models import LOG, GoldenSet, Run, RunClusterQuery, User, column_width
from app.services.errors import Conflict, Invalid
from app.services.imports.clusters import store_traces
from app.services.imports.golden_sets import bad_input
from app.services.imports.run_import import sha256_of
from app.services.imports.series import check_meta, check_series
from app.services.names import check_description, check_name

#: The run format of a per-query cluster profile (the API's and the form's ``format``).
PROFILE_FORMAT = "cluster_profile"


def is_profile_upload(path: Path, fmt: str | None) -> bool:
    """True when an uploaded run file is to import as a per-query cluster profile: asked for
    with ``format=cluster_profile``, or, with no format given, recognised by its columns (a
    CSV header or a Parquet schema with qid, k, distinct_clusters, results, clustered)."""
    if fmt == PROFILE_FORMAT:
        return True
    return fmt is None and looks_like_profile(path)


def import_cluster_profile(
    *,
    session: Session,
    golden: GoldenSet,
    name: str,
    path: Path,
    source_name: str,
    kind: str = LOG,
    description: str = "",
    user: User | None = None,
    series: str | None = None,
    meta: Mapping[str, str] | None = None,
) -> Run:
    """Import the per-query profile at ``path`` as a log run of ``golden`` in one
    transaction. A judged ``kind`` is refused (422 ``profile_is_log``): the rows carry no
    judged documents' ranks. A bad file: 400 ``bad_input`` naming the file and the line."""
    if kind != LOG:
        raise Invalid(
            "a per-query cluster profile (the output of docs/sql/unique_clusters.sql) imports "
            "as a log run: choose the kind log (it has cluster measures only)",
            code="profile_is_log",
        )
    name = check_name(name, what="a run name", max_length=column_width(Run, "name"))
    description = check_description(description)
    series_name = check_series(series, kind=kind)
    provenance = check_meta(meta or {})
    taken = session.exec(
        select(Run).where(Run.golden_set_id == golden.id, Run.name == name)
    ).first()
    if taken is not None:
        raise Conflict(f"golden set {golden.name!r} has a run named {name!r}", code="name_taken")
    shown = printable_name(source_name)
    try:
        rows = read_profile_rows(
            path, source=str(path), max_qid_chars=column_width(RunClusterQuery, "qid")
        )
    except InputError as error:
        raise bad_input(error, {str(path): shown}) from None
    ks = ", ".join(map(str, rows.ks))
    report = RunReport(
        source=shown,
        format=f"{PROFILE_FORMAT} ({rows.format})",
        order=Order.TREC_EVAL.value,
        lines=rows.rows,
        queries=len(rows.traces.queries),
        duplicates_dropped=0,
        unknown_queries=0,
        unknown_query_lines=0,
        golden_queries_absent=0,
        warnings=[
            f"imported as a per-query cluster profile (docs/sql/unique_clusters.sql) at k = "
            f"{ks}: the clusters are known at those k only, with no prompt cost; repeated "
            "documents were dropped by the query, uncounted"
        ],
    )
    assert golden.id is not None
    run = Run(
        golden_set_id=golden.id,
        name=name,
        kind=LOG,
        description=description,
        source_name=shown[-column_width(Run, "source_name") :],
        sha256=sha256_of(path),
        format=PROFILE_FORMAT,
        order=Order.TREC_EVAL.value,
        lines=rows.rows,
        queries=len(rows.traces.queries),
        keep_depth=0,
        report=report.as_dict() | {"source": shown[-column_width(Run, "source_name") :]},
        created_by_id=user.id if user else None,
        series=series_name,
        meta=provenance,
    )
    with writing(session):
        session.add(run)
        session.flush()
        assert run.id is not None
        store_traces(
            session=session,
            run_id=run.id,
            traces=rows.traces,
            detector_run_id=None,  # the clusters came from the lake's documents table
            exact_ks=rows.ks,
        )
    session.refresh(run)
    return run
