"""docs/sql/unique_clusters.sql, run on DuckDB over Parquet, against the product's own code:
u_q(k), min(k, results) and the clustered results of every query equal what
``rank_every_query`` and ``trace_ranking`` give on the same log, and the profile made of the
SQL's rows (``app.eval.profile_rows``) equals ``cluster_profile`` at the same ks.

The log is generated with every edge: queries with fewer than k results (down to one), tied
scores (broken by doc id descending in byte order: "9" before "10", "é" before "z"), repeated
documents in one query (written after their first, better or equally scored, line, as a log
writes a ranking), documents absent from the corpus, documents without a cluster (none, or an
empty cluster_id), an unclustered document whose id is some cluster's id, and a rank column
that disagrees with the scores (trec_eval order ignores it).
"""

from __future__ import annotations

import gzip
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import duckdb  # a dev dependency: its absence is a broken install, not a skipped test
import polars as pl
import pytest

from app.eval.cluster_profile import ClusterCorpus, cluster_profile, trace_ranking
from app.eval.conventions import MAX_CUTOFF
from app.eval.errors import InputError
from app.eval.profile_rows import (
    PROFILE_COLUMNS,
    looks_like_profile,
    profile_of_rows,
    read_profile_rows,
)
from app.eval.sources import load_log_run

SQL = Path(__file__).resolve().parents[2] / "docs" / "sql" / "unique_clusters.sql"
KS = (1, 3, 5, 10, 20)


def make_log(seed: int = 29) -> tuple[list[tuple[str, str, float, int]], dict[str, str | None]]:
    """The log's lines (qid, doc_id, score, rank column) in file order, and the corpus
    (doc_id -> cluster_id, None or '' for none)."""
    rng = random.Random(seed)
    corpus: dict[str, str | None] = {}
    for i in range(150):
        doc = f"d{i}"
        corpus[doc] = rng.choice([None, "", *(f"c{j}" for j in range(20))])
    corpus["c3"] = None  # an unclustered document named like cluster c3
    for doc in ("9", "10", "é", "z"):
        corpus[doc] = "c1"
    lines: list[tuple[str, str, float, int]] = []
    for q in range(60):
        qid = f"q{q}"
        n = rng.choice([1, 2, 3, 4, 6, 9, 15, 25, 40])
        docs = [rng.choice([*corpus, "absent1", "absent2", "absent3"]) for _ in range(n)]
        if q % 7 == 0:
            docs += ["9", "10", "é", "z"]  # tied below
        scores = sorted((rng.choice([5.0, 4.0, 3.0, rng.random()]) for _ in docs), reverse=True)
        if q % 7 == 0:
            scores[-4:] = [0.0] * 4
        ranking = list(zip(docs, scores, strict=True))
        written: list[tuple[str, float]] = []
        for doc, score in ranking:
            written.append((doc, score))
            if rng.random() < 0.15:  # a repeat of an earlier document, scored no better
                earlier, earlier_score = rng.choice(written)
                written.append((earlier, min(score, earlier_score)))
        for doc, score in written:
            lines.append((qid, doc, score, rng.randint(1, 1000)))  # a rank column to ignore
    return lines, corpus


def run_sql(
    results: Path, documents: Path, ks: tuple[int, ...], *, sql: str | None = None
) -> pl.DataFrame:
    """The SQL file's text (unchanged unless ``sql`` is given), on DuckDB with the tables as
    views over Parquet."""
    connection = duckdb.connect()
    connection.execute(f"CREATE VIEW results AS SELECT * FROM read_parquet('{results}')")
    connection.execute(f"CREATE VIEW documents AS SELECT * FROM read_parquet('{documents}')")
    values = ", ".join(f"({k})" for k in ks)
    connection.execute(f"CREATE VIEW ks AS SELECT * FROM (VALUES {values}) AS t(k)")
    relation = connection.execute(sql or SQL.read_text())
    names = [d[0] for d in relation.description]
    frame = pl.DataFrame(relation.fetchall(), schema=names, orient="row")
    connection.close()
    return frame


@dataclass(frozen=True)
class Written:
    tmp: Path
    #: the log as a TREC run, for the product's reader
    trec: Path
    #: the SQL's output on the Parquet copy of the log
    sql: pl.DataFrame
    clusters: dict[str, str]
    lines: list[tuple[str, str, float, int]]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    tmp = tmp_path_factory.mktemp("sql")
    lines, corpus = make_log()
    results = tmp / "results.parquet"
    pl.DataFrame(
        lines,
        schema={"qid": pl.String, "doc_id": pl.String, "score": pl.Float64, "rank": pl.Int64},
        orient="row",
    ).write_parquet(results)
    documents = tmp / "documents.parquet"
    pl.DataFrame(
        {"doc_id": list(corpus), "cluster_id": list(corpus.values())},
        schema={"doc_id": pl.String, "cluster_id": pl.String},
    ).write_parquet(documents)
    trec = tmp / "log.trec"
    trec.write_text("".join(f"{q} Q0 {d} {r} {s!r} sql\n" for q, d, s, r in lines))
    sql = run_sql(results, documents, KS)
    clusters = {d: c for d, c in corpus.items() if c}
    return Written(tmp=tmp, trec=trec, sql=sql, clusters=clusters, lines=lines)


def test_the_log_has_every_edge(written: Written) -> None:
    per_query: dict[str, list[str]] = defaultdict(list)
    for qid, doc, _, _ in written.lines:
        per_query[qid].append(doc)
    assert any(len(set(d)) < KS[-1] for d in per_query.values())  # short queries
    assert any(len(set(d)) == 1 for d in per_query.values())
    assert any(len(set(d)) < len(d) for d in per_query.values())  # repeated documents
    docs = {d for ds in per_query.values() for d in ds}
    clusters = written.clusters
    assert {"absent1", "c3", "9", "10"} <= docs
    assert any(d not in clusters for d in docs if d.startswith("d"))  # unclustered


def test_sql_equals_the_product_per_query(written: Written) -> None:
    sql, trec, clusters = written.sql, written.trec, written.clusters
    assert tuple(sql.columns) == PROFILE_COLUMNS
    expected = _per_query(trec, clusters)  # the product's ranking and traces
    got = {
        (qid, k): (distinct, results, clustered)
        for qid, k, distinct, results, clustered in sql.iter_rows()
    }
    assert got == expected
    assert len(got) == 60 * len(KS)
    # The ties and the repeats make a difference somewhere: the check is not vacuous.
    assert any(d < r for d, r, _ in got.values())
    assert any(c < r for _, r, c in got.values())


def test_the_profile_of_the_sql_rows_equals_cluster_profile(written: Written) -> None:
    sql, trec, clusters, tmp = written.sql, written.trec, written.clusters, written.tmp
    top = load_log_run(trec, depth=KS[-1])
    for fmt in ("csv", "csv.gz", "parquet"):
        path = tmp / f"profile.{fmt}"
        if fmt == "parquet":
            sql.write_parquet(path)
        else:
            text = "\ufeff" + sql.write_csv()  # a byte-order mark, as spreadsheets write
            path.write_bytes(gzip.compress(text.encode()) if fmt == "csv.gz" else text.encode())
        assert looks_like_profile(path)
        rows = read_profile_rows(path)
        assert (rows.ks, rows.rows, rows.format) == (KS, sql.height, fmt.removesuffix(".gz"))
        for ks in (KS, (3,), (1, 20), (5, 10)):
            for threshold in (0, 2, 4):
                assert profile_of_rows(rows, ks=ks, threshold=threshold) == cluster_profile(
                    top, clusters, ks=ks, threshold=threshold
                ), (fmt, ks, threshold)
    assert not looks_like_profile(trec)


def test_a_k_the_rows_do_not_hold_is_refused(written: Written) -> None:
    path = written.tmp / "refused.csv"
    written.sql.write_csv(path)
    with pytest.raises(ValueError, match=r"k = 2, 30 .*exact at k = 1, 3, 5, 10, 20 only"):
        profile_of_rows(read_profile_rows(path), ks=(2, 3, 30))


HEADER = "qid,k,distinct_clusters,results,clustered\n"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("qid,k,results,clustered\nq1,10,3,2\n", 1, "missing column distinct_clusters"),
        (HEADER + "q1,10,3,3,2\nq1,ten,3,3,2\n", 3, "k 'ten' is not an integer"),
        (HEADER + "q1,10.5,3,3,2\n", 2, "k '10.5' is not an integer"),
        (HEADER + "q1,10,4,3,2\n", 2, "distinct_clusters must be at most results"),
        (HEADER + "q1,10,3,11,2\n", 2, "results must be at most k"),
        (HEADER + "q1,10,1,3,1\n", 2, "at most clustered - 1"),
        (HEADER + "q1,10,3,3,4\n", 2, "clustered must be between 0 and results"),
        (HEADER + "q1,10,3,3,2\nq2,10,1,1,1\nq1,10,3,3,2\n", 4, "a second row for query 'q1'"),
        (HEADER + "q1,10,3,3,2\nq1,20,3,3,2\nq2,10,1,1,1\n", 4, "query 'q2' has no row at k=20"),
        (HEADER + "q1,10,3,5,3\nq1,20,4,7,4\n", 3, "results grew after a smaller k"),
        (HEADER + "q1,10,6,10,5\nq1,20,5,12,8\n", 3, "distinct_clusters shrank"),
        (HEADER + "q1,10,8,10,5\nq1,20,10,12,4\n", 3, "clustered shrank"),
        (HEADER + "q1,10,8,10,5\nq1,20,8,12,6\n", 3, "the repeats grew by more than"),
        (HEADER + ",10,3,3,2\n", 2, "empty qid"),
        ("qid,k,k,distinct_clusters,results,clustered\nq1,10,20,3,3,2\n", 1, "column 'k' twice"),
        ("qid,K,k,distinct_clusters,results,clustered\nq1,10,20,3,3,2\n", 1, "column 'k' twice"),
        (HEADER + "q1,10,3,3,2\nq\x002,10,3,3,2\n", 3, "has a blank or a control character"),
        (HEADER + "q 1,10,3,3,2\n", 2, "has a blank or a control character"),
        (HEADER + "q\u00a01,10,3,3,2\n", 2, "has a blank or a control character"),
        (HEADER, None, "the profile is empty"),
    ],
)
def test_bad_rows_are_refused_naming_the_line(
    tmp_path: Path, text: str, line: int | None, words: str
) -> None:
    path = tmp_path / "profile.csv"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        read_profile_rows(path, source="profile.csv")
    assert caught.value.line == line
    assert caught.value.source == "profile.csv"
    assert words in caught.value.message


def test_a_parquet_row_is_named_by_its_number(tmp_path: Path) -> None:
    path = tmp_path / "profile.parquet"
    pl.DataFrame(
        {"qid": ["a", "b"], "k": [5, 5], "distinct_clusters": [2, 4], "results": [3, 3]}
        | {"clustered": [2, 3]}
    ).write_parquet(path)
    with pytest.raises(InputError, match=r"row 2: distinct_clusters must be at most results"):
        read_profile_rows(path)


def _per_query(trec: Path, clusters: dict[str, str]) -> dict[tuple[str, int], tuple[int, ...]]:
    """The product's (distinct, results, clustered) of every query at every k."""
    ranked = load_log_run(trec, depth=MAX_CUTOFF)
    returned = {q: int(n) for q, n in ranked.group_by("qid").len().iter_rows()}
    traces = trace_ranking(ranked, returned, ClusterCorpus.of(clusters))
    ordered = {
        q: [d for _, d in sorted(zip(g["rank"], g["doc_id"], strict=True))]
        for (q,), g in ranked.group_by("qid")
    }
    return {
        (qid, k): (
            trace.distinct(k),
            min(k, trace.returned),
            sum(1 for d in ordered[qid][:k] if d in clusters),
        )
        for qid, trace in traces.queries.items()
        for k in KS
    }


def test_the_line_variant_of_the_readme_keeps_the_first_line(tmp_path: Path) -> None:
    """docs/sql/README.md: with a ``line`` column, ordering the dedup by it keeps
    misstriage's first occurrence even where a repeat scores higher than its first line
    (where the query as written, keeping the best-ranked occurrence, differs)."""
    lines, corpus = make_log(seed=7)
    rng = random.Random(7)
    shuffled = [
        (q, d, s + (rng.choice([0.0, 3.0]) if i % 5 == 0 else 0.0), r)
        for i, (q, d, s, r) in enumerate(lines)
    ]
    results = tmp_path / "results.parquet"
    pl.DataFrame(
        [(*row, i) for i, row in enumerate(shuffled)],
        schema={"qid": pl.String, "doc_id": pl.String, "score": pl.Float64, "rank": pl.Int64}
        | {"line": pl.Int64},
        orient="row",
    ).write_parquet(results)
    documents = tmp_path / "documents.parquet"
    pl.DataFrame(
        {"doc_id": list(corpus), "cluster_id": list(corpus.values())},
        schema={"doc_id": pl.String, "cluster_id": pl.String},
    ).write_parquet(documents)
    trec = tmp_path / "log.trec"
    trec.write_text("".join(f"{q} Q0 {d} {r} {s!r} sql\n" for q, d, s, r in shuffled))
    clusters = {d: c for d, c in corpus.items() if c}
    expected = _per_query(trec, clusters)

    def rows(sql: str) -> dict[tuple[str, int], tuple[int, ...]]:
        frame = run_sql(results, documents, KS, sql=sql)
        return {(q, k): (d, n, c) for q, k, d, n, c in frame.iter_rows()}

    as_written = SQL.read_text()
    by_line = as_written.replace("ORDER BY CAST(score AS DOUBLE) DESC NULLS LAST", "ORDER BY line")
    assert by_line != as_written
    assert rows(by_line) == expected
    assert rows(as_written) != expected  # the log has repeats scored above their first line


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        ("qid", [["q1"]], "List(String)"),
        ("k", [{"a": 10}], "Struct"),
        ("results", [b"10"], "Binary"),
    ],
)
def test_a_parquet_column_of_lists_or_structs_is_refused_by_name(
    tmp_path: Path, column: str, value: list[object], said: str
) -> None:
    """A profile's columns hold text or numbers: a list, a struct or bytes is refused naming
    the column (it was a cast that failed: a 500 in the service)."""
    row: dict[str, list[object]] = {
        "qid": ["q1"],
        "k": [10],
        "distinct_clusters": [5],
        "results": [10],
        "clustered": [6],
    }
    row[column] = value
    path = tmp_path / "profile.parquet"
    pl.DataFrame(row).write_parquet(path)
    with pytest.raises(InputError) as caught:
        read_profile_rows(path, source="profile.parquet")
    assert caught.value.source == "profile.parquet"
    assert f"column {column!r} holds" in caught.value.message
    assert said in caught.value.message


def test_a_gzip_parquet_profile_is_read_as_the_plain_one(tmp_path: Path) -> None:
    import gzip

    from app.eval.profile_rows import looks_like_profile

    plain = tmp_path / "profile.parquet"
    pl.DataFrame(
        {
            "qid": ["q1", "q2"],
            "k": [10, 10],
            "distinct_clusters": [5, 10],
            "results": [10, 10],
            "clustered": [6, 0],
        }
    ).write_parquet(plain)
    packed = tmp_path / "profile.parquet.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert looks_like_profile(packed)
    read = read_profile_rows(packed, source="profile.parquet.gz")
    want = read_profile_rows(plain)
    assert (read.rows, read.format, read.ks) == (want.rows, "parquet", want.ks)
    assert read.traces == want.traces


def test_a_parquet_profiles_query_id_is_at_most_as_long_as_a_runs(tmp_path: Path) -> None:
    """A Parquet file holds one long value shared by every row once: a query id past a
    Parquet run's bound is refused at once, naming the row, before any check reads it."""
    from app.eval.parquet import MAX_PARQUET_ID_BYTES

    path = tmp_path / "profile.parquet"
    rows = 2_000
    qids = pl.Series(["q1", "q" * (MAX_PARQUET_ID_BYTES + 1)]).gather([0] + [1] * (rows - 1))
    pl.DataFrame(
        {
            "qid": qids,
            "k": [10] * rows,
            "distinct_clusters": [10] * rows,
            "results": [10] * rows,
            "clustered": [0] * rows,
        }
    ).write_parquet(path)
    with pytest.raises(InputError) as caught:
        read_profile_rows(path, source="profile.parquet")
    assert caught.value.message.startswith("row 2: a query id longer than 1,200 bytes")
