"""Importing a run, all or nothing: the ranks of its judged documents, the head of every
ranking, its result counts and cluster traces.

On PostgreSQL the heads of the rankings are copied into the database while the file is read
(app.eval.streaming hands them over as soon as a block's queries are final), inside the
transaction that writes the rest: the import takes about the time of the parse, and holds a
few blocks of the file at once, not its rankings. SQLite has one writer at a time, so there
the file is read first and the rows are written after, keeping the write lock short.

The cluster figures (traces, cluster ranks) are computed from the corpus's cluster ids read
while the file is parsed, and an apply of a detector run (or an import of cluster ids) may
commit meanwhile. So the import reads the golden set's clustering before the corpus
(``clustering_now``) and, last in its transaction, takes the golden set's row ``FOR SHARE``
(app/services/locks.py) and reads it again: the same, the run is stored with figures of
the one clustering it names, and a write to the clusters after it measures it again with
theirs; changed, the attempt is rolled back and the file read again with the new clusters.
After ``ATTEMPTS`` attempts that each saw the clusters change: 409 ``clusters_changed``,
nothing stored.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
from sqlalchemy import text
from sqlmodel import Session, col, delete, select

from app.db import writing
from app.eval import InputError, Order, RankedRun, RunReport
from app.eval.cluster_profile import CorpusSource
from app.eval.cluster_stream import stream_log_traces
from app.eval.errors import printable_name
from app.eval.golden import Judgments
from app.eval.parquet import RunColumns
from app.eval.sources import detect_run_format, load_log_traces
from app.eval.streaming import (
    HeadsSent,
    QueriesNotContiguous,
    WholeFile,
    load_run_heads,
    stream_run_heads,
)
from app.eval.textio import ProgressFn, check_regular_file
from app.models import (
    JUDGED,
    LOG,
    RUN_KINDS,
    GoldenSet,
    Run,
    RunClusterQuery,
    RunHead,
    RunJudged,
    RunQuery,
    User,
    column_width,
)
from app.services import locks
from app.services.errors import Conflict, Invalid
from app.services.imports.bulk import bulk_insert, copy_rows
from app.services.imports.clusters import (
    ClusteringNow,
    clustering_now,
    corpus_source,
    store_query_traces,
    store_totals,
    store_traces,
)
from app.services.imports.golden_sets import ID_LIMITS, bad_input, eval_golden_set
from app.services.imports.series import check_meta, check_series
from app.services.names import check_description, check_name
from app.settings import DEFAULT_KEEP_DEPTH

RUN_FORMATS = ("trec", "jsonl", "parquet")

#: Times the file is read before an import whose clusters changed each time answers 409
#: ``clusters_changed``.
ATTEMPTS = 3


class _ClustersChanged(Exception):
    """Raised inside the import's transaction (rolling it back): the golden set's clustering
    is not the one the run's cluster figures were computed from."""


def sha256_of(path: Path) -> str:
    """The hex SHA-256 of a file, read 1 MiB at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: The fields whose Parquet column a ``columns`` option may name.
COLUMN_FIELDS = ("qid", "doc_id", "score", "rank")


def _format_of(path: Path) -> str | None:
    """The run format ``path``'s first bytes say (None when it cannot be read: the import
    words that)."""
    try:
        return detect_run_format(path)
    except InputError:
        return None


def parse_columns(text: str | None) -> RunColumns | None:
    """``"qid=query_id, doc_id=docid, score=bm25"``: the Parquet column of each field named
    (the others keep their own names); empty: None. 422 ``invalid_columns``."""
    if not (text or "").strip():
        return None
    named: dict[str, str] = {}
    for part in (text or "").split(","):
        field, equals, column = (p.strip() for p in part.partition("="))
        if not equals or field not in COLUMN_FIELDS or not column or len(column) > 200:
            raise Invalid(
                f"columns: expected field=column pairs, comma-separated, with fields among "
                f"{', '.join(COLUMN_FIELDS)} (e.g. qid=query_id, doc_id=docid, score=bm25), "
                f"got {printable_name(part.strip())[:80]!r}",
                code="invalid_columns",
            )
        if field in named:
            raise Invalid(f"columns: {field} is named twice", code="invalid_columns")
        named[field] = column
    return RunColumns(**named)


def heads(top: pl.DataFrame) -> pl.DataFrame:
    """One row a query: qid and the JSON text {"doc_ids": [...], "scores": [...]}, from the
    first results of some queries (qid, rank, doc_id, score), each query's rows together in
    rank order (as ``top_of_results`` and ``rank_in_order`` give them)."""
    return (
        top.group_by("qid", maintain_order=True)
        .agg(pl.col("doc_id").alias("doc_ids"), pl.col("score").alias("scores"))
        .select("qid", pl.struct("doc_ids", "scores").struct.json_encode().alias("ranking"))
    )


def import_run(
    *,
    session: Session,
    golden: GoldenSet,
    name: str,
    path: Path,
    source_name: str,
    fmt: str | None = None,
    order: Order = Order.TREC_EVAL,
    description: str = "",
    keep_depth: int = DEFAULT_KEEP_DEPTH,
    user: User | None = None,
    progress: ProgressFn | None = None,
    kind: str = JUDGED,
    series: str | None = None,
    meta: Mapping[str, str] | None = None,
    columns: RunColumns | None = None,
) -> Run:
    """Import the run file at ``path`` in one transaction: a bad file leaves no rows. Keeps
    the rank of every judged document and the first ``keep_depth`` results, the cluster
    traces of every query the run answers and the judged documents' cluster ranks (cluster
    measures at any k). A ``log`` run (production query-log results, no judgments) keeps
    every query and only its cluster traces. ``progress`` is called with the bytes read as
    the file is read. ``series`` names the configuration the run is one evaluation of, and
    ``meta`` its provenance (app.services.imports.series checks both)."""
    name = check_name(name, what="a run name", max_length=column_width(Run, "name"))
    description = check_description(description)
    series_name = check_series(series, kind=kind)
    provenance = check_meta(meta or {})
    if fmt is not None and fmt not in RUN_FORMATS:
        raise Invalid(f"format must be one of {', '.join(RUN_FORMATS)}", code="invalid_format")
    if kind not in RUN_KINDS:
        raise Invalid(f"kind must be one of {', '.join(RUN_KINDS)}", code="invalid_kind")
    if columns is not None and fmt != "parquet" and _format_of(path) != "parquet":
        # named for a file that has none: said, not ignored
        raise Invalid(
            "columns name a Parquet file's columns; this run is not a Parquet file",
            code="invalid_columns",
        )
    taken = session.exec(
        select(Run).where(Run.golden_set_id == golden.id, Run.name == name)
    ).first()
    if taken is not None:
        raise Conflict(f"golden set {golden.name!r} has a run named {name!r}", code="name_taken")
    source_name = printable_name(source_name)
    row = {
        "golden_set_id": golden.id,
        "name": name,
        "kind": kind,
        "description": description,
        # The uploaded file's name, cut to its column (the end, which has the extension).
        "source_name": source_name[-column_width(Run, "source_name") :],
        "keep_depth": keep_depth if kind != LOG else 0,  # a log run has no review, no head
        "created_by_id": user.id if user else None,
        "series": series_name,
        "meta": provenance,
    }
    # before the digest's thread opens it: a pipe would keep that thread waiting
    check_regular_file(path)
    assert golden.id is not None
    try:
        gold = None if kind == LOG else eval_golden_set(session=session, golden=golden)
        # The file's digest is taken by a thread of its own meanwhile (hashlib lets go of the
        # GIL), not by a pass after the parse.
        with _sha256_meanwhile(path) as digest:
            for attempt in range(1, ATTEMPTS + 1):
                # the clustering first, then the corpus's cluster ids it names
                clustering = clustering_now(session=session, golden_set_id=golden.id)
                corpus = corpus_source(
                    session=session, golden=golden, clustering_id=clustering.clustering_id
                )
                job = _Import(session, row, path, fmt, order, progress, corpus, clustering)
                job.columns = columns
                job.digest = digest
                try:
                    if gold is None:
                        job.log_run()
                    else:
                        job.judged_run(gold)
                except _ClustersChanged:
                    if attempt < ATTEMPTS:
                        continue
                    raise Conflict(
                        f"the clusters of golden set {golden.name!r} changed while the run was "
                        f"read, {ATTEMPTS} times (a detector run applied or cluster ids "
                        "imported meanwhile): nothing was imported; import the run again",
                        code="clusters_changed",
                    ) from None
                break
    except InputError as error:
        raise bad_input(error, {str(path): source_name}) from None
    assert job.run is not None
    session.refresh(job.run)
    return job.run


class _Import:
    """One import: what it reads, and the run row it writes."""

    def __init__(
        self,
        session: Session,
        row: dict[str, Any],
        path: Path,
        fmt: str | None,
        order: Order,
        progress: ProgressFn | None,
        corpus: CorpusSource,
        clustering: ClusteringNow,
    ) -> None:
        self.session, self.row, self.path = session, row, path
        self.fmt, self.order, self.progress, self.corpus = fmt, order, progress, corpus
        self.run: Run | None = None
        self.digest: Callable[[], str] = lambda: sha256_of(path)
        #: the clustering the corpus carried when it was read (checked before the commit)
        self.clustering = clustering
        #: the detector run whose clusters the corpus carries (the traces name it)
        self.detector_run_id: int | None = clustering.detector_run_id
        #: a Parquet file's columns of each field (None: their own names)
        self.columns: RunColumns | None = None

    def judged_run(self, gold: Judgments) -> None:
        """Rank and store a judged run: the heads copied while the file is read on
        PostgreSQL, written after it on SQLite, or when the corpus is asked about the run's
        documents (its clusters or text: the whole file is read; nothing may use the
        connection while a COPY holds it)."""
        session = self.session
        if session.get_bind().dialect.name != "postgresql" or self.corpus.matters:
            ranked, ranking_heads = load_run_heads(
                self.path,
                gold,
                name=self.row["name"],
                keep_depth=self.row["keep_depth"],
                shape=heads,
                order=self.order,
                fmt=self.fmt,
                progress=self.progress,
                id_limits=ID_LIMITS,
                corpus=self.corpus,
                columns=self.columns,
            )
            with writing(session):
                run_id = self._add_run(ranked.report, ranked.order.value)
                bulk_insert(session, RunHead, ranking_heads.select(run_id, "qid", "ranking"))
                self._store(ranked, run_id)
                self._same_clustering()
            return
        try:
            self._copied(gold, streamed=True)
        except HeadsSent:  # rolled back: the whole file is read, then copied
            self._copied(gold, streamed=False)

    def _copied(self, gold: Judgments, *, streamed: bool) -> None:
        """The PostgreSQL way: the run row first, its heads copied as the file is read."""
        session = self.session
        with writing(session):
            _lz4_toast(session)
            run_id = self._add_run(None, self.order.value)
            with copy_rows(session, RunHead, ["run_id", "qid", "ranking"]) as copy:
                ranked = stream_run_heads(
                    self.path,
                    gold,
                    name=self.row["name"],
                    keep_depth=self.row["keep_depth"],
                    # shaped by the ranking threads, written in this one
                    shape=lambda top: heads(top).select(run_id, "qid", "ranking"),
                    sink=copy,
                    order=self.order,
                    fmt=self.fmt,
                    progress=self.progress,
                    id_limits=ID_LIMITS,
                    corpus=self.corpus,
                    streamed=streamed,
                    columns=self.columns,
                )
            self._fill(ranked.report, ranked.order.value)
            self._store(ranked, run_id)
            self._same_clustering()

    def log_run(self) -> None:
        """A log run: every query kept, judged or not; only its cluster traces are stored,
        written block by block of whole queries as the file is read (a log of any length in
        bounded memory: app.eval.cluster_stream), or from the whole file when its queries'
        lines are not together."""
        session = self.session
        with writing(session):
            run_id = self._add_run(None, self.order.value)
            try:
                report, totals = stream_log_traces(
                    self.path,
                    self.corpus,
                    sink=lambda rows: store_query_traces(session, rows.select(run_id, pl.all())),
                    order=self.order,
                    fmt=self.fmt,
                    columns=self.columns,
                    progress=self.progress,
                    id_limits=ID_LIMITS,
                )
            except (WholeFile, QueriesNotContiguous):
                session.execute(
                    delete(RunClusterQuery).where(col(RunClusterQuery.run_id) == self._id())
                )
                report, traces = load_log_traces(
                    self.path,
                    self.corpus,
                    order=self.order,
                    fmt=self.fmt,
                    progress=self.progress,
                    id_limits=ID_LIMITS,
                    columns=self.columns,
                )
                self._fill(report, report.order)
                store_traces(
                    session=session,
                    run_id=self._id(),
                    traces=traces,
                    detector_run_id=self.detector_run_id,
                    clustering_id=self.clustering.clustering_id,
                )
                self._same_clustering()
                return
            self._fill(report, report.order)
            store_totals(
                session=session,
                run_id=self._id(),
                totals=totals,
                cluster_ranks=False,
                detector_run_id=self.detector_run_id,
                clustering_id=self.clustering.clustering_id,
            )
            self._same_clustering()

    def _same_clustering(self) -> None:
        """Last in the import's transaction: the golden set's row ``FOR SHARE`` (a write to
        its clusters in flight is waited for; one after waits for this commit and measures
        the run again), and its clustering read again under it; _ClustersChanged (rolling
        back) when it is not the one the run's figures were computed from."""
        golden_set_id = self.row["golden_set_id"]
        self.session.flush()
        locks.golden_set_for_cluster_figures(self.session.connection(), golden_set_id=golden_set_id)
        if clustering_now(session=self.session, golden_set_id=golden_set_id) != self.clustering:
            raise _ClustersChanged

    def _add_run(self, report: RunReport | None, order: str) -> pl.Expr:
        """Insert the run row, with its ``report`` or to be filled from one; its id as a
        column. A new row each time: a rolled back attempt's row is gone with it."""
        self.run = Run(**self.row, sha256="", format="", order=order, lines=0, queries=0, report={})
        if report is not None:
            self._fill(report, order)
        self.session.add(self.run)
        self.session.flush()
        return pl.lit(self._id(), dtype=pl.Int64).alias("run_id")

    def _id(self) -> int:
        assert self.run is not None
        assert self.run.id is not None
        return self.run.id

    def _fill(self, report: RunReport, order: str) -> None:
        """The run row's fields from the import ``report``."""
        run = self.run
        assert run is not None
        run.report = report.as_dict() | {"source": run.source_name}
        run.format, run.order, run.lines, run.queries = (
            report.format,
            order,
            report.lines,
            report.queries,
        )
        run.sha256 = self.digest()

    def _store(self, ranked: RankedRun, run_id: pl.Expr) -> None:
        """The rows of a judged run but its heads."""
        session = self.session
        bulk_insert(
            session,
            RunQuery,
            pl.DataFrame(
                {"qid": list(ranked.retrieved), "retrieved": list(ranked.retrieved.values())},
                schema={"qid": pl.String, "retrieved": pl.Int64},
            ).select(run_id, pl.all()),
        )
        bulk_insert(
            session,
            RunJudged,
            ranked.judged.select(run_id, "qid", "doc_id", pl.col("rank").cast(pl.Int64)),
        )
        assert ranked.traces is not None  # asked for with the corpus
        store_traces(
            session=session,
            run_id=self._id(),
            traces=ranked.traces,
            detector_run_id=self.detector_run_id,
            clustering_id=self.clustering.clustering_id,
        )


def _lz4_toast(session: Session) -> None:
    """Where the server has it, lz4 compresses the heads for the rest of the transaction:
    a head is some kilobytes of JSON, stored compressed; pglz, the default, took most of the
    server's time of the COPY (about 0.5 s of 0.6 s for 7,000 heads of 200 results; lz4
    about 0.2 s, for a tenth more room). The values read back the same."""
    connection = session.connection()
    has_lz4 = connection.execute(
        text(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
    ).scalar()
    if has_lz4:
        connection.execute(text("SET LOCAL default_toast_compression = 'lz4'"))


@contextmanager
def _sha256_meanwhile(path: Path) -> Iterator[Callable[[], str]]:
    """The file's SHA-256 taken by a thread while the block runs: the callable yielded waits
    for it. Leaving the block waits for the thread, however the block ends."""
    found: list[str] = []
    failed: list[BaseException] = []

    def take() -> None:
        try:
            found.append(sha256_of(path))
        except BaseException as error:  # raised by the caller
            failed.append(error)

    thread = threading.Thread(target=take, name="run-sha256", daemon=True)
    thread.start()

    def digest() -> str:
        thread.join()
        if failed:
            raise failed[0]
        return found[0]

    try:
        yield digest
    finally:
        thread.join()
