"""Shared fixtures: small input files written per test, and the SciFact folder when present."""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
SCIFACT = SHARED / "datasets" / "scifact"

WriteFile = Callable[..., Path]


@pytest.fixture
def write_file(tmp_path: Path) -> WriteFile:
    """Write text (or bytes) to a file under tmp_path; ``gz=True`` compresses it."""

    def write(name: str, content: str | bytes, *, gz: bool = False) -> Path:
        data = content.encode("utf-8") if isinstance(content, str) else content
        path = tmp_path / name
        if gz:
            data = gzip.compress(data)
        path.write_bytes(data)
        return path

    return write


@pytest.fixture(scope="session")
def scifact() -> Path:
    """The real SciFact golden set of ../shared; skipped where the folder is absent (a user's
    clone), but a failure in CI, where it is always laid out."""
    if not (SCIFACT / "qrels.tsv").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{SCIFACT} is missing in CI")
        pytest.skip("../shared/datasets/scifact is not present")
    return SCIFACT
