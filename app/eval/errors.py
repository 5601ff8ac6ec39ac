"""The one error type of the evaluation core: bad input, located."""

from __future__ import annotations

import unicodedata
from pathlib import Path

#: The most characters of an offending value an error message shows (the rest is elided).
SHOWN_CHARS = 200
#: A message longer than this is cut: the last guard against echoing an upload back.
MESSAGE_CHARS = 700


def shorten(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr`` of a value for an error message, at most about ``limit`` characters: a 10 MB
    id is shown by its start and its length, never whole."""
    if isinstance(value, str | bytes) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def shorten_name(name: str, limit: int = SHOWN_CHARS) -> str:
    """A file name for a message: its end (which has the extension) when it is too long."""
    return name if len(name) <= limit else "..." + name[-limit:]


def printable_name(name: str) -> str:
    """A file name as people get to see it and as a database keeps it: control characters
    (a NUL, which PostgreSQL refuses, a newline) and lone surrogates become ``?``."""
    return "".join("?" if unicodedata.category(c) in ("Cc", "Cs") else c for c in name)


class InputError(Exception):
    """Input that cannot be evaluated, with the file and line it came from.

    ``str(error)`` is one line a person can act on, e.g.
    ``run.trec, line 12: score 'abc' is not a number (expected: qid Q0 docno rank score tag)``.
    Values in ``message`` go through :func:`shorten`; whatever slips through is cut at
    ``MESSAGE_CHARS``.
    """

    def __init__(self, source: str | Path | None, line: int | None, message: str) -> None:
        self.source = str(source) if source is not None else None
        self.line = line
        if len(message) > MESSAGE_CHARS:
            message = message[:MESSAGE_CHARS] + "..."
        self.message = message
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = shorten_name(self.source) if self.source else "<input>"
        if self.line is not None:
            where = f"{where}, line {self.line}"
        return f"{where}: {self.message}"

    def as_dict(self) -> dict[str, str | int | None]:
        """The error as data, for JSON error bodies."""
        return {"file": self.source, "line": self.line, "message": self.message}
