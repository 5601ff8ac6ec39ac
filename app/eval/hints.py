"""Cause hints: the evidence for each cause of a miss, computed once when a triage is made.

A hint is evidence shown to the reviewer, never a label. For each miss:

* **not indexed**: the document is absent from the index manifest (or, without a manifest, from
  the imported corpus), strong evidence; weaker, when nothing says what the index holds: no run
  of the golden set returned the document for any query that judges it.
* **vocabulary mismatch**: the share of the query's content terms (stop words removed, Snowball
  stems) found in the document's title and text is below ``VOCABULARY_COVERAGE``; the evidence
  lists the query words the document has and those it lacks.
* **chunk boundary**: a chunk adjacent to the missing one (same parent, chunk index +/- 1) is in
  the run's candidates, or the missing chunk and an adjacent one together cover at least
  ``VOCABULARY_COVERAGE`` of the query's terms while neither does alone.

Separately, a miss whose duplicate-cluster mate is in the candidates is **covered by a
duplicate**: the run delivered the evidence under another id. That is not a cause; it keeps the
miss off the queue by default.

The suggestion is the first hint that fires in this order: not indexed (manifest), chunk
boundary, vocabulary mismatch, not indexed (no run returned it). The weak not-indexed hint comes
last because a document with no query term in it is not returned by a lexical run either.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from app.eval.terms import Term, content_terms, stems

NOT_INDEXED = "not-indexed"
VOCABULARY_MISMATCH = "vocabulary-mismatch"
CHUNK_BOUNDARY = "chunk-boundary"
#: The causes a hint can suggest, which are also a golden set's default causes.
HINT_CAUSES = (NOT_INDEXED, VOCABULARY_MISMATCH, CHUNK_BOUNDARY)

#: Below this share of the query's content terms, the document "does not speak the query's
#: language".
VOCABULARY_COVERAGE = 0.5

#: Why the not-indexed hint fired.
ABSENT_FROM_MANIFEST = "absent from the index manifest"
ABSENT_FROM_CORPUS = "absent from the imported corpus"
NO_RUN_RETURNED_IT = "no run of the golden set returned it"


@dataclass(frozen=True, slots=True)
class Chunk:
    """What the hints know of one document of the corpus."""

    doc_id: str
    title: str
    text: str
    parent_id: str | None = None
    chunk_index: int | None = None
    cluster_id: str | None = None
    #: In the index manifest (True when the golden set has no separate manifest: the imported
    #: corpus is then the manifest).
    indexed: bool = True


@dataclass(frozen=True)
class HintContext:
    """Everything the hints of one triage look at.

    ``candidates``: per query, the documents of the run's top ``depth`` with their rank (as far
    as stored: the kept head of each ranking and the ranks of judged documents).
    ``documents``: the missing documents, their sibling chunks and cluster mates.
    ``corpus_known``: a corpus (and so a manifest) was imported; without it, only the weak
    not-indexed hint can fire, from ``returned``: the documents some run of the golden set
    returned for a query that judges them.
    """

    query_texts: Mapping[str, str]
    candidates: Mapping[str, Mapping[str, int]]
    documents: Mapping[str, Chunk]
    siblings: Mapping[str, tuple[str, ...]]
    cluster_members: Mapping[str, tuple[str, ...]]
    corpus_known: bool
    manifest_imported: bool = False
    returned: Set[str] = frozenset()
    _stems: dict[str, set[str]] = field(default_factory=dict, repr=False)

    def stems_of(self, doc_id: str) -> set[str]:
        """The stems of a document's title and text (cached: siblings are looked at often)."""
        if doc_id not in self._stems:
            chunk = self.documents.get(doc_id)
            self._stems[doc_id] = stems(f"{chunk.title} {chunk.text}") if chunk else set()
        return self._stems[doc_id]


@dataclass(frozen=True, slots=True)
class MissHints:
    """The evidence for one miss and the cause it suggests."""

    not_indexed: str | None = None
    #: Share of the query's content terms in the document (None: no text to compare).
    coverage: float | None = None
    present: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    #: An adjacent chunk of the same parent that is in the candidates, and its rank.
    sibling_in_candidates: tuple[str, int] | None = None
    #: An adjacent chunk that, with this one, covers the query; the words only it brings.
    complementary_chunk: str | None = None
    complementary_terms: tuple[str, ...] = ()
    #: A duplicate-cluster mate in the candidates, and its rank.
    covered_by: tuple[str, int] | None = None

    @property
    def vocabulary(self) -> bool:
        return self.coverage is not None and self.coverage < VOCABULARY_COVERAGE

    @property
    def chunk(self) -> bool:
        return self.sibling_in_candidates is not None or self.complementary_chunk is not None

    @property
    def strong_not_indexed(self) -> bool:
        return self.not_indexed in (ABSENT_FROM_MANIFEST, ABSENT_FROM_CORPUS)

    def fired(self) -> tuple[str, ...]:
        """The causes with evidence, in suggestion order."""
        order = (
            (NOT_INDEXED, self.strong_not_indexed),
            (CHUNK_BOUNDARY, self.chunk),
            (VOCABULARY_MISMATCH, self.vocabulary),
            (NOT_INDEXED, self.not_indexed == NO_RUN_RETURNED_IT),
        )
        return tuple(dict.fromkeys(cause for cause, fires in order if fires))

    @property
    def suggestion(self) -> str | None:
        fired = self.fired()
        return fired[0] if fired else None

    def evidence(self) -> dict[str, Any]:
        """The evidence as JSON, stored with the miss and shown on the review page."""
        data: dict[str, Any] = {}
        if self.not_indexed:
            data["not_indexed"] = self.not_indexed
        if self.coverage is not None:
            data["vocabulary"] = {
                "coverage": round(self.coverage, 4),
                "present": list(self.present),
                "missing": list(self.missing),
            }
        if self.sibling_in_candidates:
            data["sibling_in_candidates"] = dict(
                zip(("doc_id", "rank"), self.sibling_in_candidates, strict=True)
            )
        if self.complementary_chunk:
            data["complementary_chunk"] = {
                "doc_id": self.complementary_chunk,
                "terms": list(self.complementary_terms),
            }
        if self.covered_by:
            data["covered_by"] = dict(zip(("doc_id", "rank"), self.covered_by, strict=True))
        return data


def _coverage(terms: list[Term], have: set[str]) -> float:
    return sum(t.stem in have for t in terms) / len(terms)


def _adjacent(chunk: Chunk, ctx: HintContext) -> list[str]:
    """Chunks of the same parent next to this one (all siblings when indexes are unknown)."""
    if not chunk.parent_id:
        return []
    out = []
    for other_id in ctx.siblings.get(chunk.parent_id, ()):
        other = ctx.documents.get(other_id)
        if other is None or other_id == chunk.doc_id:
            continue
        if (
            chunk.chunk_index is None
            or other.chunk_index is None
            or abs(other.chunk_index - chunk.chunk_index) == 1
        ):
            out.append(other_id)
    return out


def _not_indexed(doc_id: str, ctx: HintContext) -> str | None:
    chunk = ctx.documents.get(doc_id)
    if ctx.corpus_known:
        if chunk is None:
            return ABSENT_FROM_CORPUS
        if not chunk.indexed:
            return ABSENT_FROM_MANIFEST if ctx.manifest_imported else ABSENT_FROM_CORPUS
        return None
    return None if doc_id in ctx.returned else NO_RUN_RETURNED_IT


def hints_for(qid: str, doc_id: str, ctx: HintContext) -> MissHints:
    """The hints of the miss (qid, doc_id)."""
    candidates = ctx.candidates.get(qid, {})
    not_indexed = _not_indexed(doc_id, ctx)
    chunk = ctx.documents.get(doc_id)
    if chunk is None:
        return MissHints(not_indexed=not_indexed)
    covered_by = None
    if chunk.cluster_id:
        mates = [
            (candidates[m], m)
            for m in ctx.cluster_members.get(chunk.cluster_id, ())
            if m != doc_id and m in candidates
        ]
        if mates:
            rank, mate = min(mates)
            covered_by = (mate, rank)
    terms = content_terms(ctx.query_texts.get(qid))
    adjacent = _adjacent(chunk, ctx)
    in_candidates = sorted((candidates[a], a) for a in adjacent if a in candidates)
    sibling = (in_candidates[0][1], in_candidates[0][0]) if in_candidates else None
    if not terms:
        return MissHints(
            not_indexed=not_indexed, sibling_in_candidates=sibling, covered_by=covered_by
        )
    have = ctx.stems_of(doc_id)
    coverage = _coverage(terms, have)
    complementary: tuple[str | None, tuple[str, ...]] = (None, ())
    if coverage < VOCABULARY_COVERAGE:
        for other in adjacent:
            other_stems = ctx.stems_of(other)
            if (
                _coverage(terms, other_stems) < VOCABULARY_COVERAGE
                and _coverage(terms, have | other_stems) >= VOCABULARY_COVERAGE
            ):
                brought = tuple(t.word for t in terms if t.stem in other_stems - have)
                complementary = (other, brought)
                break
    return MissHints(
        not_indexed=not_indexed,
        coverage=coverage,
        present=tuple(t.word for t in terms if t.stem in have),
        missing=tuple(t.word for t in terms if t.stem not in have),
        sibling_in_candidates=sibling,
        complementary_chunk=complementary[0],
        complementary_terms=complementary[1],
        covered_by=covered_by,
    )
