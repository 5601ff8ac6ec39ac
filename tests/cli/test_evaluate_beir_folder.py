"""``evaluate --qrels FOLDER`` reads a BEIR folder whole, as ``import-golden-set`` does: its
corpus.jsonl and manifest.txt are the diagnosis's evidence for "ingestion" (it called 14 of the
example's queries "ingestion" without them, where the golden-set page says 6)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from app.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "helpcentre"


def _evaluate(*extra: str) -> dict[str, object]:
    result = CliRunner().invoke(
        main,
        [
            "evaluate",
            "--qrels",
            str(EXAMPLE),
            "--run",
            f"bm25={EXAMPLE / 'runs' / 'bm25.trec'}",
            "--format",
            "json",
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    run: dict[str, object] = json.loads(result.stdout)["runs"][0]
    return run


def test_a_folder_brings_its_corpus_and_manifest() -> None:
    folder = _evaluate()
    explicit = _evaluate(
        "--corpus", str(EXAMPLE / "corpus.jsonl"), "--manifest", str(EXAMPLE / "manifest.txt")
    )
    assert folder["diagnosis_evidence"] is True
    assert folder["diagnosis"] == explicit["diagnosis"]
    assert folder["diagnosis"]["ingestion"] == 6  # type: ignore[index]
    assert folder["clusters"] == explicit["clusters"]
