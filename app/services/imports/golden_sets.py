"""Golden sets: import (all or nothing), list, get, delete, and the evaluation view of one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from sqlalchemy import func
from sqlmodel import Session, col, select

from app.db import writing
from app.eval import InputError, Judgments, golden_from_frame, load_golden
from app.eval.errors import shorten_name
from app.eval.golden import IdLimits
from app.eval.jsonl import read_corpus, read_manifest
from app.eval.textio import ProgressFn
from app.eval.values import INT32_MAX, INT32_MIN
from app.models import (
    OTHER,
    DetectorRun,
    DetectorSource,
    Document,
    GoldenQuery,
    GoldenSet,
    Judgment,
    Miss,
    User,
    column_width,
)
from app.services.errors import BadInput, Conflict, Invalid, NotFound
from app.services.imports.bulk import bulk_insert
from app.services.imports.clusterings import add_clustering
from app.services.names import check_description, check_name

#: Ids longer than their columns are refused at import, naming the line (never a 5xx).
ID_LIMITS = IdLimits(query=column_width(Judgment, "qid"), document=column_width(Judgment, "doc_id"))


def bad_input(error: InputError, names: dict[str, str] | None = None) -> BadInput:
    """An InputError from app.eval as a 400 naming the uploaded file (not its temp path)."""
    source = (names or {}).get(error.source or "", error.source)
    shown = shorten_name(source or "<input>")
    message = (
        f"{shown}, line {error.line}: {error.message}"
        if error.line
        else f"{shown}: {error.message}"
    )
    return BadInput(
        message,
        code="bad_input",
        details={"file": shown, "line": error.line, "problem": error.message},
    )


def _check_name(name: str) -> str:
    return check_name(name, what="a name", max_length=column_width(GoldenSet, "name"))


def import_golden_set(
    *,
    session: Session,
    name: str,
    qrels: Path,
    queries: Path | None = None,
    corpus: Path | None = None,
    manifest: Path | None = None,
    min_grade: int = 1,
    description: str = "",
    user: User | None = None,
    source_names: dict[str, str] | None = None,
    progress: ProgressFn | None = None,
) -> GoldenSet:
    """Parse everything first, then write in one transaction: a bad file leaves no rows.
    ``progress`` is called with the bytes of the judgments read as they are read.

    ``manifest`` (the ids the search index holds) needs ``corpus``: the corpus documents it
    leaves out are stored as not indexed, evidence for the "not indexed" hint. Without a
    manifest, the corpus is what the index holds.
    """
    name = _check_name(name)
    description = check_description(description)
    if not INT32_MIN <= min_grade <= INT32_MAX:
        raise Invalid(
            f"min_grade must be an integer from {INT32_MIN} to {INT32_MAX}",
            code="invalid_min_grade",
        )
    if manifest is not None and corpus is None:
        raise Invalid(
            "an index manifest needs the corpus it describes", code="manifest_without_corpus"
        )
    if session.exec(select(GoldenSet).where(GoldenSet.name == name)).first() is not None:
        raise Conflict(f"a golden set named {name!r} exists already", code="name_taken")
    try:
        gold = load_golden(
            qrels, queries=queries, min_grade=min_grade, id_limits=ID_LIMITS, progress=progress
        )
        documents = _read_documents(corpus) if corpus is not None else None
        indexed = (
            read_manifest(manifest, max_id_chars=ID_LIMITS.document)
            if manifest is not None
            else None
        )
    except InputError as error:
        raise bad_input(error, source_names) from None
    report: dict[str, Any] = {"judgments": gold.report.as_dict()}
    # the uploaded file's name, not the server's temporary path
    report["judgments"]["source"] = (source_names or {}).get(str(qrels), str(qrels))
    if documents is not None:
        relevant_ids = gold.relevant.select("doc_id").unique()
        absent = relevant_ids.join(documents.select("doc_id"), on="doc_id", how="anti")
        report["corpus"] = {
            "documents": documents.height,
            "relevant_documents_not_in_corpus": absent.height,
        }
        if indexed is not None:
            listed = pl.DataFrame({"doc_id": indexed}, schema={"doc_id": pl.String})
            documents = documents.with_columns(
                pl.col("doc_id").is_in(listed.get_column("doc_id").implode()).alias("indexed")
            )
            report["manifest"] = {
                "indexed": int(documents.get_column("indexed").sum()),
                "not_indexed": int((~documents.get_column("indexed")).sum()),
                "relevant_not_indexed": relevant_ids.join(
                    documents.filter(~pl.col("indexed")).select("doc_id"), on="doc_id"
                ).height,
                # ids the index holds that the corpus does not describe: no text to show
                "unknown_to_corpus": listed.join(
                    documents.select("doc_id"), on="doc_id", how="anti"
                ).height,
            }
    golden = GoldenSet(
        name=name,
        description=description,
        min_grade=min_grade,
        queries=gold.report.queries,
        judgments=gold.report.judgments,
        relevant=gold.report.relevant,
        documents=documents.height if documents is not None else 0,
        has_manifest=indexed is not None,
        report=report,
        created_by_id=user.id if user else None,
    )
    with writing(session):
        session.add(golden)
        session.flush()
        assert golden.id is not None
        bulk_insert(session, GoldenQuery, _query_rows(gold, golden_set_id=golden.id))
        bulk_insert(
            session,
            Judgment,
            gold.judgments.select(
                pl.lit(golden.id).alias("golden_set_id"), "qid", "doc_id", "grade"
            ),
        )
        if documents is not None:
            bulk_insert(
                session,
                Document,
                documents.select(
                    pl.lit(golden.id).alias("golden_set_id"), pl.exclude("cluster_id")
                ),
            )
            imported_with_corpus(session=session, golden=golden, documents=documents)
    session.refresh(golden)
    return golden


def _query_rows(gold: Judgments, *, golden_set_id: int) -> pl.DataFrame:
    """A row per judged query (its text, or null) and per other query with a text, sorted by
    query id: the unique key's index then grows at its end (no row's order is read back:
    nothing orders golden queries by id). Made by joins, not per query in Python: 800,000
    texts took 151 s when a list was scanned for each (issue 29)."""
    texts = pl.DataFrame(
        {"qid": list(gold.queries), "text": list(gold.queries.values())},
        schema={"qid": pl.String, "text": pl.String},
    )
    judged = gold.judgments.select("qid").unique()
    return (
        judged.join(texts, on="qid", how="full", coalesce=True)
        .sort("qid")
        .select(pl.lit(golden_set_id, dtype=pl.Int64).alias("golden_set_id"), "qid", "text")
    )


def _read_documents(path: Path) -> pl.DataFrame:
    rows = [
        (d.doc_id, d.title, d.text, d.parent_id, d.chunk_index, d.cluster_id)
        for d in read_corpus(path, max_id_chars=ID_LIMITS.document)
    ]
    return pl.DataFrame(
        rows,
        schema={
            "doc_id": pl.String,
            "title": pl.String,
            "text": pl.String,
            "parent_id": pl.String,
            "chunk_index": pl.Int64,
            "cluster_id": pl.String,
        },
        orient="row",
    )


def list_golden_sets(*, session: Session) -> list[GoldenSet]:
    return list(session.exec(select(GoldenSet).order_by(col(GoldenSet.id))))


def count_golden_sets(*, session: Session) -> int:
    return int(session.exec(select(func.count()).select_from(GoldenSet)).one())


def get_golden_set(*, session: Session, golden_set_id: int) -> GoldenSet:
    golden = session.get(GoldenSet, golden_set_id)
    if golden is None:
        raise NotFound(f"no golden set {golden_set_id}", code="golden_set_not_found")
    return golden


def delete_golden_set(*, session: Session, golden_set_id: int) -> None:
    with writing(session):
        session.delete(get_golden_set(session=session, golden_set_id=golden_set_id))


def eval_golden_set(*, session: Session, golden: GoldenSet) -> Judgments:
    """The stored golden set as app.eval sees it (judgments and query texts)."""
    rows = session.exec(
        select(Judgment.qid, Judgment.doc_id, Judgment.grade)
        .where(Judgment.golden_set_id == golden.id)
        .order_by(col(Judgment.id))
    ).all()
    frame = pl.DataFrame(
        rows, schema={"qid": pl.String, "doc_id": pl.String, "grade": pl.Int64}, orient="row"
    )
    texts = session.exec(
        select(GoldenQuery.qid, GoldenQuery.text).where(GoldenQuery.golden_set_id == golden.id)
    ).all()
    return golden_from_frame(
        frame,
        queries={qid: text for qid, text in texts if text is not None},
        min_grade=golden.min_grade,
        source=golden.name,
        fmt="stored",
    )


def query_texts(*, session: Session, golden: GoldenSet, qids: set[str]) -> dict[str, str]:
    if not qids:
        return {}
    rows = session.exec(
        select(GoldenQuery.qid, GoldenQuery.text).where(
            GoldenQuery.golden_set_id == golden.id, col(GoldenQuery.qid).in_(sorted(qids))
        )
    ).all()
    return {qid: text for qid, text in rows if text is not None}


#: Named causes of a golden set at most: one digit key each on the review page.
MAX_CAUSES = 9


def set_causes(*, session: Session, golden: GoldenSet, causes: list[str]) -> GoldenSet:
    """Rename or add causes: allowed until the first label of any kind on a miss of this
    golden set (``GoldenSet.causes_frozen``). 409 ``labelling_started`` after it."""
    cleaned = [c.strip() for c in causes]
    width = column_width(Miss, "category")
    if not cleaned or any(not c or len(c) > width for c in cleaned):
        raise Invalid(
            f"causes must be 1 to {width} characters each, at least one", code="bad_causes"
        )
    for cause in cleaned:
        check_name(cause, what="a cause", max_length=width, code="bad_causes")
    if len(set(cleaned)) != len(cleaned) or OTHER in cleaned:
        raise Invalid(f"causes must be distinct and not {OTHER!r} (built in)", code="bad_causes")
    if len(cleaned) > MAX_CAUSES:
        raise Invalid(
            f"at most {MAX_CAUSES} causes (one key each on the review page)", code="bad_causes"
        )
    with writing(session):
        # The golden set's row, locked: a first label in flight holds it until it commits
        # (the label freezes the causes under that lock, app/services/queue/store.py), and
        # one that comes after waits for this change and is checked against the new causes.
        query = select(GoldenSet).where(GoldenSet.id == golden.id).with_for_update()
        locked = session.exec(query.execution_options(populate_existing=True)).one()
        if locked.causes_frozen:
            raise Conflict(
                "misses of this golden set have been labelled (a first label freezes the "
                "causes, a blind double-review label included): the causes are fixed",
                code="labelling_started",
            )
        golden = locked
        golden.causes = cleaned
        session.add(golden)
    session.refresh(golden)
    return golden


def imported_with_corpus(
    *, session: Session, golden: GoldenSet, documents: pl.DataFrame
) -> DetectorRun | None:
    """Inside the import's ``writing`` block: the corpus came with cluster ids (``documents``'
    doc_id, cluster_id), so they are the golden set's first detector run, "imported, not
    calibrated", and its live clustering (nobody reads the golden set before the commit)."""
    ids = documents.select("doc_id", "cluster_id").filter(
        pl.col("cluster_id").is_not_null() & (pl.col("cluster_id") != "")
    )
    if ids.height == 0:
        return None
    assert golden.id is not None
    clustering = add_clustering(
        session=session,
        golden_set_id=golden.id,
        detector_run_id=None,
        threshold=None,
        ids=ids,
        now=golden.created_at,
    )
    run = DetectorRun(
        golden_set_id=golden.id,
        source=DetectorSource.IMPORTED.value,
        parameters={"with": "corpus"},
        documents=golden.documents,
        created_by_id=golden.created_by_id,
        clusters=clustering.clusters,
        clustered_documents=clustering.clustered_documents,
        applied_at=golden.created_at,
        applied_by_id=golden.created_by_id,
    )
    session.add(run)
    session.flush()
    clustering.detector_run_id = run.id
    clustering.live_at = golden.created_at
    session.add(clustering)
    golden.detector_run_id = run.id
    golden.clustering_id = clustering.id
    session.add(golden)
    return run
