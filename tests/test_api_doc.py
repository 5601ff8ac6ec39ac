"""docs/api.md is the API contract: it must say what the code does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "make_api_doc", ROOT / "scripts" / "make_api_doc.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_api_md_is_generated_from_the_openapi_document() -> None:
    script = _script()
    document = script.openapi_document()
    expected = script.render(document)
    committed = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert committed == expected, "docs/api.md is out of date: run python scripts/make_api_doc.py"


def test_every_api_operation_is_in_the_document() -> None:
    script = _script()
    document = script.openapi_document()
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    operations = [
        f"`{method.upper()} {path}`"
        for path, methods in document["paths"].items()
        for method in methods
    ]
    assert len(operations) >= 30
    missing = [op for op in operations if op not in text]
    assert missing == []
