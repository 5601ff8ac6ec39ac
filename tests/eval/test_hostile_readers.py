"""The readers' own guards against hostile files: the decompression limit, the JSON depth
scan, shortened values in messages (the catalogue in tests/api runs them end to end)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from app.eval.errors import InputError, shorten
from app.eval.jsonl import (
    MAX_JSON_DEPTH,
    nesting_depth,
    read_corpus,
    read_jsonl_run,
    read_manifest,
    read_queries,
)
from app.eval.textio import DecompressionLimit, decompression_limit, plain_file
from app.eval.trec import read_qrels, read_trec_run
from app.settings import Settings


def test_the_limit_is_the_smaller_of_the_size_and_the_ratio_bounds() -> None:
    limit = DecompressionLimit(max_bytes=10_000, max_ratio=10, ratio_floor=500)
    assert limit.allowed(20) == 500  # small files: the floor
    assert limit.allowed(100) == 1000  # 10 times the compressed size
    assert limit.allowed(5000) == 10_000  # never above max_bytes


def test_the_settings_default_to_four_times_the_upload_limit() -> None:
    settings = Settings(upload_max_bytes=1000)
    assert settings.decompression_limit().max_bytes == 4000
    assert settings.decompression_limit().max_ratio == 100
    explicit = Settings(upload_max_bytes=1000, decompressed_max_bytes=123)
    assert explicit.decompression_limit().max_bytes == 123


@pytest.mark.parametrize(
    ("limit", "setting"),
    [
        (DecompressionLimit(max_bytes=5000, max_ratio=10**6, ratio_floor=0), "MAX_BYTES"),
        (DecompressionLimit(max_bytes=10**9, max_ratio=5, ratio_floor=0), "MAX_RATIO"),
    ],
)
def test_gzip_beyond_the_limit_is_refused_naming_the_setting(
    tmp_path: Path, limit: DecompressionLimit, setting: str
) -> None:
    path = tmp_path / "big.qrels.gz"
    path.write_bytes(gzip.compress(b"q1 0 a 1\n" * 10_000))  # 90 KB in about 300 bytes
    with decompression_limit(limit), pytest.raises(InputError) as caught, plain_file(path):
        pass
    assert "decompression bomb" in caught.value.message
    assert setting in caught.value.message
    small = tmp_path / "small.qrels.gz"
    small.write_bytes(gzip.compress(b"q1 0 a 1\n" * 10))
    with decompression_limit(limit), plain_file(small) as plain:
        assert plain.read_bytes() == b"q1 0 a 1\n" * 10


@pytest.mark.parametrize(
    ("line", "depth"),
    [
        (b'{"a": [1, [2]]}', 3),
        (b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', 1),
        (b'{"a": "\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', 1),
        (b"[" * 64 + b"]" * 64, 64),
        (b"[" * 65 + b"]" * 65, 65),
        (b"[" * 100_000, MAX_JSON_DEPTH + 1),
    ],
)
def test_the_depth_scan_counts_brackets_outside_strings(line: bytes, depth: int) -> None:
    assert nesting_depth(line) == depth


def test_the_depth_scan_is_cheap_on_a_long_legitimate_line(tmp_path: Path) -> None:
    entries = [{"doc_id": f"d{i}", "score": 1.0 / (i + 1)} for i in range(300_000)]
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"qid": "q1", "docs": entries}) + "\n")
    frame, _ = read_jsonl_run(path)
    # How fast: benchmarks/bomb_refusal.py times this very read (linear, about a second).
    assert frame.height == 300_000
    assert frame["doc_id"][299_999] == "d299999"


def test_a_corpus_deeper_than_the_bound_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"_id": "a"}\n{"_id": "b", "m": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(InputError) as caught:
        list(read_corpus(path))
    assert caught.value.line == 2
    assert f"nested deeper than {MAX_JSON_DEPTH}" in caught.value.message


def test_shorten_shows_the_start_and_the_length() -> None:
    assert shorten("abc") == "'abc'"
    shown = shorten("x" * 1_000_000)
    assert len(shown) < 250
    assert shown.startswith("'xxx")
    assert "1,000,000 characters" in shown
    assert len(str(InputError("f", 1, "y" * 10_000))) < 1000


@pytest.mark.parametrize(
    ("reader", "content"),
    [
        ("run", b'{"qid": "q1", "docs": ["a"]}\n{"qid": "q2", "docs": ["' + b"d" * 5000 + b'"]}\n'),
        ("run", b"q1 Q0 a 1 9 t\n" + b"r" * 5000 + b"\n"),
        ("qrels", b"q1 0 a 1\n" + b"q" * 5000),
        ("queries", b"q1\tok\n" + b"q" * 5000 + b"\n"),
        ("manifest", b"a\n" + b"d" * 5000 + b"\n"),
        ("corpus", b'{"_id": "a"}\n{"_id": "' + b"d" * 5000 + b'"}\n'),
    ],
)
def test_a_line_longer_than_the_bound_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str, content: bytes
) -> None:
    """Lines are read with a bound (``MAX_LINE_BYTES``, 256 MiB; 1000 bytes here), so a
    gigabyte without a newline is refused, not held in memory."""
    monkeypatch.setattr("app.eval.textio.MAX_LINE_BYTES", 1000)
    monkeypatch.setattr("app.eval.textio.CHUNK_BYTES", 256)
    path = tmp_path / "long.txt"
    path.write_bytes(gzip.compress(content))
    readers: dict[str, Callable[[Path], object]] = {
        "run": read_jsonl_run if content.startswith(b"{") else read_trec_run,
        "qrels": read_qrels,
        "queries": read_queries,
        "manifest": read_manifest,
        "corpus": lambda p: list(read_corpus(p)),
    }
    with pytest.raises(InputError) as caught:
        readers[reader](path)
    assert caught.value.line == 2
    assert "a line longer than 1,000 bytes" in caught.value.message
    assert caught.value.source == str(path)
