"""The labels of the units under review, as arrays (app/eval/agreement.py measures them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from app.eval.agreement_bootstrap import IntArray

UnitId = int | str
ReviewerId = int | str


@dataclass(frozen=True, slots=True)
class Unit:
    """One miss: its reviewers' labels (``None``: no label) and its final label, if any."""

    unit_id: UnitId
    labels: Mapping[ReviewerId, str | None]
    final: str | None = None


@dataclass(frozen=True, slots=True)
class LabelTable:
    """The labels as arrays: ``matrix[unit, reviewer]`` a category index or -1 (no label),
    ``counts[unit, category]`` labels, ``finals[unit]`` a category index or -1."""

    reviewers: tuple[ReviewerId, ...]
    categories: tuple[str, ...]
    matrix: IntArray
    counts: IntArray
    finals: IntArray


def tabulate(units: Sequence[Unit], categories: Sequence[str]) -> LabelTable:
    """The labels of ``units`` as arrays; reviewers in order of first appearance, causes in
    the order of ``categories`` (the taxonomy), then any other cause found, sorted.

    One pass over the labels in Python (a dashboard asks this of 100,000 units), then numpy.
    """
    reviewer_ids: dict[ReviewerId, int] = {}
    rows: list[int] = []
    columns: list[int] = []
    labels: list[str] = []
    for row, unit in enumerate(units):
        for reviewer, label in unit.labels.items():
            if label is not None:
                rows.append(row)
                columns.append(reviewer_ids.setdefault(reviewer, len(reviewer_ids)))
                labels.append(label)
    finals = [unit.final for unit in units]
    observed = set(labels) | {final for final in finals if final is not None}
    order = tuple(dict.fromkeys([*categories, *sorted(observed - set(categories))]))
    index = {category: position for position, category in enumerate(order)}
    values = np.asarray([index[label] for label in labels], dtype=np.int64)
    matrix = np.full((len(units), len(reviewer_ids)), -1, dtype=np.int64)
    matrix[np.asarray(rows, dtype=np.int64), np.asarray(columns, dtype=np.int64)] = values
    width = max(len(order), 1)
    flat = np.asarray(rows, dtype=np.int64) * width + values
    counts = np.bincount(flat, minlength=len(units) * width).reshape(len(units), width)
    final_index = np.asarray([-1 if f is None else index[f] for f in finals], dtype=np.int64)
    return LabelTable(tuple(reviewer_ids), order, matrix, counts.astype(np.int64), final_index)


def tally(ratings: IntArray) -> dict[int, int]:
    """Units by their number of labels."""
    values, counts = np.unique(ratings, return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts, strict=True)}
