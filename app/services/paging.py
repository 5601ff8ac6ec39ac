"""Paging: one page of a query's rows and how many there are in all, for the API's lists and
the pages alike, within the limits both faces declare."""

from __future__ import annotations

from typing import Any, TypeVar, TypeVarTuple, overload

from sqlalchemy import func
from sqlmodel import Session, select
from sqlmodel.sql.expression import Select, SelectOfScalar

from app.services.errors import Invalid

#: Rows on a page when the caller does not say.
DEFAULT_PER_PAGE = 50
#: The most rows one page of a list holds (``PerPage`` in app/http/params.py reads it).
MAX_PER_PAGE = 1000

Row = TypeVar("Row")
Columns = TypeVarTuple("Columns")


@overload
def page_rows(
    *, session: Session, query: SelectOfScalar[Row], page: int, per_page: int
) -> tuple[list[Row], int]: ...


@overload
def page_rows(
    *, session: Session, query: Select[*Columns], page: int, per_page: int
) -> tuple[list[tuple[*Columns]], int]: ...


def page_rows(
    *,
    session: Session,
    query: SelectOfScalar[Row] | Select[*Columns],
    page: int,
    per_page: int,
) -> tuple[list[Any], int]:
    """One page of ``query`` (ordered by the caller) and how many rows it has in all: the one
    paging of database rows, for the API's lists and the pages alike."""
    if page < 1 or not 1 <= per_page <= MAX_PER_PAGE:
        raise Invalid(f"page >= 1 and per_page within 1..{MAX_PER_PAGE}", code="invalid_page")
    total = session.exec(select(func.count()).select_from(query.order_by(None).subquery())).one()
    items: list[Any] = list(session.exec(query.offset((page - 1) * per_page).limit(per_page)))
    return items, int(total)
