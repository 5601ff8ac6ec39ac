"""A side file of duplicate-cluster ids: doc id -> cluster id, as dedup tools write them.

Teams dedupe large corpora with datatrove, text-dedup or NeMo Curator and bring the clusters
here. Three shapes are read, plain or gzip (:func:`app.eval.textio.plain_file`):

* CSV or TSV with a header row naming a doc-id column and a cluster-id column;
* JSON Lines, one object a line ``{"doc_id": ..., "cluster_id": ...}``;
* Parquet (the two columns only; integer ids become their decimal string).

The format comes from the extension (``.csv``, ``.tsv``, ``.jsonl``, ``.parquet``, each text
one optionally ``.gz``), else from the content: Parquet's magic bytes ``PAR1``, a first
non-blank ``{`` for JSON Lines, anything else delimited (tabs when the header has one, else
commas).

The columns may carry the names the tools write (``DOC_ID_COLUMNS``, ``CLUSTER_COLUMNS``; the
first one present, in that order, is used). An empty cluster id (or null) means "no cluster":
the document is left out, and not remembered, so memory stays bounded by the output; a
document given twice with two different cluster ids is refused, naming both lines; a cluster
of one document is kept as given (the caller decides what it means).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from app.eval.errors import InputError, shorten
from app.eval.jsonl import _identifier, _lines, _object
from app.eval.parquet import PARQUET_MAGIC, check_expansion, parquet_schema
from app.eval.textio import numbered_lines, plain_file

#: Names of the doc-id column, the first present wins:
#: * ``doc_id``: ours (and the name misstriage uses everywhere);
#: * ``id``: NeMo Curator's legacy fuzzy dedup writes ``[id_column, "group"]`` with
#:   ``id_column="id"`` by default (nemo_curator/modules/fuzzy_dedup/connectedcomponents.py,
#:   ``labels_df.rename(columns={"labels": "group"})``), and its legacy ExactDuplicates writes
#:   ``[id_field, "_hashes"]`` with ``id_field="id"`` (nemo_curator/modules/exact_dedup.py);
#:   datatrove's writers put ``Document.id`` under ``id`` (datatrove/pipeline/writers/
#:   disk_base.py, ``DiskWriter._default_adapter`` = ``dataclasses.asdict(document)``);
#: * ``_curator_dedup_id``: NeMo Curator's Ray stages (``CURATOR_DEDUP_ID_STR`` in
#:   nemo_curator/stages/deduplication/id_generator.py), written next to the group by
#:   ``ConnectedComponentsStage`` (nemo_curator/stages/deduplication/fuzzy/
#:   connected_components.py);
#: * ``__index__`` / ``__INDEX__``: text-dedup's row index column, kept in its output with
#:   ``--keep-index-column`` (``INDEX_COLUMN`` in text_dedup/utils/const.py of older releases,
#:   ``_internal_index_column`` in src/text_dedup/config/algorithms/base.py of newer ones).
DOC_ID_COLUMNS = ("doc_id", "id", "_curator_dedup_id", "__index__", "__INDEX__")

#: Names of the cluster-id column, the first present wins:
#: * ``cluster_id``: ours (the corpus.jsonl field of app.eval.jsonl.read_corpus);
#: * ``group``: NeMo Curator's legacy fuzzy dedup (connectedcomponents.py, above);
#: * ``_duplicate_group_id``: NeMo Curator's Ray fuzzy dedup
#:   (``CURATOR_FUZZY_DUPLICATE_GROUP_FIELD`` in nemo_curator/stages/deduplication/fuzzy/
#:   utils.py, the column ``ConnectedComponentsStage`` writes);
#: * ``_hashes``: NeMo Curator's legacy exact dedup, the md5 of the text, on which
#:   ``remove_duplicates(..., group_field="_hashes")`` groups (exact_dedup.py, above);
#: * ``__cluster__`` / ``__CLUSTER__``: text-dedup's cluster column, kept with
#:   ``--keep-cluster-column`` (``CLUSTER_COLUMN`` in text_dedup/utils/const.py, the
#:   ``cluster_column`` default in src/text_dedup/config/algorithms/base.py);
#: * ``minhash_cluster``: datatrove's ``MinhashDedupFilter(load_cluster_ids=True)`` sets
#:   ``doc.metadata["minhash_cluster"]`` (datatrove/pipeline/dedup/minhash.py); its writers
#:   put it under ``metadata`` (or at the top with ``expand_metadata=True``).
CLUSTER_COLUMNS = (
    "cluster_id",
    "group",
    "_duplicate_group_id",
    "_hashes",
    "__cluster__",
    "__CLUSTER__",
    "minhash_cluster",
)

#: datatrove nests document metadata under this key unless told to expand it; it sets the
#: cluster only on documents that have one, so there an absent cluster means "no cluster".
DATATROVE_METADATA = "metadata"

_TEXT_SUFFIXES = {".csv": ",", ".tsv": "\t"}
#: Rows of a Parquet file converted at a time.
_PARQUET_SLICE = 1 << 16


def read_cluster_ids(path: Path, *, max_id_chars: int = 300) -> dict[str, str]:
    """Read a side file of cluster ids: doc id -> cluster id (see the module).

    Every bad input raises :class:`InputError` naming the file and the line (Parquet: the
    row); a file without a single cluster id is refused."""
    source = str(path)
    reader = _Collector(source, max_id_chars, row_word="line")
    name = path.name.lower().removesuffix(".gz")
    with plain_file(path) as plain:
        with plain.open("rb") as handle:
            head = handle.read(64 << 10)
        if head.startswith(PARQUET_MAGIC) or name.endswith(".parquet"):
            reader.row_word = "row"
            _read_parquet(plain, head, reader)
        elif name.endswith(".jsonl"):
            _read_jsonl(plain, reader)
        elif name.endswith(tuple(_TEXT_SUFFIXES)):
            _read_delimited(plain, reader, _TEXT_SUFFIXES[Path(name).suffix])
        elif head.lstrip().startswith(b"{"):
            _read_jsonl(plain, reader)
        else:
            _read_delimited(plain, reader, None)
    return reader.result()


def cluster_members(ids: Mapping[str, str]) -> dict[str, list[str]]:
    """Cluster id -> its member doc ids, sorted (clusters in order of first appearance)."""
    members: dict[str, list[str]] = {}
    for doc, cluster in ids.items():
        members.setdefault(cluster, []).append(doc)
    for docs in members.values():
        docs.sort()
    return members


class _Collector:
    """The pairs read so far, with the line each document was given on."""

    def __init__(self, source: str, max_id_chars: int, *, row_word: str) -> None:
        self.source = source
        self.max_id_chars = max_id_chars
        self.row_word = row_word
        self.ids: dict[str, str] = {}
        self.first: dict[str, int] = {}
        self.rows = 0

    def error(self, number: int | None, message: str) -> InputError:
        """An error at a line (text) or a row (Parquet, which has no lines)."""
        if number is not None and self.row_word == "row":
            return InputError(self.source, None, f"row {number}: {message}")
        return InputError(self.source, number, message)

    def add(
        self, number: int, doc_value: Any, doc_field: str, cluster_value: Any, field: str
    ) -> None:
        self.rows += 1
        doc = self._id(doc_value, number, doc_field)
        if cluster_value is None or (isinstance(cluster_value, str) and not cluster_value.strip()):
            return
        cluster = self._id(cluster_value, number, field)
        known = self.ids.get(doc)
        if known is None:
            self.ids[doc] = cluster
            self.first[doc] = number
        elif known != cluster:
            raise self.error(
                number,
                f"document {shorten(doc)} is given cluster {shorten(cluster)} here and cluster "
                f"{shorten(known)} on {self.row_word} {self.first[doc]}",
            )

    def _id(self, value: Any, number: int, field: str) -> str:
        if isinstance(value, str):
            value = value.strip()
        try:
            return _identifier(
                value, source=self.source, line=number, field=field, limit=self.max_id_chars
            )
        except InputError as exc:
            raise self.error(number, exc.message) from None

    def result(self) -> dict[str, str]:
        if not self.ids:
            # the file is named by the error's source (a service puts the uploaded file's
            # name there, never its temporary copy's)
            why = (
                f": every one of its {self.rows:,} rows has an empty cluster id"
                if self.rows
                else f" (expected rows of a doc id and a cluster id: {_expected()})"
            )
            raise InputError(self.source, None, f"no cluster ids{why}")
        return self.ids


def _expected() -> str:
    return f"columns {' or '.join(DOC_ID_COLUMNS)} and {' or '.join(CLUSTER_COLUMNS)}"


def _missing(found: list[str], *, doc: bool, cluster: bool) -> str:
    wanted = []
    if doc:
        wanted.append("a doc id (" + " or ".join(DOC_ID_COLUMNS) + ")")
    if cluster:
        wanted.append("a cluster id (" + " or ".join(CLUSTER_COLUMNS) + ")")
    shown = ", ".join(shorten(name, 40) for name in found[:20])
    if len(found) > 20:
        shown += f", ... ({len(found):,} in all)"
    return f"no column for {' and '.join(wanted)}; found {shown or 'none'}"


def _pick(names: list[str] | dict[str, Any], choices: tuple[str, ...]) -> str | None:
    return next((name for name in choices if name in names), None)


# --- CSV and TSV ---


def _decoded(source: str, number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise InputError(
            source, number, f"not valid UTF-8 text (byte at column {exc.start + 1})"
        ) from None


def _fields(source: str, number: int, text: str, separator: str) -> list[str]:
    try:
        return next(csv.reader([text], delimiter=separator, strict=True))
    except csv.Error as exc:
        raise InputError(source, number, f"not a valid delimited line ({exc})") from None


def _read_delimited(plain: Path, reader: _Collector, separator: str | None) -> None:
    source = reader.source
    header: list[str] | None = None
    doc_at = cluster_at = 0
    doc_field = cluster_field = ""
    with plain.open("rb") as handle:
        for number, raw in numbered_lines(handle, source):
            text = _decoded(source, number, raw)
            if not text.strip():
                continue
            if header is None:
                if separator is None:
                    separator = "\t" if "\t" in text else ","
                header = [name.strip() for name in _fields(source, number, text, separator)]
                doc_name = _pick(header, DOC_ID_COLUMNS)
                cluster_name = _pick(header, CLUSTER_COLUMNS)
                if doc_name is None or cluster_name is None:
                    raise InputError(
                        source,
                        number,
                        "the header row has "
                        + _missing(header, doc=doc_name is None, cluster=cluster_name is None),
                    )
                for name in (doc_name, cluster_name):
                    if header.count(name) > 1:
                        raise InputError(
                            source, number, f"column {shorten(name)} appears twice in the header"
                        )
                doc_at, cluster_at = header.index(doc_name), header.index(cluster_name)
                doc_field, cluster_field = doc_name, cluster_name
                continue
            assert separator is not None
            fields = _fields(source, number, text, separator)
            if len(fields) != len(header):
                raise InputError(
                    source,
                    number,
                    f"expected {len(header)} fields (as the header has), found {len(fields)}",
                )
            reader.add(number, fields[doc_at], doc_field, fields[cluster_at], cluster_field)


# --- JSON Lines ---


def _read_jsonl(plain: Path, reader: _Collector) -> None:
    source = reader.source
    for number, _size, value in _lines(plain, source):
        obj = _object(value, source=source, line=number, required=())
        doc_key = _pick(obj, DOC_ID_COLUMNS)
        holder: dict[str, Any] = obj
        cluster_key = _pick(obj, CLUSTER_COLUMNS)
        nested = obj.get(DATATROVE_METADATA)
        if cluster_key is None and isinstance(nested, dict):
            holder, cluster_key = nested, _pick(nested, CLUSTER_COLUMNS)
            if doc_key is not None and cluster_key is None:
                reader.add(number, obj[doc_key], doc_key, None, "")
                continue
        if doc_key is None or cluster_key is None:
            raise InputError(
                source,
                number,
                "the object has "
                + _missing(list(obj), doc=doc_key is None, cluster=cluster_key is None),
            )
        reader.add(number, obj[doc_key], doc_key, holder[cluster_key], cluster_key)


# --- Parquet ---


def _read_parquet(plain: Path, head: bytes, reader: _Collector) -> None:
    source = reader.source
    if not head.startswith(PARQUET_MAGIC):
        raise InputError(source, None, "not a Parquet file (it does not start with PAR1)")
    try:
        schema = parquet_schema(plain)
    except Exception as exc:  # polars raises several kinds for a damaged file
        raise InputError(
            source, None, f"not a readable Parquet file ({shorten(str(exc), 120)})"
        ) from None
    names = list(schema)
    doc_name = _pick(names, DOC_ID_COLUMNS)
    cluster_name = _pick(names, CLUSTER_COLUMNS)
    if doc_name is None or cluster_name is None:
        raise InputError(
            source,
            None,
            "the Parquet file has "
            + _missing(names, doc=doc_name is None, cluster=cluster_name is None),
        )
    for name in (doc_name, cluster_name):
        dtype = schema[name]
        if not (dtype == pl.String or dtype == pl.Null or dtype.is_integer()):
            raise InputError(
                source,
                None,
                f"column {shorten(name)} holds {dtype} values: expected strings or integers",
            )
    check_expansion(plain)
    try:
        frame = pl.read_parquet(plain, columns=[doc_name, cluster_name], glob=False)
    except Exception as exc:
        raise InputError(
            source, None, f"not a readable Parquet file ({shorten(str(exc), 120)})"
        ) from None
    frame = frame.select(pl.col(doc_name).cast(pl.String), pl.col(cluster_name).cast(pl.String))
    for number, doc, cluster in _rows(frame):
        if doc is None:
            raise reader.error(number, f"{shorten(doc_name)} is null: every row needs a doc id")
        reader.add(number, doc, doc_name, cluster, cluster_name)


def _rows(frame: pl.DataFrame) -> Iterator[tuple[int, str | None, str | None]]:
    number = 0
    for part in frame.iter_slices(_PARQUET_SLICE):
        for doc, cluster in part.iter_rows():
            number += 1
            yield number, doc, cluster


__all__ = ["CLUSTER_COLUMNS", "DOC_ID_COLUMNS", "cluster_members", "read_cluster_ids"]
