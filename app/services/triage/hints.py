"""Cause hints for the misses of a new triage: gather what app/eval/hints.py looks at from the
database (the candidates, the documents, their siblings and cluster mates), once per triage."""

from __future__ import annotations

import json
from dataclasses import replace

import polars as pl
from sqlmodel import Session, col, select

from app.eval.hints import Chunk, HintContext, HintEvidence, hints_for
from app.models import Document, GoldenSet, Run, RunJudged
from app.services.imports.clusterings import clusters_of, members_of
from app.services.imports.clusters import stored_top

#: Ids per IN (...) list: well under SQLite's and PostgreSQL's parameter limits.
BATCH = 5_000


def _documents(session: Session, golden: GoldenSet, column: str, values: set[str]) -> list[Chunk]:
    """The documents whose ``column`` (doc_id or parent_id) is among ``values``, with their
    cluster ids in the golden set's clustering now."""
    field = getattr(Document, column)
    found: list[Chunk] = []
    ordered = sorted(values)
    for start in range(0, len(ordered), BATCH):
        rows = session.exec(
            select(Document).where(
                Document.golden_set_id == golden.id, col(field).in_(ordered[start : start + BATCH])
            )
        )
        found += [
            Chunk(
                doc_id=d.doc_id,
                title=d.title,
                text=d.text,
                parent_id=d.parent_id,
                chunk_index=d.chunk_index,
                indexed=d.indexed,
            )
            for d in rows
        ]
    clusters = clusters_of(
        session=session, clustering_id=golden.clustering_id, doc_ids=[c.doc_id for c in found]
    )
    return [replace(c, cluster_id=clusters.get(c.doc_id)) for c in found]


def _returned_by_any_run(session: Session, golden: GoldenSet, doc_ids: set[str]) -> set[str]:
    returned: set[str] = set()
    ordered = sorted(doc_ids)
    for start in range(0, len(ordered), BATCH):
        returned |= set(
            session.exec(
                select(RunJudged.doc_id)
                .join(Run, col(Run.id) == col(RunJudged.run_id))
                .where(
                    Run.golden_set_id == golden.id,
                    col(RunJudged.doc_id).in_(ordered[start : start + BATCH]),
                )
                .distinct()
            ).all()
        )
    return returned


def context_for(
    *,
    session: Session,
    golden: GoldenSet,
    run: Run,
    misses: pl.DataFrame,
    depth: int,
    query_texts: dict[str, str],
) -> HintContext:
    """What the hints of these misses (qid, doc_id) look at."""
    doc_ids = set(misses.get_column("doc_id").to_list())
    corpus_known = golden.documents > 0
    if not corpus_known:
        return HintContext(
            query_texts=query_texts,
            candidates={},
            documents={},
            siblings={},
            cluster_members={},
            corpus_known=False,
            returned=_returned_by_any_run(session, golden, doc_ids),
        )
    missing = {c.doc_id: c for c in _documents(session, golden, "doc_id", doc_ids)}
    parents = {c.parent_id for c in missing.values() if c.parent_id}
    clusters = {c.cluster_id for c in missing.values() if c.cluster_id}
    documents = dict(missing)
    siblings: dict[str, list[str]] = {}
    members: dict[str, list[str]] = {}
    for chunk in _documents(session, golden, "parent_id", parents):
        documents.setdefault(chunk.doc_id, chunk)
        siblings.setdefault(chunk.parent_id or "", []).append(chunk.doc_id)
    in_clusters = members_of(
        session=session, clustering_id=golden.clustering_id, cluster_ids=clusters
    )
    mates = {doc: cid for cid, docs in in_clusters.items() for doc in docs}
    for chunk in _documents(session, golden, "doc_id", set(mates)):
        documents.setdefault(chunk.doc_id, chunk)
        members.setdefault(mates[chunk.doc_id], []).append(chunk.doc_id)
    top = stored_top(
        session=session, run=run, depth=depth, qids=set(misses.get_column("qid").to_list())
    )
    candidates: dict[str, dict[str, int]] = {}
    for qid, doc_id, rank in top.iter_rows():
        candidates.setdefault(qid, {})[doc_id] = rank
    return HintContext(
        query_texts=query_texts,
        candidates=candidates,
        documents=documents,
        siblings={k: tuple(v) for k, v in siblings.items()},
        cluster_members={k: tuple(v) for k, v in members.items()},
        corpus_known=True,
        manifest_imported=golden.has_manifest,
    )


def hint_columns(misses: pl.DataFrame, ctx: HintContext, causes: list[str]) -> pl.DataFrame:
    """``misses`` with the hint columns of the miss table: hint (a suggestion among the golden
    set's causes), hint_not_indexed, hint_vocabulary, hint_chunk, evidence (JSON text) and
    covered_by."""
    found: list[HintEvidence] = [
        hints_for(qid, doc_id, ctx) for qid, doc_id in misses.select("qid", "doc_id").iter_rows()
    ]
    named = set(causes)

    def suggestion(h: HintEvidence) -> str | None:
        return next((c for c in h.fired() if c in named), None)

    return misses.with_columns(
        pl.Series("hint", [suggestion(h) for h in found], dtype=pl.String),
        pl.Series("hint_not_indexed", [h.not_indexed is not None for h in found]),
        pl.Series("hint_vocabulary", [h.vocabulary_mismatch for h in found]),
        pl.Series("hint_chunk", [h.chunk_boundary for h in found]),
        pl.Series(
            "evidence",
            [json.dumps(e) if (e := h.to_json()) else None for h in found],
            dtype=pl.String,
        ),
        pl.Series(
            "covered_by",
            [h.covered_by.doc_id if h.covered_by else None for h in found],
            dtype=pl.String,
        ),
    )
