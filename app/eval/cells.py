"""Text cells for the CSV files the product writes, made safe to open in a spreadsheet.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by
Excel, LibreOffice and Google Sheets as a formula (CSV injection): a reviewer's note
``=HYPERLINK(...)`` would run in a lead's spreadsheet. As OWASP advises, such a text cell is
written with a leading ``'``, which spreadsheets show as text and do not keep as part of the
value; numbers stay numbers. JSON and JSONL keep the raw text (programs read them).
"""

from __future__ import annotations

from typing import Any

#: The first characters that make a spreadsheet read a cell as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(text: str) -> str:
    """``text`` for a CSV cell: prefixed with ``'`` when a spreadsheet would run it."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def spreadsheet_cell(value: Any) -> Any:
    """A CSV cell: None as empty, text made safe (``spreadsheet_text``), numbers unchanged."""
    if value is None:
        return ""
    if isinstance(value, str):
        return spreadsheet_text(value)
    return value
