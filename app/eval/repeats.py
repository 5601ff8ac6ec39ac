"""Repeated documents within a query: the lines that repeat an earlier (qid, doc_id)."""

from __future__ import annotations

import polars as pl

#: Multiplier that spreads query hashes before they are mixed with document hashes.
_MIX = 0x9E3779B97F4A7C15
_LOW_32 = 0xFFFFFFFF


def repeated_lines(frame: pl.DataFrame) -> pl.Series:
    """Positions (``pos``) of the lines that repeat an earlier (qid, doc_id): the first wins.

    A 32-bit hash of the pair finds candidates cheaply (sorting hashes costs far less than a
    hash table of string pairs, and 32 bits take half the memory of 64: a run's peak memory is
    here); only rows whose hash repeats are compared exactly, so a hash collision can never
    drop a line (at seven million lines about six thousand pairs collide, and are compared).
    """
    key = (
        ((pl.col("qid").hash() * _MIX) ^ pl.col("doc_id").hash()) & pl.lit(_LOW_32, pl.UInt64)
    ).cast(pl.UInt32)
    import numpy as np  # here: a command that ranks no run does not load it

    keys = frame.lazy().select(key.alias("key")).collect(engine="streaming").to_series()
    # numpy's sort of 32-bit keys is several times quicker than polars' (SIMD); in place, so
    # that the keys are held twice at most
    ordered = keys.to_numpy()
    del keys
    if not ordered.flags.writeable:
        ordered = ordered.copy()
    ordered.sort()
    # neighbours compared through two views of the sorted keys: no shifted copy
    repeated = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    del ordered
    if not repeated.size:
        return pl.Series("pos", [], dtype=pl.UInt32)
    candidates = (
        frame.lazy()
        .select("qid", "doc_id", "pos")
        .filter(key.is_in(pl.Series(repeated).implode()))
        .collect(engine="streaming")
        .sort("pos")  # the first occurrence is the one kept
    )
    return candidates.filter(~pl.struct("qid", "doc_id").is_first_distinct()).get_column("pos")


def dropped_per_query(frame: pl.DataFrame, dropped: pl.Series) -> dict[str, int]:
    """The number of ``dropped`` lines (by ``pos``) of each query."""
    if not dropped.len():
        return {}  # nothing to look up seven million positions in
    return dict(
        frame.filter(pl.col("pos").is_in(dropped.implode())).group_by("qid").len().iter_rows()
    )
