"""Cluster-id side files: every format and every tool's column names give the same mapping;
every bad file is refused naming its line (or its Parquet row)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.eval import InputError
from app.eval.cluster_ids import (
    CLUSTER_COLUMNS,
    DOC_ID_COLUMNS,
    cluster_members,
    read_cluster_ids,
)
from tests.support.service import WriteFile

EXPECTED = {"d1": "c1", "d2": "c1", "d3": "c2"}
CSV = "doc_id,cluster_id\nd1,c1\nd2,c1\nd3,c2\n"


def error_of(path: Path, **kwargs: int) -> InputError:
    with pytest.raises(InputError) as caught:
        read_cluster_ids(path, **kwargs)
    return caught.value


def assert_error(path: Path, line: int | None, text: str, **kwargs: int) -> InputError:
    error = error_of(path, **kwargs)
    assert error.source == str(path)
    assert error.line == line
    assert text in error.message, error.message
    where = f"{path}, line {line}" if line is not None else str(path)
    assert str(error).startswith(f"{where}: ")
    return error


# --- formats ---


@pytest.mark.parametrize(
    ("name", "content", "gz"),
    [
        pytest.param("ids.csv", CSV, False, id="csv"),
        pytest.param("ids.csv.gz", CSV, True, id="csv-gz"),
        pytest.param("ids.tsv", CSV.replace(",", "\t"), False, id="tsv"),
        pytest.param("ids.tsv.gz", CSV.replace(",", "\t"), True, id="tsv-gz"),
        pytest.param("ids.txt", CSV, False, id="sniffed-csv"),
        pytest.param("ids", CSV.replace(",", "\t"), False, id="sniffed-tsv"),
        pytest.param("ids.gz", CSV.replace(",", "\t"), True, id="sniffed-tsv-gz"),
        pytest.param("ids.csv", CSV.replace("\n", "\r\n"), False, id="crlf"),
        pytest.param("ids.csv", "\ufeff" + CSV, False, id="bom"),
        pytest.param("ids.csv", "\n" + CSV.replace("\n", "\n\n"), False, id="blank-lines"),
        pytest.param("ids.csv", CSV.rstrip("\n"), False, id="no-final-newline"),
        pytest.param(
            "ids.csv",
            'doc_id , cluster_id\n"d1", c1\nd2,"c1"\n d3 ,c2\n',
            False,
            id="quoted-padded",
        ),
        pytest.param(
            "ids.csv",
            "text,doc_id,score,cluster_id\nx,d1,1,c1\ny,d2,2,c1\nz,d3,3,c2\n",
            False,
            id="extra-columns",
        ),
    ],
)
def test_delimited_spellings_read_the_same(
    write_file: WriteFile, name: str, content: str, gz: bool
) -> None:
    assert read_cluster_ids(write_file(name, content, gz=gz)) == EXPECTED


JSONL = "".join(json.dumps({"doc_id": d, "cluster_id": c}) + "\n" for d, c in EXPECTED.items())


@pytest.mark.parametrize(
    ("name", "gz"),
    [
        pytest.param("ids.jsonl", False, id="jsonl"),
        pytest.param("ids.jsonl.gz", True, id="jsonl-gz"),
        pytest.param("ids.json", False, id="sniffed"),
        pytest.param("ids.gz", True, id="sniffed-gz"),
    ],
)
def test_jsonl_reads(write_file: WriteFile, name: str, gz: bool) -> None:
    assert read_cluster_ids(write_file(name, "\n" + JSONL + "\n", gz=gz)) == EXPECTED


@pytest.mark.parametrize("name", ["ids.parquet", "ids.bin"], ids=["by-extension", "sniffed"])
def test_parquet_reads(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    pl.DataFrame(
        {
            "doc_id": list(EXPECTED),
            "text": ["a", "b", "c"],
            "cluster_id": list(EXPECTED.values()),
        }
    ).write_parquet(path)
    assert read_cluster_ids(path) == EXPECTED


@pytest.mark.parametrize("dtype", [pl.Int64, pl.UInt64, pl.Int32, pl.UInt8])
def test_parquet_int_ids_become_decimal_strings(tmp_path: Path, dtype: pl.DataType) -> None:
    path = tmp_path / "ids.parquet"
    pl.DataFrame(
        {"_curator_dedup_id": [0, 7, 100], "_duplicate_group_id": [3, 3, None]},
        schema={"_curator_dedup_id": dtype, "_duplicate_group_id": dtype},
    ).write_parquet(path)
    assert read_cluster_ids(path) == {"0": "3", "7": "3"}


def test_int_ids_in_jsonl_become_strings(write_file: WriteFile) -> None:
    path = write_file("ids.jsonl", '{"id": 12, "group": 0}\n{"id": -3, "group": 0}\n')
    assert read_cluster_ids(path) == {"12": "0", "-3": "0"}


# --- aliases ---


@pytest.mark.parametrize("doc_column", DOC_ID_COLUMNS)
@pytest.mark.parametrize("cluster_column", CLUSTER_COLUMNS)
def test_every_alias_is_read_in_every_format(
    tmp_path: Path, doc_column: str, cluster_column: str
) -> None:
    pairs = {"d1": "c1", "d2": "c1"}
    text = tmp_path / "ids.csv"
    text.write_text(
        f"{doc_column},{cluster_column}\n" + "".join(f"{d},{c}\n" for d, c in pairs.items())
    )
    lines = tmp_path / "ids.jsonl"
    lines.write_text(
        "".join(json.dumps({doc_column: d, cluster_column: c}) + "\n" for d, c in pairs.items())
    )
    table = tmp_path / "ids.parquet"
    pl.DataFrame({doc_column: list(pairs), cluster_column: list(pairs.values())}).write_parquet(
        table
    )
    for path in (text, lines, table):
        assert read_cluster_ids(path) == pairs, path


def test_the_first_alias_in_order_wins(write_file: WriteFile) -> None:
    # NeMo Curator keeps the user's id next to its own _curator_dedup_id: the user's is used
    path = write_file("ids.csv", "_curator_dedup_id,id,group,cluster_id\n0,d1,5,c1\n")
    assert read_cluster_ids(path) == {"d1": "c1"}


def test_datatrove_nested_metadata(write_file: WriteFile) -> None:
    # datatrove's JsonlWriter keeps Document.metadata nested, minhash_cluster only where set
    lines = [
        {"text": "a", "id": "d1", "metadata": {"minhash_cluster": 0, "file_path": "x"}},
        {"text": "b", "id": "d2", "metadata": {"file_path": "x"}},
        {"text": "c", "id": "d3", "metadata": {"minhash_cluster": 0}},
    ]
    path = write_file("out.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    assert read_cluster_ids(path) == {"d1": "0", "d3": "0"}


# --- what is kept and left out ---


@pytest.mark.parametrize("empty", ["", " ", "   "])
def test_an_empty_cluster_id_leaves_the_document_out(write_file: WriteFile, empty: str) -> None:
    path = write_file("ids.tsv", f"doc_id\tcluster_id\nd1\tc1\nd2\t{empty}\n")
    assert read_cluster_ids(path) == {"d1": "c1"}


@pytest.mark.parametrize("empty", ['""', '"  "', "null"])
def test_an_empty_or_null_cluster_id_in_jsonl(write_file: WriteFile, empty: str) -> None:
    path = write_file(
        "ids.jsonl",
        f'{{"doc_id": "d1", "cluster_id": "c"}}\n{{"doc_id": "d2", "cluster_id": {empty}}}\n',
    )
    assert read_cluster_ids(path) == {"d1": "c"}


def test_the_same_pair_twice_is_fine_and_a_singleton_is_kept(write_file: WriteFile) -> None:
    path = write_file("ids.csv", "doc_id,cluster_id\nd1,c1\nd1,c1\nd2,c9\n")
    assert read_cluster_ids(path) == {"d1": "c1", "d2": "c9"}


def test_cluster_members() -> None:
    members = cluster_members({"d3": "a", "d1": "a", "d2": "b", "d0": "a"})
    assert members == {"a": ["d0", "d1", "d3"], "b": ["d2"]}
    assert cluster_members({}) == {}


# --- errors: each names the file and the line ---


@pytest.mark.parametrize(
    ("name", "content"),
    [
        pytest.param("ids.csv", "d1,c1\nd2,c2\n", id="no-header"),
        pytest.param("ids.csv", "doc_id,cluster\nd1,c1\n", id="no-cluster-column"),
        pytest.param("ids.tsv", "document\tcluster_id\nd1\tc1\n", id="no-doc-column"),
    ],
)
def test_a_missing_column_names_found_and_expected(
    write_file: WriteFile, name: str, content: str
) -> None:
    error = assert_error(write_file(name, content), 1, "the header row has no column for")
    header = content.split("\n", 1)[0].replace("\t", ",").split(",")
    for found in header:
        assert repr(found) in error.message
    if "doc_id" not in header:
        assert "a doc id (doc_id or id or _curator_dedup_id" in error.message
    if "cluster_id" not in header:
        assert "a cluster id (cluster_id or group or _duplicate_group_id" in error.message


def test_a_missing_field_in_jsonl_names_the_line(write_file: WriteFile) -> None:
    path = write_file(
        "ids.jsonl", '{"doc_id": "d1", "cluster_id": "c"}\n\n{"doc_id": "d2", "clust": "c"}\n'
    )
    error = assert_error(path, 3, "the object has no column for a cluster id (cluster_id or")
    assert "found 'doc_id', 'clust'" in error.message


def test_a_missing_column_in_parquet(tmp_path: Path) -> None:
    path = tmp_path / "ids.parquet"
    pl.DataFrame({"doc": ["d1"], "cluster_id": ["c"]}).write_parquet(path)
    error = assert_error(path, None, "the Parquet file has no column for a doc id (doc_id or")
    assert "found 'doc', 'cluster_id'" in error.message


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        pytest.param("d9,c1,extra", "expected 2 fields (as the header has), found 3", id="fields"),
        pytest.param(",c1", "\"doc_id\" '' is empty or contains whitespace", id="empty-doc"),
        pytest.param("d 9,c1", "\"doc_id\" 'd 9' is empty or contains whitespace", id="space"),
        pytest.param("d\x009,c1", "is empty or contains whitespace or control bytes", id="nul"),
        pytest.param("d9,c\x01", "\"cluster_id\" 'c\\x01' is empty or contains", id="control"),
        pytest.param('"d9,c1', "not a valid delimited line", id="open-quote"),
        pytest.param(
            "d2,c2",
            "document 'd2' is given cluster 'c2' here and cluster 'c1' on line 3",
            id="conflict",
        ),
    ],
)
def test_a_bad_delimited_line_is_named(write_file: WriteFile, bad_line: str, message: str) -> None:
    path = write_file("ids.csv", f"doc_id,cluster_id\nd1,c1\nd2,c1\n\n{bad_line}\nd3,c3\n")
    assert_error(path, 5, message)


def test_invalid_utf8_is_named(write_file: WriteFile) -> None:
    path = write_file("ids.csv", b"doc_id,cluster_id\nd1,c1\nd\xff,c1\n")
    assert_error(path, 3, "not valid UTF-8 text")


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        pytest.param(
            '{"doc_id": "d9", "cluster_id": 1.5}',
            '"cluster_id" must be a string or an integer, got float',
            id="float",
        ),
        pytest.param(
            '{"doc_id": true, "cluster_id": "c"}',
            '"doc_id" must be a string or an integer, got a boolean',
            id="bool",
        ),
        pytest.param('{"doc_id": "d9", "cluster_id": ["c"]}', "got a list", id="nested"),
        pytest.param('{"doc_id": "d9\\u0000", "cluster_id": "c"}', "control bytes", id="nul"),
        pytest.param('["d9", "c"]', "expected a JSON object, got a list", id="not-object"),
        pytest.param('{"doc_id": "d9", ', "not valid JSON", id="broken"),
        pytest.param(
            '{"doc_id": "d1", "cluster_id": "c2"}',
            "document 'd1' is given cluster 'c2' here and cluster 'c1' on line 1",
            id="conflict",
        ),
    ],
)
def test_a_bad_jsonl_line_is_named(write_file: WriteFile, bad_line: str, message: str) -> None:
    path = write_file("ids.jsonl", f'{{"doc_id": "d1", "cluster_id": "c1"}}\n\n{bad_line}\n')
    assert_error(path, 3, message)


def test_an_id_longer_than_the_limit_is_refused_and_not_echoed(write_file: WriteFile) -> None:
    long = "x" * 100_000
    path = write_file("ids.csv", f"doc_id,cluster_id\nd1,c1\nd2,{long}\n")
    error = assert_error(path, 3, '"cluster_id" ', max_id_chars=300)
    assert "is 100,000 characters long (at most 300)" in error.message
    assert len(str(error)) < 400
    assert read_cluster_ids(write_file("ok.csv", f"doc_id,cluster_id\nd1,{'y' * 300}\n")) == {
        "d1": "y" * 300
    }
    assert_error(
        write_file("short.csv", "doc_id,cluster_id\nabcdef,c\n"), 2, "at most 5", max_id_chars=5
    )


def test_a_huge_bad_value_is_not_echoed(write_file: WriteFile) -> None:
    huge = "z " * 50_000
    path = write_file("ids.jsonl", json.dumps({"doc_id": huge, "cluster_id": "c"}) + "\n")
    # within the length limit, so that the blanks are what is refused (a longer id is
    # refused for its length first, and not echoed either)
    error = assert_error(path, 1, "is empty or contains whitespace", max_id_chars=200_000)
    assert len(str(error)) < 1_000
    too_long = assert_error(path, 1, "is 99,999 characters long (at most 300)")
    assert len(str(too_long)) < 1_000


@pytest.mark.parametrize(
    ("name", "content"),
    [
        pytest.param("ids.csv", "", id="empty"),
        pytest.param("ids.csv", "\n \n", id="blank"),
        pytest.param("ids.csv", "doc_id,cluster_id\n", id="header-only"),
        pytest.param("ids.jsonl", "", id="empty-jsonl"),
        pytest.param("ids", "", id="empty-sniffed"),
    ],
)
def test_a_file_without_rows_is_refused(write_file: WriteFile, name: str, content: str) -> None:
    assert_error(write_file(name, content), None, "no cluster ids (expected rows of a doc id")


def test_a_file_whose_clusters_are_all_empty_is_refused(write_file: WriteFile) -> None:
    path = write_file("ids.csv", "doc_id,cluster_id\nd1,\nd2, \n")
    assert_error(path, None, "no cluster ids: every one of its 2 rows has an empty")


def test_an_empty_parquet_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ids.parquet"
    pl.DataFrame(schema={"doc_id": pl.String, "cluster_id": pl.String}).write_parquet(path)
    assert_error(path, None, "no cluster ids")


def test_a_duplicate_header_column_is_refused(write_file: WriteFile) -> None:
    path = write_file("ids.csv", "doc_id,cluster_id,doc_id\nd1,c1,d2\n")
    assert_error(path, 1, "column 'doc_id' appears twice in the header")


def test_a_gzip_bomb_is_refused(write_file: WriteFile) -> None:
    from app.eval.textio import DecompressionLimit, decompression_limit

    path = write_file("ids.csv.gz", CSV + "d4,c4\n" * 20_000, gz=True)
    with decompression_limit(DecompressionLimit(max_bytes=1000, ratio_floor=1000)):
        assert_error(path, None, "refused as a decompression bomb")


# --- Parquet errors name the row ---


def parquet_error(tmp_path: Path, frame: pl.DataFrame) -> InputError:
    path = tmp_path / "ids.parquet"
    frame.write_parquet(path)
    error = error_of(path)
    assert error.source == str(path)
    assert error.line is None
    assert str(error).startswith(f"{path}: ")
    return error


@pytest.mark.parametrize(
    ("values", "dtype"),
    [
        pytest.param([1.0, 2.0], pl.Float64, id="float"),
        pytest.param([[1], [2]], pl.List(pl.Int64), id="list"),
        pytest.param([{"a": 1}, {"a": 2}], pl.Struct({"a": pl.Int64}), id="struct"),
        pytest.param([True, False], pl.Boolean, id="bool"),
    ],
)
def test_parquet_refuses_floats_and_nested(
    tmp_path: Path, values: list[object], dtype: pl.DataType
) -> None:
    frame = pl.DataFrame({"doc_id": ["d1", "d2"], "cluster_id": pl.Series(values, dtype=dtype)})
    error = parquet_error(tmp_path, frame)
    assert (
        error.message == f"column 'cluster_id' holds {dtype} values: expected strings or integers"
    )


def test_parquet_conflict_names_both_rows(tmp_path: Path) -> None:
    frame = pl.DataFrame({"doc_id": ["d1", "d2", "d1"], "cluster_id": ["a", "b", "c"]})
    error = parquet_error(tmp_path, frame)
    assert (
        error.message == "row 3: document 'd1' is given cluster 'c' here and cluster 'a' on row 1"
    )


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param(None, "row 2: 'doc_id' is null: every row needs a doc id", id="null"),
        pytest.param("d\x00", "row 2: \"doc_id\" 'd\\x00' is empty or contains", id="nul"),
        pytest.param("x" * 301, 'row 2: "doc_id" \'xxxxx', id="long"),
    ],
)
def test_a_bad_parquet_value_names_the_row(tmp_path: Path, doc: str | None, message: str) -> None:
    frame = pl.DataFrame({"doc_id": ["d1", doc], "cluster_id": ["a", "b"]})
    assert parquet_error(tmp_path, frame).message.startswith(message)


def test_a_file_named_parquet_that_is_not(write_file: WriteFile) -> None:
    assert_error(write_file("ids.parquet", CSV), None, "not a Parquet file")


def test_a_damaged_parquet_file(tmp_path: Path) -> None:
    path = tmp_path / "ids.parquet"
    pl.DataFrame({"doc_id": ["d1"], "cluster_id": ["a"]}).write_parquet(path)
    path.write_bytes(path.read_bytes()[:20])
    assert_error(path, None, "not a readable Parquet file")


# --- round trip ---

IDS = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=12
).filter(lambda text: not any(c.isspace() for c in text))
PAIRS = st.dictionaries(IDS, IDS, min_size=1, max_size=30)


def write_delimited(pairs: dict[str, str], separator: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out, delimiter=separator, lineterminator="\n")
    writer.writerow(["doc_id", "cluster_id"])
    writer.writerows(pairs.items())
    return out.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=PAIRS)
def test_round_trip_in_every_format(pairs: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        texts = {
            "ids.csv": write_delimited(pairs, ","),
            "ids.tsv": write_delimited(pairs, "\t"),
            "ids.jsonl": "".join(
                json.dumps({"doc_id": d, "cluster_id": c}) + "\n" for d, c in pairs.items()
            ),
        }
        for name, text in texts.items():
            (folder / name).write_text(text, encoding="utf-8")
            (folder / f"{name}.gz").write_bytes(gzip.compress(text.encode("utf-8")))
        pl.DataFrame({"doc_id": list(pairs), "cluster_id": list(pairs.values())}).write_parquet(
            folder / "ids.parquet"
        )
        for path in sorted(folder.iterdir()):
            assert read_cluster_ids(path) == pairs, path.name
        members = cluster_members(pairs)
        assert sorted(d for docs in members.values() for d in docs) == sorted(pairs)
