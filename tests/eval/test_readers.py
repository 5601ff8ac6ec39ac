"""Readers: every accepted spelling of a file gives the same rows; every bad file names its
line."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from app.eval import InputError, fastread, textio
from app.eval.jsonl import read_corpus, read_jsonl_run, read_queries
from app.eval.trec import RUN_COLUMNS, RUN_EXPECTED, read_qrels, read_trec_run
from tests.support.service import WriteFile

RUN = "q1 Q0 d1 1 3.5 t\nq1 Q0 d2 2 2.25 t\nq2 Q0 d1 1 1 t\n"
EXPECTED = [("q1", "d1", 3.5), ("q1", "d2", 2.25), ("q2", "d1", 1.0)]


def rows(frame: pl.DataFrame) -> list[tuple[str, str, float]]:
    return list(frame.select("qid", "doc_id", "score").iter_rows())


@pytest.mark.parametrize(
    ("content", "gz"),
    [
        pytest.param(RUN, False, id="single-spaces"),
        pytest.param(RUN, True, id="gzip"),
        pytest.param(RUN.replace(" ", "\t"), False, id="tabs"),
        pytest.param(RUN.replace(" ", "   "), False, id="runs-of-spaces"),
        pytest.param(RUN.replace(" Q0 ", "\tQ0  "), False, id="mixed"),
        pytest.param(RUN.replace("\n", "\r\n"), False, id="crlf"),
        pytest.param("\n" + RUN.replace("\n", "\n\n") + "\n", False, id="blank-lines"),
        pytest.param(RUN.rstrip("\n"), False, id="no-final-newline"),
        pytest.param("  " + RUN.replace("\n", "  \n"), False, id="padded"),
    ],
)
def test_trec_run_spellings_read_the_same(write_file: WriteFile, content: str, gz: bool) -> None:
    path = write_file("run.trec.gz" if gz else "run.trec", content, gz=gz)
    assert rows(read_trec_run(path)) == EXPECTED


def test_line_numbers_count_blank_lines(write_file: WriteFile) -> None:
    path = write_file("run.trec", "\nq1 Q0 d1 1 3 t\n\n\nq1 Q0 d2 2 2 t\n")
    assert read_trec_run(path).get_column("line").to_list() == [2, 5]


@pytest.mark.parametrize("separator", [" ", "   "], ids=["fast-path", "tolerant-path"])
@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("q1 Q0 d9 3 2.0", "expected 6 columns (qid Q0 docno rank score tag), found 5"),
        ("q1 Q0 d9 3 abc t", "score 'abc' is not a number"),
        ("q1 Q0 d9 3 nan t", "score 'nan' is not a finite number"),
        ("q1 Q0 d9 3 inf t", "score 'inf' is not a finite number"),
        ("q1 Q0 d9 3 1e400 t", "score '1e400' is not a finite number"),
        ("q1 Q0 d 9 3 1.0 t", "expected 6 columns (qid Q0 docno rank score tag), found 7"),
    ],
)
def test_bad_run_line_is_named(
    write_file: WriteFile, separator: str, bad_line: str, message: str
) -> None:
    content = RUN + "\n" + bad_line + "\n"
    path = write_file("run.trec", content.replace(" ", separator))
    with pytest.raises(InputError) as caught:
        read_trec_run(path)
    assert caught.value.line == 5
    assert caught.value.source == str(path)
    assert caught.value.message.replace(separator, " ") == message
    assert str(caught.value) == f"{path}, line 5: {caught.value.message}"


@pytest.mark.parametrize(
    ("content", "line", "found"),
    [
        ("q1 Q0 d1 1 3.5 t x\n" + RUN, 1, 7),
        ("q1 Q0 d1 1 3.5\n" + RUN, 1, 5),
        (RUN + "q1 Q0 d1 1 3.5 t x y z\n", 4, 9),
        (RUN + "q1\n", 4, 1),
    ],
)
def test_wrong_column_count_anywhere(
    write_file: WriteFile, content: str, line: int, found: int
) -> None:
    path = write_file("run.trec", content)
    with pytest.raises(InputError) as caught:
        read_trec_run(path)
    assert caught.value.line == line
    assert caught.value.message.startswith(f"expected 6 columns ({RUN_EXPECTED}), found {found}")


def test_invalid_utf8_names_line(write_file: WriteFile) -> None:
    path = write_file("run.trec", RUN.encode() + b"q1 Q0 d\xff 3 1.0 t\n")
    with pytest.raises(InputError) as caught:
        read_trec_run(path)
    assert caught.value.line == 4
    assert "not valid UTF-8" in caught.value.message


def test_truncated_gzip_is_an_input_error(write_file: WriteFile) -> None:
    import gzip

    data = gzip.compress((RUN * 200).encode())
    path = write_file("run.trec.gz", data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated gzip"):
        read_trec_run(path)


def test_rank_column_parsed_only_when_asked(write_file: WriteFile) -> None:
    path = write_file("run.trec", "q1 Q0 d1 x 3.5 t\n")
    assert read_trec_run(path).get_column("rank").to_list() == [None]
    with pytest.raises(InputError, match="rank 'x' is not an integer") as caught:
        read_trec_run(path, with_rank=True)
    assert caught.value.line == 1


def test_trec_qrels(write_file: WriteFile) -> None:
    path = write_file("qrels", "q1 0 d1 2\nq1 0 d2 -1\n\nq2 0 d1 0\n")
    frame, fmt = read_qrels(path)
    assert fmt == "trec"
    assert list(frame.select("qid", "doc_id", "grade").iter_rows()) == [
        ("q1", "d1", 2),
        ("q1", "d2", -1),
        ("q2", "d1", 0),
    ]


def test_beir_qrels_with_header(write_file: WriteFile) -> None:
    path = write_file("test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td7\t2\n")
    frame, fmt = read_qrels(path)
    assert fmt == "beir"
    assert list(frame.select("qid", "doc_id", "grade", "line").iter_rows()) == [
        ("q1", "d1", 1, 2),
        ("q2", "d7", 2, 3),
    ]


def test_qrels_grade_must_be_integer(write_file: WriteFile) -> None:
    path = write_file("qrels", "q1 0 d1 1\nq1 0 d2 1.5\n")
    with pytest.raises(InputError, match=r"grade '1\.5' is not an integer") as caught:
        read_qrels(path)
    assert caught.value.line == 2


def test_qrels_column_count(write_file: WriteFile) -> None:
    path = write_file("qrels", "q1 0 d1 1 extra x\n")
    with pytest.raises(InputError, match="expected 4 columns") as caught:
        read_qrels(path)
    assert caught.value.line == 1


def test_empty_qrels(write_file: WriteFile) -> None:
    with pytest.raises(InputError, match="empty"):
        read_qrels(write_file("qrels", "\n\n"))


def test_jsonl_run_lists(write_file: WriteFile) -> None:
    path = write_file(
        "run.jsonl",
        '{"qid": "q1", "docs": ["d3", "d1"]}\n\n'
        '{"qid": 2, "docs": [{"doc_id": "d1", "score": 2}]}\n',
    )
    frame, fmt = read_jsonl_run(path)
    assert fmt == "jsonl-lists"
    assert list(frame.select("qid", "doc_id", "score", "line").iter_rows()) == [
        ("q1", "d3", None, 1),
        ("q1", "d1", None, 1),
        ("2", "d1", 2.0, 3),
    ]


def test_jsonl_run_hits(write_file: WriteFile) -> None:
    path = write_file(
        "run.jsonl",
        '{"qid": "q1", "doc_id": "d3", "score": 1.5}\n{"qid": "q1", "doc_id": "d1", "score": 2}\n',
        gz=True,
    )
    frame, fmt = read_jsonl_run(path)
    assert fmt == "jsonl-hits"
    assert rows(frame) == [("q1", "d3", 1.5), ("q1", "d1", 2.0)]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            '{"qid": "q1", "doc_id": "d2", "score": "high"}',
            '"score" must be a number, got a string',
        ),
        ('{"qid": "q1", "doc_id": "d2"}', "missing field 'score'"),
        ('{"qid": "q1", "doc_id": "d2", "score": NaN}', '"score" nan is not a finite number'),
        ('{"qid": "q1", "doc_id": "d 2", "score": 1}', "is empty or contains whitespace"),
        ('{"qid": "q1", "doc_id": ', "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got a list"),
    ],
)
def test_jsonl_bad_line_is_named(write_file: WriteFile, bad: str, message: str) -> None:
    path = write_file("run.jsonl", '{"qid": "q1", "doc_id": "d1", "score": 1}\n\n' + bad + "\n")
    with pytest.raises(InputError) as caught:
        read_jsonl_run(path)
    assert caught.value.line == 3
    assert message in caught.value.message


def test_queries_jsonl_and_tsv(write_file: WriteFile) -> None:
    jsonl = write_file(
        "q.jsonl", '{"_id": "1", "text": "rate limits"}\n{"_id": 2, "text": "sso"}\n'
    )
    tsv = write_file("q.tsv", "qid\ttext\n1\trate limits\n2\tsso\n")
    assert read_queries(jsonl) == read_queries(tsv) == {"1": "rate limits", "2": "sso"}


def test_queries_conflicting_text(write_file: WriteFile) -> None:
    path = write_file("q.tsv", "1\ta\n1\tb\n")
    with pytest.raises(InputError, match="different texts") as caught:
        read_queries(path)
    assert caught.value.line == 2


def test_corpus_with_chunks_and_clusters(write_file: WriteFile) -> None:
    path = write_file(
        "corpus.jsonl",
        '{"_id": "a#1", "title": "A", "text": "x", "parent_id": "a", "chunk_index": 1,'
        ' "cluster_id": "c1"}\n{"_id": "b", "text": "y"}\n',
    )
    docs = list(read_corpus(path))
    assert [(d.doc_id, d.parent_id, d.chunk_index, d.cluster_id, d.title) for d in docs] == [
        ("a#1", "a", 1, "c1", "A"),
        ("b", None, None, None, ""),
    ]


def test_corpus_duplicate_id(write_file: WriteFile) -> None:
    path = write_file("corpus.jsonl", '{"_id": "a"}\n{"_id": "a"}\n')
    with pytest.raises(InputError, match="appears twice") as caught:
        list(read_corpus(path))
    assert caught.value.line == 2


def _fast(path: Path) -> pl.DataFrame | None:
    """The fast path alone (None: it handed the file to the tolerant path)."""
    return textio.read_fast(
        path,
        columns=RUN_COLUMNS,
        keep=["qid", "doc_id", "score"],
        separator=" ",
        floats=["score"],
        ints=[],
    )


def test_blocks_of_the_fast_path_keep_every_line_and_its_number(
    write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of 64 bytes: lines and blank lines fall on every side of a block's end."""
    monkeypatch.setattr(fastread, "FAST_BLOCK_BYTES", 64)
    lines = [f"q{i % 7} Q0 d{i} {i} {i / 8} t" if i % 5 else "" for i in range(1, 200)]
    path = write_file("run.trec", "\n".join(lines) + "\n")
    frame = _fast(path)
    assert frame is not None
    expected = [(f"q{i % 7}", f"d{i}", i / 8, i) for i, text in enumerate(lines, start=1) if text]
    assert list(frame.select("qid", "doc_id", "score", "line").iter_rows()) == expected
    assert read_trec_run(path).select("qid", "doc_id", "score", "line").equals(frame)


def test_a_line_longer_than_a_block_is_read_whole(
    write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut at the block's end, the long line still has six fields: the fast path must not
    take the cut for the end of the file."""
    monkeypatch.setattr(fastread, "FAST_BLOCK_BYTES", 64)
    long_line = "q1 Q0 d9 9 1.5 " + "t" * 200
    path = write_file("run.trec", RUN + long_line + "\nq2 Q0 d8 2 0.5 t\n")
    assert _fast(path) is None
    assert rows(read_trec_run(path)) == [*EXPECTED, ("q1", "d9", 1.5), ("q2", "d8", 0.5)]


def test_a_bad_line_in_a_later_block_is_named(
    write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fastread, "FAST_BLOCK_BYTES", 64)
    good = "".join(f"q1 Q0 d{i} {i} 1 t\n" for i in range(40))
    path = write_file("run.trec", good + "q1 Q0 dx 41 high t\n" + good)
    with pytest.raises(InputError) as caught:
        read_trec_run(path)
    assert caught.value.line == 41
    assert caught.value.message == "score 'high' is not a number"


def test_a_nul_byte_in_any_field_is_left_to_the_tolerant_path(write_file: WriteFile) -> None:
    path = write_file("run.trec", RUN + "q1 Q0 d\x009 4 1 t\n")
    assert _fast(path) is None
    with pytest.raises(InputError) as caught:
        read_trec_run(path)
    assert caught.value.line == 4
    assert "NUL byte in the doc_id field" in caught.value.message


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("q1 Q0  5 1.0 t", 5),  # five fields, one doubled separator: an empty docno
        ("q1  d5 5 1.0 t", 5),  # no Q0 column
        ("q1 Q0 d5  1.0 t", 5),  # no rank column
        ("q1 Q0 d\t5 5 1.0 t", 7),  # a tab in a space-separated file separates too
        ("q1 Q0 d\x0b5 5 1.0 t", 7),  # so does a vertical tab
        ("q1 Q0 d\r5 5 1.0 t", None),  # a carriage return inside a line
    ],
)
def test_what_the_fast_path_cannot_see_goes_to_the_tolerant_path(
    write_file: WriteFile, line: str, found: int | None
) -> None:
    """Past the head the separator is sniffed from, a line with an empty field or another
    blank character is still read as trec_eval splits it (on runs of blanks): an error
    naming it, never shifted fields."""
    good = "".join(f"q1 Q0 d{i} {i} 1 t\n" for i in range(4000))
    path = write_file("run.trec", good + line + "\n")
    assert _fast(path) is None
    with pytest.raises(InputError) as caught:
        read_trec_run(path)
    assert caught.value.line == 4001
    if found is not None:
        assert f"found {found}" in caught.value.message


def test_a_line_starting_with_a_blank_is_read_not_dropped(write_file: WriteFile) -> None:
    """A leading blank is no empty field to trec_eval: the line is a result like any other."""
    good = "".join(f"q1 Q0 d{i} {i} 1 t\n" for i in range(4000))
    path = write_file("run.trec", good + " q2 Q0 dx 1 2.5 t\n")
    assert _fast(path) is None
    frame = read_trec_run(path)
    assert frame.height == 4001
    assert frame.row(-1) == ("q2", "dx", 2.5, None, 4001)
