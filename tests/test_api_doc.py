"""docs/api.md is the API contract: it must say what the code does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI, Query
from pydantic import BaseModel, Field

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


# Module-level: FastAPI resolves the (postponed) annotations of the handlers below by name.
class Evidence(BaseModel):
    """What a hint rests on."""

    terms: list[str] = Field(description="query terms the document lacks")


class MissOut(BaseModel):
    id: int
    rank: int | None
    hint: Evidence | None


class MissPage(BaseModel):
    items: list[MissOut]
    total: int = Field(ge=0)


class LabelIn(BaseModel):
    category: str = Field(min_length=1, max_length=100)
    evidence: Evidence


def test_answers_show_their_fields_and_nested_models_once_in_the_schemas_section() -> None:
    app = FastAPI()

    @app.get("/misses", response_model=MissPage)
    def misses(per_page: int = Query(50, ge=1, le=1000)) -> MissPage:
        raise NotImplementedError

    @app.post("/misses/{miss_id}/label", response_model=MissOut)
    def label(miss_id: int, body: LabelIn) -> MissOut:
        raise NotImplementedError

    @app.delete("/misses/{miss_id}", status_code=204)
    def forget(miss_id: int) -> None:
        raise NotImplementedError

    text = _script().render(app.openapi())
    operations, schemas = text.split("\n## Schemas\n")
    # Query limits, the body's fields with their limits, each answer's fields.
    assert "| `per_page` | query | no | integer (>= 1, <= 1000) | `50` |" in operations
    assert "Request body (`application/json`) `LabelIn`:" in operations
    assert "| `category` | yes | string (min length 1, max length 100) |  |" in operations
    assert "Answer `200` (`application/json`) `MissPage`: Successful Response." in operations
    assert "| `items` | yes | list of [`MissOut`](#missout) |  |" in operations
    assert "| `total` | yes | integer (>= 0) |  |" in operations
    assert "| `hint` | yes | [`Evidence`](#evidence) or null |  |" in operations
    assert "Answer `204`: Successful Response; no body." in operations
    # The nested models, once each, with their fields and descriptions.
    headings = [line for line in schemas.splitlines() if line.startswith("### ")]
    assert headings == ["### Evidence", "### MissOut"]
    assert "What a hint rests on." in schemas
    assert "| `terms` | yes | list of string |  | query terms the document lacks |" in schemas
