"""What every read model shares: frozen, read from the tables' attributes, and timestamps
written as the API has always written them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, PlainSerializer, WithJsonSchema

#: A timestamp as the API has always written it: ``datetime.isoformat()`` (``+00:00``, not
#: ``Z``); a ``datetime`` for the pages, which format it themselves.
IsoDateTime = Annotated[
    datetime,
    PlainSerializer(lambda value: value.isoformat(), return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class ReadModel(BaseModel):
    """A read model: what a service answers, the API declares and a page renders. Frozen:
    a face shows it, never changes it."""

    model_config = ConfigDict(frozen=True, from_attributes=True)
