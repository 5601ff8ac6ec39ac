"""A file is read by its name, literally: polars takes ``*``, ``?`` and ``[...]`` in a path as a
pattern, so ``run[1].parquet`` would be read as ``run1.parquet`` (another file, without a
word), and ``run*.parquet`` as several. Every reader of a user's file is tried with a name
that is also a pattern matching a different file beside it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from app.eval.cluster_ids import read_cluster_ids
from app.eval.conventions import Order
from app.eval.parquet import RunColumns, read_parquet_run
from app.eval.profile_rows import looks_like_profile, read_profile_rows
from app.eval.sources import load_log_run

#: names that are patterns matching ``decoy`` (and not the file itself, for the last two)
NAMES = ["run[1]", "run*", "run?"]


def _run(path: Path, queries: int) -> None:
    pl.DataFrame(
        {
            "qid": [f"q{i}" for i in range(queries)],
            "doc_id": [f"d{i}" for i in range(queries)],
            "score": [1.0] * queries,
        }
    ).write_parquet(path)


def _profile(path: Path, queries: int) -> pl.DataFrame:
    frame = pl.DataFrame(
        {
            "qid": [f"q{i}" for i in range(queries)],
            "k": [10] * queries,
            "distinct_clusters": [10] * queries,
            "results": [10] * queries,
            "clustered": [0] * queries,
        }
    )
    if path.suffix == ".parquet":
        frame.write_parquet(path)
    else:
        frame.write_csv(path)
    return frame


@pytest.mark.parametrize("name", NAMES)
def test_a_parquet_run_is_read_by_its_own_name(tmp_path: Path, name: str) -> None:
    _run(tmp_path / f"{name}.parquet", 2)
    _run(tmp_path / "run1.parquet", 5)  # the decoy the name matches as a pattern
    frame = read_parquet_run(tmp_path / f"{name}.parquet", RunColumns())
    assert frame.get_column("qid").to_list() == ["q0", "q1"]
    log = load_log_run(tmp_path / f"{name}.parquet", depth=10, order=Order.TREC_EVAL)
    assert log.get_column("qid").unique().sort().to_list() == ["q0", "q1"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_a_profile_is_read_by_its_own_name(tmp_path: Path, name: str, suffix: str) -> None:
    _profile(tmp_path / f"{name}{suffix}", 2)
    _profile(tmp_path / f"run1{suffix}", 5)
    assert looks_like_profile(tmp_path / f"{name}{suffix}")
    assert read_profile_rows(tmp_path / f"{name}{suffix}").rows == 2


@pytest.mark.parametrize("name", NAMES)
def test_cluster_ids_are_read_by_their_own_name(tmp_path: Path, name: str) -> None:
    def ids(path: Path, n: int) -> None:
        pl.DataFrame(
            {"doc_id": [f"d{i}" for i in range(n)], "cluster_id": ["c"] * n}
        ).write_parquet(path)

    ids(tmp_path / f"{name}.parquet", 2)
    ids(tmp_path / "run1.parquet", 5)
    assert read_cluster_ids(tmp_path / f"{name}.parquet") == {"d0": "c", "d1": "c"}


@pytest.mark.parametrize(
    "read",
    [
        lambda p: read_parquet_run(p, RunColumns()),
        read_cluster_ids,
        read_profile_rows,
    ],
    ids=["run", "cluster-ids", "profile"],
)
def test_a_name_that_matches_no_file_as_a_pattern_is_still_read(
    tmp_path: Path, read: Callable[[Path], object]
) -> None:
    # alone in its folder, "x[1].parquet" matches nothing as a pattern: polars said "expanded
    # paths were empty"
    path = tmp_path / "x[1].parquet"
    pl.DataFrame(
        {
            "qid": ["q"],
            "doc_id": ["d"],
            "score": [1.0],
            "cluster_id": ["c"],
            "k": [10],
            "distinct_clusters": [10],
            "results": [10],
            "clustered": [0],
        }
    ).write_parquet(path)
    assert read(path) is not None


def test_an_error_in_a_gzip_file_names_the_file_not_its_copy(tmp_path: Path) -> None:
    """A gzip file is read from an inflated copy in a temporary folder: its errors name the
    file given (a service maps that to the uploaded name), never the copy."""
    import gzip

    from app.eval.errors import InputError

    plain = tmp_path / "plain.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(plain)
    packed = tmp_path / "r.parquet.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    with pytest.raises(InputError) as caught:
        load_log_run(packed, depth=10)
    assert caught.value.source == str(packed)
    assert "no column 'qid'" in caught.value.message


def test_a_parquet_file_of_many_repeated_rows_is_refused_as_a_bomb(tmp_path: Path) -> None:
    """Parquet holds many rows of one repeated value in a few bytes (a dictionary, run
    lengths): a file whose rows stand for more text than a gzip file may inflate to is
    refused as gzip's bomb is, by every reader (runs and logs, profiles, cluster ids)."""
    from app.eval.errors import InputError
    from app.eval.textio import DecompressionLimit, decompression_limit

    rows = 20_000
    path = tmp_path / "bomb.parquet"
    pl.DataFrame(
        {
            "qid": ["q"] * rows,
            "doc_id": ["d"] * rows,
            "score": [1.0] * rows,
            "cluster_id": ["c"] * rows,
            "k": [10] * rows,
            "distinct_clusters": [10] * rows,
            "results": [10] * rows,
            "clustered": [0] * rows,
        }
    ).write_parquet(path)
    small = DecompressionLimit(max_ratio=10, ratio_floor=100_000)
    assert rows * 16 > small.allowed(path.stat().st_size)
    readers: list[Callable[[Path], object]] = [
        lambda p: read_parquet_run(p, RunColumns()),
        lambda p: load_log_run(p, depth=10),
        read_cluster_ids,
        read_profile_rows,
    ]
    for read in readers:
        with decompression_limit(small), pytest.raises(InputError) as caught:
            read(path)
        assert "refused as a decompression bomb" in caught.value.message
        assert caught.value.source == str(path)
    # within the usual limit it is read
    assert read_parquet_run(path, RunColumns()).height == rows
