"""Query files read a block at a time (app.eval.query_lines): the lines taken apart by a
pattern give what json.loads and the per-line checks give, and every refusal still names its
line, whichever way a line was read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.eval import InputError, query_lines
from app.eval.jsonl import read_queries

#: Lines the patterns take, lines they leave to the per-line reader, mixed in one file.
MIXED_JSON = [
    '{"_id": "q1", "text": "plain text"}',
    '{"_id":"q2","text":"no spaces"}',
    '{"text": "text first", "_id": "q3"}',
    '{"_id": 4, "text": "an integer id"}',
    '{"_id": "q5", "text": "with metadata", "metadata": {}}',
    '{"_id": "q6", "text": "escaped \\"quote\\" and \\u00e9"}',
    '{"_id": "q\\u00e9", "text": "a non-ASCII id"}',
    '{"qid": "q8", "query": "the other names"}',
    "",
    "   ",
    '{"_id": "q9", "text": "crlf"}\r',
    '{"_id": "q1", "text": "plain text"}',
    '{"_id": "q10", "text": "non-ASCII text: café ☕"}',
    '{"_id": "q11", "text": "metadata", "metadata": {"a": 1}}',
    '{"_id": "q12", "text": ""}',
]


def _write(tmp_path: Path, lines: list[str], name: str = "queries.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes("\n".join(lines).encode() + b"\n")
    return path


def _by_json(lines: list[str]) -> dict[str, str]:
    """What json.loads makes of the lines, for comparison."""
    found: dict[str, str] = {}
    for line in lines:
        if line.strip():
            obj = json.loads(line)
            key = "_id" if "_id" in obj else "qid"
            found.setdefault(str(obj[key]), obj.get("text", obj.get("query")))
    return found


def test_mixed_lines_read_as_json_loads_reads_them(tmp_path: Path) -> None:
    path = _write(tmp_path, MIXED_JSON)
    found = read_queries(path, max_id_chars=200)
    assert found == _by_json(MIXED_JSON)
    assert list(found) == list(_by_json(MIXED_JSON))  # first-seen order


def test_blocks_smaller_than_the_file_number_lines_across_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(query_lines, "BLOCK_BYTES", 50)
    lines = [*MIXED_JSON, '{"_id": "q2", "text": "changed"}']
    with pytest.raises(InputError) as caught:
        read_queries(_write(tmp_path, lines), max_id_chars=200)
    assert caught.value.line == len(lines)
    assert "appears twice with different texts" in caught.value.message
    monkeypatch.setattr(query_lines, "BLOCK_BYTES", 37)
    assert read_queries(_write(tmp_path, MIXED_JSON)) == _by_json(MIXED_JSON)


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ('{"_id": true, "text": "x"}', "must be a string or an integer"),
        ('{"_id": "", "text": "x"}', "empty or contains whitespace"),
        ('{"_id": "a b", "text": "x"}', "empty or contains whitespace"),
        ('{"_id": "q", "text": 5}', "must be a string"),
        ('{"_id": "q", "text": "nul \\u0000"}', "NUL"),
        ('{"_id": "q", "text": "\\ud800"}', "lone surrogate"),
        ('{"text": "no id"}', "missing field '_id'"),
        ('{"_id": "q", "text": "x"', "not valid JSON"),
        ('{"_id": "' + "x" * 201 + '", "text": "long"}', "characters long"),
        ('{"_id": 1.5, "text": "float"}', "must be a string or an integer"),
    ],
)
def test_a_bad_line_is_named_after_good_ones(tmp_path: Path, bad: str, problem: str) -> None:
    lines = ['{"_id": "a", "text": "good"}'] * 3 + [bad] + ['{"_id": "b", "text": "good"}']
    with pytest.raises(InputError) as caught:
        read_queries(_write(tmp_path, lines), max_id_chars=200)
    assert caught.value.line == 4
    assert problem in caught.value.message


def test_the_first_error_wins_whichever_reader_found_it(tmp_path: Path) -> None:
    # a changed text on line 2 (both lines of the usual shape) before a broken line 3
    lines = ['{"_id": "a", "text": "one"}', '{"_id": "a", "text": "two"}', "{broken"]
    with pytest.raises(InputError) as caught:
        read_queries(_write(tmp_path, lines))
    assert (caught.value.line, "appears twice" in caught.value.message) == (2, True)
    # a broken line 2 before a changed text on line 3
    lines = ['{"_id": "a", "text": "one"}', "{broken", '{"_id": "a", "text": "two"}']
    with pytest.raises(InputError) as caught:
        read_queries(_write(tmp_path, lines))
    assert (caught.value.line, "not valid JSON" in caught.value.message) == (2, True)


def test_invalid_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "queries.jsonl"
    path.write_bytes(b'{"_id": "a", "text": "x"}\n{"_id": "b", "text": "\xff"}\n')
    with pytest.raises(InputError) as caught:
        read_queries(path)
    assert caught.value.line == 2
    assert "not valid UTF-8" in caught.value.message


def test_tsv_lines_read_as_before(tmp_path: Path) -> None:
    lines = [
        "qid\ttext",
        "q1\tplain",
        "q2\t  padded  ",
        "q3\twith\ttabs",
        "q4\t",
        "\t",
        "q5\tcrlf\r",
        " q6 \tspaces around the id",
        "q1\tplain",
        "qé\tnon-ASCII id",
    ]
    found = read_queries(_write(tmp_path, lines, "queries.tsv"))
    assert found == {
        "q1": "plain",
        "q2": "padded",
        "q3": "with\ttabs",
        "q4": "",
        "q5": "crlf",
        "q6": "spaces around the id",
        "qé": "non-ASCII id",
    }


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ("no tab here", "expected 2 tab-separated columns"),
        ("q1\tchanged", "appears twice with different texts"),
        ("q9\tnul \x00", "NUL byte"),
        ("a b\ttext", "empty or contains whitespace"),
    ],
)
def test_a_bad_tsv_line_is_named(tmp_path: Path, bad: str, problem: str) -> None:
    lines = ["q1\tone", "q2\ttwo", bad, "q3\tthree"]
    with pytest.raises(InputError) as caught:
        read_queries(_write(tmp_path, lines, "queries.tsv"))
    assert caught.value.line == 3
    assert problem in caught.value.message
