"""Build the demo golden set of examples/helpcentre/ from its hand-written source.

Run from the repository root::

    python scripts/make_demo_data.py          # rewrite the generated files
    python scripts/make_demo_data.py --check  # exit 1 if the committed files differ

The source is examples/helpcentre/source/: ``articles.md`` (the help centre of Quillstack, a
fictional analytics API, one chunk per paragraph), ``copies.md`` (the internal-wiki pastes and
PDF exports of some articles) and ``queries.md`` (queries, graded judgments, and the cause of
every miss the BM25 run is meant to have). Output, deterministic (same bytes on every run):

- ``corpus.jsonl``: every chunk (``_id``, ``title``, ``text``, ``parent_id``, ``chunk_index``,
  and ``cluster_id`` for chunks that have a copy: copy chunk i and article chunk i share
  ``<article>#i``). PDF exports and PDF-only documents are here so reviewers can read them.
- ``manifest.txt``: what the search index holds, i.e. everything except ``pdf/`` documents
  (ingestion skipped oversized PDFs). No run can retrieve a document outside it.
- ``queries.jsonl`` and ``qrels.tsv`` (BEIR).
- ``runs/*.trec`` (``qid Q0 doc rank score tag``, trec_eval order: score descending, ties by
  document id descending; at most 1000 lines per query), all over the manifest only:

  - ``bm25``: BM25 (k1=1.2, b=0.75) over each chunk's title and text.
  - ``bm25-expanded``: the same with a small hand-written query-expansion table (EXPANSIONS),
    what a team adds to fix vocabulary mismatch.
  - ``rrf``: reciprocal rank fusion (k=60) of ``bm25`` and a parent-document BM25, which
    scores each article (title and all its paragraphs) and gives its score to every chunk of
    the article (chunks of one article ordered by their own BM25 score). The second list can
    find a chunk whose article mentions the query words in another paragraph. Fused scores
    are written with 4 decimals like the others; ties from the rounding are ordered as
    trec_eval orders them (document id descending), and so are the ranks in the file.

Analyzer: lowercase, split on non-alphanumerics, drop one-character tokens and stop words,
Snowball English stemming (PyStemmer).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import Stemmer

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "helpcentre"
SOURCE = DATA / "source"

K1, B = 1.2, 0.75
RRF_K = 60
MAX_RESULTS = 1000
CAUSES = ("not-indexed", "vocabulary", "chunk-boundary", "duplicate")
MANIFEST_HEADER = (
    "# The search index: one document id a line, the help-centre chunks and their wiki pastes.\n"
    "# Ingestion skipped oversized PDFs, so pdf/ documents are in corpus.jsonl but not here.\n"
)

STOP = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don
    down during each few for from further get gets getting got had hadn has hasn have haven
    having he her here hers herself him himself his how i if in into is isn it its itself just
    ll me might more most must mustn my myself no nor not now of off on once only or other our
    ours ourselves out over own please re same shall she should shouldn so some such than that
    the their theirs them themselves then there these they this those through to too under
    until up us ve very was wasn we were weren what when where which while who whom why will
    with without won would wouldn you your yours yourself yourselves
    """.split()
)

#: Query expansion of the bm25-expanded run: a query word (left) adds words (right). Written
#: by hand from the vocabulary misses a team would have seen; not every gap is covered.
EXPANSIONS = {
    "throttled": "rate limit",
    "quota": "rate limit ceiling",
    "sso": "saml single sign-on",
    "okta": "saml identity provider",
    "2fa": "two-factor authentication",
    "mfa": "two-factor authentication",
    "cancel": "downgrade free",
    "subscription": "plan",
    "bill": "invoice",
    "receipts": "invoice paid",
    "rotate": "swap revoke key",
    "money": "refund reimbursement",
    "gdpr": "erase erasure privacy",
    "timezone": "time zone",
}


class SourceError(ValueError):
    """A malformed line in the source files."""

    def __init__(self, path: Path, line: int, message: str) -> None:
        super().__init__(f"{path.name}:{line}: {message}")


@dataclass(frozen=True)
class Article:
    doc_id: str
    title: str
    copies: tuple[str, ...]
    paragraphs: tuple[str, ...]


@dataclass(frozen=True)
class WikiEdits:
    rewords: tuple[tuple[str, str], ...]
    notes: dict[int, str]


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    title: str
    text: str
    parent_id: str
    chunk_index: int
    cluster_id: str | None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "_id": self.doc_id,
            "title": self.title,
            "text": self.text,
            "parent_id": self.parent_id,
            "chunk_index": self.chunk_index,
        }
        if self.cluster_id is not None:
            data["cluster_id"] = self.cluster_id
        return data


@dataclass(frozen=True)
class Judgment:
    doc_id: str
    grade: int
    cause: str | None


@dataclass(frozen=True)
class Query:
    qid: str
    text: str
    judgments: tuple[Judgment, ...]


# --- source ---------------------------------------------------------------------------------


def _sections(path: Path) -> Iterable[tuple[int, str, list[tuple[int, str]]]]:
    """(line number, header text, body lines) per ``## `` section; the preamble is skipped."""
    header: tuple[int, str] | None = None
    body: list[tuple[int, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("## "):
            if header is not None:
                yield header[0], header[1], body
            header, body = (number, line[3:].strip()), []
        elif header is not None:
            body.append((number, line.rstrip()))
    if header is not None:
        yield header[0], header[1], body


def _split_header(path: Path, number: int, header: str) -> tuple[str, str]:
    key, sep, rest = header.partition(" | ")
    if not sep or not key.strip() or not rest.strip():
        raise SourceError(path, number, f"expected '## <id> | <text>', got {header!r}")
    return key.strip(), rest.strip()


def parse_articles(path: Path) -> list[Article]:
    articles: list[Article] = []
    for number, header, body in _sections(path):
        doc_id, title = _split_header(path, number, header)
        copies: tuple[str, ...] = ()
        paragraphs: list[str] = []
        current: list[str] = []
        for line_number, line in body:
            if line.startswith("copies:") and not paragraphs and not current:
                copies = tuple(line.removeprefix("copies:").split())
                if not set(copies) <= {"wiki", "pdf"}:
                    raise SourceError(path, line_number, f"unknown copy kind in {line!r}")
            elif line.strip():
                current.append(line.strip())
            elif current:
                paragraphs.append(" ".join(current))
                current = []
        if current:
            paragraphs.append(" ".join(current))
        if not paragraphs:
            raise SourceError(path, number, f"article {doc_id!r} has no paragraph")
        articles.append(Article(doc_id, title, copies, tuple(paragraphs)))
    return articles


def parse_copies(path: Path) -> dict[str, WikiEdits]:
    edits: dict[str, WikiEdits] = {}
    for number, header, body in _sections(path):
        if not header.startswith("wiki/"):
            raise SourceError(path, number, f"expected '## wiki/<article>', got {header!r}")
        rewords: list[tuple[str, str]] = []
        notes: dict[int, str] = {}
        for line_number, line in body:
            if line.startswith("reword:"):
                old, sep, new = line.removeprefix("reword:").partition(" => ")
                if not sep or not old.strip():
                    raise SourceError(path, line_number, "expected 'reword: <old> => <new>'")
                rewords.append((old.strip(), new.strip()))
            elif match := re.fullmatch(r"note (\d+): (.+)", line):
                notes[int(match.group(1))] = match.group(2).strip()
            elif line.strip():
                raise SourceError(path, line_number, f"unexpected line {line!r}")
        edits[header.removeprefix("wiki/")] = WikiEdits(tuple(rewords), notes)
    return edits


def parse_queries(path: Path) -> list[Query]:
    queries: list[Query] = []
    for number, header, body in _sections(path):
        qid, text = _split_header(path, number, header)
        judgments: list[Judgment] = []
        for line_number, line in body:
            if not line.strip():
                continue
            match = re.fullmatch(r"(\S+) (-?\d+)(?: miss: (\S+))?", line.strip())
            if match is None or (match.group(3) and match.group(3) not in CAUSES):
                raise SourceError(path, line_number, "expected '<doc> <grade> [miss: <cause>]'")
            judgments.append(Judgment(match.group(1), int(match.group(2)), match.group(3)))
        queries.append(Query(qid, text, tuple(judgments)))
    return queries


def _pdf_page(heading: str, index: int, count: int, text: str) -> str:
    """What a PDF-to-text conversion leaves: the running header, then the paragraph."""
    return f"{heading} — page {index // 2 + 1} of {(count + 1) // 2}\n{text}"


def build_corpus(articles: list[Article], edits: dict[str, WikiEdits]) -> list[Chunk]:
    chunks: list[Chunk] = []
    for article in articles:
        count = len(article.paragraphs)
        if article.doc_id.startswith("pdf/"):
            chunks += [
                Chunk(
                    f"{article.doc_id}#{i}",
                    article.title,
                    _pdf_page(article.title, i, count, text),
                    article.doc_id,
                    i,
                    None,
                )
                for i, text in enumerate(article.paragraphs)
            ]
            continue
        cluster = [f"{article.doc_id}#{i}" if article.copies else None for i in range(count)]
        chunks += [
            Chunk(f"{article.doc_id}#{i}", article.title, text, article.doc_id, i, cluster[i])
            for i, text in enumerate(article.paragraphs)
        ]
        if "wiki" in article.copies:
            wiki = edits.get(article.doc_id)
            if wiki is None:
                raise ValueError(f"copies.md has no '## wiki/{article.doc_id}' section")
            texts = list(article.paragraphs)
            for old, new in wiki.rewords:
                if not any(old in text for text in texts):
                    raise ValueError(f"wiki/{article.doc_id}: reword {old!r} matches nothing")
                texts = [text.replace(old, new) for text in texts]
            for i, note in wiki.notes.items():
                if i >= count:
                    raise ValueError(f"wiki/{article.doc_id}: no paragraph {i} for a note")
                texts[i] = f"{texts[i]}\n{note}"
            parent = f"wiki/{article.doc_id}"
            chunks += [
                Chunk(f"{parent}#{i}", f"{article.title} (internal wiki)", text, parent, i, c)
                for i, (text, c) in enumerate(zip(texts, cluster, strict=True))
            ]
        if "pdf" in article.copies:
            parent = f"pdf/{article.doc_id}"
            heading = f"Quillstack Help Centre — {article.title}"
            chunks += [
                Chunk(
                    f"{parent}#{i}",
                    f"{article.title} (PDF export)",
                    _pdf_page(heading, i, count, text),
                    parent,
                    i,
                    cluster[i],
                )
                for i, text in enumerate(article.paragraphs)
            ]
    unused = set(edits) - {a.doc_id for a in articles if "wiki" in a.copies}
    if unused:
        raise ValueError(f"copies.md edits articles without a wiki copy: {sorted(unused)}")
    return chunks


def load_source() -> tuple[list[Chunk], list[Query]]:
    """The corpus and the queries, checked against each other."""
    corpus = build_corpus(
        parse_articles(SOURCE / "articles.md"), parse_copies(SOURCE / "copies.md")
    )
    queries = parse_queries(SOURCE / "queries.md")
    ids = [chunk.doc_id for chunk in corpus]
    if len(set(ids)) != len(ids):
        raise ValueError("two chunks share an id")
    known = set(ids)
    for query in queries:
        for judgment in query.judgments:
            if judgment.doc_id not in known:
                raise ValueError(f"{query.qid} judges unknown document {judgment.doc_id!r}")
    return corpus, queries


def intended_misses(queries: list[Query]) -> dict[tuple[str, str], str]:
    """(qid, doc_id) -> cause, for every judgment annotated ``miss:`` in queries.md."""
    return {(q.qid, j.doc_id): j.cause for q in queries for j in q.judgments if j.cause is not None}


# --- retrieval ------------------------------------------------------------------------------

_STEMMER = Stemmer.Stemmer("english")


def analyze(text: str) -> list[str]:
    words = [w for w in re.split(r"[^0-9a-z]+", text.lower()) if len(w) > 1 and w not in STOP]
    return list(_STEMMER.stemWords(words))


def _expansion_table() -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    for word, extra in EXPANSIONS.items():
        (stem,) = analyze(word)
        table[stem] = analyze(extra)
    return table


def bm25(docs: dict[str, list[str]], query: list[str]) -> dict[str, float]:
    """BM25 scores (k1=1.2, b=0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))) of the
    documents sharing at least one term with the query."""
    postings: dict[str, dict[str, int]] = defaultdict(dict)
    for doc_id, terms in docs.items():
        for term, tf in Counter(terms).items():
            postings[term][doc_id] = tf
    average = sum(len(terms) for terms in docs.values()) / len(docs)
    scores: dict[str, float] = defaultdict(float)
    for term, qtf in sorted(Counter(query).items()):
        posting = postings.get(term)
        if not posting:
            continue
        idf = math.log(1 + (len(docs) - len(posting) + 0.5) / (len(posting) + 0.5))
        for doc_id, tf in posting.items():
            norm = K1 * (1 - B + B * len(docs[doc_id]) / average)
            scores[doc_id] += qtf * idf * tf * (K1 + 1) / (tf + norm)
    return dict(scores)


def ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    """trec_eval order of the scores as written (4 decimals): descending score, ties by
    document id descending; at most MAX_RESULTS."""
    items = sorted(((doc, round(score, 4)) for doc, score in scores.items()), reverse=True)
    items.sort(key=lambda item: -item[1])
    return items[:MAX_RESULTS]


def trec_lines(qid: str, ranking: list[tuple[str, float]], tag: str) -> list[str]:
    return [
        f"{qid} Q0 {doc} {rank} {score:.4f} {tag}" for rank, (doc, score) in enumerate(ranking, 1)
    ]


def build_runs(corpus: list[Chunk], queries: list[Query]) -> dict[str, str]:
    indexed = [chunk for chunk in corpus if not chunk.doc_id.startswith("pdf/")]
    chunk_docs = {c.doc_id: analyze(f"{c.title} {c.text}") for c in indexed}
    articles: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in indexed:
        articles[chunk.parent_id].append(chunk)
    article_docs = {
        parent: analyze(" ".join([chunks[0].title, *(c.text for c in chunks)]))
        for parent, chunks in articles.items()
    }
    expansions = _expansion_table()
    lines: dict[str, list[str]] = {"bm25": [], "bm25-expanded": [], "rrf": []}
    for query in queries:
        terms = analyze(query.text)
        plain = ranked(bm25(chunk_docs, terms))
        lines["bm25"] += trec_lines(query.qid, plain, "bm25")
        expanded = terms + [extra for term in terms for extra in expansions.get(term, [])]
        lines["bm25-expanded"] += trec_lines(
            query.qid, ranked(bm25(chunk_docs, expanded)), "bm25-expanded"
        )
        own = dict(plain)
        by_article = bm25(article_docs, terms)
        parent_list = sorted(
            (c.doc_id for p in by_article for c in articles[p]),
            key=lambda d: (-by_article[d.rsplit("#", 1)[0]], -own.get(d, 0.0), d),
        )
        fused: dict[str, float] = defaultdict(float)
        for ranking in ([doc for doc, _ in plain], parent_list):
            for rank, doc in enumerate(ranking, 1):
                fused[doc] += 1 / (RRF_K + rank)
        lines["rrf"] += trec_lines(query.qid, ranked(fused), "rrf")
    return {f"runs/{name}.trec": "\n".join(rows) + "\n" for name, rows in lines.items()}


# --- output ---------------------------------------------------------------------------------


def generate() -> dict[str, str]:
    """Every generated file (path relative to examples/helpcentre/ -> content)."""
    corpus, queries = load_source()
    qrels = ["query-id\tcorpus-id\tscore"] + [
        f"{q.qid}\t{j.doc_id}\t{j.grade}" for q in queries for j in q.judgments
    ]
    files = {
        "corpus.jsonl": "".join(
            json.dumps(chunk.as_json(), ensure_ascii=False) + "\n" for chunk in corpus
        ),
        "queries.jsonl": "".join(
            json.dumps({"_id": q.qid, "text": q.text}, ensure_ascii=False) + "\n" for q in queries
        ),
        "qrels.tsv": "\n".join(qrels) + "\n",
        "manifest.txt": MANIFEST_HEADER
        + "".join(f"{c.doc_id}\n" for c in corpus if not c.doc_id.startswith("pdf/")),
    }
    files.update(build_runs(corpus, queries))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed files differ")
    args = parser.parse_args(argv)
    files = generate()
    if args.check:
        stale = [
            name
            for name, content in files.items()
            if not (DATA / name).is_file() or (DATA / name).read_text(encoding="utf-8") != content
        ]
        for name in stale:
            print(f"out of date: examples/helpcentre/{name}")
        return 1 if stale else 0
    for name, content in files.items():
        path = DATA / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    print(f"wrote {len(files)} files in {DATA.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
