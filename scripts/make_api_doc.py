"""Write docs/api.md, the JSON API contract, from the application's OpenAPI document.

Run from the repository root::

    python scripts/make_api_doc.py          # rewrite docs/api.md
    python scripts/make_api_doc.py --check  # exit 1 if the committed file differs

The conventions every route shares (authentication, the error body, lists) come first, written
here; each operation follows from ``/openapi.json``: its method and path, what it does, its
parameters, its request body and the status codes it answers. tests/test_api_doc.py keeps the
committed file equal to what this script writes, so the document cannot drift from the code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "api.md"

HEADER = """\
# misstriage JSON API

Generated from the application's OpenAPI document by `python scripts/make_api_doc.py`; a test
keeps it equal to the code. The same document is served at `/openapi.json` to any logged-in
user or token.

## Conventions

- **Authentication**: `Authorization: Bearer <token>` (create one with `misstriage create-token
  --email E`, or `POST /api/v1/tokens`), or the session cookie of the HTML pages, in which case
  writes must come from the product's own pages (CSRF). Roles: `reviewer` reads everything and
  labels misses, `lead` also imports, triages, relabels and exports, `admin` also manages
  accounts. 401 without valid credentials, 403 for a role that may not.
- **Errors**: every error has one body, `{"error": {"code": "snake_case", "message": "...",
  "details": ...}}`, with a fitting status: 400 bad input (a bad upload names the file and the
  line, and nothing is written), 401, 403, 404, 409 conflict (e.g. `stale_version`), 413 too
  large, 422 validation, 429 `too_many_attempts` (with `Retry-After`), 503
  `database_unavailable` (with `Retry-After`; repeat the request). Tests should compare `code`,
  not the message.
- **Lists**: `?page=1&per_page=50` (per_page 1 to 1000) answer `{"items": [...], "total": N}`.
- **Measures** are named canonically: `R@10`, `R@50`, `nDCG@10`. The evaluation conventions
  (run order, ties, gain, ideal, averaging) are echoed in every metrics answer under
  `conventions`.
- **Uploads** are multipart form fields; files may be plain or gzip (detected by their first
  bytes).

## The main answers

Field names are fixed; fields may be added.

- A golden set: `{"id", "name", "min_grade", "queries", "judgments", "relevant", "documents",
  "causes": [...], "report": {...}}`.
- A run: `{"id", "name", "golden_set_id", "queries", "lines", "report": {"duplicates_dropped",
  "golden_queries_absent", "unknown_queries", ...}}`.
- Metrics (`GET /api/v1/runs/{id}/metrics`): `{"run_id", "k", "depth", "conventions": {"order",
  "gain", "ideal", "min_grade", "averaging"}, "queries", "measures": {"R@10", "R@50",
  "nDCG@10"}, "micro": {...}, "depth_curve": {"10": ..., ...}, "misses", "clusters"}`
  (`clusters` is null where k is deeper than the kept results).
- A triage: `{"id", "run_id", "depth", "k", "misses", "counts": {"<cause>": n}, "other",
  "unlabelled", "covered", "closes", "closure": "<sentence>"}`.
- A miss: `{"id", "qid", "doc_id", "grade", "rank", "state", "category", "note", "version",
  "lease_holder", "lease_expires_at", "hint", "covered_by"}`; `rank` is null when the run did
  not return the document. States: `open`, `labelled`, `covered`.
- An export: `{"results": [{"category", "action": "create|update|unchanged", "external_id",
  "url"}], "requests": [...]}` (`requests` on a dry run only, credentials masked).

## Operations
"""


def _schema_type(schema: dict[str, Any], components: dict[str, Any]) -> str:
    """A short human name for a JSON schema: ``integer``, ``string (binary)``, ``list of X``,
    ``one of a, b``."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        target = components.get(name, {})
        if "enum" in target:
            return "one of " + ", ".join(f"`{v}`" for v in target["enum"])
        return name
    if "anyOf" in schema:
        kinds = [_schema_type(s, components) for s in schema["anyOf"]]
        kinds = [k for k in kinds if k != "null"]
        return " or ".join(kinds) if kinds else "null"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if "contentMediaType" in schema:
        return "file"
    if kind == "array":
        return "list of " + _schema_type(schema.get("items", {}), components)
    if schema.get("format") in ("binary", "email", "date-time"):
        return f"{kind} ({schema['format']})"
    bounds = []
    for key, symbol in (("minimum", ">="), ("maximum", "<="), ("exclusiveMinimum", ">")):
        if key in schema:
            bounds.append(f"{symbol} {schema[key]}")
    for key, word in (("minLength", "min length"), ("maxLength", "max length")):
        if key in schema:
            bounds.append(f"{word} {schema[key]}")
    return f"{kind} ({', '.join(bounds)})" if bounds else str(kind)


def _default(value: Any) -> str:
    if value is None:
        return ""
    return '`""`' if value == "" else f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _parameters(op: dict[str, Any], components: dict[str, Any]) -> list[str]:
    params = op.get("parameters", [])
    if not params:
        return []
    lines = ["| parameter | in | required | type | default |", "|---|---|---|---|---|"]
    for p in params:
        schema = p.get("schema", {})
        default = schema.get("default")
        lines.append(
            f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | "
            f"{_cell(_schema_type(schema, components))} | "
            f"{_default(default)} |"
        )
    return [*lines, ""]


def _body(op: dict[str, Any], components: dict[str, Any]) -> list[str]:
    body = op.get("requestBody")
    if not body:
        return []
    lines: list[str] = []
    for media, content in body.get("content", {}).items():
        schema = content.get("schema", {})
        if "$ref" in schema:
            schema = components.get(schema["$ref"].rsplit("/", 1)[-1], {})
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        lines.append(f"Request body (`{media}`):")
        lines.append("")
        lines.append("| field | required | type | default |")
        lines.append("|---|---|---|---|")
        for name, prop in props.items():
            default = prop.get("default")
            lines.append(
                f"| `{name}` | {'yes' if name in required else 'no'} | "
                f"{_cell(_schema_type(prop, components))} | "
                f"{_default(default)} |"
            )
        lines.append("")
    return lines


def _responses(op: dict[str, Any]) -> list[str]:
    codes = sorted(op.get("responses", {}).items())
    success = [f"`{code}` {_cell(r.get('description', ''))}" for code, r in codes if code < "400"]
    errors = [code for code, _ in codes if code >= "400"]
    lines = ["Answers: " + "; ".join(success) + "."]
    if errors:
        lines.append("Errors: " + ", ".join(errors) + " (the error body).")
    return [*lines, ""]


def render(document: dict[str, Any]) -> str:
    """docs/api.md for an OpenAPI document."""
    components = document.get("components", {}).get("schemas", {})
    sections: dict[str, list[str]] = {}
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            tag = (op.get("tags") or ["other"])[0]
            lines = [f"### `{method.upper()} {path}`", ""]
            description = (op.get("description") or op.get("summary") or "").strip()
            if description:
                lines += [" ".join(description.split()).replace("``", "`"), ""]
            lines += _parameters(op, components)
            lines += _body(op, components)
            lines += _responses(op)
            sections.setdefault(tag, []).extend(lines)
    out = [HEADER]
    for tag, lines in sections.items():
        out.append(f"## {tag}\n")
        out.append("\n".join(lines))
    return "\n".join(out).rstrip() + "\n"


def openapi_document() -> dict[str, Any]:
    """The application's OpenAPI document, built without a database or a server."""
    sys.path.insert(0, str(ROOT))
    from app.main import create_app
    from app.settings import Settings

    settings = Settings(
        DATABASE_URL="sqlite://",  # type: ignore[call-arg]
        environment="test",
        secret_key="api-doc-generation-needs-no-real-secret-key",
        webhook_poll_seconds=0,
    )
    return create_app(settings).openapi()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md differs")
    args = parser.parse_args(argv)
    text = render(openapi_document())
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print("docs/api.md is out of date: run python scripts/make_api_doc.py")
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
