"""Typed columns from text, with errors that name the line."""

from __future__ import annotations

import polars as pl

from app.eval.errors import InputError, shorten

#: The integers a database column holds (PostgreSQL ``integer``): grades, chunk indexes.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _first_bad(frame: pl.DataFrame, bad: pl.Expr, column: str) -> tuple[int, str, int] | None:
    rows = frame.filter(bad)
    if not rows.height:
        return None
    first = rows.row(0, named=True)
    return int(first["line"]), str(first[column]), rows.height


def _more(count: int) -> str:
    return f" (and {count - 1} more such lines)" if count > 1 else ""


def float_column(frame: pl.DataFrame, column: str, *, source: str, what: str) -> pl.DataFrame:
    """Cast a text column to finite doubles; -0.0 becomes 0.0 so that it ties with 0.0."""
    parsed = pl.col(column).cast(pl.Float64, strict=False)
    found = _first_bad(frame, parsed.is_null(), column)
    if found:
        line, text, count = found
        raise InputError(source, line, f"{what} {shorten(text)} is not a number{_more(count)}")
    found = _first_bad(frame, ~parsed.is_finite(), column)
    if found:
        line, text, count = found
        raise InputError(
            source, line, f"{what} {shorten(text)} is not a finite number{_more(count)}"
        )
    return frame.with_columns(parsed + 0.0)


def int_column(frame: pl.DataFrame, column: str, *, source: str, what: str) -> pl.DataFrame:
    """Cast a text column to 64-bit integers."""
    parsed = pl.col(column).cast(pl.Int64, strict=False)
    found = _first_bad(frame, parsed.is_null(), column)
    if found:
        line, text, count = found
        raise InputError(source, line, f"{what} {shorten(text)} is not an integer{_more(count)}")
    return frame.with_columns(parsed)


def check_range(
    frame: pl.DataFrame,
    column: str,
    *,
    source: str,
    what: str,
    low: int = INT32_MIN,
    high: int = INT32_MAX,
) -> None:
    """Refuse integers outside [low, high] (a database column's range), naming the line."""
    found = _first_bad(frame, ~pl.col(column).is_between(low, high), column)
    if found:
        line, text, count = found
        raise InputError(
            source,
            line,
            f"{what} {shorten(text)} is out of range ({low} to {high}){_more(count)}",
        )


def check_length(frame: pl.DataFrame, column: str, *, limit: int, source: str, what: str) -> None:
    """Refuse values longer than ``limit`` characters (a store's column width), naming the
    line of the first; the value itself is shown cut, never whole."""
    found = _first_bad(frame, pl.col(column).str.len_chars() > limit, column)
    if found:
        line, text, count = found
        raise InputError(
            source,
            line,
            f"{what} {text[:40]!r}... is {len(text)} characters long (at most {limit})"
            + _more(count),
        )
