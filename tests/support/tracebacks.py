"""No unexpected traceback in any server log of the suite: an error the product did not
expect is a defect even when the test's answers look right (a 500 to another client, a
background thread that died, an error page that failed to render).

- In-process apps (TestClient, the services): ``Collector`` keeps every log record that
  carries an exception, from any logger; the suite's autouse fixture fails the test that
  produced one (tests/conftest.py).
- Server processes (``LiveServer``, the demo): ``in_log`` reads the log file when the process
  has stopped.

A test that provokes tracebacks on purpose says so with ``@pytest.mark.tracebacks_expected``
(the fixture), or ``expect_tracebacks=True`` for a server process.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

HEAD = "Traceback (most recent call last):"
#: The line that ends a Python traceback: the exception's type and message.
_LAST_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)?(: .*)?$")


class Collector(logging.Handler):
    """Log records that carry an exception (``exc_info``), whatever their level."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[0] is not None:
            self.records.append(record)

    def summary(self) -> list[str]:
        """Each record as ``logger: message (exception type)``."""
        said = []
        for record in self.records:
            kind = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else "?"
            said.append(f"{record.name}: {record.getMessage()[:200]} ({kind})")
        return said


def in_log(text: str) -> list[str]:
    """Each traceback of a log's text, as its first line after the header and the line that
    names the exception (a JSON log line carrying an ``exception`` field counts too)."""
    found: list[str] = []
    lines = text.splitlines()
    for at, line in enumerate(lines):
        if HEAD not in line:
            continue
        if line.lstrip().startswith("{"):  # a structured log line: the traceback inside it
            found.append(line[:300])
            continue
        ending = next(
            (
                later.strip()
                for later in lines[at + 1 : at + 200]
                if later and not later.startswith(" ") and _LAST_LINE.match(later.strip())
            ),
            "?",
        )
        found.append(ending[:300])
    return found


def check_log(path: Path, *, what: str) -> None:
    """AssertionError naming each traceback of the log file at ``path``."""
    if not path.exists():
        return
    found = in_log(path.read_text(errors="replace"))
    if found:
        raise AssertionError(
            f"{what} logged {len(found)} unexpected traceback(s) ({path}): " + "; ".join(found[:5])
        )
