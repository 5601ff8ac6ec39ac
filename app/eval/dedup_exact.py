"""An exact similarity join: every pair of documents whose shingle sets have Jaccard >= ``low``.

It measures the recall of the near-duplicate detector's MinHash LSH candidate search
(``app.eval.dedup``): LSH finds a pair of similarity s with probability 1 - (1 - s^r)^b only,
so which pairs it misses can be told only against the pairs that exist. ``exact_pairs`` finds
those pairs without comparing every document with every other.

Shingles: the detector's own (``app.eval.dedup_text.Shingler``, word 5-grams by default, sorted
unique ``uint64`` hashes), so a pair's similarity here is the one ``detect`` verifies. A
document with no shingle is never in a pair; ids must be distinct (ValueError otherwise).

Copies: documents with the same shingle set are one group (``dedup.group_copies``, as
``detect`` groups them) before any pairing; the join runs over the distinct sets and each pair
it finds stands for |A| x |B| document pairs (``ExactJoin.pairs``: the two groups' smallest
ids, the similarity and that count). The n(n - 1)/2 pairs within a group of n copies are
counted (``copy_pairs``), never built: ``exact_join`` is linear in the copies of one text
(20,000 copies, the service's ``EXACT_LIMIT``, are one set). ``document_pairs`` is the count
the brute force over every document pair would list; ``exact_pairs`` lists them (each group
expanded: as long as the brute force's answer, for tests and small corpora).

Method, prefix filtering (the AllPairs / PPJoin idea):

1. The tokens (distinct shingle hashes) are put in one global order: ascending document
   frequency, ties by hash. Each document's tokens are sorted in that order.
2. For a set x and threshold t, J(x, y) >= t means an overlap o = |x & y| >= t |x | y| >=
   t max(|x|, |y|), so o >= ceil(t |x|) and o >= ceil(t |y|). The first common token in the
   global order sits within the first |x| - o + 1 tokens of x and the first |y| - o + 1 of y:
   every pair with J >= t shares a token in the prefixes of length |x| - ceil(t |x|) + 1 and
   |y| - ceil(t |y|) + 1. The prefixes hold the rarest tokens, so few documents share one.
3. Candidates: the pairs of documents that share a prefix token (an inverted index of the
   prefixes, built by one sort; the pairs of each token's documents, generated in chunks),
   kept only when the size filter holds: min(|x|, |y|) >= t max(|x|, |y|) (o cannot exceed
   the smaller set). Each candidate is kept once.
4. Verification: each candidate's exact overlap, by looking the tokens of its smaller set up
   in the other set (one vectorised ``searchsorted`` per chunk of candidates), and its
   similarity o / (|x| + |y| - o), the same division as ``dedup_text.jaccard``; the pairs at
   or above ``low`` are returned.

Exactness: the filters only discard pairs that cannot reach ``low`` (step 2 is a proof, not an
estimate), and every pair kept is verified exactly, so the result is the brute force's: no pair
at or above ``low`` missed, none below it reported. The ceil is taken of t |x| less a small
epsilon (1e-6), and the size filter is as lenient: a float product rounded just above an
integer can only lengthen a prefix or keep a candidate, never lose a pair.

Complexity: shingling is linear in the text; the global order and the per-document sort are
O(N log N) for N shingles in all; candidate generation costs the sum over prefix tokens of
k(k - 1)/2 for k distinct sets sharing it (small: their prefixes are their rarest shingles;
copies are one set, so a group of copies costs nothing here); verification O(min(|x|, |y|)
log N) per candidate. Memory: the shingles, their global ranks, and chunks of candidates.
``benchmarks/dedup_exact.py`` times it; ``benchmarks/dedup_copies.py`` with many copies.

``sample_ids`` picks a deterministic uniform sample of ids for a corpus too large for the join
(recall is then estimated on the pairs within the sample).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from hashlib import blake2b

import numpy as np
import numpy.typing as npt

from app.eval.dedup import BATCH, SimilarPair, group_copies
from app.eval.dedup_text import U64, Shingler

__all__ = ["ExactJoin", "exact_join", "exact_pairs", "sample_ids"]

I64 = npt.NDArray[np.int64]

EPSILON = 1e-6  # taken off t |x| before the ceil, and allowed by the size filter
CHUNK = 1 << 22  # candidate pairs (or looked-up tokens) handled at once


def _shingled(documents: Iterable[tuple[str, str]], size: int) -> tuple[list[str], U64, I64]:
    """The ids of the documents with a shingle, their shingle sets as one flat array, offsets."""
    shingler = Shingler(size)
    ids: list[str] = []
    seen: set[str] = set()
    flats: list[U64] = []
    lengths: list[I64] = []
    batch_ids: list[str] = []
    texts: list[str] = []

    def flush() -> None:
        flat, offsets = shingler.batch(texts)
        counts = np.diff(offsets)
        keep = np.nonzero(counts > 0)[0]
        ids.extend(batch_ids[i] for i in keep.tolist())
        flats.append(flat)  # an empty document contributes no shingle to flat
        lengths.append(counts[keep])
        batch_ids.clear()
        texts.clear()

    for doc_id, text in documents:
        if doc_id in seen:
            raise ValueError(f"document {doc_id!r} appears twice")
        seen.add(doc_id)
        batch_ids.append(doc_id)
        texts.append(text)
        if len(texts) == BATCH:
            flush()
    if texts:
        flush()
    flat = np.concatenate(flats) if flats else np.zeros(0, dtype=np.uint64)
    sizes = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    offsets = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return ids, flat, offsets


def _ranges(starts: I64, counts: I64) -> I64:
    """The concatenation of arange(s, s + c) for each (s, c)."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    shift = np.repeat(starts - (ends - counts), counts)
    out: I64 = np.arange(total, dtype=np.int64) + shift
    return out


def _candidates(ranked: I64, offsets: I64, sizes: I64, low: float) -> I64:
    """Distinct pairs (a < b, shingled indices, encoded a * n + b) sharing a prefix token and
    passing the size filter. ``ranked``: each document's token ranks, ascending per document."""
    n = sizes.size
    prefix = sizes - np.ceil(low * sizes - EPSILON).astype(np.int64) + 1
    prefix = np.clip(prefix, 1, sizes)
    at = _ranges(offsets[:-1], prefix)
    docs = np.repeat(np.arange(n, dtype=np.int64), prefix)
    order = np.lexsort((docs, ranked[at]))  # by token, then document
    tokens = ranked[at][order]
    docs = docs[order]
    del at, order
    m = tokens.size
    if m < 2:
        return np.zeros(0, dtype=np.int64)
    new = np.ones(m, dtype=bool)
    new[1:] = tokens[1:] != tokens[:-1]
    starts = np.nonzero(new)[0]
    group_end = np.repeat(np.append(starts[1:], m), np.diff(np.append(starts, m)))
    after = group_end - np.arange(m, dtype=np.int64) - 1  # later members of the same token
    has = np.nonzero(after > 0)[0]
    after = after[has]
    found: list[I64] = []
    cum = np.cumsum(after)
    first = 0
    while first < has.size:
        base = int(cum[first - 1]) if first else 0
        last = int(np.searchsorted(cum, base + CHUNK, side="right"))
        last = max(last, first + 1)
        left = np.repeat(has[first:last], after[first:last])
        right = _ranges(has[first:last] + 1, after[first:last])
        a, b = docs[left], docs[right]  # a < b: sorted by document within a token
        small = np.minimum(sizes[a], sizes[b])
        big = np.maximum(sizes[a], sizes[b])
        fits = small >= low * big - EPSILON
        found.append(np.unique(a[fits] * n + b[fits]))
        first = last
    if not found:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate(found))


def _overlaps(keys: I64, offsets: I64, sizes: I64, a: I64, b: I64, vocab: int) -> I64:
    """|x & y| for each pair (a[k], b[k]): the smaller set's tokens looked up among the other's.
    ``keys``: document * vocab + token id, sorted (each document's token ids ascending)."""
    swap = sizes[a] > sizes[b]
    small = np.where(swap, b, a)
    other = np.where(swap, a, b)
    counts = sizes[small]
    where = _ranges(offsets[small], counts)
    token = keys[where] - np.repeat(small, counts) * vocab
    query = np.repeat(other, counts) * vocab + token
    hit = np.searchsorted(keys, query)
    hit[hit == keys.size] = 0
    found = keys[hit] == query
    pair = np.repeat(np.arange(a.size, dtype=np.int64), counts)
    return np.bincount(pair[found], minlength=a.size).astype(np.int64)


@dataclass(frozen=True, slots=True)
class ExactJoin:
    """The exact join's answer over distinct shingle sets (see the module docstring).

    ``pairs``: (a, b, similarity, count) for every two groups of identical documents whose
    sets have similarity >= low, each group named by its smallest id (a < b), ``count`` the
    document pairs it stands for (|A| x |B|), sorted. ``copies``: the groups of two documents
    or more, smallest id -> members (sorted); their n(n - 1)/2 pairs of similarity 1 are
    counted (``copy_pairs``), never listed."""

    pairs: list[tuple[str, str, float, int]]
    copies: dict[str, list[str]]
    documents: int  # documents with a shingle
    groups: int  # distinct shingle sets among them

    @property
    def copy_pairs(self) -> int:
        return sum(len(m) * (len(m) - 1) // 2 for m in self.copies.values())

    @property
    def document_pairs(self) -> int:
        """Every pair of documents at similarity >= low: the groups' pairs times their
        multiplicities, plus the pairs within each group."""
        return sum(count for *_, count in self.pairs) + self.copy_pairs


def exact_join(
    documents: Iterable[tuple[str, str]], low: float, shingle_size: int = 5
) -> ExactJoin:
    """The pairs of ``documents`` ((doc id, text), ids distinct) whose shingle sets have
    Jaccard similarity >= ``low``, over distinct sets with their multiplicities: time and
    memory linear in the copies of one text (see ``ExactJoin`` and the module docstring)."""
    if not 0.0 < low <= 1.0:
        raise ValueError("low must be in (0, 1]")
    ids, flat, offsets = _shingled(documents, shingle_size)
    members, opened = group_copies(ids, flat, offsets)
    copies = {m[0]: m for m in members if len(m) > 1}
    reps = [m[0] for m in members]
    n = len(reps)
    kept = np.asarray(opened, dtype=np.int64)
    sizes = np.diff(offsets)[kept]
    flat = flat[_ranges(offsets[:-1][kept], sizes)]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    join = ExactJoin(pairs=[], copies=copies, documents=len(ids), groups=n)
    if n < 2:
        return join
    # token ids (by hash), their document frequencies, and the global order: df, then hash
    unique, token, df = np.unique(flat, return_inverse=True, return_counts=True)
    vocab = int(unique.size)
    del flat, unique
    rank = np.empty(vocab, dtype=np.int64)
    rank[np.argsort(df, kind="stable")] = np.arange(vocab, dtype=np.int64)
    del df
    if n * vocab >= 1 << 62:
        raise ValueError("too many documents and distinct shingles for 64-bit keys")
    owner = np.repeat(np.arange(n, dtype=np.int64), sizes)
    keys = owner * vocab + token.astype(np.int64)  # sorted: hashes ascend within a document
    ranked = owner * vocab + rank[token]
    ranked.sort()  # each document's ranks ascending, documents in turn
    ranked -= owner * vocab
    del owner, token, rank
    encoded = _candidates(ranked, offsets, sizes, low)
    del ranked
    step = max(1, CHUNK // max(1, int(sizes.max())))
    for start in range(0, encoded.size, step):
        a, b = np.divmod(encoded[start : start + step], n)
        common = _overlaps(keys, offsets, sizes, a, b, vocab)
        union = sizes[a] + sizes[b] - common
        keep = common / union >= low  # float64 division, correctly rounded as Python's
        a, b, common, union = a[keep], b[keep], common[keep], union[keep]
        for i, j, o, u in zip(a.tolist(), b.tolist(), common.tolist(), union.tolist(), strict=True):
            x, y = (reps[i], reps[j]) if reps[i] < reps[j] else (reps[j], reps[i])
            # as dedup_text.jaccard divides
            join.pairs.append((x, y, o / u, len(members[i]) * len(members[j])))
    join.pairs.sort()
    return join


def exact_pairs(
    documents: Iterable[tuple[str, str]], low: float, shingle_size: int = 5
) -> list[SimilarPair]:
    """Every pair of ``documents`` ((doc id, text), ids distinct) whose shingle sets have
    Jaccard similarity >= ``low``, with that similarity, sorted (doc_a < doc_b, code-point
    order, as ``detect``'s pairs): ``exact_join`` with every group expanded, the pairs within
    a group of copies at similarity 1 included. The list is as long as the brute force's (n
    copies: n(n - 1)/2 pairs): for tests and small corpora; the service counts with
    ``exact_join``."""
    join = exact_join(documents, low, shingle_size)
    members = {m[0]: m for m in join.copies.values()}
    pairs: list[SimilarPair] = []
    for a, b, sim, _ in join.pairs:
        for x in members.get(a, [a]):
            for y in members.get(b, [b]):
                pairs.append(SimilarPair(x, y, sim) if x < y else SimilarPair(y, x, sim))
    for group in join.copies.values():
        pairs.extend(
            SimilarPair(group[i], group[j], 1.0)
            for i in range(len(group))
            for j in range(i + 1, len(group))
        )
    pairs.sort(key=lambda pair: (pair.doc_a, pair.doc_b))
    return pairs


def sample_ids(ids: Sequence[str], limit: int, seed: int = 1) -> list[str]:
    """A deterministic uniform sample of at most ``limit`` of ``ids``: those whose BLAKE2b-64
    of (seed, id) are the ``limit`` smallest, in their order in ``ids``. The same ids, limit and
    seed give the same sample in every run and process; a larger limit gives a superset."""
    if limit < 0:
        raise ValueError("the limit must not be negative")
    if limit >= len(ids):
        return list(ids)
    prefix = f"{seed}\x00".encode()

    def key(doc_id: str) -> bytes:
        return blake2b(prefix + doc_id.encode("utf-8"), digest_size=8).digest()

    chosen = set(sorted(range(len(ids)), key=lambda i: (key(ids[i]), i))[:limit])
    return [doc_id for i, doc_id in enumerate(ids) if i in chosen]
