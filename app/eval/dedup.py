"""Near-duplicate detection over a BEIR corpus: where cluster ids come from (DESIGN.md).

Pipeline (``detect``; ``detect_corpus`` reads a ``corpus.jsonl``):

1. Each document's ``text`` is normalised and cut into word shingles (``app.eval.dedup_text``:
   NFKC, case folded, hyphenation at line breaks joined, punctuation removed, white space
   collapsed; word 5-grams hashed to 64-bit integers, kept as sorted unique ``uint64`` arrays,
   never as Python sets of strings). The title is not shingled (chunks of one paper share it).
   A document with no word is never a candidate.
   **Copies are grouped first.** Documents with the same shingle set (identical after
   normalisation, up to the order of repeated 5-grams: the identity the Jaccard similarity
   sees, J = 1) are one group, found by a 128-bit BLAKE2b digest of the set and confirmed
   element by element. Each group is signed, searched and verified once (steps 2 to 4 run
   over distinct sets), so the work grows with the distinct texts, and with the copies of one
   text only linearly: 10,000 copies of a cookie notice cost what one does, plus their ids
   (``benchmarks/dedup_copies.py``). A group is named by its smallest doc id.
2. MinHash signatures of ``num_perm`` 32-bit values, from the shingle hashes, by ``rensa``
   (``RMinHash.digest_matrix_from_flat_token_hashes``, seeded by ``seed``): the library chosen
   by measurement (``benchmarks/dedup.py``: same corpus, same shingles, against datasketch's
   MinHash + MinHashLSH and rensa's own RMinHashLSH index). At 100,000 chunks of 200 words
   (``--docs 100000 --repeat 3``, medians, two shared cores): this detector 12.6 s and 403 MB
   peak RSS; datasketch 44.2 s and 1,326 MB; rensa's objects and index 12.6 s and 601 MB; the
   three with the same pair precision and recall (1.0) on the known copies. rensa's index is
   not used here: it takes RMinHash objects built from bytes tokens (one Python bytes object
   per shingle) and wants num_perm divisible by the bands, while the banding below works on
   rensa's signature matrix directly (same candidates, a third less memory).
3. LSH candidate search: the first ``bands * rows`` signature values cut into ``bands`` bands
   of ``rows`` values; two documents are a candidate pair when they agree on every value of at
   least one band. For a pair of Jaccard similarity s, P(candidate) = 1 - (1 - s^r)^b (the
   S-curve), whose 50% point is about (1/b)^(1/r). Unless given, ``choose_bands`` picks the
   largest r (fewest false candidates) with b = num_perm // r such that (1/b)^(1/r) <=
   threshold - near: the S-curve is past half already at the bottom of the near-threshold band
   that calibration samples. Default J = 0.8, num_perm = 128, near = 0.2 -> b = 25, r = 5:
   50% point 0.525, P(candidate) = 0.99995 at s = 0.8, 0.99 at 0.7, 0.87 at 0.6, 0.06 at 0.3.
   A bucket of more than ``max_bucket`` groups (many near-copies of one text) yields the pairs
   of its first member with each other member only (enough for the clusters; counted in stats).
4. Every candidate pair is verified by its exact Jaccard similarity (the similarity the
   threshold names): |A & B| / |A | B| of the two shingle arrays. Every verified pair is kept
   with its similarity, those below the threshold included (calibration samples them by band),
   named by the two groups' smallest ids: it stands for every pair of their members.
   **The pairs of a group of n copies are not listed**: the group is n - 1 pairs of similarity
   1, from each copy to its smallest id (a star, linear in n): the connected components of a
   stored detection still join the copies, and a reviewer may be shown one such pair. (Not the
   n(n - 1)/2 pairs between the copies: 10,000 copies would be 50 million rows; nor no pair
   at all: the clusters at a threshold are computed from the stored pairs alone.)
5. Clusters: connected components (union-find) of the groups joined by pairs with similarity
   >= threshold, so a-b and b-c put a, b and c in one cluster, then expanded to every member
   of each group: a group of copies is one cluster with or without another. Only components
   of two or more documents are clusters; a document without a copy gets no cluster id (it is
   its own cluster).
   Cluster id: ``"c"`` + the first 16 hex digits of BLAKE2b-64 of the smallest member doc id
   (code-point order) of the expanded cluster: stable, deterministic, fixed length, whatever
   the corpus order (a group's name, its smallest id, is order-free too).

Counts (``DedupStats``): ``groups`` the distinct shingle sets, ``copy_groups`` those held by two
documents or more and ``copies`` the documents in them, ``verified`` the candidate pairs of
distinct sets verified, ``candidates`` every pair kept (verified pairs and copies' links),
``pairs_at_threshold`` those at or above the threshold (links included). Without copies, every
figure is what it was before copies were grouped.

``write_clustered_corpus`` writes the corpus back, streaming line by line: every document with
all its fields, plus ``cluster_id`` on the documents that have a copy (others as read).
"""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from hashlib import blake2b
from importlib.metadata import version as _version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import rensa  # type: ignore[import-untyped]  # no stubs, no py.typed

from app.eval.dedup_text import U64, Shingler, jaccard, normalise
from app.eval.jsonl import read_corpus
from app.eval.textio import plain_file

__all__ = [
    "DedupParams",
    "DedupResult",
    "DedupStats",
    "SimilarPair",
    "choose_bands",
    "cluster_id_for",
    "detect",
    "detect_corpus",
    "group_copies",
    "jaccard",
    "normalise",
    "s_curve",
    "write_clustered_corpus",
]

BATCH = 4096
_MIX = np.uint64(0x9E3779B97F4A7C15)


def s_curve(similarity: float, bands: int, rows: int) -> float:
    """P(a pair of this Jaccard similarity is a candidate) = 1 - (1 - s^r)^b."""
    return 1.0 - (1.0 - similarity**rows) ** bands


#: The lowest threshold a detection takes, and the lowest similarity it keeps pairs down to:
#: below these the LSH bands make nearly every pair of a corpus a candidate (shared topic
#: words, not copies), so the candidates, and the memory, grow as the square of the corpus.
MIN_THRESHOLD = 0.5
MIN_LOW = 0.3


def choose_bands(threshold: float, num_perm: int, near: float = 0.2) -> tuple[int, int]:
    """(bands, rows): the largest r, b = num_perm // r, whose 50% point (1/b)^(1/r) is at or
    below ``threshold - near`` (r = 1 when none is)."""
    target = threshold - near
    for rows in range(num_perm, 0, -1):
        bands = num_perm // rows
        if (1.0 / bands) ** (1.0 / rows) <= target:
            return bands, rows
    return num_perm, 1


@dataclass(frozen=True, slots=True)
class DedupParams:
    """What a detector run was asked; ``resolved()`` fills bands and rows."""

    threshold: float = 0.8
    num_perm: int = 128
    bands: int | None = None
    rows: int | None = None
    shingle_size: int = 5
    seed: int = 1
    near: float = 0.2
    max_bucket: int = 100

    def resolved(self) -> DedupParams:
        if not MIN_THRESHOLD <= self.threshold <= 1.0:
            raise ValueError(f"the threshold must be from {MIN_THRESHOLD} to 1")
        if self.near < 0.0 or self.threshold - self.near < MIN_LOW - 1e-9:
            raise ValueError(
                f"near must be at least 0 and keep threshold - near at {MIN_LOW} or more"
            )
        if self.bands is None or self.rows is None:
            bands, rows = choose_bands(self.threshold, self.num_perm, self.near)
            bands = self.bands or (self.num_perm // (self.rows or rows))
            rows = self.rows or (self.num_perm // bands)
        else:
            bands, rows = self.bands, self.rows
        if bands < 1 or rows < 1 or bands * rows > self.num_perm:
            raise ValueError(f"bands x rows ({bands} x {rows}) must fit in num_perm")
        return DedupParams(
            self.threshold, self.num_perm, bands, rows, self.shingle_size, self.seed,
            self.near, self.max_bucket,
        )  # fmt: skip

    @property
    def midpoint(self) -> float:
        """The S-curve's 50% point, (1/b)^(1/r)."""
        bands, rows = self.shape()
        return float((1.0 / bands) ** (1.0 / rows))

    def shape(self) -> tuple[int, int]:
        """(bands, rows), resolved."""
        p = self.resolved()
        return p.bands or 1, p.rows or 1


@dataclass(frozen=True, slots=True)
class SimilarPair:
    """A verified candidate pair (doc_a < doc_b) and its exact Jaccard similarity."""

    doc_a: str
    doc_b: str
    similarity: float


@dataclass(slots=True)
class DedupStats:
    documents: int = 0
    shingled: int = 0  # documents with at least one shingle
    short: int = 0  # 1 to shingle_size - 1 words: one shingle
    candidates: int = 0  # pairs kept: the verified candidates and the copies' links
    pairs_at_threshold: int = 0  # pairs kept with similarity >= threshold (links included)
    near_pairs: int = 0  # threshold - near <= similarity < threshold
    groups: int = 0  # distinct shingle sets among the shingled documents
    copy_groups: int = 0  # shingle sets held by two documents or more
    copies: int = 0  # documents in those groups (all of each group's copies)
    verified: int = 0  # candidate pairs of distinct sets, each verified by its Jaccard
    clusters: int = 0
    clustered_documents: int = 0
    largest_cluster: int = 0
    capped_buckets: int = 0
    parameters: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class DedupResult:
    pairs: list[SimilarPair]
    clusters: dict[str, list[str]]  # cluster id -> member doc ids (sorted)
    stats: DedupStats
    params: DedupParams
    #: the groups of identical documents (same shingle set), smallest id -> members (sorted,
    #: two or more); a pair names a group by its smallest id
    copies: dict[str, list[str]] = field(default_factory=dict)

    def cluster_of(self) -> dict[str, str]:
        """doc id -> cluster id, for the documents that have a copy."""
        return {doc: cid for cid, members in self.clusters.items() for doc in members}


def cluster_id_for(members: Iterable[str]) -> str:
    """ "c" + 16 hex digits of BLAKE2b-64 of the smallest member id."""
    smallest = min(members)
    return "c" + blake2b(smallest.encode("utf-8"), digest_size=8).hexdigest()


class _Store:
    """Shingle sets of the shingled documents, per batch (no concatenation of the whole)."""

    def __init__(self) -> None:
        self.flats: list[U64] = []
        self.offsets: list[npt.NDArray[np.int64]] = []
        self.first: list[int] = []  # the shingled index of each batch's first document
        self.count = 0

    def add(self, flat: U64, offsets: npt.NDArray[np.int64]) -> None:
        self.flats.append(flat)
        self.offsets.append(offsets)
        self.first.append(self.count)
        self.count += offsets.size - 1

    def get(self, index: int) -> U64:
        batch = bisect.bisect_right(self.first, index) - 1
        local = index - self.first[batch]
        off = self.offsets[batch]
        return self.flats[batch][off[local] : off[local + 1]]


def _band_keys(signatures: npt.NDArray[np.uint32], bands: int, rows: int) -> U64:
    """One 64-bit key per (document, band): a mix of the band's r values."""
    sig = signatures[:, : bands * rows].astype(np.uint64).reshape(-1, bands, rows)
    key = np.zeros(sig.shape[:2], dtype=np.uint64)
    for k in range(rows):
        key = (key ^ sig[:, :, k]) * _MIX
    mixed: U64 = key ^ (key >> np.uint64(29))
    return mixed


def _candidates(keys: U64, max_bucket: int, stats: DedupStats) -> npt.NDArray[np.int64]:
    """Distinct candidate pairs (i < j, shingled indices) encoded as i * n + j."""
    n = keys.shape[0]
    found: list[npt.NDArray[np.int64]] = []
    for band in range(keys.shape[1]):
        column = keys[:, band]
        order = np.argsort(column, kind="stable").astype(np.int64)
        ordered = column[order]
        new = np.ones(n, dtype=bool)
        new[1:] = ordered[1:] != ordered[:-1]
        group = np.cumsum(new) - 1
        sizes = np.bincount(group)
        size_at = sizes[group]
        small = size_at <= max_bucket
        for d in range(1, min(int(sizes.max(initial=1)), max_bucket)):
            same = (group[:-d] == group[d:]) & small[:-d]
            if not same.any():
                break
            a, b = order[:-d][same], order[d:][same]
            found.append(np.minimum(a, b) * n + np.maximum(a, b))
        big = np.nonzero(sizes > max_bucket)[0]
        stats.capped_buckets += int(big.size)
        starts = np.nonzero(new)[0]
        for g in big.tolist():
            members = np.sort(order[starts[g] : starts[g] + sizes[g]])
            found.append(members[0] * n + members[1:])
    if not found:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate(found))


def _components(n: int, edges: list[tuple[int, int]]) -> dict[int, list[int]]:
    parent = list(range(n))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for a, b in edges:
        for x in (a, b):
            groups.setdefault(root(x), []).append(x)
    return {r: sorted(set(m)) for r, m in groups.items()}


class _Groups:
    """Documents grouped by shingle set: the first document of a set seen opens a group (its
    set goes to the store once), later ones join it. Looked up by a 128-bit BLAKE2b digest of
    the set, then compared element by element with the group's set (a digest collision opens a
    group of its own: never a wrong merge)."""

    def __init__(self, store: _Store) -> None:
        self.store = store
        self.members: list[list[str]] = []
        self._index: dict[bytes, int] = {}

    def add_batch(
        self, batch_ids: list[str], flat: U64, offsets: npt.NDArray[np.int64]
    ) -> list[int]:
        """Group the batch's shingled documents; the batch positions that open a group, in
        order (their sets are the ones to keep and sign)."""
        opened: list[int] = []
        pending: dict[bytes, tuple[int, int]] = {}  # digest -> (batch position, group)
        bounds = offsets.tolist()
        for i, doc_id in enumerate(batch_ids):
            lo, hi = bounds[i], bounds[i + 1]
            if hi == lo:
                continue
            shingles = flat[lo:hi]
            key = blake2b(shingles.tobytes(), digest_size=16).digest()
            group = self._index.get(key)
            if group is not None and np.array_equal(self.store.get(group), shingles):
                self.members[group].append(doc_id)
                continue
            here = pending.get(key)
            if here is not None and np.array_equal(
                flat[bounds[here[0]] : bounds[here[0] + 1]], shingles
            ):
                self.members[here[1]].append(doc_id)
                continue
            group = len(self.members)
            self.members.append([doc_id])
            if key not in self._index and key not in pending:
                pending[key] = (i, group)
            opened.append(i)
        for key, (_, group) in pending.items():
            self._index[key] = group
        return opened


def group_copies(
    ids: list[str], flat: U64, offsets: npt.NDArray[np.int64]
) -> tuple[list[list[str]], list[int]]:
    """The documents (``ids``, their shingle sets ``flat[offsets[i]:offsets[i + 1]]``) grouped
    by shingle set: each group's members (sorted), and the position of each group's first
    document (whose set stands for the group). Empty sets are in no group."""
    groups = _Groups(_Store())
    opened = groups.add_batch(ids, flat, offsets)
    for members in groups.members:
        members.sort()
    return groups.members, opened


def detect(documents: Iterable[tuple[str, str]], params: DedupParams | None = None) -> DedupResult:
    """Near-duplicates among ``documents`` ((doc id, text) pairs, ids distinct): the verified
    candidate pairs, the clusters and the stats (see the module docstring). Linear in the
    number of copies of one text: documents with the same shingle set are one group, signed,
    searched and verified once."""
    p = (params or DedupParams()).resolved()
    n_bands, n_rows = p.shape()
    stats = DedupStats(
        parameters={
            "threshold": p.threshold, "num_perm": p.num_perm, "bands": p.bands, "rows": p.rows,
            "s_curve_midpoint": round(p.midpoint, 4), "shingle_size": p.shingle_size,
            "seed": p.seed, "near": p.near, "max_bucket": p.max_bucket,
            "minhash": f"rensa {_version('rensa')}",
            "cluster_id": "c + blake2b-64 hex of the smallest member id",
            "copies": "one group per shingle set, linked to its smallest id (similarity 1)",
        }
    )  # fmt: skip
    seconds = {"shingles": 0.0, "signatures": 0.0, "candidates": 0.0, "verify": 0.0}
    shingler = Shingler(p.shingle_size)
    store = _Store()  # one shingle set per group
    groups = _Groups(store)
    seen: set[str] = set()
    keys: list[U64] = []
    start = time.perf_counter()

    def flush(batch_ids: list[str], texts: list[str]) -> None:
        t0 = time.perf_counter()
        flat, offsets = shingler.batch(texts)
        stats.shingled += int(np.count_nonzero(np.diff(offsets)))
        keep = groups.add_batch(batch_ids, flat, offsets)
        if len(keep) < len(texts):  # keep the sets that open a group, renumbered
            lengths = np.diff(offsets)[keep]
            flat = (
                np.concatenate([flat[offsets[i] : offsets[i + 1]] for i in keep])
                if keep
                else np.zeros(0, dtype=np.uint64)
            )
            offsets = np.zeros(len(keep) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
        store.add(flat, offsets)
        t1 = time.perf_counter()
        seconds["shingles"] += t1 - t0
        if keep:
            matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(
                flat, offsets, p.num_perm, p.seed
            )
            signatures = np.array(matrix.to_rows(), dtype=np.uint32)
            keys.append(_band_keys(signatures, n_bands, n_rows))
        seconds["signatures"] += time.perf_counter() - t1

    batch_ids: list[str] = []
    texts: list[str] = []
    for doc_id, text in documents:
        if doc_id in seen:
            raise ValueError(f"document {doc_id!r} appears twice")
        seen.add(doc_id)
        stats.documents += 1
        batch_ids.append(doc_id)
        texts.append(text)
        if len(texts) == BATCH:
            flush(batch_ids, texts)
            batch_ids, texts = [], []
    if texts:
        flush(batch_ids, texts)
    del seen
    members = groups.members
    for m in members:
        m.sort()
    ids = [m[0] for m in members]  # each group by its smallest id: the order does not matter
    n = len(ids)
    copied = [g for g in range(n) if len(members[g]) > 1]
    stats.groups = n
    stats.copy_groups = len(copied)
    stats.copies = sum(len(members[g]) for g in copied)
    t0 = time.perf_counter()
    all_keys = np.concatenate(keys) if keys else np.zeros((0, n_bands), dtype=np.uint64)
    encoded = _candidates(all_keys, p.max_bucket, stats)
    del all_keys
    keys.clear()
    seconds["candidates"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    pairs: list[SimilarPair] = []
    edges: list[tuple[int, int]] = []
    low = p.threshold - p.near
    for code in encoded.tolist():
        i, j = divmod(code, n)
        sim = jaccard(store.get(i), store.get(j))
        a, b = (ids[i], ids[j]) if ids[i] < ids[j] else (ids[j], ids[i])
        pairs.append(SimilarPair(a, b, sim))
        if sim >= p.threshold:
            edges.append((i, j))
        elif sim >= low:
            stats.near_pairs += 1
    stats.verified = len(pairs)
    stats.pairs_at_threshold = len(edges)
    for g in copied:  # a copy linked to its group's smallest id: n - 1 pairs for n copies
        first, *rest = members[g]
        pairs.extend(SimilarPair(first, doc, 1.0) for doc in rest)
        stats.pairs_at_threshold += len(rest)
    pairs.sort(key=lambda pair: (pair.doc_a, pair.doc_b))
    seconds["verify"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    clusters: dict[str, list[str]] = {}
    joined = list(_components(n, edges).values())
    in_edges = {g for a, b in edges for g in (a, b)}
    # a group of copies is a cluster with or without another group
    joined.extend([g] for g in copied if g not in in_edges)
    for group_list in joined:
        names = sorted(doc for g in group_list for doc in members[g])
        clusters[cluster_id_for(names)] = names
    clusters = dict(sorted(clusters.items(), key=lambda item: item[1][0]))
    seconds["clusters"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - start
    stats.short = shingler.short
    stats.candidates = len(pairs)
    stats.clusters = len(clusters)
    stats.clustered_documents = sum(len(m) for m in clusters.values())
    stats.largest_cluster = max((len(m) for m in clusters.values()), default=0)
    stats.seconds = {k: round(v, 4) for k, v in seconds.items()}
    copies = {members[g][0]: members[g] for g in copied}
    return DedupResult(pairs=pairs, clusters=clusters, stats=stats, params=p, copies=copies)


def clusters_of_pairs(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """The clusters (connected components) of ``pairs`` of doc ids, as ``detect`` names them:
    cluster id -> sorted members, ordered by first member. What applying a threshold to a
    stored detection computes from the pairs at or above it."""
    index: dict[str, int] = {}
    edges: list[tuple[int, int]] = []
    for a, b in pairs:
        edges.append((index.setdefault(a, len(index)), index.setdefault(b, len(index))))
    ids = list(index)
    clusters = {}
    for members in _components(len(ids), edges).values():
        names = sorted(ids[m] for m in members)
        clusters[cluster_id_for(names)] = names
    return dict(sorted(clusters.items(), key=lambda item: item[1][0]))


@dataclass(frozen=True, slots=True)
class ClustersAt:
    """What the clusters at one threshold come to."""

    threshold: float
    pairs: int
    clusters: int
    clustered_documents: int


def clusters_at_thresholds(
    pairs: Iterable[tuple[str, str, float]], thresholds: Iterable[float]
) -> list[ClustersAt]:
    """``clusters_of_pairs`` counted at every threshold in one pass: the pairs joined from
    the most similar down (union-find), the counts read as each threshold is passed. What a
    calibration table shows per threshold, without clustering once per row."""
    ordered = sorted(pairs, key=lambda p: p[2], reverse=True)
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    out: list[ClustersAt] = []
    components = documents = i = 0
    for t in sorted(set(thresholds), reverse=True):
        while i < len(ordered) and ordered[i][2] >= t - 1e-9:
            a, b, _ = ordered[i]
            for x in (a, b):
                if x not in parent:
                    parent[x] = x
                    documents += 1
                    components += 1
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
                components -= 1
            i += 1
        out.append(ClustersAt(t, i, components, documents))
    return sorted(out, key=lambda c: c.threshold)


def corpus_texts(path: Path) -> Iterator[tuple[str, str]]:
    """(doc id, text) of a BEIR corpus.jsonl (or .gz), streamed."""
    for record in read_corpus(path):
        yield record.doc_id, record.text


def detect_corpus(path: Path, params: DedupParams | None = None) -> DedupResult:
    """``detect`` over a BEIR ``corpus.jsonl``."""
    return detect(corpus_texts(path), params)


def write_clustered_corpus(corpus: Path, out: Path, cluster_of: Mapping[str, str]) -> int:
    """Write ``corpus`` to ``out`` line by line: each document with all its fields, plus
    ``cluster_id`` for those in ``cluster_of`` (the others byte for byte as read). Returns the
    number of documents given a cluster id."""
    given = 0
    with plain_file(corpus) as plain, plain.open("rb") as source, out.open("wb") as sink:
        for raw in source:
            if not raw.strip():
                continue
            obj = json.loads(raw)
            cid = cluster_of.get(str(obj.get("_id")))
            if cid is None:
                sink.write(raw if raw.endswith(b"\n") else raw + b"\n")
                continue
            obj["cluster_id"] = cid
            sink.write(json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n")
            given += 1
    return given
