"""The one error type of the evaluation core: bad input, located."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Input that cannot be evaluated, with the file and line it came from.

    ``str(error)`` is one line a person can act on, e.g.
    ``run.trec, line 12: score 'abc' is not a number (expected: qid Q0 docno rank score tag)``.
    """

    def __init__(self, source: str | Path | None, line: int | None, message: str) -> None:
        self.source = str(source) if source is not None else None
        self.line = line
        self.message = message
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.source or "<input>"
        if self.line is not None:
            where = f"{where}, line {self.line}"
        return f"{where}: {self.message}"

    def as_dict(self) -> dict[str, str | int | None]:
        """The error as data, for JSON error bodies."""
        return {"file": self.source, "line": self.line, "message": self.message}
