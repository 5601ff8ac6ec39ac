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
class Ranked:
    """A document among the run's candidates, at its rank."""

    doc_id: str
    rank: int


@dataclass(frozen=True, slots=True)
class VocabularyEvidence:
    """How much of the query the document speaks: the share of the query's content terms it
    has (``coverage``), and those query words it has and lacks."""

    coverage: float
    has: tuple[str, ...] = ()
    lacks: tuple[str, ...] = ()

    @property
    def fires(self) -> bool:
        return self.coverage < VOCABULARY_COVERAGE


@dataclass(frozen=True, slots=True)
class ChunkEvidence:
    """The answer split across chunks: an adjacent chunk of the same parent in the candidates
    (``sibling``), or one that covers the query together with this one (``complement``), the
    query words only it brings (``complement_terms``). At least one of the two is set."""

    sibling: Ranked | None = None
    complement: str | None = None
    complement_terms: tuple[str, ...] = ()


#: The JSON of ``HintEvidence`` as stored in ``Miss.evidence``.
EvidenceJSON = dict[str, object]


@dataclass(frozen=True, slots=True)
class HintEvidence:
    """The evidence for each cause of one miss, and the cause it suggests. Stored with the
    miss as JSON (``to_json``; ``from_json`` reads it back) and shown on the review page."""

    #: Why the not-indexed hint fired (ABSENT_FROM_MANIFEST, ...); None: it did not.
    not_indexed: str | None = None
    #: None: no text to compare (no document text, or no content word in the query).
    vocabulary: VocabularyEvidence | None = None
    chunk: ChunkEvidence | None = None
    #: A duplicate-cluster mate in the candidates: the miss is covered, not a cause.
    covered_by: Ranked | None = None

    @property
    def vocabulary_mismatch(self) -> bool:
        return self.vocabulary is not None and self.vocabulary.fires

    @property
    def chunk_boundary(self) -> bool:
        return self.chunk is not None

    @property
    def strong_not_indexed(self) -> bool:
        return self.not_indexed in (ABSENT_FROM_MANIFEST, ABSENT_FROM_CORPUS)

    def fired(self) -> tuple[str, ...]:
        """The causes with evidence, in suggestion order."""
        order = (
            (NOT_INDEXED, self.strong_not_indexed),
            (CHUNK_BOUNDARY, self.chunk_boundary),
            (VOCABULARY_MISMATCH, self.vocabulary_mismatch),
            (NOT_INDEXED, self.not_indexed == NO_RUN_RETURNED_IT),
        )
        return tuple(dict.fromkeys(cause for cause, fires in order if fires))

    @property
    def suggestion(self) -> str | None:
        fired = self.fired()
        return fired[0] if fired else None

    def to_json(self) -> EvidenceJSON:
        """The evidence as JSON: only the parts that are known (empty when none is)."""
        data: EvidenceJSON = {}
        if self.not_indexed:
            data["not_indexed"] = self.not_indexed
        if self.vocabulary is not None:
            data["vocabulary"] = {
                "coverage": round(self.vocabulary.coverage, 4),
                "present": list(self.vocabulary.has),
                "missing": list(self.vocabulary.lacks),
            }
        if self.chunk is not None and self.chunk.sibling is not None:
            data["sibling_in_candidates"] = _ranked_json(self.chunk.sibling)
        if self.chunk is not None and self.chunk.complement is not None:
            data["complementary_chunk"] = {
                "doc_id": self.chunk.complement,
                "terms": list(self.chunk.complement_terms),
            }
        if self.covered_by is not None:
            data["covered_by"] = _ranked_json(self.covered_by)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> HintEvidence:
        """The evidence ``to_json`` stored (None, or an empty object: no evidence)."""
        if not data:
            return cls()
        vocabulary = data.get("vocabulary")
        sibling = _ranked(data.get("sibling_in_candidates"))
        complement = data.get("complementary_chunk") or {}
        chunk = None
        if sibling is not None or complement:
            chunk = ChunkEvidence(
                sibling=sibling,
                complement=complement.get("doc_id"),
                complement_terms=tuple(complement.get("terms", ())),
            )
        return cls(
            not_indexed=data.get("not_indexed") or None,
            vocabulary=VocabularyEvidence(
                coverage=float(vocabulary["coverage"]),
                has=tuple(vocabulary.get("present", ())),
                lacks=tuple(vocabulary.get("missing", ())),
            )
            if vocabulary
            else None,
            chunk=chunk,
            covered_by=_ranked(data.get("covered_by")),
        )


def _ranked_json(ranked: Ranked) -> dict[str, object]:
    return {"doc_id": ranked.doc_id, "rank": ranked.rank}


def _ranked(data: Mapping[str, Any] | None) -> Ranked | None:
    return Ranked(str(data["doc_id"]), int(data["rank"])) if data else None


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


def hints_for(qid: str, doc_id: str, ctx: HintContext) -> HintEvidence:
    """The hints of the miss (qid, doc_id)."""
    candidates = ctx.candidates.get(qid, {})
    not_indexed = _not_indexed(doc_id, ctx)
    chunk = ctx.documents.get(doc_id)
    if chunk is None:
        return HintEvidence(not_indexed=not_indexed)
    covered_by = None
    if chunk.cluster_id:
        mates = [
            (candidates[m], m)
            for m in ctx.cluster_members.get(chunk.cluster_id, ())
            if m != doc_id and m in candidates
        ]
        if mates:
            rank, mate = min(mates)
            covered_by = Ranked(mate, rank)
    terms = content_terms(ctx.query_texts.get(qid))
    adjacent = _adjacent(chunk, ctx)
    in_candidates = sorted((candidates[a], a) for a in adjacent if a in candidates)
    sibling = Ranked(in_candidates[0][1], in_candidates[0][0]) if in_candidates else None
    if not terms:
        return HintEvidence(
            not_indexed=not_indexed,
            chunk=ChunkEvidence(sibling=sibling) if sibling else None,
            covered_by=covered_by,
        )
    have = ctx.stems_of(doc_id)
    coverage = _coverage(terms, have)
    complement: str | None = None
    brought: tuple[str, ...] = ()
    if coverage < VOCABULARY_COVERAGE:
        for other in adjacent:
            other_stems = ctx.stems_of(other)
            if (
                _coverage(terms, other_stems) < VOCABULARY_COVERAGE
                and _coverage(terms, have | other_stems) >= VOCABULARY_COVERAGE
            ):
                complement = other
                brought = tuple(t.word for t in terms if t.stem in other_stems - have)
                break
    return HintEvidence(
        not_indexed=not_indexed,
        vocabulary=VocabularyEvidence(
            coverage=coverage,
            has=tuple(t.word for t in terms if t.stem in have),
            lacks=tuple(t.word for t in terms if t.stem not in have),
        ),
        chunk=ChunkEvidence(sibling, complement, brought) if sibling or complement else None,
        covered_by=covered_by,
    )
