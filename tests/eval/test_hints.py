"""Each cause hint on small constructed cases, and the order in which they are suggested."""

from __future__ import annotations

from app.eval.hints import (
    ABSENT_FROM_CORPUS,
    ABSENT_FROM_MANIFEST,
    CHUNK_BOUNDARY,
    NO_RUN_RETURNED_IT,
    NOT_INDEXED,
    VOCABULARY_MISMATCH,
    Chunk,
    ChunkEvidence,
    HintContext,
    HintEvidence,
    Ranked,
    VocabularyEvidence,
    hints_for,
)
from app.eval.terms import content_terms, marked, stems

QUERY = "How do I stop API throttling on bulk uploads?"


def _context(
    docs: list[Chunk],
    *,
    candidates: dict[str, int] | None = None,
    query: str = QUERY,
    corpus_known: bool = True,
    manifest_imported: bool = True,
    returned: frozenset[str] = frozenset(),
) -> HintContext:
    siblings: dict[str, list[str]] = {}
    members: dict[str, list[str]] = {}
    for d in docs:
        if d.parent_id:
            siblings.setdefault(d.parent_id, []).append(d.doc_id)
        if d.cluster_id:
            members.setdefault(d.cluster_id, []).append(d.doc_id)
    return HintContext(
        query_texts={"q1": query},
        candidates={"q1": candidates or {}},
        documents={d.doc_id: d for d in docs},
        siblings={k: tuple(v) for k, v in siblings.items()},
        cluster_members={k: tuple(v) for k, v in members.items()},
        corpus_known=corpus_known,
        manifest_imported=manifest_imported,
        returned=returned,
    )


def test_analyzer_stems_and_drops_stop_words() -> None:
    terms = content_terms(QUERY)
    assert [t.word for t in terms] == ["stop", "api", "throttling", "bulk", "uploads"]
    assert {t.stem for t in terms} == {"stop", "api", "throttl", "bulk", "upload"}
    assert {"throttl", "limit"} <= stems("Throttled requests hit the rate limits")
    pieces = marked("Uploads get throttled.", {"upload", "throttl"})
    assert pieces == [("Uploads", True), (" get ", False), ("throttled", True), (".", False)]


def test_vocabulary_mismatch_lists_missing_and_present_terms() -> None:
    doc = Chunk("rate#0", "Rate limiting", "Each API key may send 600 requests a minute.")
    hints = hints_for("q1", "rate#0", _context([doc]))
    # only "api" of stop, api, throttling, bulk, uploads
    assert hints.vocabulary == VocabularyEvidence(
        coverage=0.2, has=("api",), lacks=("stop", "throttling", "bulk", "uploads")
    )
    assert hints.vocabulary_mismatch
    assert hints.suggestion == VOCABULARY_MISMATCH
    assert hints.to_json() == {
        "vocabulary": {
            "coverage": 0.2,
            "present": ["api"],
            "missing": ["stop", "throttling", "bulk", "uploads"],
        }
    }


def test_a_document_that_speaks_the_query_gets_no_vocabulary_hint() -> None:
    doc = Chunk("bulk#0", "Bulk uploads", "Bulk uploads are throttled per API key; stop and retry.")
    hints = hints_for("q1", "bulk#0", _context([doc]))
    assert hints.vocabulary is not None
    assert hints.vocabulary.coverage == 1.0
    assert not hints.vocabulary_mismatch
    assert hints.suggestion is None
    assert hints.fired() == ()


def test_absent_from_the_manifest_is_strong_not_indexed() -> None:
    doc = Chunk("pdf/sla#0", "SLA", "Uptime credits.", indexed=False)
    hints = hints_for("q1", "pdf/sla#0", _context([doc]))
    assert hints.not_indexed == ABSENT_FROM_MANIFEST
    assert hints.vocabulary_mismatch  # evidence too, but not-indexed comes first
    assert hints.fired() == (NOT_INDEXED, VOCABULARY_MISMATCH)
    assert hints.suggestion == NOT_INDEXED


def test_absent_from_the_corpus_when_the_corpus_is_the_manifest() -> None:
    hints = hints_for("q1", "ghost", _context([], manifest_imported=False))
    assert hints.not_indexed == ABSENT_FROM_CORPUS
    assert hints.suggestion == NOT_INDEXED
    assert hints.vocabulary is None
    assert hints.to_json() == {"not_indexed": ABSENT_FROM_CORPUS}


def test_without_a_corpus_only_the_weak_hint_fires_and_only_if_no_run_returned_it() -> None:
    weak = hints_for("q1", "d9", _context([], corpus_known=False))
    assert weak.not_indexed == NO_RUN_RETURNED_IT
    assert weak.suggestion == NOT_INDEXED
    returned = hints_for("q1", "d9", _context([], corpus_known=False, returned=frozenset({"d9"})))
    assert returned.not_indexed is None
    assert returned.suggestion is None


def test_weak_not_indexed_comes_after_vocabulary() -> None:
    doc = Chunk("rate#0", "Rate limiting", "Requests per minute.")
    ctx = _context([doc], corpus_known=False)
    hints = hints_for("q1", "rate#0", ctx)
    assert hints.fired() == (VOCABULARY_MISMATCH, NOT_INDEXED)


def test_adjacent_sibling_in_the_candidates_suggests_chunk_boundary() -> None:
    docs = [
        Chunk("bulk#0", "Bulk uploads", "Bulk uploads are throttled per API key.", "bulk", 0),
        Chunk("bulk#1", "Bulk uploads", "To avoid it, send batches of 500 rows.", "bulk", 1),
        Chunk("bulk#3", "Bulk uploads", "Unrelated closing words.", "bulk", 3),
    ]
    hints = hints_for("q1", "bulk#1", _context(docs, candidates={"bulk#0": 7, "x": 1}))
    assert hints.chunk == ChunkEvidence(sibling=Ranked("bulk#0", 7))
    assert hints.suggestion == CHUNK_BOUNDARY
    # a sibling that is not adjacent is no evidence of a split answer
    far = hints_for("q1", "bulk#1", _context(docs, candidates={"bulk#3": 2}))
    assert far.chunk is None
    assert far.suggestion == VOCABULARY_MISMATCH


def test_adjacent_chunks_that_cover_the_query_only_together() -> None:
    docs = [
        Chunk("up#0", "Uploads", "Bulk uploads accept CSV files.", "up", 0),
        Chunk("up#1", "Pauses", "If throttling starts, stop for a minute.", "up", 1),
    ]
    # neither chunk is in the candidates; up#0 covers bulk, uploads (2/5); up#1 covers
    # throttling, stop (2/5); together 4/5
    hints = hints_for("q1", "up#0", _context(docs))
    assert hints.vocabulary is not None
    assert hints.vocabulary.coverage == 0.4
    assert hints.chunk == ChunkEvidence(complement="up#1", complement_terms=("stop", "throttling"))
    assert hints.suggestion == CHUNK_BOUNDARY
    assert hints.to_json()["complementary_chunk"] == {
        "doc_id": "up#1",
        "terms": ["stop", "throttling"],
    }


def test_cluster_mate_in_the_candidates_covers_the_miss() -> None:
    docs = [
        Chunk("rate#0", "Rate limits", "600 requests a minute.", cluster_id="rate#0"),
        Chunk("wiki/rate#0", "Rate limits", "Throttling: 600 a minute.", cluster_id="rate#0"),
        Chunk("pdf/rate#0", "Rate limits", "600 a minute.", cluster_id="rate#0", indexed=False),
    ]
    hints = hints_for("q1", "rate#0", _context(docs, candidates={"wiki/rate#0": 4}))
    assert hints.covered_by == Ranked("wiki/rate#0", 4)
    assert hints.to_json()["covered_by"] == {"doc_id": "wiki/rate#0", "rank": 4}
    alone = hints_for("q1", "rate#0", _context(docs, candidates={"other": 1}))
    assert alone.covered_by is None


#: Evidence as triages made before the typed structure stored it (every key present).
STORED = {
    "not_indexed": ABSENT_FROM_MANIFEST,
    "vocabulary": {"coverage": 0.3333, "present": ["api"], "missing": ["stop", "bulk"]},
    "sibling_in_candidates": {"doc_id": "bulk#0", "rank": 7},
    "complementary_chunk": {"doc_id": "bulk#2", "terms": ["stop"]},
    "covered_by": {"doc_id": "wiki/bulk#1", "rank": 3},
}


def test_stored_evidence_reads_back_typed_and_writes_the_same_json() -> None:
    evidence = HintEvidence.from_json(STORED)
    assert evidence == HintEvidence(
        not_indexed=ABSENT_FROM_MANIFEST,
        vocabulary=VocabularyEvidence(0.3333, has=("api",), lacks=("stop", "bulk")),
        chunk=ChunkEvidence(Ranked("bulk#0", 7), "bulk#2", ("stop",)),
        covered_by=Ranked("wiki/bulk#1", 3),
    )
    assert evidence.to_json() == STORED
    assert evidence.fired() == (NOT_INDEXED, CHUNK_BOUNDARY, VOCABULARY_MISMATCH)
    # parts stored alone, and no evidence at all
    for key in STORED:
        assert HintEvidence.from_json({key: STORED[key]}).to_json() == {key: STORED[key]}
    assert HintEvidence.from_json(None) == HintEvidence.from_json({}) == HintEvidence()
    assert HintEvidence().to_json() == {}


def test_every_computed_evidence_survives_its_json() -> None:
    docs = [
        Chunk("up#0", "Uploads", "Bulk uploads accept CSV files.", "up", 0, "c1"),
        Chunk("up#1", "Pauses", "If throttling starts, stop for a minute.", "up", 1),
        Chunk("wiki/up#0", "Uploads", "Bulk uploads accept CSV.", cluster_id="c1"),
    ]
    ctx = _context(docs, candidates={"up#1": 9, "wiki/up#0": 2})
    for doc_id in ("up#0", "up#1", "ghost"):
        hints = hints_for("q1", doc_id, ctx)
        again = HintEvidence.from_json(hints.to_json())
        assert again.to_json() == hints.to_json()
        assert again.fired() == hints.fired()
