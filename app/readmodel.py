"""What every read model shares: frozen, read from the tables' attributes, and timestamps
written as the API has always written them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, PlainSerializer, WithJsonSchema

#: A timestamp as the API has always written it: ``datetime.isoformat()`` (``+00:00``, not
#: ``Z``); a ``datetime`` for the pages, which format it themselves.
IsoDateTime = Annotated[
    datetime,
    PlainSerializer(lambda value: value.isoformat(), return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


def absent_when_none(value: object) -> bool:
    """For ``Field(exclude_if=...)``: a field that the JSON leaves out rather than writing null
    (an optional part of a report, as the API has always answered it)."""
    return value is None


class ReadModel(BaseModel):
    """A read model: what a service answers, the API declares and a page renders. Frozen:
    a face shows it, never changes it."""

    model_config = ConfigDict(frozen=True, from_attributes=True)


T = TypeVar("T")


class PageOf(BaseModel, Generic[T]):
    """One page of a list, the API's list shape: ``{"items": [...], "total": N}`` where
    ``total`` counts every item of the list, not just this page's."""

    model_config = ConfigDict(frozen=True)

    items: list[T]
    total: int


def paged(items: Sequence[T], page: int, per_page: int) -> PageOf[T]:
    """One page of an in-memory list, in the API's list shape."""
    start = (page - 1) * per_page
    return PageOf[T](items=list(items[start : start + per_page]), total=len(items))
