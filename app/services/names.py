"""Names that leave the product (golden-set, run and token names, causes, export targets):
one check, used by every service that takes one, so the API, the forms and the CLI refuse the
same names the same way.

These names reach issue titles, HTTP headers, URLs, file names and log lines, where a control
character splits a header or a log line, and a bidirectional override makes a title read
differently from what it says. Any other Unicode is welcome.
"""

from __future__ import annotations

import unicodedata

from app.services.errors import Invalid

#: Bidirectional embeddings, overrides and isolates, and the invisible direction marks.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
#: Unicode categories refused: control (C0, DEL, C1), line and paragraph separators, and
#: surrogates (a JSON body can carry a lone one; no encoder downstream accepts it).
REFUSED_CATEGORIES = frozenset({"Cc", "Zl", "Zp", "Cs"})


def refused_character(value: str) -> tuple[int, str] | None:
    """(position, character) of the first character a name must not contain, or None."""
    for position, char in enumerate(value):
        if char in BIDI_CONTROLS or unicodedata.category(char) in REFUSED_CATEGORIES:
            return position, char
    return None


def check_name(value: str, *, what: str, max_length: int, code: str = "invalid_name") -> str:
    """``value`` without surrounding whitespace, or Invalid (422): empty, longer than
    ``max_length``, or containing a control, separator or bidirectional-control character
    (code ``control_character``, the position and code point in ``details``)."""
    name = value.strip()
    if not name or len(name) > max_length:
        raise Invalid(f"{what} of 1 to {max_length} characters is needed", code=code)
    found = refused_character(name)
    if found is not None:
        position, char = found
        point = f"U+{ord(char):04X}"
        raise Invalid(
            f"{what} must not contain control characters: {point} "
            f"({unicodedata.name(char, 'control')}) at position {position + 1}",
            code="control_character",
            details={"field": what, "position": position + 1, "character": point},
        )
    return name


#: The longest description of a golden set or a run, in characters (a paragraph or two).
MAX_DESCRIPTION = 5_000


def check_description(value: str, *, what: str = "description") -> str:
    """``value`` without surrounding whitespace, or Invalid (422 ``invalid_description``):
    longer than MAX_DESCRIPTION (it is shown on pages and in answers: never a megabyte), or
    holding a NUL byte (no database keeps it in text). Lines and tabs are a description's."""
    text = value.strip()
    if len(text) > MAX_DESCRIPTION:
        raise Invalid(
            f"a {what} of at most {MAX_DESCRIPTION:,} characters is needed (got {len(text):,})",
            code="invalid_description",
        )
    if "\x00" in text:
        raise Invalid(f"the {what} must not contain a NUL byte", code="nul_character")
    return text
