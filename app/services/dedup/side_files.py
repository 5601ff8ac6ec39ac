"""A side file of cluster ids as the service reads it: bad input answers 400 naming the
uploaded file (not its temporary path) and the line."""

from __future__ import annotations

from pathlib import Path

from app.eval import InputError
from app.eval.cluster_ids import read_cluster_ids
from app.models import Document, column_width
from app.services.imports.golden_sets import bad_input


def read_side_file(path: Path, name: str) -> dict[str, str]:
    """doc id -> cluster id of the file at ``path`` (uploaded as ``name``)."""
    try:
        return read_cluster_ids(path, max_id_chars=column_width(Document, "doc_id"))
    except InputError as error:
        raise bad_input(error, {str(path): name}) from None
