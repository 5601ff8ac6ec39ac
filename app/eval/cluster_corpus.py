"""A corpus file as the cluster measures read it: each document's cluster (null for none)
and estimated tokens, and whether any document has text (the cost side).

A large corpus is read by a compiled pass (``app.eval.compiled.corpus``) a block at a time:
where each id lies and how long each title and text is, without a Python object a document
but its id. A corpus it does not take (a line of another shape, an id twice), a small one, or
one read where numba is not, goes to the careful reader (``app.eval.jsonl.read_corpus``),
which words every error; both give the same frame.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from app.eval import passes, textio
from app.eval.cluster_profile import (
    CORPUS_SCHEMA,
    ClusterCorpus,
    estimate_tokens,
    tokens_of_lengths,
)
from app.eval.log_fast import COMPILED_FROM_BYTES
from app.eval.passes import log_pass
from app.eval.textio import plain_stream

#: Bytes read at once.
BLOCK_BYTES = 16 << 20


def read_cluster_corpus(path: Path, *, compiled_from: int = COMPILED_FROM_BYTES) -> ClusterCorpus:
    """The corpus at ``path`` (BEIR ``corpus.jsonl``, plain or gzip) as a ClusterCorpus: by
    the compiled pass from ``compiled_from`` bytes on (smaller ones are not worth loading the
    compiler for)."""
    if path.is_file() and path.stat().st_size >= compiled_from:
        corpus = read_compiled(path)
        if corpus is not None:
            return corpus
    return _careful(path)


def _careful(path: Path) -> ClusterCorpus:
    from app.eval.jsonl import read_corpus

    ids: list[str] = []
    clusters: list[str | None] = []
    tokens: list[float] = []
    has_text = False
    for doc in read_corpus(path):
        ids.append(doc.doc_id)
        clusters.append(doc.cluster_id or None)
        tokens.append(estimate_tokens(doc.title, doc.text))
        has_text = has_text or bool(doc.text)
    documents = pl.DataFrame(
        {"doc_id": ids, "cluster_id": clusters, "tokens": tokens}, schema=CORPUS_SCHEMA
    )
    return ClusterCorpus(documents=documents, has_text=has_text)


def read_compiled(path: Path) -> ClusterCorpus | None:
    """The corpus by the compiled pass, or None when it does not take it."""
    try:
        corpus_block = log_pass().corpus_block
    except (ImportError, RuntimeError):  # no numba here, or nowhere to cache what it compiles
        return None
    ids: list[str] = []
    clusters: list[str | None] = []
    title_chars: list[np.ndarray] = []
    text_chars: list[np.ndarray] = []
    out = np.zeros((passes.CORPUS_FIELDS, 0), np.int64)
    carry = b""
    with plain_stream(path) as stream:
        while True:
            data = stream.read(BLOCK_BYTES)
            final = not data
            block = carry + data
            buf = np.frombuffer(bytearray(block), np.uint8)
            if out.shape[1] < len(buf) // 8 + 2:  # a document's line is at least '{"_id":1}\n'
                out = np.zeros((passes.CORPUS_FIELDS, len(buf) // 8 + 2), np.int64)
            status, consumed, count = corpus_block(buf, len(buf), final, out, textio.MAX_LINE_BYTES)
            if status != passes.DONE:
                return None
            rows = out[:, :count]
            ids += [
                block[a:b].decode("ascii")
                for a, b in zip(
                    rows[passes.C_ID_START].tolist(), rows[passes.C_ID_END].tolist(), strict=True
                )
            ]
            clusters += [
                block[a:b].decode("ascii") if a >= 0 else None
                for a, b in zip(
                    rows[passes.C_CLUSTER_START].tolist(),
                    rows[passes.C_CLUSTER_END].tolist(),
                    strict=True,
                )
            ]
            title_chars.append(rows[passes.C_TITLE_CHARS].copy())
            text_chars.append(rows[passes.C_TEXT_CHARS].copy())
            carry = block[consumed:]
            if final:
                break
    if not ids:
        return None  # "the corpus is empty", worded by the careful reader
    frame = pl.DataFrame(
        {"doc_id": ids, "cluster_id": clusters},
        schema={"doc_id": pl.String, "cluster_id": pl.String},
    )
    if frame.get_column("doc_id").is_duplicated().any():
        return None  # the careful reader names the lines
    titles = np.concatenate(title_chars)
    texts = np.concatenate(text_chars)
    tokens = tokens_of_lengths(titles, texts)
    return ClusterCorpus(
        documents=frame.with_columns(tokens=pl.Series(tokens, dtype=pl.Float64)),
        has_text=bool((texts > 0).any()),
    )
