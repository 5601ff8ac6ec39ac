"""A refused request in words for people: one sentence per validation error of FastAPI
(pydantic's ``loc``, ``type``, ``input`` and ``ctx``), built from the field's name and the
kind of error ("The run address must end in a number (got "abc").", "Choose a second run to
compare with."). The pages show these; the JSON API keeps pydantic's details and codes."""

from __future__ import annotations

from collections.abc import Mapping

#: What a field is called on the pages, by its parameter name (path ids name the thing the
#: address leads to).
FIELD_NAMES = {
    "run_id": "run",
    "golden_set_id": "golden set",
    "triage_id": "triage",
    "miss_id": "miss",
    "user_id": "user",
    "token_id": "token",
    "import_id": "upload",
    "a": "first run",
    "b": "second run",
    "k": "k",
    "depth": "depth",
    "qrels": "qrels file",
    "run": "run file",
    "queries": "queries file",
    "corpus": "corpus file",
    "manifest": "manifest file",
    "email": "email address",
    "per_page": "number of rows per page",
    "page": "page number",
}
#: What to do about a missing field, where "X is missing" would not say it.
MISSING = {
    ("query", "a"): "Choose a run to compare.",
    ("query", "b"): "Choose a second run to compare with.",
}
#: Form fields that are files to upload.
FILES = frozenset({"qrels", "run", "queries", "corpus", "manifest"})
#: The longest entered value quoted back.
MAX_QUOTED = 40


def _quoted(value: object) -> str:
    text = str(value)
    if len(text) > MAX_QUOTED:
        text = text[: MAX_QUOTED - 1] + "\N{HORIZONTAL ELLIPSIS}"
    return f'"{text}"'


def _subject(where: str, name: str) -> str:
    """ "The run address" for a path id, "The second run" for a known field, "The value
    “n”" for one the product has no name for."""
    known = FIELD_NAMES.get(name)
    if where == "path":
        return f"The {known or name.removesuffix('_id').replace('_', ' ')} address"
    if known is not None:
        return f"The {known}"
    return f"The value {_quoted(name)}"


def _bound(ctx: Mapping[str, object], key: str) -> str:
    value = ctx.get(key)
    return str(value) if value is not None else "?"


def sentence(error: Mapping[str, object]) -> str:
    """One validation error of FastAPI as a sentence for people."""
    raw_loc = error.get("loc")
    loc = [str(part) for part in raw_loc] if isinstance(raw_loc, (list, tuple)) else []
    where = loc[0] if loc else ""
    name = loc[-1] if len(loc) > 1 else (loc[0] if loc else "")
    kind = str(error.get("type", ""))
    raw_ctx = error.get("ctx")
    ctx: Mapping[str, object] = raw_ctx if isinstance(raw_ctx, Mapping) else {}
    subject = _subject(where, name)
    got = f" (got {_quoted(error['input'])})" if error.get("input") not in (None, "", {}) else ""
    number_word = "end in a number" if where == "path" else "be a whole number"
    if kind == "missing":
        if (where, name) in MISSING:
            return MISSING[(where, name)]
        if name in FILES:
            return f"Choose a {FIELD_NAMES[name]} to upload."
        return f"{subject} is missing: fill it in."
    if kind in ("int_parsing", "int_from_float", "int_type"):
        return f"{subject} must {number_word}{got}."
    if kind in ("float_parsing", "float_type"):
        return f"{subject} must be a number{got}."
    if kind == "greater_than_equal":
        bound = _bound(ctx, "ge")
        if where == "path":
            return f"{subject} must end in a number of {bound} or more{got}."
        return f"{subject} must be {bound} or more{got}."
    if kind == "greater_than":
        return f"{subject} must be more than {_bound(ctx, 'gt')}{got}."
    if kind in ("less_than_equal", "less_than"):
        bound = _bound(ctx, "le" if kind == "less_than_equal" else "lt")
        if kind == "less_than":
            return f"{subject} must be less than {bound}{got}."
        if where == "path":
            return f"{subject} must end in a number of at most {bound}{got}."
        return f"{subject} must be at most {bound}{got}."
    if kind == "string_too_short":
        if str(ctx.get("min_length")) == "1":
            return f"{subject} cannot be empty."
        return f"{subject} must have at least {_bound(ctx, 'min_length')} characters."
    if kind in ("string_too_long", "too_long"):
        limit = _bound(ctx, "max_length")
        unit = "characters" if kind == "string_too_long" else "items"
        return f"{subject} must have at most {limit} {unit}."
    if kind in ("enum", "literal_error"):
        return f"{subject} must be one of {_bound(ctx, 'expected')}{got}."
    if kind in ("bool_parsing", "bool_type"):
        return f"{subject} must be yes or no{got}."
    message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
    return f"{subject} is not valid: {message[:1].lower()}{message[1:]}."
