"""unique-clusters@k from its per-query part computed elsewhere: the output of
docs/sql/unique_clusters.sql (DuckDB, Spark SQL or Trino over a lake's logs), read, checked and
turned into the traces the profile is computed from (``ClusterTraces``).

A file (CSV, plain or gzip, or Parquet) with one row per (query, k) and the columns
``qid, k, distinct_clusters, results, clustered``: u_q(k), min(k, results of q) and the results
among those with a cluster_id. Such rows know the figures at their cutoffs only, so the traces
made of them are exact at those ks and nowhere else (``ProfileRows.ks``):

* a query's ``returned`` is its ``results`` at the largest k (it may have returned more);
* its repeats, results - distinct clusters at each k, are placed at the last ranks of the slots
  each k adds (at k_i, the repeats since k_{i-1} sit at ranks results - new repeats + 1 ..
  results), so that u_q(k) = min(k, returned) - (repeats at rank <= k) holds at every k of the
  file;
* the per-rank totals hold, at rank k_i, the results with a cluster gained since k_{i-1}
  (summed over the queries), so that their sum up to any k of the file is the clustered results
  within it; the cost side (tokens) is not known: none.

What a row must satisfy, or the file is refused naming its line (CSV; a Parquet file's row):
integers, 1 <= k <= MAX_CUTOFF, 1 <= results <= k, 1 <= distinct_clusters <= results,
0 <= clustered <= results, repeats (results - distinct) <= max(clustered - 1, 0) (a repeat is a
clustered result whose cluster came higher); one row per (qid, k) and, for each query, a row at
every k of the file; between a query's neighbouring ks, nothing decreases, results grow only
when the smaller k was filled, and the distinct clusters, the repeats and the clustered results
grow by at most the results added (new repeats by at most the new clustered results).
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from app.eval.cluster_profile import (
    DEFAULT_THRESHOLD,
    ClusterProfile,
    ClusterTraces,
    QueryTrace,
    RankTotals,
    profile_of_traces,
)
from app.eval.conventions import MAX_CUTOFF
from app.eval.errors import InputError, shorten
from app.eval.parquet import (
    FORBIDDEN_IN_ID,
    MAX_PARQUET_ID_BYTES,
    PARQUET_MAGIC,
    check_expansion,
    parquet_schema,
    reason_of,
)
from app.eval.textio import BOM, GZIP_MAGIC, check_regular_file, plain_file

#: The columns of docs/sql/unique_clusters.sql's output, in its order.
PROFILE_COLUMNS = ("qid", "k", "distinct_clusters", "results", "clustered")
_COUNTS = PROFILE_COLUMNS[1:]
#: The most distinct k one file may hold (as many as one request for the profile asks for).
MAX_PROFILE_KS = 20


@dataclass(frozen=True)
class ProfileRows:
    """A checked per-query profile: its traces, exact at ``ks`` only."""

    traces: ClusterTraces
    ks: tuple[int, ...]
    #: data rows read (the header not counted)
    rows: int
    #: "csv" or "parquet"
    format: str


def is_parquet(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(4) == PARQUET_MAGIC


def looks_like_profile(path: Path) -> bool:
    """True when the file has the profile's columns: a Parquet file's schema, or a CSV's
    header line (plain or gzip). Any other file (a run, an unreadable file) is not one, nor
    is a pipe (read here, its first line would be lost to the reader that says it is none)."""
    if not path.is_file():
        return False
    try:
        if is_parquet(path):
            return set(PROFILE_COLUMNS) <= set(parquet_schema(path))
        with path.open("rb") as handle:
            gzipped = handle.read(2) == GZIP_MAGIC
        # The first line alone: a gzip run is not inflated whole to be told from a profile
        # (a gzip Parquet file is: its columns are named at its end).
        with gzip.open(path, "rb") if gzipped else path.open("rb") as handle:
            first = handle.readline(4096)
        if gzipped and first.startswith(PARQUET_MAGIC):
            with plain_file(path) as plain:
                return set(PROFILE_COLUMNS) <= set(parquet_schema(plain))
        header = first.removeprefix(BOM).decode("utf-8", errors="replace")
    except (OSError, EOFError, zlib.error, pl.exceptions.PolarsError, InputError):
        return False
    names = {name.strip().strip('"').lower() for name in header.strip().split(",")}
    return set(PROFILE_COLUMNS) <= names


def _gzip_parquet(path: Path) -> bool:
    """Whether ``path`` is a gzip file whose bytes are Parquet's."""
    with path.open("rb") as handle:
        if handle.read(2) != GZIP_MAGIC:
            return False
    try:
        with gzip.open(path, "rb") as inner:
            return inner.read(4) == PARQUET_MAGIC
    except (OSError, EOFError, zlib.error):
        return False  # the CSV reader words a damaged file


def _parquet_rows(path: Path, name: str) -> pl.DataFrame:
    """A Parquet profile's rows as text, each with its row number (Parquet has no lines);
    an InputError names ``name``."""
    try:
        check_expansion(path)
    except InputError as exc:
        raise InputError(name, exc.line, exc.message) from None
    try:
        frame = pl.read_parquet(path, glob=False)  # literally, as parquet_schema says
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
        message = f"not a readable Parquet file ({reason_of(exc)})"
        raise InputError(name, None, message) from None
    frame = _with_columns(frame, name, where="the Parquet file's columns")
    for column in PROFILE_COLUMNS:  # a value a row of text could hold: no lists, no structs
        dtype = frame.schema[column]
        if not (dtype == pl.String or dtype.is_numeric() or dtype == pl.Categorical):
            raise InputError(name, None, f"column {column!r} holds {dtype}, not text or numbers")
    # a query id as long as a Parquet run's may be: one value shared by every row is held
    # once, and each check below would read it again for each row
    long = frame.with_row_index("row", offset=1).filter(
        pl.col("qid").cast(pl.String).str.len_bytes() > MAX_PARQUET_ID_BYTES
    )
    if long.height:
        located = _Located(name, "parquet")
        raise located.error(
            int(long.item(0, "row")), f"a query id longer than {MAX_PARQUET_ID_BYTES:,} bytes"
        )
    return frame.select(
        *(pl.col(c).cast(pl.String) for c in PROFILE_COLUMNS),
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("line"),
    )


def read_profile_rows(
    path: Path, *, source: str | None = None, max_qid_chars: int | None = None
) -> ProfileRows:
    """Read and check a per-query profile file (see the module's rules); an ``InputError``
    naming ``source`` (default: the path) and the first offending line."""
    name = source or str(path)
    try:
        check_regular_file(path)
    except InputError as exc:
        raise InputError(name, None, exc.message) from None
    if is_parquet(path) or _gzip_parquet(path):
        with plain_file(path) as plain:
            frame = _parquet_rows(plain, name)
        fmt = "parquet"
    else:
        fmt = "csv"
        with plain_file(path) as plain:
            try:
                frame = pl.read_csv(
                    plain, infer_schema=False, truncate_ragged_lines=False, glob=False
                )
            except pl.exceptions.PolarsError as exc:
                message = f"not a readable CSV file ({reason_of(exc)})"
                raise InputError(name, None, message) from None
        named = [c.strip().lower() for c in frame.columns]
        # a name given twice: polars keeps the second as "k_duplicated_0" ("K" and "k" meet
        # here); which one holds the counts is not for the reader to guess
        twice = [
            c
            for c in PROFILE_COLUMNS
            if named.count(c) > 1 or any(n.startswith(f"{c}_duplicated_") for n in named)
        ]
        if twice:
            raise InputError(name, 1, f"the header line names column {twice[0]!r} twice")
        frame = frame.rename(dict(zip(frame.columns, named, strict=True)))
        frame = _with_columns(frame, name, where="the header line")
        frame = frame.select(
            *PROFILE_COLUMNS, pl.int_range(2, pl.len() + 2, dtype=pl.Int64).alias("line")
        )
    if frame.height == 0:
        raise InputError(name, None, "no rows: the profile is empty")
    located = _Located(name, fmt)
    rows = _typed(frame, located, max_qid_chars)
    ks = tuple(int(k) for k in rows.get_column("k").unique().sort())
    if len(ks) > MAX_PROFILE_KS:
        raise InputError(name, None, f"at most {MAX_PROFILE_KS} values of k, got {len(ks)}")
    _check_complete(rows, ks, located)
    stepped = _check_steps(rows, located)
    return ProfileRows(traces=_traces(stepped, ks), ks=ks, rows=frame.height, format=fmt)


class _Located:
    """InputErrors at a CSV line or a Parquet row."""

    def __init__(self, source: str, fmt: str) -> None:
        self.source, self.fmt = source, fmt

    def error(self, line: int, message: str) -> InputError:
        if self.fmt == "csv":
            return InputError(self.source, line, message)
        return InputError(self.source, None, f"row {line}: {message}")

    def at(self, line: int) -> str:
        return f"line {line}" if self.fmt == "csv" else f"row {line}"


def _with_columns(frame: pl.DataFrame, source: str, *, where: str) -> pl.DataFrame:
    missing = [c for c in PROFILE_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            source,
            1 if where == "the header line" else None,
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} in {where} "
            f"(a per-query cluster profile has {', '.join(PROFILE_COLUMNS)}: the output of "
            "docs/sql/unique_clusters.sql)",
        )
    return frame


def _first(frame: pl.DataFrame, bad: pl.Expr) -> dict[str, Any] | None:
    found = frame.filter(bad).head(1)
    return found.row(0, named=True) if found.height else None


def _typed(frame: pl.DataFrame, located: _Located, max_qid_chars: int | None) -> pl.DataFrame:
    """The rows with integer counts, each row checked on its own."""
    qid = pl.col("qid")
    row = _first(frame, qid.is_null() | (qid.str.strip_chars() == ""))
    if row is not None:
        raise located.error(int(row["line"]), "empty qid")
    # as a run's query ids (and a NUL byte, which PostgreSQL refuses in text)
    row = _first(frame, qid.str.contains(FORBIDDEN_IN_ID))
    if row is not None:
        raise located.error(
            int(row["line"]), f"query id {shorten(row['qid'])} has a blank or a control character"
        )
    if max_qid_chars is not None:
        row = _first(frame, qid.str.len_chars() > max_qid_chars)
        if row is not None:
            raise located.error(
                int(row["line"]),
                f"query id {shorten(row['qid'])} is longer than {max_qid_chars} characters",
            )
    typed = frame.with_columns(
        pl.col(c).str.strip_chars().cast(pl.Int64, strict=False).alias(f"_{c}") for c in _COUNTS
    )
    for c in _COUNTS:
        row = _first(typed, pl.col(f"_{c}").is_null())
        if row is not None:
            raise located.error(
                int(row["line"]),
                f"{c} {shorten(row[c])} is not an integer",
            )
    typed = typed.select("qid", "line", *(pl.col(f"_{c}").alias(c) for c in _COUNTS)).with_columns(
        (pl.col("results") - pl.col("distinct_clusters")).alias("repeats")
    )
    k, results, distinct = pl.col("k"), pl.col("results"), pl.col("distinct_clusters")
    clustered, repeats = pl.col("clustered"), pl.col("repeats")
    rules = [
        ((k < 1) | (k > MAX_CUTOFF), f"k must be between 1 and {MAX_CUTOFF:,}"),
        (results < 1, "results must be at least 1 (a query in the output returned something)"),
        (results > k, "results must be at most k (it is min(k, results of the query))"),
        (distinct < 1, "distinct_clusters must be at least 1 (the first result is new)"),
        (distinct > results, "distinct_clusters must be at most results"),
        ((clustered < 0) | (clustered > results), "clustered must be between 0 and results"),
        (
            repeats > pl.max_horizontal(clustered - 1, pl.lit(0)),
            "results - distinct_clusters (the results repeating a cluster seen higher) can "
            "be at most clustered - 1: only results with a cluster repeat one",
        ),
    ]
    for bad, message in rules:
        row = _first(typed, bad)
        if row is not None:
            values = ", ".join(f"{c} {row[c]}" for c in _COUNTS)
            raise located.error(int(row["line"]), f"{message} (got {values})")
    return typed


def _check_complete(rows: pl.DataFrame, ks: tuple[int, ...], located: _Located) -> None:
    """One row per (qid, k), and every query at every k."""
    repeated = rows.filter(pl.len().over("qid", "k") > 1).sort("line")
    if repeated.height:
        first = repeated.head(1).row(0, named=True)
        earlier = repeated.filter(
            (pl.col("qid") == first["qid"]) & (pl.col("k") == first["k"])
        ).get_column("line")
        raise located.error(
            int(earlier[1]),
            f"a second row for query {shorten(first['qid'])} at k={first['k']} (the first is "
            f"{located.at(int(earlier[0]))})",
        )
    short = rows.filter(pl.len().over("qid") < len(ks)).sort("line")
    if short.height:
        first = short.head(1).row(0, named=True)
        has = set(short.filter(pl.col("qid") == first["qid"]).get_column("k").to_list())
        absent = [k for k in ks if k not in has]
        raise located.error(
            int(first["line"]),
            f"query {shorten(first['qid'])} has no row at k={absent[0]} (every query needs a "
            f"row at each k of the file: {', '.join(map(str, ks))})",
        )


def _check_steps(rows: pl.DataFrame, located: _Located) -> pl.DataFrame:
    """Between neighbouring ks of a query: what the next k adds. The rows in (qid, k) order,
    with the added results, repeats and clustered results (``new_*``; at the first k, all)."""
    stepped = rows.sort("qid", "k").with_columns(
        pl.col(c).shift(1, fill_value=0).over("qid").alias(f"prev_{c}")
        for c in ("k", "results", "distinct_clusters", "repeats", "clustered", "line")
    )
    stepped = stepped.with_columns(
        (pl.col(c) - pl.col(f"prev_{c}")).alias(f"new_{c}")
        for c in ("results", "distinct_clusters", "repeats", "clustered")
    )
    new = {c: pl.col(f"new_{c}") for c in ("results", "distinct_clusters", "repeats", "clustered")}
    rules = [
        (new["results"] < 0, "results shrank"),
        (
            (new["results"] > 0) & (pl.col("prev_results") < pl.col("prev_k")),
            "results grew after a smaller k was not filled (a query with fewer results than "
            "k has no more at a larger k)",
        ),
        (new["distinct_clusters"] < 0, "distinct_clusters shrank"),
        (new["repeats"] < 0, "results - distinct_clusters (the repeats) shrank"),
        (new["clustered"] < 0, "clustered shrank"),
        (new["clustered"] > new["results"], "clustered grew by more than the results added"),
        (new["repeats"] > new["clustered"], "the repeats grew by more than the clustered added"),
    ]
    later = stepped.filter(pl.col("prev_k") > 0)
    for bad, message in rules:
        row = _first(later, bad)
        if row is not None:
            raise located.error(
                int(row["line"]),
                f"query {shorten(row['qid'])} at k={row['k']} disagrees with its row at "
                f"k={row['prev_k']} ({located.at(int(row['prev_line']))}): {message} "
                f"(results {row['prev_results']} -> {row['results']}, distinct_clusters "
                f"{row['prev_distinct_clusters']} -> {row['distinct_clusters']}, clustered "
                f"{row['prev_clustered']} -> {row['clustered']})",
            )
    return stepped


def _traces(stepped: pl.DataFrame, ks: tuple[int, ...]) -> ClusterTraces:
    """Traces exact at ``ks`` (see the module's docstring)."""
    deepest = stepped.filter(pl.col("k") == ks[-1]).select("qid", "results")
    placed = (
        stepped.filter(pl.col("new_repeats") > 0)
        .select(
            "qid",
            pl.int_ranges(
                pl.col("results") - pl.col("new_repeats") + 1, pl.col("results") + 1
            ).alias("rank"),
        )
        .explode("rank")
        .group_by("qid")
        .agg(pl.col("rank").sort())
    )
    repeats = {qid: tuple(int(r) for r in ranks) for qid, ranks in placed.iter_rows()}
    queries = {str(qid): QueryTrace(int(n), repeats.get(qid, ())) for qid, n in deepest.iter_rows()}
    gained = stepped.group_by("k").agg(pl.col("new_clustered").sum()).sort("k")
    clustered = [0] * ks[-1]
    for k, n in gained.iter_rows():
        clustered[int(k) - 1] = int(n)
    while clustered and clustered[-1] == 0:
        clustered.pop()
    return ClusterTraces(queries, RankTotals(clustered=clustered))


def unknown_ks(ks: Sequence[int], known: Sequence[int]) -> str | None:
    """The message refusing the ks of ``ks`` a profile exact at ``known`` does not hold (None:
    every one is known)."""
    bad = sorted(set(ks) - set(known))
    if not bad:
        return None
    return (
        f"k = {', '.join(map(str, bad))} cannot be measured: the run's clusters were imported "
        f"as a per-query profile, exact at k = {', '.join(map(str, known))} only"
    )


def profile_of_rows(
    rows: ProfileRows,
    *,
    ks: Sequence[int] | None = None,
    threshold: int = DEFAULT_THRESHOLD,
) -> ClusterProfile:
    """The cluster profile of checked rows at ``ks`` (default: every k they hold); a
    ``ValueError`` for a k they do not hold."""
    wanted = rows.ks if ks is None else tuple(ks)
    refused = unknown_ks(wanted, rows.ks)
    if refused is not None:
        raise ValueError(refused)
    return profile_of_traces(rows.traces, ks=wanted, threshold=threshold)
