"""Write docs/api.md, the JSON API contract, from the application's OpenAPI document.

Run from the repository root::

    python scripts/make_api_doc.py          # rewrite docs/api.md
    python scripts/make_api_doc.py --check  # exit 1 if the committed file differs

The conventions every route shares (authentication, the error body, lists) come first, written
here; each operation follows from ``/openapi.json``: its method and path, what it does, its
parameters, its request body, each success status with the fields of its answer, and the error
statuses; the models nested in them follow once each, in a "Schemas" section.
tests/test_api_doc.py keeps the committed file equal to what this script writes, so the document
cannot drift from the code.
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
  (`clusters` at any k; null only where k is deeper than the kept results of a run imported
  before cluster ranks were stored).
- A triage: `{"id", "run_id", "depth", "k", "misses", "counts": {"<cause>": n}, "other",
  "unlabelled", "covered", "closes", "closure": "<sentence>"}`.
- A miss: `{"id", "qid", "doc_id", "grade", "rank", "state", "category", "note", "version",
  "lease_holder", "lease_expires_at", "hint", "covered_by"}`; `rank` is null when the run did
  not return the document. States: `open`, `labelled`, `covered`.
- An export: `{"results": [{"category", "action": "create|update|unchanged", "external_id",
  "url"}], "requests": [...]}` (`requests` on a dry run only, credentials masked).

## Operations
"""


def _anchor(name: str) -> str:
    """The anchor a Markdown renderer gives the heading ``### name`` (GitHub's rule)."""
    return "".join(c for c in name.lower() if c.isalnum() or c in "-_")


def _ref_name(schema: dict[str, Any]) -> str | None:
    """The component a schema stands for: a ``$ref``, or pydantic's ``allOf`` of one ``$ref``."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    parts = schema.get("allOf", [])
    if len(parts) == 1 and "$ref" in parts[0]:
        return str(parts[0]["$ref"]).rsplit("/", 1)[-1]
    return None


class Schemas:
    """The components of the document, and the models the operations refer to by name (each is
    written once, in the "Schemas" section)."""

    def __init__(self, components: dict[str, Any]) -> None:
        self.components = components
        self.named: set[str] = set()

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The schema itself, or the component it refers to."""
        name = _ref_name(schema)
        return self.components.get(name, {}) if name is not None else schema

    def kind(self, schema: dict[str, Any]) -> str:
        """A short human name for a JSON schema: ``integer (>= 1)``, ``string (binary)``,
        ``list of X``, ``one of `a`, `b```, ``X or null``, a link to a named model."""
        name = _ref_name(schema)
        if name is not None:
            target = self.components.get(name, {})
            if "enum" in target:
                return "one of " + ", ".join(f"`{v}`" for v in target["enum"])
            self.named.add(name)
            return f"[`{name}`](#{_anchor(name)})"
        for key in ("anyOf", "oneOf"):
            if key in schema:
                kinds = [self.kind(s) for s in schema[key]]
                real = [k for k in kinds if k != "null"]
                text = " or ".join(real) if real else "null"
                return text + " or null" if len(real) < len(kinds) and real else text
        if "enum" in schema:
            return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
        if "const" in schema:
            return f"`{schema['const']}`"
        kind = schema.get("type", "any JSON value")
        if "contentMediaType" in schema:
            return "file"
        if kind == "array":
            if "prefixItems" in schema:
                return "list of (" + ", ".join(self.kind(s) for s in schema["prefixItems"]) + ")"
            text = "list of " + self.kind(schema.get("items", {}))
            return text + _bounds(schema, ("minItems", "maxItems"))
        if kind == "object" and "properties" not in schema:
            values = schema.get("additionalProperties")
            if isinstance(values, dict) and values:
                keys = self.kind(schema.get("propertyNames", {"type": "string"}))
                return f"map of {keys} to {self.kind(values)}"
            return "object (fields not declared)"
        if schema.get("format") in ("binary", "email", "date-time", "date", "uri"):
            kind = f"{kind} ({schema['format']})"
        return f"{kind}{_bounds(schema)}"

    def fields(self, schema: dict[str, Any]) -> list[str]:
        """A table of an object's fields (what is required, each type, default and meaning)."""
        props = schema.get("properties", {})
        if not props:
            return [f"{self.kind(schema)}.", ""]
        required = set(schema.get("required", []))
        described = any(prop.get("description") for prop in props.values())
        head = "| field | required | type | default |" + (" description |" if described else "")
        lines = [head, "|---" * head.count(" |") + "|"]
        for name, prop in props.items():
            row = (
                f"| `{name}` | {'yes' if name in required else 'no'} | "
                f"{_cell(self.kind(prop))} | {_default(prop.get('default'))} |"
            )
            lines.append(row + (f" {_cell(prop.get('description', ''))} |" if described else ""))
        return [*lines, ""]


_LIMITS = (
    ("minimum", ">= {}"),
    ("maximum", "<= {}"),
    ("exclusiveMinimum", "> {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "min length {}"),
    ("maxLength", "max length {}"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
    ("pattern", "pattern `{}`"),
)


def _bounds(schema: dict[str, Any], only: tuple[str, ...] | None = None) -> str:
    """The limits a schema puts on its value, in brackets: `` (>= 1, <= 1000)``."""
    words = [
        text.format(_number(schema[key]))
        for key, text in _LIMITS
        if key in schema and (only is None or key in only)
    ]
    return f" ({', '.join(words)})" if words else ""


def _number(value: Any) -> Any:
    """``0`` for pydantic's ``0.0`` bound on an integer field."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _default(value: Any) -> str:
    if value is None:
        return ""
    return '`""`' if value == "" else f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _parameters(op: dict[str, Any], schemas: Schemas) -> list[str]:
    params = op.get("parameters", [])
    if not params:
        return []
    lines = ["| parameter | in | required | type | default |", "|---|---|---|---|---|"]
    for p in params:
        schema = p.get("schema", {})
        default = schema.get("default")
        lines.append(
            f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | "
            f"{_cell(schemas.kind(schema))} | "
            f"{_default(default)} |"
        )
    return [*lines, ""]


def _body(op: dict[str, Any], schemas: Schemas) -> list[str]:
    body = op.get("requestBody")
    if not body:
        return []
    lines: list[str] = []
    for media, content in body.get("content", {}).items():
        schema = content.get("schema", {})
        name = _ref_name(schema)
        # Form bodies get a generated name (Body_import_run_...): not worth repeating.
        shown = f" `{name}`" if name and not name.startswith("Body_") else ""
        lines += [f"Request body (`{media}`){shown}:", ""]
        lines += schemas.fields(schemas.resolve(schema))
    return lines


def _responses(op: dict[str, Any], schemas: Schemas) -> list[str]:
    """Each success status with its media types and the fields of its answer; the error
    statuses (one body for all of them, described above) in one line."""
    codes = sorted(op.get("responses", {}).items())
    lines: list[str] = []
    for code, response in codes:
        if code >= "400":
            continue
        description = _cell(response.get("description", "")).replace("``", "`")
        content = response.get("content") or {}
        if not content:
            lines += [f"Answer `{code}`: {description}; no body.", ""]
            continue
        media = ", ".join(f"`{m}`" for m in content)
        json_schema = content.get("application/json", {}).get("schema")
        if not json_schema:
            # Streamed files (CSV, JSON lines) say what they hold in their description.
            note = "" if len(content) > 1 or json_schema is None else "; no schema declared"
            lines += [f"Answer `{code}` ({media}): {description}{note}.", ""]
            continue
        name = _ref_name(json_schema)
        shown = f" `{name}`" if name else ""
        lines += [f"Answer `{code}` ({media}){shown}: {description}.", ""]
        lines += schemas.fields(schemas.resolve(json_schema))
    errors = [code for code, _ in codes if code >= "400"]
    if errors:
        lines += ["Errors: " + ", ".join(errors) + " (the error body).", ""]
    return lines


def _schema_section(schemas: Schemas) -> list[str]:
    """Every model nested in an operation's body or answer, once, with its fields (the models
    those name in turn included)."""
    if not schemas.named:
        return []
    lines = ["## Schemas", ""]
    done: set[str] = set()
    sections: dict[str, list[str]] = {}
    while pending := sorted(schemas.named - done):
        for name in pending:
            done.add(name)
            schema = schemas.components.get(name, {})
            text = [f"### {name}", ""]
            if schema.get("description"):
                text += [" ".join(str(schema["description"]).split()).replace("``", "`"), ""]
            text += schemas.fields(schema)
            sections[name] = text
    for name in sorted(sections):
        lines += sections[name]
    return lines


def render(document: dict[str, Any]) -> str:
    """docs/api.md for an OpenAPI document."""
    schemas = Schemas(document.get("components", {}).get("schemas", {}))
    sections: dict[str, list[str]] = {}
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            tag = (op.get("tags") or ["other"])[0]
            lines = [f"### `{method.upper()} {path}`", ""]
            description = (op.get("description") or op.get("summary") or "").strip()
            if description:
                lines += [" ".join(description.split()).replace("``", "`"), ""]
            lines += _parameters(op, schemas)
            lines += _body(op, schemas)
            lines += _responses(op, schemas)
            sections.setdefault(tag, []).extend(lines)
    out = [HEADER]
    for tag, lines in sections.items():
        out.append(f"## {tag}\n")
        out.append("\n".join(lines))
    schemas.named.discard("ErrorBody")  # described under Conventions
    out.append("\n".join(_schema_section(schemas)))
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
